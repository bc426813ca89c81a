// CUDA launchers of the activation quantization and of SiLU-and-mul (kernels and launches:
// gemm_common/quantize_kernel.cuh). On sm_90+ they are launched programmatically (see there).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "gemm_common/launchers.h"
#include "gemm_common/quantize_kernel.cuh"

namespace fp8gemm {
namespace {

Status launch_error(cudaError_t err) {
  if (err == cudaSuccess) return kOk;
  cudaGetLastError();
  return cudaGetErrorString(err);
}

// Whether `kernel`, as loaded for the current device, was compiled for sm_90 or later: only then
// does it wait for the kernel before it (quantize_kernel.cuh) and may be launched
// programmatically. Asked once per device and kernel.
bool waits_for_previous(const void* kernel) {
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

// Queues kernel on `blocks` x kThreads threads of `stream`, programmatically where it waits.
struct Launcher {
  cudaStream_t stream;

  template <typename... Params, typename... Args>
  Status operator()(void (*kernel)(Params...), unsigned blocks, const Args&... args) const {
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(quantize_gpu::kThreads);
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = waits_for_previous(reinterpret_cast<const void*>(kernel)) ? 1 : 0;
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, Params(args)...);
    if (err != cudaSuccess && cfg.numAttrs > 0) {  // no programmatic launch here: plain stream order
      cudaGetLastError();
      cfg.numAttrs = 0;
      err = cudaLaunchKernelEx(&cfg, kernel, Params(args)...);
    }
    return launch_error(err);
  }
};

}  // namespace

Status quantize_cuda(const QuantizeArgs& args, cudaStream_t stream) {
  return quantize_gpu::launch_quantize(args, Launcher{stream});
}

Status silu_mul_cuda(const SiluMulArgs& args, cudaStream_t stream) {
  switch (args.dtype) {
    case InputType::BF16:
      return quantize_gpu::launch_silu_mul<__nv_bfloat16>(args, Launcher{stream});
    case InputType::F16:
      return quantize_gpu::launch_silu_mul<__half>(args, Launcher{stream});
    default:
      return quantize_gpu::launch_silu_mul<float>(args, Launcher{stream});
  }
}

}  // namespace fp8gemm
