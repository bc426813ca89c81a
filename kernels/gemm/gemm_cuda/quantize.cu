// CUDA launchers of the activation quantization and of SiLU-and-mul (kernels and launches:
// gemm_common/quantize_kernel.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_common/launchers.h"
#include "gemm_common/quantize_kernel.cuh"

namespace fp8gemm {
namespace {

Status last_error() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? kOk : cudaGetErrorString(err);
}

}  // namespace

Status quantize_cuda(const QuantizeArgs& args, cudaStream_t stream) {
  return quantize_gpu::launch_quantize(args, stream, last_error);
}

Status silu_mul_cuda(const SiluMulArgs& args, cudaStream_t stream) {
  switch (args.dtype) {
    case InputType::BF16:
      return quantize_gpu::launch_silu_mul<__nv_bfloat16>(args, stream, last_error);
    case InputType::F16:
      return quantize_gpu::launch_silu_mul<__half>(args, stream, last_error);
    default:
      return quantize_gpu::launch_silu_mul<float>(args, stream, last_error);
  }
}

}  // namespace fp8gemm
