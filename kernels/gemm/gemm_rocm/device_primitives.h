#pragma once
// The hardware operations the ROCm kernels use, from the AMDGPU builtins (gfx942). The host
// emulation of the kernels (kernels/gemm/tests/rocm_emulator.cpp) defines the same functions.
//
// Work-item ids and the barrier do not use HIP's threadIdx, blockIdx and __syncthreads: older HIP
// headers (Debian's 5.2) implement those with device-library calls, which a device-only compile
// without the device libraries (-nogpulib, as kbuild.build.rocm checks it) cannot inline, so the
// checked assembly would have calls and spills that a full build lacks.
#include <hip/hip_runtime.h>

#include <cstdint>

namespace fp8gemm::rocm {

constexpr int kMfmaAccPerLane = 16;  // v_mfma_f32_32x32x16: 32 x 32 fp32 over 64 lanes
typedef float MfmaAcc __attribute__((ext_vector_type(kMfmaAccPerLane)));

__device__ __forceinline__ int thread_id() { return int(__builtin_amdgcn_workitem_id_x()); }
__device__ __forceinline__ int64_t workgroup_x() { return int64_t(__builtin_amdgcn_workgroup_id_x()); }
__device__ __forceinline__ int workgroup_y() { return int(__builtin_amdgcn_workgroup_id_y()); }

__device__ __forceinline__ void workgroup_barrier() {  // LDS writes before it are visible after it
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// acc += A(32 x 16) * B(16 x 32), e4m3fnuz codes, 8 per lane in `a` and `b` (layout: see
// gemm_rocm_kernels.h).
__device__ __forceinline__ MfmaAcc mfma_32x32x16_fp8(long a, long b, MfmaAcc acc) {
  return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, acc, 0, 0, 0);
}

}  // namespace fp8gemm::rocm
