"""The last table of variants.sh run: per shape, each build's median over the A/B rounds
(compare.py's scale layout, `samn`), its ratio to the first build, and each build's bench
geomeans.

    python3 variants_table.py AB_LOG BENCH_LOG NAME [NAME ...]
"""

import re
import statistics
import sys
from collections import defaultdict

AB_LINE = re.compile(
    r"^(?P<build>[^,]+),round\d+,ab-median,(?P<m>\d+),(?P<n>\d+),(?P<k>\d+),(?P<cfg>[^,]+),"
    r"samn (?P<samn>[\d.]+) \([^)]*\),kmaj (?P<kmaj>[\d.]+)"
)
BENCH_LINE = re.compile(r"^(?P<build>[^,]+),bench\d+,geomean: .*kmaj with M-contiguous a_scale (?P<us>[\d.]+) us")


def ab_medians(lines):
    runs = defaultdict(list)  # (shape, build) -> samn of each round
    shapes = []
    for line in lines:
        match = AB_LINE.match(line)
        if not match:
            continue
        shape = f"{match['m']}x{match['n']}x{match['k']} {match['cfg']}"
        if shape not in shapes:
            shapes.append(shape)
        runs[(shape, match["build"])].append(float(match["samn"]))
    return shapes, {key: statistics.median(values) for key, values in runs.items()}


def bench_geomeans(lines):
    found = defaultdict(list)
    for line in lines:
        match = BENCH_LINE.match(line)
        if match:
            found[match["build"]].append(float(match["us"]))
    return found


def table(ab_lines, bench_lines, names):
    shapes, medians = ab_medians(ab_lines)
    rows = ["shape | " + " | ".join(names)]
    for shape in shapes:
        base = medians.get((shape, names[0]))
        cells = []
        for name in names:
            us = medians.get((shape, name))
            if us is None:
                cells.append("-")
            elif base and name != names[0]:
                cells.append(f"{us:.2f} ({us / base - 1:+.1%})")
            else:
                cells.append(f"{us:.2f}")
        rows.append(f"{shape} | " + " | ".join(cells))
    geomeans = bench_geomeans(bench_lines)
    for name in names:
        if geomeans.get(name):
            rows.append(f"bench geomean {name}: " + " / ".join(f"{us:.2f}" for us in geomeans[name]) + " us")
    return "\n".join(rows)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[0]) as ab, open(argv[1]) as bench:
        print(table(ab.read().splitlines(), bench.read().splitlines(), argv[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
