#include <cstdint>

__global__ void scale_kernel(float* out, const float* x, float factor, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = x[i] * factor;
}

void scale_cuda(float* out, const float* x, float factor, int64_t n, void* stream) {
  const int64_t blocks = (n + 255) / 256;
  if (blocks > 0) scale_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(out, x, factor, n);
}
