#pragma once
// ROCm (HIP) path of the block-scaled FP8 GEMM for AMD Instinct MI300 (gfx942).
//
// The entry points are declared once, in gemm_common/launchers.h, for the binding:
//
//   namespace fp8gemm {
//   Status gemm_rocm(const GemmArgs& args, void* workspace, size_t workspace_bytes,
//                    hipStream_t stream);
//   size_t gemm_rocm_workspace_bytes(const GemmArgs& args);
//   }
//
// Calling contract: the binding (under ROCM_KERNEL) checks the tensors, fills GemmArgs,
// allocates gemm_rocm_workspace_bytes(args) bytes of device memory (nullptr when 0) and calls
// gemm_rocm on torch's current HIP stream. Every M, N, K >= 0, every stride layout and both
// Fp8Format values are computed; the return value is kOk or a static message (null operand,
// workspace too small, launch failure). Nothing aborts.
#include "gemm_common/launchers.h"
