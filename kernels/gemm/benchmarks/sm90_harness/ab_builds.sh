#!/usr/bin/env bash
# Same-machine A/B of several harness builds (each a binary built from its own copy of
# gemm_sm90/, see harness.cu's header): every shape's `harness ab` is run by each build in
# turn, the order reversed each round (later runs in one device call tend to run hotter).
# Prints the `ab-median` lines prefixed with the build's name and the round.
#   usage: SHAPES="M N K BM BN SPLIT
#                  M N K BM BN SPLIT ..." bash ab_builds.sh ROUNDS HARNESS [HARNESS ...]
set -euo pipefail
if [ $# -lt 2 ] || [ -z "${SHAPES:-}" ]; then
  echo "usage: SHAPES=\"M N K BM BN SPLIT ...\" bash $0 ROUNDS HARNESS [HARNESS ...]" >&2
  exit 2
fi
rounds=$1
shift
builds=("$@")
while read -r m n k bm bn split; do
  [ -z "$m" ] && continue
  order=("${builds[@]}")
  for ((r = 1; r <= rounds; r++)); do
    for b in "${order[@]}"; do
      # a build may fail the A/B's own result check (experiment builds that are wrong by
      # design): its times are still printed, and the failure is said on stderr
      out=$("$b" ab "$m" "$n" "$k" "$bm" "$bn" "$split" 2>&1 || true)
      { grep '^ab-median' <<<"$out" || true; } | sed "s|^|$(basename "$b"),round$r,|"
      grep -q '^ab check: 0 failure' <<<"$out" || echo "$(basename "$b"),round$r,$m $n $k: $(grep '^ab check' <<<"$out" || echo 'ab did not finish')" >&2
    done
    mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
  done
done <<<"$SHAPES"
