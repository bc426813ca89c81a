#!/usr/bin/env bash
# Compile every kernel's CUDA variant against torch 2.14.1 (CUDA 13.0) in .venv-cu130.
# Compile-only here: this machine has no GPU (GPU results are in kernels/*/benchmarks/results/).
# The kernels build side by side, each with ninja -j 2: a kernel's longest translation unit
# (gemm's Hopper kernels) would otherwise leave a core idle while the others wait.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null; then
  echo "cuda-compile: nvcc not found; install the CUDA 13.0 toolkit" >&2
  exit 1
fi
if [ ! -x .venv-cu130/bin/kbuild ]; then
  python3 -m venv .venv-cu130
fi
# Only torch's headers and libraries are needed to compile and link, not its CUDA wheels,
.venv-cu130/bin/python -m pip install -q --disable-pip-version-check --no-deps "torch==2.14.1"
# except the headers of the CUDA libraries ATen/cuda/CUDAContext.h includes (cuBLAS, cuSPARSE,
# cuSOLVER), which the nvcc toolkit lacks: the NVIDIA wheels of torch's own cuda-toolkit pin.
# kbuild adds their include folders to CUDA builds.
cuda_toolkit=$(.venv-cu130/bin/python -c 'import importlib.metadata as m, re
print(next(re.search(r"==\s*([\d.]+)", r)[1] for r in m.requires("torch") if r.startswith("cuda-toolkit[")))')
.venv-cu130/bin/python -m pip install -q --disable-pip-version-check \
  "cuda-toolkit[cublas,cusparse,cusolver]==$cuda_toolkit"
.venv-cu130/bin/python -m pip install -q --disable-pip-version-check -e .

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pids
for kernel in kernels/*/; do
  kernel=${kernel%/}
  if grep -q '"cuda"' "$kernel/build.toml"; then
    name=$(basename "$kernel")
    (
      start=$SECONDS
      .venv-cu130/bin/kbuild build "$kernel" --variant torch214-cxx11-cu130-x86_64-linux -j 2
      echo "cuda-compile: $kernel built in $((SECONDS - start)) s"
    ) >"$logs/$name.log" 2>&1 &
    pids[$name]=$!
  fi
done
failed=0
for name in "${!pids[@]}"; do
  wait "${pids[$name]}" || failed=1
  cat "$logs/$name.log"
done
exit $failed
