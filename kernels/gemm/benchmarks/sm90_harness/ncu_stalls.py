"""Where a kernel's warps stall, from Nsight Compute's per-SASS-line warp-stall samples.

Input: the CSV of
    ncu --section SourceCounters --section WarpStateStats -k regex:fp8_gemm \
        --launch-skip 2 --launch-count 1 --page source --csv --print-source sass \
        .sm90bin/BUILD one M N K BM BN SPLIT mn > stalls.csv
Output: the samples by stall reason, by the kind of instruction the warps stall at, and the
most sampled SASS lines with the lines just before them (a stall is charged to the
instruction that waits to issue, so the cause is often the line before: a TRYWAIT before the
branch that loops on it, a BAR.SYNC before the first instruction after a named barrier).

    python3 ncu_stalls.py stalls.csv [TOP]
"""

import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):
        if SAMPLES in row:
            head = row
            return head, [r for r in rows[i + 1 :] if len(r) == len(head)]
    sys.exit(f"ncu_stalls.py: {path} has no '{SAMPLES}' column (expected ncu --page source --csv output)")


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def kind(sass, before):
    if "TRYWAIT" in before and "BRA" in sass:
        return "mbarrier wait"
    if "BAR.SYNC" in before:
        return "after a named barrier"
    if "WARPGROUP.DEPBAR" in sass:
        return "wgmma wait"
    if "QGMMA" in sass:
        return "wgmma issue"
    if "FFMA" in sass or "FMUL" in sass:
        return "FFMA/FMUL"
    if any(op in sass for op in ("LDG", "LDS", "STS", "STG")):
        return "load/store"
    return "other"


def summarize(head, data, top=9):
    samples = head.index(SAMPLES)
    source = head.index("Source")
    executed = head.index("Instructions Executed") if "Instructions Executed" in head else None
    reasons = [i for i, c in enumerate(head) if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(number(r[samples]) for r in data) or 1.0
    lines = [f"{len(data)} SASS lines, {total:.0f} samples"]

    by_reason = collections.Counter()
    for r in data:
        for i in reasons:
            by_reason[head[i].removeprefix("stall_")] += number(r[i])
    lines.append("by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_reason.most_common(10)))

    by_kind = collections.Counter()
    for i, r in enumerate(data):
        by_kind[kind(r[source], data[i - 1][source] if i else "")] += number(r[samples])
    lines.append("by instruction: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_kind.most_common()))

    hottest = sorted(range(len(data)), key=lambda i: -number(data[i][samples]))[:top]
    shown = set()
    for t in sorted(hottest):
        if t in shown:
            continue
        lines.append("----")
        for i in range(max(0, t - 3), min(len(data), t + 2)):
            if i in shown:
                continue
            shown.add(i)
            r = data[i]
            count = f"exec {number(r[executed]):9.0f}  " if executed is not None else ""
            mark = "*" if i in hottest else " "
            lines.append(f"{i:5d} {mark} {100 * number(r[samples]) / total:5.1f}%  {count}{r[source][:90]}")
    return "\n".join(lines)


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    head, data = read(argv[1])
    print(summarize(head, data, int(argv[2]) if len(argv) == 3 else 9))


if __name__ == "__main__":
    main(sys.argv)
