#pragma once
// The kernel launches behind launch_gemm<kSplit> (sm90_launch.h). Included only by the two
// translation units that instantiate it, each for its half of the kernels.
#include <algorithm>
#include <mutex>
#include <type_traits>

#include "gemm_sm90/sm90_kernel.cuh"
#include "gemm_sm90/sm90_launch.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {
namespace {

// Per kernel instantiation and device, once: its shared-memory limit raised, and how many
// clusters of each split size run at once.
struct KernelSetup {
  bool ok = false;
  ClusterCounts clusters = {};
};

template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
const KernelSetup& kernel_setup(int device, int num_sms) {
  using T = TileShape<BM, BN>;
  static KernelSetup setups[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[device], [device, num_sms] {
    auto kernel = fp8_gemm_sm90_kernel<BM, BN, kSaSmem, kAMn, kSplit>;
    KernelSetup& s = setups[device];
    s.ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes) ==
           cudaSuccess;
    for (int split = 1; split <= kMaxSplit; ++split) {
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = split;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.gridDim = dim3(unsigned(num_sms / split * split));  // the answer is capped by the grid
      cfg.blockDim = dim3(T::kThreads);
      cfg.dynamicSmemBytes = T::kSmemBytes;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess || n <= 0) n = num_sms / split;
      s.clusters[split] = n;
    }
    cudaGetLastError();
  });
  return setups[device];
}

template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
Status launch_kernel(const KernelLaunch& l) {
  using T = TileShape<BM, BN>;
  const KernelSetup& setup = kernel_setup<BM, BN, kSaSmem, kAMn, kSplit>(l.device, l.num_sms);
  if (!setup.ok) return "gemm_sm90: cannot raise the kernel's shared-memory limit";
  const int cluster_size = l.params.split;
  const int clusters = std::max(1, std::min(l.params.num_tiles, setup.clusters[cluster_size]));

  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attrs[2];
  unsigned num_attrs = 0;
  if (cluster_size > 1) {
    attrs[num_attrs].id = cudaLaunchAttributeClusterDimension;
    attrs[num_attrs].val.clusterDim.x = cluster_size;
    attrs[num_attrs].val.clusterDim.y = 1;
    attrs[num_attrs].val.clusterDim.z = 1;
    ++num_attrs;
  }
  if (l.programmatic) {  // start while the kernel before drains; this one waits for it (griddepcontrol.wait)
    attrs[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[num_attrs].val.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }
  cfg.gridDim = dim3(unsigned(clusters * cluster_size));
  cfg.blockDim = dim3(T::kThreads);
  cfg.dynamicSmemBytes = T::kSmemBytes;
  cfg.stream = l.stream;
  cfg.attrs = attrs;
  cfg.numAttrs = num_attrs;
  auto kernel = fp8_gemm_sm90_kernel<BM, BN, kSaSmem, kAMn, kSplit>;
  cudaError_t err =
      cudaLaunchKernelEx(&cfg, kernel, l.map_a, l.map_a_tail, l.map_b, l.map_c, l.map_sa, l.params);
  if (err != cudaSuccess && l.programmatic) {  // no programmatic launch here: plain stream order
    cudaGetLastError();
    cfg.numAttrs = num_attrs - 1;
    err = cudaLaunchKernelEx(&cfg, kernel, l.map_a, l.map_a_tail, l.map_b, l.map_c, l.map_sa, l.params);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return "gemm_sm90: kernel launch failed";
  }
  return kOk;
}

// The kernel variant: sa_smem (map_sa brings each stage's A scales; always with a_mn) and a_mn
// (A M-contiguous, transposed by the consumers).
template <int BM, int BN, bool kSplit>
Status launch_tile(const KernelLaunch& l) {
  using std::false_type, std::true_type;
  auto go = [&](auto sa_tma, auto mn) {
    return launch_kernel<BM, BN, decltype(sa_tma)::value, decltype(mn)::value, kSplit>(l);
  };
  if constexpr (TileShape<BM, BN>::kScalesFit) {
    if (l.a_mn) return go(true_type{}, true_type{});
    if (l.sa_smem) return go(true_type{}, false_type{});
  }
  if (l.a_mn) return "gemm_sm90: no M-contiguous kernel for this tile";
  return go(false_type{}, false_type{});
}

}  // namespace

template <bool kSplit>
Status launch_gemm(const KernelLaunch& l) {
  if ((l.params.split > 1) != kSplit) return "gemm_sm90: kernel half does not match the split";
  Status s = "gemm_sm90: no kernel for this tile shape";
  with_tile(l.config.block_m, l.config.block_n, [&](auto bm, auto bn) {
    s = launch_tile<decltype(bm)::value, decltype(bn)::value, kSplit>(l);
    return true;
  });
  return s;
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
