#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/library.h>

#include "registration.h"

void affine_cuda(float* x, int64_t n, float scale, float shift, cudaStream_t stream);

void affine(at::Tensor& x, double scale, double shift) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous(),
              "affine: x must be a contiguous float32 CUDA tensor");
  affine_cuda(x.data_ptr<float>(), x.numel(), static_cast<float>(scale), static_cast<float>(shift),
              at::cuda::getCurrentCUDAStream().stream());
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("affine(Tensor! x, float scale, float shift) -> ()");
  ops.impl("affine", at::kCUDA, &affine);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
