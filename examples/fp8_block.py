"""A toy transformer MLP block with fine-grained FP8 linear layers, kernelized with the gemm
kernel's `FP8Linear` and timed against the same block in bfloat16 `nn.Linear`.

The block is DeepSeek-V3's routed-expert MLP: x (hidden 7168) -> gate and up projections
(7168 -> 2 x 2048) -> SiLU(gate) * up -> down projection (2048 -> 7168). The FP8 block holds
each weight as float8_e4m3fn with one float32 scale per 128x128 block (`weight_scale_inv`),
the layout of FP8 checkpoints; `kernelize` swaps the kernel's forward into its linear layers.
The bf16 block holds the same weights dequantized. Both are timed eagerly and under
`torch.compile(fullgraph=True)` for 1 to 8192 tokens.

    python examples/fp8_block.py --out results.json              # CUDA, DeepSeek sizes
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


class MLP(nn.Module):
    def __init__(self, gate_up: nn.Module, down: nn.Module) -> None:
        super().__init__()
        self.gate_up = gate_up
        self.down = down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


def build_blocks(hidden: int, inner: int, device: torch.device, gemm: ModuleType) -> tuple[MLP, MLP]:
    """(FP8 block, bf16 block with the FP8 block's weights dequantized)."""
    torch.manual_seed(0)
    gate_up = nn.Linear(hidden, 2 * inner, bias=False, device=device, dtype=torch.bfloat16)
    down = nn.Linear(inner, hidden, bias=False, device=device, dtype=torch.bfloat16)
    nn.init.normal_(gate_up.weight, std=hidden**-0.5)
    nn.init.normal_(down.weight, std=inner**-0.5)
    fp8 = MLP(FineGrainedFP8Linear(gate_up, gemm), FineGrainedFP8Linear(down, gemm))
    with torch.no_grad():
        for linear, quantized in ((gate_up, fp8.gate_up), (down, fp8.down)):
            linear.weight.copy_(quantized.dequantized_weight())
    return fp8, MLP(gate_up, down)


def time_ms(fn: Callable[[], torch.Tensor], device: torch.device, reps: int) -> float:
    """Median milliseconds of fn() over reps timed calls, after warm-up."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn()
            times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    sizes = TINY if args.tiny else FULL
    gemm = get_local_kernel(args.kernel_dir)
    fp8_block, bf16_block = build_blocks(sizes["hidden"], sizes["inner"], device, gemm)
    mode = Mode.INFERENCE | Mode.TORCH_COMPILE if args.compile else Mode.INFERENCE
    mapping = {"FP8Linear": {device.type: LocalLayerRepository(repo_path=args.kernel_dir, layer_name="FP8Linear")}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(fp8_block, mode=mode, device=device.type, use_fallback=False)
    if fp8_block.down.forward.__func__ is not gemm.layers.FP8Linear.forward:
        raise RuntimeError(f"kernelize kept the original forward of the FP8 layers ({args.kernel_dir})")
    blocks = {"eager": (bf16_block, fp8_block)}
    if args.compile:
        blocks["compiled"] = (torch.compile(bf16_block, fullgraph=True), torch.compile(fp8_block, fullgraph=True))

    rows = []
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tokens in sizes["tokens"]:
            x = torch.randn(tokens, sizes["hidden"], generator=generator).to(device, torch.bfloat16)
            row: dict = {"tokens": tokens}
            for name, (bf16, fp8) in blocks.items():
                bf16_out, fp8_out = bf16(x), fp8(x)
                relative_error = ((fp8_out.float() - bf16_out.float()).norm() / bf16_out.float().norm()).item()
                bf16_ms = time_ms(lambda bf16=bf16, x=x: bf16(x), device, args.reps)
                fp8_ms = time_ms(lambda fp8=fp8, x=x: fp8(x), device, args.reps)
                row[name] = {
                    "bf16_linear_ms": round(bf16_ms, 4),
                    "fp8_kernelized_ms": round(fp8_ms, 4),
                    "speedup": round(bf16_ms / fp8_ms, 3),
                    "relative_error": round(relative_error, 5),
                }
                print(
                    f"tokens {tokens:5d} {name:8s}: bf16 {bf16_ms:9.4f} ms  fp8 {fp8_ms:9.4f} ms  "
                    f"speed-up {bf16_ms / fp8_ms:5.2f}x  rel. error {relative_error:.4f}"
                )
            rows.append(row)
    return {
        "example": "examples/fp8_block.py",
        "block": "x -> gate_up (hidden -> 2 inner) -> silu(gate) * up -> down (inner -> hidden), no bias",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "kernels": kernels.__version__,
        "compiled": args.compile,
        "hidden": sizes["hidden"],
        "inner": sizes["inner"],
        "reps": args.reps,
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
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device (use --device cpu --tiny --no-compile for a smoke test)")
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
