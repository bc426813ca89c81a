#pragma once
// Activation quantization to FP8 with one scale per row and 128 columns, shared by every backend
// (CPU loop, CUDA and HIP kernels). The one definition of the rounding:
//
//   amax  = max |x| over the group (NaN if the group holds a NaN)
//   scale = amax / fp8_max                      (IEEE division; 448 for e4m3fn, 240 for e4m3fnuz)
//   q     = fp8(clamp(x / d, -fp8_max, fp8_max))  with d = scale if scale > 0 else 1
//
// fp8() rounds to nearest even as torch's casts do: NaN stays NaN (e4m3fn keeps its sign,
// e4m3fnuz has one NaN), e4m3fnuz has no negative zero. Plain integer arithmetic: no float
// denormal is consumed by the rounding, so flush-to-zero modes cannot change a code.
#include <cmath>
#include <cstdint>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/gemm_args.h"

namespace fp8gemm {

// IEEE division (round to nearest) whatever the compiler's fast-math flags.
#if defined(__CUDA_ARCH__)
#define FP8GEMM_DIV_RN(a, b) __fdiv_rn(a, b)
#else
#define FP8GEMM_DIV_RN(a, b) ((a) / (b))
#endif

constexpr float kE4m3fnMax = 448.0f;
constexpr float kE4m3fnuzMax = 240.0f;
constexpr uint32_t kFp32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kFp32Inf = 0x7F800000u;

FP8GEMM_HD float fp8_max(Fp8Format format) {
  return format == Fp8Format::E4M3FNUZ ? kE4m3fnuzMax : kE4m3fnMax;
}

// |x| as fp32 bits: as unsigned integers they order like the magnitudes, with NaN above +inf,
// so an integer max over a group is its amax and propagates NaN.
FP8GEMM_HD uint32_t abs_bits(float x) { return float_to_bits(x) & kFp32AbsMask; }

// Magnitude bits -> the fp8 magnitude code (0..0x7F and beyond, before the NaN check), RNE.
FP8GEMM_HD uint32_t round_magnitude(uint32_t mag, int bias) {
  const int exponent = int(mag >> kFp32MantissaBits);  // biased fp32 exponent; 0 for fp32 denormals
  const uint32_t mantissa = mag & ((1u << kFp32MantissaBits) - 1);
  const int min_normal_exponent = kFp32Bias + 1 - bias;  // fp32 biased exponent of fp8's 2^(1-bias)
  // Subnormal fp8 values are multiples of 2^(1 - bias - 3); everything is an integer mantissa
  // shifted right, rounded to nearest even.
  uint32_t significand;
  int shift;
  if (exponent >= min_normal_exponent) {
    significand = mantissa;
    shift = int(kFp32MantissaBits - kFp8MantissaBits);
  } else {
    significand = exponent == 0 ? mantissa : mantissa | (1u << kFp32MantissaBits);
    shift = int(kFp32MantissaBits - kFp8MantissaBits) + min_normal_exponent - (exponent == 0 ? 1 : exponent);
    if (shift > 25) return 0;  // below half of the smallest subnormal step
  }
  uint32_t code = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (code & 1u))) ++code;  // a carry moves into the exponent
  if (exponent >= min_normal_exponent)
    code += uint32_t(exponent - min_normal_exponent + 1) << kFp8MantissaBits;
  return code;
}

// fp32 -> fp8 code, rounding to nearest even; NaN and values past the largest finite one become
// NaN (the quantizer clamps first, so only NaN reaches that).
FP8GEMM_HD uint8_t encode_fp8(float x, Fp8Format format) {
  const uint32_t bits = float_to_bits(x);
  const uint32_t mag = bits & kFp32AbsMask;
  const uint32_t sign = (bits >> 24) & kFp8SignBit;
  if (format == Fp8Format::E4M3FNUZ) {
    if (mag > kFp32Inf) return uint8_t(kFp8SignBit);
    const uint32_t code = round_magnitude(mag, kE4m3fnuzBias);
    if (code > kFp8Magnitude) return uint8_t(kFp8SignBit);
    return uint8_t(code == 0 ? 0 : code | sign);
  }
  if (mag > kFp32Inf) return uint8_t(sign | kFp8Magnitude);
  const uint32_t code = round_magnitude(mag, kE4m3fnBias);
  return uint8_t(sign | (code >= kFp8Magnitude ? kFp8Magnitude : code));
}

// Four codes packed little-endian. e4m3fn on sm_89+ uses the hardware's conversion (round to
// nearest even, saturating; the values are already clamped, so it equals encode_fp8 but for the
// sign of NaN, which it drops); e4m3fnuz, older GPUs and the host the bit arithmetic above.
FP8GEMM_HD uint32_t encode4(const float* v, Fp8Format format) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (format == Fp8Format::E4M3FN) {
    uint16_t lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(v[1]), "f"(v[0]));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(v[3]), "f"(v[2]));
    return uint32_t(lo) | uint32_t(hi) << 16;
  }
#endif
  return uint32_t(encode_fp8(v[0], format)) | uint32_t(encode_fp8(v[1], format)) << 8 |
         uint32_t(encode_fp8(v[2], format)) << 16 | uint32_t(encode_fp8(v[3], format)) << 24;
}

// The group's scale from its amax bits, and the divisor its values are quantized with.
struct GroupScale {
  float scale;
  float divisor;
};

FP8GEMM_HD GroupScale group_scale(uint32_t amax_bits, Fp8Format format) {
  const float scale = FP8GEMM_DIV_RN(bits_to_float(amax_bits), fp8_max(format));
  return {scale, scale > 0.0f ? scale : 1.0f};  // all-zero (and NaN) groups divide by 1
}

// x / divisor limited to [-limit, limit]; NaN passes through.
FP8GEMM_HD float clamp_quotient(float quotient, float limit) {
  return quotient == quotient ? (quotient < -limit ? -limit : (quotient > limit ? limit : quotient))
                              : quotient;
}

FP8GEMM_HD uint8_t quantize_value(float x, float divisor, Fp8Format format) {
  return encode_fp8(clamp_quotient(FP8GEMM_DIV_RN(x, divisor), fp8_max(format)), format);
}

// Input element types, as raw bits.
enum class InputType : int32_t { BF16 = 0, F16 = 1, F32 = 2 };

FP8GEMM_HD float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bits_to_float(sign | kFp32Inf | (mantissa << 13));
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Subnormal half: mantissa * 2^-24, exact in fp32 (a small integer times a power of two).
  const float magnitude = float(mantissa) * bits_to_float(uint32_t(kFp32Bias - 24) << kFp32MantissaBits);
  return bits_to_float(sign | float_to_bits(magnitude));
}

// SiLU(gate) * up in fp32, for the quantization fused with SiLU-and-mul.
FP8GEMM_HD float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// What to quantize: q row-major FP8 and scale[row * scale_stride_m + kb * scale_stride_kb] from x (M, K),
// or with silu_and_mul from x (M, 2K) as silu(x[:, :K]) * x[:, K:]. x's row m goes to q's row m, or with
// the scatter below to q's rows q_row[m, :].
struct QuantizeArgs {
  int64_t M = 0, K = 0;  // of x (K: of what it quantizes to)
  InputType input = InputType::BF16;
  const void* x = nullptr;  // element strides
  int64_t x_stride_m = 0, x_stride_k = 0;
  bool silu_and_mul = false;
  Fp8Format format = Fp8Format::E4M3FN;
  uint8_t* q = nullptr;  // (M, K) or (q_rows, K), K contiguous
  int64_t q_stride_m = 0;
  float* scale = nullptr;  // (M or q_rows, ceil(K/128)) in any strides; gemm_nt reads strides (1, rows)
  int64_t scale_stride_m = 0, scale_stride_kb = 0;
  // Optional scatter: x's row m goes to q's rows q_row[m * copies + c] for c < copies instead of row m
  // (an entry outside 0..q_rows - 1 is skipped; rows of q that no entry names are left as they were).
  const int32_t* q_row = nullptr;
  int32_t copies = 0;
  int64_t q_rows = 0;

  FP8GEMM_HD int64_t k_blocks() const { return ceil_div(K, kScaleBlock); }
};

// The row of q that copy c of x's row m goes to, or -1 for none.
FP8GEMM_HD int64_t destination_row(const QuantizeArgs& a, int64_t m, int32_t c) {
  if (a.q_row == nullptr) return m;
  const int64_t r = a.q_row[m * a.copies + c];
  return r >= 0 && r < a.q_rows ? r : -1;
}

// SiLU-and-mul alone: out (M, K) = silu(x[:, :K]) * x[:, K:], x and out of one dtype with
// K-contiguous rows.
struct SiluMulArgs {
  int64_t M = 0, K = 0;
  InputType dtype = InputType::BF16;
  const void* x = nullptr;
  int64_t x_stride_m = 0;
  void* out = nullptr;
  int64_t out_stride_m = 0;
};

FP8GEMM_HD float load_input(const QuantizeArgs& a, int64_t m, int64_t k) {
  const int64_t at = m * a.x_stride_m + k * a.x_stride_k;
  switch (a.input) {
    case InputType::BF16:
      return bf16_to_float(static_cast<const uint16_t*>(a.x)[at]);
    case InputType::F16:
      return f16_to_float(static_cast<const uint16_t*>(a.x)[at]);
    default:
      return static_cast<const float*>(a.x)[at];
  }
}

// Element k of what x's row r gives to quantize: x[r, k], or silu(gate) * up.
FP8GEMM_HD float quantize_source(const QuantizeArgs& a, int64_t r, int64_t k) {
  if (!a.silu_and_mul) return load_input(a, r, k);
  return silu_mul(load_input(a, r, k), load_input(a, r, k + a.K));
}

}  // namespace fp8gemm
