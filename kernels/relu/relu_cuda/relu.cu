// relu for CUDA (and, hipified, ROCm): one grid-stride kernel per dtype, 16-byte vector
// loads and stores where the pointers allow, scalar code for the tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "relu_common.h"

namespace relu_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kVectorBytes = 16;
constexpr int kMaxBlocksPerSm = 8;
constexpr int kVectorsInFlight = 4;  // independent 16-byte loads per thread per iteration

template <typename T>
__device__ __forceinline__ T relu_value(T v) {
  return v < T(0.0f) ? T(0.0f) : v;
}

template <typename T>
__global__ void relu_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t numel, bool vectorized) {
  constexpr int kPerVector = kVectorBytes / sizeof(T);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t tail_start = 0;
  if (vectorized) {
    const int64_t vectors = numel / kPerVector;
    const uint4* in_vec = reinterpret_cast<const uint4*>(in);
    uint4* out_vec = reinterpret_cast<uint4*>(out);
    for (int64_t base = first; base < vectors; base += stride * kVectorsInFlight) {
      uint4 packed[kVectorsInFlight];
#pragma unroll
      for (int u = 0; u < kVectorsInFlight; ++u) {
        const int64_t v = base + u * stride;
        if (v < vectors) packed[u] = in_vec[v];
      }
#pragma unroll
      for (int u = 0; u < kVectorsInFlight; ++u) {
        const int64_t v = base + u * stride;
        if (v >= vectors) continue;
        T* lanes = reinterpret_cast<T*>(&packed[u]);
#pragma unroll
        for (int i = 0; i < kPerVector; ++i) lanes[i] = relu_value(lanes[i]);
        out_vec[v] = packed[u];
      }
    }
    tail_start = vectors * kPerVector;
  }
  for (int64_t i = tail_start + first; i < numel; i += stride) out[i] = relu_value(in[i]);
}

template <typename T>
const char* launch(void* out, const void* in, int64_t numel, cudaStream_t stream) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return "relu: could not query the current CUDA device";
  }
  const bool vectorized = (reinterpret_cast<uintptr_t>(out) % kVectorBytes == 0) &&
                          (reinterpret_cast<uintptr_t>(in) % kVectorBytes == 0);
  const int64_t per_thread = vectorized ? kVectorsInFlight * kVectorBytes / sizeof(T) : 1;
  const int64_t wanted = (numel / per_thread + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(
      wanted < 1 ? 1 : (wanted > int64_t{sms} * kMaxBlocksPerSm ? int64_t{sms} * kMaxBlocksPerSm : wanted));
  relu_kernel<T>
      <<<blocks, kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(in), numel, vectorized);
  return cudaGetLastError() == cudaSuccess ? nullptr : "relu: kernel launch failed";
}

}  // namespace

const char* relu_gpu(void* out, const void* in, int64_t numel, DType dtype, void* stream) {
  if (numel <= 0) return numel == 0 ? nullptr : "relu: negative element count";
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::Float32:
      return launch<float>(out, in, numel, s);
    case DType::Float16:
      return launch<__half>(out, in, numel, s);
    case DType::BFloat16:
      return launch<__nv_bfloat16>(out, in, numel, s);
  }
  return "relu: unsupported dtype";
}

}  // namespace relu_kernels
