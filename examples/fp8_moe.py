"""The routed experts of an FP8 mixture of experts on the gemm kernel, timed against what transformers
runs for the same checkpoint and against bf16.

The layer is DeepSeek-V3's MoE experts block: 256 experts of hidden 7168 -> 2 x 2048 -> 7168, top-8.
Every implementation is transformers' own module, as a loaded model holds it, with its
implementation chosen by name (``config._experts_implementation``):
- ours: transformers' ``FP8Experts`` with ``gemm.fp8_experts_forward`` registered in its
  ``FP8ExpertsInterface`` (the recipe on the kernel's card);
- transformers' FP8 implementations on the same weights: ``"deepgemm"`` (kernels-community/deep-gemm),
  ``"grouped_mm"`` (its default) and ``"batched_mm"`` (kernels-community/finegrained-fp8), given
  local builds of those kernels (``--peers``: a folder holding built ``deep-gemm/`` and
  ``finegrained-fp8/``); without it they are left out, with a message;
- bf16: transformers' ``DeepseekV3Experts`` with ``"grouped_mm"`` (``torch._grouped_mm``) on the
  dequantized weights.

Protocol (as examples/fp8_block.py): one process, identical weights, inputs and routing, the
implementations timed interleaved call by call with the order rotating, median of --reps; 256 MB
written before each timed call so that no weight stays in L2. Modes: eager (events around the
call), graph (one forward captured in a CUDA graph, replays timed; an implementation that cannot
be captured is left out of that mode) and compiled (torch.compile, fullgraph, at --compile-tokens).
Routings: uniform (each token's top-8 of random scores) and zipf (experts drawn with probability
~ 1 / rank^1.2). The floor of each row: the larger of the weight bytes of the experts hit at the
measured copy bandwidth and the FLOPs at the H200's dense FP8 rate (1,979 TFLOP/s).

    python examples/fp8_moe.py --peers .peers --out fp8_moe-h200.json      # CUDA, DeepSeek-V3 sizes
    python examples/fp8_moe.py --device cpu --tiny --out smoke.json           # the same code on CPU
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
from fp8_block import copy_bandwidth_tbps, graph_replay, time_interleaved_ms  # this folder's block example
from kernels import get_local_kernel

DEFAULT_KERNEL_DIR = Path(__file__).resolve().parents[1] / "kernels" / "gemm"
FULL = {"experts": 256, "hidden": 7168, "inner": 2048, "top_k": 8, "tokens": [1, 8, 64, 512, 4096, 16384]}
TINY = {"experts": 8, "hidden": 256, "inner": 128, "top_k": 2, "tokens": [1, 8, 33]}
FP8_TFLOPS = 1979.0
OURS = "kernels-community/gemm"
FP8_PEERS = ("deepgemm", "grouped_mm", "batched_mm")
# batched_mm copies each token's expert weights: 34 ms at 512 tokens on the H200; past that it is
# left out (its time grows with the tokens: 278 ms at 4,096).
BATCHED_MM_MAX_TOKENS = 512

Forward = Callable[[], torch.Tensor]


def deepseek_config(sizes: dict):
    from transformers import DeepseekV3Config

    return DeepseekV3Config(
        hidden_size=sizes["hidden"],
        moe_intermediate_size=sizes["inner"],
        n_routed_experts=sizes["experts"],
        num_experts_per_tok=sizes["top_k"],
        hidden_act="silu",
    )


def quantized_experts(gemm: ModuleType, experts: int, rows: int, cols: int, device: torch.device, seed: int):
    """(E, rows, cols) FP8 weights with 128x128 block scales, and their dequantized bf16 copy."""
    generator = torch.Generator(device=device).manual_seed(seed)
    weights, scales, dequantized = [], [], []
    for _ in range(experts):
        w = torch.randn(rows, cols, generator=generator, device=device) / cols**0.5
        q, s = gemm.quantize_per_block(w, 128, torch.float8_e4m3fn)
        weights.append(q)
        scales.append(s)
        full = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
        dequantized.append((q.float() * full).to(torch.bfloat16))
    return torch.stack(weights), torch.stack(scales), torch.stack(dequantized)


def load_peers(peers: Path | None) -> list[str]:
    """Hands transformers the locally built peer kernels; returns the FP8 implementations usable."""
    if peers is None:
        print("fp8_moe: no --peers folder: transformers' FP8 implementations are left out", file=sys.stderr)
        return []
    import transformers.integrations.deepgemm as deepgemm
    import transformers.integrations.finegrained_fp8 as finegrained

    usable = []
    if (peers / "finegrained-fp8").is_dir():
        fg = get_local_kernel(peers / "finegrained-fp8")
        finegrained._FINEGRAINED_FP8 = finegrained.FineGrainedFP8(
            matmul=fg.matmul_2d, batched_matmul=fg.matmul_batched, grouped_matmul=fg.matmul_grouped
        )
        usable += ["grouped_mm", "batched_mm"]
    if (peers / "deep-gemm").is_dir():
        dg = get_local_kernel(peers / "deep-gemm")
        deepgemm.lazy_load_kernel = lambda name, *a, **k: dg
        deepgemm.is_kernels_available = lambda *a, **k: True  # transformers 5.17 pins kernels < 0.17
        deepgemm.is_deepgemm_loadable(raise_error=True)
        usable.insert(0, "deepgemm")
    return usable


def build(args: argparse.Namespace, device: torch.device, gemm: ModuleType):
    from transformers.integrations.finegrained_fp8 import ALL_FP8_EXPERTS_FUNCTIONS, FP8Experts, FP8ExpertsInterface
    from transformers.integrations.moe import use_experts_implementation
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Experts

    sizes = TINY if args.tiny else FULL
    config = deepseek_config(sizes)
    e, h, i = sizes["experts"], sizes["hidden"], sizes["inner"]
    w1, s1, d1 = quantized_experts(gemm, e, 2 * i, h, device, seed=1)
    w2, s2, d2 = quantized_experts(gemm, e, h, i, device, seed=2)
    FP8ExpertsInterface.register(OURS, gemm.fp8_experts_forward)
    fp8_class = use_experts_implementation(FP8Experts, experts_interface=ALL_FP8_EXPERTS_FUNCTIONS)

    def fp8_module(implementation: str) -> torch.nn.Module:
        own = copy.copy(config)
        own._experts_implementation = implementation
        with torch.device("meta"):
            module = fp8_class(own, block_size=(128, 128))
        for name, value in [
            ("gate_up_proj", w1),
            ("gate_up_proj_scale_inv", s1),
            ("down_proj", w2),
            ("down_proj_scale_inv", s2),
        ]:
            setattr(module, name, torch.nn.Parameter(value, requires_grad=False))
        return module

    bf16_config = copy.copy(config)
    bf16_config._experts_implementation = "grouped_mm"
    with torch.device("meta"):
        bf16 = DeepseekV3Experts(bf16_config)
    bf16.gate_up_proj = torch.nn.Parameter(d1, requires_grad=False)
    bf16.down_proj = torch.nn.Parameter(d2, requires_grad=False)
    del d1, d2
    modules = {"ours": fp8_module(OURS), "bf16": bf16}
    for name in load_peers(args.peers):
        modules[name] = fp8_module(name)
    return sizes, modules


def routing(kind: str, tokens: int, sizes: dict, device: torch.device, seed: int):
    generator = torch.Generator(device=device).manual_seed(seed)
    experts, top_k = sizes["experts"], sizes["top_k"]
    if kind == "uniform":
        ids = torch.rand(tokens, experts, generator=generator, device=device).topk(top_k, dim=1).indices
    else:
        ranks = torch.arange(1, experts + 1, device=device, dtype=torch.float32)
        probs = (1.0 / ranks**1.2).expand(tokens, experts)
        ids = torch.multinomial(probs, top_k, replacement=False, generator=generator)
    weights = torch.rand(tokens, top_k, generator=generator, device=device).softmax(dim=1)
    return ids, weights


def floor_us(ids: torch.Tensor, sizes: dict, copy_tbps: float) -> float:
    hit = int(torch.unique(ids).numel())
    weight_bytes = hit * 3 * sizes["hidden"] * sizes["inner"]  # FP8: one byte each, gate + up + down
    flops = 2 * ids.numel() * 3 * sizes["hidden"] * sizes["inner"]
    return max(weight_bytes / (copy_tbps * 1e12), flops / (FP8_TFLOPS * 1e12)) * 1e6


class Timer:
    """Times forwards with events, after writing a 256 MB buffer (no weight left in L2)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device=device) if device.type == "cuda" else None

    def interleaved_ms(self, fns: dict[str, Forward], reps: int) -> dict[str, float]:
        """Median ms of each, interleaved as examples/fp8_block.py times, the buffer written before each call."""
        flush = self.flush.zero_ if self.flush is not None else None
        return dict(zip(fns, time_interleaved_ms(list(fns.values()), self.device, reps, before=flush), strict=True))


def captured(fn: Forward) -> Forward | None:
    """fn captured in a CUDA graph as examples/fp8_block.py captures, or None where it cannot be."""
    try:
        return graph_replay(lambda _: fn(), torch.empty(0))
    except Exception as error:  # noqa: BLE001  (a peer that cannot be captured is reported, not fatal)
        print(f"fp8_moe:   graph capture failed: {type(error).__name__}: {str(error)[:160]}", file=sys.stderr)
        torch.cuda.synchronize()
        return None


def compiled(module: torch.nn.Module, x, ids, weights) -> Forward:
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    namespace: dict = {}
    exec("def forward(x, ids, w):\n    return module(x, ids, w)\n", {"module": module}, namespace)  # noqa: S102
    fn = torch.compile(namespace["forward"], fullgraph=True, dynamic=False)
    return lambda: fn(x, ids, weights)


def summarize(us: dict[str, float], floor: float) -> dict:
    row: dict = {"us": {k: round(v, 2) for k, v in us.items()}, "floor_us": round(floor, 2)}
    peers = [us[name] for name in FP8_PEERS if name in us]
    if "ours" in us and peers:
        row["speedup_vs_transformers"] = round(min(peers) / us["ours"], 3)
    if "ours" in us and "bf16" in us:
        row["speedup_vs_bf16"] = round(us["bf16"] / us["ours"], 3)
    return row


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    gemm = get_local_kernel(args.kernel_dir)
    sizes, modules = build(args, device, gemm)
    copy_tbps = copy_bandwidth_tbps(device) if device.type == "cuda" else 1.0
    timer = Timer(device)
    compile_tokens = {int(t) for t in args.compile_tokens.split(",") if t}
    results = []
    for tokens in args.tokens or sizes["tokens"]:
        for kind in ("uniform", "zipf"):
            ids, weights = routing(kind, tokens, sizes, device, seed=tokens)
            x = torch.randn(
                tokens, sizes["hidden"], device=device, generator=torch.Generator(device=device).manual_seed(3)
            )
            x = x.to(torch.bfloat16)
            active = {n: m for n, m in modules.items() if n != "batched_mm" or tokens <= BATCHED_MM_MAX_TOKENS}
            with torch.no_grad():
                outputs = {name: module(x, ids, weights) for name, module in active.items()}
                reference = outputs["bf16"].double()
                errors = {
                    n: round(((o.double() - reference).norm() / reference.norm()).item(), 4)
                    for n, o in outputs.items()
                    if n != "bf16"
                }
                eager = {name: (lambda m=module, x=x, i=ids, w=weights: m(x, i, w)) for name, module in active.items()}
                floor = floor_us(ids, sizes, copy_tbps)
                row: dict = {"tokens": tokens, "routing": kind, "rel_error_vs_bf16": errors}
                row["eager"] = summarize({k: v * 1e3 for k, v in timer.interleaved_ms(eager, args.reps).items()}, floor)
                if device.type == "cuda":
                    graphs = {name: g for name, fn in eager.items() if (g := captured(fn)) is not None}
                    row["graph"] = summarize(
                        {k: v * 1e3 for k, v in timer.interleaved_ms(graphs, args.reps).items()}, floor
                    )
                    del graphs
                if args.compile and tokens in compile_tokens and kind == "uniform":
                    chosen = [n for n in ("ours", "bf16", "grouped_mm") if n in active]
                    fns = {n: compiled(active[n], x, ids, weights) for n in chosen}
                    row["compiled"] = summarize(
                        {k: v * 1e3 for k, v in timer.interleaved_ms(fns, args.reps).items()}, floor
                    )
            results.append(row)
            print(json.dumps(row), flush=True)
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "torch": torch.__version__,
        "copy_tbps": round(copy_tbps, 3),
        "sizes": {k: v for k, v in sizes.items() if k != "tokens"},
        "reps": args.reps,
        "results": results,
    }


def table(report: dict) -> str:
    columns = ["tokens", "routing", "mode", "floor", "ours", "bf16", *FP8_PEERS, "vs transformers", "vs bf16"]
    lines = ["| " + " | ".join(columns) + " |"]
    lines.append("|---" * 11 + "|")
    for row in report["results"]:
        for mode in ("eager", "graph", "compiled"):
            if mode not in row:
                continue
            cell = row[mode]
            us = cell["us"]
            lines.append(
                f"| {row['tokens']} | {row['routing']} | {mode} | {cell['floor_us']:,.0f} | "
                + " | ".join(f"{us[n]:,.0f}" if n in us else "-" for n in ("ours", "bf16", *FP8_PEERS))
                + f" | {cell.get('speedup_vs_transformers', '-')} | {cell.get('speedup_vs_bf16', '-')} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON results file")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="small sizes (a smoke run, e.g. on CPU)")
    parser.add_argument("--peers", type=Path, default=None, help="folder with built deep-gemm/ and finegrained-fp8/")
    parser.add_argument("--kernel-dir", type=Path, default=DEFAULT_KERNEL_DIR)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--tokens", type=int, nargs="*", help="token counts (default: 1 8 64 512 4096 16384)")
    parser.add_argument("--no-compile", dest="compile", action="store_false")
    parser.add_argument("--compile-tokens", default="1,64,4096")
    args = parser.parse_args(argv)
    report = run(args)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(table(report))


if __name__ == "__main__":
    main()
