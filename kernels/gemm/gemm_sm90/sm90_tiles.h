#pragma once
// What the Hopper kernel and its host code agree on: the kernel's parameters and how a
// BM x BN tile is laid out on warpgroups, stages and shared memory (the host's cost model
// and launcher ask too), and the tile shapes that have kernels.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>

#include "gemm_sm90/sm90_gemm.h"

namespace fp8gemm::sm90 {

constexpr int kBlockK = kScaleBlock;  // K depth of a stage = the scale block
constexpr int kSmemLimit = 227 * 1024;

struct KernelParams {
  int M, N, K;
  int num_kb;  // ceil(K / 128)
  int tiles_m, tiles_n, num_tiles;
  int split;          // CTAs per cluster sharing a tile along K
  int group;          // raster: `group` M-tiles walk the N tiles together, or with
  int group_along_n;  // group_along_n `group` N-tiles walk the M tiles
  int stream_a;       // A is read by one group of N tiles only: its loads evict first, B's last
  const float* a_scale;
  int64_t sa_kb, sa_m;
  const float* b_scale;
  int64_t sb_kb, sb_nb;
  int n_blocks;  // ceil(N / 128)
  uint16_t* out;
  int64_t out_sm, out_sn;
  const uint16_t* bias;  // optional bf16 bias[n * bias_stride], added before rounding
  int64_t bias_stride;
  int tma_store;      // out is row-major with 16-byte rows: stage in smem, TMA store
  int out_vec4;       // row-major out, 8-byte aligned rows: 4-element stores
  int b_before_wait;  // launched behind the quantization of A (after_quantize): B, and the routing, may be
                      // read first
};

// How a BM x BN tile is laid on the consumer warpgroups (TileShape below explains why); the
// host's cost model asks too.
// One producer warpgroup and 2 consumer warpgroups; 3 for BM = 192 (one per 64 rows) and for
// 64x192 (one per 64 columns): three keep the tensor pipe busier than two.
__host__ __device__ constexpr int consumer_wgs(int bm, int bn) {
  return bm == 192 || (bm == 64 && bn == 192) ? 3 : 2;
}
// Columns per consumer warpgroup: the warpgroups split the tile's rows in 64s, then its columns.
__host__ __device__ constexpr int wg_cols(int bm, int bn) { return bn / (consumer_wgs(bm, bn) / (bm / 64)); }
// A warpgroup's columns are done in chunks (one wgmma width each): each chunk's MMAs are
// promoted before the next chunk's, so only one chunk-sized scratch accumulator is live next
// to the full tile accumulator. A whole warpgroup row is one chunk up to 128 columns (192 with
// two consumer warpgroups, which have the registers), else two halves.
__host__ __device__ constexpr int chunk_cols(int bm, int bn) {
  const int wn = wg_cols(bm, bn);
  return wn <= 128 || (wn <= 192 && consumer_wgs(bm, bn) == 2) ? wn : wn / 2;
}
// Split-K over 2 CTAs, for two one-chunk consumer warpgroups: each CTA finishes the tile region
// of one warpgroup, and its other warpgroup hands its partial to the peer CTA, straight into
// the peer's output staging buffer, which holds exactly one warpgroup's fp32 accumulator: no
// cluster barrier per tile. Other splits sum the CTAs' partial tiles through distributed shared
// memory between two cluster barriers.
__host__ __device__ constexpr bool pushes_split_partials(int bm, int bn, int split) {
  return split == 2 && consumer_wgs(bm, bn) == 2 && chunk_cols(bm, bn) == wg_cols(bm, bn);
}

template <int BM, int BN>
struct TileShape {
  static_assert(BM == 64 || BM == 128 || BM == 192, "BM");
  static constexpr int kConsumerWGs = consumer_wgs(BM, BN);
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  static constexpr int kConsumerThreads = 128 * kConsumerWGs;
  static constexpr int kConsumerWarps = 4 * kConsumerWGs;
  // setmaxnreg budgets (multiples of 8; the sum over all threads fits the 64K registers)
  static constexpr int kProducerRegs = kConsumerWGs == 3 ? 24 : 40;
  static constexpr int kConsumerRegs = kConsumerWGs == 3 ? 160 : 232;
  static constexpr int kWgM = BM / 64;              // consumer warpgroups along M
  static constexpr int kWgN = kConsumerWGs / kWgM;  // consumer warpgroups along N
  static constexpr int kWN = wg_cols(BM, BN);
  static_assert(kWN == BN / kWgN, "warpgroup columns");
  static_assert(kWN == 16 || kWN == 32 || kWN == 64 || kWN == 72 || kWN == 96 || kWN == 128 || kWN == 144 ||
                    kWN == 192 || kWN == 256,
                "warpgroup tile width");
  static constexpr int kChunkN = chunk_cols(BM, BN);
  static constexpr int kChunks = kWN / kChunkN;
  // Consumers take turns issuing their MMAs (see the header); measured to help the one-chunk
  // tiles and to hurt the two-chunk ones, and, on the H200, to make the 64-row tiles of two
  // warpgroups narrower than 64x256 (side by side along N) up to 13 % slower (DESIGN.md).
  static constexpr bool kTakeTurns = kChunks == 1 && (kConsumerWGs == 3 || kWgM == 2 || kWN >= 128);
  // One-chunk tiles whose registers hold a second scratch accumulator overlap a block's
  // promotion with the next block's MMAs.
  static constexpr bool kOverlap = kChunks == 1 && kConsumerWGs == 2 && kWN <= 128;
  // B scales come per 128 columns. Chunks that do not divide 128 may straddle a boundary;
  // then a warpgroup's kWN columns (which start at multiples of gcd(BN, kWN, 128)) span at
  // most 2 scale blocks: it loads both and uses one per 8-column fragment group, which one
  // being fixed at compile time per crossing class (below).
  static constexpr bool kCross = 128 % kChunkN != 0;
  static constexpr int gcd3(int a, int b, int c) {
    while (b) {
      const int t = a % b;
      a = b;
      b = t;
    }
    while (c) {
      const int t = a % c;
      a = c;
      c = t;
    }
    return a;
  }
  static_assert(!kCross || kWN + 128 - gcd3(BN, kWN, 128) <= 256,
                "a warpgroup row spans at most 2 B scale blocks");
  // Crossing classes: a warpgroup's first column lies at a multiple of kColStep in its B scale
  // block. Positions where every chunk crosses into the next block at the same fragment group
  // (first_hi_group: the chunk's groups before the boundary) form one class; the K loop is
  // compiled once per class, so that no group selects its scales at run time.
  static constexpr int kColStep = gcd3(BN, kWN, 128);
  __host__ __device__ static constexpr int first_hi_group(int col_in_block, int c) {
    const int h = (128 - col_in_block - c * kChunkN) / 8;
    return h < 0 ? 0 : h > kChunkN / 8 ? kChunkN / 8 : h;
  }
  __host__ __device__ static constexpr bool same_crossings(int x, int y) {
    for (int c = 0; c < kChunks; ++c)
      if (first_hi_group(x, c) != first_hi_group(y, c)) return false;
    return true;
  }
  __host__ __device__ static constexpr bool is_class_rep(int x) {  // the first position of its class
    for (int y = 0; y < x; y += kColStep)
      if (same_crossings(x, y)) return false;
    return true;
  }
  // Output staging: 64x64 boxes with 128-byte swizzle when the chunk is a multiple of 64
  // columns, else one unswizzled box of 64 x kChunkN.
  static constexpr bool kSwizzledOut = kChunkN % 64 == 0;
  static constexpr int kStageBytes = (BM + BN) * kBlockK;
  static constexpr int kOutBytes = kConsumerWGs * 64 * kChunkN * 2;  // bf16 staging, a chunk per warpgroup
  static constexpr int kBarrierBytes = 256;
  static constexpr int kStagesFit = (kSmemLimit - 1024 - kOutBytes - kBarrierBytes) / kStageBytes;
  // At most 8 stages, 12 for the narrow small-M tiles (16 KB stages or less): with little work
  // per stage they need more bytes in flight to stream B (the barriers have room for 15).
  static constexpr int kStagesCap = kStageBytes <= 16384 ? 12 : 8;
  static constexpr int kStagesMax = kStagesFit < kStagesCap ? kStagesFit : kStagesCap;
  // Room for each stage's BM A scales (a_scale M-contiguous): tiles with 5 or more stages give
  // up one for them (loaded with the operands, they never stall a consumer).
  static constexpr bool kScalesFitMax =
      1024 + kStagesMax * (kStageBytes + BM * 4) + kOutBytes + kBarrierBytes <= kSmemLimit;
  static constexpr int kStages = !kScalesFitMax && kStagesMax >= 5 ? kStagesMax - 1 : kStagesMax;
  static constexpr int kScaleBytes = kStages * BM * 4;
  static constexpr bool kScalesFit =
      1024 + kStages * kStageBytes + kOutBytes + kBarrierBytes + kScaleBytes <= kSmemLimit;
  static constexpr int kSmemBytes =
      1024 + kStages * kStageBytes + kOutBytes + kBarrierBytes + (kScalesFit ? kScaleBytes : 0);
  static constexpr int kRedStride = BN + 4;  // fp32 partial-tile row stride (split-K)
  static constexpr bool kPushSplit = pushes_split_partials(BM, BN, 2);
  static_assert(!kPushSplit || kOutBytes == 64 * kWN * 4, "a pushed partial fills the staging buffer");
  static_assert(BM * kRedStride * 4 <= kStages * kStageBytes + kOutBytes, "split-K buffer");
  static_assert(kStages >= 2, "stages");
  static_assert(2 * kStages * 8 + 16 <= kBarrierBytes, "full, empty and xfer barriers");
};

// The Hopper tile set: every tile shape that has kernels and its cost-model rate, the SM90_TILE
// entries of gemm_sm90/tile_configs.def (which says what adding a shape does).
struct TileDims {
  int block_m, block_n;
  double kblock_us;
};
constexpr TileDims kTileShapes[] = {
#define SM90_TILE(block_m, block_n, kblock_us) {block_m, block_n, kblock_us},
#define SM90_CANDIDATE(block_m, block_n, split)
#define SM90_CONSTANT(name, value)
#define SM90_RANKED(m, n, k, block_m, block_n, split)
#define SM90_SMALL_M(n, k, min_m, max_m, block_m, block_n, split)
#define SM90_SMALL_M_H200(n, k, min_m, max_m, block_m, block_n, split)
#include "gemm_sm90/tile_configs.def"
#undef SM90_TILE
#undef SM90_CANDIDATE
#undef SM90_CONSTANT
#undef SM90_RANKED
#undef SM90_SMALL_M
#undef SM90_SMALL_M_H200
};

// The entry of kTileShapes for BM x BN, or nullptr.
constexpr const TileDims* find_tile(int block_m, int block_n) {
  for (const TileDims& t : kTileShapes)
    if (t.block_m == block_m && t.block_n == block_n) return &t;
  return nullptr;
}

template <class F, size_t... I>
auto with_tile_in(int BM, int BN, F& f, std::index_sequence<I...>) {
  using std::integral_constant;
  decltype(f(integral_constant<int, kTileShapes[0].block_m>{},
             integral_constant<int, kTileShapes[0].block_n>{})) r{};
  (void)((BM == kTileShapes[I].block_m && BN == kTileShapes[I].block_n &&
          (r = f(integral_constant<int, kTileShapes[I].block_m>{},
                 integral_constant<int, kTileShapes[I].block_n>{}),
           true)) ||
         ...);
  return r;
}

// f(integral_constant BM, integral_constant BN) for one of kTileShapes; a value-initialised
// result for any other shape.
template <class F>
auto with_tile(int BM, int BN, F&& f) {
  return with_tile_in(BM, BN, f, std::make_index_sequence<std::size(kTileShapes)>{});
}

}  // namespace fp8gemm::sm90
