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
// meanwhile. For that the consumers of the one-chunk tiles of 128 or 192 rows and of 64x192 take
// turns to issue their MMAs (a token passed round through named barriers): issued together,
// their MMAs would interleave in the tensor pipe, finish together, and all consumers would
// promote while it idles. The 64-row tiles of two warpgroups narrower than 64x256 (side by side
// along N) were faster without turns on the H200.
// Tiles of two consumer warpgroups and one chunk also keep a second scratch accumulator, so
// that a block's MMAs run while the one before is promoted.
// Bf16 results leave through smem boxes (128-byte-swizzled 64x64, or unswizzled 64 rows x a
// chunk's width) and TMA stores. M-contiguous A scales come with each stage by TMA (kSaSmem);
// other layouts' A scales and all B scales are read from global memory a few blocks ahead. The
// K loop is kept short (its own instructions were the gap to the bare MMA pattern's speed):
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

#include "gemm_common/fp8_decode.h"
#include "gemm_sm90/sm90_tiles.h"
#include "sm90_ptx.cuh"
#include "wgmma_fp8.cuh"

namespace fp8gemm::sm90 {

// Tile t's coordinates. Only kernels that may group along N (kMayGroupAlongN) carry that
// branch: the extra code cost the other tiles 1-4%.
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

// The bias of output column col (0 past the last column, whose results are never stored).
__device__ __forceinline__ float bias_at(const KernelParams& p, int col) {
  return col < p.N ? bf16_to_float(p.bias[int64_t(col) * p.bias_stride]) : 0.0f;
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
__device__ __forceinline__ void sum_cluster_partials(float4 (&sum)[kIters], const float* red, int split,
                                                     int lo, int hi, int ct) {
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
// A consumer warpgroup's state and steps; consumer() below runs them: for each tile of its CTA
// the K loop (accumulate_tile: per K block, MMAs into a scratch accumulator, then promoted with
// the block's scales into the tile accumulator), then the epilogue (split-K partials exchanged
// or reduced, the bias, bf16 stores).
// kSaSmem: the A scales come with each stage (TMA); else from global memory.
// kAMn: A arrives M-contiguous (the challenge layout) and is transposed on its way into the
// MMAs' registers (a_fragments); else A is K-major and the MMAs read it from shared memory.
// kSaStage: floats from one stage's A scales to the next; other than BM, the tile's first row's
// scale lies sa_shift floats into its stage (the grouped kernel's, whose TMA boxes start 16-byte
// aligned).
template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit, int kSaStage = BM>
struct Consumer {
  using T = TileShape<BM, BN>;
  static constexpr int kWN = T::kWN;
  static constexpr int kStages = T::kStages;
  static constexpr int kChunkN = T::kChunkN, kChunks = T::kChunks;
  // The scales of one K block: {sa of fragment row 0, sa of fragment row 1, sb of each chunk},
  // or with kCross {.., sb of the block of the warpgroup's first column, sb of the next}.
  static constexpr int kSc = T::kCross ? 4 : 2 + kChunks;
  // kAMn adds the A fragments of the two blocks in flight: no room for them next to three
  // 128-wide accumulators (ptxas spilled 150 bytes).
  static constexpr bool kOverlap = T::kOverlap && !(kAMn && kChunkN == 128);
  // Scales are loaded kAhead blocks ahead: their global loads queue behind the operand traffic
  // and took longer than two blocks. 192x144 and the 192-wide chunk of 128x192 have not the
  // registers for it.
  static constexpr int kAhead = (T::kConsumerWGs == 3 && kChunks == 2) || kChunkN == 192 ? 2 : 4;
  // Descriptors: a stage is kStageDescA/B further than stage 0, a chunk of B kChunkDescB.
  static constexpr uint32_t kStageDescA = BM * kBlockK / 16, kStageDescB = BN * kBlockK / 16;
  static constexpr uint32_t kChunkDescB = kChunkN * kBlockK / 16;
  // The accumulator rows of this thread among the warpgroup's 64: frag_row and frag_row +
  // kRowStep. The MMAs' fragment rows are lane / 4 and lane / 4 + 8 of the warp's 16; with kAMn
  // they hold A's rows 2 (lane / 4) and 2 (lane / 4) + 1 (see a_fragments).
  static constexpr int kRowStep = kAMn ? 1 : 8;
  // Turns: consumer ci issues a batch of MMAs after consumer ci - 1 issued its own. The last
  // consumer hands consumer 0 its first token (hand_first_turn) and consumer 0 takes the final
  // one back at the end (finish), so every batch waits for its token.
  static constexpr int kTurnBarrier = 5;  // ids 5.. (1: split-K, 2..4: epilogue staging; 2 also the
                                          // grouped kernel's SiLU-and-mul epilogue)
  static constexpr int kTurnThreads = 256;

  using Acc = float[kWN / 2];       // the tile accumulator: this thread's part of 64 x kWN
  using Part = float[kChunkN / 2];  // a scratch accumulator: one chunk of one K block
  using Scales = float[kSc];
  using AFragments = uint32_t[4][4];  // kAMn: one K block of A in registers

  // Where the scales of the next block to load are; each load moves them one block on.
  struct ScaleFeed {
    const float* sa[2];
    const float* sb[kSc - 2];
  };

  const CUtensorMap& map_c;
  const KernelParams& p;
  // Shared memory: the stages' A tiles from smem on, their B tiles from kOffsetB, then the output
  // staging buffer from kOffsetC. (Offsets rather than pointer members: with those, the compiler
  // hoisted the epilogue's addresses out of the tile loop and 128x256 spilled.)
  uint8_t* const smem;
  static constexpr int kOffsetB = kStages * BM * kBlockK;
  static constexpr int kOffsetC = kOffsetB + kStages * BN * kBlockK;
  uint64_t* const full;
  uint64_t* const empty;
  uint64_t* const xfer;
  const int rank;
  const int tid, warp, lane;
  const int ci, wg_m, wg_n;         // consumer ci's 64-row slice wg_m and kWN-column slice wg_n
  const uint32_t desc_a0, desc_b0;  // the MMAs' descriptors of stage 0 (low words)
  const int frag_row;
  const float* const my_sa;  // kSaSmem: this thread's A scales in stage 0
  // kAMn: see a_fragments
  uint32_t a_lane_addr = 0, a_row_bytes = 0, a_sel_even = 0, a_sel_odd = 0;
  // Split-K with kPushSplit: warpgroup `rank` finishes its region of each tile here; the other
  // one's partial goes to the peer CTA, into its staging buffer, with st.async counted on the
  // peer's xfer[0]. The peer arrives on our xfer[1] once the buffer is free again. Every
  // partial sent is acknowledged, also the last one, so that no CTA leaves while the other
  // may still write into its shared memory or arrive on its barriers.
  const bool push_split;
  const bool finisher;
  const uint32_t peer;  // its addresses are mapped where used: held across the K loop, they spill
  // The next stage to read and its phase, then the split-K push's state. (Declared in this order
  // and after the members above, most kernels compile to the instructions and registers they had
  // when these were the tile loop's locals.)
  uint32_t phase = 0;
  int stage = 0;
  uint32_t xfer_phase = 0;
  bool sent = false, peer_ready = false;
  int sa_shift = 0;  // kSaStage != BM

  __device__ __forceinline__ Consumer(const CUtensorMap& map_c, const KernelParams& p, uint8_t* smem,
                                      uint64_t* full, uint64_t* empty, uint64_t* xfer, const float* smem_sa,
                                      int rank, int tid, int warp, int lane)
      : map_c(map_c),
        p(p),
        smem(smem),
        full(full),
        empty(empty),
        xfer(xfer),
        rank(rank),
        tid(tid),
        warp(warp),
        lane(lane),
        // Read from lane 0, so that the compiler knows it is the same across the warp: what
        // derives from it (the MMAs' shared-memory descriptors, barrier ids) stays in uniform
        // registers instead of being moved there before every MMA.
        ci(__shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0) - 1),
        wg_m(ci % T::kWgM),
        wg_n(ci / T::kWgM),
        desc_a0(smem_desc_lo(smem_addr(smem + wg_m * 64 * kBlockK))),
        desc_b0(smem_desc_lo(smem_addr(smem + kOffsetB + wg_n * kWN * kBlockK))),
        frag_row(warp * 16 + (kAMn ? 2 * (lane / 4) : lane / 4)),
        my_sa(smem_sa + wg_m * 64 + frag_row),
        push_split(kSplit && pushes_split_partials(BM, BN, p.split)),
        finisher(ci == rank),
        peer(rank ^ 1) {
    if constexpr (kAMn) set_a_lane();
  }

  // ---- the K loop ----

  // kAMn: a stage's A is a [128 K][128 M] box with the 128-byte swizzle (the 16-byte chunk c of
  // K row k lies at c ^ k % 8) for rows 0-127 of the tile, and a [128 K][64 M] box with the
  // 64-byte swizzle (c at c ^ (k / 2) % 4) for rows 128-191 or for BM = 64. ldmatrix.trans reads
  // 16-bit elements, i.e. pairs of M rows: matrix 2s + p of the x4 load for K slice kk gives
  // lane (g = lane / 4, t = lane % 4) rows 2g and 2g + 1 of its warp's 16 at K = 32 kk + 16 s +
  // 4 t + 2 (p ^ t / 2) and the K after it. Each matrix's eight K rows then differ mod 8 and lie
  // in different banks. Two byte permutes per pair of matrices make the wgmma fragment words
  // (4 K values of one row). set_a_lane: this lane's address in stage 0 and its permutes.
  __device__ __forceinline__ void set_a_lane() {
    const int i = lane / 8, j = lane % 8, s = i / 2, pm = i % 2, tr = j / 2;
    const int k = 16 * s + 4 * tr + 2 * (pm ^ (tr / 2)) + j % 2;
    const uint32_t a0 = smem_addr(smem);
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
  __device__ __forceinline__ void a_fragments(AFragments& fr, int st) const {
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
  }

  // The scales of the tile's first block: row0 and col0 are this thread's first row and this
  // warpgroup's first column.
  __device__ __forceinline__ ScaleFeed scale_feed(int row0, int col0, int kb_begin) const {
    ScaleFeed feed;
    feed.sa[0] = feed.sa[1] = nullptr;
    if constexpr (!kSaSmem) {
      feed.sa[0] = p.a_scale + int64_t(min(row0, p.M - 1)) * p.sa_m + int64_t(kb_begin) * p.sa_kb;
      feed.sa[1] = p.a_scale + int64_t(min(row0 + kRowStep, p.M - 1)) * p.sa_m + int64_t(kb_begin) * p.sa_kb;
    }
#pragma unroll
    for (int c = 0; c < kSc - 2; ++c)
      feed.sb[c] = p.b_scale +
                   int64_t(min(col0 / 128 + (T::kCross ? c : c * kChunkN / 128), p.n_blocks - 1)) * p.sb_nb +
                   int64_t(kb_begin) * p.sb_kb;
    return feed;
  }
  // The scales of the next block into sc (the A scales only when they come from global memory).
  __device__ __forceinline__ void load_scales(ScaleFeed& feed, Scales& sc) const {
    if constexpr (!kSaSmem) {
      sc[0] = __ldg(feed.sa[0]);
      sc[1] = __ldg(feed.sa[1]);
      feed.sa[0] += p.sa_kb;
      feed.sa[1] += p.sa_kb;
    }
#pragma unroll
    for (int c = 0; c < kSc - 2; ++c) {
      sc[2 + c] = __ldg(feed.sb[c]);
      feed.sb[c] += p.sb_kb;
    }
  }

  // kSaSmem: this thread's first row's A scale in stage st.
  __device__ __forceinline__ const float* stage_sa(int st) const {
    if constexpr (kSaStage == BM)
      return my_sa + st * BM;
    else
      return my_sa + st * kSaStage + sa_shift;
  }

  // Chunk c's MMAs of stage st into pt, on this consumer's turn. fr: with kAMn, the block's A
  // fragments (a_fragments); unused otherwise.
  __device__ __forceinline__ void issue_mmas(Part& pt, int st, int c, const AFragments& fr) const {
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
    if constexpr (T::kTakeTurns)
      named_barrier_arrive(kTurnBarrier + (ci + 1) % T::kConsumerWGs, kTurnThreads);
  }

  // acc's chunk c += pt * (its rows' A scales sa0, sa1) * (its columns' B scales in sc). The K
  // loop is compiled once per crossing class (TileShape): kColInBlock, the position of the
  // warpgroup's first column in its B scale block, is a constant, so is every fragment group's
  // scale.
  template <int kColInBlock>
  __device__ __forceinline__ void promote_chunk(Acc& acc, int c, const Part& pt, float sa0, float sa1,
                                                const Scales& sc) const {
    float(&chunk)[kChunkN / 2] = *reinterpret_cast<float(*)[kChunkN / 2]>(acc + c * (kChunkN / 2));
    if constexpr (T::kCross) {
      promote_regs_cross(chunk, pt, sa0 * sc[2], sa1 * sc[2], sa0 * sc[3], sa1 * sc[3],
                         T::first_hi_group(kColInBlock, c));
    } else {
      promote_regs(chunk, pt, sa0 * sc[2 + c], sa1 * sc[2 + c]);
    }
  }

  __device__ __forceinline__ void next_stage() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }

  // Block kb alone, its scales in scales[i]: its MMAs chunk after chunk into part, each waited
  // for and promoted into acc; then scales[i] takes the scales of block kb + kAhead.
  template <int kColInBlock>
  __device__ __forceinline__ void k_block(Acc& acc, Part& part, Scales (&scales)[kAhead], ScaleFeed& feed,
                                          int i, int kb, int kb_end) {
    const Scales& sc = scales[i];
    float sa0 = sc[0], sa1 = sc[1];
    mbar_wait(&full[stage], phase);
    if constexpr (kSaSmem) {  // this stage's A scales, read before the stage is released
      sa0 = stage_sa(stage)[0];
      sa1 = stage_sa(stage)[kRowStep];
    }
    AFragments fr;
    if constexpr (kAMn) a_fragments(fr, stage);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      issue_mmas(part, stage, c, fr);
      wgmma_wait<0>();
      if (c == kChunks - 1 && lane == 0) mbar_arrive(&empty[stage]);  // the stage is free
      promote_chunk<kColInBlock>(acc, c, part, sa0, sa1, sc);
    }
    next_stage();
    if (kb + kAhead < kb_end) load_scales(feed, scales[i]);
  }

  // kOverlap: whole groups of kAhead blocks from kb on with two scratch accumulators, block
  // i + 1's MMAs running while block i is promoted; returns the first block after them. A group
  // ends with nothing in flight and has no runtime branches: otherwise ptxas serialises every
  // wgmma (C7514).
  template <int kColInBlock>
  __device__ __forceinline__ int k_groups_overlapped(Acc& acc, Part& part, Scales (&scales)[kAhead],
                                                     ScaleFeed& feed, int kb, int kb_end) {
    float part2[kChunkN / 2];
    auto buf = [&](int i) -> Part& { return i % 2 == 0 ? part : part2; };
    AFragments frs[2];  // kAMn: the A fragments of the two blocks in flight
    for (; kb + kAhead <= kb_end; kb += kAhead) {
      int st[2] = {};
      float sa[2][2] = {};
      auto finish = [&](int i) {  // block kb + i: its MMAs are done; release and promote
        if (lane == 0) mbar_arrive(&empty[st[i % 2]]);
        promote_chunk<kColInBlock>(acc, 0, buf(i), sa[i % 2][0], sa[i % 2][1], scales[i]);
        if (kb + i + kAhead < kb_end) load_scales(feed, scales[i]);
      };
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
        mbar_wait(&full[stage], phase);
        st[i % 2] = stage;
        if constexpr (kSaSmem) {
          sa[i % 2][0] = stage_sa(stage)[0];
          sa[i % 2][1] = stage_sa(stage)[kRowStep];
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
    return kb;
  }

  // The tile's K blocks kb_begin..kb_end - 1 into acc.
  template <int kColInBlock>
  __device__ __forceinline__ void accumulate_tile(Acc& acc, ScaleFeed& feed, int kb_begin, int kb_end) {
    Part part;
#pragma unroll
    for (int i = 0; i < kWN / 2; ++i) acc[i] = 0.f;
#pragma unroll
    for (int i = 0; i < kChunkN / 2; ++i) part[i] = 0.f;
    Scales scales[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i)
      if (kb_begin + i < kb_end) load_scales(feed, scales[i]);
    int kb = kb_begin;
    if constexpr (kOverlap) kb = k_groups_overlapped<kColInBlock>(acc, part, scales, feed, kb, kb_end);
    for (; kb < kb_end; kb += kAhead)  // the rest block by block
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
        if (kb + i >= kb_end) break;
        k_block<kColInBlock>(acc, part, scales, feed, i, kb + i, kb_end);
      }
  }

  // ---- the epilogue ----
  // Fragment position of acc[4j + 2h + e]: row frag_row + kRowStep h, col 8j + frag_col + e.

  // push_split: the finisher adds the peer's partial to acc and returns true; the other
  // warpgroup sends acc to the peer and returns false (it stores nothing of this tile).
  __device__ __forceinline__ bool exchange_pushed_partial(Acc& acc) {
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
        st_async_16(cluster_smem_addr(smem + kOffsetC, peer) + (i * 128 + tid) * 16,
                    make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]),
                    cluster_smem_addr(&xfer[0], peer));
      return false;
    }
    if (tid == 0) mbar_arrive_expect_tx(&xfer[0], T::kOutBytes);
    mbar_wait(&xfer[0], xfer_phase);
    xfer_phase ^= 1;
    const float4* part = reinterpret_cast<const float4*>(smem + kOffsetC) + tid;
#pragma unroll
    for (int i = 0; i < kWN / 8; ++i) {
      const float4 v = part[i * 128];
      acc[4 * i] += v.x;
      acc[4 * i + 1] += v.y;
      acc[4 * i + 2] += v.z;
      acc[4 * i + 3] += v.w;
    }
    return true;
  }

  __device__ __forceinline__ void add_bias(Acc& acc, int n0, int frag_col) const {
#pragma unroll
    for (int j = 0; j < kWN / 8; ++j) {
      const int gc = n0 + wg_n * kWN + 8 * j + frag_col;
      const float b0 = bias_at(p, gc), b1 = bias_at(p, gc + 1);
      acc[4 * j] += b0;
      acc[4 * j + 1] += b1;
      acc[4 * j + 2] += b0;
      acc[4 * j + 3] += b1;
    }
  }

  // Split-K without pushed partials: the partial tiles meet in distributed shared memory, and
  // this CTA sums, adds the bias to and stores 1/split of the tile.
  __device__ __forceinline__ void reduce_split_and_store(const Acc& acc, int m0, int n0, int frag_col) const {
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
      float4 s = sum[i];
      if (p.bias != nullptr) {
        s.x += bias_at(p, gc);
        s.y += bias_at(p, gc + 1);
        s.z += bias_at(p, gc + 2);
        s.w += bias_at(p, gc + 3);
      }
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
  }

  // Row-major out: per chunk, bf16 into smem boxes (64x64 128-byte-swizzled, or 64 x chunk),
  // then a TMA store.
  __device__ __forceinline__ void store_through_smem(const Acc& acc, int m0, int n0) const {
    uint8_t* cbuf = smem + kOffsetC + ci * 64 * kChunkN * 2;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (tid == 0) tma_store_wait_read();  // the previous store has left cbuf
      named_barrier(2 + ci, 128);
      // With kAMn a warp's fragment rows are 2 (lane / 4) (+ 1): the upper half warp stores its
      // odd row first, so that each store covers all eight rows mod 8 (with the 128-byte swizzle,
      // eight different 16-byte chunks) and not four of them twice (2-way bank conflicts; with
      // the row-major box, 8-way instead of 4-way).
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
  }

  // Any other output layout: element stores.
  __device__ __forceinline__ void store_elements(const Acc& acc, int m0, int n0, int frag_col) const {
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

  // ---- before the first tile and after the last ----

  __device__ __forceinline__ void hand_first_turn() const {
    if (T::kTakeTurns && ci == T::kConsumerWGs - 1) named_barrier_arrive(kTurnBarrier, kTurnThreads);
  }

  __device__ __forceinline__ void finish() {
    if (push_split && sent) mbar_wait(&xfer[1], xfer_phase);
    if (T::kTakeTurns && ci == 0)
      named_barrier(kTurnBarrier, kTurnThreads);  // the last consumer's final token
    if (p.tma_store && tid == 0) tma_store_wait_all();
  }
};

// A consumer warpgroup: tiles unit, unit + unit_stride, ... of the grid, each over K blocks
// kb_begin..kb_end - 1: the K loop (accumulate_tile), then the epilogue.
template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
__device__ __forceinline__ void consumer(const CUtensorMap& map_c, const KernelParams& p, uint8_t* smem,
                                         uint64_t* full, uint64_t* empty, uint64_t* xfer,
                                         const float* smem_sa, int unit, int unit_stride, int rank,
                                         int kb_begin, int kb_end) {
  using C = Consumer<BM, BN, kSaSmem, kAMn, kSplit>;
  using T = TileShape<BM, BN>;
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = threadIdx.x % 32;
  regs_increase<T::kConsumerRegs>();
  C c(map_c, p, smem, full, empty, xfer, smem_sa, rank, tid, warp, lane);
  typename C::Acc acc;
  c.hand_first_turn();
  for (int t = unit; t < p.num_tiles; t += unit_stride) {
    int mb, nb;
    tile_coords<BM == 192>(p, t, mb, nb);
    const int m0 = mb * BM, n0 = nb * BN;
    const int row0 = m0 + c.wg_m * 64 + c.frag_row;  // first row of this thread
    const int col0 = n0 + c.wg_n * C::kWN;           // first column of this warpgroup
    typename C::ScaleFeed feed = c.scale_feed(row0, col0, kb_begin);
    auto k_loop = [&](auto col_in_block) {
      c.template accumulate_tile<decltype(col_in_block)::value>(acc, feed, kb_begin, kb_end);
    };
    with_crossing_class<T>(col0 % 128, k_loop);

    const int frag_col = 2 * (c.lane % 4);
    if (c.push_split && !c.exchange_pushed_partial(acc)) continue;
    const bool reduce_split = kSplit && !c.push_split;
    if (p.bias != nullptr && !reduce_split) c.add_bias(acc, n0, frag_col);
    if (reduce_split)
      c.reduce_split_and_store(acc, m0, n0, frag_col);
    else if (p.tma_store)
      c.store_through_smem(acc, m0, n0);
    else
      c.store_elements(acc, m0, n0, frag_col);
  }
  c.finish();
}

// kSaSmem: the A scales are M-contiguous and TMA brings each stage's BM of them.
// kAMn: A is M-contiguous; map_a's boxes are min(BM, 128) M x 128 K, map_a_tail's (BM = 192)
// 64 M x 128 K for the tile's last 64 rows (see Consumer::set_a_lane).
// kSplit: p.split > 1 (clusters share tiles along K); the other kernels carry no split-K code.
template <int BM, int BN, bool kSaSmem, bool kAMn, bool kSplit>
__global__ void __launch_bounds__(TileShape<BM, BN>::kThreads, 1)
    fp8_gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                         const __grid_constant__ CUtensorMap map_a_tail,
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

  // The producer thread's loads of K block kb of tile (mb, nb) into `stage`. Only the 192-row
  // kernels carry the hinted loads (see tile_coords), with the L2 policies `first` and `last`.
  const bool stream_a = BM == 192 && p.stream_a;
  // A stage's expected bytes, its A (with the A scales) and its B apart: behind the quantization the
  // first stages' B goes before the wait, their A after it.
  auto expect_stage = [&](int stage) {
    mbar_arrive_expect_tx(&full[stage], T::kStageBytes + (kSaSmem ? BM * 4 : 0));
  };
  auto load_a_part = [&](int stage, int mb, int kb, uint64_t first) {
    uint8_t* const dst_a = smem_a + stage * BM * kBlockK;
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
  };
  auto load_b_part = [&](int stage, int nb, int kb, uint64_t last) {
    uint8_t* const dst_b = smem_b + stage * BN * kBlockK;
    if (stream_a)
      tma_load_2d_hint(dst_b, &map_b, &full[stage], kb * kBlockK, nb * BN, last);
    else
      tma_load_2d(dst_b, &map_b, &full[stage], kb * kBlockK, nb * BN);
  };

  // Thread 0 (the producer thread) initialises the barriers and then issues the first stages of
  // its first tile at once, before the block barrier: the loads' latency then overlaps the
  // block's setup, whose first reads of the kernel parameters miss the constant cache
  // (measured: the first data lands ~0.6 µs earlier). Not in the kernels of three consumer
  // warpgroups (192 x N, 64 x 192): their registers are too few for it (ptxas spilled more).
  constexpr int kPreStages = T::kConsumerWGs == 3 ? 0 : kStages < 4 ? kStages : 4;
  int pre = 0;  // stages of the first tile issued before the block barrier
  if (threadIdx.x == 0) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");  // the next kernel waits for this one
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
    if constexpr (kPreStages > 0) {
      static_assert(BM != 192, "early loads carry no L2 policies");
      int mb = 0, nb = 0, count = 0;
      if (unit < p.num_tiles) {
        tile_coords<BM == 192>(p, unit, mb, nb);
        count = max(0, min(kPreStages, kb_end - kb_begin));
      }
      // B before the wait behind the quantization of A: that kernel waited for every kernel queued
      // before it before it let this one launch, so none still running writes B. Behind an operand
      // copy (!p.b_before_wait) B waits too: the copy may still be writing it. (Not in the kernels of
      // three consumer warpgroups, which issue no early loads: there p.b_before_wait changes nothing.)
      // A second wait returns at once.
      if (!p.b_before_wait) asm volatile("griddepcontrol.wait;" ::: "memory");
      for (int s = 0; s < count; ++s) {
        expect_stage(s);
        load_b_part(s, nb, kb_begin + s, 0);
      }
      asm volatile("griddepcontrol.wait;" ::: "memory");  // A may be the operand copy or the quantization
      for (; pre < count; ++pre) load_a_part(pre, mb, kb_begin + pre, 0);
    }
  }
  __syncthreads();
  // The peer may arrive on our barriers once they are initialised (see the consumers).
  if (kSplit && pushes_split_partials(BM, BN, p.split)) cluster_arrive_relaxed();
  // Launched right after the operand copy or the quantization of A (programmatic dependent
  // launch): everything above overlaps that kernel's tail, thread 0's first loads included (their
  // B before its own wait behind the quantization, their A after it); nothing below reads or writes
  // global memory before it is done. Without that launch attribute this returns at once.
  asm volatile("griddepcontrol.wait;" ::: "memory");

  if (wg == 0) {
    // ---------------- producer ----------------
    regs_decrease<T::kProducerRegs>();
    const uint64_t first = stream_a ? l2_evict_first_policy() : 0,
                   last = stream_a ? l2_evict_last_policy() : 0;
    // The first tile's first `pre` stages are in flight already (thread 0 above).
    int stage = pre % kStages;
    uint32_t phase = pre == kStages ? 1 : 0;
    int skip = pre;
    for (int t = unit; t < p.num_tiles; t += unit_stride) {
      if (warp == 0 && lane == 0) {
        int mb, nb;
        tile_coords<BM == 192>(p, t, mb, nb);
        for (int kb = kb_begin + skip; kb < kb_end; ++kb) {
          mbar_wait(&empty[stage], phase ^ 1);
          expect_stage(stage);
          load_a_part(stage, mb, kb, first);
          load_b_part(stage, nb, kb, last);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
        skip = 0;
      }
      if (kSplit && !pushes_split_partials(BM, BN, p.split)) {  // the consumers' two cluster barriers
        cluster_sync_all();
        cluster_sync_all();
      }
    }
  } else {
    consumer<BM, BN, kSaSmem, kAMn, kSplit>(map_c, p, smem, full, empty, xfer, smem_sa, unit, unit_stride,
                                            rank, kb_begin, kb_end);
  }
}

}  // namespace fp8gemm::sm90
