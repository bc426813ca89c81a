// Host side of the grouped GEMM on the wgmma tiles: which layouts it takes, its TMA descriptors
// and its launch (kernel: sm90_grouped_tiles.cuh).
#include <cuda.h>

#include <algorithm>
#include <mutex>

#include "gemm_cuda/pdl_launch.h"
#include "gemm_sm90/sm90_grouped_tiles.cuh"
#include "gemm_sm90/sm90_grouped_tiles.h"
#include "gemm_sm90/sm90_launch.h"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

using grouped_tiles::TilesParams;
// Columns of the 128-row tiles, the 64-row ones and the 192-row ones (the dense kernel's 192x128): 64x256
// (a warpgroup per 128 columns) took 0.90-0.99x the time of 64x128 for DeepSeek-V3's experts at 1-1,024
// tokens on the H200; 128x256 gained nothing on 128x128.
constexpr int kBlockN128 = 128, kBlockN64 = 256, kBlockN192 = 128;

bool aligned(const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

// One launch of the grouped kernel on BM x BN tiles, set up (its shared-memory limit raised, its
// descriptors encoded) before anything is queued: where the driver refuses a setup, the split into three
// launches queues none of them (a launch the driver refuses still leaves the ones before it queued).
struct TilesLaunch {
  void (*kernel)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, TilesParams);
  cudaLaunchConfig_t cfg;
  CUtensorMap map_a, map_b, map_c, map_sa;
  TilesParams q;
};

template <int BM, int BN, bool kSiluQuant = false>
Status set_up(const GroupedGemmArgs& g, TilesParams q, grouped_tiles::TilePart part, int device, int num_sms,
              TilesLaunch* launch) {
  using T = TileShape<BM, BN>;
  auto kernel = grouped_tiles::fp8_grouped_tiles_kernel<BM, BN, kSiluQuant>;
  static bool raised[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[device], [&] {
    raised[device] = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          grouped_tiles::kTilesSmemBytes<BM, BN>) == cudaSuccess;
    cudaGetLastError();
  });
  if (!raised[device]) return "gemm_sm90: cannot raise the grouped kernel's shared-memory limit";
  if (!make_map(&launch->map_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, g.a, g.K, g.rows, g.a_stride_m, kBlockK, BM) ||
      !make_map(&launch->map_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, g.b, g.K, g.experts * g.N, g.b_stride_n,
                kBlockK, kSiluQuant ? BN / 2 : BN) ||
      !make_scale_map(&launch->map_sa, g.a_scale, g.rows, g.k_blocks(), g.a_scale_stride_kb,
                      grouped_tiles::kSaBox<BM>))
    return "gemm_sm90: cannot encode the grouped GEMM's TMA descriptors";
  // The tiles whose rows all belong to their expert store through shared memory and TMA, as the dense
  // kernel's do; the others (an expert's last tile) store elements. Not with SiLU-and-mul (no bf16 out).
  const bool out_rows_16 = aligned(g.out, 16) && g.out_stride_m % 8 == 0 && g.out_stride_m >= g.N;
  q.p.tma_store = !kSiluQuant && out_rows_16 &&
                  make_map(&launch->map_c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, g.out, g.N, g.rows,
                           g.out_stride_m * 2, T::kSwizzledOut ? 64 : T::kChunkN, 64,
                           T::kSwizzledOut ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
  if (!q.p.tma_store) launch->map_c = launch->map_a;  // never read: every tile stores elements
  q.part = part;
  q.p.tiles_n = int(kSiluQuant ? g.N / BN : ceil_div(g.N, BN));  // kSiluQuant: N / 2 columns out, 128 a tile
  // At most one partial M-tile per expert beyond the rows' whole tiles.
  const int64_t owners = std::min(g.experts, g.rows);
  const int64_t m_tiles = ceil_div(g.rows, BM) + owners;
  launch->kernel = kernel;
  launch->cfg = {};
  launch->cfg.gridDim =
      dim3(unsigned(std::max<int64_t>(1, std::min<int64_t>(num_sms, m_tiles * q.p.tiles_n))));
  launch->cfg.blockDim = dim3(T::kThreads);
  launch->cfg.dynamicSmemBytes = grouped_tiles::kTilesSmemBytes<BM, BN>;
  launch->q = q;
  return kOk;
}

Status queue(TilesLaunch launch, cudaStream_t stream) {
  launch.cfg.stream = stream;
  if (pdl::launch_programmatic(launch.cfg, launch.kernel, launch.map_a, launch.map_b, launch.map_c,
                               launch.map_sa, launch.q) == cudaSuccess)
    return kOk;
  cudaGetLastError();
  return "gemm_sm90: grouped kernel launch failed";
}

bool takes_silu(const GroupedGemmArgs& g) {
  return grouped_tiles_take(g) && g.N % 256 == 0 && g.silu_scale != nullptr && aligned(g.silu_q, 4) &&
         g.silu_q_stride_m % 4 == 0;
}

}  // namespace

bool grouped_tiles_take(const GroupedGemmArgs& g) {
  constexpr int64_t kMaxIndex = int64_t(1) << 30;
  return g.format == Fp8Format::E4M3FN && g.row_index == nullptr && g.N > 0 && g.N % 8 == 0 && g.K > 0 &&
         g.K % 16 == 0 && g.rows < kMaxIndex && g.experts * g.N < kMaxIndex && g.K < kMaxIndex &&
         g.a_stride_k == 1 && g.a_stride_m % 16 == 0 && (g.rows == 1 || g.a_stride_m >= g.K) &&
         aligned(g.a, 16) && g.b_stride_k == 1 && g.b_stride_n % 16 == 0 && g.b_stride_n >= g.K &&
         g.b_stride_e == g.N * g.b_stride_n && aligned(g.b, 16) && g.out_stride_n == 1 &&
         g.out_stride_m % 2 == 0 && aligned(g.out, 4) && g.a_scales_m_contiguous_16();
}

Status launch_grouped_tiles(const GroupedGemmArgs& g, TileHeights heights, cudaStream_t stream) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return "gemm_sm90: no current CUDA device";
  }
  const DeviceInfo* info = device_info(device);
  if (info == nullptr || info->num_sms == 0) return "gemm_sm90: cannot read the device's SM count";
  TilesParams q{};
  KernelParams& p = q.p;
  set_operands(p, g, g.rows);
  p.n_blocks = int(g.n_blocks());
  p.split = 1;
  q.expert_rows = g.expert_rows;
  q.experts = int(g.experts);
  q.masked = g.masked;
  q.capacity = int(g.capacity);
  q.sb_e = g.b_scale_stride_e;
  q.silu_q = g.silu_q;
  q.silu_q_sm = g.silu_q_stride_m;
  q.silu_scale = g.silu_scale;
  q.silu_scale_sm = g.silu_scale_stride_m;
  q.silu_scale_skb = g.silu_scale_stride_kb;
  p.b_before_wait = g.after_quantize;  // the routing too
  const int sms = info->num_sms;
  TilesLaunch launches[3];
  int count = 0;
  Status status = kOk;
  if (g.silu_q != nullptr) {
    if (heights != TileHeights::k64 || !takes_silu(g))
      return "gemm_sm90: SiLU-and-mul in the grouped GEMM needs its 64-row tiles, N a multiple of 256 and "
             "4-byte aligned rows of codes";
    status = set_up<64, kBlockN64, true>(g, q, grouped_tiles::kEveryTile, device, sms, &launches[count++]);
  } else if (heights == TileHeights::k64) {
    status = set_up<64, kBlockN64>(g, q, grouped_tiles::kEveryTile, device, sms, &launches[count++]);
  } else {
    // Each launch writes other rows than the ones before and follows them (programmatically), so that
    // whatever waits on this GEMM waits on all three.
    using grouped_tiles::kMediumRows, grouped_tiles::kSlabRows, grouped_tiles::kTallRows;
    status = set_up<kTallRows, kBlockN192>(g, q, grouped_tiles::kTallTiles, device, sms, &launches[count++]);
    if (status == kOk)
      status =
          set_up<kMediumRows, kBlockN128>(g, q, grouped_tiles::kMediumTiles, device, sms, &launches[count++]);
    if (status == kOk)
      status = set_up<kSlabRows, kBlockN64>(g, q, grouped_tiles::kSlabTile, device, sms, &launches[count++]);
  }
  for (int i = 0; i < count && status == kOk; ++i) status = queue(launches[i], stream);
  return status;
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
