"""What a CUDA build adds to a kernel's own settings, as kernel-builder does: torch's nvcc
flags, nvcc's thread count and -gencode flags, the capability lists of a toolkit (default and
filter, data/cuda_capabilities.toml), the capabilities of the local GPUs, and the folders of the
CUDA library headers that torch's headers include.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import warnings
from pathlib import Path

from packaging.version import Version

from kbuild.core.errors import KbuildError
from kbuild.core.tomlcompat import tomllib

# torch.utils.cpp_extension.COMMON_NVCC_FLAGS without the defines that switch off the half and
# bfloat16 operators and conversions (kernel-builder removes those), then kernel-builder's own
# -DENABLE_FP8. The kernel's cuda-flags come after these.
TORCH_NVCC_FLAGS = ("--expt-relaxed-constexpr",)
# What torch's CMake package (Caffe2/public/cuda.cmake) adds to CMAKE_CUDA_FLAGS besides, which
# kernel-builder's CMake project inherits: `__device__` lambdas.
TORCH_CMAKE_NVCC_FLAGS = ("--expt-extended-lambda",)
TORCH_NVCC_FLAGS_DROPPED = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
)
KERNEL_BUILDER_NVCC_FLAGS = ("-DENABLE_FP8",)
# Stands in for the local GPUs' capabilities that a local build compiles for (tests; no GPU).
LOCAL_CAPABILITY = "KBUILD_LOCAL_CAPABILITY"
# nvcc compiles a source's capabilities on this many threads: NVCC_THREADS when set (as
# kernel-builder reads it), else kernel-builder's default of 4.
NVCC_THREADS = "NVCC_THREADS"
DEFAULT_NVCC_THREADS = 4

# The capabilities each toolkit builds, and those a kernel without cuda-capabilities gets.
CAPABILITIES_FILE = Path(__file__).parents[1] / "data" / "cuda_capabilities.toml"
_CAPABILITY = re.compile(r"(?P<base>\d+\.\d+)(?P<suffix>[af]?)(?P<ptx>\+PTX)?")


@functools.cache
def _rows(table: str) -> tuple[tuple[Version, tuple[str, ...]], ...]:
    """The rows of `table` in CAPABILITIES_FILE, newest toolkit first."""
    rows = tomllib.loads(CAPABILITIES_FILE.read_text(encoding="utf-8"))[table]
    found = ((Version(row["since"]), tuple(row["capabilities"])) for row in rows)
    return tuple(sorted(found, key=lambda row: row[0], reverse=True))


def _for_toolkit(table: str, toolkit: str) -> tuple[str, ...]:
    """The capabilities of the newest row of `table` whose toolkit version is at most `toolkit`."""
    version = Version(toolkit)
    return next(capabilities for since, capabilities in _rows(table) if version >= since)


def default_capabilities(toolkit: str) -> list[str]:
    """What kernel-builder builds for a kernel without cuda-capabilities with CUDA `toolkit`."""
    return list(_for_toolkit("default", toolkit))


def toolkit_archs(toolkit: str) -> tuple[str, ...]:
    """The capabilities CUDA `toolkit`'s nvcc builds."""
    return _for_toolkit("builds", toolkit)


def capability_base(capability: str) -> str:
    """'9.0a' -> '9.0', '12.0+PTX' -> '12.0'."""
    match = _CAPABILITY.fullmatch(capability)
    if match is None:
        raise KbuildError(f"`{capability}` is not a CUDA capability", fix='use values like "8.0", "9.0a", "10.0+PTX"')
    return match["base"]


def select_capabilities(kernel: str, listed: list[str], toolkit: str) -> list[str]:
    """The capabilities `[kernel.<kernel>]` is compiled for with CUDA `toolkit`: its list less
    what the toolkit cannot build (with a warning naming them), or the default list."""
    if not listed:
        return default_capabilities(toolkit)
    supported = toolkit_archs(toolkit)
    kept = [cap for cap in listed if capability_base(cap) in supported]
    dropped = [cap for cap in listed if cap not in kept]
    if not kept:
        raise KbuildError(
            f"[kernel.{kernel}] cuda-capabilities: CUDA {toolkit} can build none of {', '.join(listed)}",
            fix=f"add capabilities CUDA {toolkit} builds ({', '.join(supported)}) or build with another toolkit",
        )
    if dropped:
        warnings.warn(
            f"[kernel.{kernel}] cuda-capabilities: CUDA {toolkit} cannot build {', '.join(dropped)}; "
            f"building {', '.join(kept)}",
            stacklevel=2,
        )
    return kept


def threads_flags(capabilities: int, kernel_flags: list[str]) -> list[str]:
    """`--threads=N` for a source compiled for `capabilities` capabilities: NVCC_THREADS, else
    at most DEFAULT_NVCC_THREADS and no more than there are capabilities or CPUs; nothing when
    the kernel's cuda-flags set it."""
    if any(flag.split("=")[0] in ("--threads", "-t") for flag in kernel_flags):
        return []
    value = os.environ.get(NVCC_THREADS, "").strip()
    if value:
        if not (value.isascii() and value.isdigit()):
            raise KbuildError(
                f"{NVCC_THREADS}={value!r} is not a number of threads",
                fix=f"set {NVCC_THREADS} to a whole number (0: one per CPU), or unset it",
            )
        return [f"--threads={int(value)}"]
    threads = min(DEFAULT_NVCC_THREADS, capabilities, os.cpu_count() or 1)
    return [f"--threads={threads}"] if threads > 1 else []


def gencode_flags(capability: str) -> list[str]:
    """'9.0a' -> -gencode for sm_90a; '10.0+PTX' also embeds PTX for compute_100."""
    match = _CAPABILITY.fullmatch(capability)
    if match is None:
        raise KbuildError(f"`{capability}` is not a CUDA capability", fix='use values like "8.0", "9.0a", "10.0+PTX"')
    number = match["base"].replace(".", "") + match["suffix"]
    codes = f"[sm_{number},compute_{number}]" if match["ptx"] else f"sm_{number}"
    return [f"-gencode=arch=compute_{number},code={codes}"]


def local_gpu_capabilities() -> tuple[str, ...]:
    """The capabilities of this machine's GPUs ("9.0"), from torch.cuda; KBUILD_LOCAL_CAPABILITY
    ("9.0", "8.6,9.0", or empty for none) stands in for them."""
    value = os.environ.get(LOCAL_CAPABILITY)
    if value is not None:
        found = value.replace(",", " ").split()
        for capability in found:
            if not re.fullmatch(r"\d+\.\d+", capability):
                raise KbuildError(
                    f"{LOCAL_CAPABILITY}={value!r}: `{capability}` is not a GPU capability",
                    fix=f'set {LOCAL_CAPABILITY} to capabilities like "9.0" or "8.6,9.0", or unset it',
                )
    else:
        try:
            import torch
        except ImportError:  # a compile-only environment (torch without its CUDA libraries): no GPU
            return ()
        if not torch.cuda.is_available():
            return ()
        found = []
        for index in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(index)
            found.append(f"{major}.{minor}")
    return tuple(sorted(set(found), key=Version))


def running_on(listed: list[str], gpus: tuple[str, ...]) -> list[str]:
    """The entries of `listed` to compile for GPUs of capabilities `gpus`, in `listed`'s order.
    Per GPU: those of its own capability (9.0, 9.0a, 9.0+PTX); else the newest of its major
    version below it that it runs (8.0 or 8.0f on an 8.6, not 8.0a); else the newest PTX below
    it. Empty when nothing in `listed` runs on any of them."""
    parsed = [(cap, _CAPABILITY.fullmatch(cap)) for cap in listed]
    entries = [(Version(m["base"]), m["suffix"], bool(m["ptx"]), cap) for cap, m in parsed if m is not None]
    chosen: set[str] = set()
    for gpu in map(Version, gpus):
        own = {cap for base, _, _, cap in entries if base == gpu}
        older = [
            (base, cap) for base, suffix, _, cap in entries if base.major == gpu.major and base < gpu and suffix != "a"
        ]
        ptx = [(base, cap) for base, _, has_ptx, cap in entries if has_ptx and base < gpu]
        if own:
            chosen |= own
        elif older or ptx:
            chosen.add(max(older or ptx)[1])
    return [cap for cap in listed if cap in chosen]


def library_include_dirs() -> list[Path]:
    """Header folders of the NVIDIA library wheels in this Python (`nvidia-cublas`, `nvidia-cusparse`,
    ...; what a CUDA torch installs): torch's ATen/cuda headers include cuBLAS, cuSPARSE and
    cuSOLVER headers, which a toolkit of only nvcc and the runtime lacks."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found: list[Path] = []
    for location in spec.submodule_search_locations:
        for include in sorted(Path(location).glob("*/include")):
            if include.is_dir() and include not in found:
                found.append(include)
    return found
