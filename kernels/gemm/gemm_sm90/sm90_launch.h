#pragma once
// Between the host code (sm90_gemm.cu) and the translation units that compile the GEMM kernels
// (sm90_kernels_unsplit.cu, sm90_kernels_split.cu; sm90_grouped_tiles.cu): one launch as run()
// prepares it, and the device facts and TMA descriptors they share. The dense kernels are
// compiled in two halves so that a parallel build compiles them at once.
#include <cuda.h>
#include <cuda_runtime.h>

#include "gemm_sm90/sm90_gemm.h"
#include "gemm_sm90/sm90_tiles.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

constexpr int kMaxDevices = 64;

// Device facts, read once per device (nullptr for a device number past kMaxDevices).
struct DeviceInfo {
  bool is_sm90 = false;
  int num_sms = 0;
  bool h200_class = false;  // more than 100 GiB of memory (HBM3e: H200, GH200): SM90_SMALL_M_H200
};
const DeviceInfo* device_info(int device);

// A TMA descriptor of a 2D row-major view: `cols` contiguous elements per row, rows `row_bytes`
// apart, boxes of box_cols x box_rows. Encoding one costs about as much host time as a launch;
// the last ones are remembered per host thread. false when the driver refuses the view.
bool make_map(CUtensorMap* map, CUtensorMapDataType type, const void* ptr, int64_t cols, int64_t rows,
              int64_t row_bytes, uint32_t box_cols, uint32_t box_rows,
              CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);

// The TMA descriptor of A's scales (a_scales_m_contiguous_16), box_rows rows of one K block a box.
bool make_scale_map(CUtensorMap* map, const float* a_scale, int64_t rows, int64_t k_blocks, int64_t stride_kb,
                    uint32_t box_rows);

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

// The sizes, scales and output of a kernel's parameters (KernelParams, DecodeParams) from a
// GemmArgs or a GroupedGemmArgs (the same field names); M is `rows`, the rows of A and of out.
template <class Params, class Args>
void set_operands(Params& p, const Args& g, int64_t rows) {
  p.M = int(rows);
  p.N = int(g.N);
  p.K = int(g.K);
  p.num_kb = int(g.k_blocks());
  p.a_scale = g.a_scale;
  p.sa_kb = g.a_scale_stride_kb;
  p.sa_m = g.a_scale_stride_m;
  p.b_scale = g.b_scale;
  p.sb_kb = g.b_scale_stride_kb;
  p.sb_nb = g.b_scale_stride_nb;
  p.out = g.out;
  p.out_sm = g.out_stride_m;
  p.out_sn = g.out_stride_n;
}

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
