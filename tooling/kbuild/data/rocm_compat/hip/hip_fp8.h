#pragma once
// kbuild's stand-in for <hip/hip_fp8.h> (ROCm 6.2 and later), used only by kbuild.build.rocm's
// device-only compile check and only when the installed HIP headers lack that header (Debian 12
// ships HIP 5.2.3): kbuild.build.rocm searches this folder after the system headers (-idirafter), so a
// real ROCm install's header wins. It declares the FP8 types and conversions of AMD's documented
// API (FNUZ and OCP, E4M3 and E5M2; storage types; __hip_cvt_* functions) with portable
// round-to-nearest-even conversions in software, where ROCm uses the gfx942 conversion
// instructions. Real ROCm builds use the real header.
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

typedef unsigned char __hip_fp8_storage_t;
typedef unsigned short int __hip_fp8x2_storage_t;
typedef unsigned int __hip_fp8x4_storage_t;

enum __hip_saturation_t { __HIP_NOSAT = 0, __HIP_SATFINITE = 1 };
enum __hip_fp8_interpretation_t { __HIP_E4M3_FNUZ = 0, __HIP_E5M2_FNUZ = 1, __HIP_E4M3 = 2, __HIP_E5M2 = 3 };

namespace kbuild_hip_fp8 {

struct Format {
  int mantissa_bits;
  int bias;
  bool fnuz;          // no infinity, no negative zero, NaN is 0x80
  unsigned max_code;  // the largest finite magnitude
  unsigned overflow;  // the magnitude an unsaturated overflow gives (NaN or infinity)
};

__host__ __device__ constexpr Format format(__hip_fp8_interpretation_t interpretation) {
  return interpretation == __HIP_E4M3_FNUZ ? Format{3, 8, true, 0x7f, 0x80}
         : interpretation == __HIP_E5M2_FNUZ ? Format{2, 16, true, 0x7f, 0x80}
         : interpretation == __HIP_E4M3    ? Format{3, 7, false, 0x7e, 0x7f}
                                           : Format{2, 15, false, 0x7b, 0x7c};
}

__host__ __device__ inline float from_bits(unsigned bits) {
  float value;
  __builtin_memcpy(&value, &bits, sizeof(value));
  return value;
}

__host__ __device__ inline unsigned to_bits(float value) {
  unsigned bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// 2^exponent for -126 <= exponent <= 127.
__host__ __device__ inline float pow2(int exponent) { return from_bits(static_cast<unsigned>(exponent + 127) << 23); }

__host__ __device__ inline float decode(__hip_fp8_storage_t x, __hip_fp8_interpretation_t interpretation) {
  const Format f = format(interpretation);
  const int exponent_bits = 7 - f.mantissa_bits;
  const unsigned magnitude = x & 0x7fu;
  const float sign = (x & 0x80u) ? -1.0f : 1.0f;
  if (f.fnuz && x == 0x80u) return from_bits(0x7fc00000u);
  if (!f.fnuz && magnitude > f.max_code) {
    return magnitude == f.overflow && f.overflow != 0x7fu ? sign * from_bits(0x7f800000u) : from_bits(0x7fc00000u);
  }
  const int exponent = static_cast<int>(magnitude >> f.mantissa_bits) & ((1 << exponent_bits) - 1);
  const unsigned mantissa = magnitude & ((1u << f.mantissa_bits) - 1u);
  if (exponent == 0) return sign * static_cast<float>(mantissa) * pow2(1 - f.bias - f.mantissa_bits);
  return sign * static_cast<float>(mantissa | (1u << f.mantissa_bits)) * pow2(exponent - f.bias - f.mantissa_bits);
}

__host__ __device__ inline __hip_fp8_storage_t encode(float value, __hip_saturation_t saturation,
                                                      __hip_fp8_interpretation_t interpretation) {
  const Format f = format(interpretation);
  const unsigned bits = to_bits(value);
  const unsigned sign = (bits >> 24) & 0x80u;
  const unsigned nan = f.fnuz ? 0x80u : (sign | 0x7fu);
  const unsigned overflow = f.fnuz ? 0x80u : (sign | f.overflow);
  const unsigned saturated = sign | f.max_code;
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<__hip_fp8_storage_t>(nan);
  if ((bits & 0x7fffffffu) == 0x7f800000u) {
    return static_cast<__hip_fp8_storage_t>(saturation == __HIP_SATFINITE ? saturated : overflow);
  }
  const float magnitude = from_bits(bits & 0x7fffffffu);
  int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127;
  if (exponent < 1 - f.bias) exponent = 1 - f.bias;
  if (exponent > 15) exponent = 15;
  // Round magnitude / 2^(exponent - mantissa_bits) to the nearest integer, ties to even.
  const float scaled = magnitude * pow2(f.mantissa_bits - exponent);
  unsigned steps = static_cast<unsigned>(scaled);
  const float rest = scaled - static_cast<float>(steps);
  if (rest > 0.5f || (rest == 0.5f && (steps & 1u))) ++steps;
  const unsigned implicit = 1u << f.mantissa_bits;
  if (steps >= 2 * implicit) {
    steps >>= 1;
    ++exponent;
  }
  unsigned code;
  if (steps < implicit) {
    code = steps;  // subnormal (or zero)
  } else {
    const int field = exponent + f.bias;
    code = field >= (1 << (7 - f.mantissa_bits)) ? 0xffu : (static_cast<unsigned>(field) << f.mantissa_bits) | (steps - implicit);
  }
  if (code > f.max_code) return static_cast<__hip_fp8_storage_t>(saturation == __HIP_SATFINITE ? saturated : overflow);
  if (code == 0 && f.fnuz) return 0;
  return static_cast<__hip_fp8_storage_t>(sign | code);
}

}  // namespace kbuild_hip_fp8

__host__ __device__ inline __hip_fp8_storage_t __hip_cvt_float_to_fp8(const float f, const __hip_saturation_t sat,
                                                                      const __hip_fp8_interpretation_t type) {
  return kbuild_hip_fp8::encode(f, sat, type);
}

__host__ __device__ inline __hip_fp8_storage_t __hip_cvt_double_to_fp8(const double d, const __hip_saturation_t sat,
                                                                       const __hip_fp8_interpretation_t type) {
  return kbuild_hip_fp8::encode(static_cast<float>(d), sat, type);
}

__host__ __device__ inline __hip_fp8x2_storage_t __hip_cvt_float2_to_fp8x2(const float2 f2, const __hip_saturation_t sat,
                                                                           const __hip_fp8_interpretation_t type) {
  return static_cast<__hip_fp8x2_storage_t>(kbuild_hip_fp8::encode(f2.x, sat, type) |
                                            (kbuild_hip_fp8::encode(f2.y, sat, type) << 8));
}

__host__ __device__ inline __half_raw __hip_cvt_fp8_to_halfraw(const __hip_fp8_storage_t x,
                                                               const __hip_fp8_interpretation_t type) {
  return static_cast<__half_raw>(__half(kbuild_hip_fp8::decode(x, type)));
}

__host__ __device__ inline __hip_fp8_storage_t __hip_cvt_halfraw_to_fp8(const __half_raw x, const __hip_saturation_t sat,
                                                                        const __hip_fp8_interpretation_t type) {
  return kbuild_hip_fp8::encode(static_cast<float>(__half(x)), sat, type);
}

// One FP8 number (`__x` holds its bits; it converts from and to float, double, int, __half and
// bfloat16), and its pair and quad types.
#define KBUILD_HIP_FP8_TYPE(NAME, PAIR, QUAD, INTERPRETATION)                                                               \
  struct NAME {                                                                                               \
    __hip_fp8_storage_t __x;                                                                                  \
    static constexpr __hip_saturation_t __default_saturation = __HIP_SATFINITE;                               \
    static constexpr __hip_fp8_interpretation_t __default_interpret = INTERPRETATION;                         \
    NAME() = default;                                                                                         \
    __host__ __device__ NAME(const float f) : __x(__hip_cvt_float_to_fp8(f, __default_saturation, INTERPRETATION)) {} \
    __host__ __device__ NAME(const double d) : NAME(static_cast<float>(d)) {}                                 \
    __host__ __device__ NAME(const int i) : NAME(static_cast<float>(i)) {}                                    \
    __host__ __device__ NAME(const unsigned int u) : NAME(static_cast<float>(u)) {}                           \
    __host__ __device__ NAME(const __half h) : NAME(static_cast<float>(h)) {}                                 \
    __host__ __device__ NAME(const __hip_bfloat16 b) : NAME(static_cast<float>(b)) {}                         \
    __host__ __device__ operator float() const { return kbuild_hip_fp8::decode(__x, INTERPRETATION); }        \
    __host__ __device__ explicit operator double() const { return static_cast<double>(float(*this)); }        \
    __host__ __device__ explicit operator __half() const { return __half(float(*this)); }                    \
    __host__ __device__ explicit operator __hip_bfloat16() const { return __hip_bfloat16(float(*this)); }     \
    __host__ __device__ explicit operator bool() const { return (__x & 0x7fu) != 0; }                         \
  };                                                                                                          \
  struct PAIR {                                                                                          \
    __hip_fp8x2_storage_t __x;                                                                                \
    PAIR() = default;                                                                                    \
    __host__ __device__ PAIR(const float2 f)                                                             \
        : __x(__hip_cvt_float2_to_fp8x2(f, __HIP_SATFINITE, INTERPRETATION)) {}                               \
    __host__ __device__ operator float2() const {                                                             \
      return make_float2(kbuild_hip_fp8::decode(__x & 0xffu, INTERPRETATION),                                      \
                    kbuild_hip_fp8::decode(__x >> 8, INTERPRETATION));                                        \
    }                                                                                                         \
  };                                                                                                          \
  struct QUAD {                                                                                          \
    __hip_fp8x4_storage_t __x;                                                                                \
    QUAD() = default;                                                                                    \
    __host__ __device__ QUAD(const float4 f)                                                             \
        : __x(__hip_cvt_float2_to_fp8x2(make_float2(f.x, f.y), __HIP_SATFINITE, INTERPRETATION) |                  \
              (static_cast<__hip_fp8x4_storage_t>(                                                            \
                   __hip_cvt_float2_to_fp8x2(make_float2(f.z, f.w), __HIP_SATFINITE, INTERPRETATION))               \
               << 16)) {}                                                                                     \
    __host__ __device__ operator float4() const {                                                             \
      return make_float4(kbuild_hip_fp8::decode(__x & 0xffu, INTERPRETATION),                                      \
                    kbuild_hip_fp8::decode((__x >> 8) & 0xffu, INTERPRETATION),                               \
                    kbuild_hip_fp8::decode((__x >> 16) & 0xffu, INTERPRETATION),                              \
                    kbuild_hip_fp8::decode(__x >> 24, INTERPRETATION));                                       \
    }                                                                                                         \
  };

KBUILD_HIP_FP8_TYPE(__hip_fp8_e4m3_fnuz, __hip_fp8x2_e4m3_fnuz, __hip_fp8x4_e4m3_fnuz, __HIP_E4M3_FNUZ)
KBUILD_HIP_FP8_TYPE(__hip_fp8_e5m2_fnuz, __hip_fp8x2_e5m2_fnuz, __hip_fp8x4_e5m2_fnuz, __HIP_E5M2_FNUZ)
KBUILD_HIP_FP8_TYPE(__hip_fp8_e4m3, __hip_fp8x2_e4m3, __hip_fp8x4_e4m3, __HIP_E4M3)
KBUILD_HIP_FP8_TYPE(__hip_fp8_e5m2, __hip_fp8x2_e5m2, __hip_fp8x4_e5m2, __HIP_E5M2)
#undef KBUILD_HIP_FP8_TYPE
