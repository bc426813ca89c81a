#pragma once
// The Hopper path's small-M (decode) kernel, host side (sm90_decode.cu; kernel in
// sm90_decode.cuh). try_gemm (sm90_gemm.cu) hands it the problems decode_takes() accepts.
#include <cuda_runtime.h>

#include <cstdint>

#include "gemm_common/gemm_args.h"

#pragma GCC visibility push(hidden)  // internal to the extension

namespace fp8gemm::sm90 {

// A launch shape: each warp's tile is 16 * wr weight rows x 8 * tn tokens (wr and tn 1 or 2);
// K is split over k_warps warps of a CTA (1, 2, 4 or 8; its other warps take the next weight
// tiles) and over `cluster` CTAs (1, 2, 4 or 8).
struct DecodeConfig {
  int wr = 1;
  int tn = 1;
  int k_warps = 8;
  int cluster = 1;
};

// Whether the decode kernel takes the problem on a GPU with num_sms SMs (h200_class: an H200-class
// GPU, DeviceInfo): e4m3fn, M small enough for it to win (measured per (N, K) on 132-SM H100s, a
// rule elsewhere; declined on an H200-class GPU where an SM90_SMALL_M_H200 entry covers M), A and
// B K-contiguous in 16-byte aligned rows, and not switched off (environment
// GEMM_FORCE_NO_DECODE=1, read once).
bool decode_takes(const GemmArgs& g, int num_sms, bool h200_class);

// The configuration for a problem size on a GPU with num_sms SMs.
DecodeConfig choose_decode_config(int64_t M, int64_t N, int64_t K, int num_sms);

// Queues the kernel; kOk or the launch error.
Status run_decode(const GemmArgs& g, const DecodeConfig& config, cudaStream_t stream);

}  // namespace fp8gemm::sm90

#pragma GCC visibility pop
