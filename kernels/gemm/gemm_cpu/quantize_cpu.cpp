// CPU path of the activation quantization (gemm_common/fp8_quantize.h has the rounding): one
// pass per 128-column group, the group's values kept in fp32 between its amax and its codes.
#include <algorithm>
#include <cstdint>

#include "gemm_common/fp8_quantize.h"
#include "gemm_common/launchers.h"

namespace fp8gemm {

Status quantize_cpu(const QuantizeArgs& args) {
  if (args.M < 0 || args.K < 0) return "quantize_cpu: negative size";
  float values[kScaleBlock];
  for (int64_t m = 0; m < args.M; ++m) {
    for (int64_t kb = 0; kb < args.k_blocks(); ++kb) {
      const int64_t k0 = kb * kScaleBlock, len = std::min<int64_t>(kScaleBlock, args.K - k0);
      uint32_t amax = 0;
      for (int64_t i = 0; i < len; ++i) {
        values[i] = quantize_source(args, m, k0 + i);
        amax = std::max(amax, abs_bits(values[i]));
      }
      const GroupScale s = group_scale(amax, args.format);
      for (int32_t c = 0; c < (args.q_row == nullptr ? 1 : args.copies); ++c) {
        const int64_t row = destination_row(args, m, c);
        if (row < 0) continue;
        args.scale[row * args.scale_stride_m + kb * args.scale_stride_kb] = s.scale;
        uint8_t* q = args.q + row * args.q_stride_m + k0;
        for (int64_t i = 0; i < len; ++i) q[i] = quantize_value(values[i], s.divisor, args.format);
      }
    }
  }
  return kOk;
}

}  // namespace fp8gemm
