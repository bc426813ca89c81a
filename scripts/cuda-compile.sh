#!/usr/bin/env bash
# Compile every kernel's CUDA variant against torch 2.14.1 (CUDA 13.0) in .venv-cu130.
# Compile-only here: this machine has no GPU (GPU results are in kernels/*/benchmarks/results/).
# The kernels build side by side, each with ninja -j 2: a kernel's longest translation unit
# (gemm's Hopper kernels) would otherwise leave a core idle while the others wait.
# What it compiles is CI's compile check: each [kernel.*] table for one CUDA capability per distinct
# code path of its sources (`kbuild build --one-per-code-path`: the oldest capability on each side of
# every `__CUDA_ARCH__` test, and each arch-specific one such as 9.0a). The release and GPU workflows
# (.github/workflows) compile build.toml's full list, as --all-capabilities does here.
#   --setup             only set up .venv-cu130 (scripts/test.sh does it beside scripts/bootstrap.sh)
#   --no-setup          only compile, in the .venv-cu130 that --setup made
#   --all-capabilities  compile every capability build.toml lists (what a release builds)
set -euo pipefail
cd "$(dirname "$0")/.."
setup=1 compile=1 capabilities=--one-per-code-path
for argument in "$@"; do
  case "$argument" in
    --setup) compile=0 ;;
    --no-setup) setup=0 ;;
    --all-capabilities) capabilities=--all-capabilities ;;
    *)
      echo "usage: bash scripts/cuda-compile.sh [--setup | --no-setup] [--all-capabilities]" >&2
      exit 2
      ;;
  esac
done
if ! command -v nvcc >/dev/null; then
  echo "cuda-compile: nvcc not found; install the CUDA 13.0 toolkit" >&2
  exit 1
fi
if [ "$setup" = 1 ]; then
  if [ ! -x .venv-cu130/bin/python ]; then
    python3 -m venv .venv-cu130
  fi
  # uv, as scripts/bootstrap.sh installs with it (pip took about 20 CPU-seconds more here, 15 of them
  # resolving kbuild's dependencies). uv does not read pip's configuration: the folders of wheels
  # this workplace keeps on disk (torch 2.14.1 and the NVIDIA wheels among them) are named here;
  # elsewhere the wheels come from PyPI.
  .venv-cu130/bin/python -m pip install -q --disable-pip-version-check "uv>=0.8"
  local_wheels=()
  for folder in /opt/pypi-more/files /opt/wheels; do
    if [ -d "$folder" ]; then
      local_wheels+=(--find-links "$folder")
    fi
  done
  uv_install() {
    .venv-cu130/bin/uv pip install --quiet --python .venv-cu130/bin/python "${local_wheels[@]}" "$@"
  }
  # Only torch's headers and libraries are needed to compile and link, not its CUDA wheels (nor its
  # Python files compiled to bytecode: this torch is never imported, it cannot load without them),
  uv_install --no-deps "torch==2.14.1"
  # except the headers of the CUDA libraries ATen/cuda/CUDAContext.h includes (cuBLAS, cuSPARSE,
  # cuSOLVER), which the nvcc toolkit lacks: the NVIDIA wheels of torch's own cuda-toolkit pin.
  # kbuild adds their include folders to CUDA builds.
  cuda_toolkit=$(.venv-cu130/bin/python -c 'import importlib.metadata as m, re
print(next(re.search(r"==\s*([\d.]+)", r)[1] for r in m.requires("torch") if r.startswith("cuda-toolkit[")))')
  uv_install "cuda-toolkit[cublas,cusparse,cusolver]==$cuda_toolkit"
  # A lock on the repository folder keeps this install from writing kbuild's metadata
  # (tooling/kbuild.egg-info) while the one of scripts/bootstrap.sh does (scripts/test.sh runs the
  # two side by side; bootstrap.sh installs kbuild first, this script last).
  (
    flock 9
    uv_install -e .
  ) 9<.
fi
[ "$compile" = 1 ] || exit 0

# Each kernel's output streams as it comes, its lines prefixed with [<kernel>], between a start
# and an end line.
pids=()
for kernel in kernels/*/; do
  kernel=${kernel%/}
  if grep -q '"cuda"' "$kernel/build.toml"; then
    name=$(basename "$kernel")
    (
      start=$SECONDS
      echo "cuda-compile: $kernel: started"
      if .venv-cu130/bin/kbuild build "$kernel" --variant torch214-cxx11-cu130-x86_64-linux "$capabilities" -j 2 2>&1 |
        sed -u "s|^|  [$name] |"; then
        echo "cuda-compile: $kernel built in $((SECONDS - start)) s"
      else
        status=$?
        echo "cuda-compile: $kernel FAILED (exit $status) after $((SECONDS - start)) s"
        exit "$status"
      fi
    ) &
    pids+=($!)
  fi
done
failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
exit $failed
