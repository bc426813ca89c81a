"""Times our FP8 GEMM next to torch._scaled_mm (blockwise) and bf16 torch.mm.

Two suites (`--suite prefill|decode|all`, default prefill): prefill = the 18 ranked shapes;
decode = M in {1, 8, 32, 64, 128} tokens x the eight (N, K) of the DeepSeek-V3 linear layers,
where the weight read is the whole cost. The decode suite also times a 1-element kernel under
the same protocol (the launch cost), each shape's weight streaming rate net of it, and a
sequence of the eight GEMMs per M eagerly and replayed from a CUDA graph.

Protocol (DESIGN.md, "Benchmark protocol"): >= 5 warm-up calls, then N calls each after
zeroing a 256 MB buffer (evicts L2), CUDA events around the call only, median; the whole suite
runs twice. Writes <stem>.json, <stem>.md and <stem>.png into --out, the stem being the UTC
date and the device (plus `-decode` for the decode suite, written first), with -2, -3, ... added
where a run of the same minute already wrote there (the kernel card shows the newest JSON of
each device and suite in results/, with its PNG).

    LOCAL_KERNELS=kernels-community/gemm=kernels/gemm \
        python kernels/gemm/benchmarks/compare.py --out kernels/gemm/benchmarks/results

`--device cpu --quick` runs tiny shapes on the CPU (a smoke test of this script).

`--versus-deepgemm DIR` times `gemm_nt` against DeepGEMM's `fp8_gemm_nt` (a build of
kernels-community/deep-gemm in DIR, e.g. made with `kbuild build`) on both suites' 58 shapes, same
operands and protocol, each shape timed in both orders (ours first, then DeepGEMM first) and the two
medians averaged; writes deepgemm-<device>.json into --out.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference import (  # noqa: E402
    RANKED_SHAPES,
    attainable_floor_us,
    ceil_div,
    flop,
    frobenius_limit,
    judge,
    min_bytes,
    reference_gemm,
)

REPO_ID = "kernels-community/gemm"
FLUSH_BYTES = 256 * 1024 * 1024
QUICK_SHAPES = [(64, 64, 128), (100, 200, 300), (128, 256, 512)]
SCALED_MM_K_BLOCK_MULTIPLE = 4  # torch 2.11 blockwise _scaled_mm is wrong otherwise
IMPLS = ["ours", "ours_general", "ours_challenge_layout", "scaled_mm_blockwise", "bf16_mm"]

# Decode suite: tokens per call x the (N, K) of the DeepSeek-V3 linear layers (TP=8).
DECODE_M = [1, 8, 32, 64, 128]
DECODE_NK = [
    (7168, 2048),
    (4608, 7168),
    (1536, 7168),
    (576, 7168),
    (3072, 1536),
    (7168, 256),
    (4096, 512),
    (7168, 2304),
]
DECODE_SHAPES = [(m, n, k) for m in DECODE_M for (n, k) in DECODE_NK]
QUICK_DECODE_SHAPES = [(1, 64, 128), (8, 200, 300)]
# DeepGEMM 2.6.1 `fp8_gemm_nt` on an H100 80GB HBM3 (torch 2.11, this protocol, 2026-11-25), µs:
# the decode bar (not measured by this script).
DEEPGEMM_DECODE_US = dict(
    zip(
        DECODE_SHAPES,
        [12.3, 23.6, 14.5, 12.8, 8.3, 6.2, 6.6, 13.3]
        + [12.4, 22.1, 13.5, 12.7, 8.3, 6.2, 6.5, 13.3]
        + [12.3, 22.5, 13.6, 12.7, 8.4, 6.3, 6.5, 13.4]
        + [12.3, 21.9, 12.6, 11.8, 8.0, 6.2, 6.6, 13.2]
        + [13.3, 22.2, 13.4, 11.9, 8.4, 6.9, 6.6, 14.2],
        strict=True,
    )
)
STREAMING_MIN_BYTES = 10e6  # shapes whose streaming rate the decode suite reports


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, help="folder for the .json/.md/.png results")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--quick", action="store_true", help="tiny shapes, few calls (smoke test)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--calls", type=int, default=30, help="timed calls per measurement")
    p.add_argument("--suites", type=int, default=2, help="times the whole suite is run")
    p.add_argument("--suite", default="prefill", choices=["prefill", "decode", "all"], help="which shapes")
    p.add_argument("--versus-deepgemm", type=Path, metavar="DIR", help="a deep-gemm kernel folder with build/")
    args = p.parse_args()
    if args.versus_deepgemm and args.device != "cuda":
        p.error("--versus-deepgemm: DeepGEMM runs on CUDA (Hopper) only")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu --quick)")
    if args.quick:
        args.warmup, args.calls, args.suites = min(args.warmup, 2), min(args.calls, 3), 1
    return args


class Timer:
    """Median time of a call in microseconds: CUDA events after an L2 flush, or perf_counter."""

    def __init__(self, device: torch.device, warmup: int, calls: int):
        self.device, self.warmup, self.calls = device, warmup, calls
        self.flush = torch.empty(FLUSH_BYTES if device.type == "cuda" else 1, dtype=torch.uint8, device=device)

    def median_us(self, fn) -> float:
        for _ in range(self.warmup):
            fn()
        times = []
        for _ in range(self.calls):
            self.flush.zero_()
            times.append(self._time_one(fn))
        return statistics.median(times)

    def _time_one(self, fn) -> float:
        if self.device.type != "cuda":
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e6
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3


def make_problem(M, N, K, device):
    """gemm_nt operands (DeepGEMM layout) plus the challenge's M-/N-contiguous copies."""
    kb, nb = ceil_div(K, 128), ceil_div(N, 128)
    p = {
        "a": torch.randn(M, K, device=device).to(torch.float8_e4m3fn),
        "b": torch.randn(N, K, device=device).to(torch.float8_e4m3fn),
        "a_scale": torch.randn(kb, M, device=device).t(),  # (M, kb), strides (1, M)
        "b_scale": torch.randn(nb, kb, device=device),  # (nb, kb) contiguous
        "out": torch.empty(M, N, device=device, dtype=torch.bfloat16),
    }
    p["a_mn"] = p["a"].t().contiguous().t()  # (M, K), M-contiguous
    p["b_kn"] = p["b"].t().contiguous()  # (K, N), N-contiguous
    p["a_bf16"], p["b_bf16"] = p["a"].to(torch.bfloat16), p["b"].to(torch.bfloat16)
    return p


def impl_calls(kernel, p, K):
    """name -> zero-argument callable, for the implementations that apply to this shape."""
    calls = {
        "ours": lambda: kernel.gemm_nt(p["a"], p["b"], p["a_scale"], p["b_scale"], p["out"]),
        "ours_challenge_layout": lambda: kernel.gemm(
            p["a_mn"], p["b_kn"], p["a_scale"].t(), p["b_scale"].t(), p["out"]
        ),
        "bf16_mm": lambda: torch.mm(p["a_bf16"], p["b_bf16"].t()),
    }
    if p["a"].is_cuda and ceil_div(K, 128) % SCALED_MM_K_BLOCK_MULTIPLE == 0:
        calls["scaled_mm_blockwise"] = lambda: torch._scaled_mm(
            p["a"],
            p["b"].t(),
            scale_a=p["a_scale"],
            scale_b=p["b_scale"].t(),
            out_dtype=torch.bfloat16,
        )
    return calls


def check(fn, p, ref) -> str:
    """Runs fn on a NaN-poisoned out and judges it against the float64 reference."""
    p["out"].fill_(float("nan"))
    result = fn()
    verdict = judge(p["out"] if result is None else result, ref, frobenius_limit(ref))
    return "pass" if verdict.ok else f"FAIL: {verdict}"


def measure_shape(kernel, shape, device, timer, suites):
    M, N, K = shape
    p = make_problem(M, N, K, device)
    calls = impl_calls(kernel, p, K)
    ref = reference_gemm(p["a"], p["b"].t(), p["a_scale"].t(), p["b_scale"].t())
    row = {"M": M, "N": N, "K": K, "floor_us": attainable_floor_us(M, N, K), "us": {}, "check": {}}
    for name, fn in calls.items():
        try:
            row["check"][name] = check(fn, p, ref) if name != "bf16_mm" else "n/a (bf16 operands)"
        except RuntimeError as e:  # an implementation that refuses this shape
            row["check"][name] = f"error: {str(e).splitlines()[0]}"
            continue
        row["us"][name] = [timer.median_us(fn) for _ in range(suites)]
    if device.type == "cuda":
        previous = kernel.force_general_path(True)
        try:
            row["check"]["ours_general"] = check(calls["ours"], p, ref)
            row["us"]["ours_general"] = [timer.median_us(calls["ours"]) for _ in range(suites)]
        finally:
            kernel.force_general_path(previous)
    return row


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(rows):
    summary = {}
    for name in IMPLS:
        timed = [r for r in rows if name in r["us"]]
        summary[name] = {
            "geomean_us": geomean([r["us"][name][0] for r in timed]),
            "shapes": len(timed),
            "geomean_us_per_suite": [
                geomean([r["us"][name][i] for r in timed]) for i in range(len(timed[0]["us"][name]))
            ]
            if timed
            else [],
        }
    summary["attainable_floor"] = {
        "geomean_us": geomean([r["floor_us"] for r in rows]),
        "shapes": len(rows),
    }
    return summary


def machine_info(device):
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    if device.type == "cuda":
        prop = torch.cuda.get_device_properties(device)
        info.update(
            device=prop.name,
            sms=prop.multi_processor_count,
            cuda=torch.version.cuda,
            capability=f"{prop.major}.{prop.minor}",
        )
    else:
        info.update(device=platform.processor() or platform.machine(), cpus=torch.get_num_threads())
    return info


def result_stem(info) -> str:
    """'2026-11-23T0412-nvidia-h100-80gb-hbm3': sorts by date, names the device."""
    date = info["date_utc"][:16].replace(":", "")
    return f"{date}-{device_slug(info['device'])}"


def device_slug(device: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")


def unused_stem(out: Path, name: str) -> Path:
    """out/name, or out/name-2, -3, ... when a run of the same minute already wrote its files."""
    stem, n = out / name, 1
    while any(stem.with_suffix(suffix).exists() for suffix in (".json", ".md", ".png")):
        n += 1
        stem = out / f"{name}-{n}"
    return stem


def markdown(results) -> str:
    info, rows, summary = results["machine"], results["rows"], results["summary"]
    lines = [
        f"# FP8 block-scaled GEMM, {results['suite']} suite: ours vs torch ({info['device']}, {info['date_utc']})",
        "",
        f"torch {info['torch']}; median of {results['calls']} calls after a 256 MB L2 flush, "
        f"{results['suites']} suite run(s); µs of the first run "
        "(TFLOPS, % of the H100 attainable floor).",
        "`ours` = gemm_nt (K-major operands, default dispatch); `ours_general` = the same call "
        "with the general path forced; `ours_challenge_layout` = gemm with M-/N-contiguous "
        "operands.",
        "",
        "| # | M | N | K | floor µs | " + " | ".join(IMPLS) + " | checks |",
        "|---|---|---|---|---|" + "---|" * len(IMPLS) + "---|",
    ]
    for i, r in enumerate(rows):
        cells = []
        for name in IMPLS:
            if name not in r["us"]:
                cells.append("-")
                continue
            us = r["us"][name][0]
            tflops = flop(r["M"], r["N"], r["K"]) / us / 1e6
            cells.append(f"{us:.1f} ({tflops:.1f}, {100 * r['floor_us'] / us:.0f}%)")
        failed = [f"{k}: {v}" for k, v in r["check"].items() if v != "pass" and not v.startswith("n/a")]
        lines.append(
            f"| {i} | {r['M']} | {r['N']} | {r['K']} | {r['floor_us']:.2f} | "
            + " | ".join(cells)
            + f" | {'; '.join(failed) or 'all pass'} |"
        )
    lines += ["", "| implementation | geomean µs (run 1) | per run | shapes |", "|---|---|---|---|"]
    for name in IMPLS + ["attainable_floor"]:
        s = summary[name]
        runs = ", ".join(f"{g:.1f}" for g in s.get("geomean_us_per_suite", []))
        lines.append(f"| {name} | {s['geomean_us']:.1f} | {runs} | {s['shapes']} |")
    lines += [
        "",
        "scaled_mm_blockwise runs only where ceil(K/128) % 4 == 0 (torch 2.11 is wrong otherwise), "
        "so its geomean covers fewer shapes.",
    ]
    return "\n".join(lines) + "\n"


def plot(results, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(14, 5))
    width = 0.8 / (len(IMPLS) + 1)
    for j, name in enumerate(IMPLS + ["floor"]):
        xs = [i + j * width for i, r in enumerate(rows) if name == "floor" or name in r["us"]]
        ys = [
            r["floor_us"] if name == "floor" else r["us"][name][0] for r in rows if name == "floor" or name in r["us"]
        ]
        ax.bar(xs, ys, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("µs (log)")
    ax.set_xticks([i + 0.4 for i in range(len(rows))])
    ax.set_xticklabels([f"{r['M']}x{r['N']}x{r['K']}" for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_title(f"FP8 block-scaled GEMM, {results['machine']['device']}")
    ax.legend(fontsize=8, ncol=3, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def launch_us(timer: Timer, device: torch.device) -> float:
    """A 1-element kernel under the suite's protocol: what any call costs at least."""
    one = torch.zeros(1, device=device)
    return timer.median_us(lambda: one.add_(1))


def nt_problem(M: int, N: int, K: int, device: torch.device) -> dict:
    kb, nb = ceil_div(K, 128), ceil_div(N, 128)
    return {
        "a": torch.randn(M, K, device=device).to(torch.float8_e4m3fn),
        "b": torch.randn(N, K, device=device).to(torch.float8_e4m3fn),
        "a_scale": torch.randn(kb, M, device=device).t(),
        "b_scale": torch.randn(nb, kb, device=device),
        "out": torch.empty(M, N, device=device, dtype=torch.bfloat16),
    }


def graph_rows(kernel, device: torch.device, timer: Timer, shapes) -> list[dict]:
    """Per M: the eight decode GEMMs (distinct weights) in a row, per call, eagerly and replayed
    from a CUDA graph; and whether the replay's outputs equal the eager ones bit for bit."""
    rows = []
    for M in sorted({m for m, _, _ in shapes}):
        problems = [nt_problem(m, n, k, device) for m, n, k in shapes if m == M]

        def sequence(problems=problems):
            for p in problems:
                kernel.gemm_nt(p["a"], p["b"], p["a_scale"], p["b_scale"], p["out"])

        eager_us = timer.median_us(sequence) / len(problems)
        eager_out = [p["out"].clone() for p in problems]
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            sequence()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            sequence()
        for p in problems:
            p["out"].fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize(device)
        same = all(torch.equal(p["out"], e) for p, e in zip(problems, eager_out, strict=True))
        graph_us = timer.median_us(graph.replay) / len(problems)
        rows.append(
            {"M": M, "calls": len(problems), "eager_us": eager_us, "graph_us": graph_us, "graph_equals_eager": same}
        )
        print(f"graph M={M}: eager {eager_us:.2f} us/call, graph {graph_us:.2f} us/call, equal {same}", flush=True)
    return rows


def add_decode_figures(results: dict) -> None:
    """Launch-inclusive floor, DeepGEMM's figure and the weight streaming rate per row."""
    launch = results["launch_us"]
    for r in results["rows"]:
        M, N, K = r["M"], r["N"], r["K"]
        weight_bytes = N * K
        r["launch_floor_us"] = launch + min_bytes(M, N, K) / 3.0e6
        r["deepgemm_us"] = DEEPGEMM_DECODE_US.get((M, N, K))
        if weight_bytes >= STREAMING_MIN_BYTES and "ours" in r["us"]:
            r["stream_tbps"] = min_bytes(M, N, K) / max(r["us"]["ours"][0] - launch, 1e-3) / 1e6
    s = results["summary"]
    s["launch_floor"] = {
        "geomean_us": geomean([r["launch_floor_us"] for r in results["rows"]]),
        "shapes": len(results["rows"]),
    }
    dg = [r["deepgemm_us"] for r in results["rows"] if r["deepgemm_us"] is not None]
    s["deepgemm_reference"] = {"geomean_us": geomean(dg), "shapes": len(dg)}


def decode_markdown(results: dict) -> str:
    lines = [
        "",
        f"Launch cost (1-element kernel, same protocol): {results['launch_us']:.2f} µs. "
        "launch floor = that + bytes / 3.0 TB/s; stream = bytes / (ours - launch cost), for 10 MB of "
        "weights or more; DeepGEMM = 2.6.1's figure on an H100 80GB HBM3 (2026-11-25, same protocol).",
        "",
        "| M | N | K | launch floor µs | ours µs | DeepGEMM µs | ours / DeepGEMM | stream TB/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        ours = r["us"]["ours"][0] if "ours" in r["us"] else float("nan")
        dg = r.get("deepgemm_us")
        ratio = f"{ours / dg:.2f}" if dg else "-"
        stream = f"{r['stream_tbps']:.2f}" if "stream_tbps" in r else "-"
        floor = r["launch_floor_us"]
        lines.append(
            f"| {r['M']} | {r['N']} | {r['K']} | {floor:.2f} | {ours:.2f} | {dg or '-'} | {ratio} | {stream} |"
        )
    s = results["summary"]
    lines += [
        "",
        f"Geomeans: ours {s['ours']['geomean_us']:.2f} µs, DeepGEMM {s['deepgemm_reference']['geomean_us']:.2f}, "
        f"launch floor {s['launch_floor']['geomean_us']:.2f}.",
    ]
    if results.get("graph"):
        lines += ["", "| M | calls | eager µs/call | CUDA graph µs/call | graph = eager |", "|---|---|---|---|---|"]
        for g in results["graph"]:
            lines.append(
                f"| {g['M']} | {g['calls']} | {g['eager_us']:.2f} | {g['graph_us']:.2f} | {g['graph_equals_eager']} |"
            )
    return "\n".join(lines) + "\n"


def run_suite(kernel, suite: str, args: argparse.Namespace, device: torch.device, timer: Timer) -> dict:
    if suite == "decode":
        shapes = QUICK_DECODE_SHAPES if args.quick else DECODE_SHAPES
    else:
        shapes = QUICK_SHAPES if args.quick else RANKED_SHAPES
    rows = []
    for shape in shapes:
        rows.append(measure_shape(kernel, shape, device, timer, args.suites))
        us = {k: round(v[0], 1) for k, v in rows[-1]["us"].items()}
        print(f"{suite} {shape}: {us}", flush=True)
    results = {
        "command": " ".join(sys.argv),
        "suite": suite,
        "env": {k: os.environ[k] for k in ("GEMM_FORCE_GENERAL", "GEMM_FORCE_NO_DECODE") if k in os.environ},
        "machine": machine_info(device),
        "kernel": kernel.__name__,
        "warmup": args.warmup,
        "calls": args.calls,
        "suites": args.suites,
        "rows": rows,
        "summary": summarize(rows),
    }
    if suite == "decode":
        results["launch_us"] = launch_us(timer, device)
        add_decode_figures(results)
        results["graph"] = graph_rows(kernel, device, timer, shapes) if device.type == "cuda" else []
    return results


def write_results(results: dict, out: Path) -> None:
    name = result_stem(results["machine"]) + ("-decode" if results["suite"] == "decode" else "")
    stem = unused_stem(out, name)
    stem.with_suffix(".json").write_text(json.dumps(results, indent=1))
    table = markdown(results) + (decode_markdown(results) if results["suite"] == "decode" else "")
    stem.with_suffix(".md").write_text(table)
    plotted = plot(results, stem.with_suffix(".png"))
    print(table)
    print(f"wrote {stem}.json, .md" + (", .png" if plotted else " (no matplotlib: no plot)"))


def versus_deepgemm(kernel, deepgemm_dir: Path, args: argparse.Namespace, timer: Timer) -> dict:
    """Per shape, gemm_nt and DeepGEMM's fp8_gemm_nt on the same operands (scales made positive),
    each timed in both orders; the two medians of each averaged."""
    from kernels import get_local_kernel

    deepgemm = get_local_kernel(deepgemm_dir)
    device = torch.device("cuda")
    rows = []
    for suite, shapes in (("prefill", RANKED_SHAPES), ("decode", DECODE_SHAPES)):
        for M, N, K in shapes:
            p = make_problem(M, N, K, device)
            p["a_scale"], p["b_scale"] = p["a_scale"].abs() + 0.01, p["b_scale"].abs() + 0.01
            a_scale_tma = deepgemm.get_mn_major_tma_aligned_tensor(p["a_scale"].contiguous())
            theirs = torch.empty_like(p["out"])
            calls = {
                "ours": lambda p=p: kernel.gemm_nt(p["a"], p["b"], p["a_scale"], p["b_scale"], p["out"]),
                "deepgemm": lambda p=p, s=a_scale_tma, d=theirs: deepgemm.fp8_gemm_nt(
                    (p["a"], s), (p["b"], p["b_scale"]), d
                ),
            }
            for call in calls.values():
                call()
            difference = ((p["out"].float() - theirs.float()).norm() / theirs.float().norm()).item()
            us: dict[str, list[float]] = {"ours": [], "deepgemm": []}
            for order in (("ours", "deepgemm"), ("deepgemm", "ours")):
                for name in order:
                    us[name].append(timer.median_us(calls[name]))
            ours_us, deepgemm_us = statistics.mean(us["ours"]), statistics.mean(us["deepgemm"])
            rows.append(
                {
                    "suite": suite,
                    "M": M,
                    "N": N,
                    "K": K,
                    "ours_us": round(ours_us, 2),
                    "deepgemm_us": round(deepgemm_us, 2),
                }
                | {"rel_diff": round(difference, 5)}
            )
            print(f"{suite} {M:5d}x{N:5d}x{K:5d}: ours {ours_us:7.2f} us  DeepGEMM {deepgemm_us:7.2f} us", flush=True)
    summary = {}
    for suite in ("prefill", "decode"):
        suite_rows = [row for row in rows if row["suite"] == suite]
        slower = [row for row in suite_rows if row["ours_us"] > 1.02 * row["deepgemm_us"]]
        summary[suite] = {
            "geomean_ours_us": round(geomean([row["ours_us"] for row in suite_rows]), 2),
            "geomean_deepgemm_us": round(geomean([row["deepgemm_us"] for row in suite_rows]), 2),
            "shapes": len(suite_rows),
            "ours_slower_by_over_2_percent": len(slower),
        }
        print(f"{suite}: {summary[suite]}")
    return {
        "command": " ".join(sys.argv),
        "machine": machine_info(device),
        "protocol": f"{args.warmup} warm-up calls, median of {args.calls} after a 256 MB flush, both orders averaged",
        "summary": summary,
        "rows": rows,
    }


def main() -> int:
    args = parse_args()
    from kernels import get_kernel

    kernel = get_kernel(REPO_ID, version=1)
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = Timer(device, args.warmup, args.calls)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.versus_deepgemm:
        results = versus_deepgemm(kernel, args.versus_deepgemm, args, timer)
        device = device_slug(results["machine"]["device"].lower().removeprefix("nvidia "))
        path = args.out / f"deepgemm-{device}.json"
        path.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {path}")
        return 0
    # Decode first: with --suite all the prefill files, written last, sort last by name too.
    for suite in [s for s in ("decode", "prefill") if args.suite in (s, "all")]:
        write_results(run_suite(kernel, suite, args, device, timer), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
