"""Host (CPU) time per call of our ops, next to torch's blockwise `_scaled_mm` and a trivial op.

Where a GEMM takes less GPU time than its call takes on the host, as small ones do in eager
mode, the host time is what a model waits for. Protocol: 200 warm-up calls, then the best of
three rounds of N calls issued back to back without synchronising: wall time per call in µs.
Next to it, the GPU time of one call (CUDA events around it, issued behind a spinning kernel,
warm, median of 20). Where that is the longer of the two, the queue fills, the loop waits for
the GPU and its figure is no host time: such rows are marked `gpu-bound`.

    LOCAL_KERNELS=kernels-community/gemm=kernels/gemm \\
        python kernels/gemm/benchmarks/host_overhead.py 1024 4096 512

`--device cpu` times the CPU path on a tiny shape instead (a smoke test of this script).
"""

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference import ceil_div  # noqa: E402

REPO_ID = "kernels-community/gemm"


def host_us(fn, calls: int, sync) -> float:
    for _ in range(min(calls, 200)):
        fn()
    sync()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) * 1e6 / calls)
        sync()
    return best


def gpu_us(fn) -> float:
    """One call's GPU time: the GPU is kept busy while the host issues it, so none of the host's
    time falls between the events."""
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000)  # about 100 µs of spinning
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shape", nargs="*", type=int, default=[1024, 4096, 512], help="M N K")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--calls", type=int, default=3000)
    args = p.parse_args()
    if len(args.shape) != 3 or min(args.shape) <= 0:
        p.error(f"shape: expected three positive integers M N K, got {args.shape}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu)")
    from kernels import get_kernel

    kernel = get_kernel(REPO_ID, version=1)
    device = torch.device(args.device)
    M, N, K = args.shape if device.type == "cuda" else (16, 32, 128)
    kb, nb = ceil_div(K, 128), ceil_div(N, 128)
    a = torch.randn(M, K, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device=device).to(torch.float8_e4m3fn)
    a_scale = torch.rand(kb, M, device=device).t()  # (M, kb), M-major as quantize_per_token_group gives it
    b_scale = torch.rand(nb, kb, device=device)
    out = torch.empty(M, N, device=device, dtype=torch.bfloat16)
    small = torch.empty(16, device=device)
    calls = {
        "gemm_nt": lambda: kernel.gemm_nt(a, b, a_scale, b_scale, out),
        "gemm (transposed views made per call)": lambda: kernel.gemm(a, b.t(), a_scale.t(), b_scale.t(), out),
        "tensor.zero_ (one small torch op)": lambda: small.zero_(),
    }
    if device.type == "cuda" and kb % 4 == 0:  # torch 2.11's blockwise _scaled_mm is wrong otherwise
        calls["torch._scaled_mm blockwise"] = lambda: torch._scaled_mm(
            a, b.t(), scale_a=a_scale, scale_b=b_scale.t(), out_dtype=torch.bfloat16
        )
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(f"# {M}x{N}x{K}, {name}, torch {torch.__version__}: call, host µs per call, GPU µs of one call")
    for label, fn in calls.items():
        host = host_us(fn, args.calls if device.type == "cuda" else 20, sync)
        if device.type != "cuda":
            print(f"{label},{host:.2f},-", flush=True)
            continue
        gpu = gpu_us(fn)
        print(f"{label},{host:.2f},{gpu:.2f}" + (",gpu-bound" if gpu >= host else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
