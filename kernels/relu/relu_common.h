#pragma once
// Launchers shared by every backend: raw pointers, an element count and (on GPUs) a stream.
// No torch header here, so the device code compiles without torch (e.g. for ROCm).
#include <cstdint>

namespace relu_kernels {

enum class DType : int32_t { Float32 = 0, Float16 = 1, BFloat16 = 2 };

// Returns nullptr on success or a static message naming what went wrong.
const char* relu_cpu(void* out, const void* in, int64_t numel, DType dtype);
const char* relu_gpu(void* out, const void* in, int64_t numel, DType dtype, void* stream);

}  // namespace relu_kernels
