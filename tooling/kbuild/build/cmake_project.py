"""Generate a kernel's build tree for one variant: CMakeLists.txt and registration.h (and
render_ops, the package's _ops.py that the build stages beside the library).

Everything is written under `<kernel>/.kbuild/<variant>/`, never over the kernel's sources,
and a file is only rewritten when its content changes (so rebuilds stay incremental).
"""

from __future__ import annotations

import sysconfig
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from packaging.version import Version

from kbuild.build import cutlass, extension_name
from kbuild.core import paths
from kbuild.core.errors import KbuildError
from kbuild.model import arch_rules, backends, cmakelang, cuda
from kbuild.model.manifest import KernelSpec, Manifest
from kbuild.model.variants import STABLE_ABI, TorchInstall, Variant

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("kbuild", "templates/project"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
# CMakeLists.txt: every value goes through kbuild.model.cmakelang, and the template refuses any other.
CMAKE_TEMPLATES = TEMPLATES.overlay(finalize=cmakelang.only_arguments)
CMAKE_TEMPLATES.filters.update(
    cmake=cmakelang.argument,
    cmake_option=cmakelang.compile_option,
    cmake_objects=cmakelang.target_objects,
    cmake_variable=cmakelang.variable,
)
COMPILED_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu", ".hip", ".mm", ".metal"}


def ops_name(manifest: Manifest, backend: str, uid: str) -> str:
    """`_<python_name>_<backend>_<uid>`: the namespace, library and metadata id of one build."""
    return f"_{manifest.python_name}_{backend}_{uid}"


@dataclass(frozen=True)
class Cutlass:
    """A kernel's CUTLASS: the CMake variable `kbuild build` sets to its folder, and the dependency."""

    variable: str  # KBUILD_CUTLASS_3_9_ROOT
    dependency: str  # cutlass_3_9

    @property
    def missing(self) -> str:
        """The configure error when the variable is not set (CMake run by hand)."""
        release = cutlass.RELEASES[self.dependency]
        return (
            f"{self.dependency} needs CUTLASS {release}: build with `kbuild build`, which finds it, or configure "
            f"with -D{self.variable}=<a CUTLASS {release} checkout>"
        )


@dataclass
class KernelTarget:
    name: str
    sources: list[str]
    include_dirs: list[str]
    cxx_flags: list[str] = field(default_factory=list)
    device_flags: list[str] = field(default_factory=list)
    uses_torch: bool = False
    cutlass: Cutlass | None = None

    @property
    def target(self) -> str:
        return f"kernel_{self.name}"


@dataclass
class Project:
    """What the generated CMake project builds, with absolute paths."""

    manifest: Manifest
    variant: Variant
    ops_name: str
    build_dir: Path
    digest: str  # of the build's inputs (kbuild.model.inputs.input_digest), computed once per command
    # The local GPUs' capabilities to compile for instead of each kernel's full list; () = the full list.
    gpu_capabilities: tuple[str, ...] = ()
    # One arch per distinct code path of each kernel's sources (CI's compile check), not the full list.
    one_per_code_path: bool = False

    @property
    def generated_dir(self) -> Path:
        return self.build_dir / "generated"

    @property
    def kernels(self) -> list[KernelSpec]:
        """The `[kernel.*]` tables this variant compiles."""
        return arch_rules.kernels_compiled(self.manifest, self.variant)

    @property
    def backend(self) -> backends.Backend:
        return backends.get(self.variant.backend)

    def kernel_archs(self, kernel: KernelSpec) -> list[str]:
        """The archs `kernel` is compiled for in this variant (CUDA: those that run on the local
        GPUs when `gpu_capabilities` names them and the kernel has any; one per code path when
        `one_per_code_path`)."""
        chosen = arch_rules.kernel_archs(self.backend, kernel, self.variant.toolkit, self.gpu_capabilities)
        if self.one_per_code_path:
            return arch_rules.one_per_code_path(self.backend, self.manifest.kernel_dir, kernel, chosen)
        return chosen

    @property
    def archs(self) -> list[str]:
        """The CUDA capabilities or ROCm archs compiled, as metadata.json records them."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the build already warned about dropped ones
            selected = {arch for k in self.kernels for arch in self.kernel_archs(k)}
        return arch_rules.in_order(self.backend, selected)


def _kernel_target(project: Project, kernel: KernelSpec) -> KernelTarget:
    kernel_dir = project.manifest.kernel_dir
    backend = project.backend
    sources = []
    for rel in kernel.src:
        paths.inside(kernel_dir, rel, file=project.manifest.path, what=f"[kernel.{kernel.name}] src")
        path = kernel_dir / rel
        if path.suffix not in COMPILED_SUFFIXES:
            continue  # headers: listed for dependency tracking by the compiler's depfiles
        if backend.hipify and path.suffix == ".cu":
            from kbuild.build import rocm

            hipified = project.generated_dir / "hipified" / Path(rel).with_suffix(".hip")
            paths.real_dir(kernel_dir, hipified.parent.relative_to(kernel_dir))
            rocm.hipify(path, hipified)
            path = hipified
        sources.append(path.as_posix())
    for folder in kernel.include:
        paths.inside(kernel_dir, folder, file=project.manifest.path, what=f"[kernel.{kernel.name}] include")
    include_dirs = [kernel_dir.as_posix(), *((kernel_dir / d).as_posix() for d in kernel.include)]
    dependency = cutlass.dependency(kernel) if backend.cutlass else None
    if not backend.cutlass and any(d.startswith("cutlass_") for d in kernel.depends):
        warnings.warn(
            f"{project.manifest.path}: [kernel.{kernel.name}] depends on CUTLASS, which kbuild provides to CUDA "
            f"and ROCm builds only: the {backend.name} build leaves it out",
            stacklevel=2,
        )
    return KernelTarget(
        name=kernel.name,
        sources=sources,
        include_dirs=include_dirs,
        cxx_flags=list(kernel.cxx_flags),
        device_flags=arch_rules.device_flags(backend, kernel, project.kernel_archs(kernel)),
        uses_torch="torch" in kernel.depends,
        cutlass=None if dependency is None else Cutlass(cutlass.cmake_variable(dependency), dependency),
    )


def _library_include_dirs(backend: backends.Backend) -> list[Path]:
    """Header folders of the libraries installed beside torch that the backend's builds see."""
    return cuda.library_include_dirs() if backend.nvidia_wheel_headers else []


def cxx_standard(torch: TorchInstall) -> int:
    """The C++ standard torch's headers need: C++20 from torch 2.14 on, C++17 before."""
    return 20 if Version(torch.major_minor) >= Version("2.14") else 17


def render_project(project: Project, torch: TorchInstall, *, name_in_binding: bool | None = None) -> dict[str, str]:
    """The generated files of a compiled variant: relative path -> content. name_in_binding:
    extension_name.name_in_binding's answer when the caller has it (None: ask it)."""
    manifest, backend = project.manifest, project.backend
    if manifest.torch is None:
        raise KbuildError("only [torch] kernels are compiled", file=manifest.path)
    kernels = [_kernel_target(project, k) for k in project.kernels]
    kernel_dir = manifest.kernel_dir
    for rel in [*manifest.torch.src, *manifest.torch.include]:
        paths.inside(kernel_dir, rel, file=manifest.path, what="[torch] src/include")
    binding_sources = [(kernel_dir / s).as_posix() for s in manifest.torch.src if Path(s).suffix in COMPILED_SUFFIXES]
    languages = ["CXX"] + ([backend.language] if backend.language != "CXX" else [])
    if name_in_binding is None:
        name_in_binding = extension_name.name_in_binding(manifest) is not None
    target_version = torch_target_version(project.variant)
    cmake = CMAKE_TEMPLATES.get_template(backend.cmake_template).render(
        ops_name=project.ops_name,
        python_name=manifest.python_name,
        cxx_standard=cxx_standard(torch),
        languages=languages,
        common_defines=[backend.define, "_GLIBCXX_USE_CXX11_ABI=1"]
        + ([f"TORCH_TARGET_VERSION={target_version}"] if target_version else []),
        device_language=backend.language,
        torch_include_dirs=[d.as_posix() for d in [*torch.include_dirs, *_library_include_dirs(backend)]],
        torch_libraries=[(torch.library_dir / f"lib{lib}.so").as_posix() for lib in backend.torch_libraries],
        kernels=kernels,
        binding_sources=binding_sources,
        generated_dir=project.generated_dir.as_posix(),
        binding_include_dirs=[kernel_dir.as_posix(), *((kernel_dir / d).as_posix() for d in manifest.torch.include)],
        binding_cxx_flags=manifest.torch.cxx_flags,
        python_include_dir=sysconfig.get_paths()["include"],
        name_in_binding=name_in_binding,
    )
    files = {
        "CMakeLists.txt": cmake,
        "generated/registration.h": render_registration(project.variant, name_in_binding=name_in_binding),
    }
    if not name_in_binding:
        files["generated/extension_name.cpp"] = TEMPLATES.get_template("extension_name.cpp.j2").render(
            ops_name=project.ops_name
        )
    return files


def torch_target_version(variant: Variant) -> str | None:
    """TORCH_TARGET_VERSION of a stable-ABI variant, in torch's format: one byte each for major
    and minor, then zeros (2.10 -> 0x020a000000000000)."""
    if variant.kind != STABLE_ABI or variant.torch is None:
        return None
    major, minor = Version(variant.torch).release[:2]
    return f"0x{major:02x}{minor:02x}000000000000"


def render_registration(variant: Variant, *, name_in_binding: bool) -> str:
    return TEMPLATES.get_template("registration.h.j2").render(
        stable_abi=variant.kind == STABLE_ABI, name_in_binding=name_in_binding
    )


def render_ops(ops_name: str, *, compiled: bool) -> str:
    return TEMPLATES.get_template("_ops.py.j2").render(ops_name=ops_name, compiled=compiled)


def write_project(project: Project, torch: TorchInstall, log: Callable[[str], None] | None = None) -> list[Path]:
    """Write the generated files into the build tree (real folders only: a symlink on the
    way is replaced, never followed); return those that changed. With `log`, say when the binding
    has to be compiled with the namespace."""
    kernel_dir = project.manifest.kernel_dir
    build_dir = paths.real_dir(kernel_dir, project.build_dir.relative_to(kernel_dir))
    changed = []
    reason = extension_name.name_in_binding(project.manifest)
    if reason and log is not None:
        log(f"kbuild: {reason}: the binding is compiled with the namespace and recompiles on every source edit")
    for rel, content in render_project(project, torch, name_in_binding=reason is not None).items():
        if paths.write_file(build_dir, rel, content.encode()):
            changed.append(build_dir / rel)
    return changed
