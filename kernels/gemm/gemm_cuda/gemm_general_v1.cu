// TEMPORARY A/B fallback (GEMM_GENERAL_V1=1): the first tensor-core general kernel.
// any shape and any strides.
//
// FP8 values are exactly representable in bf16, so each block decodes its A and B tiles to
// bf16 in shared memory (any layout: plain gathers, zero-filled at the edges) and multiplies
// them with bf16 tensor-core MMAs (mma.sync m16n8k16, fp32 accumulate: the products are
// exact). Partial sums over one 128-wide scale block are then scaled by
// a_scale[kb, m] * b_scale[kb, n/128] and added to the fp32 totals, as DeepGEMM promotes.
//
// Block tile kBlockM x kBlockN, four warps of kWarpM x kWarpN; kBlockK per shared-memory step.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/gemm_args.h"
#include "gemm_cuda/gemm_general.h"

namespace fp8gemm::general_v1 {
namespace {

constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr int kBlockK = 32;
constexpr int kWarpsM = 2;
constexpr int kWarpsN = 2;
constexpr int kWarpSize = 32;
constexpr int kThreads = kWarpsM * kWarpsN * kWarpSize;
constexpr int kWarpM = kBlockM / kWarpsM;
constexpr int kWarpN = kBlockN / kWarpsN;
// One mma.sync.m16n8k16 computes a 16x8 tile over 16 of K.
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 16;
constexpr int kTilesM = kWarpM / kMmaM;
constexpr int kTilesN = kWarpN / kMmaN;
// Rows of 32 + 8 bf16 (20 words) put the 8 rows a warp reads at once on distinct banks.
constexpr int kRowElems = kBlockK + 8;
constexpr int64_t kMaxGridY = 65535;

static_assert(kBlockM == kBlockN, "stage() fills A and B tiles of the same height");
static_assert(kScaleBlock % kBlockN == 0, "a block's columns must share one b_scale");
static_assert(kScaleBlock % kBlockK == 0, "a K step must stay inside one scale block");
static_assert(kBlockK % kMmaK == 0 && kWarpM % kMmaM == 0 && kWarpN % kMmaN == 0, "MMA tiling");

using Tile = __nv_bfloat16[kBlockM][kRowElems];

// tile[r][k] = decode(src[(row0 + r) * row_stride + (k0 + k) * k_stride]), 0 outside.
// Consecutive threads walk the operand's contiguous dimension, so global reads coalesce.
__device__ void stage(Tile& tile, const uint8_t* src, int64_t row_stride, int64_t k_stride,
                      int64_t row0, int64_t rows, int64_t k0, int64_t K, Fp8Format format) {
  const bool contiguous_k = k_stride == 1;
  for (int i = threadIdx.x; i < kBlockM * kBlockK; i += kThreads) {
    const int r = contiguous_k ? i / kBlockK : i % kBlockM;
    const int k = contiguous_k ? i % kBlockK : i / kBlockM;
    const int64_t row = row0 + r, kk = k0 + k;
    float v = 0.0f;
    if (row < rows && kk < K) v = decode_fp8(src[row * row_stride + kk * k_stride], format);
    tile[r][k] = __float2bfloat16_rn(v);
  }
}

// Two consecutive bf16 (4-byte aligned: k is even and rows are 80 bytes).
__device__ __forceinline__ uint32_t pair(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// c (16x8, fp32) += a (16x16, row-major) * b (16x8, column-major), bf16 inputs.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void __launch_bounds__(kThreads) gemm_general_kernel(const GemmArgs args) {
  __shared__ __align__(16) Tile a_tile;  // [m][k]
  __shared__ __align__(16) Tile b_tile;  // [n][k]
  const int64_t m0 = int64_t(blockIdx.x) * kBlockM;
  const int64_t n0 = int64_t(blockIdx.y) * kBlockN;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warp_m = (warp / kWarpsN) * kWarpM, warp_n = (warp % kWarpsN) * kWarpN;
  // MMA fragment coordinates (PTX ISA, mma.m16n8k16): group = row (A, C) or column (B).
  const int group = lane / 4, pair_k = 2 * (lane % 4);

  float total[kTilesM][kTilesN][4] = {};
  float partial[kTilesM][kTilesN][4] = {};
  for (int64_t k0 = 0; k0 < args.K; k0 += kBlockK) {
    stage(a_tile, args.a, args.a_stride_m, args.a_stride_k, m0, args.M, k0, args.K, args.format);
    stage(b_tile, args.b, args.b_stride_n, args.b_stride_k, n0, args.N, k0, args.K, args.format);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBlockK; kk += kMmaK) {
      uint32_t a[kTilesM][4], b[kTilesN][2];
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
        const int r = warp_m + i * kMmaM + group;
        a[i][0] = pair(&a_tile[r][kk + pair_k]);
        a[i][1] = pair(&a_tile[r + 8][kk + pair_k]);
        a[i][2] = pair(&a_tile[r][kk + pair_k + 8]);
        a[i][3] = pair(&a_tile[r + 8][kk + pair_k + 8]);
      }
#pragma unroll
      for (int j = 0; j < kTilesN; ++j) {
        const int n = warp_n + j * kMmaN + group;
        b[j][0] = pair(&b_tile[n][kk + pair_k]);
        b[j][1] = pair(&b_tile[n][kk + pair_k + 8]);
      }
#pragma unroll
      for (int i = 0; i < kTilesM; ++i)
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) mma_bf16(partial[i][j], a[i], b[j]);
    }
    __syncthreads();

    // End of a scale block (or of K): fold the partial sums in with their scales.
    const int64_t k_next = k0 + kBlockK;
    if (k_next % kScaleBlock != 0 && k_next < args.K) continue;
    const int64_t kb = k0 / kScaleBlock;
    const float b_scale =
        args.b_scale[kb * args.b_scale_stride_kb + (n0 / kScaleBlock) * args.b_scale_stride_nb];
#pragma unroll
    for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows group and group + 8
        const int64_t m = m0 + warp_m + i * kMmaM + group + 8 * half;
        const float scale =
            m < args.M ? args.a_scale[kb * args.a_scale_stride_kb + m * args.a_scale_stride_m] * b_scale
                       : 0.0f;
#pragma unroll
        for (int j = 0; j < kTilesN; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            total[i][j][2 * half + e] += partial[i][j][2 * half + e] * scale;
            partial[i][j][2 * half + e] = 0.0f;
          }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kTilesM; ++i)
#pragma unroll
    for (int j = 0; j < kTilesN; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t m = m0 + warp_m + i * kMmaM + group + 8 * (c / 2);
        const int64_t n = n0 + warp_n + j * kMmaN + pair_k + c % 2;
        if (m < args.M && n < args.N)
          args.out[m * args.out_stride_m + n * args.out_stride_n] = float_to_bf16_bits(total[i][j][c]);
      }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Status launch(const GemmArgs& args, cudaStream_t stream) {
  if (args.M == 0 || args.N == 0) return kOk;
  const int64_t grid_x = ceil_div(args.M, kBlockM), grid_y = ceil_div(args.N, kBlockN);
  if (grid_y > kMaxGridY) return "gemm general path: N too large for one launch";
  gemm_general_kernel<<<dim3(unsigned(grid_x), unsigned(grid_y)), kThreads, 0, stream>>>(args);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? kOk : cudaGetErrorString(err);
}

}  // namespace fp8gemm::general_v1
