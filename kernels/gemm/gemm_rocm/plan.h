#pragma once
// What the launcher runs for a problem: the MFMA path (tile table configuration, one loader per
// operand layout) or the general kernel, and the split-K count. Plain C++ (constexpr), shared by
// the launcher and the host emulation of the kernels (kernels/gemm/tests/rocm_emulator.cpp).
#include <cstdint>

#include "gemm_common/gemm_args.h"
#include "gemm_rocm/tile_configs.h"

namespace fp8gemm::rocm {

// How an operand's (row, k) bytes sit in memory; the row is M for A and N for B.
enum class Layout : int { kContiguousK = 0, kContiguousRows = 1 };

constexpr int64_t kVectorAlignment = 16;  // bytes of the MFMA loaders' vector accesses

struct Plan {
  bool mfma;  // false: the general kernel
  Layout layout_a;
  Layout layout_b;
  int tile_id;
  int split_k;
};

// The split count used: the configuration's, never more than the scale blocks.
constexpr int effective_split_k(int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return 1;
  const int64_t k_blocks = ceil_div(k, kKBlock);
  const int split_k = select_config(m, n, k).split_k;
  return k_blocks < split_k ? (k_blocks > 0 ? int(k_blocks) : 1) : split_k;
}

// The MFMA loader that takes an operand: K-contiguous or row-contiguous, with 16-byte aligned
// vector accesses. False for any other layout (the general kernel computes those).
inline bool mfma_layout(const uint8_t* ptr, int64_t stride_row, int64_t stride_k, Layout* layout) {
  const bool base_aligned = reinterpret_cast<uintptr_t>(ptr) % kVectorAlignment == 0;
  if (stride_k == 1 && base_aligned && stride_row % kVectorAlignment == 0) {
    *layout = Layout::kContiguousK;
    return true;
  }
  if (stride_row == 1 && base_aligned && stride_k % kVectorAlignment == 0) {
    *layout = Layout::kContiguousRows;
    return true;
  }
  return false;
}

inline Plan make_plan(const GemmArgs& args) {
  Plan plan{false, Layout::kContiguousK, Layout::kContiguousK, 0, 1};
  plan.mfma = mfma_layout(args.a, args.a_stride_m, args.a_stride_k, &plan.layout_a) &&
              mfma_layout(args.b, args.b_stride_n, args.b_stride_k, &plan.layout_b);
  if (plan.mfma) {
    plan.tile_id = select_config(args.M, args.N, args.K).tile_id;
    plan.split_k = effective_split_k(args.M, args.N, args.K);
  }
  return plan;
}

}  // namespace fp8gemm::rocm
