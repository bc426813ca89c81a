// CUDA launchers of the activation quantization and of SiLU-and-mul (kernels:
// gemm_common/quantize_kernel.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_common/launchers.h"
#include "gemm_common/quantize_kernel.cuh"

namespace fp8gemm {
namespace {

Status launch_status() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? kOk : cudaGetErrorString(err);
}

template <typename T>
Status launch_silu_mul(const SiluMulArgs& a, cudaStream_t stream) {
  const int per_thread = quantize_gpu::silu_mul_per_thread(a, sizeof(T));
  const int64_t blocks = ceil_div(a.M * a.K, int64_t(quantize_gpu::kThreads) * per_thread);
  if (blocks > int64_t(0x7FFFFFFF)) return "silu_and_mul: too many elements for one launch";
  const auto kernel =
      per_thread == 8 ? quantize_gpu::silu_mul_kernel<T, 8> : quantize_gpu::silu_mul_kernel<T, 1>;
  kernel<<<unsigned(blocks), quantize_gpu::kThreads, 0, stream>>>(
      static_cast<const T*>(a.x), a.x_stride_m, static_cast<T*>(a.out), a.out_stride_m, a.M, a.K);
  return launch_status();
}

}  // namespace

Status quantize_cuda(const QuantizeArgs& args, cudaStream_t stream) {
  if (args.M < 0 || args.K < 0) return "quantize_cuda: negative size";
  if (args.M == 0 || args.K == 0) return kOk;
  const int64_t blocks = quantize_gpu::blocks(args);
  if (blocks > int64_t(0x7FFFFFFF)) return "quantize_cuda: too many groups for one launch";
  quantize_gpu::kernel_for(args)<<<unsigned(blocks), quantize_gpu::kThreads, 0, stream>>>(args);
  return launch_status();
}

Status silu_mul_cuda(const SiluMulArgs& args, cudaStream_t stream) {
  if (args.M == 0 || args.K == 0) return kOk;
  switch (args.dtype) {
    case InputType::BF16:
      return launch_silu_mul<__nv_bfloat16>(args, stream);
    case InputType::F16:
      return launch_silu_mul<__half>(args, stream);
    default:
      return launch_silu_mul<float>(args, stream);
  }
}

}  // namespace fp8gemm
