"""Where the FP8 block's time goes: the GPU timeline of one CUDA-graph replay of each block of
examples/fp8_block.py (bf16, fp8 = the kernelized `FP8GatedMLP`, fp8 layers = `FP8Linear` and
`SiluAndMul` layer by layer), from the CUDA profiler (CUPTI), per token count.

Per block: `span_us`, from the start of its first kernel to the end of its last (the median over
--replays replays), and each kernel's duration (median). The gemm kernel's launches are
programmatic (programmatic dependent launch): a kernel starts while the one before it runs and
waits for it inside, so its duration includes that wait and kernels overlap; the span is what
counts. Graph replays leave out host time; the timeline leaves out the replay's launch cost.

    LOCAL_KERNELS=kernels-community/gemm=kernels/gemm \\
        python kernels/gemm/benchmarks/block_timeline.py --tokens 1 128 8192 --out timeline.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from torch.profiler import ProfilerActivity, profile

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
sys.path.insert(0, str(EXAMPLES))
import fp8_block  # noqa: E402

TOKENS = [1, 16, 64, 128, 1024, 8192]


def timeline(replay, replays: int) -> dict:
    """Span and per-kernel durations (µs, medians over replays) of one graph replay."""
    for _ in range(20):
        replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            replay()
            torch.cuda.synchronize()
    events = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
        key=lambda e: e.time_range.start,
    )
    per_replay, left = divmod(len(events), replays)
    if per_replay == 0 or left:
        raise RuntimeError(f"expected the same kernels in each of {replays} replays, got {len(events)} events")
    spans, durations = [], [[] for _ in range(per_replay)]
    for r in range(replays):
        kernels = events[r * per_replay : (r + 1) * per_replay]
        spans.append(kernels[-1].time_range.end - kernels[0].time_range.start)
        for i, kernel in enumerate(kernels):
            durations[i].append(kernel.time_range.end - kernel.time_range.start)
    names = [e.name for e in events[:per_replay]]
    return {
        "span_us": round(statistics.median(spans), 2),
        "kernels": [{"name": n, "us": round(statistics.median(d), 2)} for n, d in zip(names, durations, strict=True)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=TOKENS)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--out", type=Path, help="JSON file for the results")
    parser.add_argument("--kernel-dir", type=Path, default=fp8_block.DEFAULT_KERNEL_DIR)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA device")
    device = torch.device("cuda")
    gemm = fp8_block.get_local_kernel(args.kernel_dir)
    options = SimpleNamespace(tiny=False, compile=False, kernel_dir=args.kernel_dir)
    blocks = fp8_block.kernelized_blocks(options, device, gemm)  # type: ignore[arg-type]
    rows = []
    with torch.no_grad():
        for tokens in args.tokens:
            x = torch.randn(tokens, fp8_block.FULL["hidden"], device=device, dtype=torch.bfloat16)
            row: dict = {"tokens": tokens}
            for name, block in blocks._asdict().items():
                row[name] = timeline(fp8_block.graph_replay(block, x), args.replays)
                kernels = "  ".join(f"{k['us']:.1f} {k['name'][:40]}" for k in row[name]["kernels"])
                print(f"tokens {tokens:5d} {name:10s} span {row[name]['span_us']:8.1f} us | {kernels}")
            bf16 = row["bf16"]["span_us"]
            print(
                f"tokens {tokens:5d} span speed-up: fp8 {bf16 / row['fp8']['span_us']:.2f}x, "
                f"fp8 layers {bf16 / row['fp8_layers']['span_us']:.2f}x"
            )
            rows.append(row)
    if args.out:
        result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
