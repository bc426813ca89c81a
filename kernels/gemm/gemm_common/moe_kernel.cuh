#pragma once
// Mixture-of-experts routing and combine as GPU kernels, for CUDA (sm_80+) and HIP alike
// (descriptions: gemm_common/moe_args.h). Both wait for the kernels queued before them and let the
// next one launch (kernel_chain.cuh's wait_previous_release_next), so on sm_90 they chain with
// the quantization and the grouped GEMMs by programmatic launches.
#include <cstdint>

#include "gemm_common/kernel_chain.cuh"
#include "gemm_common/moe_args.h"

namespace fp8gemm::moe_gpu {

using elementwise::kThreads;
using elementwise::wait_previous_release_next;
// The route kernel keeps one counter per expert in shared memory.
constexpr int kMaxExperts = 4096;
constexpr int kCombineColumns = 8;  // columns per thread: one 16-byte bf16 load per row

// values[t] becomes the sum of values[0..t) (one thread; kThreads values); returns the total.
__device__ __forceinline__ int32_t exclusive_scan(int32_t* values) {
  int32_t running = 0;
  for (int t = 0; t < kThreads; ++t) {
    const int32_t v = values[t];
    values[t] = running;
    running += v;
  }
  return running;
}

// One CTA: count the slots per expert, scan the counts into offsets, then hand out rows.
__global__ void __launch_bounds__(kThreads) route_kernel(const RouteArgs a) {
  __shared__ int32_t next_row[kMaxExperts];
  __shared__ int32_t chunk_sum[kThreads];
  wait_previous_release_next();
  const int tid = threadIdx.x;
  for (int e = tid; e < a.experts; e += kThreads) next_row[e] = 0;
  __syncthreads();
  for (int64_t s = tid; s < a.slots(); s += kThreads) {
    const int64_t id = load_id(a, s);
    if (id >= 0 && id < a.experts) atomicAdd(&next_row[id], 1);
  }
  __syncthreads();
  // Thread t scans experts [t * per, (t + 1) * per).
  const int per = (a.experts + kThreads - 1) / kThreads;
  const int lo = min(tid * per, a.experts), hi = min(lo + per, a.experts);
  int32_t sum = 0;
  for (int e = lo; e < hi; ++e) sum += next_row[e];
  chunk_sum[tid] = sum;
  __syncthreads();
  if (tid == 0) a.offsets[a.experts] = exclusive_scan(chunk_sum);
  __syncthreads();
  int32_t offset = chunk_sum[tid], owning = 0;
  for (int e = lo; e < hi; ++e) {
    const int32_t count = next_row[e];
    a.offsets[e] = offset;
    next_row[e] = offset;
    offset += count;
    owning += count > 0 ? 1 : 0;
  }
  if (a.active != nullptr) {  // the experts that own rows, in id order, after their count
    __syncthreads();
    chunk_sum[tid] = owning;
    __syncthreads();
    if (tid == 0) a.active[0] = exclusive_scan(chunk_sum);
    __syncthreads();
    int32_t at = 1 + chunk_sum[tid];
    for (int e = lo; e < hi; ++e)
      if (a.offsets[e + 1] > a.offsets[e]) a.active[at++] = e;  // offsets written before the barriers above
  }
  __syncthreads();
  for (int64_t s = tid; s < a.slots(); s += kThreads) {
    const int64_t id = load_id(a, s);
    if (id < 0 || id >= a.experts) {
      a.slot_row[s] = -1;
      continue;
    }
    const int32_t row = atomicAdd(&next_row[id], 1);
    a.row_token[row] = int32_t(s / a.top_k);
    a.slot_row[s] = row;
  }
}

// Thread g: token g / chunks, columns [8 * (g % chunks), + 8).
template <bool kVector>
__global__ void __launch_bounds__(kThreads) combine_kernel(const CombineArgs a) {
  wait_previous_release_next();
  const int64_t chunks = (a.hidden + kCombineColumns - 1) / kCombineColumns;
  const int64_t g = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= a.tokens * chunks) return;
  const int64_t t = g / chunks, h0 = (g % chunks) * kCombineColumns;
  const int columns = a.hidden - h0 < kCombineColumns ? int(a.hidden - h0) : kCombineColumns;
  float acc[kCombineColumns] = {};
  for (int j = 0; j < a.top_k; ++j) {
    const int32_t row = a.slot_row[t * a.top_k + j];
    if (row < 0 || row >= a.row_count) continue;
    const float w = load_weight(a, t, j);
    const uint16_t* values = a.rows + row * a.rows_stride + h0;
    if constexpr (kVector) {
      const uint4 raw = *reinterpret_cast<const uint4*>(values);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int i = 0; i < kCombineColumns; ++i)
        acc[i] += w * bf16_to_float(uint16_t(words[i / 2] >> (16 * (i % 2))));
    } else {
      for (int i = 0; i < columns; ++i) acc[i] += w * bf16_to_float(values[i]);
    }
  }
  for (int i = 0; i < columns; ++i) store_combined(a, t, h0 + i, acc[i]);
}

template <typename Launcher>
Status launch_route(const RouteArgs& a, const Launcher& launch) {
  if (a.experts > kMaxExperts) return "route: at most 4096 experts";
  return launch(route_kernel, 1u, a);
}

template <typename Launcher>
Status launch_combine(const CombineArgs& a, const Launcher& launch) {
  const int64_t chunks = (a.hidden + kCombineColumns - 1) / kCombineColumns;
  const int64_t blocks = (a.tokens * chunks + kThreads - 1) / kThreads;
  if (blocks == 0) return kOk;
  const bool vector = a.hidden % kCombineColumns == 0 && a.rows_stride % kCombineColumns == 0 &&
                      reinterpret_cast<uintptr_t>(a.rows) % 16 == 0;
  return vector ? launch(combine_kernel<true>, unsigned(blocks), a)
                : launch(combine_kernel<false>, unsigned(blocks), a);
}

}  // namespace fp8gemm::moe_gpu
