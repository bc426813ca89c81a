#pragma once
// Hopper (sm_90a) fast path of the FP8 block-scaled GEMM. Host API; no torch header.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gemm_common/gemm_args.h"
#include "gemm_cuda/sm90_hook.h"  // declares workspace_bytes() and try_gemm(), defined here

#pragma GCC visibility push(hidden)  // internal to the extension, like the hooks

namespace fp8gemm::sm90 {

// One launch shape: output tile BM x BN, and how many CTAs (one cluster) share a tile
// along K. Valid tiles: the entries of kTileShapes (sm90_tiles.h); split 1 to kMaxSplit.
constexpr int kMaxSplit = 4;
struct TileConfig {
  int block_m = 128;
  int block_n = 128;
  int split = 1;
};

// The configuration this path uses for a problem size on the current device: the one
// force_config() set, else the tuned tables' or the cost model's.
TileConfig choose_config(int64_t M, int64_t N, int64_t K);

// Runs the GEMM with a given configuration. `args` must be supported (see try_gemm).
Status run(const GemmArgs& args, const TileConfig& config, void* workspace, size_t workspace_size,
           cudaStream_t stream);

// workspace_bytes() (K-major copies of operands that are not K-major) and try_gemm() (any
// shape and strides of e4m3fn data on sm_90; declines e4m3fnuz) are the dispatch's hooks.

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
