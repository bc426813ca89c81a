// Host side of the Hopper grouped (mixture-of-experts) GEMM: the wgmma tiles where they take the
// layout (sm90_grouped_tiles.cu), else the streaming kernel (sm90_grouped.cuh): which problems it
// takes, its configuration and its launch (entry point declared in gemm_cuda/sm90_hook.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "gemm_cuda/pdl_launch.h"
#include "gemm_cuda/sm90_hook.h"
#include "gemm_sm90/sm90_grouped.cuh"
#include "gemm_sm90/sm90_grouped_tiles.h"
#include "gemm_sm90/sm90_launch.h"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

using grouped::GroupedParams;

// Rows per expert from which each expert's rows are cut into 192- and 128-row tiles (TileHeights::kMixed;
// every tile 64 rows high below). From 64 rather than 128: at 64-96 rows per expert, DeepSeek-V3's
// experts on 128-row tiles took 0.74-0.92x the time of 64-row ones on the H200 (DESIGN.md).
constexpr int64_t kTileRowsForMixed = 64;

// K-contiguous rows, 16-byte aligned, 16-byte multiples apart: the kernel's 16-byte loads.
bool k_contiguous_16(const uint8_t* ptr, int64_t stride_k, int64_t stride_row) {
  return stride_k == 1 && reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && stride_row % 16 == 0;
}

bool takes(const GroupedGemmArgs& g) {
  return g.format == Fp8Format::E4M3FN && g.N > 0 && g.K > 0 && g.N < (int64_t(1) << 30) &&
         g.K < (int64_t(1) << 30) && g.rows < (int64_t(1) << 31) && g.a_rows < (int64_t(1) << 31) &&
         k_contiguous_16(g.a, g.a_stride_k, g.a_stride_m) &&
         k_contiguous_16(g.b, g.b_stride_k, g.b_stride_n) && g.b_stride_e % 16 == 0;
}

// As many warps on one weight tile's K as leave each at least 4 k-blocks.
int k_warps_for(int64_t K) {
  const int64_t k_blocks = ceil_div(K, grouped::kBlockK);
  int k_warps = grouped::kWarps;
  while (k_warps > 1 && k_blocks < 4 * k_warps) k_warps /= 2;
  return k_warps;
}

template <int WR, int TN>
Status launch(const GroupedParams& params, unsigned experts_in_grid, cudaStream_t stream) {
  const int rows_per_cta = grouped::kWarps / params.k_warps * 16 * WR;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ceil_div(params.g.N, rows_per_cta)), experts_in_grid, 1);
  cfg.blockDim = dim3(grouped::kThreads);
  cfg.stream = stream;
  const cudaError_t err = pdl::launch_programmatic(cfg, grouped::fp8_grouped_kernel<WR, TN>, params);
  if (err == cudaSuccess) return kOk;
  cudaGetLastError();
  return cudaGetErrorString(err);
}

}  // namespace

bool tiles_want_scales_copied(const GroupedGemmArgs& args) {
  if (args.a_scales_m_contiguous_16() || !takes(args)) return false;
  GroupedGemmArgs copied = args;  // as the copy lies: a fresh (aligned) allocation, rows padded to 4
  copied.a_scale = nullptr;
  copied.a_scale_stride_m = 1;
  copied.a_scale_stride_kb = ceil_div(args.rows, int64_t(4)) * 4;
  return grouped_tiles_take(copied);
}

Status try_grouped_gemm(const GroupedGemmArgs& args, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (!takes(args)) return kOk;
  if (args.rows == 0 || args.experts == 0) {
    *launched = true;
    return kOk;
  }
  // The tiles whenever the layout allows: faster than the streaming kernel below from 1 token on (H200,
  // DeepSeek-V3's experts under CUDA graphs: 70 vs 90 us for gate/up at 1 token, 1.5x at 64, 10x at 4,096).
  const int64_t rows_per_expert = args.rows_per_expert();
  const TileHeights heights = rows_per_expert >= kTileRowsForMixed ? TileHeights::kMixed : TileHeights::k64;
  if (args.silu_q != nullptr) {  // only the 64-row tiles do SiLU-and-mul; where they refuse, nothing runs
    *launched = launch_grouped_tiles(args, heights, stream) == kOk;
    return kOk;
  }
  // A descriptor or shared-memory limit the driver refuses leaves the problem to the paths below.
  if (grouped_tiles_take(args) && launch_grouped_tiles(args, heights, stream) == kOk) {
    *launched = true;
    return kOk;
  }
  // The streaming kernel, unless the binding's loop of dense GEMMs is wanted (faster outside a capture).
  constexpr int64_t kMaxGridY = 65535;
  const int64_t experts_in_grid = args.masked ? args.experts : std::min(args.experts, args.rows);
  if (!args.one_launch || experts_in_grid > kMaxGridY) return kOk;
  *launched = true;
  // Up to 8 rows per expert fit one token tile, more take two.
  const GroupedParams params{args, k_warps_for(args.K)};
  return rows_per_expert > 8 ? launch<1, 2>(params, unsigned(experts_in_grid), stream)
                             : launch<1, 1>(params, unsigned(experts_in_grid), stream);
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
