#!/usr/bin/env bash
# Compile every kernel's ROCm device code for its rocm-archs (gfx942) with Debian's clang-19
# and HIP headers, device-only: no AMD GPU runs it here. gemm's fast path must contain the
# FP8 MFMA instructions (v_mfma_f32_*_fp8_fp8), or this fails. The two kernels compile side
# by side, one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh
# Each kernel's output streams as it comes, its lines prefixed with [<kernel>], between a start
# and an end line.
compile() {
  local name=$1 start=$SECONDS
  shift
  echo "rocm-compile: kernels/$name: started"
  if .venv/bin/kbuild rocm-compile "kernels/$name" "$@" 2>&1 | sed -u "s|^|  [$name] |"; then
    echo "rocm-compile: kernels/$name compiled in $((SECONDS - start)) s"
  else
    local status=$?
    echo "rocm-compile: kernels/$name FAILED (exit $status) after $((SECONDS - start)) s"
    return "$status"
  fi
}
compile relu &
relu=$!
compile gemm --require-mfma --in-function mfma_gemm_kernel &
gemm=$!
failed=0
wait $relu || failed=1
wait $gemm || failed=1
exit $failed
