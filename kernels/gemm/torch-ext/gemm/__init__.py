"""FP8 block-scaled GEMM (DeepSeek-V3 style 1x128 activation and 128x128 weight scales).

``out[m, n] = sum_k a[m, k] * a_scale[k // 128, m] * b[k, n] * b_scale[k // 128, n // 128]``,
accumulated in fp32, written as bfloat16; the activation quantization that feeds it, SiLU-and-mul
fused with that quantization, and :func:`fp8_linear`, the whole layer in one call.
"""

import torch

from ._ops import add_op_namespace_prefix, ops
from ._scale import SCALE_BLOCK as SCALE_BLOCK
from ._scale import ceil_div as ceil_div  # for layers.py
from .experts import (
    fp8_experts,
    fp8_experts_forward,
    grouped_gemm_nt_contiguous,
    grouped_gemm_nt_masked,
    moe_combine,
    moe_route,
)

__all__ = [
    "gemm",
    "gemm_nt",
    "fp8_linear",
    "silu_and_mul_fp8_linear",
    "quantize_per_token_group",
    "silu_and_mul_quantize",
    "silu_and_mul",
    "quantize_per_block",
    "force_general_path",
    "force_tile_config",
    "moe_route",
    "grouped_gemm_nt_contiguous",
    "grouped_gemm_nt_masked",
    "moe_combine",
    "fp8_experts",
    "fp8_experts_forward",
]

_FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
_OP_INPUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Block-scaled FP8 matrix product ``a @ b`` with per-block scales, in bfloat16.

    Args:
        a: ``(M, K)`` FP8 (``float8_e4m3fn``, or ``float8_e4m3fnuz``), any strides.
        b: ``(K, N)`` FP8 of ``a``'s dtype, any strides.
        a_scale: ``(ceil(K/128), M)`` float32: one scale per row of ``a`` and 128 columns.
        b_scale: ``(ceil(K/128), ceil(N/128))`` float32: one scale per 128x128 block of ``b``.
        out: optional ``(M, N)`` bfloat16 result tensor (any strides, not overlapping an input).

    Returns:
        ``out`` (allocated when not given) holding
        ``sum_k a[m,k] * a_scale[k//128, m] * b[k,n] * b_scale[k//128, n//128]``.
        Scales may be negative; ``K == 0`` gives zeros. Each 128-deep K block's fp32 sum is
        added as ``acc + block_sum * (a_scale * b_scale)``: a scale product that overflows
        fp32 gives +-inf (NaN where the block sum is 0 or infinities of both signs meet).

    Raises:
        RuntimeError: naming the argument and what was expected, for a wrong dtype,
            device, shape, scale shape or an ``out`` that overlaps an input.
    """
    out = _output(out, a, b, n_dim=1)
    ops.gemm(out, a, b, a_scale, b_scale)
    return out


def gemm_nt(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``a @ b.T`` in the layout of DeepGEMM, vLLM and ``torch._scaled_mm``.

    Args:
        a: ``(M, K)`` FP8 activations.
        b: ``(N, K)`` FP8 weights (as ``nn.Linear`` stores them).
        a_scale: ``(M, ceil(K/128))`` float32, one scale per token and 128 columns.
        b_scale: ``(ceil(N/128), ceil(K/128))`` float32, one scale per 128x128 weight block.
        out: optional ``(M, N)`` bfloat16 result tensor.

    Returns:
        ``out``: the same product as :func:`gemm` on transposed views
        (``gemm(a, b.T, a_scale.T, b_scale.T, out)``); nothing is copied.

    Raises:
        RuntimeError: as :func:`gemm`, with the shapes of this layout.
    """
    out = _output(out, a, b, n_dim=0)
    ops.gemm_nt(out, a, b, a_scale, b_scale)
    return out


def _output(out: torch.Tensor | None, a: torch.Tensor, b: torch.Tensor, n_dim: int) -> torch.Tensor:
    """``out``, or a new bfloat16 (M, N) tensor with N = ``b.shape[n_dim]`` (empty where a or b is
    not 2-D: the op then raises the error that names it)."""
    if out is not None:
        return out
    rows = a.shape[0] if a.dim() == 2 else 0
    cols = b.shape[n_dim] if b.dim() == 2 else 0
    return torch.empty((rows, cols), dtype=torch.bfloat16, device=a.device)


def _fp8_max(dtype: torch.dtype) -> float:
    if dtype not in _FP8_DTYPES:
        raise ValueError(f"dtype must be one of {_FP8_DTYPES}, got {dtype}")
    return torch.finfo(dtype).max


def _quantize_groups(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantizes x (..., G) over its last dim; returns (values, scales (...,))."""
    fp8_max = _fp8_max(dtype)
    amax = x.abs().amax(dim=-1)
    scale = amax / fp8_max
    # All-zero groups keep scale 0 and quantize to 0 (no division by zero).
    divisor = torch.where(scale > 0, scale, torch.ones_like(scale)).unsqueeze(-1)
    q = (x / divisor).clamp(-fp8_max, fp8_max).to(dtype)
    return q, scale


def _padded(x: torch.Tensor, dim: int, multiple: int) -> torch.Tensor:
    pad = -x.shape[dim] % multiple
    if pad == 0:
        return x
    shape = list(x.shape)
    shape[dim] = pad
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


def fp8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale_inv: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x @ dequantized(weight).T + bias`` with FP8 weights: the whole linear layer in one call.

    Quantizes ``x`` per token and 128 columns to the weight's FP8 dtype (as
    :func:`quantize_per_token_group`), multiplies with :func:`gemm_nt`'s kernels, adds the bias
    to the fp32 result and rounds once: two launches, the quantization kernel and the GEMM with
    the bias in its epilogue (plus a cast for a bias that is not bfloat16 and for an output
    that is not bfloat16).

    Args:
        x: ``(..., in_features)`` bfloat16, float16 or float32 activations, any strides.
        weight: ``(out_features, in_features)`` FP8 (``float8_e4m3fn`` or ``float8_e4m3fnuz``).
        weight_scale_inv: ``(ceil(out_features/128), ceil(in_features/128))`` float32: the
            dequantized weight is ``weight * scale`` per 128x128 block.
        bias: optional ``(out_features,)``, rounded to bfloat16 before it is added.

    Returns:
        ``(..., out_features)`` in ``x``'s dtype (computed in bfloat16, then cast).

    Raises:
        RuntimeError: naming the argument and what was expected.
    """
    return ops.fp8_linear(x, weight, weight_scale_inv, bias)


def silu_and_mul_fp8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale_inv: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``fp8_linear(silu(x[..., :d]) * x[..., d:], weight, weight_scale_inv, bias)``, where the
    SiLU-and-mul is computed inside the quantization kernel (as :func:`silu_and_mul_quantize`):
    the down projection of a gated MLP, with no bfloat16 intermediate. Two launches.

    Args:
        x: ``(..., 2 * in_features)`` bfloat16, float16 or float32: gate and up side by side.
        weight, weight_scale_inv, bias: as :func:`fp8_linear`.

    Returns:
        ``(..., out_features)`` in ``x``'s dtype.

    Raises:
        RuntimeError: naming the argument and what was expected.
    """
    return ops.silu_and_mul_fp8_linear(x, weight, weight_scale_inv, bias)


def quantize_per_token_group(
    x: torch.Tensor, group: int = SCALE_BLOCK, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantizes activations to FP8 with one scale per row and ``group`` columns.

    Args:
        x: ``(M, K)`` floating-point activations.
        group: columns per scale; :func:`gemm_nt` takes ``group=128``, which runs as one kernel
            on CPU and CUDA (ROCm) tensors (other group sizes and devices run as a sequence of
            torch operations, whose scale division may round differently in the last place).
        dtype: ``torch.float8_e4m3fn`` (CUDA) or ``torch.float8_e4m3fnuz``.

    Returns:
        ``(q, scale)``: ``q`` ``(M, K)`` row-major FP8 and ``scale`` ``(M, ceil(K/group))``
        float32 with ``scale = amax / fp8_max`` per group (an IEEE division), stored M-major
        (strides ``(1, M)``) as ``torch._scaled_mm`` and the fast paths take it; ``q`` is
        ``x / scale`` clamped to the format's range and rounded to nearest even. All-zero
        groups get scale 0 and values 0; a group holding a NaN gets scale NaN. ``q * scale``
        approximates ``x``.
    """
    if x.dim() != 2:
        raise ValueError(f"quantize_per_token_group: x must be 2-D (M, K), got {tuple(x.shape)}")
    if group <= 0:
        raise ValueError(f"quantize_per_token_group: group must be positive, got {group}")
    if group == SCALE_BLOCK and x.device.type in ("cpu", "cuda"):
        _fp8_max(dtype)
        return ops.quantize(x if x.dtype in _OP_INPUT_DTYPES else x.float(), dtype, False)
    rows, cols = x.shape
    groups = _padded(x.float(), 1, group).view(rows, -1, group)
    q, scale = _quantize_groups(groups, dtype)
    q = q.view(rows, -1)[:, :cols].contiguous()
    return q, scale.t().contiguous().t()


def silu_and_mul_quantize(
    x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``quantize_per_token_group(silu(x[:, :d]) * x[:, d:])`` in one kernel, computed in fp32.

    Args:
        x: ``(M, 2d)`` bfloat16, float16 or float32: the gate and up projections side by side.
        dtype: ``torch.float8_e4m3fn`` or ``torch.float8_e4m3fnuz``.

    Returns:
        ``(q, scale)`` of shapes ``(M, d)`` and ``(M, ceil(d/128))``, laid out as
        :func:`quantize_per_token_group`'s, ready for :func:`gemm_nt`.
    """
    return ops.quantize(x, dtype, True)


def silu_and_mul(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` in ``x``'s dtype, one kernel (computed in fp32).

    Args:
        x: ``(..., 2d)`` bfloat16, float16 or float32.
        out: optional contiguous ``(..., d)`` result of ``x``'s dtype.
    """
    if out is None:
        out = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
    ops.silu_and_mul(out, x)
    return out


def quantize_per_block(
    w: torch.Tensor, block: int = SCALE_BLOCK, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantizes a weight matrix to FP8 with one scale per ``block x block`` tile.

    Args:
        w: ``(N, K)`` floating-point weight (``nn.Linear.weight`` layout).
        block: tile edge; :func:`gemm_nt` takes ``block=128``.
        dtype: ``torch.float8_e4m3fn`` (CUDA) or ``torch.float8_e4m3fnuz``.

    Returns:
        ``(q, scale)``: ``q`` ``(N, K)`` row-major FP8 and ``scale``
        ``(ceil(N/block), ceil(K/block))`` contiguous float32 with
        ``scale = amax / fp8_max`` per tile (0 for all-zero tiles, whose values are 0).
    """
    if w.dim() != 2:
        raise ValueError(f"quantize_per_block: w must be 2-D (N, K), got {tuple(w.shape)}")
    if block <= 0:
        raise ValueError(f"quantize_per_block: block must be positive, got {block}")
    rows, cols = w.shape
    padded = _padded(_padded(w.float(), 0, block), 1, block)
    row_blocks, col_blocks = padded.shape[0] // block, padded.shape[1] // block
    tiles = padded.view(row_blocks, block, col_blocks, block).permute(0, 2, 1, 3)
    q, scale = _quantize_groups(tiles.reshape(row_blocks, col_blocks, block * block), dtype)
    q = q.view(row_blocks, col_blocks, block, block).permute(0, 2, 1, 3)
    q = q.reshape(padded.shape)[:rows, :cols].contiguous()
    return q, scale.contiguous()


def force_general_path(force: bool) -> bool:
    """Makes later CUDA calls use the general kernel instead of the Hopper fast path.

    The environment variable ``GEMM_FORCE_GENERAL=1`` sets the initial state. No effect on
    CPU or ROCm builds.

    Args:
        force: ``True`` to force the general path, ``False`` to allow fast paths again.

    Returns:
        The previous setting, so callers can restore it.
    """
    previous = bool(ops.general_path_forced())
    ops.force_general_path(bool(force))
    return previous


def force_tile_config(config: tuple[int, int, int] | None) -> None:
    """Makes later CUDA calls that take Hopper's wgmma tiles use one configuration, for sweeps.

    Args:
        config: ``(block_m, block_n, split)``: a tile shape the Hopper path has kernels for and
            1-4 CTAs per tile; ``None`` returns to the tuned tables and the cost model. Problems
            the decode kernel takes still go there (``GEMM_FORCE_NO_DECODE=1`` switches it off).

    Raises:
        RuntimeError: on builds without the Hopper path, or for a tile without kernels.
    """
    block_m, block_n, split = config if config is not None else (0, 0, 1)
    ops.force_tile_config(block_m, block_n, split)


@torch.library.register_fake(add_op_namespace_prefix("quantize"))
def _quantize_fake(x: torch.Tensor, dtype: torch.dtype, silu_and_mul: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Shapes for torch.compile, symbolic sizes kept (a token count traced as dynamic stays so)."""
    rows, cols = x.shape
    k = cols // 2 if silu_and_mul else cols
    q = x.new_empty((rows, k), dtype=dtype)
    return q, x.new_empty((ceil_div(k, SCALE_BLOCK), rows), dtype=torch.float32).t()


@torch.library.register_fake(add_op_namespace_prefix("fp8_linear"))
@torch.library.register_fake(add_op_namespace_prefix("silu_and_mul_fp8_linear"))
def _fp8_linear_fake(
    x: torch.Tensor, weight: torch.Tensor, weight_scale_inv: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


from . import layers  # noqa: E402, F401  (layers imports the functions above)
