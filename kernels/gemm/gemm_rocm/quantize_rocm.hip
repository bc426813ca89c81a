// HIP launchers of the activation quantization and of SiLU-and-mul (kernels and launches:
// gemm_common/quantize_kernel.cuh).
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#include "gemm_common/launchers.h"
#include "gemm_common/quantize_kernel.cuh"
#include "gemm_rocm/hip_launch.h"

namespace fp8gemm {

using hip_launch::Launcher;

Status quantize_rocm(const QuantizeArgs& args, hipStream_t stream) {
  return quantize_gpu::launch_quantize(args, Launcher{stream});
}

Status silu_mul_rocm(const SiluMulArgs& args, hipStream_t stream) {
  switch (args.dtype) {
    case InputType::BF16:
      return quantize_gpu::launch_silu_mul<__hip_bfloat16>(args, Launcher{stream});
    case InputType::F16:
      return quantize_gpu::launch_silu_mul<__half>(args, Launcher{stream});
    default:
      return quantize_gpu::launch_silu_mul<float>(args, Launcher{stream});
  }
}

}  // namespace fp8gemm
