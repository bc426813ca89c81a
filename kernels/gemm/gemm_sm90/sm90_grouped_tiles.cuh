#pragma once
// The grouped (mixture-of-experts) FP8 GEMM on the wgmma tiles of the dense kernel
// (sm90_kernel.cuh), from one row per expert on: the dense kernel's producer and consumers with an
// expert dimension, its tiles scheduled on the device.
//
// The experts' rows lie one block after the other in A and out (contiguous layout: expert e owns
// rows offsets[e]..offsets[e + 1]; masked: e * capacity .. + counts[e]). Each expert's rows are
// cut into BM-row tiles ("M-tiles", the last one partial), numbered expert after expert; tile t of
// the persistent grid is M-tile t / tiles_n and N-tile t % tiles_n, so the CTAs running at once
// share A tiles across N and each expert's weight tiles across its M-tiles (from L2). Which expert
// owns an M-tile is found on the device from the offsets or counts by each warp (ExpertCursor):
// no host synchronization, so the launch can be captured in a CUDA graph and replayed with other
// routings; an expert without rows has no tiles and costs nothing.
//
// Which M-tiles a launch takes (TilePart): every BM-row tile of each expert, or, with many rows per
// expert, three launches by tile height (TileCut): each expert's rows, counted in 64-row slabs, cut
// into 192-row tiles, the last of which may hold 129-192 rows, and one or two 128-row tiles for the
// rest (one 64-row tile for an expert of 1-64 rows), so that no tile has a slab without rows of its
// expert and an expert of up to 192 rows is in one launch (its weights read once).
//
// A M-tile's BM rows are loaded by TMA from its first row on: the rows past the expert's last are
// the next expert's (or zeros past A's end) and are computed but never stored. B is read as one
// (E * N, K) matrix at row e * N + n; each expert's B scales are b_scale + e * sb_e, read from global
// memory a few blocks ahead (any strides). A's scales, M-contiguous, come with each stage by TMA, as in
// the dense kernel (kSaBox below). Results leave through shared memory and TMA stores where all of a
// tile's rows are its expert's or end with the output (p.tma_store), through row-bounded 4-byte
// stores otherwise, or, with SiLU-and-mul in the epilogue (kSiluQuant), as 4-byte stores of FP8 codes
// and one scale per row and 128 columns.
#include <cuda_bf16.h>

#include "gemm_sm90/sm90_kernel.cuh"

namespace fp8gemm::sm90::grouped_tiles {

// Tile heights of the three-launch split (TilePart).
constexpr int kTallRows = 192, kMediumRows = 128, kSlabRows = 64;

// A's scales of a stage: TMA reads a box only from a 16-byte aligned first element (a probe on the H200:
// a float box from element 1 or -2 of a row stopped the kernel with an illegal instruction), so a tile's box
// starts at row row0 & ~3 and holds BM + 4 scales; each stage's box takes kSaStage floats (so that every
// box starts 128-byte aligned).
template <int BM>
constexpr int kSaBox = BM + 4;
template <int BM>
constexpr int kSaStage = BM + 32;
// The kernel's shared memory: the dense kernel's with those larger stages of scales.
template <int BM, int BN>
constexpr int kTilesSmemBytes =
    TileShape<BM, BN>::kSmemBytes + TileShape<BM, BN>::kStages * (kSaStage<BM> - BM) * 4;

enum TilePart : int {
  kEveryTile = 0,    // ceil(rows / BM) tiles from the expert's first row
  kTallTiles = 1,    // BM = 192: TileCut::tall tiles from the expert's first row
  kMediumTiles = 2,  // BM = 128: TileCut::medium tiles after those
  kSlabTile = 3,     // BM = 64: an expert of 1-64 rows
};

// An expert's rows as s 64-row slabs = 3 tall + 2 medium + slab: 192-row tiles, but one 128-row tile
// where s % 3 == 2 and two where s % 3 == 1 (s = 4: two 128-row tiles rather than 192 + 64); s = 1: one
// 64-row tile. Every tile's last slab holds rows of the expert.
struct TileCut {
  int tall, medium, slab;
  __device__ __forceinline__ explicit TileCut(int count) {
    const int s = (count + kSlabRows - 1) / kSlabRows;
    const int left = s % 3;
    slab = s == 1 ? 1 : 0;
    medium = s == 1 ? 0 : left == 2 ? 1 : left == 1 ? 2 : 0;
    tall = (s - slab - 2 * medium) / 3;
  }
};

struct TilesParams {
  KernelParams p;              // N, K, num_kb, tiles_n, the scales, out; M = rows of A and out
  const int32_t* expert_rows;  // offsets (E + 1), or counts (E) when masked
  int experts;
  int masked;
  int capacity;  // masked only
  int part;      // TilePart
  int64_t sb_e;  // B scales of expert e: p.b_scale + e * sb_e
  // kSiluQuant: where SiLU-and-mul's quantized rows go (GroupedGemmArgs::silu_q); p.out is not written.
  uint8_t* silu_q;
  int64_t silu_q_sm;
  float* silu_scale;
  int64_t silu_scale_sm, silu_scale_skb;
};

// An expert's M-tiles under q.part, given its row count; *skip: rows before its first tile.
template <int BM>
__device__ __forceinline__ int part_tiles(const TilesParams& q, int count, int* skip) {
  *skip = 0;
  if (q.part == kEveryTile) return (count + BM - 1) / BM;
  const TileCut cut(count);
  if (q.part == kTallTiles) return cut.tall;
  if (q.part == kSlabTile) return cut.slab;
  *skip = cut.tall * kTallRows;
  return cut.medium;
}

// The routing from L2 (l2_only: not through L1, for reads before the kernel's wait) or as usual.
__device__ __forceinline__ int load_routing(const int32_t* at, bool l2_only) {
  return l2_only ? __ldcg(at) : *at;
}

// Expert e's rows: [*first, *first + count), clamped to the rows the layout holds.
__device__ __forceinline__ int expert_rows(const TilesParams& q, int e, int* first, bool l2_only) {
  if (q.masked) {
    *first = e * q.capacity;
    const int count = load_routing(q.expert_rows + e, l2_only);
    return count < 0 ? 0 : min(count, q.capacity);
  }
  const int lo = min(max(load_routing(q.expert_rows + e, l2_only), 0), q.p.M);
  const int hi = min(max(load_routing(q.expert_rows + e + 1, l2_only), lo), q.p.M);
  *first = lo;
  return hi - lo;
}

// Which expert owns M-tile gm, for a warp whose lanes all ask with the same, non-decreasing gm:
// the cursor stays at the last expert found and scans on from there, 32 experts at a time.
template <int BM>
struct ExpertCursor {
  int e = 0;             // the expert of the last M-tile found
  int tiles_before = 0;  // M-tiles of the experts before e

  // Sets the M-tile's expert, its first row and the expert's row range; false past the last tile.
  __device__ __forceinline__ bool seek(const TilesParams& q, int gm, int lane, int* expert, int* row0,
                                       int* row_end, bool l2_only = false) {
    for (; e < q.experts; e += 32) {
      const int mine = e + lane;
      int first = 0;
      const int count = mine < q.experts ? expert_rows(q, mine, &first, l2_only) : 0;
      int skip = 0;
      const int tiles = part_tiles<BM>(q, count, &skip);
      int inclusive = tiles;
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
        if (lane >= d) inclusive += v;
      }
      const unsigned past = __ballot_sync(0xffffffffu, tiles_before + inclusive > gm);
      if (past != 0) {
        const int owner = __ffs(past) - 1;
        const int owner_start = __shfl_sync(0xffffffffu, first + skip, owner);
        const int owner_before = tiles_before + __shfl_sync(0xffffffffu, inclusive - tiles, owner);
        e += owner;
        tiles_before = owner_before;
        *expert = e;
        *row0 = owner_start + (gm - owner_before) * BM;
        *row_end = __shfl_sync(0xffffffffu, first + count, owner);
        return true;
      }
      tiles_before += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    return false;
  }
};

// Named barrier of the two consumer warpgroups in the kSiluQuant epilogue: that kernel uses no other from
// 1 to 4 (the Consumer's turns are 5 and 6; its TMA stores, on barriers 2 to 4, are the other kernels').
constexpr int kSiluBarrier = 2;

// The kSiluQuant epilogue of one tile. The gate warpgroup (wg_n 0) holds the tile's 128 gate columns, the
// up warpgroup the same 128 up columns: each leaves its bf16 values (the GEMM's bf16 output) in its table
// of shared memory, [64 rows][64 words of two columns], the words XORed with 4 * (row % 8) so that the
// fragments' writes and the rows' reads meet no bank conflict. Then each of the 8 warps takes whole rows,
// 4 columns per lane: only the tile's real rows cost SiLU and division (with all 64 rows' arithmetic in
// the fragments, the epilogue took 8 of 77-80 us at one row per expert), and each row's 128 codes leave in
// one 128-byte store.
template <class C>
__device__ __forceinline__ void silu_quantize(const C& c, const typename C::Acc& acc, const TilesParams& q,
                                              uint32_t* tables, int row0, int row_end, int n0, int lane) {
  constexpr int kWords = 64;  // per row: 128 bf16 columns
  const int rows = min(64, row_end - row0);
  named_barrier(kSiluBarrier, 2 * 128);  // both warpgroups have read the previous tile's tables
  uint32_t* const table = tables + c.wg_n * 64 * kWords;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = c.frag_row + 8 * h;
    if (row >= rows) continue;
#pragma unroll
    for (int j = 0; j < C::kWN / 8; ++j)
      table[row * kWords + ((4 * j + lane % 4) ^ 4 * (row % 8))] =
          pack_bf16(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
  }
  named_barrier(kSiluBarrier, 2 * 128);
  const float limit = fp8_max(Fp8Format::E4M3FN);
  for (int row = c.wg_n * 4 + c.warp; row < rows; row += 8) {
    const int word = row * kWords + ((2 * lane) ^ 4 * (row % 8));
    const uint2 gate = *reinterpret_cast<const uint2*>(tables + word);
    const uint2 up = *reinterpret_cast<const uint2*>(tables + 64 * kWords + word);
    const uint32_t g[4] = {gate.x << 16, gate.x & 0xffff0000u, gate.y << 16, gate.y & 0xffff0000u};
    const uint32_t u[4] = {up.x << 16, up.x & 0xffff0000u, up.y << 16, up.y & 0xffff0000u};
    float v[4];
    uint32_t amax = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[i] = silu_mul(__uint_as_float(g[i]), __uint_as_float(u[i]));
      amax = max(amax, abs_bits(v[i]));
    }
#pragma unroll
    for (int d = 1; d < 32; d *= 2) amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, d));
    const GroupScale s = group_scale(amax, Fp8Format::E4M3FN);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = clamp_quotient(FP8GEMM_DIV_RN(v[i], s.divisor), limit);
    const int64_t gr = int64_t(row0) + row;
    *reinterpret_cast<uint32_t*>(q.silu_q + gr * q.silu_q_sm + n0 + 4 * lane) = encode4(v, Fp8Format::E4M3FN);
    if (lane == 0) q.silu_scale[gr * q.silu_scale_sm + int64_t(n0 / 128) * q.silu_scale_skb] = s.scale;
  }
}

// kSiluQuant: each tile covers 128 columns of SiLU-and-mul's output, n0 to n0 + 128; its B tile holds, per
// stage, B rows n0 to n0 + 128 of the gate half ([0, N/2)) and the same rows of the up half ([N/2, N)), so
// that the first consumer warpgroup multiplies the gate columns and the second the up columns. The
// epilogue (silu_quantize) rounds them to bf16 (as the GEMM's bf16 output would be), takes SiLU-and-mul
// and quantizes the 128 columns of each row as one group, exactly as quantize_kernel does from those bf16
// values.
template <int BM, int BN, bool kSiluQuant>
__global__ void __launch_bounds__(TileShape<BM, BN>::kThreads, 1)
    fp8_grouped_tiles_kernel(const __grid_constant__ CUtensorMap map_a,
                             const __grid_constant__ CUtensorMap map_b,
                             const __grid_constant__ CUtensorMap map_c,
                             const __grid_constant__ CUtensorMap map_sa, const TilesParams q) {
  using T = TileShape<BM, BN>;
  using C = Consumer<BM, BN, true, false, false, kSaStage<BM>>;
  static_assert(T::kScalesFit && kTilesSmemBytes<BM, BN> <= kSmemLimit, "no room for the A scales");
  static_assert(!kSiluQuant || (BM == 64 && BN == 256), "SiLU-and-mul on the 64x256 tiles");
  constexpr int kStages = T::kStages;
  constexpr int kTileCols = kSiluQuant ? BN / 2 : BN;        // output columns per tile
  constexpr int kStageTx = T::kStageBytes + kSaBox<BM> * 4;  // a stage's bytes: A, B and A's scales
  const KernelParams& p = q.p;

  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* smem_a = smem;
  uint8_t* smem_b = smem_a + kStages * BM * kBlockK;
  uint8_t* smem_c = smem_b + kStages * BN * kBlockK;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_c + T::kOutBytes);
  uint64_t* empty = full + kStages;
  float* smem_sa = reinterpret_cast<float*>(smem_c + T::kOutBytes + T::kBarrierBytes);

  const int wg = threadIdx.x / 128;
  const int warp = (threadIdx.x % 128) / 32;
  const int lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], T::kConsumerWarps);
    }
    mbar_fence_init();
    tma_prefetch_desc(&map_a);
    tma_prefetch_desc(&map_b);
    tma_prefetch_desc(&map_sa);
    if (p.tma_store) tma_prefetch_desc(&map_c);
  }
  __syncthreads();

  // Launched programmatically behind the quantization of A (each launch of the three-launch split behind
  // the one before): A and its scales are ready after the wait. With p.b_before_wait the producer first
  // finds its first tile and loads that tile's B into the free stages: the quantization waited for every
  // kernel queued before it (the routing's included) before it let the first launch start, and the others
  // start after the first, so no kernel still running writes the routing or B. The routing is read from
  // L2, which those kernels' writes reached as they ended (L1 is not coherent).
  ExpertCursor<BM> cursor;
  int e = 0, row0 = 0, row_end = 0;
  // The first B row of tile t (of expert e), and its stage for K block kb.
  auto first_b_row = [&](int t) { return e * p.N + (t % p.tiles_n) * kTileCols; };
  auto load_b = [&](int stage, int kb, int b_row) {
    uint8_t* const dst = smem_b + stage * BN * kBlockK;
    if constexpr (kSiluQuant) {
      tma_load_2d(dst, &map_b, &full[stage], kb * kBlockK, b_row);
      tma_load_2d(dst + 128 * kBlockK, &map_b, &full[stage], kb * kBlockK, b_row + p.N / 2);
    } else {
      tma_load_2d(dst, &map_b, &full[stage], kb * kBlockK, b_row);
    }
  };
  if (wg == 0) {
    regs_decrease<T::kProducerRegs>();
    if (warp != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    int t = blockIdx.x, b_loaded = 0;  // stages of the first tile whose B is in flight
    bool more = true;
    if (p.b_before_wait) {
      more = cursor.seek(q, t / p.tiles_n, lane, &e, &row0, &row_end, true);
      b_loaded = more ? min(kStages, p.num_kb) : 0;
      const int b_row = first_b_row(t);
      if (lane == 0)
        for (int kb = 0; kb < b_loaded; ++kb) {
          mbar_arrive_expect_tx(&full[kb], kStageTx);
          load_b(kb, kb, b_row);
        }
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (!p.b_before_wait) more = cursor.seek(q, t / p.tiles_n, lane, &e, &row0, &row_end);
    while (more) {
      if (lane == 0) {
        const int b_row = first_b_row(t);  // once a tile: the modulo stays out of the stage loop
        for (int kb = 0; kb < p.num_kb; ++kb) {
          if (kb >= b_loaded) {
            mbar_wait(&empty[stage], phase ^ 1);
            mbar_arrive_expect_tx(&full[stage], kStageTx);
            load_b(stage, kb, b_row);
          }
          tma_load_2d(smem_a + stage * BM * kBlockK, &map_a, &full[stage], kb * kBlockK, row0);
          tma_load_2d(smem_sa + stage * kSaStage<BM>, &map_sa, &full[stage], row0 & ~3, kb);
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      __syncwarp();
      b_loaded = 0;
      t += gridDim.x;
      more = cursor.seek(q, t / p.tiles_n, lane, &e, &row0, &row_end);
    }
    return;
  }

  asm volatile("griddepcontrol.wait;" ::: "memory");
  regs_increase<T::kConsumerRegs>();
  const int tid = threadIdx.x % 128;
  C c(map_c, p, smem, full, empty, nullptr, smem_sa, 0, tid, warp, lane);
  typename C::Acc acc;
  c.hand_first_turn();
  for (int t = blockIdx.x; cursor.seek(q, t / p.tiles_n, lane, &e, &row0, &row_end); t += gridDim.x) {
    const int n0 = (t % p.tiles_n) * kTileCols;
    const int col0 = n0 + c.wg_n * (kSiluQuant ? p.N / 2 : C::kWN);  // the B rows of the warpgroup
    typename C::ScaleFeed feed = c.scale_feed(row0 + c.wg_m * 64 + c.frag_row, col0, 0);
#pragma unroll
    for (int i = 0; i < C::kSc - 2; ++i) feed.sb[i] += e * q.sb_e;
    auto k_loop = [&](auto col_in_block) {
      c.template accumulate_tile<decltype(col_in_block)::value>(acc, feed, 0, p.num_kb);
    };
    c.sa_shift = row0 & 3;
    with_crossing_class<T>(col0 % 128, k_loop);
    if constexpr (kSiluQuant) {
      silu_quantize(c, acc, q, reinterpret_cast<uint32_t*>(smem_c), row0, row_end, n0, lane);
    } else if (p.tma_store && (row0 + BM <= row_end || row_end == p.M)) {
      // Every row is the expert's, or past the output's end (TMA skips those rows, and columns past N).
      c.store_through_smem(acc, row0, n0);
    } else {
      const int frag_col = 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < C::kWN / 8; ++j) {
        const int gc = col0 + 8 * j + frag_col;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int gr = row0 + c.wg_m * 64 + c.frag_row + 8 * h;
          if (gr < row_end && gc < p.N)
            *reinterpret_cast<uint32_t*>(p.out + int64_t(gr) * p.out_sm + gc) =
                pack_bf16(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }
      }
    }
  }
  c.finish();
}

}  // namespace fp8gemm::sm90::grouped_tiles
