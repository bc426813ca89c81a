#pragma once
// The grouped GEMM on the wgmma tiles (kernel: sm90_grouped_tiles.cuh), for sm90_grouped.cu.
#include <cuda_runtime.h>

#include "gemm_common/moe_args.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

// Whether the tiles take g's layout: e4m3fn; A K-major in 16-byte aligned rows (no row_index gather);
// each expert's weights one (N, K) block of 16-byte aligned rows; N a multiple of 8, K of 16; row-major
// bf16 out; A's scales M-contiguous in 16-byte aligned K blocks (TMA brings them), B's with any strides.
bool grouped_tiles_take(const GroupedGemmArgs& g);

enum class TileHeights {
  k64,     // 64-row tiles
  kMixed,  // each expert's rows on 192-row tiles and one or two 128-row ones, an expert of 1-64 rows on
           // a 64-row one (three launches; grouped_tiles::TileCut)
};

// Queues the grouped GEMM on tiles of those heights; with SiLU-and-mul in it (GroupedGemmArgs::silu_q)
// on the 64-row tiles only, for N a multiple of 256 and 4-byte aligned rows of codes (refused otherwise,
// with nothing queued).
Status launch_grouped_tiles(const GroupedGemmArgs& g, TileHeights heights, cudaStream_t stream);

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
