"""Layers for `kernels.kernelize`: forward-only classes whose `forward` replaces the host's."""

import torch
from torch import nn

from . import relu

__all__ = ["ReLU"]


class ReLU(nn.Module):
    """Replaces the forward of a module computing ``max(x, 0)`` (like ``nn.ReLU``).

    Forward-only (no constructor, no state of its own), so ``kernelize`` can swap its
    ``forward`` into any layer decorated with ``use_kernel_forward_from_hub("ReLU")`` whose
    ``forward`` takes one tensor. Takes float32, float16 or bfloat16 input of any shape; a
    non-contiguous input is made contiguous first. Works under ``torch.compile``; no backward.
    """

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu(x.contiguous())
