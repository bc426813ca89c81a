"""Host-side model of the ROCm FP8 GEMM's numerical scheme (kernels/gemm/gemm_rocm/).

No AMD GPU is available to this project, so the ROCm kernel's arithmetic is mirrored here and
tested on the CPU against the float64 reference. The model follows the device code step by step:

- configuration: the same tile table (gemm_rocm/tile_configs.def, read by tile_tables.py) and
  the same selection rule as `select_config` in gemm_rocm/tile_configs.h (checked against the C++ by
  compiling it in test_rocm_model.py);
- MFMA path: per split of the K scale blocks, an fp32 accumulator; per 128-K block an fp32
  `partial` built from 8 steps of v_mfma_f32_32x32x16_fp8_fp8 (16 products each), then
  `acc = fma(partial, fp32(a_scale * b_scale), acc)`;
- e4m3fn inputs on the MFMA path: the kernel reads e4m3fn codes as the e4m3fnuz codes worth
  half their value and multiplies the B scale by 4; the model does the same;
- split-K: split s owns scale blocks [s * kb // S, (s + 1) * kb // S); the reduction adds the
  splits' fp32 partials in order 0..S-1, then rounds to bf16 (round to nearest even);
- general path (layouts the MFMA loaders do not take): sequential fp32 sum of each block's
  products, then the same fma with the scale.

test_rocm_model.py also runs the kernels' own source in a host emulation (rocm_emulator.cpp) and
requires this model's output bit for bit. What both assume rather than know: the MFMA
instruction's internal sum of its 16 products is exact, rounded once into the fp32 accumulator
(the hardware's internal order and precision are not documented to that level).

Tile sizes change no value, only which workgroup computes it, so the model evaluates rows and
column blocks cut from a larger problem exactly as the full problem would, given the full
problem's configuration (`config_shape` below).
"""

from __future__ import annotations

import numpy as np
import torch
from reference import SCALE_BLOCK, ceil_div
from tile_tables import RocmTable, rocm_table

MFMA_K = 16  # K per v_mfma_f32_32x32x16_fp8_fp8
FN_AS_FNUZ_FACTOR = 0.5  # an e4m3fn code read as e4m3fnuz is worth half
FN_AS_FNUZ_CORRECTION = 4.0  # applied to the B scale: 1 / (0.5 * 0.5)


def select_config(table: RocmTable, m: int, n: int, k: int) -> tuple[int, int]:
    """(tile id, split_k) for m, n >= 1: mirror of select_config in tile_configs.h."""
    if (m, n, k) in table.ranked:
        return table.ranked[(m, n, k)]
    cus = table.constants["kNumComputeUnits"]

    def tiles(tile_id: int) -> int:
        block_m, block_n = table.tiles[tile_id]
        return ceil_div(m, block_m) * ceil_div(n, block_n)

    tile_id = next((i for i in range(len(table.tiles)) if tiles(i) >= cus), len(table.tiles) - 1)
    split_k = 1
    if tiles(tile_id) < cus:
        split_k = min(
            cus // tiles(tile_id),
            table.constants["kMaxSplitK"],
            ceil_div(k, SCALE_BLOCK) // table.constants["kMinKBlocksPerSplit"],
        )
        split_k = max(split_k, 1)
    return tile_id, split_k


def effective_split_k(table: RocmTable, m: int, n: int, k: int) -> int:
    """The split count the launcher uses: the configuration's, at most the scale blocks."""
    if m == 0 or n == 0:
        return 1
    k_blocks = ceil_div(k, SCALE_BLOCK)
    split_k = select_config(table, m, n, k)[1]
    return split_k if split_k <= k_blocks else max(k_blocks, 1)


def split_ranges(k_blocks: int, split_k: int) -> list[range]:
    """The scale blocks of each split, as the kernel computes them."""
    return [range(s * k_blocks // split_k, (s + 1) * k_blocks // split_k) for s in range(split_k)]


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def _fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fp32 fma: the float64 product of two fp32 values is exact; one rounding to fp32 after
    the add (a float64 add before it can round first in rare cases: a model, not bit-exact)."""
    return _f32(a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64))


def _block_partial_mfma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 partial of one scale block: one exact 16-product dot per MFMA step, rounded into
    the fp32 accumulator. a: (rows, kblock), b: (kblock, cols), float64 values of fp8 codes."""
    partial = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k0 in range(0, a.shape[1], MFMA_K):
        step = a[:, k0 : k0 + MFMA_K] @ b[k0 : k0 + MFMA_K, :]
        partial = _f32(partial.astype(np.float64) + step)
    return partial


def _block_partial_general(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 partial of one scale block as the general kernel sums it: product by product."""
    partial = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k in range(a.shape[1]):
        partial = _f32(partial.astype(np.float64) + np.outer(a[:, k], b[k, :]))
    return partial


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round fp32 to bf16 (nearest even), returned as float32 values."""
    return torch.from_numpy(_f32(x)).to(torch.bfloat16).float().numpy()


def model_gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    *,
    path: str = "mfma",
    config_shape: tuple[int, int, int] | None = None,
    split_k: int | None = None,
    table: RocmTable | None = None,
) -> np.ndarray:
    """The ROCm kernel's output (float32 values of bf16) for out = a @ b with block scales.

    a (M, K) and b (K, N) are float8_e4m3fnuz or float8_e4m3fn tensors; a_scale
    (ceil(K/128), M), b_scale (ceil(K/128), ceil(N/128)) fp32. path: "mfma" or "general".
    config_shape: the (M, N, K) whose configuration (split_k) to use, when (a, b) are rows and
    column blocks cut from a larger problem; default the operands' own shape. split_k: a split
    count to use instead of the configuration's (MFMA path).
    """
    if path not in ("mfma", "general"):
        raise ValueError(f"path must be 'mfma' or 'general', not {path!r}")
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return np.zeros((m, n), dtype=np.float32)
    table = table or rocm_table()

    a_vals = a.float().numpy().astype(np.float64)
    b_vals = b.float().numpy().astype(np.float64)
    sa = a_scale.numpy().astype(np.float32)
    sb = b_scale.numpy().astype(np.float32)[:, np.arange(n) // SCALE_BLOCK]  # (kb, n)

    if path == "mfma" and a.dtype == torch.float8_e4m3fn:
        # The kernel maps every code to the e4m3fnuz code worth half (NaN stays NaN, -0 is +0)
        # and multiplies the B scale by 4, both exact.
        a_vals = a_vals * FN_AS_FNUZ_FACTOR
        b_vals = b_vals * FN_AS_FNUZ_FACTOR
        sb = _f32(sb * np.float32(FN_AS_FNUZ_CORRECTION))

    k_blocks = ceil_div(k, SCALE_BLOCK)
    if path == "general":
        split_k = 1
    elif split_k is None:
        split_k = effective_split_k(table, *(config_shape or (m, n, k)))
    block_partial = _block_partial_mfma if path == "mfma" else _block_partial_general

    total = None
    for blocks in split_ranges(k_blocks, split_k):
        acc = np.zeros((m, n), dtype=np.float32)
        for kb in blocks:
            ks = slice(kb * SCALE_BLOCK, min((kb + 1) * SCALE_BLOCK, k))
            partial = block_partial(a_vals[:, ks], b_vals[ks, :])
            scale = _f32(sa[kb][:, None] * sb[kb][None, :])
            acc = _fma_f32(partial, scale, acc)
        total = acc if total is None else _f32(total + acc)  # fp32 adds in split order
    return to_bf16(total)
