// CUDA launchers of the activation quantization and of SiLU-and-mul (kernels and launches:
// gemm_common/quantize_kernel.cuh). On sm_90+ they are launched programmatically (see there).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_common/launchers.h"
#include "gemm_common/quantize_kernel.cuh"
#include "gemm_cuda/pdl_launch.h"

namespace fp8gemm {

using pdl::Launcher;

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
