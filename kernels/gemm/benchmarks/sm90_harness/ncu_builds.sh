#!/usr/bin/env bash
# Nsight Compute counters of harness builds (variants.sh's .sm90bin) on a few shapes, in
# compare.py's scale layout: where a tile's cycles go (tensor pipe, shared-memory banks,
# L1/L2 throughput). Run on the device:
#
#   bash ncu_builds.sh BUILD [BUILD ...]      e.g. main diag-noepi
#
# SHAPES (default below: "M N K BM BN SPLIT" per line, SPLIT k for stream-K where the build
# has it) picks the launches; one profiled launch per build and shape (the third GEMM launch
# of `harness one`, clocks not locked).
# The counters asked for are those of this ncu that exist (checked against --query-metrics).
# Output: $OUT/ncu-builds.log (all of ncu's report) and a summary on stdout.
set -euo pipefail
ROOT=$(realpath "$(dirname "$0")/../../../..")
BIN=$(realpath -m "${SM90BIN:-$ROOT/.sm90bin}")
OUT=$(realpath -m "${OUT:-$ROOT/out}")
[ $# -ge 1 ] || { sed -n "2,11p" "$0" >&2; exit 2; }
NCU=$(command -v ncu || true)
for candidate in /usr/local/cuda*/bin/ncu; do
  [ -n "$NCU" ] || { [ -x "$candidate" ] && NCU=$candidate; }
done
[ -n "$NCU" ] || { echo "ncu_builds.sh: ncu not found (Nsight Compute is needed)" >&2; exit 1; }
for b in "$@"; do [ -x "$BIN/$b" ] || { echo "ncu_builds.sh: no build $BIN/$b (run variants.sh build first)" >&2; exit 1; }; done
mkdir -p "$OUT"
SHAPES=${SHAPES:-"6144 4096 512 192 128 1
6144 4608 7168 192 128 1
1024 7168 256 128 128 1
1024 4096 512 64 256 1"}

"$NCU" --query-metrics --chip gh100 >"$OUT/ncu-query.txt" 2>&1 || true
wanted=(
  sm__throughput sm__pipe_shared_cycles_active sm__inst_executed_pipe_tensor_op_gmma
  l1tex__throughput l1tex__data_bank_reads l1tex__data_bank_writes
  l1tex__data_pipe_lsu_wavefronts_mem_shared l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma
  l1tex__data_bank_conflicts_type_arbitration
  lts__throughput lts__t_sector_hit_rate dram__throughput dram__bytes_read dram__bytes_write
  sm__cycles_elapsed gpu__time_duration
)
metrics=()
for m in "${wanted[@]}"; do
  grep -q "^$m " "$OUT/ncu-query.txt" || { echo "ncu_builds.sh: this ncu has no $m" >&2; continue; }
  case $m in
    gpu__time_duration) metrics+=("$m.sum") ;;
    sm__cycles_elapsed) metrics+=("$m.avg.per_second" "$m.max") ;;
    *throughput) metrics+=("$m.avg.pct_of_peak_sustained_elapsed") ;;
    *_rate) metrics+=("$m.pct") ;;
    dram__bytes_*) metrics+=("$m.sum") ;;
    *) metrics+=("$m.sum" "$m.avg.pct_of_peak_sustained_elapsed") ;;
  esac
done
[ ${#metrics[@]} -gt 0 ] || { echo "ncu_builds.sh: ncu --query-metrics named none of the counters (see $OUT/ncu-query.txt)" >&2; exit 1; }
list=$(IFS=,; echo "${metrics[*]}")

: >"$OUT/ncu-builds.log"
while read -r M N K BM BN S; do
  [ -n "$M" ] || continue
  for b in "$@"; do
    echo "=== $b $M $N $K $BM $BN $S" | tee -a "$OUT/ncu-builds.log"
    report=$("$NCU" --clock-control none -k regex:fp8_gemm_sm90 --launch-skip 2 --launch-count 1 --metrics "$list" \
      "$BIN/$b" one "$M" "$N" "$K" "$BM" "$BN" "$S" mn 2>&1) ||
      echo "ncu_builds.sh: ncu failed on $b $M $N $K (see ncu-builds.log)" >&2
    printf '%s\n' "$report" >>"$OUT/ncu-builds.log"
    { grep -E "^ +(sm__|l1tex__|lts__|dram__|gpu__)" <<<"$report" || true; } |
      awk '{ printf "  %-70s %s %s\n", $1, $2, $3 }'
  done
done <<<"$SHAPES"
