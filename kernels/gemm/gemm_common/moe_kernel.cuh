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
// Rows of the combine's sum whose slot rows and weights, then values, are loaded together.
constexpr int kCombineBatch = 8;

// f(slot, token, expert) for each slot s = tid, tid + kThreads, ... (fewer than 2^31: launch_route
// checks, so s + kThreads fits 32 unsigned bits), expert -1 for an id outside [0, experts). 32-bit slot
// arithmetic: with 64-bit divisions the kernel took 1.5x as long at 4,096 tokens (H200). Batched id
// loads were faster from 4,096 tokens on and slower at 1 token (DESIGN.md).
template <typename F>
__device__ __forceinline__ void for_each_slot(const RouteArgs& a, int tid, F&& f) {
  const uint32_t slots = uint32_t(a.slots()), top_k = uint32_t(a.top_k);
  for (uint32_t s = tid; s < slots; s += kThreads) {
    const uint32_t t = s / top_k;
    const int64_t id = id_at(a, t, s - t * top_k);
    f(int32_t(s), int32_t(t), id >= 0 && id < a.experts ? int32_t(id) : -1);
  }
}

// The block's threads in 32-lane segments (a warp on CUDA, half or all of a wavefront on HIP).
constexpr int kScanLanes = 32;
constexpr int kScanSegments = kThreads / kScanLanes;

__device__ __forceinline__ int32_t shuffle_up(int32_t v, int delta) {
#if defined(__HIP__) || defined(__HIPCC__)
  return __shfl_up(v, delta, kScanLanes);
#else
  return __shfl_up_sync(0xFFFFFFFFu, v, delta, kScanLanes);
#endif
}

// The sum of v over the threads before this one (all kThreads threads call it); *total: over all.
// Shuffles inside each 32-lane segment, then each thread adds the totals of the segments before its
// own. With one thread adding the 256 values in turn (twice) the kernel took 4.7-5.1 µs at 1 token in a
// CUDA graph on the H200, with this 2.4-2.7 (DESIGN.md).
__device__ __forceinline__ int32_t exclusive_scan(int32_t v, int32_t* total) {
  __shared__ int32_t segment_total[kScanSegments];
  const int lane = threadIdx.x % kScanLanes, segment = threadIdx.x / kScanLanes;
  int32_t inclusive = v;
#pragma unroll
  for (int delta = 1; delta < kScanLanes; delta *= 2) {
    const int32_t before = shuffle_up(inclusive, delta);
    if (lane >= delta) inclusive += before;
  }
  if (lane == kScanLanes - 1) segment_total[segment] = inclusive;
  __syncthreads();
  int32_t earlier = 0, all = 0;
#pragma unroll
  for (int s = 0; s < kScanSegments; ++s) {
    const int32_t t = segment_total[s];
    earlier += s < segment ? t : 0;
    all += t;
  }
  __syncthreads();  // segment_total is free for the next scan
  *total = all;
  return earlier + inclusive - v;
}

// One CTA: count the slots per expert, scan the counts into offsets, then hand out rows.
__global__ void __launch_bounds__(kThreads) route_kernel(const RouteArgs a) {
  __shared__ int32_t next_row[kMaxExperts];
  wait_previous_release_next();
  const int tid = threadIdx.x;
  for (int e = tid; e < a.experts; e += kThreads) next_row[e] = 0;
  __syncthreads();
  for_each_slot(a, tid, [&](int32_t, int32_t, int32_t e) {
    if (e >= 0) atomicAdd(&next_row[e], 1);
  });
  __syncthreads();
  // Thread t scans experts [t * per, (t + 1) * per).
  const int per = (a.experts + kThreads - 1) / kThreads;
  const int lo = min(tid * per, a.experts), hi = min(lo + per, a.experts);
  int32_t sum = 0;
  for (int e = lo; e < hi; ++e) sum += next_row[e];
  int32_t rows = 0;
  int32_t offset = exclusive_scan(sum, &rows), owning = 0;
  if (tid == 0) a.offsets[a.experts] = rows;
  for (int e = lo; e < hi; ++e) {
    const int32_t count = next_row[e];
    a.offsets[e] = offset;
    next_row[e] = offset;
    offset += count;
    owning += count > 0 ? 1 : 0;
  }
  if (a.active != nullptr) {  // the experts that own rows, in id order, after their count
    int32_t owners = 0;
    int32_t at = 1 + exclusive_scan(owning, &owners);
    if (tid == 0) a.active[0] = owners;
    for (int e = lo; e < hi; ++e)
      if (a.offsets[e + 1] > a.offsets[e]) a.active[at++] = e;  // offsets written before the scan's barriers
  }
  __syncthreads();
  for_each_slot(a, tid, [&](int32_t s, int32_t t, int32_t e) {
    if (e < 0) {
      a.slot_row[s] = -1;
      return;
    }
    const int32_t row = atomicAdd(&next_row[e], 1);
    if (a.row_token != nullptr) a.row_token[row] = t;
    a.slot_row[s] = row;
  });
}

// Thread g: token g / chunks, columns [8 * (g % chunks), + 8). The token's slots are taken kCombineBatch
// at a time: their rows and weights loaded together, then the rows' values. kVector: 16-byte loads and
// stores (the launcher checks the alignment).
template <bool kVector>
__global__ void __launch_bounds__(kThreads) combine_kernel(const CombineArgs a) {
  wait_previous_release_next();
  const int64_t chunks = (a.hidden + kCombineColumns - 1) / kCombineColumns;
  const int64_t g = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= a.tokens * chunks) return;
  const int64_t t = g / chunks, h0 = (g % chunks) * kCombineColumns;
  const int columns = a.hidden - h0 < kCombineColumns ? int(a.hidden - h0) : kCombineColumns;
  float acc[kCombineColumns] = {};
  for (int j0 = 0; j0 < a.top_k; j0 += kCombineBatch) {
    int32_t rows[kCombineBatch];
    float weights[kCombineBatch];
#pragma unroll
    for (int i = 0; i < kCombineBatch; ++i) {
      const int j = j0 + i;
      const int32_t row = j < a.top_k ? a.slot_row[t * a.top_k + j] : -1;
      rows[i] = row >= 0 && row < a.row_count ? row : -1;
      weights[i] = rows[i] >= 0 ? load_weight(a, t, j) : 0.f;
    }
    if constexpr (kVector) {
      uint4 raw[kCombineBatch];
#pragma unroll
      for (int i = 0; i < kCombineBatch; ++i)
        raw[i] = rows[i] >= 0 ? *reinterpret_cast<const uint4*>(a.rows + rows[i] * a.rows_stride + h0)
                              : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < kCombineBatch; ++i) {
        if (rows[i] < 0) continue;
        const uint32_t words[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
        for (int c = 0; c < kCombineColumns; ++c)
          acc[c] += weights[i] * bf16_to_float(uint16_t(words[c / 2] >> (16 * (c % 2))));
      }
    } else {
#pragma unroll
      for (int i = 0; i < kCombineBatch; ++i) {
        if (rows[i] < 0) continue;
        const uint16_t* values = a.rows + rows[i] * a.rows_stride + h0;
        for (int c = 0; c < columns; ++c) acc[c] += weights[i] * bf16_to_float(values[c]);
      }
    }
  }
  if constexpr (kVector) {  // 16-byte stores
    if (a.out_type == InputType::BF16) {
      uint32_t packed[kCombineColumns / 2];
#pragma unroll
      for (int i = 0; i < kCombineColumns / 2; ++i)
        packed[i] = uint32_t(float_to_bf16_bits(acc[2 * i])) | uint32_t(float_to_bf16_bits(acc[2 * i + 1]))
                                                                   << 16;
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.out) + t * a.out_stride + h0) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
    } else {
      float4* out = reinterpret_cast<float4*>(static_cast<float*>(a.out) + t * a.out_stride + h0);
      out[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      out[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
  } else {
    for (int i = 0; i < columns; ++i) store_combined(a, t, h0 + i, acc[i]);
  }
}

template <typename Launcher>
Status launch_route(const RouteArgs& a, const Launcher& launch) {
  if (a.experts > kMaxExperts) return "route: at most 4096 experts";
  if (a.slots() > int64_t(0x7FFFFFFF))
    return "route: at most 2^31 - 1 (token, expert) pairs";  // for_each_slot
  return launch(route_kernel, 1u, a);
}

template <typename Launcher>
Status launch_combine(const CombineArgs& a, const Launcher& launch) {
  const int64_t chunks = (a.hidden + kCombineColumns - 1) / kCombineColumns;
  const int64_t blocks = (a.tokens * chunks + kThreads - 1) / kThreads;
  if (blocks == 0) return kOk;
  const bool vector = a.hidden % kCombineColumns == 0 && a.rows_stride % kCombineColumns == 0 &&
                      reinterpret_cast<uintptr_t>(a.rows) % 16 == 0 && a.out_stride % kCombineColumns == 0 &&
                      reinterpret_cast<uintptr_t>(a.out) % 16 == 0;
  return vector ? launch(combine_kernel<true>, unsigned(blocks), a)
                : launch(combine_kernel<false>, unsigned(blocks), a);
}

}  // namespace fp8gemm::moe_gpu
