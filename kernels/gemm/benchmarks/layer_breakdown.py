"""Where an FP8 linear layer's time goes: each piece of the DeepSeek-V3 expert MLP's two
projections timed alone, next to the bfloat16 `F.linear` it replaces.

Per token count and projection (gate_up 7168 -> 4096, down 2048 -> 7168), CUDA-graph replays of
one call each (median of --reps, CUDA events, all pieces interleaved call by call):
- `bf16`: `F.linear` with the dequantized weight;
- `fp8_linear`: the layer's one op;
- `quantize` and `gemm_nt`: the two launches fp8_linear makes, timed apart, and
  `quantize+gemm_nt`: both in one graph, from Python (what fp8_linear saves over the chain);
- `silu_and_mul` / `silu_and_mul_quantize` (gate_up's output, the down projection's input).

    LOCAL_KERNELS=kernels-community/gemm=kernels/gemm python kernels/gemm/benchmarks/layer_breakdown.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kernel_id import REPO_ID, VERSION  # noqa: E402

PROJECTIONS = {"gate_up": (7168, 4096), "down": (2048, 7168)}  # (in, out)
TOKENS = [1, 8, 16, 64, 128, 1024, 8192]


def graph_of(fn: Callable[[], object]) -> Callable[[], None]:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def replay_us(pieces: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    replays = {name: graph_of(fn) for name, fn in pieces.items()}
    times: dict[str, list[float]] = {name: [] for name in pieces}
    names = list(replays)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else reversed(names):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            replays[name]()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e3)
    return {name: round(statistics.median(t), 2) for name, t in times.items()}


def unfused_linear(gemm, x: torch.Tensor, w8: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    q, qs = gemm.quantize_per_token_group(x)
    return gemm.gemm_nt(q, w8, qs, ws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--tokens", type=int, nargs="+", default=TOKENS)
    parser.add_argument("--out", type=Path, help="JSON file for the results")
    args = parser.parse_args()
    from kernels import get_kernel

    gemm = get_kernel(REPO_ID, version=VERSION)
    torch.manual_seed(0)
    rows = []
    for name, (k, n) in PROJECTIONS.items():
        w = torch.randn(n, k, device="cuda") / k**0.5
        w8, ws = gemm.quantize_per_block(w)
        w16 = w.to(torch.bfloat16)
        for tokens in args.tokens:
            x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
            q, qs = gemm.quantize_per_token_group(x)
            pieces: dict[str, Callable[[], object]] = {
                "bf16": lambda x=x, w16=w16: F.linear(x, w16),
                "fp8_linear": lambda x=x, w8=w8, ws=ws: gemm.fp8_linear(x, w8, ws),
                "quantize": lambda x=x: gemm.quantize_per_token_group(x),
                "gemm_nt": lambda q=q, qs=qs, w8=w8, ws=ws: gemm.gemm_nt(q, w8, qs, ws),
                "quantize+gemm_nt": lambda x=x, w8=w8, ws=ws: unfused_linear(gemm, x, w8, ws),
            }
            if name == "gate_up":
                h = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16)
                pieces["silu_and_mul"] = lambda h=h: gemm.silu_and_mul(h)
                pieces["silu_and_mul_quantize"] = lambda h=h: gemm.silu_and_mul_quantize(h)
            us = replay_us(pieces, args.reps)
            rows.append({"projection": name, "tokens": tokens, "us": us})
            print(f"{name:7s} M={tokens:5d}: " + "  ".join(f"{piece} {t:7.2f}" for piece, t in us.items()))
    if args.out:
        result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
