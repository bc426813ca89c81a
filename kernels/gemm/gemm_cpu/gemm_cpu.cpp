// CPU path of the FP8 block-scaled GEMM: any strides, any M/N/K >= 0, plain std::thread.
//
// The output is cut into tiles of kTileM x kTileN (kTileN == the scale block, so one tile
// column shares one b_scale per k-block). For each k-block a worker decodes the A rows and
// B columns of its tile through a 256-entry table into contiguous fp32 panels, multiplies
// them into an fp32 block sum with a register-blocked micro-kernel that the compiler
// vectorizes, and adds the block sum to the tile as acc + sum * (a_scale * b_scale): the
// promotion of the GPU paths (which fuse the multiply-add), so every backend overflows alike.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <thread>
#include <vector>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/gemm_args.h"
#include "gemm_common/launchers.h"

namespace fp8gemm {
namespace {

constexpr int64_t kTileM = 64;
constexpr int64_t kTileN = kScaleBlock;
constexpr int64_t kTileK = kScaleBlock;
constexpr int64_t kMicroM = 4;   // rows of the micro-kernel's register block
constexpr int64_t kMicroN = 16;  // columns of the micro-kernel's register block
// Below this many multiply-adds a call runs on the calling thread only.
constexpr int64_t kMinWorkPerThread = int64_t(1) << 22;

static_assert(kTileM % kMicroM == 0 && kTileN % kMicroN == 0, "micro-kernel must tile the tile");

using DecodeTable = std::array<float, 256>;

const DecodeTable& decode_table(Fp8Format format) {
  static const auto build = [](Fp8Format f) {
    DecodeTable table{};
    for (uint32_t code = 0; code < table.size(); ++code) table[code] = decode_fp8(code, f);
    return table;
  };
  static const DecodeTable fn = build(Fp8Format::E4M3FN);
  static const DecodeTable fnuz = build(Fp8Format::E4M3FNUZ);
  return format == Fp8Format::E4M3FNUZ ? fnuz : fn;
}

// Per-worker scratch: the fp32 accumulator tile, one k-block's sum, the two packed panels
// and the block's A scales.
struct Scratch {
  std::vector<float> acc = std::vector<float>(kTileM * kTileN);
  std::vector<float> block_sum = std::vector<float>(kTileM * kTileN);
  std::vector<float> a_panel = std::vector<float>(kTileM * kTileK);  // [m][k]
  std::vector<float> b_panel = std::vector<float>(kTileK * kTileN);  // [k][n]
  std::vector<float> a_scales = std::vector<float>(kTileM);
};

// c[kMicroM][kMicroN] += a_panel rows x b_panel columns over k_len. Fixed trip counts
// let the compiler keep the block in vector registers.
inline void micro_kernel(const float* a_rows, const float* b_cols, int64_t k_len, float* c) {
  float block[kMicroM][kMicroN];
  for (int64_t r = 0; r < kMicroM; ++r)
    for (int64_t j = 0; j < kMicroN; ++j) block[r][j] = c[r * kTileN + j];
  for (int64_t k = 0; k < k_len; ++k) {
    const float* b = b_cols + k * kTileN;
    for (int64_t r = 0; r < kMicroM; ++r) {
      const float a = a_rows[r * kTileK + k];
      for (int64_t j = 0; j < kMicroN; ++j) block[r][j] += a * b[j];
    }
  }
  for (int64_t r = 0; r < kMicroM; ++r)
    for (int64_t j = 0; j < kMicroN; ++j) c[r * kTileN + j] = block[r][j];
}

class TileWorker {
 public:
  TileWorker(const GemmArgs& args, const DecodeTable& table) : args_(args), table_(table) {}

  void run_tile(int64_t tile_m, int64_t tile_n, Scratch& s) const {
    const int64_t m0 = tile_m * kTileM, n0 = tile_n * kTileN;
    const int64_t rows = std::min(kTileM, args_.M - m0), cols = std::min(kTileN, args_.N - n0);
    std::fill(s.acc.begin(), s.acc.end(), 0.0f);
    // Rows/columns past the edge stay zero in the panels, so the micro-kernel runs whole.
    std::fill(s.a_panel.begin(), s.a_panel.end(), 0.0f);
    std::fill(s.b_panel.begin(), s.b_panel.end(), 0.0f);
    for (int64_t kb = 0; kb < args_.k_blocks(); ++kb) {
      const int64_t k0 = kb * kTileK, k_len = std::min(kTileK, args_.K - k0);
      pack_a(m0, rows, kb, k0, k_len, s.a_panel.data(), s.a_scales.data());
      const float b_scale = pack_b(n0, cols, kb, k0, k_len, tile_n, s.b_panel.data());
      std::fill(s.block_sum.begin(), s.block_sum.end(), 0.0f);
      for (int64_t r = 0; r < rows; r += kMicroM)
        for (int64_t j = 0; j < cols; j += kMicroN)
          micro_kernel(&s.a_panel[r * kTileK], &s.b_panel[j], k_len, &s.block_sum[r * kTileN + j]);
      for (int64_t r = 0; r < rows; ++r) {
        const float scale = s.a_scales[r] * b_scale;
        for (int64_t j = 0; j < cols; ++j) s.acc[r * kTileN + j] += s.block_sum[r * kTileN + j] * scale;
      }
    }
    store(m0, rows, n0, cols, s.acc.data());
  }

 private:
  void pack_a(int64_t m0, int64_t rows, int64_t kb, int64_t k0, int64_t k_len, float* panel,
              float* scales) const {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t m = m0 + r;
      scales[r] = args_.a_scale[kb * args_.a_scale_stride_kb + m * args_.a_scale_stride_m];
      const uint8_t* src = args_.a + m * args_.a_stride_m + k0 * args_.a_stride_k;
      float* dst = panel + r * kTileK;
      for (int64_t k = 0; k < k_len; ++k) dst[k] = table_[src[k * args_.a_stride_k]];
    }
  }

  // Packs the B columns of the tile; returns their scale.
  float pack_b(int64_t n0, int64_t cols, int64_t kb, int64_t k0, int64_t k_len, int64_t nb,
               float* panel) const {
    for (int64_t k = 0; k < k_len; ++k) {
      const uint8_t* src = args_.b + (k0 + k) * args_.b_stride_k + n0 * args_.b_stride_n;
      float* dst = panel + k * kTileN;
      for (int64_t j = 0; j < cols; ++j) dst[j] = table_[src[j * args_.b_stride_n]];
    }
    return args_.b_scale[kb * args_.b_scale_stride_kb + nb * args_.b_scale_stride_nb];
  }

  void store(int64_t m0, int64_t rows, int64_t n0, int64_t cols, const float* acc) const {
    for (int64_t r = 0; r < rows; ++r) {
      uint16_t* dst = args_.out + (m0 + r) * args_.out_stride_m + n0 * args_.out_stride_n;
      for (int64_t j = 0; j < cols; ++j)
        dst[j * args_.out_stride_n] = float_to_bf16_bits(add_bias(args_, n0 + j, acc[r * kTileN + j]));
    }
  }

  const GemmArgs& args_;
  const DecodeTable& table_;
};

int64_t worker_count(const GemmArgs& args, int64_t tiles) {
  const int64_t hardware = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t work = args.M * args.N * std::max<int64_t>(args.K, 1);
  return std::max<int64_t>(1, std::min({hardware, tiles, work / kMinWorkPerThread}));
}

}  // namespace

Status gemm_cpu(const GemmArgs& args) {
  if (args.M < 0 || args.N < 0 || args.K < 0) return "gemm_cpu: negative size";
  if (args.M == 0 || args.N == 0) return kOk;
  const int64_t tiles_n = ceil_div(args.N, kTileN);
  const int64_t tiles = ceil_div(args.M, kTileM) * tiles_n;
  const TileWorker worker(args, decode_table(args.format));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  auto drain = [&]() {
    try {
      Scratch scratch;
      for (int64_t t = next++; t < tiles && !failed; t = next++)
        worker.run_tile(t / tiles_n, t % tiles_n, scratch);
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  };

  std::vector<std::thread> helpers;
  try {
    for (int64_t i = 1; i < worker_count(args, tiles); ++i) helpers.emplace_back(drain);
  } catch (const std::exception&) {
    // Could not start more threads: the threads already running and this one finish the work.
  }
  drain();
  for (auto& t : helpers) t.join();
  return failed ? "gemm_cpu: out of memory for the per-thread tiles" : kOk;
}

}  // namespace fp8gemm
