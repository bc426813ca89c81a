// HIP launchers of the mixture-of-experts routing and combine (kernels:
// gemm_common/moe_kernel.cuh). The grouped GEMM runs as one gemm_rocm call per expert (the
// binding's loop).
#include <hip/hip_runtime.h>

#include "gemm_common/launchers.h"
#include "gemm_common/moe_kernel.cuh"
#include "gemm_rocm/hip_launch.h"

namespace fp8gemm {

Status route_rocm(const RouteArgs& args, hipStream_t stream) {
  return moe_gpu::launch_route(args, hip_launch::Launcher{stream});
}

Status combine_rocm(const CombineArgs& args, hipStream_t stream) {
  return moe_gpu::launch_combine(args, hip_launch::Launcher{stream});
}

}  // namespace fp8gemm
