// The GEMM kernels for tiles split along K over a cluster of 2-4 CTAs.
#include "gemm_sm90/sm90_launch.cuh"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {

template Status launch_gemm<true>(const KernelLaunch&);

const ClusterCounts& cluster_counts(int device, int num_sms) {
  return kernel_setup<128, 128, false, false, true>(device, num_sms).clusters;
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
