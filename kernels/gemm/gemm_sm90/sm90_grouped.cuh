#pragma once
// The streaming grouped (mixture-of-experts) FP8 GEMM kernel of the Hopper path, for the layouts the
// wgmma tiles (sm90_grouped_tiles.cuh) do not take, e.g. token rows gathered through row_index. Built
// from the decode kernel's pieces (sm90_decode.cuh): the weights stream once from global memory straight into
// mma.sync m16n8k32 (swap AB: weight rows on the MMA's 16-row side, tokens on its 8-column side).
//
// Grid: x = groups of kWarps / k_warps weight tiles of 16 * WR rows, y = expert slots. CTA row y
// serves the y-th expert (in id order) that owns rows, read from the routing's list of them or
// found from the offsets or counts (no host synchronization: the launch can be captured in a CUDA graph and
// replayed with other routings); rows past the last such expert exit at once. A CTA walks its expert's rows 8
// * TN at a time, each chunk a full pass over K (chunks after the first read the weight tile from L2). Token
// rows are gathered through row_index when it is set (the tokens of the sorted rows).
#include <cuda_runtime.h>

#include <cstdint>

#include "gemm_common/moe_args.h"
#include "gemm_sm90/sm90_decode.cuh"

namespace fp8gemm::sm90::grouped {

using decode::kBlockK;
using decode::kThreads;
using decode::kWarps;

struct GroupedParams {
  GroupedGemmArgs g;
  int k_warps;  // warps of a CTA that split one weight tile's K (1, 2, 4 or 8)
};

// The expert that CTA row `slot` serves and its rows, or -1 when fewer experts own rows.
__device__ __forceinline__ int find_expert(const GroupedGemmArgs& g, int slot, int64_t* first,
                                           int64_t* count) {
  if (g.active != nullptr) {  // the routing's list: one load
    const int e = slot < g.active[0] ? g.active[1 + slot] : -1;
    if (e >= 0) *count = expert_row_range(g, e, first);
    return e;
  }
  __shared__ int found;
  __shared__ int per_warp[kWarps];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) found = -1;
  int seen = 0;  // experts owning rows before this chunk of kThreads ids
  for (int base = 0; base < g.experts; base += kThreads) {
    const int e = base + threadIdx.x;
    int64_t ignored = 0;
    const bool owns = e < g.experts && expert_row_range(g, e, &ignored) > 0;
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, owns);
    if (lane == 0) per_warp[warp] = __popc(ballot);
    __syncthreads();
    int rank = seen + __popc(ballot & ((1u << lane) - 1u)), total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) rank += per_warp[w];
      total += per_warp[w];
    }
    if (owns && rank == slot) found = e;
    seen += total;
    __syncthreads();
    if (found >= 0 || seen > slot) break;
  }
  const int e = found;
  if (e >= 0) *count = expert_row_range(g, e, first);
  return e;
}

// The A rows (after row_index) of a chunk's tokens: per token tile j the lane's row g, and the two
// rows 2t, 2t + 1 whose scales it folds in; -1 past the expert's rows.
template <int TN>
struct ChunkRows {
  int x[TN];
  int s[TN][2];
};

// Row `row`'s row of a; -1 (read as zeros) for a row_index entry outside a's rows, which only the
// host-loop path can refuse (here checking would synchronize).
__device__ __forceinline__ int a_row(const GroupedGemmArgs& g, int64_t row) {
  if (g.row_index == nullptr) return int(row);
  const int r = g.row_index[row];
  return r >= 0 && r < g.a_rows ? r : -1;
}

template <int TN>
__device__ __forceinline__ ChunkRows<TN> chunk_rows(const GroupedGemmArgs& g, int64_t row0, int64_t left,
                                                    int lane) {
  ChunkRows<TN> r;
  const int gq = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const int m = 8 * j + gq;
    r.x[j] = m < left ? a_row(g, row0 + m) : -1;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int mc = 8 * j + 2 * t + c;
      r.s[j][c] = mc < left ? a_row(g, row0 + mc) : -1;
    }
  }
  return r;
}

template <bool kTail, int WR, int TN>
__device__ __forceinline__ void load_chunk_tokens(const GroupedGemmArgs& g, int kb, const ChunkRows<TN>& rows,
                                                  int lane, decode::detail::Block<WR, TN>& blk) {
  const int k = kb * kBlockK + 16 * (lane & 3);
#pragma unroll
  for (int j = 0; j < TN; ++j) {
    if (rows.x[j] >= 0) {
      decode::detail::load_row<false, kTail>(g.a + int64_t(rows.x[j]) * g.a_stride_m, k, int(g.K), blk.x[j]);
    } else {
      blk.x[j][0] = blk.x[j][1] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int c = 0; c < 2; ++c)
      blk.sa[j][c] = rows.s[j][c] >= 0
                         ? g.a_scale[int64_t(rows.s[j][c]) * g.a_scale_stride_m + kb * g.a_scale_stride_kb]
                         : 0.f;
  }
}

// Two CTAs per SM (16 warps) keep enough weight loads in flight to stream at HBM speed.
template <int WR, int TN>
__global__ void __launch_bounds__(kThreads, 2) fp8_grouped_kernel(const GroupedParams P) {
  constexpr int kVals = WR * TN * 4;
  constexpr int kTileVals = kVals * 32;
  __shared__ float red[kWarps][kVals][32];
  const GroupedGemmArgs& g = P.g;
  // The offsets or counts come from the kernels before (routing): wait for them.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  int64_t first = 0, count = 0;
  const int e = find_expert(g, blockIdx.y, &first, &count);
  if (e < 0) return;

  decode::DecodeParams p{};
  p.b = g.b + e * g.b_stride_e;
  p.b_row = g.b_stride_n;
  p.b_scale = g.b_scale + e * g.b_scale_stride_e;
  p.sb_kb = g.b_scale_stride_kb;
  p.sb_nb = g.b_scale_stride_nb;
  p.N = int(g.N);
  p.K = int(g.K);
  p.num_kb = int(g.k_blocks());

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k_warps = P.k_warps, tiles = kWarps / k_warps;
  const int n_cta = blockIdx.x * tiles * 16 * WR, n0 = n_cta + (warp / k_warps) * 16 * WR;
  const int full_kb = p.K / kBlockK;
  float* flat = &red[0][0][0];

  for (int64_t m0 = 0; m0 < count; m0 += 8 * TN) {
    const ChunkRows<TN> rows = chunk_rows<TN>(g, first + m0, count - m0, lane);
    float acc[WR][TN][4] = {};
    int kb = warp % k_warps;
    decode::detail::Block<WR, TN> cur, next;
    if (kb < full_kb) {
      decode::detail::load_weights<false>(p, kb, n0, lane, cur);
      load_chunk_tokens<false>(g, kb, rows, lane, cur);
    }
    for (; kb < full_kb; kb += k_warps) {
      if (kb + k_warps < full_kb) {
        decode::detail::load_weights<false>(p, kb + k_warps, n0, lane, next);
        load_chunk_tokens<false>(g, kb + k_warps, rows, lane, next);
      }
      decode::detail::mma_block(cur, acc);
      cur = next;
    }
    if (kb < p.num_kb) {  // the partial last k-block
      decode::detail::load_weights<true>(p, kb, n0, lane, cur);
      load_chunk_tokens<true>(g, kb, rows, lane, cur);
      decode::detail::mma_block(cur, acc);
    }

#pragma unroll
    for (int i = 0; i < WR; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) red[warp][(i * TN + j) * 4 + r][lane] = acc[i][j][r];
    __syncthreads();
    // Each weight tile's sum over its k_warps warps in warp order (deterministic), then stored.
    for (int v = threadIdx.x; v < tiles * kTileVals; v += kThreads) {
      const int tile = v / kTileVals, at = v % kTileVals, base = tile * k_warps * kTileVals + at;
      float s = 0.f;
      for (int w = 0; w < k_warps; ++w) s += flat[base + w * kTileVals];
      const int val = at >> 5, l = at & 31;
      const int i = val / (TN * 4), j = (val / 4) % TN, r = val & 3;
      const int n = n_cta + tile * 16 * WR + 16 * i + (l >> 2) + 8 * (r >> 1);
      const int64_t m = m0 + 8 * j + 2 * (l & 3) + (r & 1);
      if (n >= p.N || m >= count) continue;
      g.out[(first + m) * g.out_stride_m + int64_t(n) * g.out_stride_n] = decode::detail::to_bf16_bits(s);
    }
    __syncthreads();  // red is reused by the next chunk
  }
}

}  // namespace fp8gemm::sm90::grouped
