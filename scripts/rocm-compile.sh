#!/usr/bin/env bash
# Compile every kernel's ROCm device code for its rocm-archs (gfx942) with Debian's clang-19
# and HIP headers, device-only: no AMD GPU runs it here. gemm's fast path must contain the
# FP8 MFMA instructions (v_mfma_f32_*_fp8_fp8), or this fails. The two kernels compile side
# by side, one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
.venv/bin/kbuild rocm-compile kernels/relu >"$logs/relu.log" 2>&1 &
relu=$!
.venv/bin/kbuild rocm-compile kernels/gemm --require-mfma --in-function mfma_gemm_kernel >"$logs/gemm.log" 2>&1 &
gemm=$!
failed=0
wait $relu || failed=1
cat "$logs/relu.log"
wait $gemm || failed=1
cat "$logs/gemm.log"
exit $failed
