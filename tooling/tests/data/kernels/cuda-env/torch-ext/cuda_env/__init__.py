"""Clamps float32 CUDA tensors to the finite range in place (a compile-environment test kernel)."""

import torch

from ._ops import ops


def clamp_(x: torch.Tensor) -> torch.Tensor:
    ops.clamp(x)
    return x


def devices() -> int:
    return ops.devices()


__all__ = ["clamp_", "devices"]
