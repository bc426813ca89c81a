"""FP8 mixtures of experts: routing, grouped FP8 block GEMMs and the whole experts block.

The experts block of a DeepSeek-V3-style MoE layer, ``sum_j w[t, j] * down_e(silu(gate_e(x_t)) *
up_e(x_t))`` over each token's top-k experts ``e = top_k_index[t, j]``, with FP8 expert weights
(one float32 scale per 128x128 block) and activations quantized per token and 128 columns:
:func:`fp8_experts` does it in one op (six kernels, ten launches on Hopper from 64 rows per expert:
routing, the quantization that also scatters each token to its rows in expert order, the grouped
gate/up GEMM, SiLU-and-mul with quantization, the grouped down GEMM, the weighted combine in fp32),
and :func:`fp8_experts_forward` runs it on the
state of transformers' ``FP8Experts``, for its ``FP8ExpertsInterface``. On Hopper the grouped GEMMs
run on wgmma tiles that read the routing on the device: no host synchronization, so the block can be
captured in a CUDA graph and replayed with other routings. Elsewhere (CPU, ROCm, other CUDA GPUs)
they run one dense GEMM per expert that owns rows, after reading the offsets on the host.
"""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = [
    "moe_route",
    "grouped_gemm_nt_contiguous",
    "grouped_gemm_nt_masked",
    "moe_combine",
    "fp8_experts",
    "fp8_experts_forward",
]

_SILU_ACTIVATIONS = ("SiLU", "SiLUActivation", "SiluAndMul")


def moe_route(top_k_index: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sorts the (token, expert) slots of ``top_k_index`` ``(T, k)`` (int64 or int32) by expert.

    Returns:
        ``(offsets, row_token, slot_row)``, int32: expert ``e`` owns rows
        ``offsets[e]:offsets[e + 1]``, row ``r`` belongs to token ``row_token[r]`` (entries from
        ``offsets[-1]`` on are not written), and slot ``t * k + j`` to row ``slot_row[t * k + j]``.
        Ids outside ``[0, num_experts)`` (transformers writes ``num_experts`` for "no expert") own no
        row: their ``slot_row`` is -1. On CPU tensors
        an id below 0 or above ``num_experts`` raises; on a GPU it counts as "no expert" (checking
        would wait for the device). The order of rows within an expert is unspecified.
    """
    return ops.moe_route(top_k_index, num_experts)


def grouped_gemm_nt_contiguous(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    offsets: torch.Tensor,
    row_index: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Grouped FP8 block GEMM over rows sorted by expert ("contiguous" layout, for prefill).

    ``out[r] = a[row_index[r]] @ dequantized(b[e]).T`` for the rows ``r`` in
    ``offsets[e]:offsets[e + 1]`` of each expert ``e`` (``row_index`` omitted: ``a[r]``); rows past
    ``offsets[-1]`` are left as they were. Any number of rows per expert, 0 included.

    Args:
        a: ``(A, K)`` FP8 activations, ``a_scale`` ``(A, ceil(K/128))`` float32 (as
            :func:`gemm.quantize_per_token_group` returns them). Hopper's tiles read the scales
            M-contiguous, each block column 16-byte aligned (stride ``(1, P)``, ``P`` a multiple of 4
            and at least ``A``); other layouts (row-major scales, or ``A`` not a multiple of 4) are
            copied into that one first where the tiles then take the call (e4m3fn only).
        b: ``(E, N, K)`` FP8 expert weights, ``b_scale`` ``(E, ceil(N/128), ceil(K/128))`` float32.
        offsets: ``(E + 1,)`` int32 on ``a``'s device, non-decreasing, within ``0..R``: checked where
            the host reads them (CPU, ROCm, other GPUs, many rows per expert); the Hopper kernel, which
            reads them on the device, clamps each expert's range to ``0..R`` instead.
        row_index: optional ``(R,)`` int32 rows of ``a`` (a gather of token rows); entries outside
            ``a``'s rows are refused where the host reads them and read as zeros on the Hopper kernel.
        out: optional ``(R, N)`` bfloat16; by default ``R`` is ``row_index``'s length or ``A``.
    """
    rows = row_index.shape[0] if row_index is not None else a.shape[0]
    if out is None:
        out = a.new_empty((rows, b.shape[1]), dtype=torch.bfloat16)
    ops.grouped_gemm_nt(out, a, a_scale, row_index, b, b_scale, offsets, False)
    return out


def grouped_gemm_nt_masked(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    masked_m: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Grouped FP8 block GEMM in the "masked" layout (for decode and CUDA graphs).

    ``out[e, :masked_m[e]] = a[e, :masked_m[e]] @ dequantized(b[e]).T``; the other rows of ``out``
    are left as they were. ``masked_m`` stays on the device: changing it between replays of a
    captured graph needs no re-capture, and empty experts cost nothing on Hopper.

    Args:
        a: ``(E, C, K)`` FP8, ``a_scale`` ``(E, C, ceil(K/128))`` float32 (each expert's rows as one block;
            on Hopper copied first unless M-contiguous, as for the contiguous layout).
        b: ``(E, N, K)`` FP8, ``b_scale`` ``(E, ceil(N/128), ceil(K/128))`` float32.
        masked_m: ``(E,)`` int32 rows per expert (clamped to ``0..C``).
        out: optional ``(E, C, N)`` bfloat16.
    """
    if out is None:
        out = a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=torch.bfloat16)
    ops.grouped_gemm_nt(out, a, a_scale, None, b, b_scale, masked_m, True)
    return out


def moe_combine(
    rows: torch.Tensor, slot_row: torch.Tensor, top_k_weights: torch.Tensor, dtype: torch.dtype = torch.bfloat16
) -> torch.Tensor:
    """``out[t] = sum_j top_k_weights[t, j] * rows[slot_row[t * k + j]]`` accumulated in float32 in
    ``j`` order (slots with row -1 add nothing), rounded once to ``dtype``. ``rows`` is bfloat16."""
    return ops.moe_combine(rows, slot_row, top_k_weights, dtype)


def fp8_experts(
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
    gate_up_proj: torch.Tensor,
    gate_up_proj_scale_inv: torch.Tensor,
    down_proj: torch.Tensor,
    down_proj_scale_inv: torch.Tensor,
    gated: bool = True,
) -> torch.Tensor:
    """The experts block with FP8 weights, in one op.

    Args:
        hidden_states: ``(T, H)`` bfloat16, float16 or float32.
        top_k_index: ``(T, k)`` int64/int32 expert ids (``E`` = no expert, see :func:`moe_route`).
        top_k_weights: ``(T, k)`` routing weights (float32, bfloat16 or float16).
        gate_up_proj: ``(E, 2I, H)`` FP8, gate rows first (``gated``), or ``(E, I, H)`` up
            projections (not ``gated``: SiLU alone between the projections).
        gate_up_proj_scale_inv: ``(E, ceil(2I/128), ceil(H/128))`` float32.
        down_proj: ``(E, H, I)`` FP8, ``down_proj_scale_inv`` ``(E, ceil(H/128), ceil(I/128))``.

    Returns:
        ``(T, H)`` in ``hidden_states``' dtype: each token's experts' outputs weighted and summed
        in float32 (as transformers' ``FP8Experts`` accumulates).

    Workspace: one allocation per call holding, for the ``R = T * k`` rows, both activations' FP8
    codes (``R * (H + I)`` bytes), their scales, the routing, and one bfloat16 buffer of
    ``R * max(N, H)`` elements (``N``: ``gate_up_proj``'s rows) that both GEMMs' outputs share
    (745 MiB at DeepSeek-V3's sizes and 4,096 tokens); the output is a second. Float16 inputs add
    a float32 ``(T, H)`` sum, ``gated=False`` a bfloat16 ``R * I`` SiLU output, and GEMMs off
    Hopper's grouped kernels may add workspaces of their own.
    """
    return ops.fp8_experts(
        hidden_states, top_k_index, top_k_weights, gate_up_proj, gate_up_proj_scale_inv, down_proj,
        down_proj_scale_inv, gated,
    )  # fmt: skip


def fp8_experts_forward(
    self: torch.nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
) -> torch.Tensor:
    """transformers' ``FP8Experts.forward`` on our kernels, for ``FP8ExpertsInterface``.

    Reads the module's ``gate_up_proj`` / ``gate_up_proj_scale_inv`` (or ``up_proj*`` when
    ``has_gate`` is false), ``down_proj`` / ``down_proj_scale_inv``, ``block_size``, ``act_fn``
    and ``activation_scheme``. Refuses, naming what to change, what it does not compute: another
    block size than 128x128, static activation scales, biases, an activation other than SiLU, and
    the clamped or soft-capped SwiGLU variants (``swiglu_limit``, ``swiglu_alpha``, ``gate_softcap``,
    ``up_softcap``).
    """
    _check_experts_module(self)
    has_gate = bool(getattr(self, "has_gate", True))
    w_in = self.gate_up_proj if has_gate else self.up_proj
    w_in_scale = self.gate_up_proj_scale_inv if has_gate else self.up_proj_scale_inv
    return fp8_experts(
        hidden_states, top_k_index, top_k_weights, w_in, w_in_scale, self.down_proj, self.down_proj_scale_inv,
        has_gate,
    )  # fmt: skip


def _check_experts_module(experts: torch.nn.Module) -> None:
    name = "fp8_experts_forward"
    block_size = getattr(experts, "block_size", None)
    if block_size is None or tuple(block_size) != (128, 128):
        raise ValueError(
            f"{name}: block_size must be (128, 128) (one weight scale per 128x128 block), got {block_size}; "
            "use a checkpoint quantized with weight_block_size [128, 128]"
        )
    scheme = getattr(experts, "activation_scheme", "dynamic")
    if scheme != "dynamic":
        raise ValueError(
            f"{name}: activation_scheme must be 'dynamic' (activations quantized per call), got {scheme!r}"
        )
    if getattr(experts, "has_bias", False):
        raise ValueError(f"{name}: experts with biases are not supported (has_bias is True)")
    for attribute in ("swiglu_limit", "swiglu_alpha", "limit", "gate_softcap", "up_softcap"):
        if getattr(experts, attribute, None) is not None:
            raise ValueError(
                f"{name}: the clamped or soft-capped SwiGLU ({attribute} is set) is not supported; "
                "use another experts implementation"
            )
    act_fn = getattr(experts, "act_fn", None)
    if act_fn is not None and type(act_fn).__name__ not in _SILU_ACTIVATIONS:
        raise ValueError(
            f"{name}: computes SiLU, but the experts' act_fn is {type(act_fn).__name__}; "
            "use another experts implementation for this model"
        )


@torch.library.register_fake(add_op_namespace_prefix("fp8_experts"))
def _fp8_experts_fake(
    x: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
    w_in: torch.Tensor,
    w_in_scale: torch.Tensor,
    w_out: torch.Tensor,
    w_out_scale: torch.Tensor,
    gated: bool,
) -> torch.Tensor:
    return x.new_empty(x.shape)


@torch.library.register_fake(add_op_namespace_prefix("moe_route"))
def _moe_route_fake(top_k_index: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    slots = top_k_index.shape[0] * top_k_index.shape[1]
    int32 = torch.int32
    return (
        top_k_index.new_empty((num_experts + 1,), dtype=int32),
        top_k_index.new_empty((slots,), dtype=int32),
        top_k_index.new_empty((slots,), dtype=int32),
    )


@torch.library.register_fake(add_op_namespace_prefix("moe_combine"))
def _moe_combine_fake(
    rows: torch.Tensor, slot_row: torch.Tensor, top_k_weights: torch.Tensor, out_dtype: torch.dtype
) -> torch.Tensor:
    return rows.new_empty((top_k_weights.shape[0], rows.shape[1]), dtype=out_dtype)


@torch.library.register_fake(add_op_namespace_prefix("grouped_gemm_nt"))
def _grouped_gemm_nt_fake(
    out: torch.Tensor,
    a: torch.Tensor,
    a_scale: torch.Tensor,
    row_index: torch.Tensor | None,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    expert_rows: torch.Tensor,
    masked: bool,
) -> None:
    return None
