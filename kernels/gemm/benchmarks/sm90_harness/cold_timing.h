#pragma once
// What harness.cu and the probes share: a CUDA error check, and timing under the protocol of
// shared/reference/fp8-gemm-h100-peers.md (L2 flushed by zeroing a 256 MB buffer before each
// call, events around the call alone, the median).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

constexpr size_t kFlushBytes = size_t(256) << 20;

// Median event time, in microseconds, of `reps` calls of launch() on the default stream, each
// after zeroing `flush` (kFlushBytes).
template <class Launch>
float median_cold_us(void* flush, int reps, Launch&& launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int i = 0; i < reps; ++i) {
    CK(cudaMemsetAsync(flush, 0, kFlushBytes, 0));
    CK(cudaEventRecord(e0, 0));
    launch();
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms * 1000.f);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}
