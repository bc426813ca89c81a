#include <algorithm>
#include <thread>
#include <vector>

#include "relu_common.h"

namespace relu_kernels {
namespace {

constexpr int64_t kMinElementsPerThread = 1 << 16;

// Negative (not -0, not NaN) 16-bit floats, from their bits: the exponent layout is the
// only difference between bf16 and fp16 that matters here.
inline bool is_negative16(uint16_t bits, uint16_t infinity) {
  const uint16_t magnitude = bits & 0x7fff;
  return (bits & 0x8000) && magnitude != 0 && magnitude <= infinity;
}

void relu16(uint16_t* out, const uint16_t* in, int64_t n, DType dtype) {
  const uint16_t infinity = dtype == DType::BFloat16 ? 0x7f80 : 0x7c00;
  for (int64_t i = 0; i < n; ++i) out[i] = is_negative16(in[i], infinity) ? uint16_t{0} : in[i];
}

void relu32(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

template <typename Fn>
void parallel_for(int64_t numel, Fn&& fn) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads = std::max<int64_t>(1, std::min(hw, numel / kMinElementsPerThread));
  if (threads == 1) {
    fn(0, numel);
    return;
  }
  std::vector<std::thread> workers;
  const int64_t chunk = (numel + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(numel, begin + chunk);
    if (begin < end) workers.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  for (auto& w : workers) w.join();
}

}  // namespace

const char* relu_cpu(void* out, const void* in, int64_t numel, DType dtype) {
  if (numel < 0) return "relu_cpu: negative element count";
  if (numel == 0) return nullptr;
  parallel_for(numel, [&](int64_t begin, int64_t end) {
    if (dtype == DType::Float32) {
      relu32(static_cast<float*>(out) + begin, static_cast<const float*>(in) + begin, end - begin);
    } else {
      relu16(static_cast<uint16_t*>(out) + begin, static_cast<const uint16_t*>(in) + begin, end - begin,
             dtype);
    }
  });
  return nullptr;
}

}  // namespace relu_kernels
