"""Generate a kernel's build tree for one variant: CMakeLists.txt, registration.h, _ops.py.

Everything is written under `<kernel>/.kbuild/<variant>/`, never over the kernel's sources,
and a file is only rewritten when its content changes (so rebuilds stay incremental).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from kbuild import paths
from kbuild.errors import KbuildError
from kbuild.manifest import KernelSpec, Manifest
from kbuild.variants import STABLE_ABI, TorchInstall, Variant

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("kbuild", "templates/project"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
BACKEND_DEFINES = {
    "cpu": "CPU_KERNEL",
    "cuda": "CUDA_KERNEL",
    "rocm": "ROCM_KERNEL",
    "metal": "METAL_KERNEL",
    "xpu": "XPU_KERNEL",
}
DEVICE_LANGUAGES = {"cuda": "CUDA", "rocm": "HIP", "metal": "OBJCXX", "xpu": "CXX"}
COMPILED_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu", ".hip", ".mm", ".metal"}
TORCH_LIBRARIES = {
    "cpu": ["c10", "torch", "torch_cpu"],
    "cuda": ["c10", "torch", "torch_cpu", "c10_cuda", "torch_cuda"],
}
TORCH_LIBRARIES.update(
    rocm=["c10", "torch", "torch_cpu", "c10_hip", "torch_hip"],
    xpu=["c10", "torch", "torch_cpu", "c10_xpu", "torch_xpu"],
    metal=TORCH_LIBRARIES["cpu"],
)


def ops_name(manifest: Manifest, backend: str, uid: str) -> str:
    """`_<python_name>_<backend>_<uid>`: the namespace, library and metadata id of one build."""
    return f"_{manifest.python_name}_{backend}_{uid}"


def cuda_gencode(capability: str) -> list[str]:
    """'9.0a' -> -gencode for sm_90a; '10.0+PTX' also embeds PTX for compute_100."""
    ptx = capability.endswith("+PTX")
    number = capability.removesuffix("+PTX").replace(".", "")
    codes = f"[sm_{number},compute_{number}]" if ptx else f"sm_{number}"
    return [f"-gencode=arch=compute_{number},code={codes}"]


@dataclass
class KernelTarget:
    name: str
    sources: list[str]
    include_dirs: list[str]
    cxx_flags: list[str] = field(default_factory=list)
    device_flags: list[str] = field(default_factory=list)
    uses_torch: bool = False


@dataclass
class Project:
    """What the generated CMake project builds, with absolute paths."""

    manifest: Manifest
    variant: Variant
    ops_name: str
    build_dir: Path

    @property
    def generated_dir(self) -> Path:
        return self.build_dir / "generated"

    @property
    def archs(self) -> list[str]:
        kernels = self.manifest.kernels_for(self.variant.backend)
        if self.variant.backend == "cuda":
            return sorted({cap for k in kernels for cap in k.cuda_capabilities})
        if self.variant.backend == "rocm":
            return sorted({arch for k in kernels for arch in k.rocm_archs})
        return []


def cutlass_include_dirs(kernel: KernelSpec) -> list[Path]:
    """Headers of the `nvidia-cutlass` PyPI package for a `cutlass_X_Y` dependency."""
    wanted = [d for d in kernel.depends if d.startswith("cutlass_")]
    if not wanted:
        return []
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise KbuildError(
            f"[kernel.{kernel.name}] depends on {wanted[0]}, but the nvidia-cutlass package is not installed",
            fix=f"pip install 'nvidia-cutlass=={wanted[0][8:].replace('_', '.')}.*'",
        )
    installed = importlib.metadata.version("nvidia-cutlass")
    required = wanted[0][len("cutlass_") :].replace("_", ".")
    if ".".join(installed.split(".")[:2]) != required:
        raise KbuildError(
            f"[kernel.{kernel.name}] depends on {wanted[0]}, but nvidia-cutlass {installed} is installed",
            fix=f"pip install 'nvidia-cutlass=={required}.*'",
        )
    root = Path(spec.origin).parent / "source"
    return [root / "include", root / "tools" / "util" / "include"]


def _kernel_target(project: Project, kernel: KernelSpec) -> KernelTarget:
    kernel_dir = project.manifest.kernel_dir
    backend = project.variant.backend
    sources = []
    for rel in kernel.src:
        paths.inside(kernel_dir, rel, file=project.manifest.path, what=f"[kernel.{kernel.name}] src")
        path = kernel_dir / rel
        if path.suffix not in COMPILED_SUFFIXES:
            continue  # headers: listed for dependency tracking by the compiler's depfiles
        if backend == "rocm" and path.suffix == ".cu":
            from kbuild import rocm

            hipified = project.generated_dir / "hipified" / Path(rel).with_suffix(".hip")
            paths.real_dir(kernel_dir, hipified.parent.relative_to(kernel_dir))
            rocm.hipify(path, hipified)
            path = hipified
        sources.append(path.as_posix())
    for folder in kernel.include:
        paths.inside(kernel_dir, folder, file=project.manifest.path, what=f"[kernel.{kernel.name}] include")
    include_dirs = [kernel_dir.as_posix(), *((kernel_dir / d).as_posix() for d in kernel.include)]
    include_dirs += [d.as_posix() for d in cutlass_include_dirs(kernel)]
    device_flags: list[str] = []
    if backend == "cuda":
        for cap in kernel.cuda_capabilities:
            device_flags += cuda_gencode(cap)
        device_flags += kernel.cuda_flags
    elif backend == "rocm":
        device_flags += [f"--offload-arch={arch}" for arch in kernel.rocm_archs] + kernel.hip_flags
    elif backend == "xpu":
        device_flags += kernel.sycl_flags
    return KernelTarget(
        name=kernel.name,
        sources=sources,
        include_dirs=include_dirs,
        cxx_flags=list(kernel.cxx_flags),
        device_flags=device_flags,
        uses_torch="torch" in kernel.depends,
    )


def cxx_standard(torch: TorchInstall) -> int:
    """The C++ standard torch's headers need: C++20 from torch 2.14 on, C++17 before."""
    major, minor = (int(part) for part in torch.major_minor.split("."))
    return 20 if (major, minor) >= (2, 14) else 17


def render_project(project: Project, torch: TorchInstall) -> dict[str, str]:
    """The generated files of a compiled variant: relative path -> content."""
    manifest, backend = project.manifest, project.variant.backend
    if manifest.torch is None:
        raise KbuildError("only [torch] kernels are compiled", file=manifest.path)
    kernels = [_kernel_target(project, k) for k in manifest.kernels_for(backend)]
    kernel_dir = manifest.kernel_dir
    for rel in [*manifest.torch.src, *manifest.torch.include]:
        paths.inside(kernel_dir, rel, file=manifest.path, what="[torch] src/include")
    binding_sources = [(kernel_dir / s).as_posix() for s in manifest.torch.src if Path(s).suffix in COMPILED_SUFFIXES]
    languages = ["CXX"] + ([DEVICE_LANGUAGES[backend]] if backend in ("cuda", "rocm", "metal") else [])
    cmake = TEMPLATES.get_template("CMakeLists.txt.j2").render(
        manifest_path=manifest.path,
        ops_name=project.ops_name,
        python_name=manifest.python_name,
        cxx_standard=cxx_standard(torch),
        languages=languages,
        backend=backend,
        backend_define=BACKEND_DEFINES[backend],
        device_language=DEVICE_LANGUAGES.get(backend, "CXX"),
        torch_include_dirs=[d.as_posix() for d in torch.include_dirs],
        torch_libraries=[(torch.library_dir / f"lib{lib}.so").as_posix() for lib in TORCH_LIBRARIES[backend]],
        kernels=kernels,
        binding_sources=binding_sources,
        generated_dir=project.generated_dir.as_posix(),
        binding_include_dirs=[kernel_dir.as_posix(), *((kernel_dir / d).as_posix() for d in manifest.torch.include)],
        binding_cxx_flags=manifest.torch.cxx_flags,
        python_include_dir=sysconfig.get_paths()["include"],
    )
    return {
        "CMakeLists.txt": cmake,
        "generated/registration.h": render_registration(manifest, project.variant),
        "generated/_ops.py": render_ops(project.ops_name, compiled=True),
    }


def render_registration(manifest: Manifest, variant: Variant) -> str:
    stable = variant.kind == STABLE_ABI or bool(manifest.torch and manifest.torch.stable_abi_for(variant.backend))
    return TEMPLATES.get_template("registration.h.j2").render(stable_abi=stable)


def render_ops(ops_name: str, *, compiled: bool) -> str:
    return TEMPLATES.get_template("_ops.py.j2").render(ops_name=ops_name, compiled=compiled)


def write_project(project: Project, torch: TorchInstall) -> list[Path]:
    """Write the generated files into the build tree (real folders only: a symlink on the
    way is replaced, never followed); return those that changed."""
    kernel_dir = project.manifest.kernel_dir
    build_dir = paths.real_dir(kernel_dir, project.build_dir.relative_to(kernel_dir))
    changed = []
    for rel, content in render_project(project, torch).items():
        if paths.write_file(build_dir, rel, content.encode()):
            changed.append(build_dir / rel)
    return changed
