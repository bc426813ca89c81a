// What a launch costs under the timing protocol of shared/reference/fp8-gemm-h100-peers.md
// (256 MB L2 flush before each call, events around the call, median of 30), with nothing
// inside the kernel: the GEMM kernel's frame (grid of 128 CTAs, 384 threads, 200 KB of
// dynamic shared memory) launched plain and as clusters of 2 and 4, and the split-K path's
// cluster work alone (cluster barriers; the steps of the kernel's split-K epilogue on a 64x144
// fp32 partial tile). NOTES-sm90.md run 31. Also the empty frame with the GEMM kernel's
// parameters (five tensor maps and KernelParams, about 800 bytes), alone and with the kernel's
// entry work (barrier init, tensor-map prefetches, griddepcontrol.wait). NOTES-sm90.md run 38.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels/gemm \
//     -o launch_probe kernels/gemm/benchmarks/sm90_harness/launch_probe.cu
#include <cuda_runtime.h>

#include <cstdio>

#include "gemm_sm90/sm90_kernel.cuh"
#include "cold_timing.h"

using namespace fp8gemm::sm90;

constexpr int kThreads = 384, kSmem = 200 * 1024, kGrid = 128;
constexpr int kRows = 64, kCols = 144, kStride = kCols + 4;  // the split-K buffer of 64x144s2

enum class Work {
  kNone,
  kOneBarrier,
  kTwoBarriers,
  kReduce,         // the kernel's split-K steps: partial tile to shared memory, cluster barrier,
                   // 1/split of it summed from every CTA (the kernel's sum_cluster_partials),
                   // 8-byte global stores per 4 sums (raw bits, not converted to bf16 as the
                   // kernel does), cluster barrier (both .release)
  kReduceRelaxed,  // the same with the second barrier's arrive .relaxed
};

__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

template <Work kWork>
__global__ void __launch_bounds__(kThreads, 1) frame(uint16_t* out) {
  extern __shared__ float red[];
  if constexpr (kWork == Work::kOneBarrier) {
    cluster_sync_all();
  } else if constexpr (kWork == Work::kTwoBarriers) {
    cluster_sync_all();
    cluster_sync_all();
  } else if constexpr (kWork == Work::kReduce || kWork == Work::kReduceRelaxed) {
    // 256 "consumer" threads as in 64x144 (two consumer warpgroups), the producer warpgroup
    // only takes part in the barriers
    const int ct = int(threadIdx.x) - 128;
    if (ct >= 0)
      for (int i = ct; i < kRows * kCols / 2; i += 256)
        *reinterpret_cast<float2*>(&red[(2 * i / kCols) * kStride + (2 * i) % kCols]) = make_float2(float(i), 1.f);
    cluster_sync_all();
    uint32_t n = 0;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    const int rank = int(cluster_rank());
    constexpr int kItems = kRows * kCols / 4, kIters = (kItems / 2 + 255) / 256;
    const int lo = rank * kItems / int(n), hi = (rank + 1) * kItems / int(n);
    if (ct >= 0) {
      float4 sum[kIters];
      sum_cluster_partials<kCols, kStride, 256>(sum, red, int(n), lo, hi, ct);
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int f = lo + ct + i * 256;
        if (f >= hi) break;
        const int64_t row = int64_t(blockIdx.x / n) * kRows + f / (kCols / 4);
        *reinterpret_cast<uint2*>(out + row * kCols + (f % (kCols / 4)) * 4) =
            make_uint2(__float_as_uint(sum[i].x + sum[i].y), __float_as_uint(sum[i].z + sum[i].w));
      }
    }
    if constexpr (kWork == Work::kReduce)
      cluster_sync_all();
    else
      cluster_sync_relaxed();
  }
}

// The GEMM kernel's parameter list, with nothing or only its entry work inside.
template <bool kEntry>
__global__ void __launch_bounds__(kThreads, 1)
    frame_params(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_a_tail,
                 const __grid_constant__ CUtensorMap map_b, const __grid_constant__ CUtensorMap map_c,
                 const __grid_constant__ CUtensorMap map_sa, const KernelParams p) {
  if constexpr (kEntry) {
    extern __shared__ uint64_t bars[];
    if (threadIdx.x == 0) {
      for (int s = 0; s < 16; ++s) mbar_init(&bars[s], 1);
      mbar_fence_init();
      tma_prefetch_desc(&map_a);
      tma_prefetch_desc(&map_b);
      if (p.tma_store) tma_prefetch_desc(&map_c);
    }
    __syncthreads();
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
}

template <bool kEntry>
float time_params_us(void* flush) {
  auto kernel = frame_params<kEntry>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CUtensorMap maps[5] = {};
  KernelParams p{};
  p.tma_store = 1;
  auto launch = [&] { kernel<<<kGrid, kThreads, kSmem>>>(maps[0], maps[1], maps[2], maps[3], maps[4], p); };
  for (int i = 0; i < 5; ++i) launch();
  CK(cudaGetLastError());
  return median_cold_us(flush, 30, [&] {
    launch();
    CK(cudaGetLastError());
  });
}

template <Work kWork>
float time_us(int cluster, void* flush, uint16_t* out) {
  auto kernel = frame<kWork>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = unsigned(cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kGrid);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  for (int i = 0; i < 5; ++i) CK(cudaLaunchKernelEx(&cfg, kernel, out));
  return median_cold_us(flush, 30, [&] { CK(cudaLaunchKernelEx(&cfg, kernel, out)); });
}

int main() {
  void* flush = nullptr;
  uint16_t* out = nullptr;
  CK(cudaMalloc(&flush, kFlushBytes));
  CK(cudaMalloc(&out, size_t(kGrid) * kRows * kCols * 2));
  for (int round = 1; round <= 3; ++round)
    for (int cluster : {1, 2, 4}) {
      std::printf("launch-probe,round%d,cluster %d,empty %.2f us", round, cluster,
                  time_us<Work::kNone>(cluster, flush, out));
      if (cluster > 1) {
        std::printf(",one cluster barrier %.2f,two %.2f", time_us<Work::kOneBarrier>(cluster, flush, out),
                    time_us<Work::kTwoBarriers>(cluster, flush, out));
        std::printf(",split-K steps %.2f,with the last arrive relaxed %.2f",
                    time_us<Work::kReduce>(cluster, flush, out),
                    time_us<Work::kReduceRelaxed>(cluster, flush, out));
      }
      if (cluster == 1)
        std::printf(",with the GEMM's parameters %.2f,and its entry work %.2f", time_params_us<false>(flush),
                    time_params_us<true>(flush));
      std::printf(" (us)\n");
    }
  CK(cudaFree(flush));
  CK(cudaFree(out));
  return 0;
}
