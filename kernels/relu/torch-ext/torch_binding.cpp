// ATen's Tensor and the op registry only, not <torch/all.h>: this file compiles in ~4 s instead of ~20.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "registration.h"
#include "relu_common.h"
#include "torch_binding.h"

namespace {

bool kernel_dtype(const at::Tensor& x, relu_kernels::DType* dtype) {
  switch (x.scalar_type()) {
    case at::kFloat:
      *dtype = relu_kernels::DType::Float32;
      return true;
    case at::kHalf:
      *dtype = relu_kernels::DType::Float16;
      return true;
    case at::kBFloat16:
      *dtype = relu_kernels::DType::BFloat16;
      return true;
    default:
      return false;
  }
}

}  // namespace

void relu(at::Tensor& out, const at::Tensor& x) {
  TORCH_CHECK(out.device() == x.device(), "relu: out is on ", out.device(), " but x is on ", x.device(),
              "; expected both on the same device");
  TORCH_CHECK(out.scalar_type() == x.scalar_type(), "relu: out has dtype ", out.scalar_type(),
              ", expected the dtype of x (", x.scalar_type(), ")");
  TORCH_CHECK(out.sizes() == x.sizes(), "relu: out has shape ", out.sizes(), ", expected the shape of x ",
              x.sizes());
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(),
              "relu: x and out must be contiguous; call .contiguous()");
  // Contiguous, so each covers one byte range: the same range is an in-place relu (each element
  // is read before it is written); a shifted one would read values already overwritten.
  const auto x_start = reinterpret_cast<uintptr_t>(x.data_ptr());
  const auto out_start = reinterpret_cast<uintptr_t>(out.data_ptr());
  const auto bytes = uintptr_t(x.numel()) * uintptr_t(x.element_size());
  TORCH_CHECK(
      x.numel() == 0 || x_start == out_start || x_start + bytes <= out_start || out_start + bytes <= x_start,
      "relu: out partly overlaps x; pass out=x to work in place, or a separate tensor");
  relu_kernels::DType dtype;
  TORCH_CHECK(kernel_dtype(x, &dtype), "relu: x must be float32, float16 or bfloat16, got ", x.scalar_type());
#if defined(CPU_KERNEL)
  const char* error = relu_kernels::relu_cpu(out.data_ptr(), x.data_ptr(), x.numel(), dtype);
#else
  const c10::cuda::CUDAGuard guard(x.device());
  const char* error = relu_kernels::relu_gpu(out.data_ptr(), x.data_ptr(), x.numel(), dtype,
                                             c10::cuda::getCurrentCUDAStream().stream());
#endif
  TORCH_CHECK(error == nullptr, error);
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor! out, Tensor x) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("relu", at::kCPU, &relu);
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("relu", at::kCUDA, &relu);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
