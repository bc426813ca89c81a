#!/usr/bin/env bash
# Build, test and benchmark gemm (and relu) on a CUDA machine in one go: the run recorded in
# history.csv. Logs go to $OUT (default ./out), results to $OUT/results. Wheels in .whl/
# (kernels, tomlkit, pyelftools, filelock) are installed first when present, for machines
# without network access.
#   usage: bash kernels/gemm/benchmarks/device_run.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT/results"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/kbuild-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/kbuild-site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD/tooling PYTHONUNBUFFERED=1
# A compiler that links libstdc++ statically gives an extension that crashes next to torch's.
if [ -x /usr/bin/g++ ]; then export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++; fi
log=$OUT/run.log
kbuild() { python3 -m kbuild.cli "$@"; }
step() {  # step NAME COMMAND...: run it, log to $OUT/NAME.log, one summary line in run.log
  local name=$1
  shift
  echo "== $name: $*" >>"$log"
  "$@" >"$OUT/$name.log" 2>&1
  echo "rc=$? after ${SECONDS}s: $(tail -1 "$OUT/$name.log")" >>"$log"
}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; } >>"$log" 2>&1
step build-relu kbuild build kernels/relu
step build-gemm kbuild build kernels/gemm
step kernelize-gemm kbuild test kernels/gemm --no-build -- -q -rfEs -k kernelize
step kernelize-relu kbuild test kernels/relu --no-build -- -q -rfEs -k kernelize
LOCAL_KERNELS=kernels-community/gemm=$PWD/kernels/gemm \
  step quantize python3 kernels/gemm/benchmarks/quantize_bandwidth.py --out "$OUT/results/quantize-h100.json"
LOCAL_KERNELS=kernels-community/gemm=$PWD/kernels/gemm \
  step timeline python3 kernels/gemm/benchmarks/block_timeline.py --out "$OUT/results/timeline-h100.json"
LOCAL_KERNELS=kernels-community/gemm=$PWD/kernels/gemm \
  step compare python3 kernels/gemm/benchmarks/compare.py --suite all --out "$OUT/results"
step example python3 examples/fp8_block.py --out "$OUT/results/fp8_block-h100.json"
step tests-relu kbuild test kernels/relu --no-build -- -q -rfEs -m kernels_ci
step tests-gemm kbuild test kernels/gemm --no-build -- -q -rfE -m kernels_ci
GEMM_FORCE_NO_DECODE=1 step tests-gemm-no-decode kbuild test kernels/gemm --no-build -- -q -rfE -m kernels_ci
GEMM_FORCE_GENERAL=1 step tests-gemm-general kbuild test kernels/gemm --no-build -- -q -rfE -m kernels_ci
step decode-sweep kbuild test kernels/gemm --no-build -- -q -rfE -m slow -k test_decode
cat "$log"
