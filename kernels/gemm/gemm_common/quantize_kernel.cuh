#pragma once
// The activation quantization as one GPU kernel, for CUDA (sm_80+) and HIP alike: 8 threads per
// 128-column group, 16 values each, the group's amax reduced with shuffles inside the 8 lanes.
// Each thread reads its values once (two 16-byte loads for bf16/fp16 rows that allow it), keeps
// them in registers and writes its 16 codes as one 16-byte store; lane 0 writes the scale. With a row
// scatter (QuantizeArgs::q_row) codes and scale are stored once per destination row.
// Groups are numbered row by row (group = m * ceil(K/128) + kb): a warp reads 1 KB of one row.
//
// On sm_90+ both kernels here are launched programmatically (programmatic dependent launch):
// each waits for the kernels queued before it, then lets the next kernel launch at once, so the
// GEMM behind a quantization starts (and streams its weights) while the quantization runs.
#include <cstdint>

#include "gemm_common/fp8_quantize.h"
#include "gemm_common/kernel_chain.cuh"

namespace fp8gemm::quantize_gpu {

using elementwise::kThreads;
using elementwise::wait_previous_release_next;
constexpr int kLanesPerGroup = 8;
constexpr int kValuesPerLane = kScaleBlock / kLanesPerGroup;
constexpr int kGroupsPerBlock = kThreads / kLanesPerGroup;
static_assert(kValuesPerLane == 16, "a lane reads two 16-byte vectors of bf16 values");
constexpr int kCopyBatch = 8;  // a row scatter's destinations loaded together (top-8 routing: all)

__device__ __forceinline__ uint32_t group_max(uint32_t v) {
#pragma unroll
  for (int offset = kLanesPerGroup / 2; offset > 0; offset /= 2) {
#if defined(__HIP__) || defined(__HIPCC__)
    const uint32_t other = __shfl_xor(v, offset, kLanesPerGroup);
#else
    const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, v, offset, kLanesPerGroup);
#endif
    v = v > other ? v : other;
  }
  return v;
}

// 8 consecutive elements from a 16-byte aligned address, as fp32.
template <InputType kIn>
__device__ __forceinline__ void load8(const void* base, int64_t at, float* v) {
  if constexpr (kIn == InputType::F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + at);
    const float4 lo = p[0], hi = p[1];
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + at);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint16_t h = uint16_t(words[i / 2] >> (16 * (i % 2)));
      v[i] = kIn == InputType::BF16 ? bf16_to_float(h) : f16_to_float(h);
    }
  }
}

// kVector: K-contiguous rows, K % 16 == 0, 16-byte aligned input and q rows (the launcher
// checks); otherwise element by element through the strides. kScatter: compiled with a.q_row's
// scatter (a null q_row then stores one copy). The 16-byte kernels without it keep their code and its
// size; the element-by-element one without SiLU-and-mul is only compiled with it (the general
// path, rarely hot: fewer kernels to compile).
template <InputType kIn, bool kSiluMul, bool kVector, bool kScatter>
__global__ void __launch_bounds__(kThreads) quantize_kernel(const QuantizeArgs a) {
  wait_previous_release_next();
  const int64_t group = int64_t(blockIdx.x) * kGroupsPerBlock + threadIdx.x / kLanesPerGroup;
  const int lane = threadIdx.x % kLanesPerGroup;
  // Lanes past the last group still take part in the shuffles (with zeros), then store nothing.
  const bool active = group < a.M * a.k_blocks();
  const int64_t kb = active ? group % a.k_blocks() : 0, m = active ? group / a.k_blocks() : 0;
  const int64_t k0 = kb * kScaleBlock + lane * kValuesPerLane;
  float v[kValuesPerLane] = {};
  if (active && kVector) {
    if (k0 < a.K) {
      const int64_t at = m * a.x_stride_m + k0;
      load8<kIn>(a.x, at, v);
      load8<kIn>(a.x, at + 8, v + 8);
      if constexpr (kSiluMul) {
        float up[kValuesPerLane];
        load8<kIn>(a.x, at + a.K, up);
        load8<kIn>(a.x, at + a.K + 8, up + 8);
#pragma unroll
        for (int i = 0; i < kValuesPerLane; ++i) v[i] = silu_mul(v[i], up[i]);
      }
    }
  } else if (active) {
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i)
      if (k0 + i < a.K) v[i] = quantize_source(a, m, k0 + i);
  }
  uint32_t amax = 0;
#pragma unroll
  for (int i = 0; i < kValuesPerLane; ++i) amax = amax > abs_bits(v[i]) ? amax : abs_bits(v[i]);
  const GroupScale s = group_scale(group_max(amax), a.format);
  if (!active) return;
  const float limit = fp8_max(a.format);
#pragma unroll
  for (int i = 0; i < kValuesPerLane; ++i) v[i] = clamp_quotient(FP8GEMM_DIV_RN(v[i], s.divisor), limit);
  uint32_t words[kValuesPerLane / 4];
#pragma unroll
  for (int i = 0; i < kValuesPerLane / 4; ++i) words[i] = encode4(v + 4 * i, a.format);
  auto store_row = [&](int64_t row) {
    if (lane == 0) a.scale[row * a.scale_stride_m + kb * a.scale_stride_kb] = s.scale;
    uint8_t* q = a.q + row * a.q_stride_m + k0;
    if (kVector) {
      if (k0 < a.K) *reinterpret_cast<uint4*>(q) = make_uint4(words[0], words[1], words[2], words[3]);
    } else {
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i)
        if (k0 + i < a.K) q[i] = uint8_t(words[i / 4] >> (8 * (i % 4)));
    }
  };
  if constexpr (kScatter) {
    // The destination rows kCopyBatch at a time, loaded before the stores (which could alias them).
    const int32_t copies = a.q_row == nullptr ? 1 : a.copies;
    for (int32_t c0 = 0; c0 < copies; c0 += kCopyBatch) {
      int64_t rows[kCopyBatch];
#pragma unroll
      for (int i = 0; i < kCopyBatch; ++i) rows[i] = c0 + i < copies ? destination_row(a, m, c0 + i) : -1;
#pragma unroll
      for (int i = 0; i < kCopyBatch; ++i)
        if (rows[i] >= 0) store_row(rows[i]);
    }
  } else {
    store_row(m);
  }
}

// Whether the 16-byte path applies to a.
inline bool vector_path(const QuantizeArgs& a) {
  const int64_t elem = a.input == InputType::F32 ? 4 : 2;
  const auto aligned = [](const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  return a.x_stride_k == 1 && a.K % kValuesPerLane == 0 && aligned(a.x, 16) &&
         (a.M == 1 || (a.x_stride_m * elem) % 16 == 0) && aligned(a.q, 16) &&
         ((a.M == 1 && a.q_row == nullptr) || a.q_stride_m % 16 == 0);
}

using KernelFn = void (*)(QuantizeArgs);

// The scatter is compiled without SiLU-and-mul only (launch_quantize refuses the pair).
template <InputType kIn, bool kSiluMul>
KernelFn pick(bool vector, bool scatter) {
  if constexpr (kSiluMul)
    return vector ? quantize_kernel<kIn, true, true, false> : quantize_kernel<kIn, true, false, false>;
  else
    return vector ? (scatter ? quantize_kernel<kIn, false, true, true>
                             : quantize_kernel<kIn, false, true, false>)
                  : quantize_kernel<kIn, false, false, true>;
}

// The kernel for a (its grid is blocks(a) x kThreads).
inline KernelFn kernel_for(const QuantizeArgs& a) {
  const bool vector = vector_path(a), scatter = a.q_row != nullptr;
  switch (a.input) {
    case InputType::BF16:
      return a.silu_and_mul ? pick<InputType::BF16, true>(vector, scatter)
                            : pick<InputType::BF16, false>(vector, scatter);
    case InputType::F16:
      return a.silu_and_mul ? pick<InputType::F16, true>(vector, scatter)
                            : pick<InputType::F16, false>(vector, scatter);
    default:
      return a.silu_and_mul ? pick<InputType::F32, true>(vector, scatter)
                            : pick<InputType::F32, false>(vector, scatter);
  }
}

inline int64_t blocks(const QuantizeArgs& a) { return ceil_div(a.M * a.k_blocks(), kGroupsPerBlock); }

// SiLU-and-mul without quantization: out (M, K) = silu(x[:, :K]) * x[:, K:] in x's dtype (T:
// __nv_bfloat16 / __half / float and their HIP twins), kPerThread consecutive outputs per thread:
// 8 with 16-byte loads and stores where K % 8 == 0 and the rows are 16-byte aligned, else 1.
template <typename T, int kPerThread>
__global__ void __launch_bounds__(kThreads)
    silu_mul_kernel(const T* x, int64_t x_stride_m, T* out, int64_t out_stride_m, int64_t M, int64_t K) {
  wait_previous_release_next();
  const int64_t i = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * kPerThread;
  if (i >= M * K) return;
  const int64_t m = i / K, k = i % K;
  const T* row = x + m * x_stride_m;
  if constexpr (kPerThread == 1) {
    out[m * out_stride_m + k] = T(silu_mul(float(row[k]), float(row[k + K])));
  } else {
    constexpr int kVectors = kPerThread * sizeof(T) / 16;
    uint4 gate[kVectors], up[kVectors], result[kVectors];
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      gate[v] = reinterpret_cast<const uint4*>(row + k)[v];
      up[v] = reinterpret_cast<const uint4*>(row + k + K)[v];
    }
    const T* g = reinterpret_cast<const T*>(gate);
    const T* u = reinterpret_cast<const T*>(up);
    T* r = reinterpret_cast<T*>(result);
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) r[e] = T(silu_mul(float(g[e]), float(u[e])));
#pragma unroll
    for (int v = 0; v < kVectors; ++v) reinterpret_cast<uint4*>(out + m * out_stride_m + k)[v] = result[v];
  }
}

// Outputs per thread of silu_mul_kernel for these arguments.
inline int silu_mul_per_thread(const SiluMulArgs& a, int64_t element_bytes) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool rows =
      a.M == 1 || ((a.x_stride_m * element_bytes) % 16 == 0 && (a.out_stride_m * element_bytes) % 16 == 0);
  return a.K % 8 == 0 && aligned(a.x) && aligned(a.out) && rows ? 8 : 1;
}

// The launches, for either runtime: `launch(kernel, blocks, args...)` queues kernel on blocks x
// kThreads threads and returns kOk or the text of the launch's error.
template <class Launch>
Status launch_quantize(const QuantizeArgs& a, Launch launch) {
  if (a.M < 0 || a.K < 0) return "quantize: negative size";
  if (a.q_row != nullptr && a.silu_and_mul)
    return "quantize: the row scatter is not compiled with SiLU-and-mul";
  if (a.M == 0 || a.K == 0) return kOk;
  if (blocks(a) > int64_t(0x7FFFFFFF)) return "quantize: too many groups for one launch";
  return launch(kernel_for(a), unsigned(blocks(a)), a);
}

// T is the runtime's bf16, fp16 or float type for a.dtype.
template <typename T, class Launch>
Status launch_silu_mul(const SiluMulArgs& a, Launch launch) {
  if (a.M == 0 || a.K == 0) return kOk;
  const int per_thread = silu_mul_per_thread(a, sizeof(T));
  const int64_t count = ceil_div(a.M * a.K, int64_t(kThreads) * per_thread);
  if (count > int64_t(0x7FFFFFFF)) return "silu_and_mul: too many elements for one launch";
  const auto kernel = per_thread == 8 ? silu_mul_kernel<T, 8> : silu_mul_kernel<T, 1>;
  return launch(kernel, unsigned(count), static_cast<const T*>(a.x), a.x_stride_m, static_cast<T*>(a.out),
                a.out_stride_m, a.M, a.K);
}

}  // namespace fp8gemm::quantize_gpu
