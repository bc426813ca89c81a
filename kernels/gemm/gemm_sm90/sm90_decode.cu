// Host side of the small-M (decode) kernel: which problems it takes, its configuration and
// its launch. See sm90_decode.cuh for the kernel.
#include <cstdlib>
#include <cstring>

#include "gemm_common/scale_block.h"
#include "gemm_sm90/sm90_config.h"
#include "gemm_sm90/sm90_decode.cuh"
#include "gemm_sm90/sm90_decode.h"
#include "gemm_sm90/sm90_launch.h"

#pragma GCC visibility push(hidden)

namespace fp8gemm::sm90 {
namespace {

using decode::DecodeParams;

constexpr const char* kNoDecodeEnv = "GEMM_FORCE_NO_DECODE";

// Where the decode kernel beats the wgmma tiles, and its best configuration, measured for the
// DeepSeek-V3 (N, K) on one H100 SXM (132 SMs; DESIGN.md, "Small M"): up to max_m tokens. Above 8
// the wgmma tiles win on every one of them. (4096, 7168), the expert MLP's gate and up
// projection, in one-CTA clusters: the rule's two-CTA clusters took 1.3 waves (DESIGN.md, "The
// FP8 linear layer").
struct DecodeTuned {
  int64_t N, K, max_m;
  DecodeConfig config;
};
// kTunedSms (sm90_config.h, from tile_configs.def): the H100's 132 SMs, as for the tile tables.
constexpr DecodeTuned kDecodeTuned[] = {
    {7168, 2048, 8, {1, 1, 4, 1}}, {4608, 7168, 8, {1, 1, 8, 1}}, {1536, 7168, 8, {2, 1, 8, 4}},
    {576, 7168, 8, {1, 1, 8, 8}},  {3072, 1536, 8, {1, 1, 8, 1}}, {4096, 512, 8, {1, 1, 4, 1}},
    {7168, 2304, 8, {1, 1, 4, 1}}, {7168, 256, 8, {1, 1, 2, 1}},  {4096, 7168, 8, {1, 1, 8, 1}},
};

const DecodeTuned* tuned(int64_t N, int64_t K) {
  for (const DecodeTuned& t : kDecodeTuned)
    if (t.N == N && t.K == K) return &t;
  return nullptr;
}

// Other shapes: the decode kernel for up to 8 tokens, and up to 32 where N is narrow (the wgmma
// tiles then leave SMs idle), when K has 4 blocks or more to split.
bool decode_wins(int64_t M, int64_t N, int64_t K, int num_sms, bool h200_class) {
  // An H200 entry that covers M: measured faster than this kernel there (DESIGN.md, "Small M on the H200").
  if (num_sms == kTunedSms && h200_class && h200_small_m(M, N, K) != nullptr) return false;
  if (const DecodeTuned* t = num_sms == kTunedSms ? tuned(N, K) : nullptr) return M <= t->max_m;
  return ceil_div(K, decode::kBlockK) >= 4 && (M <= 8 || (M <= 32 && N <= 2048));
}

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

template <int WR, int TN>
Status launch(const DecodeParams& p, const DecodeConfig& c, cudaStream_t stream) {
  const int tiles_per_cta = decode::kWarps / p.k_warps;
  // A cluster launch costs 0.7 µs or more than a plain one on the H100, so one-CTA "clusters"
  // are launched plainly, and as a kernel without cluster steps.
  cudaLaunchAttribute attrs[2];
  unsigned num_attrs = 0;
  if (c.cluster > 1) {
    attrs[num_attrs].id = cudaLaunchAttributeClusterDimension;
    attrs[num_attrs].val.clusterDim.x = 1;
    attrs[num_attrs].val.clusterDim.y = 1;
    attrs[num_attrs].val.clusterDim.z = unsigned(c.cluster);
    ++num_attrs;
  }
  if (p.b_before_wait) {  // behind the quantization of A: start while it runs (the kernel waits for it)
    attrs[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[num_attrs].val.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(ceil_div(p.M, 8 * TN)), unsigned(ceil_div(p.N, 16 * WR * tiles_per_cta)),
                     unsigned(c.cluster));
  cfg.blockDim = dim3(decode::kThreads);
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = num_attrs;
  auto* kernel =
      c.cluster > 1 ? decode::fp8_decode_kernel<WR, TN, true> : decode::fp8_decode_kernel<WR, TN, false>;
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, p);
  if (err != cudaSuccess && p.b_before_wait) {  // no programmatic launch here (the last attribute)
    cudaGetLastError();
    cfg.numAttrs = num_attrs - 1;
    err = cudaLaunchKernelEx(&cfg, kernel, p);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return "gemm_sm90: decode kernel launch failed";
  }
  return kOk;
}

}  // namespace

bool decode_takes(const GemmArgs& g, int num_sms, bool h200_class) {
  constexpr int64_t kMaxN = int64_t(65535) * 16, kMaxK = int64_t(1) << 30;  // grid y, int indexing
  return g.format == Fp8Format::E4M3FN && g.M >= 1 && g.N >= 1 && g.N <= kMaxN && g.K >= 1 && g.K < kMaxK &&
         decode_wins(g.M, g.N, g.K, num_sms, h200_class) && !decode_switched_off() &&
         rows_16(g.a, g.a_stride_m, g.a_stride_k, g.M, g.K) &&
         rows_16(g.b, g.b_stride_n, g.b_stride_k, g.N, g.K);
}

DecodeConfig choose_decode_config(int64_t M, int64_t N, int64_t K, int num_sms) {
  const DecodeTuned* t = num_sms == kTunedSms ? tuned(N, K) : nullptr;
  if (t != nullptr && M <= t->max_m) return t->config;
  // Else: one or two 8-token tiles per warp; K split over the CTA's warps (at least a block each)
  // and over clusters until there are two CTAs per SM, each warp keeping 2 blocks or more.
  DecodeConfig c;
  c.tn = M <= 8 ? 1 : 2;
  c.wr = 1;
  const int64_t kb = ceil_div(K, decode::kBlockK);
  c.k_warps = kb >= 8 ? 8 : kb >= 4 ? 4 : kb >= 2 ? 2 : 1;
  const int64_t ctas = ceil_div(M, 8 * c.tn) * ceil_div(N, 16 * c.wr * (decode::kWarps / c.k_warps));
  c.cluster = 1;
  while (c.cluster < 8 && ctas * c.cluster < 2 * num_sms && 2 * c.k_warps * c.cluster * 2 <= kb)
    c.cluster *= 2;
  return c;
}

Status run_decode(const GemmArgs& g, const DecodeConfig& c, cudaStream_t stream) {
  DecodeParams p;
  p.a = g.a;
  p.a_row = g.M == 1 ? 0 : g.a_stride_m;
  p.b = g.b;
  p.b_row = g.N == 1 ? 0 : g.b_stride_n;
  set_operands(p, g, g.M);
  p.bias = g.bias;
  p.bias_stride = g.bias_stride;
  p.k_warps = c.k_warps;
  p.b_before_wait = g.after_quantize;
  const int key = c.wr * 10 + c.tn;
  switch (key) {
    case 11:
      return launch<1, 1>(p, c, stream);
    case 12:
      return launch<1, 2>(p, c, stream);
    case 21:
      return launch<2, 1>(p, c, stream);
    case 22:
      return launch<2, 2>(p, c, stream);
    default:
      return "gemm_sm90: invalid decode configuration";
  }
}

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
