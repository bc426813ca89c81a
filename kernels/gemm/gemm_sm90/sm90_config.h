#pragma once
// Tile configurations as data: the candidates, a cost model that ranks them for any
// shape, and the measured best for the ranked DeepSeek shapes (DESIGN.md).
#include <cstdint>

#include "gemm_sm90/sm90_gemm.h"
#include "gemm_sm90/sm90_tiles.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

// clang-format off: the tables below are laid out by hand, one row per group of entries
constexpr TileConfig kCandidates[] = {
    {128, 256, 1}, {192, 128, 1}, {128, 128, 1}, {64, 256, 1}, {128, 64, 1}, {64, 128, 1},
    {128, 256, 2}, {192, 128, 2}, {128, 128, 2}, {64, 256, 2}, {128, 64, 2}, {64, 128, 2},
    {128, 128, 3}, {64, 256, 3},  {128, 64, 3}, {64, 128, 3},
    {128, 128, 4}, {64, 256, 4},  {128, 64, 4}, {64, 128, 4},
    // widths that divide N = 576 / 1536 / 4608 into whole waves (DESIGN.md run 16)
    {192, 144, 1}, {128, 192, 1}, {128, 144, 1}, {128, 96, 1}, {64, 192, 1},
    {128, 192, 2}, {128, 144, 2}, {64, 192, 2}, {128, 192, 3}, {128, 144, 3},
    {128, 192, 4}, {128, 144, 4},
    // 72-wide warpgroup rows: N = 576 in 4 or 8 tiles (DESIGN.md run 31)
    {64, 144, 1}, {64, 144, 2}, {128, 72, 1}, {128, 72, 2},
};

// The best configuration for each of the 18 ranked shapes on one H100 SXM: the mean of two
// sweeps of all candidates in compare.py's scale layout (DESIGN.md runs 19, 24, 27, 32 and 38;
// the sweeps' CSVs are in git history). Each re-sweep changed only the
// shapes where another configuration won by more than 1% in every round. Used on GPUs with
// that many SMs.
constexpr int kTunedSms = 132;
struct TunedShape {
  int64_t M, N, K;
  TileConfig config;
};
constexpr TunedShape kTuned[] = {
    {1024, 1536, 7168, {128, 96, 1}},  {1024, 3072, 1536, {128, 192, 1}}, {1024, 576, 7168, {64, 144, 2}},
    {1024, 7168, 256, {128, 128, 1}},  {1024, 7168, 2048, {128, 128, 1}}, {1024, 4608, 7168, {128, 144, 1}},
    {1024, 7168, 2304, {128, 128, 1}}, {1024, 512, 7168, {64, 128, 2}},   {1024, 4096, 512, {64, 256, 1}},
    {6144, 1536, 7168, {192, 128, 1}}, {6144, 3072, 1536, {192, 128, 1}}, {6144, 576, 7168, {192, 144, 1}},
    {6144, 7168, 256, {128, 192, 1}},  {6144, 7168, 2048, {192, 128, 1}}, {6144, 4608, 7168, {192, 128, 1}},
    {6144, 7168, 2304, {192, 128, 1}}, {6144, 512, 7168, {192, 128, 1}},  {6144, 4096, 512, {192, 128, 1}},
};

// Small M (9 to 128 tokens, where the decode kernel declines) on the DeepSeek-V3 (N, K) where the
// cost model's choice lost to another configuration in a sweep of every candidate and the
// narrow small-M tiles (64x64, 64x32) at M = 16-128 on one H100 SXM, and compare.py confirmed
// it (DECODE.md round 4); the expert MLP's two were confirmed by its block's timeline instead. The cost model does not rank the narrow tiles: they are used from this
// table only. M = 9-15 was not measured; it takes the entry of M = 16.
struct TunedSmallM {
  int64_t N, K, min_m, max_m;
  TileConfig config;
};
constexpr TunedSmallM kTunedSmallM[] = {
    {4608, 7168, 65, 128, {128, 72, 2}}, {1536, 7168, 9, 128, {64, 64, 2}}, {576, 7168, 9, 64, {64, 32, 4}},
    {576, 7168, 65, 128, {64, 32, 2}},   {3072, 1536, 9, 128, {64, 64, 1}}, {4096, 512, 9, 128, {64, 64, 1}},
    // the expert MLP's gate and up projection (2 x 2048) and its down projection (DESIGN.md, "The FP8
    // linear layer")
    {4096, 7168, 9, 64, {64, 64, 2}},    {7168, 2048, 9, 16, {64, 128, 2}}, {7168, 2048, 33, 64, {64, 64, 1}},
};
// clang-format on

// Cost model for any other shape, microseconds: waves of tiles, each tile its 128-deep K
// blocks at the per-CTA rate measured with every SM busy (6144x4608x7168 in compare.py's
// scale layout, run 27 sweep, after 2 us per tile; the tiles whose B scales straddle and
// 64x192 from run 32's sweeps, scaled by 0.98 to run 27's machine; 64x144 raised from 0.28
// to 0.30 by run 32's replay of the choice on 51 other shapes), plus a fixed cost per tile
// (pipeline fill, epilogue) and per CTA a split adds (cluster reduction). The two fixed costs were fitted to
// run 27's timings of every candidate on 46 shapes (DESIGN.md run 27g); the cost of a split whose partials
// are pushed is the median over such splits in run 38's sweep.
// (The rates are kTileShapes' kblock_us, sm90_tiles.h.)
inline double kblock_us(const TileConfig& c) {
  const TileDims* tile = find_tile(c.block_m, c.block_n);
  return tile != nullptr ? tile->kblock_us : 0.0;
}

struct CostModel {
  double tile_overhead_us = 3.0;
  double split_overhead_us = 6.0;         // per CTA beyond the first of a split tile
  double pushed_split_overhead_us = 4.0;  // the same, for splits of 2 that push partials (run 38)
};

// Every configuration the tables and the cost model can pick has kernels: a shape missing from
// tile_shapes.def would otherwise be rated free and then refused at launch.
constexpr bool tables_have_kernels() {
  for (const TileConfig& c : kCandidates)
    if (find_tile(c.block_m, c.block_n) == nullptr) return false;
  for (const TunedShape& t : kTuned)
    if (find_tile(t.config.block_m, t.config.block_n) == nullptr) return false;
  for (const TunedSmallM& t : kTunedSmallM)
    if (find_tile(t.config.block_m, t.config.block_n) == nullptr) return false;
  return true;
}
static_assert(tables_have_kernels(),
              "a tile of kCandidates, kTuned or kTunedSmallM is not in tile_shapes.def");

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
// M >= 1.5 N, slower on the other 13 (DESIGN.md run 34).
inline bool transpose_a_in_kernel(int64_t M, int64_t N) { return N <= 1536 && 2 * M >= 3 * N; }

inline TileConfig pick_config(int64_t M, int64_t N, int64_t K, const int (&clusters)[kMaxSplit + 1]) {
  if (clusters[1] == kTunedSms) {
    for (const TunedShape& t : kTuned)
      if (t.M == M && t.N == N && t.K == K) return t.config;
    for (const TunedSmallM& t : kTunedSmallM)
      if (t.N == N && t.K == K && M >= t.min_m && M <= t.max_m) return t.config;
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
