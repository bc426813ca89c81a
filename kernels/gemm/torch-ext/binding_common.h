#pragma once
// What the two binding files (torch_binding.cpp, moe_binding.cpp) share; defined in torch_binding.cpp.
#include <ATen/core/Tensor.h>

#include "gemm_common/fp8_quantize.h"
#include "gemm_common/launchers.h"

namespace binding {

bool is_fp8(at::ScalarType t);

// Whether two elements of a 2-D tensor share memory (an expanded tensor, overlapping strides).
bool elements_share_memory(const at::Tensor& t);

// Whether the byte ranges of two tensors meet.
bool overlaps(const at::Tensor& x, const at::Tensor& y);

// bfloat16, float16 or float32 as the launchers' InputType; raises naming op and argument otherwise.
fp8gemm::InputType float_type(const char* op, const char* name, const at::Tensor& t);

// Raises with the op's name and the launcher's message unless status is kOk.
void check_status(const char* op, fp8gemm::Status status);

// A described dense GEMM (inputs checked) on `device`, with the workspace its launcher asks for.
void run_dense_gemm(const char* op, const fp8gemm::GemmArgs& args, const at::Device& device);

#if defined(ROCM_KERNEL)
hipStream_t current_hip_stream(const at::Device& device);
#endif

}  // namespace binding
