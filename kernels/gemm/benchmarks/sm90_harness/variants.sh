#!/usr/bin/env bash
# Several versions of gemm_sm90/ against each other in one device call: build the harness
# for each here (nvcc 13, no GPU needed), carry .sm90bin to the device, run them there.
#
#   bash variants.sh build REF [REF ...]   here: .sm90bin/<name> for each git ref (a branch,
#       a commit, or WORKTREE for the working tree's gemm_sm90/), always with this tree's
#       harness.cu; <name> is the ref with '/' turned into '-'. The list of builds goes to
#       .sm90bin/BUILDS in the order given, ptxas's register and spill lines to <name>.ptxas.
#   bash variants.sh run [ROUNDS]          on the device: for every build in .sm90bin/BUILDS,
#       `harness check` (except builds named diag-*: experiment builds whose results are wrong
#       by design), then ab_builds.sh over $SHAPES (default below) with ROUNDS rounds (default
#       2), then `harness bench` twice per build in alternating order. PHASES (default
#       "check ab bench") picks some of the three, to split them over device calls. Logs go to
#       $OUT (default ./out), in seven files (a device call brings back eight at most); each
#       phase's duration and a table of per-shape medians and bench geomeans are printed last.
#
# Device call: run(command="bash kernels/gemm/benchmarks/sm90_harness/variants.sh run",
#                  carry=[".sm90bin"])
set -euo pipefail
ROOT=$(realpath "$(dirname "$0")/../../../..")
BIN=$(realpath -m "${SM90BIN:-$ROOT/.sm90bin}")  # SM90BIN: another folder of builds
OUT=$(realpath -m "${OUT:-$ROOT/out}")
cd "$ROOT"
HERE=kernels/gemm/benchmarks/sm90_harness

usage() {
  sed -n '/^# Several/,/^# Device call/p' "$HERE/variants.sh" | sed '$d' >&2
  exit 2
}

build() {
  [ $# -ge 1 ] || usage
  local ref name src
  for ref in "$@"; do
    [ "$ref" = WORKTREE ] || git rev-parse --verify -q "$ref^{commit}" >/dev/null ||
      { echo "variants.sh build: no git ref '$ref' (expected a branch, a commit or WORKTREE)" >&2; exit 1; }
  done
  command -v nvcc >/dev/null || { echo "variants.sh build: nvcc not found (CUDA 13 toolkit needed)" >&2; exit 1; }
  mkdir -p "$BIN"
  : >"$BIN/BUILDS"
  for ref in "$@"; do
    name=${ref//\//-}
    src=$(mktemp -d)
    mkdir -p "$src/gemm_sm90"
    if [ "$ref" = WORKTREE ]; then
      cp kernels/gemm/gemm_sm90/* "$src/gemm_sm90/"
    else
      local f
      for f in $(git ls-tree --name-only "$ref" kernels/gemm/gemm_sm90/); do
        git show "$ref:$f" >"$src/gemm_sm90/$(basename "$f")"
      done
    fi
    echo "== $name: building (its translation units in parallel, about 70 s on 2 cores)" >&2
    local cu pids=() failed=0
    for cu in "$HERE/harness.cu" "$src"/gemm_sm90/*.cu; do
      nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I "$src" -I kernels/gemm \
        -c -o "$src/$(basename "$cu").o" "$cu" 2>"$src/$(basename "$cu").nvcc" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    cat "$src"/*.nvcc >"$BIN/$name.nvcc"
    [ $failed = 0 ] && nvcc -gencode=arch=compute_90a,code=sm_90a -o "$BIN/$name" "$src"/*.o 2>>"$BIN/$name.nvcc" || {
      cat "$BIN/$name.nvcc" >&2
      rm -rf "$src" "$BIN/$name.nvcc"
      echo "variants.sh build: $ref did not compile (the harness is this tree's harness.cu)" >&2
      exit 1
    }
    # one line per kernel: its name, then ptxas's spill and register report
    grep -E "Compiling entry|registers|spill" "$BIN/$name.nvcc" | sed 's/^ptxas info *: //' |
      awk '/^Compiling/ { if (line) print line; match($0, /\x27[^\x27]*\x27/); line = substr($0, RSTART + 1, RLENGTH - 2); next }
           { gsub(/^ +/, ""); line = line " | " $0 } END { if (line) print line }' | c++filt >"$BIN/$name.ptxas"
    grep -i "warning" "$BIN/$name.nvcc" >&2 || true
    rm -rf "$src" "$BIN/$name.nvcc"
    echo "$name" >>"$BIN/BUILDS"
  done
  echo "built: $(tr '\n' ' ' <"$BIN/BUILDS")" >&2
}

# Shapes for the A/B (M N K BM BN SPLIT, the configurations kTuned picks): the multi-tile
# shapes whose epilogue run 28 measured, and the small shapes with one or two tiles per CTA.
DEFAULT_SHAPES="6144 4096 512 192 128 1
6144 7168 2048 192 128 1
6144 3072 1536 192 128 1
1024 7168 2048 128 128 1
1024 7168 256 128 128 1
1024 4096 512 64 256 1
1024 3072 1536 128 192 1
1024 1536 7168 128 128 1
1024 512 7168 64 128 2"

run() {
  local rounds=${1:-2}
  [ -f "$BIN/BUILDS" ] || { echo "variants.sh run: no $BIN/BUILDS; run 'variants.sh build REF ...' first and carry $BIN" >&2; exit 1; }
  mkdir -p "$OUT"
  mapfile -t names <"$BIN/BUILDS"
  local n paths=() fails=0
  for n in "${names[@]}"; do
    [ -x "$BIN/$n" ] || { echo "variants.sh run: $BIN/$n missing" >&2; exit 1; }
    paths+=("$BIN/$n")
  done
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/variants-gpu.log"
  fi
  local phases=" ${PHASES:-check ab bench} " timing=""
  : >"$OUT/variants-ab.log"
  : >"$OUT/variants-bench.log"
  : >"$OUT/variants-bench-full.log"
  if [[ $phases == *" check "* ]]; then
    SECONDS=0
    : >"$OUT/variants-check.log"
    : >"$OUT/variants-check-full.log"
    for n in "${names[@]}"; do
      [[ $n == diag-* ]] && continue
      local log
      log=$("$BIN/$n" check 2>&1 || true)
      printf '== %s\n%s\n' "$n" "$log" >>"$OUT/variants-check-full.log"
      echo "$n: $(grep '^check:' <<<"$log" || echo 'check: did not finish')" | tee -a "$OUT/variants-check.log"
      grep -q '^check: 0 failure' <<<"$log" || fails=1
    done
    timing+="check ${SECONDS}s "
  fi
  if [[ $phases == *" ab "* ]]; then
    SECONDS=0
    SHAPES=${SHAPES:-$DEFAULT_SHAPES} bash "$HERE/ab_builds.sh" "$rounds" "${paths[@]}" | tee "$OUT/variants-ab.log"
    timing+="ab ${SECONDS}s "
  fi
  if [[ $phases == *" bench "* ]]; then
    SECONDS=0
    local order=("${names[@]}") r
    for r in 1 2; do
      for n in "${order[@]}"; do
        [[ $n == diag-* ]] && continue
        { echo "== $n, bench $r"; "$BIN/$n" bench 2>&1; } | tee -a "$OUT/variants-bench-full.log" |
          grep '^geomean' | sed "s|^|$n,bench$r,|" |
          tee -a "$OUT/variants-bench.log"
      done
      mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
    done
    timing+="bench ${SECONDS}s"
  fi
  echo "phases: $timing"
  python3 "$HERE/variants_table.py" "$OUT/variants-ab.log" "$OUT/variants-bench.log" "${names[@]}" |
    tee "$OUT/variants-table.log"
  [ "$fails" = 0 ] || { echo "variants.sh run: a build failed its check (see variants-check.log)"; exit 1; }
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
