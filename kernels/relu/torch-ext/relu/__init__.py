"""relu: out = max(x, 0) for float32, float16 and bfloat16 tensors.

CPU and CUDA builds are tested; ROCm (gfx942): compiled, not run on hardware by this project's CI.
"""

from __future__ import annotations

import torch

from ._ops import ops

__all__ = ["relu"]


def relu(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Return max(x, 0) elementwise.

    `x` is a contiguous float32, float16 or bfloat16 tensor of any shape (empty too).
    `out`, if given, must have the shape, dtype and device of `x`; it is filled and returned.
    `out` may be `x` itself (in place); an `out` that partly overlaps `x` raises a RuntimeError.
    """
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    ops.relu(out, x)
    return out


from . import layers  # noqa: E402, F401  (kernelize looks up `<kernel>.layers.<Name>`)
