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
      "$b" ab "$m" "$n" "$k" "$bm" "$bn" "$split" | grep '^ab-median' | sed "s|^|$(basename "$b"),round$r,|"
    done
    mapfile -t order < <(printf '%s\n' "${order[@]}" | tac)
  done
done <<<"$SHAPES"
