#pragma once
// The tile configuration table of the ROCm FP8 GEMM (data in tile_configs.def) and the rule
// that picks a configuration for a shape. Plain C++: the launcher uses it, and the host-side
// model's tests compile it with the host compiler to check that the Python mirror
// (kernels/gemm/tests/rocm_model.py) picks the same configurations.
#include <cstddef>
#include <cstdint>

#include "gemm_common/scale_block.h"

namespace fp8gemm::rocm {

struct TileShape {
  int id;
  int block_m;
  int block_n;
};

struct RankedConfig {
  int64_t m, n, k;
  int block_m, block_n;
  int split_k;
};

struct GemmConfig {
  int tile_id;
  int split_k;
};

// Each include of the table below keeps the entries of one kind; the others expand to nothing.
#define ROCM_CONSTANT(name, value)
#define ROCM_TILE(id, block_m, block_n)
#define ROCM_RANKED(m, n, k, block_m, block_n, split_k)

#undef ROCM_CONSTANT
#define ROCM_CONSTANT(name, value) constexpr int name = value;
#include "gemm_rocm/tile_configs.def"
#undef ROCM_CONSTANT
#define ROCM_CONSTANT(name, value)

#undef ROCM_TILE
#define ROCM_TILE(id, block_m, block_n) TileShape{id, block_m, block_n},
constexpr TileShape kTileShapes[] = {
#include "gemm_rocm/tile_configs.def"
};
#undef ROCM_TILE
#define ROCM_TILE(id, block_m, block_n)

#undef ROCM_RANKED
#define ROCM_RANKED(m, n, k, block_m, block_n, split_k) RankedConfig{m, n, k, block_m, block_n, split_k},
constexpr RankedConfig kRankedConfigs[] = {
#include "gemm_rocm/tile_configs.def"
};

#undef ROCM_CONSTANT
#undef ROCM_TILE
#undef ROCM_RANKED

constexpr int kNumTileShapes = int(sizeof(kTileShapes) / sizeof(kTileShapes[0]));
constexpr int64_t kKBlock = kScaleBlock;  // K elements per scale block

constexpr bool tile_ids_are_indices() {
  for (int i = 0; i < kNumTileShapes; ++i)
    if (kTileShapes[i].id != i) return false;
  return true;
}
static_assert(tile_ids_are_indices(), "tile_configs.def: ROCM_TILE ids must be 0, 1, 2, ...");

// The id of the block_m x block_n tile, or -1.
constexpr int tile_id_of(int block_m, int block_n) {
  for (const TileShape& tile : kTileShapes)
    if (tile.block_m == block_m && tile.block_n == block_n) return tile.id;
  return -1;
}

constexpr bool ranked_configs_valid() {
  for (const RankedConfig& ranked : kRankedConfigs) {
    if (tile_id_of(ranked.block_m, ranked.block_n) < 0) return false;
    if (ranked.split_k < 1 || ranked.split_k > ceil_div(ranked.k, kKBlock)) return false;
  }
  return true;
}
static_assert(ranked_configs_valid(),
              "tile_configs.def: a ROCM_RANKED entry names a missing tile or a split_k outside "
              "1..ceil(k/128)");

constexpr int64_t tile_count(const TileShape& tile, int64_t m, int64_t n) {
  return ceil_div(m, tile.block_m) * ceil_div(n, tile.block_n);
}

// The configuration for an (m, n, k) problem with m, n >= 1, k >= 0: the ranked entry when
// the shape is in the table, else the largest tile that still gives every compute unit a
// workgroup (the smallest tile when none does), split over K until the compute units are
// busy, keeping at least kMinKBlocksPerSplit scale blocks per split.
constexpr GemmConfig select_config(int64_t m, int64_t n, int64_t k) {
  for (const RankedConfig& ranked : kRankedConfigs)
    if (ranked.m == m && ranked.n == n && ranked.k == k)
      return {tile_id_of(ranked.block_m, ranked.block_n), ranked.split_k};
  int tile_id = kNumTileShapes - 1;
  for (int i = 0; i < kNumTileShapes; ++i) {
    if (tile_count(kTileShapes[i], m, n) >= kNumComputeUnits) {
      tile_id = i;
      break;
    }
  }
  const int64_t tiles = tile_count(kTileShapes[tile_id], m, n);
  int64_t split_k = 1;
  if (tiles < kNumComputeUnits) {
    split_k = kNumComputeUnits / tiles;
    if (split_k > kMaxSplitK) split_k = kMaxSplitK;
    const int64_t k_blocks = ceil_div(k, kKBlock);
    if (split_k > k_blocks / kMinKBlocksPerSplit) split_k = k_blocks / kMinKBlocksPerSplit;
    if (split_k < 1) split_k = 1;
  }
  return {tile_id, int(split_k)};
}

// Split `split` of `split_k` owns scale blocks [split_begin(split), split_begin(split + 1)).
constexpr int64_t split_begin(int64_t split, int64_t split_k, int64_t k_blocks) {
  return split * k_blocks / split_k;
}

}  // namespace fp8gemm::rocm
