#include <hip/hip_runtime.h>
#include <torch/all.h>
#include <torch/library.h>

#include "registration.h"

extern "C" void dequant_launch(void* out, void* roundtrip, const void* a, const float* scale, int64_t n,
                               hipStream_t stream);

void dequant(torch::Tensor& out, torch::Tensor& roundtrip, const torch::Tensor& a, const torch::Tensor& scale) {
  TORCH_CHECK(a.scalar_type() == torch::kFloat8_e4m3fnuz && a.is_contiguous() && a.numel() % 4 == 0,
              "dequant: a must be contiguous float8_e4m3fnuz with a multiple of 4 elements");
  dequant_launch(out.data_ptr(), roundtrip.data_ptr(), a.data_ptr(), scale.data_ptr<float>(), a.numel(), 0);
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("dequant(Tensor! out, Tensor! roundtrip, Tensor a, Tensor scale) -> ()");
  ops.impl("dequant", torch::kCUDA, &dequant);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
