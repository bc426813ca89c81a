// CUDA launchers of the mixture-of-experts ops: routing and combine (kernels:
// gemm_common/moe_kernel.cuh) and the grouped FP8 GEMM, which runs on the Hopper path where it is
// linked (gemm_sm90/sm90_grouped.cu) and is otherwise left to the binding's loop over experts.
#include <cuda_runtime.h>

#include "gemm_common/launchers.h"
#include "gemm_common/moe_kernel.cuh"
#include "gemm_cuda/pdl_launch.h"
#include "gemm_cuda/sm90_hook.h"

namespace fp8gemm {

Status route_cuda(const RouteArgs& args, cudaStream_t stream) {
  return moe_gpu::launch_route(args, pdl::Launcher{stream});
}

Status combine_cuda(const CombineArgs& args, cudaStream_t stream) {
  return moe_gpu::launch_combine(args, pdl::Launcher{stream});
}

Status grouped_gemm_cuda(const GroupedGemmArgs& args, cudaStream_t stream, bool* launched) {
  *launched = false;
  if (&sm90::try_grouped_gemm == nullptr || gemm_cuda_general_forced()) return kOk;
  int device = 0, major = 0, minor = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (err != cudaSuccess) return pdl::launch_error(err);
  if (major != 9 || minor != 0) return kOk;
  return sm90::try_grouped_gemm(args, stream, launched);
}

}  // namespace fp8gemm
