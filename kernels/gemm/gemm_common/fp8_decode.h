#pragma once
// Exact FP8 (e4m3fn / e4m3fnuz) to fp32 decoding and fp32 to bf16 rounding, shared by the
// CPU and CUDA paths. Plain bit arithmetic: no float denormals are produced or consumed,
// so flush-to-zero modes cannot change the result.
#include <cstdint>
#include <cstring>

#include "gemm_common/gemm_args.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FP8GEMM_HD __host__ __device__ __forceinline__
#else
#define FP8GEMM_HD inline
#endif

namespace fp8gemm {

constexpr uint32_t kFp8SignBit = 0x80;
constexpr uint32_t kFp8Magnitude = 0x7F;
constexpr uint32_t kFp8MantissaBits = 3;
constexpr uint32_t kFp8SubnormalLimit = 1u << kFp8MantissaBits;  // codes below: exponent 0
constexpr int kE4m3fnBias = 7;
constexpr int kE4m3fnuzBias = 8;
constexpr int kFp32Bias = 127;
constexpr uint32_t kFp32MantissaBits = 23;
constexpr uint32_t kFp32QuietNaN = 0x7FC00000u;

FP8GEMM_HD float bits_to_float(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

FP8GEMM_HD uint32_t float_to_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// e4m3fn: bias 7, NaN = S.1111.111, no infinities. e4m3fnuz: bias 8, NaN = 1.0000.000
// (the would-be negative zero), no infinities.
FP8GEMM_HD float decode_fp8(uint32_t code, Fp8Format format) {
  const bool fnuz = format == Fp8Format::E4M3FNUZ;
  const uint32_t magnitude = code & kFp8Magnitude;
  const uint32_t sign = (code & kFp8SignBit) << 24;
  const bool is_nan = fnuz ? code == kFp8SignBit : magnitude == kFp8Magnitude;
  if (is_nan) return bits_to_float(kFp32QuietNaN);
  const int bias = fnuz ? kE4m3fnuzBias : kE4m3fnBias;
  uint32_t bits;
  if (magnitude < kFp8SubnormalLimit) {
    // value = mantissa * 2^(1 - bias - 3): exact in fp32 as a small integer times a power of 2.
    const float unit =
        bits_to_float(uint32_t(kFp32Bias + 1 - bias - int(kFp8MantissaBits)) << kFp32MantissaBits);
    bits = float_to_bits(float(magnitude) * unit);
  } else {
    // Normal: move exponent and mantissa into place and rebias the exponent.
    bits = (magnitude << (kFp32MantissaBits - kFp8MantissaBits)) +
           (uint32_t(kFp32Bias - bias) << kFp32MantissaBits);
  }
  return bits_to_float(bits | sign);
}

// Round to nearest even; NaN stays a (quiet) NaN with its sign.
FP8GEMM_HD uint16_t float_to_bf16_bits(float f) {
  const uint32_t bits = float_to_bits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return uint16_t((bits + rounding) >> 16);
}

FP8GEMM_HD float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

// Output column n's fp32 value with the call's optional bias added, before rounding to bf16.
FP8GEMM_HD float add_bias(const GemmArgs& args, int64_t n, float value) {
  return args.bias != nullptr ? value + bf16_to_float(args.bias[n * args.bias_stride]) : value;
}

}  // namespace fp8gemm
