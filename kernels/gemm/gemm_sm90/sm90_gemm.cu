// Host side of the Hopper path: operand preparation, TMA descriptors, configuration
// choice and launch. See sm90_kernel.cuh for the kernel's design.
#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <utility>

#include "gemm_sm90/sm90_config.h"
#include "gemm_sm90/sm90_copy.cuh"
#include "gemm_sm90/sm90_decode.h"
#include "gemm_sm90/sm90_gemm.h"
#include "gemm_sm90/sm90_launch.h"

// Nothing here is part of the extension's interface: keep the symbols local to it, so that
// two loaded builds of this kernel never bind to each other's copies.
#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Results of a pure function of up to a few 64-bit values, remembered per host thread in a
// direct-mapped table: a layer called again with the same shapes and buffers (as a model's
// layers are, call after call) skips the work. Only a cost: a miss recomputes.
template <size_t kWords, class Value, size_t kSlots>
class Remembered {
 public:
  using Key = std::array<uint64_t, kWords>;

  const Value* find(const Key& key) const {
    const Slot& slot = slots_[index(key)];
    return slot.used && slot.key == key ? &slot.value : nullptr;
  }
  void keep(const Key& key, const Value& value) { slots_[index(key)] = {true, key, value}; }

 private:
  struct Slot {
    bool used = false;
    Key key{};
    Value value{};
  };
  static size_t index(const Key& key) {
    uint64_t h = 0;
    for (uint64_t word : key) h = (h ^ word) * 0x100000001B3ull;  // FNV-1a over words
    return size_t(h >> 32) % kSlots;
  }
  std::array<Slot, kSlots> slots_{};
};

// ---- TMA descriptors ------------------------------------------------------------------
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                   CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                   CUtensorMapFloatOOBfill);

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

}  // namespace

// ---- device facts, cached per device ----------------------------------------------------
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
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
      infos[device].h200_class = prop.totalGlobalMem > (size_t(100) << 30);
    } else {
      cudaGetLastError();
    }
  });
  return &infos[device];
}

bool make_map(CUtensorMap* map, CUtensorMapDataType type, const void* ptr, int64_t cols, int64_t rows,
              int64_t row_bytes, uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle) {
  thread_local Remembered<6, CUtensorMap, 512> encoded;  // ~128 KB per host thread
  const decltype(encoded)::Key key = {uint64_t(type) << 32 | uint64_t(swizzle),
                                      uint64_t(reinterpret_cast<uintptr_t>(ptr)),
                                      uint64_t(cols),
                                      uint64_t(rows),
                                      uint64_t(row_bytes),
                                      uint64_t(box_cols) << 32 | box_rows};
  if (const CUtensorMap* known = encoded.find(key)) {
    *map = *known;
    return true;
  }
  EncodeTiledFn fn = encode_fn();
  if (fn == nullptr) return false;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(row_bytes)};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  if (fn(map, type, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  encoded.keep(key, *map);
  return true;
}

bool make_scale_map(CUtensorMap* map, const float* a_scale, int64_t rows, int64_t k_blocks, int64_t stride_kb,
                    uint32_t box_rows) {
  const int64_t row_bytes = k_blocks == 1 ? round_up(rows * 4, 16) : stride_kb * 4;
  return make_map(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, a_scale, rows, k_blocks, row_bytes, box_rows, 1,
                  CU_TENSOR_MAP_SWIZZLE_NONE);
}

namespace {

// ---- operands -------------------------------------------------------------------------
// An FP8 operand of `rows` x K as TMA reads it: K-contiguous, 16-byte aligned rows.
struct KMajor {
  const uint8_t* ptr;
  int64_t row_bytes;
};

// Whether TMA can read a K-major operand: K-contiguous, 16-byte aligned start and rows.
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

// TMA reads rows whose pitch is an odd multiple of 16 bytes far slower than rows 32 bytes apart
// (2048x7168xK, 128x128 tiles: K = 2064 103.7 us, 2080 63.4, 2176 58.5). A copy to a 128-byte
// pitch costs a pass over the operands, and pays where the tiles read them many times over:
// MN / (M + N) >= 512 (copied: 2048x7168x2064 -28%, 1024x1536x7184 -12%, but 64x1536x7184
// +53%, 128x7168x2064 +49%, 256x256x1040 +23%).
bool slow_pitch(int64_t pitch) { return pitch % 32 != 0; }
bool repitch_pays(const GemmArgs& g) { return g.M * g.N >= 512 * (g.M + g.N); }

int64_t copy_pitch(int64_t K) { return round_up(K, 128); }
size_t copy_bytes(int64_t rows, int64_t K) { return size_t(rows * copy_pitch(K)); }

// The operand as TMA reads it: itself, or (copy; job->tiles > 0) a K-major copy in `scratch`.
KMajor plan_operand(const uint8_t* ptr, int64_t s_row, int64_t s_k, int64_t rows, int64_t K, bool copy,
                    uint8_t* scratch, CopyJob* job) {
  *job = CopyJob{};
  if (!copy) return {ptr, rows == 1 ? round_up(K, 16) : s_row};
  const int64_t pitch = copy_pitch(K);
  job->src = ptr;
  job->s_row = s_row;
  job->s_k = s_k;
  job->rows = int(rows);
  job->dst = scratch;
  job->pitch = pitch;
  job->tiles_rows = int((rows + kCopyRows - 1) / kCopyRows);
  job->tiles = job->tiles_rows * int((K + kCopyK - 1) / kCopyK);
  const bool aligned = reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  job->vec = aligned && ((s_row == 1 && s_k % 16 == 0) || (s_k == 1 && s_row % 16 == 0));
  return {scratch, pitch};
}

// A scales M-contiguous in 16-byte aligned rows: TMA can bring each stage's BM of them.
bool a_scales_tma_ready(const GemmArgs& g) {
  return a_scales_m_contiguous_16(g.a_scale, g.a_scale_stride_m, g.a_scale_stride_kb, g.M, g.k_blocks());
}

bool valid_config(const TileConfig& c) {
  return find_tile(c.block_m, c.block_n) != nullptr && c.split >= 1 && c.split <= kMaxSplit;
}

// The configuration force_config() set (block_m 0: none), packed to be read without a lock.
std::atomic<uint64_t> forced_config{0};

uint64_t pack(const TileConfig& c) {
  return uint64_t(uint16_t(c.block_m)) | uint64_t(uint16_t(c.block_n)) << 16 |
         uint64_t(uint16_t(c.split)) << 32;
}

TileConfig unpack(uint64_t packed) {
  return {int(packed & 0xFFFF), int((packed >> 16) & 0xFFFF), int((packed >> 32) & 0xFFFF)};
}

// Whether TMA reads an operand as it lies: K-major (or, for A, M-contiguous), at a pitch that
// reads fast or that would not pay to copy.
bool k_major_as_is(const GemmArgs& g, const uint8_t* ptr, int64_t s_row, int64_t s_k, int64_t rows) {
  return tma_ready(ptr, s_row, s_k, rows, g.K) && (rows == 1 || !slow_pitch(s_row) || !repitch_pays(g));
}
bool a_as_is(const GemmArgs& g) { return k_major_as_is(g, g.a, g.a_stride_m, g.a_stride_k, g.M); }
bool b_as_is(const GemmArgs& g) { return k_major_as_is(g, g.b, g.b_stride_n, g.b_stride_k, g.N); }
bool a_mn_as_is(const GemmArgs& g) {
  return mn_tma_ready(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K) &&
         (g.K == 1 || !slow_pitch(g.a_stride_k) || !repitch_pays(g));
}

// How run() lays a problem out for the kernel with a given configuration, and the workspace
// that takes.
struct Plan {
  bool a_mn = false;    // A M-contiguous, read as it is and transposed by the consumers
  bool copy_a = false;  // K-major copies of the operands (see a_as_is)
  bool copy_b = false;
  size_t workspace = 0;  // for the copies
};

Plan make_plan(const GemmArgs& g, const TileConfig& c) {
  Plan plan;
  // A M-contiguous, on shapes where transposing it in the kernel pays (transpose_a_in_kernel),
  // in the kernel variant that has its A scales in shared memory.
  const bool scales_fit = with_tile(c.block_m, c.block_n, [](auto bm, auto bn) {
    return TileShape<decltype(bm)::value, decltype(bn)::value>::kScalesFit;
  });
  const bool a_k_major = a_as_is(g);
  plan.a_mn =
      transpose_a_in_kernel(g.M, g.N) && !a_k_major && a_scales_tma_ready(g) && scales_fit && a_mn_as_is(g);
  plan.copy_a = !plan.a_mn && !a_k_major;
  plan.copy_b = !b_as_is(g);
  plan.workspace = (plan.copy_a ? copy_bytes(g.M, g.K) : 0) + (plan.copy_b ? copy_bytes(g.N, g.K) : 0);
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
  int device = 0;
  const DeviceInfo* info = current_device(&device);
  const int num_sms = info != nullptr ? info->num_sms : 0;
  const bool h200_class = info != nullptr && info->h200_class;
  if (g.format != Fp8Format::E4M3FN || g.K == 0 || decode_takes(g, num_sms, h200_class))
    return 0;  // declined, or no copies
  return make_plan(g, choose_config(g.M, g.N, g.K)).workspace;
}

Status force_config(int block_m, int block_n, int split) {
  const TileConfig c{block_m, block_n, split};
  if (block_m == 0) {
    forced_config = 0;
    return kOk;
  }
  if (!valid_config(c)) return "gemm_sm90: no kernel for this tile (see kTileShapes) or split outside 1..4";
  forced_config = pack(c);
  return kOk;
}

TileConfig choose_config(int64_t M, int64_t N, int64_t K) {
  if (const uint64_t forced = forced_config; forced != 0) return unpack(forced);
  int device = 0;
  const DeviceInfo* info = current_device(&device);
  if (info == nullptr || info->num_sms == 0) return kCandidates[0];
  thread_local Remembered<4, TileConfig, 64> picked;
  const decltype(picked)::Key key = {uint64_t(M), uint64_t(N), uint64_t(K), uint64_t(device)};
  if (const TileConfig* known = picked.find(key)) return *known;
  const TileConfig config = pick_config(M, N, K, cluster_counts(device, info->num_sms), info->h200_class);
  picked.keep(key, config);
  return config;
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
    a = plan_operand(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K, plan.copy_a, scratch, &copy_a);
    if (copy_a.tiles > 0) scratch += copy_bytes(g.M, g.K);
  }
  const KMajor b = plan_operand(g.b, g.b_stride_n, g.b_stride_k, g.N, g.K, plan.copy_b, scratch, &copy_b);
  const bool after_copy = copy_a.tiles + copy_b.tiles > 0;
  if (after_copy) {
    const CopyJobs jobs{{copy_a.tiles > 0 ? copy_a : copy_b, copy_a.tiles > 0 ? copy_b : copy_a}};
    to_k_major_kernel<kCopyRows, kCopyK>
        <<<unsigned(copy_a.tiles + copy_b.tiles), kCopyThreads, 0, stream>>>(jobs, int(g.K));
    if (cudaGetLastError() != cudaSuccess) return "gemm_sm90: operand copy launch failed";
  }

  KernelLaunch l{};
  l.config = config;
  l.device = device;
  l.num_sms = info->num_sms;
  l.stream = stream;
  l.programmatic = after_copy || g.after_quantize;
  l.a_mn = plan.a_mn;
  KernelParams& p = l.params;
  set_operands(p, g, g.M);
  p.n_blocks = int(g.n_blocks());
  p.tiles_m = int((g.M + BM - 1) / BM);
  p.tiles_n = int((g.N + BN - 1) / BN);
  p.num_tiles = p.tiles_m * p.tiles_n;
  p.split = config.split;
  p.b_before_wait = g.after_quantize && !after_copy;
  // Raster: the CTAs running at once share A tiles across N and B tiles across M. 192-row
  // tiles with K loops of 8 blocks or more run faster when 1536 columns of N tiles (12 of 128,
  // 10 of 144) walk M together, so that their larger A tiles are shared by fewer CTAs
  // (with the L2 hints below, 2-6% on 6144x1536x7168 and 6144x512x7168). Other tiles: 8 M tiles
  // walk N.
  p.group_along_n = BM == 192 && p.num_kb >= 8;
  p.group = p.group_along_n ? std::min(p.tiles_n, std::max(1, 1536 / BN)) : std::min(p.tiles_m, 8);
  // When one group spans all of N, each A tile is read by that group alone, once: A's lines
  // leave L2 first and B's stay (6144x512x7168 -6%).
  p.stream_a = p.group_along_n && p.group == p.tiles_n;
  p.bias = g.bias;
  p.bias_stride = g.bias_stride;
  const uintptr_t out_addr = reinterpret_cast<uintptr_t>(g.out);
  const bool out_rows = g.out_stride_n == 1 || g.N == 1;
  const bool out_rows_16 = g.M == 1 || (g.out_stride_m % 8 == 0 && g.out_stride_m >= g.N);
  // Split tiles store through TMA where each CTA finishes whole warpgroup regions.
  const bool whole_regions = config.split == 1 || pushes_split_partials(BM, BN, config.split);
  p.tma_store = whole_regions && out_rows && out_addr % 16 == 0 && out_rows_16;
  p.out_vec4 = out_rows && out_addr % 8 == 0 && (g.M == 1 || g.out_stride_m % 4 == 0);

  // M-contiguous A: boxes of up to 128 rows (one 128-byte line per K row), and for BM = 192 a
  // second map for the last 64 rows.
  const int64_t a_k_bytes = g.K == 1 ? round_up(g.M, 16) : g.a_stride_k;
  auto mn_map = [&](CUtensorMap* map, uint32_t rows) {
    return make_map(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, g.a, g.M, g.K, a_k_bytes, rows, kBlockK,
                    rows == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B);
  };
  const bool map_a_ok =
      plan.a_mn
          ? mn_map(&l.map_a, std::min(BM, 128)) && (BM != 192 || mn_map(&l.map_a_tail, 64))
          : make_map(&l.map_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, a.ptr, g.K, g.M, a.row_bytes, kBlockK, BM);
  if (!map_a_ok ||
      !make_map(&l.map_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, b.ptr, g.K, g.N, b.row_bytes, kBlockK, BN))
    return "gemm_sm90: cannot encode the operands' TMA descriptors";
  l.sa_smem = a_scales_tma_ready(g) &&
              make_scale_map(&l.map_sa, g.a_scale, g.M, g.k_blocks(), g.a_scale_stride_kb, BM);
  if (plan.a_mn && !l.sa_smem) return "gemm_sm90: cannot encode the A scales' TMA descriptor";
  // Output boxes: 64x64 with 128-byte swizzle, or 64 x chunk width unswizzled (kSwizzledOut).
  const auto [swizzled_out, chunk_n] = with_tile(BM, BN, [](auto bm, auto bn) {
    using T = TileShape<decltype(bm)::value, decltype(bn)::value>;
    return std::pair<bool, int>(T::kSwizzledOut, T::kChunkN);
  });
  if (p.tma_store &&
      !make_map(&l.map_c, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, g.out, g.N, g.M,
                g.M == 1 ? round_up(g.N * 2, 16) : g.out_stride_m * 2, swizzled_out ? 64 : chunk_n, 64,
                swizzled_out ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE))
    p.tma_store = 0;
  return config.split > 1 ? launch_gemm<true>(l) : launch_gemm<false>(l);
}

Status try_gemm(const GemmArgs& g, void* workspace, size_t workspace_size, cudaStream_t stream,
                bool* handled) {
  *handled = false;
  if (g.format != Fp8Format::E4M3FN || g.K == 0) return kOk;  // the general path takes these
  constexpr int64_t kMaxDim = int64_t(1) << 30, kMaxTiles = int64_t(1)
                                                            << 30;  // int indexing (tiles >= 64x32)
  if (g.M >= kMaxDim || g.N >= kMaxDim || g.K >= kMaxDim ||
      ((g.M + 63) / 64) * ((g.N + 31) / 32) >= kMaxTiles)
    return kOk;
  int device = 0;
  const DeviceInfo* info = current_device(&device);
  if (info == nullptr || !info->is_sm90) return kOk;
  // Small M: the weight-streaming kernel (sm90_decode.cuh).
  if (decode_takes(g, info->num_sms, info->h200_class)) {
    *handled = true;
    return run_decode(g, choose_decode_config(g.M, g.N, g.K, info->num_sms), stream);
  }
  const TileConfig config = choose_config(g.M, g.N, g.K);
  const size_t needed = make_plan(g, config).workspace;
  if (needed > workspace_size || (needed > 0 && workspace == nullptr)) return kOk;
  constexpr int64_t kMaxCopyTiles = int64_t(1) << 30;  // the operand copy's grid size
  if (needed > 0 && ((g.M + kCopyRows - 1) / kCopyRows + (g.N + kCopyRows - 1) / kCopyRows) *
                            ((g.K + kCopyK - 1) / kCopyK) >=
                        kMaxCopyTiles)
    return kOk;
  *handled = true;
  if (g.M == 0 || g.N == 0) return kOk;
  return run(g, config, workspace, workspace_size, stream);
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
