#include <cstdint>

void negate_cpu(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = -x[i];
}
