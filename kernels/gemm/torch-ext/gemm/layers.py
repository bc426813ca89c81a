"""Layers built on the FP8 block-scaled GEMM.

``FP8Linear`` is forward-only, for ``kernels.kernelize``: it runs on the state of the module
whose ``forward`` it replaces. ``Fp8Linear`` is a standalone module with that state and the
same ``forward``, for building a layer yourself. ``SiluAndMul`` is the activation layer of
gated MLPs under the name activation kernels use, so ``kernelize`` can map it too.
"""

import torch
from torch import nn

from . import SCALE_BLOCK, ceil_div, fp8_linear, quantize_per_block, silu_and_mul

__all__ = ["FP8Linear", "Fp8Linear", "SiluAndMul"]

BLOCK_SIZE = (SCALE_BLOCK, SCALE_BLOCK)


class FP8Linear(nn.Module):
    """Replaces the forward of a fine-grained FP8 linear layer (DeepSeek-V3/R1 checkpoints).

    Forward-only (no constructor, no state of its own): ``kernelize`` swaps its ``forward``
    into a layer decorated with ``use_kernel_forward_from_hub("FP8Linear")`` that holds
    ``weight`` (``(out_features, in_features)`` ``float8_e4m3fn`` or ``float8_e4m3fnuz``),
    ``weight_scale_inv`` (float32 ``(ceil(out_features/128), ceil(in_features/128))``, the
    dequantized weight being ``weight * scale`` per 128x128 block), ``bias`` (or ``None``)
    and ``block_size`` ``(128, 128)``; another block size raises a ``ValueError``.

    ``forward`` is :func:`fp8_linear`: one op that quantizes the input per token and 128
    columns to the weight's FP8 dtype, multiplies (fp32 accumulation), adds the bias before the
    one rounding and returns the input's dtype (bfloat16 or float16), for inputs
    ``(..., in_features)``. Works under ``torch.compile`` and CUDA graphs; no backward.
    """

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        block_size = getattr(self, "block_size", None)
        if block_size is None or tuple(block_size) != BLOCK_SIZE:
            raise ValueError(
                f"FP8Linear: block_size must be {BLOCK_SIZE} (one weight scale per 128x128 block), "
                f"got {block_size}; use a checkpoint quantized with weight_block_size [128, 128]"
            )
        if weight.element_size() != 1:
            raise TypeError(f"FP8Linear: weight must be FP8 (float8_e4m3fn), got {weight.dtype}")
        in_features = weight.shape[1]
        if x.shape[-1] != in_features:
            raise ValueError(f"FP8Linear: expected input (..., {in_features}), got {tuple(x.shape)}")
        return fp8_linear(x, weight, self.weight_scale_inv, self.bias)


class Fp8Linear(FP8Linear):
    """A linear layer holding a block-quantized FP8 weight; ``forward`` is :class:`FP8Linear`'s.

    Holds ``weight`` (``(out_features, in_features)`` FP8), ``weight_scale_inv`` (one float32
    scale per 128x128 block), ``block_size`` ``(128, 128)`` and an optional bias, the
    attributes of fine-grained FP8 checkpoints. Build one from a trained layer with
    :meth:`from_linear`. For models that already have such layers, use ``kernelize`` with
    :class:`FP8Linear` instead.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | None = None,
        fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.block_size = BLOCK_SIZE
        k_blocks = ceil_div(in_features, SCALE_BLOCK)
        n_blocks = ceil_div(out_features, SCALE_BLOCK)
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=fp8_dtype, device=device))
        self.register_buffer("weight_scale_inv", torch.ones(n_blocks, k_blocks, dtype=torch.float32, device=device))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_features, dtype=torch.bfloat16, device=device))
        else:
            self.register_parameter("bias", None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, fp8_dtype: torch.dtype = torch.float8_e4m3fn) -> "Fp8Linear":
        """Returns an ``Fp8Linear`` holding ``linear``'s weight quantized per 128x128 block.

        Args:
            linear: the layer to convert (its weight stays untouched).
            fp8_dtype: ``torch.float8_e4m3fn`` (CUDA) or ``torch.float8_e4m3fnuz``.
        """
        layer = cls(
            linear.in_features,
            linear.out_features,
            bias=linear.bias is not None,
            device=linear.weight.device,
            fp8_dtype=fp8_dtype,
        )
        with torch.no_grad():
            weight, scale = quantize_per_block(linear.weight, SCALE_BLOCK, fp8_dtype)
            layer.weight.copy_(weight)
            layer.weight_scale_inv.copy_(scale)
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, fp8_dtype={self.weight.dtype}"
        )


class SiluAndMul(nn.Module):
    """``silu(x[..., :d]) * x[..., d:]`` in one kernel, for ``kernelize``: the layer name
    activation kernels use for the gated activation of SwiGLU MLPs. Forward-only, no state."""

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)
