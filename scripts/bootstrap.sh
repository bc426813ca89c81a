#!/usr/bin/env bash
# Create .venv with kbuild, the CPU build of torch and everything the tests need.
# Safe to re-run: pip skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
torch_version="${KBUILD_TORCH_VERSION:-2.13.0}"
pip_args=(-q --disable-pip-version-check)
# This workplace keeps the CPU wheel of torch on disk; elsewhere take it from PyTorch's CPU index.
if [ -d /opt/wheels ]; then
  torch_source=(--find-links /opt/wheels)
else
  torch_source=(--extra-index-url https://download.pytorch.org/whl/cpu)
fi

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
echo "bootstrap: installing torch==$torch_version (CPU) and kbuild[dev]"
.venv/bin/python -m pip install "${pip_args[@]}" "${torch_source[@]}" "torch==$torch_version"
.venv/bin/python -m pip install "${pip_args[@]}" -e ".[dev]"
echo "bootstrap: ready ($(.venv/bin/kbuild --version), torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'))"
