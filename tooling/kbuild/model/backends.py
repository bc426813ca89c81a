"""The backends kbuild knows, one record each: everything the other modules would otherwise
decide by comparing a backend's name.

To add a backend: add its record to ALL below, write its CMake fragment
`templates/project/backends/<name>.cmake.j2` (for a compiled one), and add tests
(README.md, "Adding a backend", walks through it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from kbuild.core.errors import KbuildError
from kbuild.model import code_paths, cuda

if TYPE_CHECKING:
    from kbuild.model.manifest import KernelSpec, Manifest

_TORCH_LIBRARIES = ("c10", "torch", "torch_cpu")


def _no_archs(kernel: KernelSpec, toolkit: str | None, gpus: tuple[str, ...]) -> list[str]:
    return []


def _no_flags(kernel: KernelSpec, archs: list[str]) -> list[str]:
    return []


def _no_include_dirs() -> list[Path]:
    return []


def _no_ci_archs(kernel: KernelSpec, toolkit: str) -> list[str] | None:
    return []


@dataclass(frozen=True)
class Backend:
    name: str
    title: str  # as the docs and messages write it: CUDA, ROCm, ...
    # Compile definition of every source of its builds (CPU_KERNEL, CUDA_KERNEL, ...).
    define: str | None = None
    # CMake language of its device sources; CXX adds none to the project's languages.
    language: str = "CXX"
    torch_libraries: tuple[str, ...] = _TORCH_LIBRARIES
    # Whether [kernel.*] tables may compile for it; False: noarch kernels only (experimental).
    compiled: bool = True
    # The build.toml key ([kernel.*] and [torch-noarch]) listing the archs it compiles for.
    archs_key: str | None = None
    # The archs one kernel compiles for, given the variant's toolkit and the local GPUs' archs.
    archs: Callable[[KernelSpec, str | None, tuple[str, ...]], list[str]] = _no_archs
    # How its archs sort in metadata.json.
    arch_key: Callable[[str], tuple[Version | str, str]] = lambda arch: (arch, arch)
    # Device compiler flags of one kernel compiled for `archs`.
    device_flags: Callable[[KernelSpec, list[str]], list[str]] = _no_flags
    extra_include_dirs: Callable[[], list[Path]] = _no_include_dirs
    # The archs CI builds one kernel for with a toolkit of data/variants.toml; None: no job for that toolkit.
    ci_archs: Callable[[KernelSpec, str], list[str] | None] = _no_ci_archs
    # Set when kbuild knows the archs each toolkit builds (data/variants.toml must not list them): why.
    own_toolkit_archs: str | None = None
    # The [general] bounds of the toolkit versions a kernel builds with, e.g. [general.cuda] minver/maxver.
    toolkit_bounds: Callable[[Manifest], tuple[str | None, str | None]] | None = None
    # Its kernels get the CUTLASS headers of a `cutlass_X_Y` dependency.
    cutlass: bool = False
    # Its .cu sources are hipified before compiling.
    hipify: bool = False
    # The archs of this machine's GPUs, for a build compiled for them only; None: no such build.
    local_gpus: Callable[[], tuple[str, ...]] | None = None
    # Of one kernel's archs, one per distinct code path of its sources (what CI compiles); None: all.
    code_path_archs: Callable[[Path, KernelSpec, list[str]], list[str]] | None = None
    # The CMake variable naming its device compiler, and the program looked up on PATH for it.
    compiler: tuple[str, str] | None = None
    # Variant tag: prefix and digits of the toolkit in the name (cu130, rocm71, xpu20260); None: the name.
    tag: str | None = None
    tag_digits: str = ""
    # How many digits of the tag are the toolkit's major version; None: all but the last.
    tag_major_digits: int | None = None
    # The TorchInstall field that is set when torch was built for it, and whether it holds the toolkit version.
    torch_field: str | None = None
    torch_field_is_toolkit: bool = False
    # The sys.platform whose torch builds for it when no torch_field says otherwise.
    torch_platform: str | None = None
    # Files `kbuild init` writes for it: kernel-relative path (with {name}, the Python name) -> template.
    scaffold: tuple[tuple[str, str], ...] = ()
    scaffold_default: bool = False

    @property
    def cmake_template(self) -> str:
        """Its CMake fragment under templates/project (it extends CMakeLists.txt.j2)."""
        return f"backends/{self.name}.cmake.j2"

    def toolkit_from_tag(self, digits: str) -> str:
        major = self.tag_major_digits if self.tag_major_digits is not None else len(digits) - 1
        return f"{digits[:major]}.{digits[major:]}"


def _cuda_archs(kernel: KernelSpec, toolkit: str | None, gpus: tuple[str, ...]) -> list[str]:
    listed = cuda.select_capabilities(kernel.name, kernel.cuda_capabilities, toolkit or "")
    return cuda.running_on(listed, gpus) or listed


def _cuda_flags(kernel: KernelSpec, archs: list[str]) -> list[str]:
    flags = [*cuda.TORCH_NVCC_FLAGS, *cuda.TORCH_CMAKE_NVCC_FLAGS, *cuda.KERNEL_BUILDER_NVCC_FLAGS]
    for cap in archs:
        flags += cuda.gencode_flags(cap)
    return flags + cuda.threads_flags(len(archs), kernel.cuda_flags) + kernel.cuda_flags


def _cuda_ci_archs(kernel: KernelSpec, toolkit: str) -> list[str] | None:
    buildable = cuda.toolkit_archs(toolkit)
    listed = kernel.cuda_capabilities or cuda.default_capabilities(toolkit)
    return [arch for arch in listed if cuda.capability_base(arch) in buildable] or None


def _cuda_arch_key(cap: str) -> tuple[Version | str, str]:
    return (Version(cuda.capability_base(cap)), cap)


DEVICE_SCAFFOLD = (("{name}_cuda/{name}.cu", "cuda.cu.j2"),)

# torch's device type for the GPUs of every GPU backend here (ROCm builds of torch call theirs
# "cuda" too): what model code passes as `device`.
GPU_DEVICE = "cuda"

CPU = Backend(
    "cpu",
    "CPU",
    define="CPU_KERNEL",
    scaffold=(("{name}_cpu/{name}_cpu.cpp", "cpu.cpp.j2"),),
    scaffold_default=True,
)
CUDA = Backend(
    "cuda",
    "CUDA",
    define="CUDA_KERNEL",
    language="CUDA",
    torch_libraries=(*_TORCH_LIBRARIES, "c10_cuda", "torch_cuda"),
    archs_key="cuda_capabilities",
    archs=_cuda_archs,
    arch_key=_cuda_arch_key,
    device_flags=_cuda_flags,
    extra_include_dirs=cuda.library_include_dirs,
    ci_archs=_cuda_ci_archs,
    own_toolkit_archs="the capabilities each CUDA toolkit builds are kbuild's own (kbuild/cuda.py)",
    toolkit_bounds=lambda manifest: (manifest.general.cuda_minver, manifest.general.cuda_maxver),
    cutlass=True,
    local_gpus=cuda.local_gpu_capabilities,
    code_path_archs=code_paths.one_per_code_path,
    compiler=("CMAKE_CUDA_COMPILER", "nvcc"),
    tag="cu",
    tag_digits=r"\d{3,}",
    torch_field="cuda",
    torch_field_is_toolkit=True,
    scaffold=DEVICE_SCAFFOLD,
    scaffold_default=True,
)
METAL = Backend("metal", "Metal", define="METAL_KERNEL", language="OBJCXX", torch_platform="darwin")
ROCM = Backend(
    "rocm",
    "ROCm",
    define="ROCM_KERNEL",
    language="HIP",
    torch_libraries=(*_TORCH_LIBRARIES, "c10_hip", "torch_hip"),
    archs_key="rocm_archs",
    archs=lambda kernel, toolkit, gpus: list(kernel.rocm_archs),
    device_flags=lambda kernel, archs: [f"--offload-arch={arch}" for arch in archs] + kernel.hip_flags,
    ci_archs=lambda kernel, toolkit: list(kernel.rocm_archs),
    cutlass=True,
    hipify=True,
    tag="rocm",
    tag_digits=r"\d{2,}",
    torch_field="hip",
    torch_field_is_toolkit=True,
    scaffold=DEVICE_SCAFFOLD,
)
XPU = Backend(
    "xpu",
    "XPU",
    define="XPU_KERNEL",
    torch_libraries=(*_TORCH_LIBRARIES, "c10_xpu", "torch_xpu"),
    device_flags=lambda kernel, archs: list(kernel.sycl_flags),
    tag="xpu",
    tag_digits=r"\d{5,}",
    tag_major_digits=4,
    torch_field="xpu",
)
# Experimental: build.toml accepts them for noarch kernels; kbuild compiles nothing for them.
CANN = Backend("cann", "CANN", compiled=False)
NEURON = Backend("neuron", "Neuron", compiled=False)
TPU = Backend("tpu", "TPU", compiled=False)

# Compiled backends first, each group by name: the order build.toml's error messages list them in.
ALL = (CPU, CUDA, METAL, ROCM, XPU, CANN, NEURON, TPU)
BY_NAME = {backend.name: backend for backend in ALL}
COMPILED = tuple(b.name for b in ALL if b.compiled)
EXPERIMENTAL = tuple(b.name for b in ALL if not b.compiled)
SCAFFOLDED = tuple(b.name for b in ALL if b.scaffold)
SCAFFOLD_DEFAULT = tuple(b.name for b in ALL if b.scaffold_default)
# The variant tags of compiled backends, as one regex alternative (cpu|metal|cu\d{3,}|...).
TAG_PATTERN = "|".join(re.escape(b.tag) + b.tag_digits if b.tag else re.escape(b.name) for b in ALL if b.compiled)


def get(name: str) -> Backend:
    """The record of backend `name` (a name build.toml accepted)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KbuildError(f"`{name}` is not a backend", fix=f"use one of {', '.join(BY_NAME)}") from None


def from_tag(tag: str) -> tuple[str, str | None]:
    """A variant name's compute tag -> (backend, toolkit): 'cu130' -> ('cuda', '13.0')."""
    for backend in (b for b in ALL if b.compiled):
        if backend.tag is None and tag == backend.name:
            return backend.name, None
        if backend.tag and re.fullmatch(re.escape(backend.tag) + backend.tag_digits, tag):
            return backend.name, backend.toolkit_from_tag(tag[len(backend.tag) :])
    raise KbuildError(f"`{tag}` is not a backend's variant tag", fix=f"use one of {TAG_PATTERN}")
