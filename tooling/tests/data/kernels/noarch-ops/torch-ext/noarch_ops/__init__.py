"""scale(x, factor) = x * factor, a torch.library custom op of this build's namespace."""

import torch

from ._ops import add_op_namespace_prefix


@torch.library.custom_op(add_op_namespace_prefix("scale"), mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale.register_fake
def _scale_fake(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.empty_like(x)


@scale.register_kernel("cpu")
def _scale_cpu(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.mul(x, factor)


__all__ = ["scale"]
