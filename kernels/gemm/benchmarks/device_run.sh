#!/usr/bin/env bash
# Build, test and benchmark kernels/gemm on a CUDA machine (the lent H100), in one go.
# Logs and results go to $OUT (default ./out). Wheels in .whl/ (kernels, pytest, ...) are
# installed first when present: the device machine has no network. Each test file runs in
# its own process, so one crash does not hide the others' results. The quick tests run three
# times: forced general path, Hopper path without the decode kernel, default dispatch.
#   usage: bash kernels/gemm/benchmarks/device_run.sh [SLOW_TEST_SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/out}
SLOW_SECONDS=${1:-150}
TESTS=kernels/gemm/tests
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD/tooling
export PYTHONUNBUFFERED=1 LOCAL_KERNELS=kernels-community/gemm=$PWD/kernels/gemm
# The image's default C++ compiler links libstdc++ statically: such an extension crashes
# when it formats its first error message next to torch's libstdc++. Use the system g++.
if [ -x /usr/bin/g++ ]; then export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++; fi
kbuild() { python3 -c "import sys; from kbuild.cli import main; sys.exit(main())" "$@"; }
pytest_each() {  # pytest_each LOG ARGS...: every test file in a separate process
  local log=$1
  shift
  for f in "$TESTS"/test_*.py; do
    echo "== $f $*" | tee -a "$log"
    python3 -m pytest "$f" -p no:cacheprovider -q -rfE "$@" 2>&1 | tail -25 | tee -a "$log"
  done
}

{ date -u; nvidia-smi; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; \
  echo "CXX=${CXX:-default}"; ${CXX:-c++} --version | head -1; } \
  >"$OUT/build.log" 2>&1
kbuild build kernels/gemm 2>&1 | tee -a "$OUT/build.log" || exit 1
GEMM_FORCE_GENERAL=1 pytest_each "$OUT/tests_general_only.log" -m kernels_ci
GEMM_FORCE_NO_DECODE=1 pytest_each "$OUT/tests_no_decode.log" -m kernels_ci
pytest_each "$OUT/tests.log" -m kernels_ci
python3 kernels/gemm/benchmarks/compare.py --suite all --out "$OUT" 2>&1 | tee "$OUT/compare.log"
timeout "$SLOW_SECONDS" python3 -m pytest "$TESTS" -p no:cacheprovider -q -rfE -m slow \
  2>&1 | tail -30 | tee "$OUT/slow.log"
