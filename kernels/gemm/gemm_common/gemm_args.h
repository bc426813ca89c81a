#pragma once
// The one description of a block-scaled FP8 GEMM that every backend's launcher takes.
// No torch header here: the binding fills this from tensors after checking them.
//
//   out[m, n] = sum_k a[m, k] * a_scale[k / 128, m] * b[k, n] * b_scale[k / 128, n / 128]
//
// Strides are in elements (bytes for the FP8 operands) and may be anything, including
// column-major layouts. gemm_nt is the same call with b = b_nk^T, b_scale = b_scale_nk^T.
#include <cstdint>

#include "gemm_common/scale_block.h"

namespace fp8gemm {

enum class Fp8Format : int32_t { E4M3FN = 0, E4M3FNUZ = 1 };

struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;
  Fp8Format format = Fp8Format::E4M3FN;

  const uint8_t* a = nullptr;  // (M, K)
  int64_t a_stride_m = 0, a_stride_k = 0;
  const uint8_t* b = nullptr;  // (K, N)
  int64_t b_stride_k = 0, b_stride_n = 0;
  const float* a_scale = nullptr;  // (ceil(K/128), M)
  int64_t a_scale_stride_kb = 0, a_scale_stride_m = 0;
  const float* b_scale = nullptr;  // (ceil(K/128), ceil(N/128))
  int64_t b_scale_stride_kb = 0, b_scale_stride_nb = 0;
  uint16_t* out = nullptr;  // (M, N) bf16 bits
  int64_t out_stride_m = 0, out_stride_n = 0;
  // Optional bias, bf16 bits bias[n * bias_stride], added to the fp32 result before rounding.
  const uint16_t* bias = nullptr;
  int64_t bias_stride = 0;
  // A was written by the quantization kernel queued just before on the same stream
  // (quantize_cuda), which waits for everything queued before it and then lets the next kernel
  // launch: the Hopper kernels may then launch programmatically and read B before A is ready.
  bool after_quantize = false;

  int64_t k_blocks() const { return ceil_div(K, kScaleBlock); }
  int64_t n_blocks() const { return ceil_div(N, kScaleBlock); }
};

// Whether A's scales lie as TMA reads them (Hopper's wgmma kernels): M-contiguous, each K block's
// rows 16-byte aligned and apart.
inline bool a_scales_m_contiguous_16(const float* a_scale, int64_t stride_m, int64_t stride_kb, int64_t rows,
                                     int64_t k_blocks) {
  return stride_m == 1 && reinterpret_cast<uintptr_t>(a_scale) % 16 == 0 &&
         (k_blocks == 1 || (stride_kb % 4 == 0 && stride_kb >= rows));
}

// Launchers return kOk or a static message naming what was wrong; they never abort.
using Status = const char*;
constexpr Status kOk = nullptr;

}  // namespace fp8gemm
