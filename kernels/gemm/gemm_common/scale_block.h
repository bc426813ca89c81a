#pragma once
// The scale block of the op's layout, for every backend: one fp32 scale covers kScaleBlock
// values of K (per row of a) and kScaleBlock x kScaleBlock values of b, so a dimension of n
// values has ceil_div(n, kScaleBlock) scales. The Python twin is torch-ext/gemm/_scale.py.
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define FP8GEMM_HOST_DEVICE __host__ __device__
#else
#define FP8GEMM_HOST_DEVICE
#endif

namespace fp8gemm {

constexpr int kScaleBlock = 128;

// The smallest integer >= a / b, for a >= 0 and b > 0.
FP8GEMM_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace fp8gemm
