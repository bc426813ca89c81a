#!/usr/bin/env bash
# Compile every kernel's ROCm device code for its rocm-archs (gfx942) with Debian's clang-19
# and HIP headers, device-only: no AMD GPU runs it here. gemm's fast path must contain the
# FP8 MFMA instructions (v_mfma_f32_*_fp8_fp8), or this fails.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(clang-19 lld-19 libamdhip64-dev rocm-device-libs)
if ! command -v clang++-19 >/dev/null || [ ! -f /usr/include/hip/hip_runtime.h ]; then
  echo "rocm-compile: installing ${packages[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi
.venv/bin/kbuild rocm-compile kernels/relu
.venv/bin/kbuild rocm-compile kernels/gemm --require-mfma --in-function mfma_gemm_kernel
