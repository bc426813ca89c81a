// General CUDA path of the FP8 block-scaled GEMM: correct on any GPU from sm_80 up, for
// any shape and any strides.
//
// FP8 values (e4m3fn and e4m3fnuz) are exactly representable in fp16, so each block decodes
// its A and B tiles to fp16 in shared memory and multiplies them with fp16 tensor-core MMAs
// (mma.sync m16n8k16, fp32 accumulate: the products are exact). Partial sums over one
// 128-wide scale block are then scaled by a_scale[kb, m] * b_scale[kb, n/128] and added to
// the fp32 totals, as DeepGEMM promotes.
//
// Operands whose K is contiguous and 16-byte aligned are read 16 bytes per thread, one step
// ahead (in registers) of the MMAs; any other layout is gathered byte by byte. Edges are
// zero-filled (code 0 is +0 in both formats).
//
// Block tile kBlockM x kBlockN, four warps of kWarpM x kWarpN; kBlockK per shared-memory step.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/gemm_args.h"
#include "gemm_cuda/gemm_general.h"

namespace fp8gemm::general {
namespace {

constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr int kBlockK = 64;
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
// Rows of 64 + 8 fp16 (36 words) put the 8 rows a warp reads at once on distinct banks.
constexpr int kRowElems = kBlockK + 8;
constexpr int kVecBytes = 16;
constexpr int kVecsPerRow = kBlockK / kVecBytes;
constexpr int kVecsPerThread = kBlockM * kVecsPerRow / kThreads;
constexpr int64_t kMaxGridY = 65535;

static_assert(kBlockM == kBlockN, "A and B tiles share one Tile type and staging code");
static_assert(kScaleBlock % kBlockN == 0, "a block's columns must share one b_scale");
static_assert(kScaleBlock % kBlockK == 0, "a K step must stay inside one scale block");
static_assert(kBlockK % kMmaK == 0 && kWarpM % kMmaM == 0 && kWarpN % kMmaN == 0, "MMA tiling");
static_assert(kBlockM * kVecsPerRow % kThreads == 0, "vector loads must cover the tile");

using Tile = __half[kBlockM][kRowElems];

// One operand as the kernel reads it: element (row, k) at ptr[row * row_stride + k * k_stride].
struct Operand {
  const uint8_t* ptr;
  int64_t row_stride, k_stride, rows;
};

// Two FP8 codes (low byte first) to two fp16 values, exactly.
__device__ __forceinline__ __half2 fp8x2_to_half2(uint16_t codes, Fp8Format format) {
#if __CUDA_ARCH__ >= 890
  if (format == Fp8Format::E4M3FN) return __half2(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3));
#endif
  return __floats2half2_rn(decode_fp8(codes & 0xFFu, format), decode_fp8(codes >> 8, format));
}

// Any layout: tile[r][k] = decode(element (row0 + r, k0 + k)), 0 outside. Consecutive threads
// walk the operand's contiguous dimension, so global reads coalesce.
__device__ void stage_gather(Tile& tile, const Operand& op, int64_t row0, int64_t k0, int64_t K,
                             Fp8Format format) {
  const bool contiguous_k = op.k_stride == 1;
  for (int i = threadIdx.x; i < kBlockM * kBlockK; i += kThreads) {
    const int r = contiguous_k ? i / kBlockK : i % kBlockM;
    const int k = contiguous_k ? i % kBlockK : i / kBlockM;
    const int64_t row = row0 + r, kk = k0 + k;
    float v = 0.0f;
    if (row < op.rows && kk < K) v = decode_fp8(op.ptr[row * op.row_stride + kk * op.k_stride], format);
    tile[r][k] = __float2half_rn(v);
  }
}

// K-contiguous, 16-byte aligned operands: each thread loads kVecsPerThread x 16 codes.
__device__ void load_vectors(uint4 (&raw)[kVecsPerThread], const Operand& op, int64_t row0, int64_t k0,
                             int64_t K) {
#pragma unroll
  for (int v = 0; v < kVecsPerThread; ++v) {
    const int i = threadIdx.x + v * kThreads;
    const int64_t row = row0 + i / kVecsPerRow, kk = k0 + (i % kVecsPerRow) * kVecBytes;
    const uint8_t* src = op.ptr + row * op.row_stride + kk;
    if (row < op.rows && kk + kVecBytes <= K) {
      raw[v] = *reinterpret_cast<const uint4*>(src);
      continue;
    }
    uint8_t bytes[kVecBytes];
#pragma unroll
    for (int b = 0; b < kVecBytes; ++b) bytes[b] = row < op.rows && kk + b < K ? src[b] : 0;
    memcpy(&raw[v], bytes, kVecBytes);
  }
}

__device__ void store_vectors(Tile& tile, const uint4 (&raw)[kVecsPerThread], Fp8Format format) {
#pragma unroll
  for (int v = 0; v < kVecsPerThread; ++v) {
    const int i = threadIdx.x + v * kThreads;
    const uint16_t* codes = reinterpret_cast<const uint16_t*>(&raw[v]);
    alignas(16) __half2 halves[kVecBytes / 2];
#pragma unroll
    for (int p = 0; p < kVecBytes / 2; ++p) halves[p] = fp8x2_to_half2(codes[p], format);
    uint4* dst = reinterpret_cast<uint4*>(&tile[i / kVecsPerRow][(i % kVecsPerRow) * kVecBytes]);
    dst[0] = *reinterpret_cast<const uint4*>(&halves[0]);
    dst[1] = *reinterpret_cast<const uint4*>(&halves[4]);
  }
}

// Two consecutive fp16 (4-byte aligned: k is even and rows are 144 bytes).
__device__ __forceinline__ uint32_t pair(const __half* p) { return *reinterpret_cast<const uint32_t*>(p); }

// c (16x8, fp32) += a (16x16, row-major) * b (16x8, column-major), fp16 inputs.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <bool kVectorA, bool kVectorB>
__global__ void __launch_bounds__(kThreads) gemm_general_kernel(const GemmArgs args) {
  __shared__ __align__(16) Tile a_tile;  // [m][k]
  __shared__ __align__(16) Tile b_tile;  // [n][k]
  const Operand a_op{args.a, args.a_stride_m, args.a_stride_k, args.M};
  const Operand b_op{args.b, args.b_stride_n, args.b_stride_k, args.N};
  const int64_t m0 = int64_t(blockIdx.x) * kBlockM;
  const int64_t n0 = int64_t(blockIdx.y) * kBlockN;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int warp_m = (warp / kWarpsN) * kWarpM, warp_n = (warp % kWarpsN) * kWarpN;
  // MMA fragment coordinates (PTX ISA, mma.m16n8k16): group = row (A, C) or column (B).
  const int group = lane / 4, pair_k = 2 * (lane % 4);

  float total[kTilesM][kTilesN][4] = {};
  float partial[kTilesM][kTilesN][4] = {};
  uint4 a_raw[kVecsPerThread], b_raw[kVecsPerThread];  // the next step's codes, in flight
  if constexpr (kVectorA) load_vectors(a_raw, a_op, m0, 0, args.K);
  if constexpr (kVectorB) load_vectors(b_raw, b_op, n0, 0, args.K);
  for (int64_t k0 = 0; k0 < args.K; k0 += kBlockK) {
    if constexpr (kVectorA)
      store_vectors(a_tile, a_raw, args.format);
    else
      stage_gather(a_tile, a_op, m0, k0, args.K, args.format);
    if constexpr (kVectorB)
      store_vectors(b_tile, b_raw, args.format);
    else
      stage_gather(b_tile, b_op, n0, k0, args.K, args.format);
    __syncthreads();
    if (k0 + kBlockK < args.K) {
      if constexpr (kVectorA) load_vectors(a_raw, a_op, m0, k0 + kBlockK, args.K);
      if constexpr (kVectorB) load_vectors(b_raw, b_op, n0, k0 + kBlockK, args.K);
    }
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
        for (int j = 0; j < kTilesN; ++j) mma_f16(partial[i][j], a[i], b[j]);
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
          args.out[m * args.out_stride_m + n * args.out_stride_n] =
              float_to_bf16_bits(add_bias(args, n, total[i][j][c]));
      }
}

// 16-byte loads along K need K contiguous and every row start 16-byte aligned.
bool vector_loads(const uint8_t* ptr, int64_t row_stride, int64_t k_stride, int64_t rows) {
  const bool aligned_rows = rows == 1 || row_stride % kVecBytes == 0;
  return k_stride == 1 && aligned_rows && reinterpret_cast<uintptr_t>(ptr) % kVecBytes == 0;
}

template <bool kVectorA, bool kVectorB>
void launch_kernel(const GemmArgs& args, dim3 grid, cudaStream_t stream) {
  gemm_general_kernel<kVectorA, kVectorB><<<grid, kThreads, 0, stream>>>(args);
}

}  // namespace

Status launch(const GemmArgs& args, cudaStream_t stream) {
  if (args.M == 0 || args.N == 0) return kOk;
  const int64_t grid_x = ceil_div(args.M, kBlockM), grid_y = ceil_div(args.N, kBlockN);
  if (grid_y > kMaxGridY) return "gemm general path: N too large for one launch";
  const dim3 grid{unsigned(grid_x), unsigned(grid_y)};
  const bool vector_a = vector_loads(args.a, args.a_stride_m, args.a_stride_k, args.M);
  const bool vector_b = vector_loads(args.b, args.b_stride_n, args.b_stride_k, args.N);
  if (vector_a && vector_b)
    launch_kernel<true, true>(args, grid, stream);
  else if (vector_a)
    launch_kernel<true, false>(args, grid, stream);
  else if (vector_b)
    launch_kernel<false, true>(args, grid, stream);
  else
    launch_kernel<false, false>(args, grid, stream);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? kOk : cudaGetErrorString(err);
}

}  // namespace fp8gemm::general
