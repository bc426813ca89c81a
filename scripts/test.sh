#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   the pre-commit hooks' lint and format checks, typecheck (mypy), kbuild's own tests, every kernel's
#   CPU tests through the `kernels` loader, the CUDA variants compiled against torch 2.14.1 (cu130),
#   ROCm device code compiled for gfx942 (compile-only: no AMD GPU here), and actionlint on the workflows.
# Set KBUILD_SKIP="cuda rocm" to skip the slow compile-only stages on a workstation.
#
# CI's machine has 2 cores and the suite is mostly compiling, so a few stages run beside the others to
# keep both cores busy: .venv-cu130 is set up beside .venv; the kernels' CPU variants build beside the
# lint, format and type checks; the CUDA variants compile beside everything after that, at the lowest
# priority (nice 19), so they take only the time the foreground leaves; kbuild's quick tests run on 2
# pytest-xdist workers. The foreground stages print as they go; a stage beside them keeps its output
# in a log, printed whole when it ends ("=== ... beside ..."). A failed stage stops the others.
set -euo pipefail
cd "$(dirname "$0")/.."
skip=" ${KBUILD_SKIP:-} "
logs=$(mktemp -d "${TMPDIR:-/tmp}/kbuild-test.XXXXXX")
# Each stage's time is printed when it ends, and all of them at the end.
timings=()
current="" started=$SECONDS
end_stage() {
  if [ -n "$current" ]; then
    timings+=("=== $current ($((SECONDS - started)) s) ===")
    printf '%s\n' "${timings[-1]}"
  fi
  current=""
}
stage() {
  end_stage
  current="$*" started=$SECONDS
  printf '\n=== %s ===\n' "$*"
}

# Stages beside the foreground: `beside ID TITLE COMMAND...` starts one, `collect ID` waits for it
# and prints its output and time; a failed one fails the suite.
declare -A titles=() pids=()
beside() {
  local id=$1 title=$2
  shift 2
  titles[$id]=$title
  printf '\n=== %s: started beside the others ===\n' "$title"
  (
    start=$SECONDS status=0
    "$@" >"$logs/$id.log" 2>&1 </dev/null || status=$?
    echo "$status $((SECONDS - start))" >"$logs/$id.status"
    exit "$status"
  ) &
  pids[$id]=$!
}
collect() {
  local id=$1 status=0 seconds
  end_stage
  wait "${pids[$id]}" || status=$?
  unset "pids[$id]"
  seconds=$(cut -d' ' -f2 "$logs/$id.status" 2>/dev/null || echo "?")
  printf '\n=== %s ===\n' "${titles[$id]}"
  cat "$logs/$id.log"
  if [ "$status" -ne 0 ]; then
    timings+=("=== ${titles[$id]} FAILED (exit $status, $seconds s) ===")
    printf '%s\n' "${timings[-1]}"
    return "$status"
  fi
  timings+=("=== ${titles[$id]} ($seconds s) ===")
  printf '%s\n' "${timings[-1]}"
}
# On the way out (a failed stage included): stop what still runs beside, print its output so far,
# then the summary.
kill_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    kill_tree "$child"
  done
  kill "$1" 2>/dev/null || true
}
finish() {
  local status=$? id
  if [ "$status" -ne 0 ] && [ -n "$current" ]; then
    timings+=("=== $current FAILED (exit $status, $((SECONDS - started)) s) ===")
    current=""
  fi
  end_stage
  for id in "${!pids[@]}"; do
    kill_tree "${pids[$id]}"
    wait "${pids[$id]}" 2>/dev/null || true
    printf '\n=== %s: stopped, a stage failed; its output so far ===\n' "${titles[$id]}"
    cat "$logs/$id.log" 2>/dev/null || true
  done
  rm -rf "$logs"
  printf '\n=== stage times (total %d s; a stage marked "beside" ran alongside others) ===\n' "$SECONDS"
  printf '%s\n' "${timings[@]}"
  exit "$status"
}
trap finish EXIT

cuda=1 rocm=1
[[ "$skip" != *" cuda "* ]] || cuda=0
[[ "$skip" != *" rocm "* ]] || rocm=0
kernels=()
for kernel in kernels/*/; do
  kernels+=("${kernel%/}")
done

stage "setup (system packages, .venv; .venv-cu130 beside it)"
bash scripts/system-packages.sh
if [ "$cuda" = 1 ]; then
  beside cuda-env "setup: .venv-cu130 (torch 2.14.1 cu130; beside)" bash scripts/cuda-compile.sh --setup
fi
bash scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

# Each kernel's CPU variant is built first, beside the checks: a kernel builds one variant at a time
# (its .kbuild/build.lock), and its CUDA build, beside the quick tests, comes next.
build_cpu_variants() {
  local kernel pids=() status=0
  for kernel in "${kernels[@]}"; do
    kbuild build "$kernel" 2>&1 | sed -u "s|^|  [$(basename "$kernel")] |" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || status=1
  done
  return $status
}
beside cpu-builds "kernel builds: ${kernels[*]} (CPU; beside)" build_cpu_variants

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

collect cpu-builds
if [ "$cuda" = 1 ]; then
  collect cuda-env
  nvcc_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  beside cuda "CUDA variants compile (torch 2.14.1 cu130, nvcc $nvcc_version; beside, nice 19)" \
    nice -n 19 bash scripts/cuda-compile.sh --no-setup
fi

stage "kbuild tests (quick set, 2 pytest-xdist workers; the slow set is pytest -m slow)"
python -m pytest tooling/tests -q -m "not slow" -n 2

stage "kernel-builder compatibility: test kernels build and pass their tests (CPU)"
python -m pytest tooling/tests/test_compat.py tooling/tests/test_kb_corpus.py -q -m slow \
  -k "stable_split_cpu or stable_cpu_kernel or test_kb_corpus"

for kernel in "${kernels[@]}"; do
  stage "kernel tests: $kernel (CPU, through kernels.get_kernel; built above)"
  kbuild test "$kernel" --no-build -- -q -m "not slow"
done

# The same builds with kernels 0.16, the version transformers 5.17 takes (.venv has 0.17), and transformers
# 5.17: each kernel's kernelize tests in a throwaway environment (scripts/kernels-compat.sh).
stage "kernel tests with kernels 0.16 and transformers 5.17 (CPU, -k kernelize; built above)"
bash scripts/kernels-compat.sh "${kernels[@]}"

if [ "$rocm" = 1 ]; then
  stage "ROCm device code compiles for gfx942 (compile-only, not run on hardware)"
  bash scripts/rocm-compile.sh
fi

if [ "$cuda" = 1 ]; then
  stage "kernel-builder compatibility: CUDA test kernels compile"
  KBUILD_CUDA_ENV="$PWD/.venv-cu130" python -m pytest tooling/tests/test_compat.py -q -m slow \
    -k "cuda_env_kernel_compiles or stable_split_cuda_variant_compiles or device_lambda_kernel_compiles"
fi

stage "actionlint"
bash scripts/actionlint.sh

[ "$cuda" = 0 ] || collect cuda
