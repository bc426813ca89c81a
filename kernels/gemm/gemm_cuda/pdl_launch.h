#pragma once
// How the CUDA launchers of the elementwise kernels (quantize.cu, moe.cu) queue a kernel: on
// sm_90+ programmatically (the kernel waits for the one before it and lets the next launch),
// plainly where the kernel was compiled for an older GPU or the launch attribute is refused. The
// Hopper grouped GEMMs (gemm_sm90/sm90_grouped*.cu) queue theirs with launch_programmatic too.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "gemm_common/gemm_args.h"
#include "gemm_common/kernel_chain.cuh"

namespace fp8gemm::pdl {

inline Status launch_error(cudaError_t err) {
  if (err == cudaSuccess) return kOk;
  cudaGetLastError();
  return cudaGetErrorString(err);
}

// Whether `kernel`, as loaded for the current device, was compiled for sm_90 or later: only then
// does it wait for the kernel before it (kernel_chain.cuh) and may be launched
// programmatically. Asked once per device and kernel.
inline bool waits_for_previous(const void* kernel) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto [entry, added] = known.try_emplace({device, kernel}, false);
  if (added) {
    cudaFuncAttributes attributes{};
    entry->second = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.ptxVersion >= 90;
    cudaGetLastError();
  }
  return entry->second;
}

// Queues kernel as cfg says (grid, block, shared memory, stream) programmatically, right behind the
// kernel before it (which it waits for with griddepcontrol.wait); in plain stream order where that
// launch attribute is refused.
template <typename... Params, typename... Args>
cudaError_t launch_programmatic(cudaLaunchConfig_t cfg, void (*kernel)(Params...), const Args&... args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, Params(args)...);
  if (err != cudaSuccess) {
    cudaGetLastError();
    cfg.numAttrs = 0;
    err = cudaLaunchKernelEx(&cfg, kernel, Params(args)...);
  }
  return err;
}

// Queues kernel on `blocks` x kThreads threads of `stream`, programmatically where it waits.
struct Launcher {
  cudaStream_t stream;

  template <typename... Params, typename... Args>
  Status operator()(void (*kernel)(Params...), unsigned blocks, const Args&... args) const {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(elementwise::kThreads);
    cfg.stream = stream;
    return launch_error(waits_for_previous(reinterpret_cast<const void*>(kernel))
                            ? launch_programmatic(cfg, kernel, args...)
                            : cudaLaunchKernelEx(&cfg, kernel, Params(args)...));
  }
};

}  // namespace fp8gemm::pdl
