#pragma once

#include <ATen/core/Tensor.h>

// out = gemm(a, b, a_scale, b_scale): FP8 block-scaled GEMM into a bf16 `out`.
// Shapes: a (M, K), b (K, N), a_scale (ceil(K/128), M), b_scale (ceil(K/128), ceil(N/128)),
// out (M, N). Any strides.
void gemm(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
          const at::Tensor& b_scale);

// out = gemm_nt(a, b, a_scale, b_scale) = gemm(a, b.T, a_scale.T, b_scale.T): the same product
// in the layout of DeepGEMM, vLLM and torch._scaled_mm. Shapes: a (M, K), b (N, K),
// a_scale (M, ceil(K/128)), b_scale (ceil(N/128), ceil(K/128)), out (M, N). Any strides.
void gemm_nt(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& a_scale,
             const at::Tensor& b_scale);

// Makes later CUDA calls take the general path (also: environment GEMM_FORCE_GENERAL=1).
// No effect on other backends.
void force_general_path(bool force);
bool general_path_forced();

// Makes later Hopper calls on the wgmma tiles use block_m x block_n with `split` CTAs per tile
// (block_m 0: the tuned tables and cost model again); raises on builds without that path or
// for a tile without kernels (the SM90_TILE entries of gemm_sm90/tile_configs.def).
void force_tile_config(int64_t block_m, int64_t block_n, int64_t split);

// (q, scale) = quantize(x, dtype, silu_and_mul): x (M, K) bf16/fp16/fp32 -> q (M, K) FP8 row-major and
// scale (M, ceil(K/128)) float32 with strides (1, M); with silu_and_mul, x is (M, 2K) and
// silu(x[:, :K]) * x[:, K:] is quantized. Rounding: gemm_common/fp8_quantize.h.
std::tuple<at::Tensor, at::Tensor> quantize(const at::Tensor& x, at::ScalarType dtype, bool silu_and_mul);

// quantize into q (M, K) FP8 with contiguous rows and scale (M, ceil(K/128)) float32, any strides,
// given by the caller; with q_row (int32 (x's rows, copies)) defined, q has any number of rows and x's row
// m goes to q's rows q_row[m, :] (an entry outside q's rows is skipped; rows no entry names are left as
// they were).
void quantize_rows_into(const at::Tensor& x, at::ScalarType dtype, bool silu_and_mul, const at::Tensor& q_row,
                        const at::Tensor& q, const at::Tensor& scale);

// out = silu(x[..., :d]) * x[..., d:] in x's dtype.
void silu_and_mul(at::Tensor& out, const at::Tensor& x);

// The FP8 linear layer: x (..., K) bf16/fp16/fp32, weight (N, K) FP8 with one float32 scale per
// 128x128 block, optional bias (N): returns (..., N) in x's dtype, accumulated in fp32, the bias
// added before the one rounding to bf16.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& weight_scale_inv,
                      const std::optional<at::Tensor>& bias);

// fp8_linear of silu(x[..., :K]) * x[..., K:] for x (..., 2K): the SiLU-and-mul is computed in the
// quantization kernel (the down projection of a gated MLP, without a bf16 intermediate).
at::Tensor silu_and_mul_fp8_linear(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& weight_scale_inv, const std::optional<at::Tensor>& bias);
