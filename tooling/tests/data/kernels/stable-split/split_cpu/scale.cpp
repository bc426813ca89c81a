#include <cstdint>

void scale_cpu(float* out, const float* x, float factor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}
