"""Layers built on the FP8 block-scaled GEMM.

``FP8Linear`` is the FP8 linear layer, in both roles: ``kernels.kernelize`` swaps its ``forward``
into the fine-grained FP8 linear layers of a model, and ``FP8Linear(in_features, out_features)``
or ``FP8Linear.from_linear(linear)`` builds a standalone layer with that state.
``SiluAndMul`` is the activation layer of gated MLPs under the name activation kernels use, so
``kernelize`` can map it too. ``FP8GatedMLP`` replaces a whole gated MLP block of FP8 linear
layers: its down projection quantizes ``silu(gate) * up`` in one kernel, with no bfloat16
intermediate. ``FP8Experts`` replaces the forward of transformers' FP8 experts block (a mixture
of experts' routed experts).
"""

import warnings

import torch
from torch import nn

from . import SCALE_BLOCK, ceil_div, fp8_linear, quantize_per_block, silu_and_mul, silu_and_mul_fp8_linear
from .experts import fp8_experts_forward

# Fp8Linear: FP8Linear's former name, deprecated (the module's __getattr__ below), listed so that
# version 1's API stays whole.
__all__ = ["FP8Linear", "Fp8Linear", "SiluAndMul", "FP8GatedMLP", "FP8SplitGatedMLP", "FP8Experts"]  # noqa: F822

BLOCK_SIZE = (SCALE_BLOCK, SCALE_BLOCK)


class _StandaloneFP8Linear(type):
    """``FP8Linear``'s constructor and ``from_linear``. They live on its metaclass because
    ``kernelize`` takes a layer class only if it has no constructor and no members beyond
    ``nn.Module``'s, ``forward``, ``can_torch_compile`` and ``has_backward`` (its check that
    the layer is stateless); a metaclass's methods are not members of the class."""

    def __call__(
        cls,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | None = None,
        fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    ):
        layer = super().__call__()
        layer.in_features = in_features
        layer.out_features = out_features
        layer.block_size = BLOCK_SIZE
        k_blocks = ceil_div(in_features, SCALE_BLOCK)
        n_blocks = ceil_div(out_features, SCALE_BLOCK)
        layer.register_buffer("weight", torch.zeros(out_features, in_features, dtype=fp8_dtype, device=device))
        layer.register_buffer("weight_scale_inv", torch.ones(n_blocks, k_blocks, dtype=torch.float32, device=device))
        if bias:
            layer.bias = nn.Parameter(torch.zeros(out_features, dtype=torch.bfloat16, device=device))
        else:
            layer.register_parameter("bias", None)
        return layer

    def from_linear(cls, linear: nn.Linear, fp8_dtype: torch.dtype = torch.float8_e4m3fn):
        """An ``FP8Linear`` holding ``linear``'s weight quantized per 128x128 block (``linear``
        stays untouched); ``fp8_dtype`` is ``torch.float8_e4m3fn`` (CUDA) or
        ``torch.float8_e4m3fnuz``."""
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


class FP8Linear(nn.Module, metaclass=_StandaloneFP8Linear):
    """The linear layer of fine-grained FP8 checkpoints (DeepSeek-V3/R1 and others quantized with
    128x128 weight blocks).

    Its state: ``weight`` (``(out_features, in_features)`` ``float8_e4m3fn`` or
    ``float8_e4m3fnuz``), ``weight_scale_inv`` (float32 ``(ceil(out_features/128),
    ceil(in_features/128))``, the dequantized weight being ``weight * scale`` per 128x128 block),
    ``bias`` (or ``None``) and ``block_size`` ``(128, 128)``; another block size raises a
    ``ValueError``.

    For a model that has such layers: ``kernelize`` swaps this ``forward`` into each layer
    decorated with ``use_kernel_forward_from_hub("FP8Linear")``, on the layer's own state. To
    build one: ``FP8Linear(in_features, out_features, bias=True, device=None,
    fp8_dtype=torch.float8_e4m3fn)`` (zero weight, unit scales, bfloat16 bias) or
    ``FP8Linear.from_linear(linear, fp8_dtype=torch.float8_e4m3fn)`` (``linear``'s weight
    quantized per 128x128 block).

    ``forward`` is :func:`fp8_linear`: one op that quantizes the input per token and 128
    columns to the weight's FP8 dtype, multiplies (fp32 accumulation), adds the bias before the
    one rounding and returns the input's dtype (bfloat16 or float16), for inputs
    ``(..., in_features)``. Works under ``torch.compile`` and CUDA graphs; no backward.
    """

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_fp8_state("FP8Linear", self, x.shape, 1)
        return fp8_linear(x, self.weight, self.weight_scale_inv, self.bias)

    def extra_repr(self) -> str:  # a member of nn.Module too, so kernelize accepts it
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, fp8_dtype={self.weight.dtype}"
        )


def __getattr__(name: str):
    if name == "Fp8Linear":
        warnings.warn("layers.Fp8Linear is deprecated: use layers.FP8Linear", DeprecationWarning, stacklevel=2)
        return FP8Linear
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_fp8_state(layer: str, state: nn.Module, x_shape: torch.Size, columns_per_feature: int) -> None:
    """Raises what the checkpoint or the caller got wrong about a fine-grained FP8 linear layer's
    state (block size, weight dtype) or its input, whose last dimension must be
    ``columns_per_feature * in_features``."""
    block_size = getattr(state, "block_size", None)
    if block_size is None or tuple(block_size) != BLOCK_SIZE:
        raise ValueError(
            f"{layer}: block_size must be {BLOCK_SIZE} (one weight scale per 128x128 block), "
            f"got {block_size}; use a checkpoint quantized with weight_block_size [128, 128]"
        )
    weight = state.weight
    if weight.element_size() != 1:
        raise TypeError(f"{layer}: weight must be FP8 (float8_e4m3fn), got {weight.dtype}")
    columns = columns_per_feature * weight.shape[1]
    if x_shape[-1] != columns:
        raise ValueError(f"{layer}: expected input (..., {columns}), got {tuple(x_shape)}")


class SiluAndMul(nn.Module):
    """``silu(x[..., :d]) * x[..., d:]`` in one kernel, for ``kernelize``: the layer name
    activation kernels use for the gated activation of SwiGLU MLPs. Forward-only, no state."""

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)


class FP8GatedMLP(nn.Module):
    """Replaces the forward of a gated (SwiGLU) MLP block, ``down_proj(silu(gate) * up)`` with
    ``gate`` and ``up`` the two halves of ``gate_up_proj(x)``, whose two projections are
    fine-grained FP8 linear layers (the state :class:`FP8Linear` reads and holds).

    Forward-only: ``kernelize`` swaps it into a block decorated with
    ``use_kernel_forward_from_hub("FP8GatedMLP")`` that has ``gate_up_proj`` (in_features ->
    2 x inner, gate first) and ``down_proj`` (inner -> out_features); blocks with separate
    ``gate_proj`` and ``up_proj`` need them fused first. A block's ``act_fn`` (or
    ``hidden_act``), where it has one, must be SiLU. Two ops, four launches: the gate and
    up projection (:func:`fp8_linear`), then the down projection of the activation
    (:func:`silu_and_mul_fp8_linear`: SiLU-and-mul computed in the quantization kernel).
    Same results as the block with :class:`FP8Linear` and :class:`SiluAndMul` layers but for the
    rounding of the activation to bfloat16, which this path skips. Works under
    ``torch.compile`` and CUDA graphs; no backward.
    """

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up, down = self.gate_up_proj, self.down_proj
        _check_silu(self)
        _check_fp8_state("FP8GatedMLP.gate_up_proj", gate_up, x.shape, 1)
        _check_fp8_state("FP8GatedMLP.down_proj", down, gate_up.weight.shape[:1], 2)
        hidden = fp8_linear(x, gate_up.weight, gate_up.weight_scale_inv, gate_up.bias)
        return silu_and_mul_fp8_linear(hidden, down.weight, down.weight_scale_inv, down.bias)


_SILU_NAMES = ("silu", "swish")
_SILU_LAYERS = ("SiLU", "SiLUActivation", "SiluAndMul")


def _check_silu(block: nn.Module, layer: str = "FP8GatedMLP") -> None:
    """Raises where the block says its activation is not SiLU (``hidden_act`` or ``act_fn``)."""
    hidden_act = getattr(block, "hidden_act", None)
    act_fn = getattr(block, "act_fn", None)
    if isinstance(hidden_act, str) and hidden_act.lower() not in _SILU_NAMES:
        raise ValueError(f"{layer}: computes SiLU, but the block's hidden_act is {hidden_act!r}")
    if isinstance(act_fn, nn.Module) and type(act_fn).__name__ not in _SILU_LAYERS:
        raise ValueError(
            f"{layer}: computes SiLU, but the block's act_fn is {type(act_fn).__name__}; "
            "map this block to a kernel for its activation"
        )


class FP8Experts(nn.Module):
    """Replaces the forward of a mixture of experts' FP8 experts block, ``forward(hidden_states,
    top_k_index, top_k_weights)``, on the state of transformers' ``FP8Experts``: ``gate_up_proj``
    ``(E, 2I, H)`` and ``down_proj`` ``(E, H, I)`` FP8 with their ``*_scale_inv`` (one float32 per
    128x128 block), ``block_size`` ``(128, 128)``, ``act_fn`` SiLU. Forward-only, for
    ``kernelize`` (layer name ``"FP8Experts"``); it is :func:`gemm.fp8_experts_forward`, which
    transformers can also take directly through ``FP8ExpertsInterface``. Works under
    ``torch.compile`` and CUDA graphs (on Hopper); no backward.
    """

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(
        self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
    ) -> torch.Tensor:
        return fp8_experts_forward(self, hidden_states, top_k_index, top_k_weights)


from ._split_gated_mlp import FP8SplitGatedMLP  # noqa: E402  (it imports the checks above)
