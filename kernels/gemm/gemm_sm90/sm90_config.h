#pragma once
// The Hopper path's choice of tile configuration: the tables of tile_configs.def (the
// candidates, the measured best for the ranked DeepSeek shapes and for small M) and a cost model
// that ranks the candidates for any other shape (DESIGN.md, "Cost model").
#include <cstddef>
#include <cstdint>

#include "gemm_sm90/sm90_gemm.h"
#include "gemm_sm90/sm90_tiles.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

// The tables of gemm_sm90/tile_configs.def (which says where their numbers come from): the
// candidates the cost model ranks, in order, and the measured best configurations of the ranked
// shapes and of small M on the DeepSeek-V3 (N, K), used on GPUs with kTunedSms SMs.
struct TunedShape {
  int64_t M, N, K;
  TileConfig config;
};
struct TunedSmallM {
  int64_t N, K, min_m, max_m;
  TileConfig config;
};
// Each include of the table below keeps the entries of one kind; the others expand to nothing.
#define SM90_TILE(block_m, block_n, kblock_us)
#define SM90_CANDIDATE(block_m, block_n, split)
#define SM90_CONSTANT(name, value)
#define SM90_RANKED(m, n, k, block_m, block_n, split)
#define SM90_SMALL_M(n, k, min_m, max_m, block_m, block_n, split)
#define SM90_SMALL_M_H200(n, k, min_m, max_m, block_m, block_n, split)

#undef SM90_CONSTANT
#define SM90_CONSTANT(name, value) constexpr int name = value;
#include "gemm_sm90/tile_configs.def"
#undef SM90_CONSTANT
#define SM90_CONSTANT(name, value)

#undef SM90_CANDIDATE
#define SM90_CANDIDATE(block_m, block_n, split) TileConfig{block_m, block_n, split},
constexpr TileConfig kCandidates[] = {
#include "gemm_sm90/tile_configs.def"
};
#undef SM90_CANDIDATE
#define SM90_CANDIDATE(block_m, block_n, split)

#undef SM90_RANKED
#define SM90_RANKED(m, n, k, block_m, block_n, split) TunedShape{m, n, k, {block_m, block_n, split}},
constexpr TunedShape kTuned[] = {
#include "gemm_sm90/tile_configs.def"
};
#undef SM90_RANKED
#define SM90_RANKED(m, n, k, block_m, block_n, split)

#undef SM90_SMALL_M
#define SM90_SMALL_M(n, k, min_m, max_m, block_m, block_n, split) \
  TunedSmallM{n, k, min_m, max_m, {block_m, block_n, split}},
constexpr TunedSmallM kTunedSmallM[] = {
#include "gemm_sm90/tile_configs.def"
};
#undef SM90_SMALL_M
#define SM90_SMALL_M(n, k, min_m, max_m, block_m, block_n, split)

#undef SM90_SMALL_M_H200
#define SM90_SMALL_M_H200(n, k, min_m, max_m, block_m, block_n, split) \
  TunedSmallM{n, k, min_m, max_m, {block_m, block_n, split}},
constexpr TunedSmallM kTunedSmallMH200[] = {
#include "gemm_sm90/tile_configs.def"
};

#undef SM90_TILE
#undef SM90_CANDIDATE
#undef SM90_CONSTANT
#undef SM90_RANKED
#undef SM90_SMALL_M
#undef SM90_SMALL_M_H200

// Cost model for any other shape, microseconds: waves of tiles, each tile its 128-deep K
// blocks at the per-CTA rate measured with every SM busy (kTileShapes' kblock_us, from
// tile_configs.def), plus a fixed cost per tile (pipeline fill, epilogue) and per CTA a split
// adds (cluster reduction). The two fixed costs were fitted to the timings of every candidate
// on 46 shapes; the cost of a split whose partials are pushed is the median over such splits in
// a sweep of them.
inline double kblock_us(const TileConfig& c) {
  const TileDims* tile = find_tile(c.block_m, c.block_n);
  return tile != nullptr ? tile->kblock_us : 0.0;
}

struct CostModel {
  double tile_overhead_us = 3.0;
  double split_overhead_us = 6.0;         // per CTA beyond the first of a split tile
  double pushed_split_overhead_us = 4.0;  // the same, for splits of 2 that push partials
};

// Every configuration the tables and the cost model can pick has kernels: a shape without an
// SM90_TILE entry would otherwise be rated free and then refused at launch.
constexpr bool tables_have_kernels() {
  for (const TileConfig& c : kCandidates)
    if (find_tile(c.block_m, c.block_n) == nullptr) return false;
  for (const TunedShape& t : kTuned)
    if (find_tile(t.config.block_m, t.config.block_n) == nullptr) return false;
  for (const TunedSmallM& t : kTunedSmallM)
    if (find_tile(t.config.block_m, t.config.block_n) == nullptr) return false;
  for (const TunedSmallM& t : kTunedSmallMH200)
    if (find_tile(t.config.block_m, t.config.block_n) == nullptr) return false;
  return true;
}
static_assert(tables_have_kernels(),
              "tile_configs.def: a candidate, ranked or small-M configuration has no SM90_TILE entry");

inline double estimate_us(const TileConfig& c, int64_t M, int64_t N, int64_t K,
                          const int (&clusters)[kMaxSplit + 1], const CostModel& cm = CostModel{}) {
  const int64_t tiles = ((M + c.block_m - 1) / c.block_m) * ((N + c.block_n - 1) / c.block_n);
  const int64_t kb = ceil_div(K, kScaleBlock);
  const int64_t slots = clusters[c.split] > 0 ? clusters[c.split] : 1;
  const int64_t waves = (tiles + slots - 1) / slots;
  const int64_t kb_per_cta = (kb + c.split - 1) / c.split;
  const bool pushed = pushes_split_partials(c.block_m, c.block_n, c.split);
  const double per_tile = kb_per_cta * kblock_us(c) + cm.tile_overhead_us +
                          (c.split - 1) * (pushed ? cm.pushed_split_overhead_us : cm.split_overhead_us);
  return waves * per_tile;
}

// M-contiguous A (the AMD challenge's layout) is transposed by the consumers on its way into
// the MMAs, without a copy, only where that was measured faster than copying it K-major: the
// transposition slows the main loop (by about 12% on 6144x4608x7168) and saves the copy of A,
// which weighs more the narrower N. Faster on the five ranked shapes with N <= 1536 and
// M >= 1.5 N, slower on the other 13.
inline bool transpose_a_in_kernel(int64_t M, int64_t N) { return N <= 1536 && 2 * M >= 3 * N; }

// The first entry of a small-M table for the problem, or nullptr.
template <size_t kEntries>
constexpr const TunedSmallM* find_small_m(const TunedSmallM (&table)[kEntries], int64_t M, int64_t N,
                                          int64_t K) {
  for (const TunedSmallM& t : table)
    if (t.N == N && t.K == K && M >= t.min_m && M <= t.max_m) return &t;
  return nullptr;
}

// The SM90_SMALL_M_H200 entry for the problem, or nullptr. Where one covers M, the decode kernel
// declines the problem (decode_takes) and the tiles take it.
inline const TunedSmallM* h200_small_m(int64_t M, int64_t N, int64_t K) {
  return find_small_m(kTunedSmallMH200, M, N, K);
}

// h200_class: an H200-class GPU (DeviceInfo), whose SM90_SMALL_M_H200 entries come first.
inline TileConfig pick_config(int64_t M, int64_t N, int64_t K, const int (&clusters)[kMaxSplit + 1],
                              bool h200_class) {
  if (clusters[1] == kTunedSms) {
    for (const TunedShape& t : kTuned)
      if (t.M == M && t.N == N && t.K == K) return t.config;
    if (const TunedSmallM* t = h200_class ? h200_small_m(M, N, K) : nullptr) return t->config;
    if (const TunedSmallM* t = find_small_m(kTunedSmallM, M, N, K)) return t->config;
  }
  TileConfig best = kCandidates[0];
  double best_us = estimate_us(best, M, N, K, clusters);
  for (const TileConfig& c : kCandidates) {
    const double us = estimate_us(c, M, N, K, clusters);
    if (us < best_us * 0.98) {  // prefer the earlier (larger, unsplit) candidate on near ties
      best = c;
      best_us = us;
    }
  }
  return best;
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
