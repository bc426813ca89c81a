"""What a CUDA build adds to a kernel's own settings, as kernel-builder does: torch's nvcc
flags, the capability list of a toolkit (default and filter), and the folders of the CUDA
library headers that torch's headers include.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path

from packaging.version import Version

from kbuild.errors import KbuildError

# torch.utils.cpp_extension.COMMON_NVCC_FLAGS without the defines that switch off the half and
# bfloat16 operators and conversions (kernel-builder removes those), then kernel-builder's own
# -DENABLE_FP8. The kernel's cuda-flags come after these.
TORCH_NVCC_FLAGS = ("--expt-relaxed-constexpr",)
TORCH_NVCC_FLAGS_DROPPED = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
)
KERNEL_BUILDER_NVCC_FLAGS = ("-DENABLE_FP8",)

# Capabilities built when a [kernel.*] has no cuda-capabilities, per toolkit (kernel-builder's list).
_DEFAULTS = (
    ("13.0", ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0+PTX")),
    ("12.8", ("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX")),
    ("0.0", ("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX")),
)
_BEFORE_BLACKWELL = ("5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0")
# The real architectures each toolkit's nvcc builds (`nvcc --list-gpu-arch`); CUDA 13 dropped
# everything before Turing and renamed Thor's 10.1 to 11.0.
_TOOLKIT_ARCHS = (
    ("13.0", ("7.5", "8.0", "8.6", "8.7", "8.8", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1")),
    ("12.9", (*_BEFORE_BLACKWELL, "10.0", "10.1", "10.3", "12.0", "12.1")),
    ("12.8", (*_BEFORE_BLACKWELL, "10.0", "10.1", "12.0")),
    ("0.0", _BEFORE_BLACKWELL),
)
_CAPABILITY = re.compile(r"^(?P<base>\d+\.\d+)(?P<suffix>[af]?)(?P<ptx>\+PTX)?$")


def _for_toolkit(table: tuple[tuple[str, tuple[str, ...]], ...], toolkit: str) -> tuple[str, ...]:
    """The values of the newest row of `table` whose toolkit version is at most `toolkit`."""
    version = Version(toolkit)
    return next(values for since, values in table if version >= Version(since))


def default_capabilities(toolkit: str) -> list[str]:
    """What kernel-builder builds for a kernel without cuda-capabilities with CUDA `toolkit`."""
    return list(_for_toolkit(_DEFAULTS, toolkit))


def toolkit_archs(toolkit: str) -> tuple[str, ...]:
    return _for_toolkit(_TOOLKIT_ARCHS, toolkit)


def capability_base(capability: str) -> str:
    """'9.0a' -> '9.0', '12.0+PTX' -> '12.0'."""
    match = _CAPABILITY.match(capability)
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


def gencode_flags(capability: str) -> list[str]:
    """'9.0a' -> -gencode for sm_90a; '10.0+PTX' also embeds PTX for compute_100."""
    match = _CAPABILITY.match(capability)
    if match is None:
        raise KbuildError(f"`{capability}` is not a CUDA capability", fix='use values like "8.0", "9.0a", "10.0+PTX"')
    number = match["base"].replace(".", "") + match["suffix"]
    codes = f"[sm_{number},compute_{number}]" if match["ptx"] else f"sm_{number}"
    return [f"-gencode=arch=compute_{number},code={codes}"]


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
