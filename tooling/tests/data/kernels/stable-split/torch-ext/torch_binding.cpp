// The CPU build uses ATen's C++ API; the CUDA build only the stable ABI.
#if defined(CUDA_KERNEL)
#define USE_CUDA  // declares the stable shim's CUDA stream accessor
#endif
#include "registration.h"

#if defined(CPU_KERNEL)
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

void scale_cpu(float* out, const float* x, float factor, int64_t n);

at::Tensor scale(const at::Tensor& x, double factor) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "scale: x must be contiguous float32");
  at::Tensor out = at::empty_like(x);
  scale_cpu(out.data_ptr<float>(), x.data_ptr<float>(), static_cast<float>(factor), x.numel());
  return out;
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("scale(Tensor x, float factor) -> Tensor");
  ops.impl("scale", at::kCPU, &scale);
}
#else
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

void scale_cuda(float* out, const float* x, float factor, int64_t n, void* stream);

torch::stable::Tensor scale(torch::stable::Tensor x, double factor) {
  STD_TORCH_CHECK(x.is_contiguous(), "scale: x must be contiguous");
  torch::stable::Tensor out = torch::stable::empty_like(x);
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(x.get_device_index(), &stream));
  scale_cuda(static_cast<float*>(out.data_ptr()), static_cast<const float*>(x.data_ptr()),
             static_cast<float>(factor), x.numel(), stream);
  return out;
}

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) { ops.def("scale(Tensor x, float factor) -> Tensor"); }

STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) { ops.impl("scale", TORCH_BOX(&scale)); }
#endif

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
