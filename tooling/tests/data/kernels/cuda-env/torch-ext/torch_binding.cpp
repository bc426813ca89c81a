// ATen/cuda/CUDAContext.h includes the cuBLAS, cuSPARSE and cuSOLVER headers.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/library.h>

#include "registration.h"

void clamp_cuda(float* x, int64_t n, cudaStream_t stream);
int visible_devices();

void clamp(at::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous(),
              "clamp: x must be a contiguous float32 CUDA tensor");
  clamp_cuda(x.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream().stream());
}

int64_t devices() { return visible_devices(); }

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("clamp(Tensor! x) -> ()");
  ops.impl("clamp", at::kCUDA, &clamp);
  ops.def("devices() -> int", &devices);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
