// CUDA launchers of the activation quantization and of SiLU-and-mul (kernels and launches:
// gemm_common/quantize_kernel.cuh). On sm_90+ they are launched programmatically (see there).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>

#include "gemm_common/launchers.h"
#include "gemm_common/quantize_kernel.cuh"

namespace fp8gemm {
namespace {

Status launch_error(cudaError_t err) {
  if (err == cudaSuccess) return kOk;
  cudaGetLastError();
  return cudaGetErrorString(err);
}

// Whether the current device takes programmatic dependent launches (compute capability 9.0+),
// asked once per device.
bool programmatic_launch_supported() {
  constexpr int kMaxDevices = 64;
  enum : int { kUnknown = 0, kNo, kYes };
  static std::atomic<int> known[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return false;
  }
  int answer = known[device].load(std::memory_order_relaxed);
  if (answer == kUnknown) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    answer = major >= 9 ? kYes : kNo;
    known[device].store(answer, std::memory_order_relaxed);
  }
  return answer == kYes;
}

// Queues kernel on `blocks` x kThreads threads of `stream`, programmatically where the device allows.
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
    cfg.numAttrs = programmatic_launch_supported() ? 1 : 0;
    return launch_error(cudaLaunchKernelEx(&cfg, kernel, Params(args)...));
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
