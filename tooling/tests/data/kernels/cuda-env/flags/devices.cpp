// A C++ source of a CUDA kernel sees the CUDA toolkit's headers.
#include <cuda_runtime_api.h>

int visible_devices() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}
