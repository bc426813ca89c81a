// Host side of the Hopper path: operand preparation, TMA descriptors, configuration
// choice and launch. See sm90_kernel.cuh for the kernel's design.
#include "gemm_sm90/sm90_gemm.h"

#include <cuda.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <utility>

#include "gemm_sm90/sm90_config.h"
#include "gemm_sm90/sm90_kernel.cuh"

// Nothing here is part of the extension's interface: keep the symbols local to it, so that
// two loaded builds of this kernel never bind to each other's copies.
#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

constexpr int kMaxDevices = 64;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// ---- device facts, cached per device ----------------------------------------------------
struct DeviceInfo {
  bool is_sm90 = false;
  int num_sms = 0;
};

const DeviceInfo* device_info(int device) {
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) return nullptr;
  std::call_once(once[device], [device] {
    int major = 0, minor = 0, sms = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    infos[device].is_sm90 = major == 9 && minor == 0;
    infos[device].num_sms = sms;
  });
  return &infos[device];
}

// ---- TMA descriptors ------------------------------------------------------------------
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_fn() {
  static EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return EncodeTiledFn(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

// A 2D row-major view: `cols` contiguous elements per row, rows `row_bytes` apart.
bool make_map(CUtensorMap* map, CUtensorMapDataType type, const void* ptr, int64_t cols, int64_t rows,
              int64_t row_bytes, uint32_t box_cols, uint32_t box_rows,
              CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  EncodeTiledFn fn = encode_fn();
  if (fn == nullptr) return false;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(row_bytes)};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return fn(map, type, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// ---- operands -------------------------------------------------------------------------
// An FP8 operand of `rows` x K as TMA can read it: K-contiguous, 16-byte aligned rows.
struct KMajor {
  const uint8_t* ptr;
  int64_t row_bytes;
};

bool tma_ready(const uint8_t* ptr, int64_t s_row, int64_t s_k, int64_t rows, int64_t K) {
  if (s_k != 1 && K > 1) return false;
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  return rows == 1 || (s_row >= K && s_row % 16 == 0);
}

// The same for an M-contiguous operand (rows contiguous, 16-byte aligned K rows).
bool mn_tma_ready(const uint8_t* ptr, int64_t s_row, int64_t s_k, int64_t rows, int64_t K) {
  if (s_row != 1 || reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  return K == 1 || (s_k >= rows && s_k % 16 == 0);
}

size_t copy_bytes(int64_t rows, int64_t K) { return size_t(round_up(rows * round_up(K, 16), 256)); }

// The operand as TMA reads it: itself, or (job->tiles > 0) a K-major copy in `scratch`.
KMajor plan_operand(const uint8_t* ptr, int64_t s_row, int64_t s_k, int64_t rows, int64_t K, uint8_t* scratch,
                    CopyJob* job) {
  *job = CopyJob{};
  if (tma_ready(ptr, s_row, s_k, rows, K)) return {ptr, rows == 1 ? round_up(K, 16) : s_row};
  const int64_t pitch = round_up(K, 16);
  job->src = ptr;
  job->s_row = s_row;
  job->s_k = s_k;
  job->rows = int(rows);
  job->dst = scratch;
  job->pitch = pitch;
  job->tiles_rows = int((rows + kCopyRows - 1) / kCopyRows);
  job->tiles = job->tiles_rows * int((K + kCopyK - 1) / kCopyK);
  job->vec = s_row == 1 && reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && s_k % 16 == 0;
  return {scratch, pitch};
}

// ---- launch ---------------------------------------------------------------------------
// Per kernel instantiation and device, once: its shared-memory limit raised, and how many
// clusters of each split size run at once.
struct KernelSetup {
  bool ok = false;
  int clusters[kMaxSplit + 1] = {};
};

template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
const KernelSetup& kernel_setup(int device, int num_sms) {
  using T = TileShape<BM, BN>;
  static KernelSetup setups[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[device], [device, num_sms] {
    auto kernel = fp8_gemm_sm90_kernel<BM, BN, kSaSmem, kAMn, kSplit>;
    KernelSetup& s = setups[device];
    s.ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes) == cudaSuccess;
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
Status launch_kernel(const CUtensorMap& map_a, const CUtensorMap& map_a_tail, const CUtensorMap& map_b,
                     const CUtensorMap& map_sa, const KernelParams& p, const GemmArgs& g, int device, int num_sms,
                     cudaStream_t stream, bool after_copy) {
  using T = TileShape<BM, BN>;
  const KernelSetup& setup = kernel_setup<BM, BN, kSaSmem, kAMn, kSplit>(device, num_sms);
  if (!setup.ok) return "gemm_sm90: cannot raise the kernel's shared-memory limit";
  // Output boxes: 64x64 with 128-byte swizzle, or 64 x chunk width unswizzled (T::kSwizzledOut).
  CUtensorMap map_c{};
  KernelParams params = p;
  if (params.tma_store &&
      !make_map(&map_c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, g.out, g.N, g.M,
                g.M == 1 ? round_up(g.N * 2, 16) : g.out_stride_m * 2, T::kSwizzledOut ? 64 : T::kChunkN, 64,
                T::kSwizzledOut ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE))
    params.tma_store = 0;

  const int cluster_size = params.split;
  const int clusters = std::max(1, std::min(params.num_tiles, setup.clusters[cluster_size]));

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
  if (after_copy) {  // start while the operand copy drains; the kernel waits for it (griddepcontrol.wait)
    attrs[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[num_attrs].val.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }
  cfg.gridDim = dim3(unsigned(clusters * cluster_size));
  cfg.blockDim = dim3(T::kThreads);
  cfg.dynamicSmemBytes = T::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = num_attrs;
  auto kernel = fp8_gemm_sm90_kernel<BM, BN, kSaSmem, kAMn, kSplit>;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, map_a, map_a_tail, map_b, map_c, map_sa, params);
  if (err != cudaSuccess && after_copy) {  // no programmatic launch here: plain stream order
    cudaGetLastError();
    cfg.numAttrs = num_attrs - 1;
    err = cudaLaunchKernelEx(&cfg, kernel, map_a, map_a_tail, map_b, map_c, map_sa, params);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return "gemm_sm90: kernel launch failed";
  }
  return kOk;
}

// A scales M-contiguous in 16-byte aligned rows: TMA can bring each stage's BM of them.
bool a_scales_tma_ready(const GemmArgs& g) {
  return g.a_scale_stride_m == 1 && (g.a_scale_stride_kb * 4) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(g.a_scale) % 16 == 0 && (g.k_blocks() == 1 || g.a_scale_stride_kb >= g.M);
}

// The kernel variant: sa_smem (map_sa brings each stage's A scales; always with a_mn), a_mn (A
// M-contiguous, transposed by the consumers), and whether the tile is split along K.
template <int BM, int BN>
Status launch(const CUtensorMap& map_a, const CUtensorMap& map_a_tail, const CUtensorMap& map_b,
              const CUtensorMap& map_sa, const KernelParams& p, const GemmArgs& g, int device, int num_sms,
              cudaStream_t stream, bool after_copy, bool sa_smem, bool a_mn) {
  auto go = [&](auto sa_tma, auto mn) {
    auto with_split = [&](auto split) {
      return launch_kernel<BM, BN, decltype(sa_tma)::value, decltype(mn)::value, decltype(split)::value>(
          map_a, map_a_tail, map_b, map_sa, p, g, device, num_sms, stream, after_copy);
    };
    return p.split > 1 ? with_split(std::true_type{}) : with_split(std::false_type{});
  };
  using std::false_type, std::true_type;
  if constexpr (TileShape<BM, BN>::kScalesFit) {
    if (a_mn) return go(true_type{}, true_type{});
    if (sa_smem) return go(true_type{}, false_type{});
  }
  if (a_mn) return "gemm_sm90: no M-contiguous kernel for this tile";
  return go(false_type{}, false_type{});
}

// The tile shapes that have kernels (sm90_gemm.h lists them for users).
struct TileDims {
  int block_m, block_n;
};
constexpr TileDims kTileShapes[] = {{192, 128}, {192, 144}, {128, 256}, {128, 192}, {128, 144},
                                    {128, 128}, {128, 96},  {128, 72},  {128, 64},  {64, 128},
                                    {64, 144},  {64, 192},  {64, 256}};

template <class F, size_t... I>
auto with_tile_in(int BM, int BN, F& f, std::index_sequence<I...>) {
  using std::integral_constant;
  decltype(f(integral_constant<int, kTileShapes[0].block_m>{}, integral_constant<int, kTileShapes[0].block_n>{})) r{};
  (void)((BM == kTileShapes[I].block_m && BN == kTileShapes[I].block_n &&
          (r = f(integral_constant<int, kTileShapes[I].block_m>{}, integral_constant<int, kTileShapes[I].block_n>{}),
           true)) ||
         ...);
  return r;
}

// f(integral_constant BM, integral_constant BN) for one of kTileShapes (valid_config); a
// value-initialised result for any other shape.
template <class F>
auto with_tile(int BM, int BN, F&& f) {
  return with_tile_in(BM, BN, f, std::make_index_sequence<std::size(kTileShapes)>{});
}

bool valid_config(const TileConfig& c) {
  bool tile = false;
  for (const TileDims& t : kTileShapes) tile = tile || (t.block_m == c.block_m && t.block_n == c.block_n);
  return tile && c.split >= 1 && c.split <= kMaxSplit;
}

bool a_k_major(const GemmArgs& g) { return tma_ready(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K); }
bool b_k_major(const GemmArgs& g) { return tma_ready(g.b, g.b_stride_n, g.b_stride_k, g.N, g.K); }

// How run() lays a problem out for the kernel with a given configuration, and the workspace
// that takes.
struct Plan {
  bool a_mn = false;     // A M-contiguous, read as it is and transposed by the consumers
  size_t workspace = 0;  // K-major copies of the operands TMA cannot read as they are
};

Plan make_plan(const GemmArgs& g, const TileConfig& c) {
  Plan plan;
  // A M-contiguous in 16-byte aligned K rows, on shapes where that pays (transpose_a_in_kernel),
  // in the kernel variant that has its A scales in shared memory.
  const bool scales_fit = with_tile(c.block_m, c.block_n, [](auto bm, auto bn) {
    return TileShape<decltype(bm)::value, decltype(bn)::value>::kScalesFit;
  });
  plan.a_mn = transpose_a_in_kernel(g.M, g.N) && !a_k_major(g) && a_scales_tma_ready(g) && scales_fit &&
              mn_tma_ready(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K);
  const bool copy_a = !plan.a_mn && !a_k_major(g), copy_b = !b_k_major(g);
  plan.workspace = (copy_a ? copy_bytes(g.M, g.K) : 0) + (copy_b ? copy_bytes(g.N, g.K) : 0);
  return plan;
}

const DeviceInfo* current_device(int* device) {
  if (cudaGetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return device_info(*device);
}

}  // namespace

size_t workspace_bytes(const GemmArgs& g) {
  if (g.format != Fp8Format::E4M3FN || g.K == 0) return 0;  // declined
  return make_plan(g, choose_config(g.M, g.N, g.K)).workspace;
}

TileConfig choose_config(int64_t M, int64_t N, int64_t K) {
  int device = 0;
  const DeviceInfo* info = current_device(&device);
  if (info == nullptr || info->num_sms == 0) return kCandidates[0];
  // every configuration fills an SM's shared memory: one kernel's cluster capacity serves all
  return pick_config(M, N, K, kernel_setup<128, 128, false, false, true>(device, info->num_sms).clusters);
}

Status run(const GemmArgs& g, const TileConfig& config, void* workspace, size_t workspace_size,
           cudaStream_t stream) {
  if (!valid_config(config)) return "gemm_sm90: invalid tile configuration";
  const Plan plan = make_plan(g, config);
  if (workspace_size < plan.workspace || (plan.workspace > 0 && workspace == nullptr))
    return "gemm_sm90: workspace smaller than workspace_bytes()";
  int device = 0;
  const DeviceInfo* info = current_device(&device);
  if (info == nullptr) return "gemm_sm90: no current CUDA device";
  if (!info->is_sm90) return "gemm_sm90: the current device is not sm_90";

  const int BM = config.block_m, BN = config.block_n;
  uint8_t* scratch = static_cast<uint8_t*>(workspace);
  CopyJob copy_a{}, copy_b;
  KMajor a{};
  if (!plan.a_mn) {
    a = plan_operand(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K, scratch, &copy_a);
    if (copy_a.tiles > 0) scratch += copy_bytes(g.M, g.K);
  }
  const KMajor b = plan_operand(g.b, g.b_stride_n, g.b_stride_k, g.N, g.K, scratch, &copy_b);
  const bool after_copy = copy_a.tiles + copy_b.tiles > 0;
  if (after_copy) {
    const CopyJobs jobs{{copy_a.tiles > 0 ? copy_a : copy_b, copy_a.tiles > 0 ? copy_b : copy_a}};
    to_k_major_kernel<kCopyRows, kCopyK><<<unsigned(copy_a.tiles + copy_b.tiles), kCopyThreads, 0, stream>>>(
        jobs, int(g.K));
    if (cudaGetLastError() != cudaSuccess) return "gemm_sm90: operand copy launch failed";
  }

  KernelParams p{};
  p.M = int(g.M);
  p.N = int(g.N);
  p.K = int(g.K);
  p.num_kb = int(g.k_blocks());
  p.tiles_m = int((g.M + BM - 1) / BM);
  p.tiles_n = int((g.N + BN - 1) / BN);
  p.num_tiles = p.tiles_m * p.tiles_n;
  p.split = config.split;
  // Raster: the CTAs running at once share A tiles across N and B tiles across M. 192-row
  // tiles with K loops of 8 blocks or more run faster when 1536 columns of N tiles (12 of 128,
  // 10 of 144) walk M together, so that their larger A tiles are shared by fewer CTAs
  // (NOTES-sm90.md run 33). Other tiles: 8 M tiles walk N.
  p.group_along_n = BM == 192 && p.num_kb >= 8;
  p.group = p.group_along_n ? std::min(p.tiles_n, std::max(1, 1536 / BN)) : std::min(p.tiles_m, 8);
  // When one group spans all of N, each A tile is read by that group alone, once: A's lines
  // leave L2 first and B's stay (6144x512x7168 -6%, NOTES-sm90.md run 33d).
  p.stream_a = p.group_along_n && p.group == p.tiles_n;
  p.a_scale = g.a_scale;
  p.sa_kb = g.a_scale_stride_kb;
  p.sa_m = g.a_scale_stride_m;
  p.b_scale = g.b_scale;
  p.sb_kb = g.b_scale_stride_kb;
  p.sb_nb = g.b_scale_stride_nb;
  p.n_blocks = int(g.n_blocks());
  p.out = g.out;
  p.out_sm = g.out_stride_m;
  p.out_sn = g.out_stride_n;
  const uintptr_t out_addr = reinterpret_cast<uintptr_t>(g.out);
  const bool out_rows = g.out_stride_n == 1 || g.N == 1;
  const bool out_rows_16 = g.M == 1 || (g.out_stride_m % 8 == 0 && g.out_stride_m >= g.N);
  // Split tiles store through TMA where each CTA finishes whole warpgroup regions.
  const bool whole_regions = config.split == 1 || pushes_split_partials(BM, BN, config.split);
  p.tma_store = whole_regions && out_rows && out_addr % 16 == 0 && out_rows_16;
  p.out_vec4 = out_rows && out_addr % 8 == 0 && (g.M == 1 || g.out_stride_m % 4 == 0);

  CUtensorMap map_a{}, map_b{};
  // M-contiguous A: boxes of up to 128 rows (one 128-byte line per K row), and for BM = 192 a
  // second map for the last 64 rows.
  CUtensorMap map_a_tail{};
  const int64_t a_k_bytes = g.K == 1 ? round_up(g.M, 16) : g.a_stride_k;
  auto mn_map = [&](CUtensorMap* map, uint32_t rows) {
    return make_map(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, g.a, g.M, g.K, a_k_bytes, rows, kBlockK,
                    rows == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B);
  };
  const bool map_a_ok = plan.a_mn ? mn_map(&map_a, std::min(BM, 128)) && (BM != 192 || mn_map(&map_a_tail, 64))
                                  : make_map(&map_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, a.ptr, g.K, g.M, a.row_bytes,
                                             kBlockK, BM);
  if (!map_a_ok || !make_map(&map_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, b.ptr, g.K, g.N, b.row_bytes, kBlockK, BN))
    return "gemm_sm90: cannot encode the operands' TMA descriptors";
  CUtensorMap map_sa{};  // each stage's BM A scales, where TMA can read them
  const bool sa_smem = a_scales_tma_ready(g) &&
                       make_map(&map_sa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, g.a_scale, g.M, g.k_blocks(),
                                g.k_blocks() == 1 ? round_up(g.M * 4, 16) : g.a_scale_stride_kb * 4, BM, 1,
                                CU_TENSOR_MAP_SWIZZLE_NONE);
  if (plan.a_mn && !sa_smem) return "gemm_sm90: cannot encode the A scales' TMA descriptor";

  return with_tile(BM, BN, [&](auto bm, auto bn) {
    return launch<decltype(bm)::value, decltype(bn)::value>(map_a, map_a_tail, map_b, map_sa, p, g, device,
                                                            info->num_sms, stream, after_copy, sa_smem, plan.a_mn);
  });
}

Status try_gemm(const GemmArgs& g, void* workspace, size_t workspace_size, cudaStream_t stream, bool* handled) {
  *handled = false;
  if (g.format != Fp8Format::E4M3FN || g.K == 0) return kOk;  // the general path takes these
  constexpr int64_t kMaxDim = int64_t(1) << 30, kMaxTiles = int64_t(1) << 30;  // int indexing
  if (g.M >= kMaxDim || g.N >= kMaxDim || g.K >= kMaxDim || ((g.M + 63) / 64) * ((g.N + 63) / 64) >= kMaxTiles)
    return kOk;
  int device = 0;
  const DeviceInfo* info = current_device(&device);
  if (info == nullptr || !info->is_sm90) return kOk;
  const TileConfig config = choose_config(g.M, g.N, g.K);
  const size_t needed = make_plan(g, config).workspace;
  if (needed > workspace_size || (needed > 0 && workspace == nullptr)) return kOk;
  constexpr int64_t kMaxCopyTiles = int64_t(1) << 30;  // the operand copy's grid size
  if (needed > 0 &&
      ((g.M + kCopyRows - 1) / kCopyRows + (g.N + kCopyRows - 1) / kCopyRows) * ((g.K + kCopyK - 1) / kCopyK) >=
          kMaxCopyTiles)
    return kOk;
  *handled = true;
  if (g.M == 0 || g.N == 0) return kOk;
  return run(g, config, workspace, workspace_size, stream);
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
