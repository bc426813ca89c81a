#pragma once

#include <torch/all.h>

// out = max(x, 0), elementwise; out and x are contiguous and of the same shape and dtype.
void relu(torch::Tensor& out, const torch::Tensor& x);
