#!/usr/bin/env bash
# Each kernel's kernelize tests (pytest -k kernelize, CPU) with the `kernels` version transformers 5.17
# takes, 0.16, and transformers 5.17 itself: .venv has kernels 0.17 (the kernel test stages of
# scripts/test.sh run the same tests there). A throwaway environment sees .venv's packages (torch,
# kbuild and its pytest plugin, the test tools) through a .pth file, with kernels 0.16.*,
# transformers 5.17.* and huggingface_hub < 2 (transformers 5.17's range) installed in front of them.
# The tests load the CPU builds already made (kbuild build KERNEL_DIR); nothing is rebuilt. Then the
# test of `kbuild verify` under kernels 0.16 (it reads digests with 0.17 only, and says so).
#   bash scripts/kernels-compat.sh [KERNEL_DIR...]        (default: every kernel)
set -euo pipefail
cd "$(dirname "$0")/.."
env=$(mktemp -d "${TMPDIR:-/tmp}/kernels-0.16.XXXXXX")
trap 'rm -rf "$env"' EXIT
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
.venv/bin/uv venv --quiet --python .venv/bin/python "$env"
echo "import site; site.addsitedir('$(purelib .venv/bin/python)')" >"$(purelib "$env/bin/python")/zz-dot-venv.pth"
.venv/bin/uv pip install --quiet --python "$env/bin/python" "kernels==0.16.*" "transformers==5.17.*" "huggingface_hub<2"
"$env/bin/python" -c 'import kernels, transformers; print(f"kernels {kernels.__version__}, transformers {transformers.__version__}")'
if [ "$#" -eq 0 ]; then
  set -- kernels/*/
fi
for kernel in "$@"; do
  status=0
  "$env/bin/python" -m pytest "${kernel%/}/tests" -q -m "not slow" -k kernelize || status=$?
  [ "$status" -eq 0 ] || [ "$status" -eq 5 ] || exit "$status" # 5: the kernel has no kernelize tests
done
# kbuild takes kernels 0.16 too; `kbuild verify` reads digests with 0.17's reader and must say so.
"$env/bin/python" -m pytest tooling/tests/test_verify.py -q -k digests_are_read_with_kernels
