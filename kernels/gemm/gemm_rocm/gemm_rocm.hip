// Launcher of the ROCm FP8 GEMM: picks the configuration from the tile table, the MFMA path
// for operand layouts its loaders take (K-contiguous or row-contiguous, 16-byte aligned) and
// the general kernel for every other layout, and the split-K reduction where the
// configuration splits K. Returns a Status; never aborts.
#include <hip/hip_runtime.h>

#include <cstdint>
#include <utility>

#include "gemm_rocm/gemm_rocm.h"
#include "gemm_rocm/gemm_rocm_kernels.h"
#include "gemm_rocm/plan.h"
#include "gemm_rocm/tile_configs.h"

namespace fp8gemm {
namespace {

using rocm::Layout;

constexpr int64_t kMaxReduceBlocks = 4 * rocm::kNumComputeUnits;

Status launch_status() {
  return hipGetLastError() == hipSuccess ? kOk : "gemm_rocm: a kernel launch failed (hipGetLastError)";
}

template <int kBlockM, int kBlockN, Layout kLayoutA, Layout kLayoutB>
Status launch_mfma(const GemmArgs& args, int split_k, float* partials, hipStream_t stream) {
  const int64_t tiles_n = ceil_div(args.N, kBlockN);
  const dim3 grid(unsigned(ceil_div(args.M, kBlockM) * tiles_n), unsigned(split_k));
  rocm::mfma_gemm_kernel<kBlockM, kBlockN, kLayoutA, kLayoutB>
      <<<grid, rocm::kThreads, 0, stream>>>(args, partials, split_k, tiles_n);
  return launch_status();
}

template <int kBlockM, int kBlockN>
Status launch_tile(const GemmArgs& args, Layout layout_a, Layout layout_b, int split_k, float* partials,
                   hipStream_t stream) {
  constexpr Layout K = Layout::kContiguousK;
  constexpr Layout R = Layout::kContiguousRows;
  if (layout_a == K && layout_b == K)
    return launch_mfma<kBlockM, kBlockN, K, K>(args, split_k, partials, stream);
  if (layout_a == K && layout_b == R)
    return launch_mfma<kBlockM, kBlockN, K, R>(args, split_k, partials, stream);
  if (layout_a == R && layout_b == K)
    return launch_mfma<kBlockM, kBlockN, R, K>(args, split_k, partials, stream);
  return launch_mfma<kBlockM, kBlockN, R, R>(args, split_k, partials, stream);
}

using TileLauncher = Status (*)(const GemmArgs&, Layout, Layout, int, float*, hipStream_t);

// Instantiates launch_tile for every entry of the tile table and calls the one for tile_id
// (select_config only returns ids of the table).
template <size_t... kIds>
Status launch_table_tile(int tile_id, const GemmArgs& args, Layout layout_a, Layout layout_b, int split_k,
                         float* partials, hipStream_t stream, std::index_sequence<kIds...>) {
  static constexpr TileLauncher kLaunchers[] = {
      &launch_tile<rocm::kTileShapes[kIds].block_m, rocm::kTileShapes[kIds].block_n>...};
  return kLaunchers[tile_id](args, layout_a, layout_b, split_k, partials, stream);
}

Status launch_general(const GemmArgs& args, hipStream_t stream) {
  const int64_t tiles_n = ceil_div(args.N, rocm::kGeneralTile);
  const unsigned blocks = unsigned(ceil_div(args.M, rocm::kGeneralTile) * tiles_n);
  rocm::general_gemm_kernel<<<blocks, rocm::kGeneralThreads, 0, stream>>>(args, tiles_n);
  return launch_status();
}

Status launch_reduce(const GemmArgs& args, const float* partials, int split_k, hipStream_t stream) {
  int64_t blocks = ceil_div(args.M * args.N, rocm::kReduceThreads);
  if (blocks > kMaxReduceBlocks) blocks = kMaxReduceBlocks;
  rocm::splitk_reduce_kernel<<<unsigned(blocks), rocm::kReduceThreads, 0, stream>>>(args, partials, split_k,
                                                                                    blocks);
  return launch_status();
}

}  // namespace

size_t gemm_rocm_workspace_bytes(const GemmArgs& args) {
  const int split_k = rocm::effective_split_k(args.M, args.N, args.K);
  return split_k > 1 ? size_t(split_k) * size_t(args.M) * size_t(args.N) * sizeof(float) : 0;
}

Status gemm_rocm(const GemmArgs& args, void* workspace, size_t workspace_bytes, hipStream_t stream) {
  if (args.M < 0 || args.N < 0 || args.K < 0) return "gemm_rocm: M, N and K must be >= 0";
  if (args.M == 0 || args.N == 0) return kOk;
  if (args.out == nullptr) return "gemm_rocm: out is null";
  if (args.K > 0 &&
      (args.a == nullptr || args.b == nullptr || args.a_scale == nullptr || args.b_scale == nullptr))
    return "gemm_rocm: an operand or scale pointer is null";

  const rocm::Plan plan = rocm::make_plan(args);
  if (!plan.mfma) return launch_general(args, stream);
  float* partials = nullptr;
  if (plan.split_k > 1) {
    if (workspace == nullptr || workspace_bytes < gemm_rocm_workspace_bytes(args))
      return "gemm_rocm: workspace smaller than gemm_rocm_workspace_bytes(args)";
    partials = static_cast<float*>(workspace);
  }
  const Status status = launch_table_tile(plan.tile_id, args, plan.layout_a, plan.layout_b, plan.split_k,
                                          partials, stream, std::make_index_sequence<rocm::kNumTileShapes>{});
  if (status != kOk || plan.split_k == 1) return status;
  return launch_reduce(args, partials, plan.split_k, stream);
}

}  // namespace fp8gemm
