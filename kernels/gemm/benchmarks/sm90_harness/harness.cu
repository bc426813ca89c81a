// Standalone check-and-time harness for the Hopper path (no torch): correctness against an
// fp64 reference with the pass criterion of shared/reference/fp8-gemm-h100-peers.md, and
// timing with its protocol (256 MB L2 flush before each call, events, median of 30).
//
//   harness check            all 29 reference shapes, odd shapes, all layouts, all configs
//   harness sweep [LAYOUT]   every tile configuration on the 18 ranked shapes (CSV; LAYOUT as
//                            for `one`, default mn: compare.py's)
//   harness bench            chosen configuration, K-major and column-major layouts, twice
//   harness waves            the wave-quantization candidates on their shapes (check, then time)
//   harness one M N K BM BN SPLIT [LAYOUT]   one call after a warm-up (for profilers); LAYOUT:
//                            kmaj (default), mn (a_scale M-contiguous, compare.py's layout),
//                            col (the challenge's), colb (only B N-contiguous)
//   harness time M N K BM BN SPLIT LAYOUT   the median of 3 timings (each a median of 30)
//   harness ab M N K BM BN SPLIT [BM BN SPLIT ...]   same-machine A/B, 5 interleaved rounds
//   harness rank M N K [M N K ...]   the heuristic's choice against every candidate, per shape
//   harness copy             the operand copy alone (challenge layout -> K-major) on the 18
//                            shapes: run 16's kernel vs the register-transpose tiles, checked
//                            byte for byte against a host transpose, cold L2, median of 30
//
// Build (from the repository root; nvcc 13, no GPU needed to build):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels/gemm -o harness \
//     kernels/gemm/benchmarks/sm90_harness/harness.cu kernels/gemm/gemm_sm90/*.cu
// A variant of the kernel: copy gemm_sm90/ to DIR/gemm_sm90, edit it, and build with
// `-I DIR -I kernels/gemm ... DIR/gemm_sm90/*.cu`. variants.sh builds that for git
// branches here and checks and times the builds against each other in one device call.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gemm_sm90/sm90_config.h"
#include "gemm_sm90/sm90_gemm.h"
#if __has_include("gemm_sm90/sm90_copy.cuh")
#include "gemm_sm90/sm90_copy.cuh"
#else  // variants.sh builds of commits from before the copy kernel had a header of its own
#include "gemm_sm90/sm90_kernel.cuh"
#endif
#include "cold_timing.h"

using fp8gemm::GemmArgs;
using fp8gemm::sm90::TileConfig;

struct Shape {
  int64_t M, N, K;
  double deepgemm_us, attainable_us;
};

const Shape kRanked[] = {
    {1024, 1536, 7168, 24.0, 15.6}, {1024, 3072, 1536, 14.4, 6.7},   {1024, 576, 7168, 21.0, 5.8},
    {1024, 7168, 256, 14.1, 5.6},   {1024, 7168, 2048, 34.6, 20.7},  {1024, 4608, 7168, 67.6, 46.7},
    {1024, 7168, 2304, 37.4, 23.3}, {1024, 512, 7168, 15.6, 5.2},    {1024, 4096, 512, 11.3, 3.7},
    {6144, 1536, 7168, 98.5, 93.3}, {6144, 3072, 1536, 50.4, 40.0},  {6144, 576, 7168, 49.9, 35.0},
    {6144, 7168, 256, 50.8, 30.5},  {6144, 7168, 2048, 145.3, 124.4}, {6144, 4608, 7168, 293.2, 279.9},
    {6144, 7168, 2304, 160.5, 140.0}, {6144, 512, 7168, 56.8, 31.1}, {6144, 4096, 512, 33.0, 18.6},
};

const int64_t kExtra[][3] = {
    {64, 64, 128},   {64, 1536, 7168},  {64, 3072, 1536}, {64, 576, 7168},  {96, 7168, 256},   {96, 7168, 2048},
    {96, 4608, 7168}, {128, 7168, 2304}, {128, 512, 7168}, {512, 4096, 512}, {512, 1536, 7168},
    // odd shapes
    {1, 1, 1}, {1, 130, 129}, {129, 257, 300}, {3, 8, 16}, {200, 72, 4000}, {1000, 1100, 1500},
    // rows an odd multiple of 16 bytes apart (K, and M in the challenge layout) on shapes where
    // they are copied to a 128-byte pitch, with 16-byte loads (M >= 1.5 N: instead of kAMn)
    {1040, 1104, 1520}, {2064, 1104, 528},
    // odd K: rows at every byte alignment
    {777, 2222, 3333},
};

// ---- device helpers -------------------------------------------------------------------
__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return uint32_t(x);
}

__device__ float gauss(uint64_t seed, uint64_t i) {
  const float u1 = (hash32(seed * 0x9E3779B97F4A7C15ULL + 2 * i) + 1.0f) * 2.3283064e-10f;
  const float u2 = hash32(seed * 0x9E3779B97F4A7C15ULL + 2 * i + 1) * 2.3283064e-10f;
  return sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2);
}

__global__ void fill_fp8(uint8_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    __nv_fp8_e4m3 v(gauss(seed, i) * 2.f);
    p[i] = *reinterpret_cast<uint8_t*>(&v);
  }
}

__global__ void fill_scale(float* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = gauss(seed, i) * 0.01f;
}

__global__ void fill_u16(uint16_t* p, int64_t n, uint16_t v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = v;
}

__device__ double fp8_to_double(uint8_t b) {
  __nv_fp8_e4m3 v;
  *reinterpret_cast<uint8_t*>(&v) = b;
  return double(float(v));
}

// fp64 reference, any strides: 64x64 outputs per block, 4x4 per thread.
__global__ void reference_kernel(GemmArgs g, double* ref) {
  __shared__ double as[16][64], bs[16][64];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  double acc[4][4] = {};
  for (int64_t k0 = 0; k0 < g.K; k0 += 16) {
    for (int i = threadIdx.x; i < 16 * 64; i += 256) {
      const int kk = i / 64, x = i % 64;
      const int64_t k = k0 + kk, m = m0 + x, n = n0 + x;
      double av = 0, bv = 0;
      if (k < g.K && m < g.M)
        av = fp8_to_double(g.a[m * g.a_stride_m + k * g.a_stride_k]) *
             g.a_scale[(k / 128) * g.a_scale_stride_kb + m * g.a_scale_stride_m];
      if (k < g.K && n < g.N)
        bv = fp8_to_double(g.b[k * g.b_stride_k + n * g.b_stride_n]) *
             g.b_scale[(k / 128) * g.b_scale_stride_kb + (n / 128) * g.b_scale_stride_nb];
      as[kk][x] = av;
      bs[kk][x] = bv;
    }
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += as[kk][ty * 4 + i] * bs[kk][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
      if (m < g.M && n < g.N) ref[m * g.N + n] = acc[i][j];
    }
}

// ---- problem setup --------------------------------------------------------------------
// KMajor: gemm_nt with row-major scales; KMajorScaleMN: the same with a_scale (M, kb)
// M-contiguous (DeepGEMM's and torch's layout, what compare.py passes).
enum class Layout { KMajor, KMajorScaleMN, ColMajor, ColMajorB, OutColMajor };

struct Problem {
  GemmArgs args;
  uint8_t *a = nullptr, *b = nullptr;
  float *sa = nullptr, *sb = nullptr;
  uint16_t* out = nullptr;
  void release() {
    cudaFree(a);
    cudaFree(b);
    cudaFree(sa);
    cudaFree(sb);
    cudaFree(out);
  }
};

Problem make_problem(int64_t M, int64_t N, int64_t K, Layout layout, uint64_t seed) {
  Problem p;
  const int64_t kb = (K + 127) / 128, nb = (N + 127) / 128;
  CK(cudaMalloc(&p.a, std::max<int64_t>(M * K, 1)));
  CK(cudaMalloc(&p.b, std::max<int64_t>(N * K, 1)));
  CK(cudaMalloc(&p.sa, std::max<int64_t>(kb * M, 1) * 4));
  CK(cudaMalloc(&p.sb, std::max<int64_t>(kb * nb, 1) * 4));
  CK(cudaMalloc(&p.out, std::max<int64_t>(M * N, 1) * 2));
  fill_fp8<<<1024, 256>>>(p.a, M * K, seed * 4 + 0);
  fill_fp8<<<1024, 256>>>(p.b, N * K, seed * 4 + 1);
  fill_scale<<<256, 256>>>(p.sa, kb * M, seed * 4 + 2);
  fill_scale<<<256, 256>>>(p.sb, kb * nb, seed * 4 + 3);
  CK(cudaGetLastError());
  GemmArgs& g = p.args;
  g.M = M;
  g.N = N;
  g.K = K;
  g.a = p.a;
  g.b = p.b;
  g.a_scale = p.sa;
  g.b_scale = p.sb;
  g.out = p.out;
  // K-major: gemm_nt / DeepGEMM, a (M,K), b (N,K), sa (M,kb), sb (nb,kb), all row-major.
  // ColMajor: the AMD challenge, A and B M-/N-contiguous, scales too. ColMajorB: only B
  // N-contiguous (one operand to transpose), A scales M-contiguous.
  const bool a_mn = layout == Layout::ColMajor;
  const bool b_mn = layout == Layout::ColMajor || layout == Layout::ColMajorB;
  const bool sa_mn = a_mn || layout == Layout::ColMajorB || layout == Layout::KMajorScaleMN;
  g.a_stride_m = a_mn ? 1 : K;
  g.a_stride_k = a_mn ? M : 1;
  g.b_stride_n = b_mn ? 1 : K;
  g.b_stride_k = b_mn ? N : 1;
  g.a_scale_stride_m = sa_mn ? 1 : kb;
  g.a_scale_stride_kb = sa_mn ? M : 1;
  g.b_scale_stride_nb = a_mn ? 1 : kb;
  g.b_scale_stride_kb = a_mn ? nb : 1;
  if (layout == Layout::OutColMajor) {
    g.out_stride_m = 1;
    g.out_stride_n = M;
  } else {
    g.out_stride_m = N;
    g.out_stride_n = 1;
  }
  return p;
}

void* g_workspace = nullptr;
size_t g_workspace_size = size_t(512) << 20;
void* g_flush = nullptr;

bool call(const GemmArgs& g, const TileConfig* cfg) {
  fp8gemm::Status s;
  if (cfg) {
    s = fp8gemm::sm90::run(g, *cfg, g_workspace, g_workspace_size, 0);
  } else {
    bool handled = false;
    s = fp8gemm::sm90::try_gemm(g, g_workspace, g_workspace_size, 0, &handled);
    if (s == nullptr && !handled) s = "not handled";
  }
  if (s != nullptr) {
    std::printf("  call failed: %s\n", s);
    return false;
  }
  return cudaGetLastError() == cudaSuccess;
}

std::string cfg_name(const TileConfig& c) {
  return std::to_string(c.block_m) + "x" + std::to_string(c.block_n) + "s" + std::to_string(c.split);
}

// ---- correctness ----------------------------------------------------------------------
bool check(int64_t M, int64_t N, int64_t K, Layout layout, const TileConfig* cfg, uint64_t seed) {
  Problem p = make_problem(M, N, K, layout, seed);
  const GemmArgs& g = p.args;
  double* ref = nullptr;
  CK(cudaMalloc(&ref, std::max<int64_t>(M * N, 1) * 8));
  reference_kernel<<<dim3(unsigned((N + 63) / 64), unsigned((M + 63) / 64)), 256>>>(g, ref);
  fill_u16<<<1024, 256>>>(p.out, M * N, 0x7FC0);  // bf16 NaN
  CK(cudaGetLastError());
  bool ok = call(g, cfg);
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(M * N);
  std::vector<double> r(M * N);
  CK(cudaMemcpy(out.data(), p.out, M * N * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), ref, M * N * 8, cudaMemcpyDeviceToHost));
  double sum = 0, sum2 = 0;
  for (double v : r) {
    sum += v;
    sum2 += v * v;
  }
  const double n = double(std::max<int64_t>(M * N, 1));
  const double stdv = std::sqrt(std::max(0.0, sum2 / n - (sum / n) * (sum / n)));
  double err2 = 0;
  int64_t bad = 0, nonfinite = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    const int64_t m = i / N, nn = i % N;
    uint32_t bits = uint32_t(out[m * g.out_stride_m + nn * g.out_stride_n]) << 16;
    float c;
    std::memcpy(&c, &bits, 4);
    if (!std::isfinite(c)) {
      ++nonfinite;
      continue;
    }
    const double d = c - r[i];
    err2 += d * d;
    if (std::fabs(d) > 1e-2 * stdv + 2e-2 * std::fabs(r[i])) ++bad;
  }
  const double rel = sum2 > 0 ? std::sqrt(err2 / sum2) : std::sqrt(err2);
  // As tests/reference.py: in an output of a few elements, rounding one exact value to bf16
  // alone costs up to 2^-8 of it, so outputs under 1024 elements get that added to the bound.
  const double rel_limit = 2.5e-3 + (M * N < 1024 ? 1.0 / 256 : 0.0);
  ok = ok && nonfinite == 0 && bad == 0 && rel <= rel_limit;
  const char* lname = layout == Layout::KMajor          ? "kmaj"
                      : layout == Layout::KMajorScaleMN ? "kmaj-samn"
                      : layout == Layout::ColMajor      ? "colmaj"
                      : layout == Layout::ColMajorB     ? "colmaj-b"
                                                        : "outcol";
  std::printf("%s %6lld %6lld %6lld %-6s cfg=%s rel=%.2e bad=%lld nan=%lld\n", ok ? "PASS" : "FAIL", (long long)M,
              (long long)N, (long long)K, lname,
              cfg ? cfg_name(*cfg).c_str() : "auto",
              rel, (long long)bad, (long long)nonfinite);
  cudaFree(ref);
  p.release();
  return ok;
}

// ---- timing ---------------------------------------------------------------------------
double time_us(const GemmArgs& g, const TileConfig* cfg, int reps = 30) {
  for (int i = 0; i < 5; ++i)
    if (!call(g, cfg)) return -1;
  return median_cold_us(g_flush, reps, [&] { call(g, cfg); });
}

int run_check() {
  int fails = 0;
  uint64_t seed = 1000;
  for (const Shape& s : kRanked) fails += !check(s.M, s.N, s.K, Layout::KMajor, nullptr, ++seed);
  for (const auto& e : kExtra) fails += !check(e[0], e[1], e[2], Layout::KMajor, nullptr, ++seed);
  for (const auto& e : kExtra) fails += !check(e[0], e[1], e[2], Layout::ColMajor, nullptr, ++seed);
  for (int i : {2, 3, 7}) fails += !check(kRanked[i].M, kRanked[i].N, kRanked[i].K, Layout::ColMajor, nullptr, ++seed);
  for (int i : {0, 2, 12})
    fails += !check(kRanked[i].M, kRanked[i].N, kRanked[i].K, Layout::KMajorScaleMN, nullptr, ++seed);
  for (const auto& e : kExtra) fails += !check(e[0], e[1], e[2], Layout::KMajorScaleMN, nullptr, ++seed);
  fails += !check(1000, 1100, 1500, Layout::OutColMajor, nullptr, ++seed);
  for (const TileConfig& c : fp8gemm::sm90::kCandidates) {
    fails += !check(1000, 1100, 1500, Layout::KMajor, &c, ++seed);
    fails += !check(96, 7168, 256, Layout::KMajor, &c, ++seed);
    fails += !check(130, 300, 128, Layout::KMajor, &c, ++seed);  // one K block: a split's first CTA has none
    fails += !check(129, 257, 300, Layout::OutColMajor, &c, ++seed);
    fails += !check(333, 200, 700, Layout::KMajor, &c, ++seed);
    fails += !check(336, 200, 720, Layout::KMajor, &c, ++seed);  // 720-byte rows, read as they are
    fails += !check(336, 200, 700, Layout::KMajorScaleMN, &c, ++seed);
    // M-contiguous A read by TMA and transposed by the consumers (M >= 1.5 N, K rows 16-byte
    // aligned; partial row groups and K blocks; M = 208: whole 64-row boxes beyond M), or
    // copied (1008 x 1104; M = 333: K rows not 16-byte aligned); one operand to copy; and the
    // copy kernel's unaligned path (N = 200: B rows not 16-byte aligned)
    fails += !check(336, 208, 700, Layout::ColMajor, &c, ++seed);
    fails += !check(208, 128, 700, Layout::ColMajor, &c, ++seed);
    fails += !check(333, 208, 700, Layout::ColMajor, &c, ++seed);
    fails += !check(1008, 1104, 1500, Layout::ColMajor, &c, ++seed);
    fails += !check(272, 400, 300, Layout::ColMajorB, &c, ++seed);
    fails += !check(336, 200, 700, Layout::ColMajor, &c, ++seed);
  }
  for (int i : {0, 5, 9, 14}) fails += !check(kRanked[i].M, kRanked[i].N, kRanked[i].K, Layout::ColMajor, nullptr, ++seed);
  // a moving error is a race: same inputs twice
  fails += !check(6144, 4608, 7168, Layout::KMajor, nullptr, 7);
  fails += !check(6144, 4608, 7168, Layout::KMajor, nullptr, 7);
  std::printf("check: %d failure(s)\n", fails);
  return fails;
}

Layout layout_arg(int argc, char** argv, int i) {
  const std::string name = argc > i ? argv[i] : "kmaj";
  if (name == "mn") return Layout::KMajorScaleMN;
  if (name == "col") return Layout::ColMajor;
  return name == "colb" ? Layout::ColMajorB : Layout::KMajor;
}

int run_sweep(Layout layout) {
  std::printf("sweep,M,N,K,config,us\n");
  int idx = 0;
  for (const Shape& s : kRanked) {
    Problem p = make_problem(s.M, s.N, s.K, layout, 77 + idx);
    for (const TileConfig& c : fp8gemm::sm90::kCandidates)
      std::printf("sweep,%lld,%lld,%lld,%s,%.2f\n", (long long)s.M, (long long)s.N, (long long)s.K,
                  cfg_name(c).c_str(), time_us(p.args, &c));
    p.release();
    ++idx;
  }
  return 0;
}

// Wave-quantization candidates (NOTES-sm90.md run 16): the new tile widths next to the
// tuned configuration, on the ranked shapes they were computed for, with compare.py's
// layout (a_scale M-contiguous) and row-major scales.
struct WaveCase {
  int shape;
  TileConfig configs[7];  // entries left out are 128x128s1 (TileConfig's default)
};
const WaveCase kWaveCases[] = {
    {0, {{64, 256, 1}, {128, 192, 2}, {128, 96, 1}, {64, 192, 1}, {128, 192, 1}, {128, 144, 2}, {0, 0, 0}}},
    {1, {{128, 256, 1}, {128, 192, 1}, {128, 96, 1}, {128, 144, 1}, {0, 0, 0}}},
    {2, {{128, 128, 2}, {128, 144, 3}, {128, 192, 4}, {128, 192, 3}, {128, 144, 2}, {64, 192, 2}, {128, 96, 1}}},
    {5, {{192, 128, 1}, {128, 144, 1}, {128, 192, 1}, {128, 96, 1}, {128, 192, 2}, {0, 0, 0}}},
    {9, {{192, 128, 1}, {128, 192, 1}, {192, 144, 1}, {0, 0, 0}}},
    {11, {{128, 128, 1}, {192, 144, 1}, {128, 192, 1}, {128, 144, 1}, {192, 128, 1}, {0, 0, 0}}},
    {16, {{192, 128, 1}, {192, 144, 1}, {128, 192, 1}, {0, 0, 0}}},
};

int run_waves() {
  int fails = 0;
  uint64_t seed = 9000;
  for (const WaveCase& w : kWaveCases)  // correctness of each candidate on its shape first
    for (const TileConfig& c : w.configs)
      if (c.block_m != 0)
        fails += !check(kRanked[w.shape].M, kRanked[w.shape].N, kRanked[w.shape].K, Layout::KMajorScaleMN, &c, ++seed);
  std::printf("waves check: %d failure(s)\nwaves,#,M,N,K,config,samn_us,kmaj_us\n", fails);
  for (const WaveCase& w : kWaveCases) {
    const Shape& s = kRanked[w.shape];
    Problem pm = make_problem(s.M, s.N, s.K, Layout::KMajorScaleMN, 800 + w.shape);
    Problem pk = make_problem(s.M, s.N, s.K, Layout::KMajor, 900 + w.shape);
    for (const TileConfig& c : w.configs)
      if (c.block_m != 0)
        std::printf("waves,%d,%lld,%lld,%lld,%s,%.2f,%.2f\n", w.shape, (long long)s.M, (long long)s.N, (long long)s.K,
                    cfg_name(c).c_str(), time_us(pm.args, &c), time_us(pk.args, &c));
    pm.release();
    pk.release();
  }
  return fails;
}

int run_bench() {
  for (int round = 1; round <= 2; ++round) {
    std::printf("\nbench round %d (cold L2, median of 30, us)\n", round);
    std::printf("%2s %5s %5s %5s %-9s %8s %7s %6s %8s %7s %8s %8s %9s\n", "#", "M", "N", "K", "config", "kmaj_us",
                "TFLOPS", "%att", "colmaj", "col/mn", "deepgemm", "vs_dg", "sa_mn_us");
    double lg = 0, lg_col = 0, lg_dg = 0, lg_mn = 0;
    int idx = 0;
    for (const Shape& s : kRanked) {
      Problem pk = make_problem(s.M, s.N, s.K, Layout::KMajor, 500 + idx);
      const double tk = time_us(pk.args, nullptr);
      pk.release();
      Problem pc = make_problem(s.M, s.N, s.K, Layout::ColMajor, 600 + idx);
      const double tc = time_us(pc.args, nullptr);
      pc.release();
      Problem pm = make_problem(s.M, s.N, s.K, Layout::KMajorScaleMN, 700 + idx);
      const double tm = time_us(pm.args, nullptr);
      pm.release();
      const TileConfig c = fp8gemm::sm90::choose_config(s.M, s.N, s.K);
      const double tflops = 2.0 * s.M * s.N * s.K / (tk * 1e-6) / 1e12;
      std::printf("%2d %5lld %5lld %5lld %-9s %8.2f %7.0f %5.0f%% %8.2f %6.2fx %8.1f %7.2fx %9.2f\n", idx,
                  (long long)s.M, (long long)s.N, (long long)s.K, cfg_name(c).c_str(), tk, tflops,
                  100.0 * s.attainable_us / tk, tc, tc / tm, s.deepgemm_us, tk / s.deepgemm_us, tm);
      lg_mn += std::log(tm);
      lg += std::log(tk);
      lg_col += std::log(tc);
      lg_dg += std::log(s.deepgemm_us);
      ++idx;
    }
    std::printf("geomean: kmaj %.2f us, colmaj %.2f us, kmaj with M-contiguous a_scale %.2f us, deepgemm %.2f us\n",
                std::exp(lg / 18), std::exp(lg_col / 18), std::exp(lg_mn / 18), std::exp(lg_dg / 18));
  }
  return 0;
}

// ---- the operand copy alone -----------------------------------------------------------
using fp8gemm::sm90::CopyJob;
using fp8gemm::sm90::CopyJobs;

// Run 16's copy kernel (byte stores into a padded, swizzled tile), the baseline.
__global__ void __launch_bounds__(256) copy_run16(const __grid_constant__ CopyJobs jobs, int K) {
  constexpr int kRows = 128, kK = 128, kThreads = 256, kRowBytes = kK + 16;
  __shared__ __align__(16) uint8_t tile[kRows * kRowBytes];
  auto at = [&](int r, int k) -> uint8_t& { return tile[r * kRowBytes + (k ^ (4 * (r / 16)))]; };
  const int second = int(blockIdx.x) >= jobs.job[0].tiles;
  const CopyJob& j = jobs.job[second];
  const int t = int(blockIdx.x) - (second ? jobs.job[0].tiles : 0);
  const int r0 = (t % j.tiles_rows) * kRows, k0 = (t / j.tiles_rows) * kK;
#pragma unroll
  for (int i = 0; i < kRows * kK / 16 / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int k = idx / (kRows / 16), c = (idx % (kRows / 16)) * 16;
    uint8_t v[16];
    if (k0 + k < K && r0 + c + 16 <= j.rows) {
      *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(j.src + int64_t(k0 + k) * j.s_k + r0 + c);
    } else {
#pragma unroll
      for (int e = 0; e < 16; ++e)
        v[e] = (k0 + k < K && r0 + c + e < j.rows) ? j.src[int64_t(k0 + k) * j.s_k + r0 + c + e] : 0;
    }
#pragma unroll
    for (int e = 0; e < 16; ++e) at(c + e, k) = v[e];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kRows * kK / 16 / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int r = idx / (kK / 16), c = (idx % (kK / 16)) * 16;
    if (r0 + r >= j.rows || k0 + c >= j.pitch) continue;
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = *reinterpret_cast<const uint32_t*>(&at(r, c + 4 * q));
    *reinterpret_cast<uint4*>(j.dst + int64_t(r0 + r) * j.pitch + k0 + c) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// variant 0: run 16's kernel; 1..3: to_k_major_kernel<128,128>, <256,128>, <128,256>
const char* const kCopyNames[] = {"run16_128x128", "reg_128x128", "reg_256x128", "reg_128x256"};

void launch_copy(int variant, const uint8_t* a, const uint8_t* b, int64_t M, int64_t N, int64_t K, uint8_t* da,
                 uint8_t* db) {
  const int R = variant == 2 ? 256 : 128, KT = variant == 3 ? 256 : 128;
  const int64_t pitch = (K + 15) / 16 * 16;
  auto job = [&](const uint8_t* src, int64_t rows, uint8_t* dst) {
    CopyJob j{};
    j.src = src;
    j.s_row = 1;
    j.s_k = rows;
    j.rows = int(rows);
    j.dst = dst;
    j.pitch = pitch;
    j.tiles_rows = int((rows + R - 1) / R);
    j.tiles = j.tiles_rows * int((K + KT - 1) / KT);
    j.vec = rows % 16 == 0;
    return j;
  };
  const CopyJobs jobs{{job(a, M, da), job(b, N, db)}};
  const unsigned tiles = unsigned(jobs.job[0].tiles + jobs.job[1].tiles);
  if (variant == 0) copy_run16<<<tiles, 256>>>(jobs, int(K));
  if (variant == 1) fp8gemm::sm90::to_k_major_kernel<128, 128><<<tiles, 256>>>(jobs, int(K));
  if (variant == 2) fp8gemm::sm90::to_k_major_kernel<256, 128><<<tiles, 256>>>(jobs, int(K));
  if (variant == 3) fp8gemm::sm90::to_k_major_kernel<128, 256><<<tiles, 256>>>(jobs, int(K));
  CK(cudaGetLastError());
}

int run_copy() {
  int fails = 0;
  const int64_t kOdd[][3] = {{1000, 1100, 1500}, {16, 48, 130}, {1024, 576, 300}, {200, 72, 4000}};
  std::vector<Shape> shapes(std::begin(kRanked), std::end(kRanked));
  for (const auto& o : kOdd) shapes.push_back({o[0], o[1], o[2], 0, 0});
  std::printf("copy,#,M,N,K,MB_moved,variant,us,TB_s,check\n");
  double lg[4] = {};
  int idx = 0;
  for (const Shape& s : shapes) {
    const int64_t pitch = (s.K + 15) / 16 * 16;
    uint8_t *a, *b, *da, *db;
    CK(cudaMalloc(&a, s.M * s.K));
    CK(cudaMalloc(&b, s.N * s.K));
    CK(cudaMalloc(&da, s.M * pitch));
    CK(cudaMalloc(&db, s.N * pitch));
    fill_fp8<<<1024, 256>>>(a, s.M * s.K, 77 + idx);
    fill_fp8<<<1024, 256>>>(b, s.N * s.K, 99 + idx);
    std::vector<uint8_t> ha(s.M * s.K), hb(s.N * s.K), ga(s.M * pitch), gb(s.N * pitch);
    CK(cudaMemcpy(ha.data(), a, ha.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, hb.size(), cudaMemcpyDeviceToHost));
    const double mb = 2.0 * double(s.M + s.N) * double(s.K) / 1e6;
    for (int v = 0; v < 4; ++v) {
      if (v == 0 && (s.M % 16 != 0 || s.N % 16 != 0)) continue;  // the baseline here has no byte path
      CK(cudaMemset(da, 0xAB, s.M * pitch));
      CK(cudaMemset(db, 0xAB, s.N * pitch));
      launch_copy(v, a, b, s.M, s.N, s.K, da, db);
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(ga.data(), da, ga.size(), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(gb.data(), db, gb.size(), cudaMemcpyDeviceToHost));
      bool ok = true;
      for (int64_t r = 0; r < s.M && ok; ++r)
        for (int64_t k = 0; k < pitch; ++k)
          if (ga[r * pitch + k] != (k < s.K ? ha[k * s.M + r] : 0)) { ok = false; break; }
      for (int64_t r = 0; r < s.N && ok; ++r)
        for (int64_t k = 0; k < pitch; ++k)
          if (gb[r * pitch + k] != (k < s.K ? hb[k * s.N + r] : 0)) { ok = false; break; }
      fails += !ok;
      for (int i = 0; i < 3; ++i) launch_copy(v, a, b, s.M, s.N, s.K, da, db);
      const double us = median_cold_us(g_flush, 30, [&] { launch_copy(v, a, b, s.M, s.N, s.K, da, db); });
      if (idx < 18) lg[v] += std::log(us);
      std::printf("copy,%d,%lld,%lld,%lld,%.1f,%s,%.2f,%.2f,%s\n", idx, (long long)s.M, (long long)s.N,
                  (long long)s.K, mb, kCopyNames[v], us, mb / us, ok ? "PASS" : "FAIL");
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(da));
    CK(cudaFree(db));
    ++idx;
  }
  for (int v = 0; v < 4; ++v) std::printf("copy geomean (18 shapes) %s: %.2f us\n", kCopyNames[v], std::exp(lg[v] / 18));
  std::printf("copy check: %d failure(s)\n", fails);
  return fails;
}

int run_one(int argc, char** argv, bool repeat) {
  if (argc < 8) return 2;
  const int64_t M = std::atoll(argv[2]), N = std::atoll(argv[3]), K = std::atoll(argv[4]);
  const TileConfig c{std::atoi(argv[5]), std::atoi(argv[6]), std::atoi(argv[7])};
  Problem p = make_problem(M, N, K, layout_arg(argc, argv, 8), 3);
  if (repeat) {
    double t[3];
    for (double& x : t) x = time_us(p.args, &c);
    std::sort(t, t + 3);
    std::printf("time,%lld,%lld,%lld,%s,%s,%.2f (%.2f..%.2f)\n", (long long)M, (long long)N, (long long)K,
                cfg_name(c).c_str(), argc > 8 ? argv[8] : "kmaj", t[1], t[0], t[2]);
  } else {
    std::printf("%s: %.2f us\n", cfg_name(c).c_str(), time_us(p.args, &c, 3));
  }
  p.release();
  return 0;
}

// Same-machine A/B: harness ab M N K BM BN SPLIT [BM BN SPLIT ...]: each configuration checked
// (compare.py's layout, a_scale M-contiguous), then timed in 5 interleaved rounds of a median
// of 30 (cold L2) in both scale layouts; prints each round and the median of the rounds.
int run_ab(int argc, char** argv) {
  if (argc < 8 || (argc - 5) % 3 != 0) return 2;
  const int64_t M = std::atoll(argv[2]), N = std::atoll(argv[3]), K = std::atoll(argv[4]);
  std::vector<TileConfig> cs;
  for (int i = 5; i + 2 < argc; i += 3) cs.push_back(TileConfig{std::atoi(argv[i]), std::atoi(argv[i + 1]), std::atoi(argv[i + 2])});
  int fails = 0;
  uint64_t seed = 7000;
  for (const TileConfig& c : cs) fails += !check(M, N, K, Layout::KMajorScaleMN, &c, ++seed);
  Problem pm = make_problem(M, N, K, Layout::KMajorScaleMN, 71);
  Problem pk = make_problem(M, N, K, Layout::KMajor, 72);
  std::vector<std::vector<double>> tm(cs.size()), tk(cs.size());
  for (int r = 0; r < 5; ++r)
    for (size_t i = 0; i < cs.size(); ++i) {
      tm[i].push_back(time_us(pm.args, &cs[i]));
      tk[i].push_back(time_us(pk.args, &cs[i]));
      std::printf("ab,%lld,%lld,%lld,round%d,%s,%.2f,%.2f\n", (long long)M, (long long)N, (long long)K, r,
                  cfg_name(cs[i]).c_str(), tm[i].back(), tk[i].back());
    }
  for (size_t i = 0; i < cs.size(); ++i) {
    std::sort(tm[i].begin(), tm[i].end());
    std::sort(tk[i].begin(), tk[i].end());
    std::printf("ab-median,%lld,%lld,%lld,%s,samn %.2f (%.2f..%.2f),kmaj %.2f (%.2f..%.2f)\n", (long long)M,
                (long long)N, (long long)K, cfg_name(cs[i]).c_str(), tm[i][2], tm[i][0], tm[i][4], tk[i][2], tk[i][0],
                tk[i][4]);
  }
  std::printf("ab check: %d failure(s)\n", fails);
  pm.release();
  pk.release();
  return fails;
}

// The heuristic's choice against every candidate on shapes outside the tuned table: each
// candidate timed once (median of 30, cold L2, compare.py's scale layout), then the chosen
// one's time over the best one's.
int run_rank(int argc, char** argv) {
  if (argc < 5 || (argc - 2) % 3 != 0) return 2;
  std::printf("rank,M,N,K,config,us\n");
  for (int i = 2; i + 2 < argc; i += 3) {
    const int64_t M = std::atoll(argv[i]), N = std::atoll(argv[i + 1]), K = std::atoll(argv[i + 2]);
    Problem p = make_problem(M, N, K, Layout::KMajorScaleMN, 500 + i);
    const TileConfig chosen = fp8gemm::sm90::choose_config(M, N, K);  // one of the candidates
    double chosen_us = -1, best_us = -1;
    TileConfig best = chosen;
    for (const TileConfig& c : fp8gemm::sm90::kCandidates) {
      const double us = time_us(p.args, &c);
      std::printf("rank,%lld,%lld,%lld,%s,%.2f\n", (long long)M, (long long)N, (long long)K, cfg_name(c).c_str(), us);
      if (cfg_name(c) == cfg_name(chosen)) chosen_us = us;
      if (us > 0 && (best_us < 0 || us < best_us)) {
        best_us = us;
        best = c;
      }
    }
    std::printf("rank-chosen,%lld,%lld,%lld,chosen %s %.2f us,best %s %.2f us,ratio %.3f\n", (long long)M,
                (long long)N, (long long)K, cfg_name(chosen).c_str(), chosen_us, cfg_name(best).c_str(), best_us,
                chosen_us / best_us);
    p.release();
  }
  return 0;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  CK(cudaMalloc(&g_workspace, g_workspace_size));
  CK(cudaMalloc(&g_flush, kFlushBytes));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (mode == "check") return run_check() ? 1 : 0;
  if (mode == "sweep") return run_sweep(argc > 2 ? layout_arg(argc, argv, 2) : Layout::KMajorScaleMN);
  if (mode == "bench") return run_bench();
  if (mode == "waves") return run_waves();
  if (mode == "one") return run_one(argc, argv, false);
  if (mode == "time") return run_one(argc, argv, true);
  if (mode == "copy") return run_copy();
  if (mode == "ab") return run_ab(argc, argv);
  if (mode == "rank") return run_rank(argc, argv);
  std::printf(
      "usage: harness check|sweep [LAYOUT]|bench|waves|copy|one M N K BM BN SPLIT [LAYOUT]|time M N K BM BN SPLIT LAYOUT"
      "|ab M N K BM BN SPLIT [...]|rank M N K [...]\n");
  return 2;
}
