#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   the pre-commit hooks' lint and format checks, typecheck (mypy), kbuild's own tests, every kernel's
#   CPU tests through the `kernels` loader, the CUDA variants compiled against torch 2.14.1 (cu130),
#   ROCm device code compiled for gfx942 (compile-only: no AMD GPU here), and actionlint on the workflows.
# Set KBUILD_SKIP="cuda rocm" to skip the slow compile-only stages on a workstation.
set -euo pipefail
cd "$(dirname "$0")/.."
skip=" ${KBUILD_SKIP:-} "
# Each stage's time is printed when the next one starts, and all of them at the end.
timings=()
current="" started=$SECONDS
end_stage() {
  if [ -n "$current" ]; then
    timings+=("=== $current ($((SECONDS - started)) s) ===")
    printf '%s\n' "${timings[-1]}"
  fi
}
stage() {
  end_stage
  current="$*" started=$SECONDS
  printf '\n=== %s ===\n' "$*"
}
summary() {
  end_stage
  current=""
  printf '\n=== stage times (total %d s) ===\n' "$SECONDS"
  printf '%s\n' "${timings[@]}"
}
trap summary EXIT

stage "setup (.venv, system packages)"
bash scripts/bootstrap.sh
bash scripts/system-packages.sh
export PATH="$PWD/.venv/bin:$PATH"

# The checks of the pre-commit hooks (.pre-commit-config.yaml), without changing files; kbuild check
# and mypy follow. tooling/tests/test_precommit.py keeps the two lists the same.
stage "lint and format (ruff, ruff format, clang-format: the pre-commit hooks' checks)"
ruff check .
ruff format --check .
git ls-files -z | grep -zE '^kernels/.*\.(c|cc|cpp|h|hpp|cu|cuh|hip)$' | xargs -0 -r clang-format --dry-run --Werror

stage "typecheck (mypy)"
mypy

stage "kbuild check"
kbuild check

stage "kbuild tests (quick set; the slow set is pytest -m slow)"
python -m pytest tooling/tests -q -m "not slow"

stage "kernel-builder compatibility: test kernels build and pass their tests (CPU)"
python -m pytest tooling/tests/test_compat.py -q -m slow -k "stable_split_cpu or stable_cpu_kernel"

for kernel in kernels/*/; do
  stage "kernel tests: ${kernel%/} (CPU, through kernels.get_kernel)"
  kbuild test "${kernel%/}" -- -q -m "not slow"
done

if [[ "$skip" != *" cuda "* ]]; then
  stage "CUDA variants compile (torch 2.14.1 cu130, nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
  bash scripts/cuda-compile.sh
  stage "kernel-builder compatibility: CUDA test kernels compile"
  KBUILD_CUDA_ENV="$PWD/.venv-cu130" python -m pytest tooling/tests/test_compat.py -q -m slow \
    -k "cuda_env_kernel_compiles or stable_split_cuda_variant_compiles or device_lambda_kernel_compiles"
fi

if [[ "$skip" != *" rocm "* ]]; then
  stage "ROCm device code compiles for gfx942 (compile-only, not run on hardware)"
  bash scripts/rocm-compile.sh
fi

stage "actionlint"
bash scripts/actionlint.sh
