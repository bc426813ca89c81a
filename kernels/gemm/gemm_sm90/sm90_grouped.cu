// Host side of the Hopper grouped (mixture-of-experts) GEMM: which problems the kernel takes, its
// configuration and its launch (kernel: sm90_grouped.cuh; entry point declared in
// gemm_cuda/sm90_hook.h).
#include <cuda_runtime.h>

#include <algorithm>

#include "gemm_cuda/sm90_hook.h"
#include "gemm_sm90/sm90_grouped.cuh"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

using grouped::GroupedParams;

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
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cudaError_t err = cudaLaunchKernelEx(&cfg, grouped::fp8_grouped_kernel<WR, TN>, params);
  if (err != cudaSuccess) {  // no programmatic launch here: plain stream order
    cudaGetLastError();
    cfg.numAttrs = 0;
    err = cudaLaunchKernelEx(&cfg, grouped::fp8_grouped_kernel<WR, TN>, params);
  }
  if (err == cudaSuccess) return kOk;
  cudaGetLastError();
  return cudaGetErrorString(err);
}

}  // namespace

Status try_grouped_gemm(const GroupedGemmArgs& args, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (!takes(args)) return kOk;
  *launched = true;
  if (args.rows == 0 || args.experts == 0) return kOk;
  constexpr int64_t kMaxGridY = 65535;
  const int64_t experts_in_grid = args.masked ? args.experts : std::min(args.experts, args.rows);
  if (experts_in_grid > kMaxGridY) {
    *launched = false;
    return kOk;
  }
  // Rows per expert that owns any: up to 8 fit one token tile, more take two.
  const int64_t rows_per_expert = args.masked ? args.capacity : ceil_div(args.rows, experts_in_grid);
  const GroupedParams params{args, k_warps_for(args.K)};
  return rows_per_expert > 8 ? launch<1, 2>(params, unsigned(experts_in_grid), stream)
                             : launch<1, 1>(params, unsigned(experts_in_grid), stream);
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
