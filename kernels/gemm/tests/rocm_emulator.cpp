// Host emulation of the ROCm FP8 GEMM kernels (gemm_rocm/gemm_rocm_kernels.h), for
// test_rocm_model.py: the kernels' own source runs on the CPU, one std::thread per work-item,
// with the hardware operations of gemm_rocm/device_primitives.h emulated:
//   - workgroup_barrier: a std::barrier of the workgroup's threads; LDS (__shared__) arrays are
//     function statics, shared by the threads of the one workgroup that runs at a time;
//   - mfma_32x32x16_fp8: the 64 lanes of a wave exchange their fragments, then each lane computes
//     its 16 accumulators with the operand and result layouts the kernel assumes for
//     v_mfma_f32_32x32x16_fp8_fp8 (its comment in gemm_rocm_kernels.h); the 16-product dot is
//     exact (float64), rounded once into the fp32 accumulator, as in rocm_model.py.
// So the loaders, LDS layout, fragment indexing, scale application, split-K and epilogue are
// executed as written. What this cannot check: that the real instruction uses those layouts
// and rounds that way, and anything about timing or memory ordering on the GPU.
//
// Usage: rocm_emulator DIR [TILE_ID SPLIT_K]. DIR holds problem.txt (below) and the raw storage
// of the operands: a.bin, b.bin (FP8 codes), sa.bin, sb.bin (fp32). Writes DIR/out.bin (the bf16
// bits of out's storage, M * N elements, NaN-poisoned first) and prints the plan it ran. TILE_ID and SPLIT_K
// replace the configuration of the launcher's plan (the MFMA path only), so that small problems
// can exercise every tile and split count.
//
// problem.txt: "M N K FORMAT" then one line per operand, a, b, a_scale, b_scale:
// "OFFSET STRIDE0 STRIDE1" (elements of the .bin file; a: m, k; b: k, n; scales: kb, m|nb),
// then "STRIDE_M STRIDE_N" of out (row-major: N 1, column-major: 1 M).
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/gemm_args.h"

#define FP8GEMM_ROCM_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct uint2 {
  uint32_t x, y;
};
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint2 make_uint2(uint32_t x, uint32_t y) { return {x, y}; }
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }

namespace fp8gemm::rocm {

constexpr int kMfmaAccPerLane = 16;
typedef float MfmaAcc __attribute__((ext_vector_type(kMfmaAccPerLane)));

namespace emulation {

constexpr int kLanes = 64;
constexpr int kMfmaRows = 32;
constexpr int kFragBytes = 8;
constexpr int kMaxThreads = 256;

struct Wave {
  explicit Wave(int lanes) : exchange(lanes) {}
  long a[kLanes];
  long b[kLanes];
  std::barrier<> exchange;
};

struct Workgroup {
  explicit Workgroup(int threads) : barrier(threads) {
    for (int w = 0; w < (threads + kLanes - 1) / kLanes; ++w) waves.push_back(std::make_unique<Wave>(kLanes));
  }
  std::barrier<> barrier;
  std::vector<std::unique_ptr<Wave>> waves;
};

Workgroup* current = nullptr;
thread_local int thread = 0;
thread_local int64_t group_x = 0;
thread_local int group_y = 0;

float fnuz_byte(long fragment, int byte) {
  uint8_t bytes[kFragBytes];
  std::memcpy(bytes, &fragment, sizeof(bytes));
  return decode_fp8(bytes[byte], Fp8Format::E4M3FNUZ);
}

// Runs body() on `threads` threads as workgroup (x, y); returns when all have finished.
void run_workgroup(int threads, int64_t x, int y, const std::function<void()>& body) {
  Workgroup group(threads);
  current = &group;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&body, t, x, y] {
      thread = t;
      group_x = x;
      group_y = y;
      body();
    });
  }
  for (std::thread& t : pool) t.join();
  current = nullptr;
}

}  // namespace emulation

inline int thread_id() { return emulation::thread; }
inline int64_t workgroup_x() { return emulation::group_x; }
inline int workgroup_y() { return emulation::group_y; }
inline void workgroup_barrier() { emulation::current->barrier.arrive_and_wait(); }

inline MfmaAcc mfma_32x32x16_fp8(long a, long b, MfmaAcc acc) {
  using namespace emulation;
  const int lane = thread_id() % kLanes;
  Wave& wave = *current->waves[thread_id() / kLanes];
  wave.a[lane] = a;
  wave.b[lane] = b;
  wave.exchange.arrive_and_wait();
  MfmaAcc out;
  const int col = lane % kMfmaRows;
  for (int v = 0; v < kMfmaAccPerLane; ++v) {
    const int row = 8 * (v / 4) + 4 * (lane / kMfmaRows) + v % 4;
    double dot = 0.0;
    for (int k = 0; k < 2 * kFragBytes; ++k) {
      const int holder = k / kFragBytes * kMfmaRows;  // lanes 32..63 hold K bytes 8..15
      dot += double(fnuz_byte(wave.a[row + holder], k % kFragBytes)) *
             double(fnuz_byte(wave.b[col + holder], k % kFragBytes));
    }
    out[v] = float(double(acc[v]) + dot);
  }
  wave.exchange.arrive_and_wait();  // every lane has read the fragments before they change
  return out;
}

}  // namespace fp8gemm::rocm

#include "gemm_rocm/gemm_rocm_kernels.h"
#include "gemm_rocm/plan.h"

namespace {

using fp8gemm::GemmArgs;
using fp8gemm::rocm::Layout;
using fp8gemm::rocm::emulation::run_workgroup;

constexpr int kReduceWorkgroups = 3;  // few, so that the grid-stride loop wraps
constexpr uint16_t kBf16NaN = 0x7FC0;

template <int kBlockM, int kBlockN, Layout kLayoutA, Layout kLayoutB>
void run_mfma(const GemmArgs& args, int split_k, float* partials) {
  const int64_t tiles_n = fp8gemm::ceil_div(args.N, kBlockN);
  const int64_t tiles = fp8gemm::ceil_div(args.M, kBlockM) * tiles_n;
  for (int split = 0; split < split_k; ++split)
    for (int64_t tile = 0; tile < tiles; ++tile)
      run_workgroup(fp8gemm::rocm::kThreads, tile, split, [&] {
        fp8gemm::rocm::mfma_gemm_kernel<kBlockM, kBlockN, kLayoutA, kLayoutB>(args, partials, split_k,
                                                                              tiles_n);
      });
}

template <int kBlockM, int kBlockN>
void run_tile(const GemmArgs& args, Layout a, Layout b, int split_k, float* partials) {
  constexpr Layout K = Layout::kContiguousK;
  constexpr Layout R = Layout::kContiguousRows;
  if (a == K && b == K) return run_mfma<kBlockM, kBlockN, K, K>(args, split_k, partials);
  if (a == K && b == R) return run_mfma<kBlockM, kBlockN, K, R>(args, split_k, partials);
  if (a == R && b == K) return run_mfma<kBlockM, kBlockN, R, K>(args, split_k, partials);
  return run_mfma<kBlockM, kBlockN, R, R>(args, split_k, partials);
}

template <size_t... kIds>
void run_table_tile(int tile_id, const GemmArgs& args, Layout a, Layout b, int split_k, float* partials,
                    std::index_sequence<kIds...>) {
  using Runner = void (*)(const GemmArgs&, Layout, Layout, int, float*);
  static constexpr Runner kRunners[] = {
      &run_tile<fp8gemm::rocm::kTileShapes[kIds].block_m, fp8gemm::rocm::kTileShapes[kIds].block_n>...};
  kRunners[tile_id](args, a, b, split_k, partials);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: rocm_emulator DIR [TILE_ID SPLIT_K]\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ifstream problem(dir + "/problem.txt");
  GemmArgs args;
  int format = 0;
  int64_t offsets[4];
  problem >> args.M >> args.N >> args.K >> format;
  problem >> offsets[0] >> args.a_stride_m >> args.a_stride_k >> offsets[1] >> args.b_stride_k >>
      args.b_stride_n;
  problem >> offsets[2] >> args.a_scale_stride_kb >> args.a_scale_stride_m;
  problem >> offsets[3] >> args.b_scale_stride_kb >> args.b_scale_stride_nb;
  problem >> args.out_stride_m >> args.out_stride_n;
  if (!problem) {
    std::fprintf(stderr, "rocm_emulator: cannot read %s/problem.txt\n", dir.c_str());
    return 2;
  }
  args.format = fp8gemm::Fp8Format(format);
  // std::vector storage is 16-byte aligned (malloc), as device allocations are; the offsets
  // decide the operands' own alignment, which the plan checks.
  const std::vector<uint8_t> a = read_file(dir + "/a.bin"), b = read_file(dir + "/b.bin");
  const std::vector<uint8_t> sa = read_file(dir + "/sa.bin"), sb = read_file(dir + "/sb.bin");
  std::vector<float> a_scale(sa.size() / sizeof(float) + 1), b_scale(sb.size() / sizeof(float) + 1);
  std::memcpy(a_scale.data(), sa.data(), sa.size());
  std::memcpy(b_scale.data(), sb.data(), sb.size());
  args.a = a.data() + offsets[0];
  args.b = b.data() + offsets[1];
  args.a_scale = a_scale.data() + offsets[2];
  args.b_scale = b_scale.data() + offsets[3];
  std::vector<uint16_t> out(size_t(args.M * args.N), kBf16NaN);
  args.out = out.data();

  fp8gemm::rocm::Plan plan = fp8gemm::rocm::make_plan(args);
  if (plan.mfma && argc == 4) {
    plan.tile_id = std::stoi(argv[2]);
    plan.split_k = std::stoi(argv[3]);
  }
  if (args.M > 0 && args.N > 0) {
    if (!plan.mfma) {
      const int64_t tiles_n = fp8gemm::ceil_div(args.N, fp8gemm::rocm::kGeneralTile);
      const int64_t tiles = fp8gemm::ceil_div(args.M, fp8gemm::rocm::kGeneralTile) * tiles_n;
      for (int64_t tile = 0; tile < tiles; ++tile)
        run_workgroup(fp8gemm::rocm::kGeneralThreads, tile, 0,
                      [&] { fp8gemm::rocm::general_gemm_kernel(args, tiles_n); });
    } else {
      std::vector<float> partials(plan.split_k > 1 ? size_t(plan.split_k * args.M * args.N) : 0);
      run_table_tile(plan.tile_id, args, plan.layout_a, plan.layout_b, plan.split_k, partials.data(),
                     std::make_index_sequence<fp8gemm::rocm::kNumTileShapes>{});
      if (plan.split_k > 1)
        for (int64_t group = 0; group < kReduceWorkgroups; ++group)
          run_workgroup(fp8gemm::rocm::kReduceThreads, group, 0, [&] {
            fp8gemm::rocm::splitk_reduce_kernel(args, partials.data(), plan.split_k, kReduceWorkgroups);
          });
    }
  }
  std::ofstream(dir + "/out.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size() * sizeof(uint16_t)));
  if (plan.mfma) {
    std::printf("mfma %d %d %d %d\n", plan.tile_id, plan.split_k, int(plan.layout_a), int(plan.layout_b));
  } else {
    std::printf("general\n");
  }
  return 0;
}
