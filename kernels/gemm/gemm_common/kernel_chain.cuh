#pragma once
// What the elementwise GPU kernels (quantization, routing, combine) share, for CUDA (sm_80+) and
// HIP alike: their block size and how they chain with the kernels around them. Kept apart from
// quantize_kernel.cuh, whose kernel_for takes the address of every quantization kernel: a
// translation unit that includes it compiles all fifteen for each GPU it targets.

namespace fp8gemm::elementwise {

constexpr int kThreads = 256;

// Waits until the kernels queued before have finished and their writes are visible, then lets
// the next kernel launch. Nothing before it may touch global memory. A no-op below sm_90, on
// HIP, and when the kernel was launched plainly.
__device__ __forceinline__ void wait_previous_release_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace fp8gemm::elementwise
