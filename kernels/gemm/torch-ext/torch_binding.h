#pragma once

#include <torch/torch.h>

// out = gemm(a, b, a_scale, b_scale): FP8 block-scaled GEMM into a bf16 `out`.
// Shapes: a (M, K), b (K, N), a_scale (ceil(K/128), M), b_scale (ceil(K/128), ceil(N/128)),
// out (M, N). Any strides.
void gemm(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
          const torch::Tensor& a_scale, const torch::Tensor& b_scale);

// out = gemm_nt(a, b, a_scale, b_scale) = gemm(a, b.T, a_scale.T, b_scale.T): the same product
// in the layout of DeepGEMM, vLLM and torch._scaled_mm. Shapes: a (M, K), b (N, K),
// a_scale (M, ceil(K/128)), b_scale (ceil(N/128), ceil(K/128)), out (M, N). Any strides.
void gemm_nt(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b,
             const torch::Tensor& a_scale, const torch::Tensor& b_scale);

// Makes later CUDA calls take the general path (also: environment GEMM_FORCE_GENERAL=1).
// No effect on other backends.
void force_general_path(bool force);
bool general_path_forced();
