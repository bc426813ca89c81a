#pragma once
// Device code of the ROCm FP8 GEMM for gfx942 (MI300): the MFMA tile kernel (fast path), the
// general kernel (any strides, scalar), and the deterministic split-K reduction.
//
// Numerical scheme, mirrored by kernels/gemm/tests/rocm_model.py:
//   - per workgroup tile and per split, an fp32 accumulator acc = 0;
//   - for each 128-K scale block kb of the split: partial = sum over the block's 8 K-steps of
//     one v_mfma_f32_32x32x16_fp8_fp8 each (16 products per step, fp32 accumulate), then
//     acc = fma(partial, a_scale[kb, m] * b_scale[kb, n / 128], acc);
//   - split_k == 1: out = bf16(acc); else the splits' fp32 partials go to the workspace and
//     splitk_reduce_kernel adds them in split order 0, 1, ..., split_k - 1, then rounds to bf16.
// gfx942's FP8 MFMA reads e4m3fnuz; e4m3fn inputs are remapped while loading (fn_as_fnuz.h).
// The tests run this file's kernels in a host emulation (kernels/gemm/tests/rocm_emulator.cpp)
// and require the model's results bit for bit; nothing here has run on an AMD GPU.
#include <cstdint>
#include <type_traits>

#include "gemm_common/fp8_decode.h"
#include "gemm_common/gemm_args.h"
#include "gemm_rocm/fn_as_fnuz.h"
#include "gemm_rocm/plan.h"
#include "gemm_rocm/tile_configs.h"

// The host emulation (kernels/gemm/tests/rocm_emulator.cpp) provides these itself.
#ifndef FP8GEMM_ROCM_HOST_EMULATION
#include "gemm_rocm/device_primitives.h"
#endif

namespace fp8gemm::rocm {

constexpr int kWaveSize = 64;
constexpr int kWavesM = 2;
constexpr int kWavesN = 2;
constexpr int kThreads = kWaveSize * kWavesM * kWavesN;
constexpr int kBlockK = kScaleBlock;  // one scale block per main-loop step

// v_mfma_f32_32x32x16_fp8_fp8: D(32x32 fp32) += A(32x16 fp8) * B(16x32 fp8) per wave.
// Lane l holds A row l % 32 and B column l % 32, K bytes [8 * (l / 32), +8) of the step, and
// D column l % 32, rows 8 * (v / 4) + 4 * (l / 32) + v % 4 for its accumulator v = 0..15
// (the CDNA3 register layout of the 32x32 MFMA family; the emulation assumes the same).
constexpr int kMfmaM = 32;
constexpr int kMfmaN = 32;
constexpr int kMfmaK = 16;
constexpr int kMfmaFragBytes = 8;
static_assert(kMfmaAccPerLane == kMfmaM * kMfmaN / kWaveSize, "accumulators per lane");
constexpr int kMfmaAccRowGroup = 4;  // consecutive D rows per lane group

// LDS holds both operands K-contiguous, one 128-byte K row per M (or N) index; 8 bytes of
// padding per row move consecutive rows to different banks for the 8-byte fragment reads.
constexpr int kLdsRowBytes = kBlockK + 8;

constexpr int kGeneralTile = 16;  // general kernel: 16 x 16 outputs per workgroup
constexpr int kGeneralThreads = kGeneralTile * kGeneralTile;
constexpr int kReduceThreads = 256;

// The row of its 32x32 MFMA tile that accumulator v of lane `lane` holds (its column: lane % 32).
__device__ __forceinline__ int mfma_acc_row(int lane, int v) {
  return 2 * kMfmaAccRowGroup * (v / kMfmaAccRowGroup) + kMfmaAccRowGroup * (lane / kMfmaN) +
         v % kMfmaAccRowGroup;
}

struct OperandView {
  const uint8_t* ptr;
  int64_t stride_row;
  int64_t stride_k;
  int64_t rows;
};

__device__ __forceinline__ uint32_t word_of(const uint4& x, int i) {
  return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w;
}

// The first min(count, 16) bytes at p, zero-padded to 16, as a uint4 (tiles' edges).
__device__ __forceinline__ uint4 load_bytes(const uint8_t* p, int64_t count) {
  uint32_t words[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < count && i < 16; ++i) words[i / 4] |= uint32_t(p[i]) << (8 * (i % 4));
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// Loads a kTileRows x 128 tile of a K-contiguous operand (stride_k == 1, rows 16-byte
// aligned) into registers, 16 bytes per access, and stores it to LDS.
template <int kTileRows>
struct ContiguousKLoader {
  static constexpr int kChunkBytes = 16;
  static constexpr int kChunksPerRow = kBlockK / kChunkBytes;
  static constexpr int kPerThread = kTileRows * kChunksPerRow / kThreads;
  static_assert(kTileRows * kChunksPerRow % kThreads == 0, "tile rows must be a multiple of 32");
  uint4 chunk[kPerThread];

  __device__ void load(const OperandView& v, int64_t row0, int64_t k0, int64_t K, int tid) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = tid + i * kThreads;
      const int64_t row = row0 + c / kChunksPerRow;
      const int64_t k = k0 + (c % kChunksPerRow) * kChunkBytes;
      if (row < v.rows && k + kChunkBytes <= K) {
        chunk[i] = *reinterpret_cast<const uint4*>(v.ptr + row * v.stride_row + k);
      } else if (row < v.rows && k < K) {
        chunk[i] = load_bytes(v.ptr + row * v.stride_row + k, K - k);
      } else {
        chunk[i] = make_uint4(0, 0, 0, 0);
      }
    }
  }

  __device__ void store(uint8_t* lds, int tid, bool fn_codes) const {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int c = tid + i * kThreads;
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        w[j] = fn_codes ? fn_to_half_fnuz(word_of(chunk[i], j)) : word_of(chunk[i], j);
      uint2* dst = reinterpret_cast<uint2*>(lds + (c / kChunksPerRow) * kLdsRowBytes +
                                            (c % kChunksPerRow) * kChunkBytes);
      dst[0] = make_uint2(w[0], w[1]);
      dst[1] = make_uint2(w[2], w[3]);
    }
  }
};

// Loads a kTileRows x 128 tile of a row-contiguous operand (stride_row == 1, K rows 16-byte
// aligned) as units of 16 rows x 4 K, and stores it to LDS transposed (K-contiguous).
template <int kTileRows>
struct ContiguousRowsLoader {
  static constexpr int kUnitRows = 16;
  static constexpr int kUnitK = 4;
  static constexpr int kRowGroups = kTileRows / kUnitRows;
  static constexpr int kUnits = kRowGroups * (kBlockK / kUnitK);
  static constexpr int kPerThread = (kUnits + kThreads - 1) / kThreads;
  uint4 rows_at_k[kPerThread][kUnitK];  // [unit][k]: 16 consecutive rows at one k

  __device__ void load(const OperandView& v, int64_t row0, int64_t k0, int64_t K, int tid) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int u = tid + i * kThreads;
      if (u >= kUnits) break;
      const int64_t row = row0 + (u % kRowGroups) * kUnitRows;
#pragma unroll
      for (int j = 0; j < kUnitK; ++j) {
        const int64_t k = k0 + (u / kRowGroups) * kUnitK + j;
        if (k < K && row + kUnitRows <= v.rows) {
          rows_at_k[i][j] = *reinterpret_cast<const uint4*>(v.ptr + k * v.stride_k + row);
        } else if (k < K && row < v.rows) {
          rows_at_k[i][j] = load_bytes(v.ptr + k * v.stride_k + row, v.rows - row);
        } else {
          rows_at_k[i][j] = make_uint4(0, 0, 0, 0);
        }
      }
    }
  }

  __device__ void store(uint8_t* lds, int tid, bool fn_codes) const {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int u = tid + i * kThreads;
      if (u >= kUnits) break;
      const int row = (u % kRowGroups) * kUnitRows;
      const int k = (u / kRowGroups) * kUnitK;
#pragma unroll
      for (int r = 0; r < kUnitRows; ++r) {
        uint32_t k_bytes = 0;  // the 4 K bytes of row r, transposed out of the 4 loads
#pragma unroll
        for (int j = 0; j < kUnitK; ++j) {
          const uint32_t code = (word_of(rows_at_k[i][j], r / 4) >> (8 * (r % 4))) & kFp8ByteMask;
          k_bytes |= code << (8 * j);
        }
        if (fn_codes) k_bytes = fn_to_half_fnuz(k_bytes);
        *reinterpret_cast<uint32_t*>(lds + (row + r) * kLdsRowBytes + k) = k_bytes;
      }
    }
  }
};

template <int kTileRows, Layout kLayout>
using TileLoader = typename std::conditional<kLayout == Layout::kContiguousK, ContiguousKLoader<kTileRows>,
                                             ContiguousRowsLoader<kTileRows>>::type;

// One workgroup computes a kBlockM x kBlockN tile of out over the scale blocks of split
// workgroup_y(). partials: split_k x M x N fp32 (row-major), used when split_k > 1.
template <int kBlockM, int kBlockN, Layout kLayoutA, Layout kLayoutB>
__global__ __launch_bounds__(kThreads) void mfma_gemm_kernel(GemmArgs args, float* partials, int split_k,
                                                             int64_t tiles_n) {
  constexpr int kWaveM = kBlockM / kWavesM;
  constexpr int kWaveN = kBlockN / kWavesN;
  constexpr int kTilesM = kWaveM / kMfmaM;
  constexpr int kTilesN = kWaveN / kMfmaN;
  static_assert(kWaveM % kMfmaM == 0 && kWaveN % kMfmaN == 0, "tile must split into 32x32 MFMA tiles");
  static_assert(kScaleBlock % kBlockN == 0, "a tile must lie in one scale block of B");

  __shared__ __attribute__((aligned(16))) uint8_t lds_a[kBlockM * kLdsRowBytes];
  __shared__ __attribute__((aligned(16))) uint8_t lds_b[kBlockN * kLdsRowBytes];
  __shared__ float lds_scale_a[kBlockM];

  const int tid = thread_id();
  const int lane = tid % kWaveSize;
  const int wave_m = (tid / kWaveSize) / kWavesN;
  const int wave_n = (tid / kWaveSize) % kWavesN;
  const int64_t m0 = workgroup_x() / tiles_n * kBlockM;
  const int64_t n0 = workgroup_x() % tiles_n * kBlockN;
  const int64_t n_block = n0 / kScaleBlock;
  const int64_t k_blocks = ceil_div(args.K, kScaleBlock);
  const int split = workgroup_y();
  const int64_t kb_begin = split * k_blocks / split_k;
  const int64_t kb_end = (split + 1) * k_blocks / split_k;
  const bool fn_codes = args.format == Fp8Format::E4M3FN;
  const float format_correction = fn_codes ? kFnAsFnuzCorrection : 1.0f;

  const OperandView view_a{args.a, args.a_stride_m, args.a_stride_k, args.M};
  const OperandView view_b{args.b, args.b_stride_n, args.b_stride_k, args.N};
  TileLoader<kBlockM, kLayoutA> loader_a;
  TileLoader<kBlockN, kLayoutB> loader_b;

  MfmaAcc acc[kTilesM][kTilesN];
#pragma unroll
  for (int tm = 0; tm < kTilesM; ++tm)
#pragma unroll
    for (int tn = 0; tn < kTilesN; ++tn) acc[tm][tn] = MfmaAcc{};

  if (kb_begin < kb_end) {
    loader_a.load(view_a, m0, kb_begin * kBlockK, args.K, tid);
    loader_b.load(view_b, n0, kb_begin * kBlockK, args.K, tid);
  }
  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    workgroup_barrier();  // the previous step has finished reading LDS
    loader_a.store(lds_a, tid, fn_codes);
    loader_b.store(lds_b, tid, fn_codes);
    for (int t = tid; t < kBlockM; t += kThreads) {
      const int64_t m = m0 + t;
      lds_scale_a[t] =
          m < args.M ? args.a_scale[kb * args.a_scale_stride_kb + m * args.a_scale_stride_m] : 0.0f;
    }
    const float scale_b =
        args.b_scale[kb * args.b_scale_stride_kb + n_block * args.b_scale_stride_nb] * format_correction;
    workgroup_barrier();
    if (kb + 1 < kb_end) {  // the next block's global loads overlap this block's MFMAs
      loader_a.load(view_a, m0, (kb + 1) * kBlockK, args.K, tid);
      loader_b.load(view_b, n0, (kb + 1) * kBlockK, args.K, tid);
    }

    MfmaAcc partial[kTilesM][kTilesN];
#pragma unroll
    for (int tm = 0; tm < kTilesM; ++tm)
#pragma unroll
      for (int tn = 0; tn < kTilesN; ++tn) partial[tm][tn] = MfmaAcc{};
#pragma unroll
    for (int step = 0; step < kBlockK / kMfmaK; ++step) {
      const int k = step * kMfmaK + (lane / kMfmaM) * kMfmaFragBytes;
      long frag_a[kTilesM];
      long frag_b[kTilesN];
#pragma unroll
      for (int tm = 0; tm < kTilesM; ++tm) {
        const int row = wave_m * kWaveM + tm * kMfmaM + lane % kMfmaM;
        frag_a[tm] = *reinterpret_cast<const long*>(lds_a + row * kLdsRowBytes + k);
      }
#pragma unroll
      for (int tn = 0; tn < kTilesN; ++tn) {
        const int col = wave_n * kWaveN + tn * kMfmaN + lane % kMfmaN;
        frag_b[tn] = *reinterpret_cast<const long*>(lds_b + col * kLdsRowBytes + k);
      }
#pragma unroll
      for (int tm = 0; tm < kTilesM; ++tm)
#pragma unroll
        for (int tn = 0; tn < kTilesN; ++tn)
          partial[tm][tn] = mfma_32x32x16_fp8(frag_a[tm], frag_b[tn], partial[tm][tn]);
    }

#pragma unroll
    for (int tm = 0; tm < kTilesM; ++tm) {
#pragma unroll
      for (int v = 0; v < kMfmaAccPerLane; ++v) {
        const int row = wave_m * kWaveM + tm * kMfmaM + mfma_acc_row(lane, v);
        const float scale = lds_scale_a[row] * scale_b;
#pragma unroll
        for (int tn = 0; tn < kTilesN; ++tn)
          acc[tm][tn][v] = __builtin_fmaf(partial[tm][tn][v], scale, acc[tm][tn][v]);
      }
    }
  }

#pragma unroll
  for (int tm = 0; tm < kTilesM; ++tm) {
#pragma unroll
    for (int v = 0; v < kMfmaAccPerLane; ++v) {
      const int64_t m = m0 + wave_m * kWaveM + tm * kMfmaM + mfma_acc_row(lane, v);
#pragma unroll
      for (int tn = 0; tn < kTilesN; ++tn) {
        const int64_t n = n0 + wave_n * kWaveN + tn * kMfmaN + lane % kMfmaN;
        if (m >= args.M || n >= args.N) continue;
        if (split_k == 1) {
          args.out[m * args.out_stride_m + n * args.out_stride_n] =
              float_to_bf16_bits(add_bias(args, n, acc[tm][tn][v]));
        } else {
          partials[(split * args.M + m) * args.N + n] = acc[tm][tn][v];
        }
      }
    }
  }
}

// Any strides, any shape, both formats: one thread per output, scalar FP8 decoding.
// Per scale block: partial = sequential fp32 sum of the block's products, then
// acc = fma(partial, a_scale * b_scale, acc).
__global__ __launch_bounds__(kGeneralThreads) void general_gemm_kernel(GemmArgs args, int64_t tiles_n) {
  const int64_t m = workgroup_x() / tiles_n * kGeneralTile + thread_id() / kGeneralTile;
  const int64_t n = workgroup_x() % tiles_n * kGeneralTile + thread_id() % kGeneralTile;
  if (m >= args.M || n >= args.N) return;
  float acc = 0.0f;
  for (int64_t kb = 0; kb < ceil_div(args.K, kScaleBlock); ++kb) {
    const int64_t k_end = (kb + 1) * kScaleBlock < args.K ? (kb + 1) * kScaleBlock : args.K;
    float partial = 0.0f;
    for (int64_t k = kb * kScaleBlock; k < k_end; ++k) {
      const float a = decode_fp8(args.a[m * args.a_stride_m + k * args.a_stride_k], args.format);
      const float b = decode_fp8(args.b[k * args.b_stride_k + n * args.b_stride_n], args.format);
      partial = __builtin_fmaf(a, b, partial);  // the product is exact in fp32
    }
    const float scale =
        args.a_scale[kb * args.a_scale_stride_kb + m * args.a_scale_stride_m] *
        args.b_scale[kb * args.b_scale_stride_kb + (n / kScaleBlock) * args.b_scale_stride_nb];
    acc = __builtin_fmaf(partial, scale, acc);
  }
  args.out[m * args.out_stride_m + n * args.out_stride_n] = float_to_bf16_bits(add_bias(args, n, acc));
}

// out[m, n] = bf16(((partials[0] + partials[1]) + ...) + partials[split_k - 1]): fixed order.
// A grid-stride loop over the M x N outputs of `workgroups` workgroups.
__global__ __launch_bounds__(kReduceThreads) void splitk_reduce_kernel(GemmArgs args, const float* partials,
                                                                       int split_k, int64_t workgroups) {
  const int64_t count = args.M * args.N;
  for (int64_t i = workgroup_x() * kReduceThreads + thread_id(); i < count;
       i += workgroups * kReduceThreads) {
    float sum = partials[i];
    for (int s = 1; s < split_k; ++s) sum += partials[s * count + i];
    const int64_t m = i / args.N;
    const int64_t n = i % args.N;
    args.out[m * args.out_stride_m + n * args.out_stride_n] = float_to_bf16_bits(add_bias(args, n, sum));
  }
}

}  // namespace fp8gemm::rocm
