#pragma once
// How the HIP launchers of the elementwise kernels (quantize_rocm.hip, moe_rocm.hip) queue a
// kernel: plainly, on the given stream.
#include <hip/hip_runtime.h>

#include "gemm_common/gemm_args.h"
#include "gemm_common/kernel_chain.cuh"

namespace fp8gemm::hip_launch {

// Queues kernel on `blocks` x kThreads threads of `stream`.
struct Launcher {
  hipStream_t stream;

  template <typename... Params, typename... Args>
  Status operator()(void (*kernel)(Params...), unsigned blocks, const Args&... args) const {
    kernel<<<blocks, elementwise::kThreads, 0, stream>>>(Params(args)...);
    const hipError_t err = hipGetLastError();
    return err == hipSuccess ? kOk : hipGetErrorString(err);
  }
};

}  // namespace fp8gemm::hip_launch
