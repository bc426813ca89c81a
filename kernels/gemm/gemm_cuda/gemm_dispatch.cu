// Public CUDA launcher: picks the Hopper fast path where it is linked in, the device is
// sm_90 and the path takes the problem; the general path otherwise.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gemm_common/gemm_args.h"
#include "gemm_common/launchers.h"
#include "gemm_cuda/gemm_general.h"
#include "gemm_cuda/sm90_hook.h"

namespace fp8gemm {
namespace {

constexpr int kHopperSm = 90;
constexpr const char* kForceGeneralEnv = "GEMM_FORCE_GENERAL";

bool env_forces_general() {
  const char* value = std::getenv(kForceGeneralEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

std::atomic<bool>& force_general_flag() {
  static std::atomic<bool> flag{env_forces_general()};
  return flag;
}

Status current_device_sm(int* sm) {
  int device = 0, major = 0, minor = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  *sm = 10 * major + minor;
  return err == cudaSuccess ? kOk : cudaGetErrorString(err);
}

// The sm90 hooks are weak: null unless the Hopper sources were linked into this library.
bool hopper_path_linked() {
  return &sm90::try_gemm != nullptr && &sm90::workspace_bytes != nullptr && &sm90::force_config != nullptr;
}

bool hopper_path_applies(const GemmArgs& args, int device_sm) {
  return device_sm == kHopperSm && hopper_path_linked() && !gemm_cuda_general_forced() && args.M > 0 &&
         args.N > 0 && args.K > 0;
}

}  // namespace

void gemm_cuda_force_general(bool force) { force_general_flag() = force; }

bool gemm_cuda_general_forced() { return force_general_flag(); }

Status gemm_cuda_force_tile(int block_m, int block_n, int split) {
  if (!hopper_path_linked())
    return block_m == 0 ? kOk : "force_tile_config: this build has no Hopper (sm_90a) path";
  return sm90::force_config(block_m, block_n, split);
}

size_t gemm_cuda_workspace_bytes(const GemmArgs& args, int device_sm) {
  return hopper_path_applies(args, device_sm) ? sm90::workspace_bytes(args) : 0;
}

Status gemm_cuda(const GemmArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (args.M == 0 || args.N == 0) return kOk;
  int device_sm = 0;
  if (Status status = current_device_sm(&device_sm); status != kOk) return status;
  if (hopper_path_applies(args, device_sm)) {
    bool launched = false;
    const Status status = sm90::try_gemm(args, workspace, workspace_bytes, stream, &launched);
    if (status != kOk || launched) return status;
  }
  return general::launch(args, stream);
}

}  // namespace fp8gemm
