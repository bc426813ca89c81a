"""``nn.Module`` wrappers built on the FP8 block-scaled GEMM."""

import torch
from torch import nn

from . import SCALE_BLOCK, gemm_nt, quantize_per_block, quantize_per_token_group

__all__ = ["Fp8Linear"]


class Fp8Linear(nn.Module):
    """A linear layer with a block-quantized FP8 weight, computed with :func:`gemm_nt`.

    Holds the weight as ``(out_features, in_features)`` FP8 with one float32 scale per
    128x128 block (``weight_scale``), and an optional bias. ``forward`` quantizes the
    activations per token and 128 columns, runs the FP8 GEMM and returns bfloat16 (or the
    input's floating dtype). Inputs may have any number of leading batch dimensions.

    This is a standalone module (it owns FP8 buffers), not a drop-in ``kernelize``
    replacement for ``nn.Linear``. Build one from a trained layer with :meth:`from_linear`.
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
        self.fp8_dtype = fp8_dtype
        k_blocks = -(-in_features // SCALE_BLOCK)
        n_blocks = -(-out_features // SCALE_BLOCK)
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=fp8_dtype, device=device))
        self.register_buffer("weight_scale", torch.ones(n_blocks, k_blocks, dtype=torch.float32, device=device))
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
            layer.weight_scale.copy_(scale)
            if linear.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ weight.T + bias`` for ``x`` of shape ``(..., in_features)``."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"Fp8Linear: expected input (..., {self.in_features}), got {tuple(x.shape)}")
        tokens = x.reshape(-1, self.in_features)
        q, scale = quantize_per_token_group(tokens, SCALE_BLOCK, self.fp8_dtype)
        y = gemm_nt(q, self.weight, scale, self.weight_scale)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        out_dtype = x.dtype if x.dtype.is_floating_point else y.dtype
        return y.reshape(*x.shape[:-1], self.out_features).to(out_dtype)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, fp8_dtype={self.fp8_dtype}"
        )
