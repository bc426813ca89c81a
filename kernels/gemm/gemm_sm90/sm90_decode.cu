// Host side of the small-M (decode) kernel: which problems it takes, its configuration and
// its launch. See sm90_decode.cuh for the kernel.
#include "gemm_sm90/sm90_decode.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gemm_sm90/sm90_decode.cuh"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

using decode::DecodeParams;

constexpr const char* kNoDecodeEnv = "GEMM_FORCE_NO_DECODE";

// The largest M the decode kernel takes: above it the wgmma tiles win (benchmarks/DECODE.md).
constexpr int64_t kMaxDecodeM = 64;

bool decode_switched_off() {
  static const bool off = [] {
    const char* value = std::getenv(kNoDecodeEnv);
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return off;
}

// K-contiguous rows in 16-byte aligned memory, 16-byte multiples apart.
bool rows_16(const uint8_t* ptr, int64_t s_row, int64_t s_k, int64_t rows, int64_t K) {
  if (s_k != 1 && K > 1) return false;
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  return rows == 1 || (s_row >= K && s_row % 16 == 0);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int kMaxDevices = 64;

template <int WR, int TN, int D>
Status launch(const DecodeParams& p, const DecodeConfig& c, cudaStream_t stream) {
  constexpr int kSmem = D * decode::detail::Stage<WR, TN>::kBytes;
  auto kernel = decode::fp8_decode_kernel<WR, TN, D>;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return "gemm_sm90: no current CUDA device";
  }
  static bool smem_ok[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  std::call_once(once[device], [&] {
    smem_ok[device] = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) == cudaSuccess;
    cudaGetLastError();
  });
  if (!smem_ok[device]) return "gemm_sm90: cannot raise the decode kernel's shared-memory limit";
  const int tiles_per_cta = decode::kWarps / p.k_warps;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = unsigned(c.cluster);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ceil_div(p.M, 8 * TN)), unsigned(ceil_div(p.N, 16 * WR * tiles_per_cta)),
                     unsigned(c.cluster));
  cfg.blockDim = dim3(decode::kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, kernel, p) != cudaSuccess) {
    cudaGetLastError();
    return "gemm_sm90: decode kernel launch failed";
  }
  return kOk;
}

}  // namespace

bool decode_takes(const GemmArgs& g) {
  constexpr int64_t kMaxN = int64_t(1) << 20, kMaxK = int64_t(1) << 30;  // grid y, int indexing
  return g.format == Fp8Format::E4M3FN && g.M >= 1 && g.M <= kMaxDecodeM && g.N >= 1 && g.N < kMaxN &&
         g.K >= 1 && g.K < kMaxK && !decode_switched_off() &&
         rows_16(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K) && rows_16(g.b, g.b_stride_n, g.b_stride_k, g.N, g.K);
}

DecodeConfig choose_decode_config(int64_t M, int64_t N, int64_t K, int num_sms) {
  DecodeConfig c;
  c.tn = M <= 8 ? 1 : M <= 16 ? 2 : 4;
  c.wr = 1;
  c.depth = c.tn == 1 ? 4 : 2;
  const int64_t kb = ceil_div(K, decode::kBlockK);
  c.k_warps = kb >= 8 ? 8 : kb >= 4 ? 4 : kb >= 2 ? 2 : 1;
  const int64_t ctas = ceil_div(M, 8 * c.tn) * ceil_div(N, 16 * c.wr * (decode::kWarps / c.k_warps));
  c.cluster = 1;
  while (c.cluster < 8 && ctas * c.cluster < 2 * num_sms && 2 * c.k_warps * c.cluster * 2 <= kb) c.cluster *= 2;
  return c;
}

Status run_decode(const GemmArgs& g, const DecodeConfig& c, cudaStream_t stream) {
  DecodeParams p;
  p.a = g.a;
  p.a_row = g.M == 1 ? 0 : g.a_stride_m;
  p.b = g.b;
  p.b_row = g.N == 1 ? 0 : g.b_stride_n;
  p.a_scale = g.a_scale;
  p.sa_kb = g.a_scale_stride_kb;
  p.sa_m = g.a_scale_stride_m;
  p.b_scale = g.b_scale;
  p.sb_kb = g.b_scale_stride_kb;
  p.sb_nb = g.b_scale_stride_nb;
  p.out = g.out;
  p.out_sm = g.out_stride_m;
  p.out_sn = g.out_stride_n;
  p.M = int(g.M);
  p.N = int(g.N);
  p.K = int(g.K);
  p.num_kb = int(g.k_blocks());
  p.k_warps = c.k_warps;
  switch (c.wr * 100 + c.tn * 10 + c.depth) {
    case 112: return launch<1, 1, 2>(p, c, stream);
    case 114: return launch<1, 1, 4>(p, c, stream);
    case 212: return launch<2, 1, 2>(p, c, stream);
    case 214: return launch<2, 1, 4>(p, c, stream);
    case 122: return launch<1, 2, 2>(p, c, stream);
    case 124: return launch<1, 2, 4>(p, c, stream);
    case 222: return launch<2, 2, 2>(p, c, stream);
    case 142: return launch<1, 4, 2>(p, c, stream);
    default: return "gemm_sm90: invalid decode configuration";
  }
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
