#!/usr/bin/env bash
# Create .venv with kbuild, the CPU build of torch and everything the tests need.
# Safe to re-run: uv skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
torch_version="${KBUILD_TORCH_VERSION:-2.13.0}"
pip_args=(-q --disable-pip-version-check)
# This workplace keeps the CPU wheel of torch on disk; elsewhere take it from PyTorch's CPU index
# (each package's best version from either index, as pip picks).
if [ -d /opt/wheels ]; then
  torch_source=(--find-links /opt/wheels)
else
  torch_source=(--index https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
fi

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
# uv installs what pip would, in a fraction of pip's time: it resolves without evaluating every file
# of every release and downloads, unpacks and compiles to bytecode on all cores (CI has 2).
.venv/bin/python -m pip install "${pip_args[@]}" "uv>=0.8"
echo "bootstrap: installing torch==$torch_version (CPU) and kbuild[dev] with uv"
# The lock on the repository folder keeps this install from writing kbuild's metadata
# (tooling/kbuild.egg-info) while the one of scripts/cuda-compile.sh --setup does (scripts/test.sh
# runs the two side by side).
(
  flock 9
  .venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode \
    "${torch_source[@]}" "torch==$torch_version" -e ".[dev]"
) 9<.
echo "bootstrap: ready ($(.venv/bin/kbuild --version), torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'))"
