#!/usr/bin/env bash
# Compile every kernel's ROCm device code for its rocm-archs (gfx942) with Debian's clang-19
# and HIP headers, device-only: no AMD GPU runs it here. gemm's fast path must contain the
# FP8 MFMA instructions (v_mfma_f32_*_fp8_fp8), or this fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh
.venv/bin/kbuild rocm-compile kernels/relu
.venv/bin/kbuild rocm-compile kernels/gemm --require-mfma --in-function mfma_gemm_kernel
