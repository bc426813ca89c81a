#pragma once
// Small-M (decode) kernel of the Hopper path: out = A (M x K) times B^T (B is N x K, the
// weights), M up to a few dozen tokens. The weight read is the whole cost, so the kernel is
// built around streaming B once at HBM speed:
//
// - The weights take the 16-row side of mma.sync m16n8k32 (e4m3, fp32 accumulate) and the
//   tokens its 8-column side ("swap AB"), so a warp's tile is 16*WR weight rows x 8*TN tokens.
// - Both operands go from global memory straight into the MMA registers: per 128-K block, thread
//   t of a quad reads bytes [16t, 16t + 16) and [64 + 16t, 80 + 16t) of a row (two 16-byte
//   loads, each quad's load a whole 64 bytes). The k order that gives is a permutation of the
//   MMA's own, the same for both operands, so the dot products are exact.
// - Each 128-K block is accumulated alone and folded in with a_scale[m, kb] * b_scale[n/128, kb].
// - K is split over k_warps warps of a CTA (k-blocks w, w + k_warps * C, ...; the CTA's other
//   warps take the next weight tiles) and over the C CTAs of a cluster (grid z); partial sums
//   meet in shared memory and then over the cluster's distributed shared memory, always added
//   in rank order: the result is deterministic.
// - One k-block of loads is in flight ahead of the MMAs; the weights' loads skip L1 and ask L2
//   to fetch 256 bytes (the next k-block of the row, which a neighbouring warp reads).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/scale_block.h"

namespace fp8gemm::sm90::decode {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockK = kScaleBlock;

struct DecodeParams {
  const uint8_t* a;  // (M, K), K contiguous, rows a_row bytes apart, 16-byte aligned
  int64_t a_row;
  const uint8_t* b;  // (N, K), K contiguous, rows b_row bytes apart, 16-byte aligned
  int64_t b_row;
  const float* a_scale;  // a_scale[kb * sa_kb + m * sa_m]
  int64_t sa_kb, sa_m;
  const float* b_scale;  // b_scale[kb * sb_kb + nb * sb_nb]
  int64_t sb_kb, sb_nb;
  uint16_t* out;  // bf16 bits, out[m * out_sm + n * out_sn]
  int64_t out_sm, out_sn;
  const uint16_t* bias;  // optional bf16 bias[n * bias_stride], added before rounding
  int64_t bias_stride;
  int M, N, K, num_kb;
  int b_before_wait;  // launched programmatically behind the quantization of A: B may be read first
  int k_warps;        // warps of a CTA that split one weight tile's K (1, 2, 4 or 8); the CTA's
                      // kWarps / k_warps groups of them take consecutive weight tiles
};

namespace detail {

__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 load_cached(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// Bytes [k, k + 16) and [k + 64, k + 80) of a row; in the last, partial k-block (kTail) bytes at
// or past K read as zero (an FP8 zero).
template <bool kStream, bool kTail>
__device__ __forceinline__ void load_row(const uint8_t* row, int k, int K, uint4 (&v)[2]) {
  if constexpr (!kTail) {
    v[0] = kStream ? load_stream(row + k) : load_cached(row + k);
    v[1] = kStream ? load_stream(row + k + 64) : load_cached(row + k + 64);
  } else {
    uint32_t w[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int kk = k + 4 * i + j + (i >= 4 ? 48 : 0);
        if (kk < K) word |= uint32_t(row[kk]) << (8 * j);
      }
      w[i] = word;
    }
    v[0] = make_uint4(w[0], w[1], w[2], w[3]);
    v[1] = make_uint4(w[4], w[5], w[6], w[7]);
  }
}

__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word(const uint4 (&v)[2], int i) {
  const uint4& h = v[i >> 2];
  switch (i & 3) {
    case 0:
      return h.x;
    case 1:
      return h.y;
    case 2:
      return h.z;
    default:
      return h.w;
  }
}

__device__ __forceinline__ uint16_t to_bf16_bits(float f) {
  const uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x0040u);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// One k-block's operands of one warp: per weight tile i its rows g and g + 8, per token tile j
// token g; 32 bytes each. Plus the block's scales.
template <int WR, int TN>
struct Block {
  uint4 w[WR][2][2];
  uint4 x[TN][2];
  float sb[WR];
  float sa[TN][2];
};

// The weights' half of load_block.
template <bool kTail, int WR, int TN>
__device__ __forceinline__ void load_weights(const DecodeParams& p, int kb, int n0, int lane,
                                             Block<WR, TN>& blk) {
  const int g = lane >> 2, t = lane & 3;
  const int k = kb * kBlockK + 16 * t;
#pragma unroll
  for (int i = 0; i < WR; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + 16 * i + g + 8 * h;
      if (n < p.N) {
        load_row<true, kTail>(p.b + int64_t(n) * p.b_row, k, p.K, blk.w[i][h]);
      } else {
        blk.w[i][h][0] = blk.w[i][h][1] = make_uint4(0, 0, 0, 0);
      }
    }
    const int nb = min(n0 + 16 * i, p.N - 1) / kBlockK;
    blk.sb[i] = p.b_scale[kb * p.sb_kb + nb * p.sb_nb];
  }
}

// The tokens' half of load_block.
template <bool kTail, int WR, int TN>
__device__ __forceinline__ void load_tokens(const DecodeParams& p, int kb, int m0, int lane,
                                            Block<WR, TN>& blk) {
  const int g = lane >> 2, t = lane & 3;
  const int k = kb * kBlockK + 16 * t;
#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const int m = m0 + 8 * j + g;
    if (m < p.M) {
      load_row<false, kTail>(p.a + int64_t(m) * p.a_row, k, p.K, blk.x[j]);
    } else {
      blk.x[j][0] = blk.x[j][1] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int mc = m0 + 8 * j + 2 * t + c;
      blk.sa[j][c] = mc < p.M ? p.a_scale[kb * p.sa_kb + mc * p.sa_m] : 0.f;
    }
  }
}

template <bool kTail, int WR, int TN>
__device__ __forceinline__ void load_block(const DecodeParams& p, int kb, int n0, int m0, int lane,
                                           Block<WR, TN>& blk) {
  load_weights<kTail>(p, kb, n0, lane, blk);
  load_tokens<kTail>(p, kb, m0, lane, blk);
}

// acc += (this block's products) * a_scale * b_scale, per 16 x 8 tile.
template <int WR, int TN>
__device__ __forceinline__ void mma_block(const Block<WR, TN>& blk, float (&acc)[WR][TN][4]) {
#pragma unroll
  for (int i = 0; i < WR; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // the four k32 slices: bytes 8q..8q+7 of each thread's 32
        mma_e4m3(part, word(blk.w[i][0], 2 * q), word(blk.w[i][1], 2 * q), word(blk.w[i][0], 2 * q + 1),
                 word(blk.w[i][1], 2 * q + 1), word(blk.x[j], 2 * q), word(blk.x[j], 2 * q + 1));
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] += part[r] * (blk.sb[i] * blk.sa[j][r & 1]);
    }
  }
}

// Adds the bias to the sum s of accumulator v (of kTileVals per weight tile) of the CTA's weight
// tile `tile`, rounds it to bf16 and stores it where it belongs in out.
template <int WR, int TN>
__device__ __forceinline__ void store_sum(const DecodeParams& p, int n_cta, int m0, int tile, int v,
                                          float s) {
  const int val = v >> 5, l = v & 31;
  const int i = val / (TN * 4), j = (val / 4) % TN, r = val & 3;
  const int n = n_cta + tile * 16 * WR + 16 * i + (l >> 2) + 8 * (r >> 1);
  const int m = m0 + 8 * j + 2 * (l & 3) + (r & 1);
  if (n >= p.N || m >= p.M) return;
  if (p.bias != nullptr) s += bf16_to_float(p.bias[int64_t(n) * p.bias_stride]);
  p.out[int64_t(m) * p.out_sm + int64_t(n) * p.out_sn] = to_bf16_bits(s);
}

}  // namespace detail

// Grid: x = token tiles of 8*TN, y = groups of kWarps / k_warps weight tiles of 16*WR rows,
// z = the C CTAs of a cluster (kClustered: launched as a 1 x 1 x C cluster, C > 1; otherwise
// z = 1). kThreads threads. The one-CTA instance holds no cluster steps and stores its sums in
// one pass: 0.95-0.97 of the time of one kernel for both cases at 1 token on the H200 (DESIGN.md).
template <int WR, int TN, bool kClustered>
__global__ void __launch_bounds__(kThreads) fp8_decode_kernel(const DecodeParams p) {
  constexpr int kVals = WR * TN * 4;  // accumulators per thread
  constexpr int kTileVals = kVals * 32;
  __shared__ float red[kWarps][kVals][32];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k_warps = p.k_warps, tiles = kWarps / k_warps;
  const int m0 = blockIdx.x * 8 * TN;
  const int n_cta = blockIdx.y * tiles * 16 * WR, n0 = n_cta + (warp / k_warps) * 16 * WR;
  const int cluster_size = kClustered ? int(gridDim.z) : 1, rank = kClustered ? int(blockIdx.z) : 0;
  const int stride = k_warps * cluster_size;

  float acc[WR][TN][4] = {};
  const int full_kb = p.K / kBlockK;  // k-blocks with all 128 bytes inside K
  int kb = rank * k_warps + warp % k_warps;
  detail::Block<WR, TN> cur, next;
  // Launched programmatically behind the quantization of A (run_decode): the first k-block's
  // weights are loaded before that kernel is done, the tokens after it. The next kernel may
  // launch at once: it waits for this one.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (p.b_before_wait && kb < full_kb) detail::load_weights<false>(p, kb, n0, lane, cur);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (kb < full_kb) {
    if (!p.b_before_wait) detail::load_weights<false>(p, kb, n0, lane, cur);
    detail::load_tokens<false>(p, kb, m0, lane, cur);
  }
  for (; kb < full_kb; kb += stride) {
    if (kb + stride < full_kb) detail::load_block<false>(p, kb + stride, n0, m0, lane, next);
    detail::mma_block(cur, acc);
    cur = next;
  }
  if (kb < p.num_kb) {  // the partial last k-block
    detail::load_block<true>(p, kb, n0, m0, lane, cur);
    detail::mma_block(cur, acc);
  }

#pragma unroll
  for (int i = 0; i < WR; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) red[warp][(i * TN + j) * 4 + r][lane] = acc[i][j][r];
  __syncthreads();
  // Each weight tile's sum over its k_warps warps, added in warp order.
  float* flat = &red[0][0][0];
  if constexpr (!kClustered) {
    for (int e = threadIdx.x; e < tiles * kTileVals; e += kThreads) {
      const int tile = e / kTileVals, v = e % kTileVals, first = tile * k_warps;
      float s = 0.f;
      for (int w = 0; w < k_warps; ++w) s += flat[(first + w) * kTileVals + v];
      detail::store_sum<WR, TN>(p, n_cta, m0, tile, v, s);
    }
  } else {
    namespace cg = cooperative_groups;
    for (int e = threadIdx.x; e < tiles * kTileVals; e += kThreads) {
      const int first = (e / kTileVals) * k_warps, v = e % kTileVals;
      float s = 0.f;
      for (int w = 0; w < k_warps; ++w) s += flat[(first + w) * kTileVals + v];
      flat[first * kTileVals + v] = s;  // into the tile's first warp's slot
    }
    // The CTAs meet over distributed shared memory: rank r writes its share of the tiles,
    // summing the cluster's CTAs in rank order.
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int total = tiles * kTileVals, per_rank = (total + cluster_size - 1) / cluster_size;
    const int lo = rank * per_rank, hi = min(total, lo + per_rank);
    for (int e = lo + threadIdx.x; e < hi; e += kThreads) {
      const int tile = e / kTileVals, v = e % kTileVals, at = tile * k_warps * kTileVals + v;
      float s = 0.f;
      for (int c = 0; c < cluster_size; ++c) s += cluster.map_shared_rank(flat, c)[at];
      detail::store_sum<WR, TN>(p, n_cta, m0, tile, v, s);
    }
    cluster.sync();  // no CTA leaves while the others read its shared memory
  }
}

}  // namespace fp8gemm::sm90::decode
