#pragma once
// The grouped GEMM on the wgmma tiles (kernel: sm90_grouped_tiles.cuh), for sm90_grouped.cu.
#include <cuda_runtime.h>

#include "gemm_common/moe_args.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

// Whether the tiles take g's layout: e4m3fn; A K-major in 16-byte aligned rows (no row_index gather);
// each expert's weights one (N, K) block of 16-byte aligned rows; N a multiple of 8, K of 16; row-major
// bf16 out. The scales may have any strides.
bool grouped_tiles_take(const GroupedGemmArgs& g);

// Queues the grouped GEMM on BM-row tiles (64 or 128).
Status launch_grouped_tiles(const GroupedGemmArgs& g, int block_m, cudaStream_t stream);

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
