#include <hip/hip_bf16.h>
#include <hip/hip_fp8.h>
#include <hip/hip_runtime.h>

#include <cstdint>

using fp8 = __hip_fp8_e4m3_fnuz;
static_assert(sizeof(fp8) == 1 && sizeof(__hip_fp8x4_e4m3_fnuz) == 4, "FP8 types are their storage");
static_assert(fp8::__default_interpret == __HIP_E4M3_FNUZ, "e4m3fnuz interpretation");

// out[i] = bf16(float(a[i]) * scale), four values per thread through the quad type, and an
// e5m2 round trip of the same value through the storage-level conversions.
__global__ void dequant(__hip_bfloat16* out, __hip_fp8_storage_t* roundtrip, const fp8* a, const float* scale,
                        int64_t n) {
  const int64_t i = 4 * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
  if (i + 3 >= n) return;
  const float4 quad = *reinterpret_cast<const __hip_fp8x4_e4m3_fnuz*>(a + i);
  const float values[4] = {quad.x, quad.y, quad.z, quad.w};
  for (int k = 0; k < 4; ++k) {
    out[i + k] = __hip_bfloat16(values[k] * scale[0]);
    roundtrip[i + k] = __hip_cvt_float_to_fp8(float(a[i + k]), __HIP_SATFINITE, __HIP_E5M2_FNUZ);
  }
}

extern "C" void dequant_launch(void* out, void* roundtrip, const void* a, const float* scale, int64_t n,
                               hipStream_t stream) {
  const int64_t threads = (n / 4 + 255) / 256;
  if (threads > 0) {
    dequant<<<threads, 256, 0, stream>>>(static_cast<__hip_bfloat16*>(out), static_cast<__hip_fp8_storage_t*>(roundtrip),
                                         static_cast<const fp8*>(a), scale, n);
  }
}
