"""Doubles a tensor (a kernel-builder-style test kernel of kbuild's corpus)."""

import torch

from . import layers


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


__all__ = ["double", "layers"]
