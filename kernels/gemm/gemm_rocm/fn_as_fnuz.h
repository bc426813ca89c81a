#pragma once
// gfx942's FP8 MFMA reads e4m3fnuz codes. An e4m3fn code read as e4m3fnuz is worth exactly
// half its e4m3fn value (same bits, exponent bias 8 instead of 7), except for two codes:
//   0x80 (e4m3fn -0) is the e4m3fnuz NaN  -> mapped to 0x00 (+0, the same value);
//   S.1111.111 (e4m3fn NaN) is +-240      -> mapped to 0x80 (the e4m3fnuz NaN).
// So the MFMA path remaps those codes while loading and multiplies the B scale by
// kFnAsFnuzCorrection = 2 * 2. constexpr: usable in device code and in the host-side check
// of kernels/gemm/tests/rocm_host_check.cpp.
#include <cstdint>

namespace fp8gemm::rocm {

constexpr uint32_t kFnNegativeZero = 0x80;
constexpr uint32_t kFnNaNMagnitude = 0x7F;
constexpr uint32_t kFnuzNaN = 0x80;
constexpr uint32_t kFp8ByteMask = 0xFF;
constexpr float kFnAsFnuzCorrection = 4.0f;

// Applies the remap to each of the 4 codes packed in `word`.
constexpr uint32_t fn_to_half_fnuz(uint32_t word) {
  uint32_t out = 0;
  for (int byte = 0; byte < 4; ++byte) {
    uint32_t code = (word >> (8 * byte)) & kFp8ByteMask;
    if (code == kFnNegativeZero) {
      code = 0;
    } else if ((code & kFnNaNMagnitude) == kFnNaNMagnitude) {
      code = kFnuzNaN;
    }
    out |= code << (8 * byte);
  }
  return out;
}

}  // namespace fp8gemm::rocm
