"""``FP8SplitGatedMLP``: the gated MLP of models that keep ``gate_proj`` and ``up_proj`` apart.

transformers' DeepseekV3 MLP (dense layers and shared experts), and the MLPs of most models
built like Llama, hold two FP8 linear layers for the gate and the up projection. Fusing them into
one ``gate_up_proj`` for :class:`FP8GatedMLP` would need a second copy of both weights (or a
new checkpoint); this layer keeps the two weights where they are and quantizes the input once
for both: one quantization, one GEMM per projection, each writing its half of one bfloat16
buffer, then the down projection of SiLU-and-mul as :class:`FP8GatedMLP` runs it.
"""

import torch
from torch import nn

from . import gemm_nt, quantize_per_token_group, silu_and_mul_fp8_linear
from .layers import _check_fp8_state, _check_silu

_NAME = "FP8SplitGatedMLP"


class FP8SplitGatedMLP(nn.Module):
    """Replaces the forward of a gated (SwiGLU) MLP block ``down_proj(silu(gate_proj(x)) *
    up_proj(x))`` whose three projections are fine-grained FP8 linear layers (the state
    :class:`FP8Linear` reads and holds; transformers' ``FP8Linear`` of ``FineGrainedFP8Config``
    models hold it too).

    Forward-only: ``kernelize`` swaps it into a block decorated with
    ``use_kernel_forward_from_hub("FP8SplitGatedMLP")``, or a class you cannot decorate after
    ``kernels.replace_kernel_forward_from_hub(cls, "FP8SplitGatedMLP")`` (transformers'
    ``DeepseekV3MLP``). The block has ``gate_proj`` and ``up_proj`` (in_features -> inner, no bias)
    and ``down_proj`` (inner -> out_features); its ``act_fn`` or ``hidden_act``, where it has one,
    must be SiLU. No weight is copied: the input is quantized once, the gate and up GEMMs write
    the two halves of one bfloat16 buffer, and the down projection quantizes SiLU-and-mul of it in
    its own kernel (:func:`silu_and_mul_fp8_linear`): five launches, one GEMM more than
    :class:`FP8GatedMLP` on the two weights stacked. Works under ``torch.compile`` and CUDA
    graphs; no backward.
    """

    can_torch_compile: bool = True
    has_backward: bool = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up, down = self.gate_proj, self.up_proj, self.down_proj
        _check_silu(self, _NAME)
        _check_fp8_state(f"{_NAME}.gate_proj", gate, x.shape, 1)
        _check_fp8_state(f"{_NAME}.up_proj", up, x.shape, 1)
        _check_fp8_state(f"{_NAME}.down_proj", down, gate.weight.shape[:1], 1)
        if up.weight.shape != gate.weight.shape or up.weight.dtype != gate.weight.dtype:
            raise ValueError(
                f"{_NAME}: gate_proj and up_proj must have the same weight shape and dtype, got "
                f"{tuple(gate.weight.shape)} {gate.weight.dtype} and {tuple(up.weight.shape)} {up.weight.dtype}"
            )
        if gate.bias is not None or up.bias is not None:
            raise ValueError(f"{_NAME}: gate_proj and up_proj must have no bias; map FP8Linear for this block instead")
        inner = gate.weight.shape[0]
        tokens = x.reshape(-1, x.shape[-1])
        q, scale = quantize_per_token_group(tokens, dtype=gate.weight.dtype)
        gate_up = torch.empty((tokens.shape[0], 2 * inner), dtype=torch.bfloat16, device=x.device)
        gemm_nt(q, gate.weight, scale, gate.weight_scale_inv, out=gate_up[:, :inner])
        gemm_nt(q, up.weight, scale, up.weight_scale_inv, out=gate_up[:, inner:])
        out = silu_and_mul_fp8_linear(gate_up, down.weight, down.weight_scale_inv, down.bias)
        return out.reshape(*x.shape[:-1], out.shape[-1]).to(x.dtype)
