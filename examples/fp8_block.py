"""A toy transformer MLP block with fine-grained FP8 linear layers, kernelized with the gemm
kernel's `FP8Linear` and timed against the same block in bfloat16 `nn.Linear`.

The block is DeepSeek-V3's routed-expert MLP: x (hidden 7168) -> gate and up projections
(7168 -> 2 x 2048) -> SiLU(gate) * up -> down projection (2048 -> 7168). Three blocks:
- bf16: `nn.Linear` layers holding the FP8 weights dequantized; its `SiluAndMul` activation
  layer is kernelized with the gemm kernel's, as the FP8 blocks' are.
- fp8 (`fp8_kernelized_ms`): the block class is decorated as "FP8GatedMLP", so `kernelize`
  swaps the kernel's `FP8GatedMLP` forward into the whole block: the gate and up projection,
  then the down projection of silu(gate) * up quantized in one kernel (no bf16 intermediate).
- fp8 layers (`fp8_layers_ms`): the same FP8 layers in an undecorated block, kernelized layer by
  layer with `FP8Linear` and `SiluAndMul`, as any model whose MLP class has no kernel gets.
The FP8 layers hold each weight as float8_e4m3fn with one float32 scale per 128x128 block
(`weight_scale_inv`), the layout of FP8 checkpoints.

Protocol: one process, identical weights and inputs, the three blocks timed interleaved call by
call (their order rotating), median of --reps, for 1 to 8192 tokens, in three modes:
- eager: each call timed with CUDA events and a synchronize after it (host time included);
- graph: one forward captured in a CUDA graph, its replays timed;
- compiled: torch.compile(fullgraph=True), each block and token count with its own code object.
Host time per layer: microseconds of Python and C++ per `FP8Linear` / `nn.Linear` call (the
gate and up layer, at 1 and at 128 tokens) while the GPU is kept busy, so no call waits for it.

Stack (`--stack N`, N = 8 by default): N blocks with distinct weights run back to back on one
input, captured in one CUDA graph (8 FP8 blocks read 352 MB, more than the H200's 50 MB L2, so no
block finds its weights cached), bf16 and FP8 stacks interleaved replay by replay; reported per
block, beside the FP8 weight-read floor per block at the copy bandwidth measured in the same process
(a 4 GB device-to-device copy). The blocks do not feed each other: without a model's norms and
residuals, a chain of them shrinks its activations to zero within a few blocks.

    python examples/fp8_block.py --out results.json              # CUDA, DeepSeek sizes
    python examples/fp8_block.py --stack --out stack.json        # 8 blocks in one graph
    python examples/fp8_block.py --device cpu --tiny --no-compile --out smoke.json

The gemm kernel is loaded from a kernel folder with a build (default: kernels/gemm of this
repository, built with `kbuild build kernels/gemm`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import kernels
import torch
import torch.nn.functional as F
from kernels import (
    LocalLayerRepository,
    Mode,
    get_local_kernel,
    kernelize,
    use_kernel_forward_from_hub,
    use_kernel_mapping,
)
from torch import nn

DEFAULT_KERNEL_DIR = Path(__file__).resolve().parents[1] / "kernels" / "gemm"
FULL = {"hidden": 7168, "inner": 2048, "tokens": [1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192]}
TINY = {"hidden": 256, "inner": 128, "tokens": [1, 8]}
STACK_TOKENS = {"full": [1, 8, 16, 32, 64, 128, 256], "tiny": [1, 8]}


@use_kernel_forward_from_hub("FP8Linear")
class FineGrainedFP8Linear(nn.Module):
    """A linear layer stored as FP8 checkpoints store it; its own forward dequantizes the weight."""

    def __init__(self, linear: nn.Linear, gemm: ModuleType) -> None:
        super().__init__()
        weight, scale = gemm.quantize_per_block(linear.weight.detach())
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.weight_scale_inv = nn.Parameter(scale, requires_grad=False)
        self.bias = None
        self.block_size = (128, 128)

    def dequantized_weight(self) -> torch.Tensor:
        rows, cols = self.weight.shape
        scale = self.weight_scale_inv.repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
        return self.weight.float() * scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantized_weight().to(x.dtype), self.bias)


@use_kernel_forward_from_hub("SiluAndMul")
class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


class MLP(nn.Module):
    def __init__(self, gate_up_proj: nn.Module, down_proj: nn.Module) -> None:
        super().__init__()
        self.gate_up_proj = gate_up_proj
        self.act_fn = SiluAndMul()
        self.down_proj = down_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


@use_kernel_forward_from_hub("FP8GatedMLP")
class FP8GatedMLP(MLP):
    """The same block, open to a kernel for the whole block."""


class Stack(nn.Module):
    """Blocks run one after the other on the same input; their outputs, in order."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [block(x) for block in self.blocks]


class Blocks(NamedTuple):
    bf16: MLP
    fp8: FP8GatedMLP
    fp8_layers: MLP


def build_blocks(hidden: int, inner: int, device: torch.device, gemm: ModuleType, seed: int = 0) -> Blocks:
    """The three blocks; bf16's weights are the FP8 blocks' dequantized, and both FP8 blocks hold
    the same FP8 layers."""
    torch.manual_seed(seed)
    gate_up = nn.Linear(hidden, 2 * inner, bias=False, device=device, dtype=torch.bfloat16)
    down = nn.Linear(inner, hidden, bias=False, device=device, dtype=torch.bfloat16)
    nn.init.normal_(gate_up.weight, std=hidden**-0.5)
    nn.init.normal_(down.weight, std=inner**-0.5)
    fp8_gate_up, fp8_down = FineGrainedFP8Linear(gate_up, gemm), FineGrainedFP8Linear(down, gemm)
    with torch.no_grad():
        for linear, quantized in ((gate_up, fp8_gate_up), (down, fp8_down)):
            linear.weight.copy_(quantized.dequantized_weight())
    return Blocks(MLP(gate_up, down), FP8GatedMLP(fp8_gate_up, fp8_down), MLP(fp8_gate_up, fp8_down))


Forward = Callable[[], torch.Tensor]


def time_once_ms(fn: Forward, device: torch.device) -> float:
    if device.type != "cuda":
        begin = time.perf_counter()
        fn()
        return (time.perf_counter() - begin) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_interleaved_ms(
    fns: list[Forward], device: torch.device, reps: int, before: Callable[[], object] | None = None
) -> list[float]:
    """Median milliseconds of each over reps calls, interleaved call by call with the order
    rotating and reversing (a call timed right after another reads slightly slower), after
    warm-up; `before` (e.g. an L2 flush) runs untimed before each timed call."""
    for _ in range(3):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for rep in range(reps):
        order = [(rep + i) % len(fns) for i in range(len(fns))]
        if (rep // len(fns)) % 2:
            order.reverse()
        for which in order:
            if before is not None:
                before()
            times[which].append(time_once_ms(fns[which], device))
    return [statistics.median(t) for t in times]


def own_code(module: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """torch.compile of a fresh function calling module, for one input shape: each call of this
    gets its own code object. The layers' forwards are shared by both blocks and every token
    count, so dynamo's recompile limit (8 per code object) is raised to cover them."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    namespace: dict = {}
    exec("def forward(x):\n    return module(x)\n", {"module": module}, namespace)  # noqa: S102
    return torch.compile(namespace["forward"], fullgraph=True, dynamic=False)


def graph_replay(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> Forward:
    """One forward of fn on x captured in a CUDA graph (after warm-up on a side stream); returns
    its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(x)

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


def copy_bandwidth_tbps(device: torch.device) -> float:
    """Bytes read plus written per second of a 4 GB device-to-device copy (median of 10)."""
    src = torch.empty(2 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * src.numel() / statistics.median(times[2:]) / 1e12


def host_us(first: Forward, second: Forward, rounds: int = 21, calls: int = 100) -> tuple[float, float]:
    """Median host microseconds per call of each while the GPU is kept busy (a sleep kernel queued
    ahead), so no call waits for the device; rounds interleaved, order alternating."""
    times: tuple[list[float], list[float]] = ([], [])
    for rnd in range(rounds):
        for which in (0, 1) if rnd % 2 == 0 else (1, 0):
            fn = (first, second)[which]
            torch.cuda.synchronize()
            torch.cuda._sleep(50_000_000)  # ~30 ms of GPU time: longer than the calls' host time
            begin = time.perf_counter()
            for _ in range(calls):
                fn()
            times[which].append((time.perf_counter() - begin) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times[0]), statistics.median(times[1])


def kernelized_blocks(args: argparse.Namespace, device: torch.device, gemm: ModuleType, seed: int = 0) -> Blocks:
    sizes = TINY if args.tiny else FULL
    blocks = build_blocks(sizes["hidden"], sizes["inner"], device, gemm, seed)
    mode = Mode.INFERENCE | Mode.TORCH_COMPILE if args.compile else Mode.INFERENCE
    mapping = {
        name: {device.type: LocalLayerRepository(repo_path=args.kernel_dir, layer_name=name)}
        for name in ("FP8Linear", "SiluAndMul", "FP8GatedMLP")
    }
    with use_kernel_mapping(mapping, inherit_mapping=False):
        for block in blocks:
            kernelize(block, mode=mode, device=device.type, use_fallback=False)
    swapped = (
        (blocks.fp8_layers.down_proj, gemm.layers.FP8Linear),
        (blocks.fp8, gemm.layers.FP8GatedMLP),
        (blocks.bf16.act_fn, gemm.layers.SiluAndMul),
    )
    for module, layer in swapped:
        if module.forward.__func__ is not layer.forward:
            raise RuntimeError(f"kernelize kept the original forward of {type(module).__name__} ({args.kernel_dir})")
    return blocks


def environment(device: torch.device) -> dict:
    """The device, the date and the versions, for a result's JSON."""
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "kernels": kernels.__version__,
    }


def relative_error(out: torch.Tensor, reference: torch.Tensor) -> float:
    return ((out.float() - reference.float()).norm() / reference.float().norm()).item()


def timed_modes(blocks: Blocks, x: torch.Tensor, compile_blocks: bool) -> dict[str, list[Forward]]:
    """Per mode, one forward of each block (bf16, fp8, fp8 layers) on x."""
    modes: dict[str, list[Forward]] = {"eager": [lambda b=b: b(x) for b in blocks]}
    if x.device.type == "cuda":
        modes["graph"] = [graph_replay(b, x) for b in blocks]
    if compile_blocks:
        compiled = [own_code(b) for b in blocks]
        modes["compiled"] = [lambda f=f: f(x) for f in compiled]
    return modes


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    sizes = TINY if args.tiny else FULL
    gemm = get_local_kernel(args.kernel_dir)
    blocks = kernelized_blocks(args, device, gemm)

    rows = []
    host: dict[int, dict[str, float]] = {}
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        if device.type == "cuda":
            for tokens in (1, 128):
                xh = torch.randn(tokens, sizes["hidden"], generator=generator).to(device, torch.bfloat16)
                fp8_host, bf16_host = host_us(
                    lambda xh=xh: blocks.fp8.gate_up_proj(xh), lambda xh=xh: blocks.bf16.gate_up_proj(xh)
                )
                host[tokens] = {"fp8_linear": round(fp8_host, 2), "nn_linear": round(bf16_host, 2)}
                print(
                    f"host time per gate_up layer call, {tokens} tokens: FP8Linear {fp8_host:.1f} us, "
                    f"nn.Linear {bf16_host:.1f} us"
                )
        for tokens in sizes["tokens"]:
            x = torch.randn(tokens, sizes["hidden"], generator=generator).to(device, torch.bfloat16)
            row: dict = {"tokens": tokens}
            for name, forwards in timed_modes(blocks, x, args.compile).items():
                bf16_out, fp8_out, layers_out = (forward() for forward in forwards)
                bf16_ms, fp8_ms, layers_ms = time_interleaved_ms(forwards, device, args.reps)
                error = relative_error(fp8_out, bf16_out)
                row[name] = {
                    "bf16_linear_ms": round(bf16_ms, 4),
                    "fp8_kernelized_ms": round(fp8_ms, 4),
                    "speedup": round(bf16_ms / fp8_ms, 3),
                    "relative_error": round(error, 5),
                    "fp8_layers_ms": round(layers_ms, 4),
                    "speedup_layers": round(bf16_ms / layers_ms, 3),
                    "relative_error_layers": round(relative_error(layers_out, bf16_out), 5),
                }
                print(
                    f"tokens {tokens:5d} {name:8s}: bf16 {bf16_ms:9.4f} ms  fp8 {fp8_ms:9.4f} ms "
                    f"({bf16_ms / fp8_ms:5.2f}x)  fp8 layers {layers_ms:9.4f} ms ({bf16_ms / layers_ms:5.2f}x)  "
                    f"rel. error {error:.4f}"
                )
            rows.append(row)
    return {
        "example": "examples/fp8_block.py",
        "block": "x -> gate_up_proj (hidden -> 2 inner) -> silu(gate) * up -> down_proj (inner -> hidden), no bias",
        **environment(device),
        "compiled": args.compile,
        "hidden": sizes["hidden"],
        "inner": sizes["inner"],
        "reps": args.reps,
        "host_us": host.get(1),
        "host_us_128_tokens": host.get(128),
        "results": rows,
    }


def run_stack(args: argparse.Namespace) -> dict:
    """--stack: args.stack distinct blocks chained in one forward, bf16 against the kernelized FP8
    block, per block; CUDA graphs on CUDA, eager elsewhere."""
    device = torch.device(args.device)
    sizes = TINY if args.tiny else FULL
    gemm = get_local_kernel(args.kernel_dir)
    stacks = [kernelized_blocks(args, device, gemm, seed=block) for block in range(args.stack)]
    bf16, fp8 = Stack([s.bf16 for s in stacks]), Stack([s.fp8 for s in stacks])
    fp8_weight_bytes = 3 * sizes["hidden"] * sizes["inner"]  # one byte each: gate, up and down
    copy_tbps = copy_bandwidth_tbps(device) if device.type == "cuda" else None
    floor_us = fp8_weight_bytes / (copy_tbps * 1e12) * 1e6 if copy_tbps else None
    if copy_tbps:
        print(f"copy bandwidth {copy_tbps:.2f} TB/s: FP8 weight-read floor {floor_us:.2f} us per block")
    rows = []
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tokens in STACK_TOKENS["tiny" if args.tiny else "full"]:
            x = torch.randn(tokens, sizes["hidden"], generator=generator).to(device, torch.bfloat16)
            if device.type == "cuda":
                forwards = [graph_replay(stack, x) for stack in (bf16, fp8)]
            else:
                forwards = [lambda stack=stack, x=x: stack(x) for stack in (bf16, fp8)]
            error = max(map(relative_error, forwards[1](), forwards[0]()))
            bf16_ms, fp8_ms = time_interleaved_ms(forwards, device, args.reps)
            bf16_us, fp8_us = bf16_ms * 1e3 / args.stack, fp8_ms * 1e3 / args.stack
            row = {"tokens": tokens, "bf16_us": round(bf16_us, 2), "fp8_us": round(fp8_us, 2)}
            row |= {"floor_us": round(floor_us, 2) if floor_us else None, "speedup": round(bf16_us / fp8_us, 3)}
            row |= {"fp8_over_floor": round(fp8_us / floor_us, 2) if floor_us else None}
            row["relative_error"] = round(error, 5)
            rows.append(row)
            versus_floor = f"  {fp8_us / floor_us:5.2f}x floor" if floor_us else ""
            print(
                f"stack of {args.stack}, tokens {tokens:4d}, per block: bf16 {bf16_us:8.2f} us  fp8 {fp8_us:8.2f} us "
                f"({bf16_us / fp8_us:4.2f}x){versus_floor}  rel. error {error:.4f}"
            )
    return {
        "example": "examples/fp8_block.py --stack",
        "stack": "N blocks with distinct weights, one after the other on one input, in one CUDA graph",
        **environment(device),
        "hidden": sizes["hidden"],
        "inner": sizes["inner"],
        "reps": args.reps,
        "blocks": args.stack,
        "copy_tbps": round(copy_tbps, 3) if copy_tbps else None,
        "fp8_weight_mb_per_block": round(fp8_weight_bytes / 1e6, 2),
        "results": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write the results to")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="hidden 256, inner 128, 1 and 8 tokens (smoke test)")
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time both blocks under torch.compile(fullgraph=True) (default: on)",
    )
    parser.add_argument("--reps", type=int, default=50, help="timed calls per measurement (median)")
    parser.add_argument("--kernel-dir", type=Path, default=DEFAULT_KERNEL_DIR, help="gemm kernel folder with build/")
    parser.add_argument(
        "--stack",
        type=int,
        nargs="?",
        const=8,
        metavar="N",
        help="time N distinct blocks back to back in one CUDA graph, per block (N = 8 if not given)",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device (use --device cpu --tiny --no-compile for a smoke test)")
    if args.stack is not None and args.stack < 1:
        parser.error(f"--stack {args.stack}: the stack needs at least one block")
    result = run_stack(args) if args.stack is not None else run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
