#pragma once
// The descriptions of the mixture-of-experts ops that every backend's launcher takes: routing
// (top-k expert ids -> rows sorted by expert), the grouped FP8 GEMM over those rows, and the
// weighted combine of each token's rows. No torch header: the binding fills these after checks.
//
// Rows: the T * top_k (token, expert) slots of a batch, sorted by expert. Expert e owns rows
// [offsets[e], offsets[e + 1]) ("contiguous" layout), or, in the "masked" layout, rows
// [e * capacity, e * capacity + counts[e]) of an (E, capacity, ...) buffer. Slots whose expert id
// is outside [0, E) (transformers' "no expert" is id == E) own no row and add nothing.
#include <cstdint>

#include "gemm_common/fp8_quantize.h"
#include "gemm_common/gemm_args.h"

namespace fp8gemm {

enum class IndexType : int32_t { I32 = 0, I64 = 1 };

// route: ids (T, top_k) -> offsets (E + 1), optionally row_token (T * top_k: the token of each row;
// rows from offsets[E] on are left as they were) and slot_row (T * top_k: the row of each slot, -1 for
// a slot without an expert); optionally active (E + 1): active[0] experts own rows, their ids in
// order from active[1] on. The order of rows inside an expert is unspecified (each row's result
// does not depend on it).
struct RouteArgs {
  int64_t tokens = 0;
  int32_t top_k = 0, experts = 0;
  const void* ids = nullptr;  // ids[t * ids_stride_t + j * ids_stride_j]
  IndexType id_type = IndexType::I64;
  int64_t ids_stride_t = 0, ids_stride_j = 0;
  int32_t* offsets = nullptr;
  int32_t* row_token = nullptr;
  int32_t* slot_row = nullptr;
  int32_t* active = nullptr;

  FP8GEMM_HD int64_t slots() const { return tokens * top_k; }
};

// combine: out[t, h] = sum over j of weights[t, j] * rows[slot_row[t * top_k + j], h], in fp32,
// j in order (deterministic), rounded once to out's dtype. rows are bf16.
struct CombineArgs {
  int64_t tokens = 0, hidden = 0;
  int32_t top_k = 0;
  const uint16_t* rows = nullptr;
  int64_t rows_stride = 0;
  int64_t row_count = 0;  // slot_row entries outside [0, row_count) add nothing
  const int32_t* slot_row = nullptr;
  const void* weights = nullptr;  // weights[t * weights_stride_t + j * weights_stride_j]
  InputType weight_type = InputType::F32;
  int64_t weights_stride_t = 0, weights_stride_j = 0;
  void* out = nullptr;  // out[t * out_stride + h], bf16 or fp32
  InputType out_type = InputType::BF16;
  int64_t out_stride = 0;
};

FP8GEMM_HD float load_weight(const CombineArgs& a, int64_t t, int64_t j) {
  const int64_t at = t * a.weights_stride_t + j * a.weights_stride_j;
  switch (a.weight_type) {
    case InputType::BF16:
      return bf16_to_float(static_cast<const uint16_t*>(a.weights)[at]);
    case InputType::F16:
      return f16_to_float(static_cast<const uint16_t*>(a.weights)[at]);
    default:
      return static_cast<const float*>(a.weights)[at];
  }
}

FP8GEMM_HD void store_combined(const CombineArgs& a, int64_t t, int64_t h, float value) {
  if (a.out_type == InputType::BF16) {
    static_cast<uint16_t*>(a.out)[t * a.out_stride + h] = float_to_bf16_bits(value);
  } else {
    static_cast<float*>(a.out)[t * a.out_stride + h] = value;
  }
}

// The expert id of token t's j-th slot.
FP8GEMM_HD int64_t id_at(const RouteArgs& a, int64_t t, int64_t j) {
  const int64_t at = t * a.ids_stride_t + j * a.ids_stride_j;
  return a.id_type == IndexType::I64 ? static_cast<const int64_t*>(a.ids)[at]
                                     : int64_t(static_cast<const int32_t*>(a.ids)[at]);
}

FP8GEMM_HD int64_t load_id(const RouteArgs& a, int64_t slot) {
  return id_at(a, slot / a.top_k, slot % a.top_k);
}

// grouped GEMM: for each expert e and each row r it owns,
//   out[r, n] = sum_k a[arow, k] * a_scale[arow, k / 128] * b[e, n, k] * b_scale[e, n / 128, k / 128]
// with arow = row_index[r] when row_index is set (a gather of token rows), else r.
struct GroupedGemmArgs {
  int64_t experts = 0, N = 0, K = 0;
  int64_t rows = 0;      // rows of out (and of row_index): T * top_k, or E * capacity when masked
  int64_t a_rows = 0;    // rows of a
  int64_t capacity = 0;  // masked layout only
  bool masked = false;
  const int32_t* expert_rows = nullptr;  // offsets (E + 1), or counts (E) when masked
  const int32_t* active = nullptr;       // optional: route's list of the experts that own rows
  Fp8Format format = Fp8Format::E4M3FN;
  const uint8_t* a = nullptr;
  int64_t a_stride_m = 0, a_stride_k = 0;
  const int32_t* row_index = nullptr;
  const float* a_scale = nullptr;
  int64_t a_scale_stride_m = 0, a_scale_stride_kb = 0;
  const uint8_t* b = nullptr;
  int64_t b_stride_e = 0, b_stride_n = 0, b_stride_k = 0;
  const float* b_scale = nullptr;
  int64_t b_scale_stride_e = 0, b_scale_stride_nb = 0, b_scale_stride_kb = 0;
  uint16_t* out = nullptr;
  int64_t out_stride_m = 0, out_stride_n = 0;
  // Where Hopper's wgmma tiles do not take the layout: the streaming one-launch kernel is wanted even
  // where a host loop of dense GEMMs would be faster (inside a CUDA graph capture; few rows per expert).
  bool one_launch = true;
  // A was written by the quantization kernel queued just before on the same stream, which waits for
  // everything queued before it (the routing included) and then lets the next kernel launch: Hopper's
  // tiles may then read the routing and B before A is ready (GemmArgs::after_quantize).
  bool after_quantize = false;
  // Set: SiLU-and-mul with quantization in the GEMM (Hopper's 64-row tiles only; grouped_gemm_cuda
  // launches nothing otherwise): b's rows [0, N/2) are the gate and [N/2, N) the up projection, out is
  // not written, and silu_q[r, c] (e4m3fn, N/2 columns) with silu_scale[r * stride_m + c / 128 *
  // stride_kb] get what the quantization of SiLU-and-mul of out's bf16 rows would give.
  uint8_t* silu_q = nullptr;
  float* silu_scale = nullptr;
  int64_t silu_q_stride_m = 0, silu_scale_stride_m = 0, silu_scale_stride_kb = 0;

  FP8GEMM_HD int64_t k_blocks() const { return ceil_div(K, kScaleBlock); }
  FP8GEMM_HD int64_t n_blocks() const { return ceil_div(N, kScaleBlock); }
  // A's scales as TMA reads them (Hopper's grouped tiles): M-contiguous, each K block's 16-byte aligned.
  bool a_scales_m_contiguous_16() const {
    return fp8gemm::a_scales_m_contiguous_16(a_scale, a_scale_stride_m, a_scale_stride_kb, rows, k_blocks());
  }
  // Rows per expert that owns any, on average (masked: the capacity).
  FP8GEMM_HD int64_t rows_per_expert() const {
    if (masked) return capacity;
    const int64_t owners = experts < rows ? experts : rows;
    return owners > 0 ? ceil_div(rows, owners) : 0;
  }
};

// The rows expert e owns: [*first, *first + count), count clamped to what the layout holds.
FP8GEMM_HD int64_t expert_row_range(const GroupedGemmArgs& g, int64_t e, int64_t* first) {
  if (g.masked) {
    *first = e * g.capacity;
    const int64_t count = g.expert_rows[e];
    return count < 0 ? 0 : (count > g.capacity ? g.capacity : count);
  }
  int64_t lo = g.expert_rows[e], hi = g.expert_rows[e + 1];
  lo = lo < 0 ? 0 : (lo > g.rows ? g.rows : lo);
  hi = hi < lo ? lo : (hi > g.rows ? g.rows : hi);
  *first = lo;
  return hi - lo;
}

// The dense GEMM of expert e's rows [first, first + count) (row_index already applied by the
// caller when it was set: a's rows are then out's rows).
inline GemmArgs expert_gemm(const GroupedGemmArgs& g, int64_t e, int64_t first, int64_t count) {
  GemmArgs args;
  args.M = count;
  args.N = g.N;
  args.K = g.K;
  args.format = g.format;
  args.a = g.a + first * g.a_stride_m;
  args.a_stride_m = g.a_stride_m;
  args.a_stride_k = g.a_stride_k;
  args.a_scale = g.a_scale + first * g.a_scale_stride_m;
  args.a_scale_stride_m = g.a_scale_stride_m;
  args.a_scale_stride_kb = g.a_scale_stride_kb;
  args.b = g.b + e * g.b_stride_e;
  args.b_stride_k = g.b_stride_k;
  args.b_stride_n = g.b_stride_n;
  args.b_scale = g.b_scale + e * g.b_scale_stride_e;
  args.b_scale_stride_kb = g.b_scale_stride_kb;
  args.b_scale_stride_nb = g.b_scale_stride_nb;
  args.out = g.out + first * g.out_stride_m;
  args.out_stride_m = g.out_stride_m;
  args.out_stride_n = g.out_stride_n;
  return args;
}

}  // namespace fp8gemm
