"""relu bandwidth: our kernel against torch.relu and a plain device copy of the same bytes.

Run: LOCAL_KERNELS=kernels-community/relu=kernels/relu python kernels/relu/benchmarks/benchmark_relu.py
Achieved bandwidth counts the bytes read and written once each (2 x the tensor size).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from kernels import get_kernel


def time_ms(fn, device: str, repeats: int) -> float:
    """Median milliseconds of `fn()` over `repeats` calls after warm-up."""
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256, help="tensor size in MiB (default 256)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, args.dtype)
    numel = args.mib * 2**20 // torch.empty((), dtype=dtype).element_size()
    relu = get_kernel("kernels-community/relu", version=1)
    x = torch.randn(numel, device=device).to(dtype)
    out = torch.empty_like(x)
    moved = 2 * x.numel() * x.element_size()
    rows = [
        ("kernels relu", time_ms(lambda: relu.relu(x, out=out), device, args.repeats)),
        ("torch.clamp_min", time_ms(lambda: torch.clamp_min(x, 0, out=out), device, args.repeats)),
        ("copy (out.copy_(x))", time_ms(lambda: out.copy_(x), device, args.repeats)),
    ]
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"relu, {args.mib} MiB {args.dtype} on {name} ({device}), median of {args.repeats}")
    print(f"{'what':<22}{'ms':>10}{'GB/s':>10}")
    for label, ms in rows:
        print(f"{label:<22}{ms:>10.3f}{moved / ms / 1e6:>10.1f}")


if __name__ == "__main__":
    main()
