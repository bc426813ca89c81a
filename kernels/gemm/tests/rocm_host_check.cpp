// Host build of the ROCm path's plain-C++ parts, for test_rocm_model.py:
//   - reads "m n k" lines from stdin and prints "m n k tile_id split_k" from select_config,
//     so the Python model's mirror of the rule can be compared with the C++ one;
//   - checks fn_to_half_fnuz on all 256 codes: decode(remapped, e4m3fnuz) must be exactly
//     half of decode(code, e4m3fn), NaN for NaN. Exit status 1 and a message on a mismatch.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "gemm_common/fp8_decode.h"
#include "gemm_rocm/fn_as_fnuz.h"
#include "gemm_rocm/tile_configs.h"

namespace {

bool fn_remap_is_exact_half() {
  using fp8gemm::Fp8Format;
  constexpr uint32_t kCodes = 256;
  for (uint32_t code = 0; code < kCodes; ++code) {
    const float fn = fp8gemm::decode_fp8(code, Fp8Format::E4M3FN);
    const float fnuz = fp8gemm::decode_fp8(fp8gemm::rocm::fn_to_half_fnuz(code), Fp8Format::E4M3FNUZ);
    const bool same = std::isnan(fn) ? std::isnan(fnuz) : fnuz == 0.5f * fn;
    if (!same) {
      std::printf("fn_to_half_fnuz(0x%02x): e4m3fn %g became e4m3fnuz %g\n", code, fn, fnuz);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  long long m, n, k;
  while (std::scanf("%lld %lld %lld", &m, &n, &k) == 3) {
    const fp8gemm::rocm::GemmConfig config = fp8gemm::rocm::select_config(m, n, k);
    std::printf("%lld %lld %lld %d %d\n", m, n, k, config.tile_id, config.split_k);
  }
  return fn_remap_is_exact_half() ? 0 : 1;
}
