// The GEMM kernels for tiles that one CTA computes alone (split 1).
#include "gemm_sm90/sm90_launch.cuh"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
template Status launch_gemm<false>(const KernelLaunch&);
}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
