"""Negate a float32 tensor through an op built against the torch 2.10 stable ABI."""

import torch

from ._ops import ops


def negate(x: torch.Tensor) -> torch.Tensor:
    return ops.negate(x)


__all__ = ["negate"]
