"""Dequantize float8_e4m3fnuz to bfloat16 with a scale (a ROCm compile-check test kernel)."""

import torch

from ._ops import ops


def dequant(a: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty(a.shape, dtype=torch.bfloat16, device=a.device)
    roundtrip = torch.empty(a.shape, dtype=torch.uint8, device=a.device)
    ops.dequant(out, roundtrip, a, scale)
    return out


__all__ = ["dequant"]
