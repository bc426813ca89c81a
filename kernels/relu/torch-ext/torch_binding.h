#pragma once

#include <ATen/core/Tensor.h>

// out = max(x, 0), elementwise; out and x are contiguous and of the same shape and dtype.
void relu(at::Tensor& out, const at::Tensor& x);
