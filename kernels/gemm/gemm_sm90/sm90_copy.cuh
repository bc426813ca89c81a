#pragma once
// The operand copy that runs before the GEMM kernel when TMA cannot read an operand as it
// lies, or reads it slowly (sm90_gemm.cu decides): a K-major copy with 128-byte aligned rows.
#include <cstdint>

namespace fp8gemm::sm90 {

// One operand to copy: `rows` x K bytes with any strides, into a K-contiguous buffer whose
// rows are `pitch` bytes apart (a multiple of 128).
struct CopyJob {
  const uint8_t* src;
  int64_t s_row, s_k;
  int rows;
  uint8_t* dst;
  int64_t pitch;
  int tiles_rows;  // ceil(rows / kCopyRows)
  int tiles;       // tiles_rows * ceil(K / kCopyK)
  int vec;         // 16-byte loads: rows contiguous with 16-byte aligned columns (s_row == 1),
                   // or K contiguous with 16-byte aligned rows (s_k == 1)
};
struct CopyJobs {
  CopyJob job[2];  // job[1] may be empty (tiles == 0)
};
constexpr int kCopyRows = 128, kCopyK = 128, kCopyThreads = 256;

// The first n (<= 16) of 16 bytes at src, zero after them: byte loads, issued together.
__device__ __forceinline__ uint4 load_bytes(const uint8_t* src, int n) {
  uint32_t w[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    w[q] = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (4 * q + e < n) w[q] |= uint32_t(src[4 * q + e]) << (8 * e);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// 4x4 byte transpose: in[j] holds byte e of row e for K index j; out[e] holds, for row e,
// the 4 bytes of K index 0..3 (little-endian, lowest K first).
__device__ __forceinline__ void transpose4x4(const uint32_t (&in)[4], uint32_t (&out)[4]) {
  const uint32_t t0 = __byte_perm(in[0], in[1], 0x5140), t1 = __byte_perm(in[0], in[1], 0x7362);
  const uint32_t t2 = __byte_perm(in[2], in[3], 0x5140), t3 = __byte_perm(in[2], in[3], 0x7362);
  out[0] = __byte_perm(t0, t2, 0x5410);
  out[1] = __byte_perm(t0, t2, 0x7632);
  out[2] = __byte_perm(t1, t3, 0x5410);
  out[3] = __byte_perm(t1, t3, 0x7632);
}

// Copies both operands in one launch (the first job's tiles, then the second's), through
// shared memory in R-row x KT-byte tiles. Contiguous rows (the challenge layout): each
// thread loads 4 K-rows x 16 row-bytes (four 16-byte loads, a warp covers 128-byte runs),
// transposes 4x4 byte blocks in registers (byte_perm) and stores 4-byte words of 4 K
// values; the read side takes 16-byte K chunks and stores whole 128-byte lines. A tile row
// holds KT bytes; its 16-byte chunks are XORed with (row / 16) % 8, so the word stores of a
// warp hit 32 different banks and each 16-byte chunk stays whole (one LDS.128, conflict-free
// per quarter warp). Lets the dependent GEMM launch early (programmatic dependent launch:
// the GEMM waits with griddepcontrol.wait before touching global memory). As many CTAs per SM
// as the threads allow (8 of 128x128 tiles): the loads of all of them wait for memory together.
template <int R, int KT>
__global__ void __launch_bounds__(kCopyThreads, 128 * 1024 / (R * KT))
    to_k_major_kernel(const __grid_constant__ CopyJobs jobs, int K) {
  static_assert(R % 128 == 0 && KT % 128 == 0 && (R * KT / 64) % kCopyThreads == 0, "copy tile");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  __shared__ __align__(16) uint32_t tile[R * KT / 4];
  auto word = [&](int r, int kw) -> uint32_t* { return &tile[r * (KT / 4) + (kw ^ (4 * ((r / 16) % 8)))]; };
  const int second = int(blockIdx.x) >= jobs.job[0].tiles;
  const CopyJob& j = jobs.job[second];
  const int t = int(blockIdx.x) - (second ? jobs.job[0].tiles : 0);
  const int r0 = (t % j.tiles_rows) * R, k0 = (t / j.tiles_rows) * KT;
  if (j.vec && j.s_row == 1) {
    constexpr int kGroupsR = R / 128;  // 128-row groups of a tile
#pragma unroll
    for (int i = 0; i < R * KT / 64 / kCopyThreads; ++i) {
      const int u = int(threadIdx.x) + i * kCopyThreads;
      const int g = u / 32, l = u % 32;
      const int kq = (g / kGroupsR) * 4 + l / 8;        // K rows 4*kq .. 4*kq + 3 of the tile
      const int c = ((g % kGroupsR) * 8 + l % 8) * 16;  // tile rows c .. c + 15
      uint32_t x[4][4];                                 // x[q][w]: K row 4*kq + q, rows c + 4w .. c + 4w + 3
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int k = k0 + 4 * kq + q;
        const uint8_t* src = j.src + int64_t(k) * j.s_k + r0 + c;
        if (k < K && r0 + c + 16 <= j.rows) {
          const uint4 v = *reinterpret_cast<const uint4*>(src);
          x[q][0] = v.x;
          x[q][1] = v.y;
          x[q][2] = v.z;
          x[q][3] = v.w;
        } else {
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            uint32_t acc = 0;
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (k < K && r0 + c + 4 * w + e < j.rows) acc |= uint32_t(src[4 * w + e]) << (8 * e);
            x[q][w] = acc;
          }
        }
      }
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint32_t in[4] = {x[0][w], x[1][w], x[2][w], x[3][w]};
        uint32_t out[4];
        transpose4x4(in, out);
#pragma unroll
        for (int e = 0; e < 4; ++e) *word(c + 4 * w + e, kq) = out[e];
      }
    }
  } else if (j.s_k == 1 && j.vec) {
    // K-contiguous, 16-byte aligned rows whose pitch TMA reads slowly: 16-byte loads, all of a
    // thread's chunks before any store.
    constexpr int kChunks = R * KT / 16 / kCopyThreads;
    uint4 v[kChunks];
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int idx = int(threadIdx.x) + i * kCopyThreads;
      const int r = idx / (KT / 16), k = k0 + 16 * (idx % (KT / 16));
      const uint8_t* src = j.src + int64_t(r0 + r) * j.s_row + k;
      if (r0 + r >= j.rows || k >= K)
        v[i] = make_uint4(0, 0, 0, 0);
      else
        v[i] = k + 16 <= K ? *reinterpret_cast<const uint4*>(src) : load_bytes(src, K - k);
    }
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int idx = int(threadIdx.x) + i * kCopyThreads;
      *reinterpret_cast<uint4*>(word(idx / (KT / 16), 4 * (idx % (KT / 16)))) = v[i];
    }
  } else if (j.s_k == 1) {
    // K-contiguous rows at an unaligned start or pitch: byte loads of 16 consecutive K values
    // per thread and step, all 16 issued before they are stored.
#pragma unroll 1
    for (int idx = int(threadIdx.x); idx < R * KT / 16; idx += kCopyThreads) {
      const int r = idx / (KT / 16), k = k0 + 16 * (idx % (KT / 16));
      const int n = r0 + r < j.rows ? max(0, min(16, K - k)) : 0;
      *reinterpret_cast<uint4*>(word(r, 4 * (idx % (KT / 16)))) =
          load_bytes(j.src + (n > 0 ? int64_t(r0 + r) * j.s_row + k : 0), n);
    }
  } else {
    // Any other strides: byte loads, 4 K values per word, consecutive rows along the warp
    // (coalesced when the rows are contiguous), four words' loads issued before they are stored.
#pragma unroll 1
    for (int base = 0; base < R * KT / 4; base += 4 * kCopyThreads) {
      uint32_t v[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int idx = base + int(threadIdx.x) + w * kCopyThreads;
        const int r = idx % R, k = k0 + 4 * (idx / R);
        const bool row_in = r0 + r < j.rows;
        const uint8_t* src = j.src + (row_in ? int64_t(r0 + r) * j.s_row + int64_t(k) * j.s_k : 0);
        v[w] = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (row_in && k + e < K) v[w] |= uint32_t(src[e * j.s_k]) << (8 * e);
      }
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int idx = base + int(threadIdx.x) + w * kCopyThreads;
        *word(idx % R, idx / R) = v[w];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < R * KT / 16 / kCopyThreads; ++i) {
    const int idx = int(threadIdx.x) + i * kCopyThreads;
    const int r = idx / (KT / 16), q = idx % (KT / 16);  // 16 K values 16q .. 16q + 15 of row r
    if (r0 + r >= j.rows || k0 + 16 * q >= j.pitch) continue;
    *reinterpret_cast<uint4*>(j.dst + int64_t(r0 + r) * j.pitch + k0 + 16 * q) =
        *reinterpret_cast<const uint4*>(word(r, 4 * q));
  }
}

}  // namespace fp8gemm::sm90
