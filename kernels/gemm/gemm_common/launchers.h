#pragma once
// Entry points of every backend of the FP8 block-scaled GEMM, as the torch binding calls
// them. No torch and no CUDA/HIP header here: stream types are forward-declared exactly as
// the CUDA and HIP runtimes declare them.
#include <cstddef>

#include "gemm_common/fp8_quantize.h"
#include "gemm_common/gemm_args.h"
#include "gemm_common/moe_args.h"

typedef struct CUstream_st* cudaStream_t;
typedef struct ihipStream_t* hipStream_t;

namespace fp8gemm {

// gemm_cpu/gemm_cpu.cpp: multithreaded, any strides, M/N/K may be 0.
Status gemm_cpu(const GemmArgs& args);

// gemm_cuda/gemm_dispatch.cu: Hopper fast path where it is linked and takes the problem,
// else the general tiled kernel (sm_80+). workspace: at least
// gemm_cuda_workspace_bytes(args, device_sm) bytes of device memory (nullptr when 0).
Status gemm_cuda(const GemmArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream);
// device_sm = 10 * major + minor of the device the call will run on (90 for an H100).
size_t gemm_cuda_workspace_bytes(const GemmArgs& args, int device_sm);
// Forces the general path for later calls (initially: environment GEMM_FORCE_GENERAL=1).
void gemm_cuda_force_general(bool force);
bool gemm_cuda_general_forced();
// Makes later Hopper calls on the wgmma tiles use block_m x block_n, split (block_m 0: the
// tuned tables and cost model again). kOk, or why not (no Hopper path, no such tile).
Status gemm_cuda_force_tile(int block_m, int block_n, int split);

// gemm_rocm/ (the ROCm helper implements these): same contract as gemm_cuda.
Status gemm_rocm(const GemmArgs& args, void* workspace, size_t workspace_bytes, hipStream_t stream);
size_t gemm_rocm_workspace_bytes(const GemmArgs& args);

// Activation quantization (the rounding: gemm_common/fp8_quantize.h), one pass, any M and K.
// gemm_cpu/quantize_cpu.cpp, gemm_cuda/quantize.cu (sm_80+), gemm_rocm/quantize_rocm.hip.
Status quantize_cpu(const QuantizeArgs& args);
Status quantize_cuda(const QuantizeArgs& args, cudaStream_t stream);
Status quantize_rocm(const QuantizeArgs& args, hipStream_t stream);
// SiLU-and-mul in the input's dtype (the CPU's is in the binding, through ATen).
Status silu_mul_cuda(const SiluMulArgs& args, cudaStream_t stream);
Status silu_mul_rocm(const SiluMulArgs& args, hipStream_t stream);

// Mixture-of-experts routing and combine (gemm_common/moe_args.h): gemm_cpu/moe_cpu.cpp,
// gemm_cuda/moe.cu, gemm_rocm/moe_rocm.hip. At most 4096 experts on GPUs.
Status route_cpu(const RouteArgs& args);
Status route_cuda(const RouteArgs& args, cudaStream_t stream);
Status route_rocm(const RouteArgs& args, hipStream_t stream);
Status combine_cpu(const CombineArgs& args);
Status combine_cuda(const CombineArgs& args, cudaStream_t stream);
Status combine_rocm(const CombineArgs& args, hipStream_t stream);
// The grouped GEMM in one launch where the Hopper path takes it (sets *launched); otherwise the
// caller runs gemm_cuda once per expert (expert_gemm()).
Status grouped_gemm_cuda(const GroupedGemmArgs& args, cudaStream_t stream, bool* launched);
// Whether grouped_gemm_cuda would take its one-launch Hopper tiles for args with A's scales copied
// M-contiguous, 16-byte aligned K blocks (each K block's rows padded to a multiple of 4), which it
// does not take as they are.
bool grouped_gemm_cuda_wants_scales_copied(const GroupedGemmArgs& args);

}  // namespace fp8gemm
