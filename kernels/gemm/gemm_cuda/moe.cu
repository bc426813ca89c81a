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

namespace {

// Whether the current device runs the linked Hopper path (compute capability 9.0, not forced off).
cudaError_t on_hopper_path(bool* yes) {
  *yes = false;
  if (&sm90::try_grouped_gemm == nullptr || gemm_cuda_general_forced()) return cudaSuccess;
  int device = 0, major = 0, minor = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  *yes = err == cudaSuccess && major == 9 && minor == 0;
  return err;
}

}  // namespace

Status grouped_gemm_cuda(const GroupedGemmArgs& args, cudaStream_t stream, bool* launched) {
  *launched = false;
  bool hopper = false;
  const cudaError_t err = on_hopper_path(&hopper);
  if (err != cudaSuccess) return pdl::launch_error(err);
  return hopper ? sm90::try_grouped_gemm(args, stream, launched) : kOk;
}

bool grouped_gemm_cuda_wants_scales_copied(const GroupedGemmArgs& args) {
  bool hopper = false;
  return on_hopper_path(&hopper) == cudaSuccess && hopper && sm90::tiles_want_scales_copied(args);
}

}  // namespace fp8gemm
