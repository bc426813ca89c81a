#!/usr/bin/env bash
# Upstream sync from start to end, against a local upstream repository made here:
# put a kernel under sync, keep a local change as a patch, sync twice, refresh the patch
# when upstream edits around it, and resolve a conflict when upstream edits the same place.
# docs/upstream-sync.md quotes this script; tooling/tests/test_sync.py runs it.
#   bash scripts/sync-walkthrough.sh [FOLDER]   (default: a new temporary folder; needs kbuild and git)
set -euo pipefail
# kbuild from PATH, else from the .venv that scripts/bootstrap.sh makes beside this script.
venv=$(dirname "$(realpath "$0")")/../.venv/bin
command -v kbuild >/dev/null || [ ! -x "$venv/kbuild" ] || PATH="$(realpath "$venv"):$PATH"
if ! command -v kbuild >/dev/null; then
  echo "sync-walkthrough: kbuild not found; fix: run bash scripts/bootstrap.sh (it makes .venv), then source .venv/bin/activate" >&2
  exit 2
fi
work=$(realpath "${1:-$(mktemp -d)}")
mkdir -p "$work" && cd "$work"
export XDG_CACHE_HOME="$work/cache"  # kbuild's fetch cache, not the one in your home
step() { printf '\n## %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
fails() {  # run a command that must exit with status $1
  local want=$1 code=0
  shift
  printf '$ %s\n' "$*"
  "$@" || code=$?
  [ "$code" -eq "$want" ] || { echo "expected exit status $want, got $code" >&2; exit 1; }
}
commit() { git -c user.name=Dev -c user.email=dev@example.com -c commit.gpgsign=false commit -q "$@"; }

step "1. An upstream project: a git repository with a CPU scale kernel"
git init -q -b main upstream
mkdir upstream/src
cat > upstream/src/scale.cpp <<'EOF'
#include "scale_common.h"

namespace scale_kernels {

const char* scale_cpu(float* out, const float* x, float factor, int64_t numel) {
  for (int64_t i = 0; i < numel; ++i) out[i] = x[i] * factor;
  return nullptr;
}

}  // namespace scale_kernels
EOF
(cd upstream && git add -A && commit -m "scale kernel")
url="file://$work/upstream"
pinned=$(git -C upstream rev-parse HEAD)

step "2. Our repository: a kernel whose CPU source is the upstream file, renamed by role"
git init -q -b main repo && cd repo
run kbuild init kernels/scale --backends cpu
cp ../upstream/src/scale.cpp kernels/scale/scale_cpu/scale_cpu.cpp
sed -i "s|^license = .*|&\nupstream = \"$url\"|" kernels/scale/build.toml
cat > kernels/scale/upstream.yaml <<EOF
url: $url
commit: $pinned  # the upstream commit the kernel's copy matches
ref: main
files:
  - {from: src/scale.cpp, to: scale_cpu/scale_cpu.cpp}
EOF
git add -A && commit -m "scale: a port of the upstream kernel"

step "3. A local change, kept as a patch (paths relative to the kernel folder)"
sed -i 's|^  for (int64_t i|  if (numel == 0) return nullptr;  // ours: nothing to do\n&|' kernels/scale/scale_cpu/scale_cpu.cpp
mkdir kernels/scale/patches
(cd kernels/scale && git diff --relative -- scale_cpu/scale_cpu.cpp > patches/0001-empty-input.patch)
git add -A && commit -m "scale: return early on empty input"
run kbuild sync kernels/scale --ref "$pinned"  # the map and the patch reproduce the kernel: nothing changes
git diff --exit-code

step "4. Upstream moves on; the patch still applies"
sed -i '1i // scale: out = x * factor' ../upstream/src/scale.cpp
(cd ../upstream && commit -am "document the kernel")
fails 1 kbuild sync --all --check
run kbuild sync kernels/scale --summary sync-pr.md
git add -A && commit -m "scale: sync with upstream"

step "5. Upstream edits the patch's context: the sync stops, --refresh-patch carries the patch over"
sed -i 's|^  return nullptr;$|  return nullptr;  // no error|' ../upstream/src/scale.cpp
(cd ../upstream && commit -am "say what nullptr means")
fails 2 kbuild sync kernels/scale
run kbuild sync kernels/scale --refresh-patch
git add -A && commit -m "scale: sync with upstream, patch refreshed"

step "6. Upstream makes the same change differently: a conflict, resolved by hand"
sed -i 's|^  for (int64_t i|  if (numel <= 0) return nullptr;\n&|' ../upstream/src/scale.cpp
(cd ../upstream && commit -am "return early on empty input")
fails 1 kbuild sync kernels/scale --refresh-patch
conflicted=kernels/scale/.kbuild/refresh-patches/scale_cpu/scale_cpu.cpp
run cat "$conflicted"
git -C ../upstream show HEAD:src/scale.cpp > "$conflicted"  # resolved: upstream's version, so the patch is empty
run kbuild sync kernels/scale --refresh-patch  # commits the resolution; an empty patch is deleted
git add -A && commit -m "scale: sync with upstream, which made our change"
test ! -e kernels/scale/patches/0001-empty-input.patch
run kbuild sync --all --check
