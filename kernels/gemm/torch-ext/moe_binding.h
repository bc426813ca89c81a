#pragma once
// Mixture-of-experts ops (torch-ext/moe_binding.cpp; semantics: gemm_common/moe_args.h).

#include <ATen/core/Tensor.h>

// (offsets (E + 1), row_token (T * k), slot_row (T * k)), all int32: the (token, expert) slots of
// top_k_index (T, k) sorted by expert. Ids outside [0, E) own no row (slot_row -1).
std::tuple<at::Tensor, at::Tensor, at::Tensor> moe_route(const at::Tensor& top_k_index, int64_t num_experts);

// The grouped FP8 GEMM, b (E, N, K) with scales (E, ceil(N/128), ceil(K/128)):
// contiguous (masked false): a (A, K), a_scale (A, ceil(K/128)), out (R, N), expert_rows = offsets
//   (E + 1); row r of out takes a's row row_index[r] (or r without row_index).
// masked: a (E, C, K), a_scale (E, C, ceil(K/128)), out (E, C, N), expert_rows = counts (E).
void grouped_gemm_nt(at::Tensor& out, const at::Tensor& a, const at::Tensor& a_scale,
                     const std::optional<at::Tensor>& row_index, const at::Tensor& b,
                     const at::Tensor& b_scale, const at::Tensor& expert_rows, bool masked);

// (T, H): sum over j of top_k_weights[t, j] * rows[slot_row[t * k + j]] in fp32, in out_dtype.
at::Tensor moe_combine(const at::Tensor& rows, const at::Tensor& slot_row, const at::Tensor& top_k_weights,
                       at::ScalarType out_dtype);

// The experts block of a mixture of experts with FP8 weights: route, quantize, the first grouped
// projection (gate | up when gated), SiLU(-and-mul) and quantization, the down projection, combine.
at::Tensor fp8_experts(const at::Tensor& x, const at::Tensor& top_k_index, const at::Tensor& top_k_weights,
                       const at::Tensor& w_in, const at::Tensor& w_in_scale, const at::Tensor& w_out,
                       const at::Tensor& w_out_scale, bool gated);
