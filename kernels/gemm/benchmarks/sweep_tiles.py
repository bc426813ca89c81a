"""Sweep the Hopper tile set: every tile of gemm_sm90/tile_shapes.def with splits 1-4, forced
through `force_tile_config`, on the shapes asked for. Each configuration runs `gemm` on fresh
random operands in its own layout (tests/reference.py's make_gemm_inputs: B is (K, N), so B is
copied K-major first, as every configuration does), is checked against the float64 reference,
then timed as compare.py times (CUDA events, median of --calls after a 256 MB L2 flush). Prints
one table per shape, fastest first, with the dispatch's own pick as the first row, and writes
every measurement to --out.

    LOCAL_KERNELS=kernels-community/gemm=kernels/gemm GEMM_FORCE_NO_DECODE=1 \\
        python kernels/gemm/benchmarks/sweep_tiles.py --shape 1024 1536 7168 --out sweep.json

The decode kernel still takes the small-M problems it takes unless GEMM_FORCE_NO_DECODE=1.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch
from compare import Timer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kernel_id import REPO_ID, VERSION  # noqa: E402
from reference import make_gemm_inputs, verify  # noqa: E402

TILE_TABLE = Path(__file__).resolve().parents[1] / "gemm_sm90" / "tile_shapes.def"
ENTRY = re.compile(r"SM90_TILE\(\s*(\d+)\s*,\s*(\d+)\s*,\s*([0-9.]+)\s*\)")
SPLITS = (1, 2, 3, 4)


def tile_shapes(path: Path = TILE_TABLE) -> list[tuple[int, int, float]]:
    """(block_m, block_n, kblock_us) of each entry of the tile table; any other non-comment line
    is an error, so the table and this reader cannot drift apart silently."""
    tiles = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("//", 1)[0].strip()
        if not text:
            continue
        match = ENTRY.fullmatch(text)
        if match is None:
            raise ValueError(f"{path}:{number}: expected SM90_TILE(block_m, block_n, kblock_us), got {text!r}")
        tiles.append((int(match[1]), int(match[2]), float(match[3])))
    return tiles


def sweep(gemm, shape: tuple[int, int, int], timer: Timer) -> list[dict]:
    M, N, K = shape
    generator = torch.Generator(device="cuda").manual_seed(0)
    a, b, a_scale, b_scale, out = make_gemm_inputs(M, N, K, torch.float8_e4m3fn, torch.device("cuda"), generator)

    def run() -> None:
        gemm.gemm(a, b, a_scale, b_scale, out)

    def measured(tile: object) -> dict:
        out.fill_(float("nan"))
        run()
        verdict = verify(out, a, b, a_scale, b_scale)
        check = "pass" if verdict.ok else f"FAIL: {verdict}"
        return {"tile": tile, "check": check, "us": round(timer.median_us(run), 2)}

    rows = [measured("dispatch")]
    for block_m, block_n, _ in tile_shapes():
        for split in SPLITS:
            try:
                gemm.force_tile_config((block_m, block_n, split))
                rows.append(measured([block_m, block_n, split]))
            except RuntimeError as error:
                rows.append({"tile": [block_m, block_n, split], "check": f"declined: {str(error).splitlines()[0]}"})
            finally:
                gemm.force_tile_config(None)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs=3, action="append", metavar=("M", "N", "K"), required=True)
    parser.add_argument("--calls", type=int, default=20, help="timed calls per configuration (median)")
    parser.add_argument("--out", type=Path, help="JSON file for every measurement")
    args = parser.parse_args()
    from kernels import get_kernel

    gemm = get_kernel(REPO_ID, version=VERSION)
    timer = Timer(torch.device("cuda"), warmup=3, calls=args.calls)
    results = []
    for shape in args.shape:
        rows = sweep(gemm, tuple(shape), timer)
        results.append({"shape": shape, "rows": rows})
        timed = sorted((row for row in rows if "us" in row), key=lambda row: row["us"])
        print(f"M={shape[0]} N={shape[1]} K={shape[2]}: {len(timed)} configurations ran, fastest first")
        for row in timed:
            tile = row["tile"] if row["tile"] == "dispatch" else "{}x{} split {}".format(*row["tile"])
            print(f"  {tile:18s} {row['us']:8.2f} us  {row['check']}")
        declined = [row for row in rows if "us" not in row]
        if declined:
            print(f"  {len(declined)} declined, e.g. {declined[0]['tile']}: {declined[0]['check']}")
    if args.out:
        device = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
        args.out.write_text(json.dumps({**device, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
