#!/usr/bin/env bash
# Compile every kernel's CUDA variant against torch 2.14.1 (CUDA 13.0) in .venv-cu130.
# Compile-only here: this machine has no GPU (GPU runs are recorded in kernels/*/benchmarks/).
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
for kernel in kernels/*/; do
  if grep -q '"cuda"' "$kernel/build.toml"; then
    .venv-cu130/bin/kbuild build "${kernel%/}" --variant torch214-cxx11-cu130-x86_64-linux
  fi
done

# The gemm Hopper path's standalone tools run only on the lent H100; compiling them here keeps
# them in step with the kernel.
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
for tool in harness wgmma_probe launch_probe; do
  sources=(kernels/gemm/benchmarks/sm90_harness/$tool.cu)
  [ "$tool" = harness ] && sources+=(kernels/gemm/gemm_sm90/*.cu)
  echo "nvcc kernels/gemm/benchmarks/sm90_harness/$tool.cu"
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels/gemm -o "$tools/$tool" "${sources[@]}"
done
