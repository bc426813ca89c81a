// Only the stable ABI: TORCH_TARGET_VERSION (2.10) hides every other torch API.
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "registration.h"

#if TORCH_TARGET_VERSION != 0x020a000000000000ULL
#error "kbuild defines TORCH_TARGET_VERSION for the [torch] stable-abi version 2.10"
#endif

void negate_cpu(float* out, const float* x, int64_t n);

torch::stable::Tensor negate(torch::stable::Tensor x) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float && x.is_contiguous(),
                  "negate: x must be contiguous float32");
  torch::stable::Tensor out = torch::stable::empty_like(x);
  negate_cpu(static_cast<float*>(out.data_ptr()), static_cast<const float*>(x.data_ptr()), x.numel());
  return out;
}

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) { ops.def("negate(Tensor x) -> Tensor"); }

STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) { ops.impl("negate", TORCH_BOX(&negate)); }

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
