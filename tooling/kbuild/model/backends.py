"""The backends kbuild knows, one record each, as data: everything the other modules would otherwise
decide by comparing a backend's name.

To add a backend: add its record to ALL below and, for a compiled one, write its CMake fragment
`templates/project/backends/<name>.cmake.j2` (README.md, "Adding a backend", walks through it;
tooling/tests/test_backends.py adds a backend of its own that way). Every view of the registry
(the names build.toml accepts, the variant tags, ...) is computed from ALL when it is asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbuild.core.errors import KbuildError
from kbuild.model import cuda

_TORCH_LIBRARIES = ("c10", "torch", "torch_cpu")


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
    # Its CMake fragment under templates/project (it extends CMakeLists.txt.j2); None: backends/<name>.cmake.j2.
    fragment: str | None = None

    # build.toml. The field ([kernel.*] and [torch-noarch]) listing the archs it compiles for, the
    # [kernel.*] field of its device compiler's flags, and the other [kernel.*] fields only its kernels take.
    archs_key: str | None = None
    flags_key: str | None = None
    other_kernel_keys: tuple[str, ...] = ()
    # The names [general.<name>] python-depends takes besides the general ones.
    python_depends: tuple[str, ...] = ()
    # What users write for it instead of its name, and the vendor of its GPUs (messages of build.toml).
    aliases: tuple[str, ...] = ()
    vendor: str | None = None

    # Device compiler flags of a kernel: `device_flags`, then `arch_flag` once per arch ({arch} is
    # replaced), then the kernel's own (`flags_key`).
    device_flags: tuple[str, ...] = ()
    arch_flag: str | None = None
    # Its archs are CUDA capabilities (kbuild.model.cuda, kbuild.model.archs): each toolkit builds
    # its own list of them (data/cuda_capabilities.toml) and a kernel without one gets the toolkit's
    # default; a local build compiles those of the machine's GPUs, CI's compile check one per code
    # path of the sources; nvcc gets one -gencode per capability and a --threads count.
    cuda_capabilities: bool = False
    # Its builds also see the headers of the NVIDIA library wheels installed (cuBLAS, ...: torch's
    # CUDA headers include them).
    nvidia_wheel_headers: bool = False
    # Its kernels get the CUTLASS headers of a `cutlass_X_Y` dependency.
    cutlass: bool = False
    # Its .cu sources are hipified before compiling.
    hipify: bool = False
    # The CMake variable naming its device compiler, and the program looked up on PATH for it.
    compiler: tuple[str, str] | None = None

    # Variant tag: prefix and digits of the toolkit in the name (cu130, rocm71, xpu20260); None: the name.
    tag: str | None = None
    tag_digits: str = ""
    # How many digits of the tag are the toolkit's major version; None: all but the last.
    tag_major_digits: int | None = None
    # The field of torch/version.py that is set when torch was built for it, and whether it holds the
    # toolkit version (`cuda = "13.0"`).
    torch_field: str | None = None
    torch_field_is_toolkit: bool = False
    # The sys.platform whose torch builds for it when no torch_field says otherwise.
    torch_platform: str | None = None

    # Files `kbuild init` writes for it: kernel-relative path (with {name}, the Python name) -> template.
    scaffold: tuple[tuple[str, str], ...] = ()
    scaffold_default: bool = False

    @property
    def cmake_template(self) -> str:
        return self.fragment or f"backends/{self.name}.cmake.j2"

    @property
    def kernel_keys(self) -> tuple[str, ...]:
        """The [kernel.*] fields that only its kernels take."""
        return tuple(key for key in (self.archs_key, self.flags_key) if key) + self.other_kernel_keys

    def toolkit_from_tag(self, digits: str) -> str:
        major = self.tag_major_digits if self.tag_major_digits is not None else len(digits) - 1
        return f"{digits[:major]}.{digits[major:]}"


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
    flags_key="cuda_flags",
    other_kernel_keys=("cuda_minver",),
    python_depends=("nvidia-cutlass-dsl",),
    aliases=("nvidia",),
    vendor="NVIDIA",
    device_flags=(*cuda.TORCH_NVCC_FLAGS, *cuda.TORCH_CMAKE_NVCC_FLAGS, *cuda.KERNEL_BUILDER_NVCC_FLAGS),
    cuda_capabilities=True,
    nvidia_wheel_headers=True,
    cutlass=True,
    compiler=("CMAKE_CUDA_COMPILER", "nvcc"),
    tag="cu",
    tag_digits=r"\d{3,}",
    torch_field="cuda",
    torch_field_is_toolkit=True,
    scaffold=DEVICE_SCAFFOLD,
    scaffold_default=True,
)
METAL = Backend(
    "metal",
    "Metal",
    define="METAL_KERNEL",
    language="OBJCXX",
    aliases=("mps", "apple"),
    vendor="Apple",
    torch_platform="darwin",
)
ROCM = Backend(
    "rocm",
    "ROCm",
    define="ROCM_KERNEL",
    language="HIP",
    torch_libraries=(*_TORCH_LIBRARIES, "c10_hip", "torch_hip"),
    archs_key="rocm_archs",
    flags_key="hip_flags",
    aliases=("amd", "hip"),
    vendor="AMD",
    arch_flag="--offload-arch={arch}",
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
    flags_key="sycl_flags",
    python_depends=("onednn",),
    aliases=("intel", "sycl"),
    vendor="Intel",
    tag="xpu",
    tag_digits=r"\d{5,}",
    tag_major_digits=4,
    torch_field="xpu",
)
# Experimental: build.toml accepts them for noarch kernels; kbuild compiles nothing for them.
CANN = Backend("cann", "CANN", compiled=False)
NEURON = Backend("neuron", "Neuron", compiled=False, python_depends=("nki",))
TPU = Backend("tpu", "TPU", compiled=False)

# Compiled backends first, each group by name: the order build.toml's error messages list them in.
ALL = (CPU, CUDA, METAL, ROCM, XPU, CANN, NEURON, TPU)


def by_name() -> dict[str, Backend]:
    return {backend.name: backend for backend in ALL}


def names() -> tuple[str, ...]:
    """Every backend build.toml accepts: the compiled ones, then the experimental ones."""
    return compiled() + experimental()


def compiled() -> tuple[str, ...]:
    return tuple(b.name for b in ALL if b.compiled)


def experimental() -> tuple[str, ...]:
    return tuple(b.name for b in ALL if not b.compiled)


def scaffolded() -> tuple[str, ...]:
    return tuple(b.name for b in ALL if b.scaffold)


def scaffold_default() -> tuple[str, ...]:
    return tuple(b.name for b in ALL if b.scaffold_default)


def get(name: str) -> Backend:
    """The record of backend `name` (a name build.toml accepted)."""
    try:
        return by_name()[name]
    except KeyError:
        raise KbuildError(f"`{name}` is not a backend", fix=f"use one of {', '.join(names())}") from None


def owner_of(kernel_key: str) -> Backend | None:
    """The backend whose kernels alone take the [kernel.*] field `kernel_key` (None: every backend's do)."""
    return next((b for b in ALL if kernel_key in b.kernel_keys), None)


def meant() -> dict[str, str]:
    """Words users write for a backend (`gpu`, `nvidia`, `hip`), each with what they mean by it."""
    # The GPUs of any OS first, then those of one OS (Apple's).
    vendors = sorted((b for b in ALL if b.vendor), key=lambda b: b.torch_platform is not None)
    gpus = ", ".join(f"{b.name} ({b.vendor})" for b in vendors)
    words = {"gpu": f"GPU backends are named by platform: {gpus}"}
    words.update((alias, f"did you mean `{b.name}`?") for b in ALL for alias in b.aliases)
    return words


def tag_pattern() -> str:
    """The variant tags of compiled backends, as one regex alternative (cpu|metal|cu\\d{3,}|...)."""
    return "|".join(re.escape(b.tag) + b.tag_digits if b.tag else re.escape(b.name) for b in ALL if b.compiled)


def from_tag(tag: str) -> tuple[str, str | None]:
    """A variant name's compute tag -> (backend, toolkit): 'cu130' -> ('cuda', '13.0')."""
    for backend in (b for b in ALL if b.compiled):
        if backend.tag is None and tag == backend.name:
            return backend.name, None
        if backend.tag and re.fullmatch(re.escape(backend.tag) + backend.tag_digits, tag):
            return backend.name, backend.toolkit_from_tag(tag[len(backend.tag) :])
    raise KbuildError(f"`{tag}` is not a backend's variant tag", fix=f"use one of {tag_pattern()}")
