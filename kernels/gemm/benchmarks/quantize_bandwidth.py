"""The fused activation quantization against the memory bound, and against the torch-op chain
it replaced.

The bound: the kernel must read the bf16 activations once and write the e4m3 codes and the
scales once; at the card's measured copy bandwidth (a device-to-device copy, bytes read plus
bytes written) that takes `bytes / bandwidth`. Times are CUDA-event medians over --reps calls;
the inputs (>= 100 MB for the default shape) are larger than the L2, so no flush is needed. The
kernel and the torch chain are timed interleaved call by call.

    LOCAL_KERNELS=kernels-community/gemm=kernels/gemm python kernels/gemm/benchmarks/quantize_bandwidth.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from kernel_id import REPO_ID, VERSION  # noqa: E402
from reference import SCALE_BLOCK, ceil_div, quantize_reference  # noqa: E402


def event_ms(fn: Callable[[], object]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def interleaved_ms(fns: list[Callable[[], object]], reps: int) -> list[float]:
    for fn in fns:
        fn()
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for rep in range(reps):
        order = range(len(fns)) if rep % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            times[i].append(event_ms(fns[i]))
    return [statistics.median(t) for t in times]


def copy_bandwidth(reps: int) -> float:
    """Bytes per second of a 1 GiB device-to-device copy, counting bytes read and written."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    (ms,) = interleaved_ms([lambda: dst.copy_(src)], reps)
    return 2 * src.numel() / (ms * 1e-3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs=2, default=(8192, 7168), metavar=("M", "K"))
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out", type=Path, help="JSON file for the results")
    args = parser.parse_args()
    from kernels import get_kernel

    gemm = get_kernel(REPO_ID, version=VERSION)
    M, K = args.shape
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    fp8 = torch.float8_e4m3fn
    bandwidth = copy_bandwidth(args.reps)
    fused_ms, torch_ms = interleaved_ms(
        [lambda: gemm.quantize_per_token_group(x, SCALE_BLOCK, fp8), lambda: quantize_reference(x, fp8)], args.reps
    )
    q, scale = gemm.quantize_per_token_group(x, SCALE_BLOCK, fp8)
    q_ref, scale_ref = quantize_reference(x, fp8)
    exact = torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(scale, scale_ref)
    moved = M * K * (x.element_size() + 1) + M * ceil_div(K, SCALE_BLOCK) * 4
    bound_ms = moved / bandwidth * 1e3
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "shape": [M, K],
        "copy_bandwidth_tb_s": round(bandwidth / 1e12, 3),
        "bytes_moved": moved,
        "bound_us": round(bound_ms * 1e3, 1),
        "fused_us": round(fused_ms * 1e3, 1),
        "fused_over_bound": round(fused_ms / bound_ms, 3),
        "torch_ops_us": round(torch_ms * 1e3, 1),
        "bit_exact": exact,
    }
    print(
        f"quantize {M}x{K} bf16 -> e4m3: fused {fused_ms * 1e3:.1f} us, bound {bound_ms * 1e3:.1f} us "
        f"({fused_ms / bound_ms:.2f}x; copy {bandwidth / 1e12:.2f} TB/s), torch ops {torch_ms * 1e3:.1f} us, "
        f"bit-exact {exact}"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
