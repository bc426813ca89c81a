#pragma once
// Between the host code (sm90_gemm.cu) and the translation units that compile the GEMM kernels
// (sm90_kernels_unsplit.cu, sm90_kernels_split.cu): one launch as run() prepares it. The
// kernels are compiled in two halves so that a parallel build compiles them at once.
#include <cuda.h>
#include <cuda_runtime.h>

#include "gemm_sm90/sm90_gemm.h"
#include "gemm_sm90/sm90_tiles.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

constexpr int kMaxDevices = 64;

struct KernelLaunch {
  TileConfig config;
  // A (K-major, or M-contiguous with a_mn), its last 64 rows' map (a_mn with BM = 192), B,
  // the bf16 output (params.tma_store) and each stage's A scales (sa_smem)
  CUtensorMap map_a, map_a_tail, map_b, map_c, map_sa;
  KernelParams params;
  int device, num_sms;
  cudaStream_t stream;
  // Launched programmatically, right behind the operand copy or the quantization of A (the
  // kernel waits for it with griddepcontrol.wait).
  bool programmatic;
  bool sa_smem;  // the A scales come with each stage by TMA
  bool a_mn;     // A is M-contiguous, transposed by the consumers
};

// Launches the kernel for l.config, from the half compiled for split tiles (kSplit, split > 1)
// or for unsplit ones.
template <bool kSplit>
Status launch_gemm(const KernelLaunch& l);
extern template Status launch_gemm<false>(const KernelLaunch&);
extern template Status launch_gemm<true>(const KernelLaunch&);

// How many clusters of each split size run at once on the device: every kernel takes more than
// half of an SM's shared memory (one CTA per SM), so one kernel's answer serves all.
using ClusterCounts = int[kMaxSplit + 1];
const ClusterCounts& cluster_counts(int device, int num_sms);

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
