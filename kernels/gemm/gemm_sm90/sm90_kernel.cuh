#pragma once
// The Hopper FP8 block-scaled GEMM kernel (sm_90a).
//
//   out[m, n] = sum_k a[m, k] * sa[k/128, m] * b[n, k] * sb[k/128, n/128]   (bf16 out)
//
// B arrives K-major, and A K-major or M-contiguous (kAMn; the launcher makes K-major copies of
// operands that are neither).
// One CTA per SM: warpgroup 0 produces (one thread issues TMA loads of a BMx128 A tile and
// a BNx128 B tile per stage into 128-byte-swizzled shared memory), the other 2 (3 for
// 192x128, 192x144 and 64x192) consume with wgmma (e4m3 x e4m3 -> f32), each on its own
// 64-row (or, for BM = 64, column) slice. Each 128-deep K block is accumulated into a
// scratch accumulator that is then promoted into the tile accumulator with the block's
// scales (sa per row, sb per 128 columns) in fp32: this is where the block scaling happens,
// and it also bounds the error of the tensor cores' inexact FP8 accumulation. A consumer
// waits for its MMAs before promoting; the other consumers' MMAs keep the tensor cores busy
// meanwhile. For that the consumers take turns to issue their MMAs (a token passed round
// through named barriers): issued together, their MMAs would interleave in the tensor pipe,
// finish together, and all consumers would promote while it idles (NOTES-sm90.md run 19).
// Tiles of two consumer warpgroups and one chunk also keep a second scratch accumulator, so
// that a block's MMAs run while the one before is promoted (run 27).
// Bf16 results leave through 128-byte-swizzled smem boxes and TMA stores. M-contiguous A
// scales come with each stage by TMA (kSaSmem); other layouts' A scales and all B scales are
// read from global memory a few blocks ahead. The K loop is kept short (NOTES-sm90.md run 24):
// uniform-register descriptors, no runtime layout branches.
//
// Work distribution: tiles in a grouped raster, walked persistently by the grid. With
// split > 1 the CTAs of a cluster (cluster dims split x 1 x 1) share one tile and take
// consecutive K ranges, and their fp32 partials meet in shared memory (no workspace,
// deterministic): for a split of 2 on two one-chunk consumer warpgroups, each CTA pushes one
// warpgroup's partial into the other CTA (pushes_split_partials); otherwise each CTA reduces
// and stores 1/split of the tile from all CTAs' partial tiles.
#include <cuda_bf16.h>

#include <utility>

#include "sm90_ptx.cuh"
#include "wgmma_fp8.cuh"

namespace fp8gemm::sm90 {

constexpr int kBlockK = 128;  // K depth of a stage = the scale block
constexpr int kSmemLimit = 227 * 1024;

struct KernelParams {
  int M, N, K;
  int num_kb;                 // ceil(K / 128)
  int tiles_m, tiles_n, num_tiles;
  int split;                  // CTAs per cluster sharing a tile along K
  int group;                  // raster: `group` M-tiles walk the N tiles together, or with
  int group_along_n;          // group_along_n `group` N-tiles walk the M tiles
  int stream_a;               // A is read by one group of N tiles only: its loads evict first, B's last
  const float* a_scale;
  int64_t sa_kb, sa_m;
  const float* b_scale;
  int64_t sb_kb, sb_nb;
  int n_blocks;               // ceil(N / 128)
  uint16_t* out;
  int64_t out_sm, out_sn;
  int tma_store;              // out is row-major with 16-byte rows: stage in smem, TMA store
  int out_vec4;               // row-major out, 8-byte aligned rows: 4-element stores
};

// How a BM x BN tile is laid on the consumer warpgroups (TileShape below explains why); the
// host's cost model asks too.
// One producer warpgroup and 2 consumer warpgroups; 3 for BM = 192 (one per 64 rows) and for
// 64x192 (one per 64 columns): three keep the tensor pipe busier than two (NOTES-sm90.md runs
// 31d and 32).
__host__ __device__ constexpr int consumer_wgs(int bm, int bn) {
  return bm == 192 || (bm == 64 && bn == 192) ? 3 : 2;
}
// Columns per consumer warpgroup: the warpgroups split the tile's rows in 64s, then its columns.
__host__ __device__ constexpr int wg_cols(int bm, int bn) { return bn / (consumer_wgs(bm, bn) / (bm / 64)); }
// A warpgroup's columns are done in chunks (one wgmma width each): each chunk's MMAs are
// promoted before the next chunk's, so only one chunk-sized scratch accumulator is live next
// to the full tile accumulator. A whole warpgroup row is one chunk up to 128 columns (192 with
// two consumer warpgroups, which have the registers; NOTES-sm90.md run 27), else two halves.
__host__ __device__ constexpr int chunk_cols(int bm, int bn) {
  const int wn = wg_cols(bm, bn);
  return wn <= 128 || (wn <= 192 && consumer_wgs(bm, bn) == 2) ? wn : wn / 2;
}
// Split-K over 2 CTAs, for two one-chunk consumer warpgroups: each CTA finishes the tile region
// of one warpgroup, and its other warpgroup hands its partial to the peer CTA, straight into
// the peer's output staging buffer, which holds exactly one warpgroup's fp32 accumulator
// (NOTES-sm90.md run 38). Other splits sum the CTAs' partial tiles through distributed shared
// memory between two cluster barriers.
__host__ __device__ constexpr bool pushes_split_partials(int bm, int bn, int split) {
  return split == 2 && consumer_wgs(bm, bn) == 2 && chunk_cols(bm, bn) == wg_cols(bm, bn);
}

template <int BM, int BN>
struct TileShape {
  static_assert(BM == 64 || BM == 128 || BM == 192, "BM");
  static constexpr int kConsumerWGs = consumer_wgs(BM, BN);
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  static constexpr int kConsumerThreads = 128 * kConsumerWGs;
  static constexpr int kConsumerWarps = 4 * kConsumerWGs;
  // setmaxnreg budgets (multiples of 8; the sum over all threads fits the 64K registers)
  static constexpr int kProducerRegs = kConsumerWGs == 3 ? 24 : 40;
  static constexpr int kConsumerRegs = kConsumerWGs == 3 ? 160 : 232;
  static constexpr int kWgM = BM / 64;                 // consumer warpgroups along M
  static constexpr int kWgN = kConsumerWGs / kWgM;     // consumer warpgroups along N
  static constexpr int kWN = wg_cols(BM, BN);
  static_assert(kWN == BN / kWgN, "warpgroup columns");
  static_assert(kWN == 64 || kWN == 72 || kWN == 96 || kWN == 128 || kWN == 144 || kWN == 192 || kWN == 256,
                "warpgroup tile width");
  static constexpr int kChunkN = chunk_cols(BM, BN);
  static constexpr int kChunks = kWN / kChunkN;
  // Consumers take turns issuing their MMAs (see the header); measured to help the one-chunk
  // tiles and to hurt the two-chunk ones (NOTES-sm90.md run 19).
  static constexpr bool kTakeTurns = kConsumerWGs > 1 && kChunks == 1;
  // One-chunk tiles whose registers hold a second scratch accumulator overlap a block's
  // promotion with the next block's MMAs (NOTES-sm90.md run 27).
  static constexpr bool kOverlap = kChunks == 1 && kConsumerWGs == 2 && kWN <= 128;
  // B scales come per 128 columns. Chunks that do not divide 128 may straddle a boundary;
  // then a warpgroup's kWN columns (which start at multiples of gcd(BN, kWN, 128)) span at
  // most 2 scale blocks: it loads both and uses one per 8-column fragment group, which one
  // being fixed at compile time per crossing class (below).
  static constexpr bool kCross = 128 % kChunkN != 0;
  static constexpr int gcd3(int a, int b, int c) {
    while (b) { const int t = a % b; a = b; b = t; }
    while (c) { const int t = a % c; a = c; c = t; }
    return a;
  }
  static_assert(!kCross || kWN + 128 - gcd3(BN, kWN, 128) <= 256, "a warpgroup row spans at most 2 B scale blocks");
  // Crossing classes: a warpgroup's first column lies at a multiple of kColStep in its B scale
  // block. Positions where every chunk crosses into the next block at the same fragment group
  // (first_hi_group: the chunk's groups before the boundary) form one class; the K loop is
  // compiled once per class, so that no group selects its scales at run time (NOTES-sm90.md
  // run 32).
  static constexpr int kColStep = gcd3(BN, kWN, 128);
  __host__ __device__ static constexpr int first_hi_group(int col_in_block, int c) {
    const int h = (128 - col_in_block - c * kChunkN) / 8;
    return h < 0 ? 0 : h > kChunkN / 8 ? kChunkN / 8 : h;
  }
  __host__ __device__ static constexpr bool same_crossings(int x, int y) {
    for (int c = 0; c < kChunks; ++c)
      if (first_hi_group(x, c) != first_hi_group(y, c)) return false;
    return true;
  }
  __host__ __device__ static constexpr bool is_class_rep(int x) {  // the first position of its class
    for (int y = 0; y < x; y += kColStep)
      if (same_crossings(x, y)) return false;
    return true;
  }
  // Output staging: 64x64 boxes with 128-byte swizzle when the chunk is a multiple of 64
  // columns, else one unswizzled box of 64 x kChunkN.
  static constexpr bool kSwizzledOut = kChunkN % 64 == 0;
  static constexpr int kStageBytes = (BM + BN) * kBlockK;
  static constexpr int kOutBytes = kConsumerWGs * 64 * kChunkN * 2;  // bf16 staging, a chunk per warpgroup
  static constexpr int kBarrierBytes = 256;
  static constexpr int kStagesFit = (kSmemLimit - 1024 - kOutBytes - kBarrierBytes) / kStageBytes;
  static constexpr int kStagesMax = kStagesFit < 8 ? kStagesFit : 8;
  // Room for each stage's BM A scales (a_scale M-contiguous): tiles with 5 or more stages give
  // up one for them (loaded with the operands, they never stall a consumer; NOTES run 19).
  static constexpr bool kScalesFitMax = 1024 + kStagesMax * (kStageBytes + BM * 4) + kOutBytes + kBarrierBytes <= kSmemLimit;
  static constexpr int kStages = !kScalesFitMax && kStagesMax >= 5 ? kStagesMax - 1 : kStagesMax;
  static constexpr int kScaleBytes = kStages * BM * 4;
  static constexpr bool kScalesFit =
      1024 + kStages * kStageBytes + kOutBytes + kBarrierBytes + kScaleBytes <= kSmemLimit;
  static constexpr int kSmemBytes =
      1024 + kStages * kStageBytes + kOutBytes + kBarrierBytes + (kScalesFit ? kScaleBytes : 0);
  static constexpr int kRedStride = BN + 4;  // fp32 partial-tile row stride (split-K)
  static constexpr bool kPushSplit = pushes_split_partials(BM, BN, 2);
  static_assert(!kPushSplit || kOutBytes == 64 * kWN * 4, "a pushed partial fills the staging buffer");
  static_assert(BM * kRedStride * 4 <= kStages * kStageBytes + kOutBytes, "split-K buffer");
  static_assert(kStages >= 2, "stages");
};

// Tile t's coordinates. Only kernels that may group along N (kMayGroupAlongN) carry that
// branch: the extra code cost the other tiles 1-4% (NOTES-sm90.md run 33).
template <bool kMayGroupAlongN>
__device__ __forceinline__ void tile_coords(const KernelParams& p, int t, int& mb, int& nb) {
  const bool along_n = kMayGroupAlongN && p.group_along_n;
  const int across = along_n ? p.tiles_n : p.tiles_m;  // tiles along the grouped side
  const int along = along_n ? p.tiles_m : p.tiles_n;
  const int per_group = p.group * along;
  const int g = t / per_group;
  const int first = g * p.group;
  const int width = min(across - first, p.group);
  const int r = t - g * per_group;
  const int inside = first + r % width, walked = r / width;
  mb = along_n ? walked : inside;
  nb = along_n ? inside : walked;
}

// acc[4j + {0,1}] += pt[4j + {0,1}] * u0 and acc[4j + {2,3}] += pt[4j + {2,3}] * u1 (the two
// fragment rows), where (u0, u1) = (s0, s1) for the columns before 8 * `first_hi_group` and
// (t0, t1) from there (a chunk that straddles two B scale blocks). Inline PTX, ordered after
// the preceding wgmma wait: the compiler must not read wgmma results before it.
template <int N>
__device__ __forceinline__ void promote_regs_cross(float (&acc)[N], const float (&pt)[N], float s0, float s1,
                                                   float t0, float t1, int first_hi_group) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    const bool hi = j >= first_hi_group;
    const float u0 = hi ? t0 : s0, u1 = hi ? t1 : s1;
    asm volatile(
        "fma.rn.f32 %0, %4, %8, %0;\n"
        "fma.rn.f32 %1, %5, %8, %1;\n"
        "fma.rn.f32 %2, %6, %9, %2;\n"
        "fma.rn.f32 %3, %7, %9, %3;"
        : "+f"(acc[4 * j]), "+f"(acc[4 * j + 1]), "+f"(acc[4 * j + 2]), "+f"(acc[4 * j + 3])
        : "f"(pt[4 * j]), "f"(pt[4 * j + 1]), "f"(pt[4 * j + 2]), "f"(pt[4 * j + 3]), "f"(u0), "f"(u1));
  }
}

// f(std::integral_constant<int, x>{}) for the representative position x of the crossing
// class of col_in_block (TileShape); tiles that never cross have the one class of x = 0.
template <class T, int Q, class F>
__device__ __forceinline__ bool call_if_class(int col_in_block, F& f) {
  constexpr int x = Q * T::kColStep;
  if constexpr (T::is_class_rep(x)) {
    if (T::same_crossings(col_in_block, x)) {
      f(std::integral_constant<int, x>{});
      return true;
    }
  }
  return false;
}
template <class T, class F, int... Q>
__device__ __forceinline__ void call_for_class(int col_in_block, F& f, std::integer_sequence<int, Q...>) {
  (void)(call_if_class<T, Q>(col_in_block, f) || ...);
}
template <class T, class F>
__device__ __forceinline__ void with_crossing_class(int col_in_block, F& f) {
  if constexpr (T::kCross)
    call_for_class<T>(col_in_block, f, std::make_integer_sequence<int, 128 / T::kColStep>{});
  else
    f(std::integral_constant<int, 0>{});
}

// One scale pair for the whole chunk.
template <int N>
__device__ __forceinline__ void promote_regs(float (&acc)[N], const float (&pt)[N], float s0, float s1) {
  promote_regs_cross(acc, pt, s0, s1, s0, s1, N / 4);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint16_t to_bf16(float x) {
  __nv_bfloat16 v = __float2bfloat16_rn(x);
  return *reinterpret_cast<uint16_t*>(&v);
}

// Split-K: this CTA's part of a tile summed over the `split` CTAs of its cluster, whose fp32
// partial tiles (kCols wide, rows kRowStride floats apart) lie at `red` in each one's shared
// memory. Thread ct of kThreads sums the float4 items lo + ct + i * kThreads below hi, in
// row-major order. All loads from one CTA are issued before any is summed, and the CTAs are
// summed in rank order, so the result is deterministic.
template <int kCols, int kRowStride, int kThreads, int kIters>
__device__ __forceinline__ void sum_cluster_partials(float4 (&sum)[kIters], const float* red, int split, int lo,
                                                     int hi, int ct) {
#pragma unroll
  for (int i = 0; i < kIters; ++i) sum[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int q = 0; q < split; ++q) {
    const float* peer = dsmem_ptr(red, q);
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int f = lo + ct + i * kThreads;
      if (f >= hi) break;
      const int r = f / (kCols / 4), c = (f % (kCols / 4)) * 4;
      const float4 v = *reinterpret_cast<const float4*>(peer + r * kRowStride + c);
      sum[i].x += v.x;
      sum[i].y += v.y;
      sum[i].z += v.z;
      sum[i].w += v.w;
    }
  }
}

// ---------------- consumers ----------------
// kSaSmem: the A scales come with each stage (TMA); else from global memory.
// kAMn: A arrives M-contiguous (the challenge layout) and is transposed on its way into the
// MMAs' registers (a_fragments below); else A is K-major and the MMAs read it from shared memory.
template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
__device__ __forceinline__ void consumer(const CUtensorMap& map_c, const KernelParams& p, uint8_t* smem,
                                         uint64_t* full, uint64_t* empty, uint64_t* xfer, const float* smem_sa,
                                         int unit, int unit_stride, int rank, int kb_begin, int kb_end) {
  using T = TileShape<BM, BN>;
  constexpr int kWN = T::kWN;
  constexpr int kStages = T::kStages;
  uint8_t* smem_a = smem;
  uint8_t* smem_b = smem_a + kStages * BM * kBlockK;
  uint8_t* smem_c = smem_b + kStages * BN * kBlockK;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = threadIdx.x % 32;

  regs_increase<T::kConsumerRegs>();
  // Read from lane 0, so that the compiler knows it is the same across the warp: what
  // derives from it (the MMAs' shared-memory descriptors, barrier ids) stays in uniform
  // registers instead of being moved there before every MMA.
  const int ci = __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0) - 1;
  const int wg_m = ci % T::kWgM;
  const int wg_n = ci / T::kWgM;
  constexpr int kChunkN = T::kChunkN, kChunks = T::kChunks;
  constexpr int kSc = T::kCross ? 4 : 2 + kChunks;
  // kAMn adds the A fragments of the two blocks in flight: no room for them next to three
  // 128-wide accumulators (ptxas spilled 150 bytes).
  constexpr bool kOverlap = T::kOverlap && !(kAMn && kChunkN == 128);
  float acc[kWN / 2];

  // Descriptors of stage 0 (low words); a stage is kStageDescA/B further.
  const uint32_t desc_a0 = smem_desc_lo(smem_addr(smem_a + wg_m * 64 * kBlockK));
  const uint32_t desc_b0 = smem_desc_lo(smem_addr(smem_b + wg_n * kWN * kBlockK));
  constexpr uint32_t kStageDescA = BM * kBlockK / 16, kStageDescB = BN * kBlockK / 16;
  constexpr uint32_t kChunkDescB = kChunkN * kBlockK / 16;
  // The accumulator rows of this thread among the warpgroup's 64: frag_row and frag_row +
  // kRowStep. The MMAs' fragment rows are lane / 4 and lane / 4 + 8 of the warp's 16; with kAMn
  // they hold A's rows 2 (lane / 4) and 2 (lane / 4) + 1 (see a_fragments).
  constexpr int kRowStep = kAMn ? 1 : 8;
  const int frag_row = warp * 16 + (kAMn ? 2 * (lane / 4) : lane / 4);
  const float* my_sa = smem_sa + wg_m * 64 + frag_row;

  // kAMn: a stage's A is a [128 K][128 M] box with the 128-byte swizzle (the 16-byte chunk c of
  // K row k lies at c ^ k % 8) for rows 0-127 of the tile, and a [128 K][64 M] box with the
  // 64-byte swizzle (c at c ^ (k / 2) % 4) for rows 128-191 or for BM = 64. ldmatrix.trans reads
  // 16-bit elements, i.e. pairs of M rows: matrix 2s + p of the x4 load for K slice kk gives
  // lane (g = lane / 4, t = lane % 4) rows 2g and 2g + 1 of its warp's 16 at K = 32 kk + 16 s +
  // 4 t + 2 (p ^ t / 2) and the K after it. Each matrix's eight K rows then differ mod 8 and lie
  // in different banks. Two byte permutes per pair of matrices make the wgmma fragment words
  // (4 K values of one row).
  uint32_t a_lane_addr = 0, a_row_bytes = 0, a_sel_even = 0, a_sel_odd = 0;
  if constexpr (kAMn) {
    const int i = lane / 8, j = lane % 8, s = i / 2, pm = i % 2, tr = j / 2;
    const int k = 16 * s + 4 * tr + 2 * (pm ^ (tr / 2)) + j % 2;
    const uint32_t a0 = smem_addr(smem_a);
    if (BM >= 128 && wg_m < 2) {
      a_row_bytes = 128;
      a_lane_addr = a0 + k * 128 + (((wg_m * 4 + warp) ^ (k % 8)) << 4);
    } else {
      a_row_bytes = 64;
      a_lane_addr = a0 + (BM == 64 ? 0 : 128 * kBlockK) + k * 64 + ((warp ^ ((k / 2) % 4)) << 4);
    }
    const bool swapped = (lane % 4) / 2;  // this lane's first K pair came in matrix 2s + 1
    a_sel_even = swapped ? 0x2064 : 0x6420;
    a_sel_odd = swapped ? 0x3175 : 0x7531;
  }
  auto a_fragments = [&](uint32_t(&fr)[4][4], int st) {
#pragma unroll
    for (int kk = 0; kk < kBlockK / 32; ++kk) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, a_lane_addr + st * BM * kBlockK + kk * 32 * a_row_bytes);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        fr[kk][2 * s] = __byte_perm(r[2 * s], r[2 * s + 1], a_sel_even);
        fr[kk][2 * s + 1] = __byte_perm(r[2 * s], r[2 * s + 1], a_sel_odd);
      }
    }
  };

  // Turns: consumer ci issues a batch of MMAs after consumer ci - 1 issued its own. The last
  // consumer hands consumer 0 its first token here and consumer 0 takes the final one back
  // at the end, so every batch waits for its token.
  constexpr int kTurnBarrier = 5;  // ids 5.. (1: split-K, 2..4: epilogue staging)
  constexpr int kTurnThreads = 256;
  if (T::kTakeTurns && ci == T::kConsumerWGs - 1) named_barrier_arrive(kTurnBarrier, kTurnThreads);

  // Split-K with kPushSplit: warpgroup `rank` finishes its region of each tile here; the other
  // one's partial goes to the peer CTA, into its staging buffer, with st.async counted on the
  // peer's xfer[0]. The peer arrives on our xfer[1] once the buffer is free again. Every
  // partial sent is acknowledged, also the last one, so that no CTA leaves while the other
  // may still write into its shared memory or arrive on its barriers.
  const bool push_split = kSplit && pushes_split_partials(BM, BN, p.split);
  const bool finisher = ci == rank;
  const uint32_t peer = rank ^ 1;  // its addresses are mapped where used: held across the K loop, they spill
  uint32_t xfer_phase = 0;
  bool sent = false, peer_ready = false;

  int stage = 0;
  uint32_t phase = 0;
  for (int t = unit; t < p.num_tiles; t += unit_stride) {
    int mb, nb;
    tile_coords<BM == 192>(p, t, mb, nb);
    const int m0 = mb * BM, n0 = nb * BN;
    const int row0 = m0 + wg_m * 64 + frag_row;
    const int col0 = n0 + wg_n * kWN;  // first column of this warpgroup

    // Where the scales of the next block to load are; each load moves them one block on.
    const float* sa_next[2] = {};
    if constexpr (!kSaSmem) {
      sa_next[0] = p.a_scale + int64_t(min(row0, p.M - 1)) * p.sa_m + int64_t(kb_begin) * p.sa_kb;
      sa_next[1] = p.a_scale + int64_t(min(row0 + kRowStep, p.M - 1)) * p.sa_m + int64_t(kb_begin) * p.sa_kb;
    }
    const float* sb_next[kSc - 2];
#pragma unroll
    for (int c = 0; c < kSc - 2; ++c)
      sb_next[c] = p.b_scale + int64_t(min(col0 / 128 + (T::kCross ? c : c * kChunkN / 128), p.n_blocks - 1)) * p.sb_nb +
                   int64_t(kb_begin) * p.sb_kb;

    // The K loop, compiled once per crossing class (TileShape): the position of the warpgroup's
    // first column in its B scale block is a constant in it, so is every fragment group's scale.
    auto k_loop = [&](auto col_in_block) {
      [[maybe_unused]] constexpr int kColInBlock = decltype(col_in_block)::value;
      float part[kChunkN / 2];  // scratch accumulator of one chunk
#pragma unroll
      for (int i = 0; i < kWN / 2; ++i) acc[i] = 0.f;
#pragma unroll
      for (int i = 0; i < kChunkN / 2; ++i) part[i] = 0.f;

      // Scales of the next block: sc = {sa fragment row 0, sa fragment row 1, sb of each chunk},
      // or with kCross {.., sb of the block of the warpgroup's first column, sb of the next}.
      auto load_scales = [&](float(&sc)[kSc]) {
        if constexpr (!kSaSmem) {
          sc[0] = __ldg(sa_next[0]);
          sc[1] = __ldg(sa_next[1]);
          sa_next[0] += p.sa_kb;
          sa_next[1] += p.sa_kb;
        }
#pragma unroll
        for (int c = 0; c < kSc - 2; ++c) {
          sc[2 + c] = __ldg(sb_next[c]);
          sb_next[c] += p.sb_kb;
        }
      };
      auto chunk_acc = [&](int c) -> float(&)[kChunkN / 2] {
        return *reinterpret_cast<float(*)[kChunkN / 2]>(acc + c * (kChunkN / 2));
      };
      // Scales are loaded kAhead blocks ahead: their global loads queue behind the operand
      // traffic and took longer than two blocks (ncu, NOTES run 19). 192x144 and the 192-wide
      // chunk of 128x192 have not the registers for it.
      constexpr int kAhead = (T::kConsumerWGs == 3 && kChunks == 2) || kChunkN == 192 ? 2 : 4;
      float scales[kAhead][kSc];

      auto promote_chunk = [&](int c, const float(&pt)[kChunkN / 2], float sa0, float sa1, const float(&sc)[kSc]) {
        if constexpr (T::kCross) {
          promote_regs_cross(chunk_acc(c), pt, sa0 * sc[2], sa1 * sc[2], sa0 * sc[3], sa1 * sc[3],
                             T::first_hi_group(kColInBlock, c));
        } else {
          promote_regs(chunk_acc(c), pt, sa0 * sc[2 + c], sa1 * sc[2 + c]);
        }
      };
      // fr: with kAMn, this block's A fragments (a_fragments); unused otherwise.
      auto issue_mmas = [&](float(&pt)[kChunkN / 2], int st, int c, const uint32_t(&fr)[4][4]) {
        [[maybe_unused]] const uint32_t da = desc_a0 + st * kStageDescA;  // K-major A only
        const uint32_t db = desc_b0 + st * kStageDescB + c * kChunkDescB;
        if constexpr (T::kTakeTurns) named_barrier(kTurnBarrier + ci, kTurnThreads);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 32; ++kk) {
          if constexpr (kAMn)
            wgmma_fp8_rs<kChunkN>(pt, fr[kk], smem_desc_k128_sw128(db + 2 * kk), kk);
          else
            wgmma_fp8<kChunkN>(pt, smem_desc_k128_sw128(da + 2 * kk), smem_desc_k128_sw128(db + 2 * kk), kk);
        }
        wgmma_commit();
        if constexpr (T::kTakeTurns) named_barrier_arrive(kTurnBarrier + (ci + 1) % T::kConsumerWGs, kTurnThreads);
      };
      auto next_stage = [&] {
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      };

      // One block alone: MMAs chunk after chunk into `part`, wait, promote into `acc`.
      auto step = [&](int i, int kb) {  // block kb, its scales in scales[i]
        const float(&sc)[kSc] = scales[i];
        float sa0 = sc[0], sa1 = sc[1];
        mbar_wait(&full[stage], phase);
        if constexpr (kSaSmem) {  // this stage's A scales, read before the stage is released
          sa0 = my_sa[stage * BM];
          sa1 = my_sa[stage * BM + kRowStep];
        }
        uint32_t fr[4][4];
        if constexpr (kAMn) a_fragments(fr, stage);
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          issue_mmas(part, stage, c, fr);
          wgmma_wait<0>();
          if (c == kChunks - 1 && lane == 0) mbar_arrive(&empty[stage]);  // the stage is free
          promote_chunk(c, part, sa0, sa1, sc);
        }
        next_stage();
        if (kb + kAhead < kb_end) load_scales(scales[i]);
      };

#pragma unroll
      for (int i = 0; i < kAhead; ++i)
        if (kb_begin + i < kb_end) load_scales(scales[i]);
      int kb = kb_begin;
      if constexpr (kOverlap) {
        // Whole groups of kAhead blocks with two scratch accumulators: block i + 1's MMAs run
        // while block i is promoted. A group ends with nothing in flight and has no runtime
        // branches: otherwise ptxas serialises every wgmma (C7514). The rest goes block by block.
        float part2[kChunkN / 2];
        auto buf = [&](int i) -> float(&)[kChunkN / 2] { return i % 2 == 0 ? part : part2; };
        uint32_t frs[2][4][4];  // kAMn: the A fragments of the two blocks in flight
        for (; kb + kAhead <= kb_end; kb += kAhead) {
          int st[2] = {};
          float sa[2][2] = {};
          auto finish = [&](int i) {  // block kb + i: its MMAs are done; release and promote
            if (lane == 0) mbar_arrive(&empty[st[i % 2]]);
            promote_chunk(0, buf(i), sa[i % 2][0], sa[i % 2][1], scales[i]);
            if (kb + i + kAhead < kb_end) load_scales(scales[i]);
          };
#pragma unroll
          for (int i = 0; i < kAhead; ++i) {
            mbar_wait(&full[stage], phase);
            st[i % 2] = stage;
            if constexpr (kSaSmem) {
              sa[i % 2][0] = my_sa[stage * BM];
              sa[i % 2][1] = my_sa[stage * BM + kRowStep];
            } else {
              sa[i % 2][0] = scales[i][0];
              sa[i % 2][1] = scales[i][1];
            }
            if constexpr (kAMn) a_fragments(frs[i % 2], stage);
            issue_mmas(buf(i), stage, 0, frs[i % 2]);
            next_stage();
            if (i > 0) {
              wgmma_wait<1>();
              finish(i - 1);
            }
          }
          wgmma_wait<0>();
          finish(kAhead - 1);
        }
      }
      for (; kb < kb_end; kb += kAhead)
#pragma unroll
        for (int i = 0; i < kAhead; ++i) {
          if (kb + i >= kb_end) break;
          step(i, kb + i);
        }
    };
    with_crossing_class<T>(col0 % 128, k_loop);

    // Fragment position of acc[4j + 2h + e]: row frag_row + kRowStep h, col 8j + frag_col + e.
    const int frag_col = 2 * (lane % 4);

    if (push_split) {
      if (!peer_ready) {  // the peer's barriers are initialised
        cluster_wait();
        peer_ready = true;
      }
      if (!finisher) {
        if (sent) {  // the peer took the previous one
          mbar_wait(&xfer[1], xfer_phase);
          xfer_phase ^= 1;
        }
        sent = true;
#pragma unroll
        for (int i = 0; i < kWN / 8; ++i)
          st_async_16(cluster_smem_addr(smem_c, peer) + (i * 128 + tid) * 16,
                      make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]),
                      cluster_smem_addr(&xfer[0], peer));
        continue;
      }
      if (tid == 0) mbar_arrive_expect_tx(&xfer[0], T::kOutBytes);
      mbar_wait(&xfer[0], xfer_phase);
      xfer_phase ^= 1;
      const float4* part = reinterpret_cast<const float4*>(smem_c) + tid;
#pragma unroll
      for (int i = 0; i < kWN / 8; ++i) {
        const float4 v = part[i * 128];
        acc[4 * i] += v.x;
        acc[4 * i + 1] += v.y;
        acc[4 * i + 2] += v.z;
        acc[4 * i + 3] += v.w;
      }
    }
    if (kSplit && !push_split) {
      // ---- split-K: partial tiles meet in distributed shared memory ----
      named_barrier(1, T::kConsumerThreads);  // all consumers are done with the stage buffers
      float* red = reinterpret_cast<float*>(smem);
#pragma unroll
      for (int j = 0; j < kWN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wg_m * 64 + frag_row + kRowStep * h;
          const int c = wg_n * kWN + 8 * j + frag_col;
          *reinterpret_cast<float2*>(&red[r * T::kRedStride + c]) =
              make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }
      cluster_sync_all();
      // This CTA reduces and stores float4 items [lo, hi) of the tile, 1/split of it.
      constexpr int kItems = BM * BN / 4;
      constexpr int kStride = T::kConsumerThreads;
      constexpr int kMaxIters = (kItems / 2 + kStride - 1) / kStride;  // split >= 2
      const int lo = rank * kItems / p.split, hi = (rank + 1) * kItems / p.split;
      const int ct = threadIdx.x - 128;
      float4 sum[kMaxIters];
      sum_cluster_partials<BN, T::kRedStride, kStride>(sum, red, p.split, lo, hi, ct);
#pragma unroll
      for (int i = 0; i < kMaxIters; ++i) {
        const int f = lo + ct + i * kStride;
        if (f >= hi) break;
        const int r = f / (BN / 4), c = (f % (BN / 4)) * 4;
        const int gr = m0 + r, gc = n0 + c;
        if (gr >= p.M) continue;
        const float4 s = sum[i];
        uint16_t* o = p.out + int64_t(gr) * p.out_sm;
        if (p.out_vec4 && gc + 3 < p.N) {
          *reinterpret_cast<uint2*>(o + gc) = make_uint2(pack_bf16(s.x, s.y), pack_bf16(s.z, s.w));
        } else {
          const float e[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
          for (int k = 0; k < 4; ++k)
            if (gc + k < p.N) o[int64_t(gc + k) * p.out_sn] = to_bf16(e[k]);
        }
      }
      cluster_sync_all();  // no CTA reuses its buffer (or leaves) while others read it
    } else if (p.tma_store) {
      // ---- per chunk: bf16 into 128-byte-swizzled smem boxes of 64x64, TMA store ----
      uint8_t* cbuf = smem_c + ci * 64 * kChunkN * 2;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        if (tid == 0) tma_store_wait_read();  // the previous store has left cbuf
        named_barrier(2 + ci, 128);
        // With kAMn a warp's fragment rows are 2 (lane / 4) (+ 1): the upper half warp stores its
        // odd row first, so that each store covers all eight rows mod 8 (with the 128-byte swizzle,
        // eight different 16-byte chunks) and not four of them twice (2-way bank conflicts; with
        // the row-major box, 8-way instead of 4-way: NOTES-sm90.md run 35).
        const int h_first = kRowStep == 1 ? lane / 16 : 0;
#pragma unroll
        for (int j = 0; j < kChunkN / 8; ++j) {
          const float* a = acc + c * (kChunkN / 2) + 4 * j;
          const uint32_t row_words[2] = {pack_bf16(a[0], a[1]), pack_bf16(a[2], a[3])};
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int h = i ^ h_first;
            const int r = frag_row + kRowStep * h;
            uint8_t* dst;
            if constexpr (T::kSwizzledOut) {
              const int chunk16 = (j % 8) ^ (r % 8);
              dst = cbuf + (j / 8) * 8192 + r * 128 + chunk16 * 16 + (lane % 4) * 4;
            } else {  // one row-major 64 x kChunkN box
              dst = cbuf + r * (kChunkN * 2) + j * 16 + (lane % 4) * 4;
            }
            *reinterpret_cast<uint32_t*>(dst) = h ? row_words[1] : row_words[0];
          }
        }
        fence_proxy_async_smem();
        named_barrier(2 + ci, 128);
        if (tid == 0) {
          if constexpr (T::kSwizzledOut) {
#pragma unroll
            for (int box = 0; box < kChunkN / 64; ++box)
              tma_store_2d(&map_c, cbuf + box * 8192, n0 + wg_n * kWN + c * kChunkN + box * 64, m0 + wg_m * 64);
          } else {
            tma_store_2d(&map_c, cbuf, n0 + wg_n * kWN + c * kChunkN, m0 + wg_m * 64);
          }
          tma_store_commit();
        }
      }
      // The peer may send the next partial once the store has read the buffer. The arrive has the
      // default .release.cta semantics: the shared-memory reads it must order before the peer's
      // next writes have completed (their values were used before the named barrier above).
      if (push_split && tid == 0) {
        tma_store_wait_read();
        mbar_arrive_remote(cluster_smem_addr(&xfer[1], peer));
      }
    } else {
      // ---- any other output layout: element stores ----
#pragma unroll
      for (int j = 0; j < kWN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int gr = m0 + wg_m * 64 + frag_row + kRowStep * h;
          const int gc = n0 + wg_n * kWN + 8 * j + frag_col;
          if (gr >= p.M) continue;
          uint16_t* o = p.out + int64_t(gr) * p.out_sm;
          if (gc < p.N) o[int64_t(gc) * p.out_sn] = to_bf16(acc[4 * j + 2 * h]);
          if (gc + 1 < p.N) o[int64_t(gc + 1) * p.out_sn] = to_bf16(acc[4 * j + 2 * h + 1]);
        }
      if (push_split) {  // every thread has read its part of the peer's partial
        named_barrier(2 + ci, 128);
        if (tid == 0) mbar_arrive_remote(cluster_smem_addr(&xfer[1], peer));
      }
    }
  }
  if (push_split && sent) mbar_wait(&xfer[1], xfer_phase);
  if (T::kTakeTurns && ci == 0) named_barrier(kTurnBarrier, kTurnThreads);  // the last consumer's final token
  if (p.tma_store && tid == 0) tma_store_wait_all();
}

// kSaSmem: the A scales are M-contiguous and TMA brings each stage's BM of them.
// kAMn: A is M-contiguous; map_a's boxes are min(BM, 128) M x 128 K, map_a_tail's (BM = 192)
// 64 M x 128 K for the tile's last 64 rows (see consumer).
// kSplit: p.split > 1 (clusters share tiles along K); the other kernels carry no split-K code.
template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
__global__ void __launch_bounds__(TileShape<BM, BN>::kThreads, 1)
    fp8_gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_a_tail,
                         const __grid_constant__ CUtensorMap map_b, const __grid_constant__ CUtensorMap map_c,
                         const __grid_constant__ CUtensorMap map_sa, const KernelParams p) {
  using T = TileShape<BM, BN>;
  static_assert(!kSaSmem || T::kScalesFit, "no room for the A scales");
  static_assert(!kAMn || kSaSmem, "M-contiguous A comes with its scales in shared memory");
  constexpr int kStages = T::kStages;

  // 1024-byte aligned by an offset (not through an integer), so that the compiler still
  // knows every pointer below is shared memory and uses shared loads and stores.
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* smem_a = smem;
  uint8_t* smem_b = smem_a + kStages * BM * kBlockK;
  uint8_t* smem_c = smem_b + kStages * BN * kBlockK;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_c + T::kOutBytes);
  uint64_t* empty = full + kStages;
  uint64_t* xfer = empty + kStages;  // with kPushSplit: [0] the peer's partial came, [1] the peer took ours
  float* smem_sa = reinterpret_cast<float*>(smem_c + T::kOutBytes + T::kBarrierBytes);  // if kSaSmem

  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = threadIdx.x % 32;

  int unit = blockIdx.x, unit_stride = gridDim.x, rank = 0;
  if (kSplit) {
    unit = cluster_id_x();
    unit_stride = cluster_count_x();
    rank = cluster_rank();
  }
  const int kb_begin = kSplit ? rank * p.num_kb / p.split : 0;
  const int kb_end = kSplit ? (rank + 1) * p.num_kb / p.split : p.num_kb;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], T::kConsumerWarps);
    }
    if (kSplit) {
      mbar_init(&xfer[0], 1);
      mbar_init(&xfer[1], 1);
    }
    mbar_fence_init();
    tma_prefetch_desc(&map_a);
    tma_prefetch_desc(&map_b);
    if (p.tma_store) tma_prefetch_desc(&map_c);
    if (kSaSmem) tma_prefetch_desc(&map_sa);
    if (kAMn && BM == 192) tma_prefetch_desc(&map_a_tail);
  }
  __syncthreads();
  // The peer may arrive on our barriers once they are initialised (see the consumers).
  if (kSplit && pushes_split_partials(BM, BN, p.split)) cluster_arrive_relaxed();
  // Launched right after the operand copy (programmatic dependent launch): everything above
  // overlaps the copy's tail; nothing below reads or writes global memory before it is done.
  // Without that launch attribute this returns at once.
  asm volatile("griddepcontrol.wait;" ::: "memory");

  if (wg == 0) {
    // ---------------- producer ----------------
    regs_decrease<T::kProducerRegs>();
    // Only the 192-row kernels carry the hinted loads (see tile_coords).
    const bool stream_a = BM == 192 && p.stream_a;
    const uint64_t first = stream_a ? l2_evict_first_policy() : 0, last = stream_a ? l2_evict_last_policy() : 0;
    int stage = 0;
    uint32_t phase = 0;
    for (int t = unit; t < p.num_tiles; t += unit_stride) {
      if (warp == 0 && lane == 0) {
        int mb, nb;
        tile_coords<BM == 192>(p, t, mb, nb);
        for (int kb = kb_begin; kb < kb_end; ++kb) {
          mbar_wait(&empty[stage], phase ^ 1);
          mbar_arrive_expect_tx(&full[stage], T::kStageBytes + (kSaSmem ? BM * 4 : 0));
          uint8_t* const dst_a = smem_a + stage * BM * kBlockK;
          uint8_t* const dst_b = smem_b + stage * BN * kBlockK;
          auto load_a = [&](void* dst, const CUtensorMap* map, int c0, int c1) {
            if (stream_a)
              tma_load_2d_hint(dst, map, &full[stage], c0, c1, first);
            else
              tma_load_2d(dst, map, &full[stage], c0, c1);
          };
          if constexpr (kAMn) {
            load_a(dst_a, &map_a, mb * BM, kb * kBlockK);
            if constexpr (BM == 192) load_a(dst_a + 128 * kBlockK, &map_a_tail, mb * BM + 128, kb * kBlockK);
          } else {
            load_a(dst_a, &map_a, kb * kBlockK, mb * BM);
          }
          if (kSaSmem) tma_load_2d(smem_sa + stage * BM, &map_sa, &full[stage], mb * BM, kb);
          if (stream_a)
            tma_load_2d_hint(dst_b, &map_b, &full[stage], kb * kBlockK, nb * BN, last);
          else
            tma_load_2d(dst_b, &map_b, &full[stage], kb * kBlockK, nb * BN);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      if (kSplit && !pushes_split_partials(BM, BN, p.split)) {  // the consumers' two cluster barriers
        cluster_sync_all();
        cluster_sync_all();
      }
    }
  } else {
    consumer<BM, BN, kSaSmem, kAMn, kSplit>(map_c, p, smem, full, empty, xfer, smem_sa, unit, unit_stride, rank,
                                            kb_begin, kb_end);
  }
}

// ---- K-major copies of operands that TMA cannot read as they are ------------------------
// One operand to copy: `rows` x K bytes with any strides, into a K-contiguous buffer whose
// rows are `pitch` bytes apart (a multiple of 16).
struct CopyJob {
  const uint8_t* src;
  int64_t s_row, s_k;
  int rows;
  uint8_t* dst;
  int64_t pitch;
  int tiles_rows;  // ceil(rows / kCopyRows)
  int tiles;       // tiles_rows * ceil(K / kCopyK)
  int vec;         // rows contiguous, 16-byte aligned columns: 16-byte loads
};
struct CopyJobs {
  CopyJob job[2];  // job[1] may be empty (tiles == 0)
};
constexpr int kCopyRows = 128, kCopyK = 128, kCopyThreads = 256;

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
// the GEMM waits with griddepcontrol.wait before touching global memory).
template <int R, int KT>
__global__ void __launch_bounds__(kCopyThreads) to_k_major_kernel(const __grid_constant__ CopyJobs jobs, int K) {
  static_assert(R % 128 == 0 && KT % 128 == 0 && (R * KT / 64) % kCopyThreads == 0, "copy tile");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  __shared__ __align__(16) uint32_t tile[R * KT / 4];
  auto word = [&](int r, int kw) -> uint32_t* { return &tile[r * (KT / 4) + (kw ^ (4 * ((r / 16) % 8)))]; };
  const int second = int(blockIdx.x) >= jobs.job[0].tiles;
  const CopyJob& j = jobs.job[second];
  const int t = int(blockIdx.x) - (second ? jobs.job[0].tiles : 0);
  const int r0 = (t % j.tiles_rows) * R, k0 = (t / j.tiles_rows) * KT;
  if (j.vec) {
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
  } else {
    const bool k_inner = j.s_k == 1;  // walk the source along its contiguous dimension
    for (int idx = threadIdx.x; idx < R * KT; idx += kCopyThreads) {
      const int r = k_inner ? idx / KT : idx % R;
      const int k = k_inner ? idx % KT : idx / R;
      reinterpret_cast<uint8_t*>(word(r, k / 4))[k % 4] =
          (r0 + r < j.rows && k0 + k < K) ? j.src[int64_t(r0 + r) * j.s_row + int64_t(k0 + k) * j.s_k] : 0;
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
