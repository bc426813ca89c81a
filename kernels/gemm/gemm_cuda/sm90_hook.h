#pragma once
// The seam between the CUDA dispatch (gemm_dispatch.cu) and the Hopper fast path
// (kernels/gemm/gemm_sm90/, compiled for sm_90a only).
//
// The Hopper sources include this header and DEFINE the two functions below in
// namespace fp8gemm::sm90 (same signatures, nothing else needed: no define, no
// registration). They are declared weak and hidden:
//   - when no Hopper source is linked into the extension, their addresses are null and
//     the dispatch takes the general path (gemm_general.cu);
//   - when one is, the calls bind inside this shared library only, never to another
//     loaded build of the kernel.
//
// Calling contract (what the dispatch guarantees before calling):
//   - the current device is compute capability 9.0 and GEMM_FORCE_GENERAL is not set;
//   - args has passed the binding's checks: M, N, K >= 1, scale shapes as in gemm_args.h,
//     any strides (the fast path declines layouts it does not take);
//   - workspace points to workspace_size bytes of device memory (possibly nullptr when that
//     is 0), usable on `stream` until the queued work finishes. try_gemm declines when that
//     is less than workspace_bytes(args), so the dispatch need not ask for it again.
#include <cuda_runtime.h>

#include <cstddef>

#include "gemm_common/gemm_args.h"
#include "gemm_common/moe_args.h"

namespace fp8gemm::sm90 {

// Device bytes of scratch try_gemm needs for args (0 when it needs none or would decline).
__attribute__((weak, visibility("hidden"))) size_t workspace_bytes(const GemmArgs& args);

// Makes later calls that take the wgmma tiles use this configuration (block_m 0: the tables'
// and cost model's again); an error message for a tile without kernels. The decode kernel
// still takes the problems it takes (GEMM_FORCE_NO_DECODE=1 switches it off).
__attribute__((weak, visibility("hidden"))) Status force_config(int block_m, int block_n, int split);

// Queues the Hopper kernel for args on stream and sets *launched = true, or sets
// *launched = false and returns kOk to decline (the dispatch then runs the general path).
// Any other return value is an error message (static string); nothing aborts.
__attribute__((weak, visibility("hidden"))) Status try_gemm(const GemmArgs& args, void* workspace,
                                                            size_t workspace_size, cudaStream_t stream,
                                                            bool* launched);

// Queues the grouped (mixture-of-experts) GEMM for args on stream and sets *launched, or declines
// (*launched = false, kOk): the binding then loops over the experts with gemm_cuda. Everything it
// needs to know about the rows is read on the device (no host synchronization, capturable).
__attribute__((weak, visibility("hidden"))) Status try_grouped_gemm(const GroupedGemmArgs& args,
                                                                    cudaStream_t stream, bool* launched);

// Whether try_grouped_gemm's wgmma tiles would take args but for the layout of A's scales, which they
// read M-contiguous in 16-byte aligned K blocks: a copy into that layout then buys the tiles.
__attribute__((weak, visibility("hidden"))) bool tiles_want_scales_copied(const GroupedGemmArgs& args);

}  // namespace fp8gemm::sm90
