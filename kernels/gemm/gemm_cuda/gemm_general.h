#pragma once
// The general CUDA path (gemm_general.cu): any sm_80+ GPU, any shape, any strides.
#include <cuda_runtime.h>

#include "gemm_common/gemm_args.h"

namespace fp8gemm::general {

// Queues the GEMM on stream; returns kOk or the launch error. Needs no workspace.
Status launch(const GemmArgs& args, cudaStream_t stream);

}  // namespace fp8gemm::general
