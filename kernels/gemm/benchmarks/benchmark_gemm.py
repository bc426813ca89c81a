"""`kernels benchmark` script for the FP8 block-scaled GEMM (gemm_nt, DeepSeek-V3 shapes).

Run with: kernels benchmark kernels-community/gemm
(`python benchmark_gemm.py [cpu|cuda]` runs the small workload once with the runner's check: a
smoke test of this script.) Scales are chosen so that outputs stay near 1: the runner's check
(allclose(out, reference, atol=1e-2)) then measures real bf16-level agreement.
"""

import torch
from kernels.benchmark import Benchmark

SCALE_BLOCK = 128
OUTPUT_STD = 0.25  # keeps |out| < ~1.5, where one bf16 ulp is < 1e-2
WORKLOADS = {
    "small": (64, 64, 128),
    "m1024_n1536_k7168": (1024, 1536, 7168),
    "m1024_n576_k7168": (1024, 576, 7168),
    "m6144_n7168_k2304": (6144, 7168, 2304),
    "m6144_n4608_k7168": (6144, 4608, 7168),
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _setup(self, M: int, N: int, K: int) -> None:
    fp8 = torch.float8_e4m3fnuz if torch.version.hip else torch.float8_e4m3fn
    kb, nb = _ceil_div(K, SCALE_BLOCK), _ceil_div(N, SCALE_BLOCK)
    scale = (OUTPUT_STD / K**0.5) ** 0.5  # a_scale * b_scale * sqrt(K) = OUTPUT_STD
    self.a = torch.randn(M, K, device=self.device).to(fp8)
    self.b = torch.randn(N, K, device=self.device).to(fp8)
    self.a_scale = torch.full((kb, M), scale, device=self.device).t()  # (M, kb), M-major
    self.b_scale = torch.full((nb, kb), scale, device=self.device)
    self.out = torch.empty(M, N, device=self.device, dtype=torch.bfloat16)


def _run(self) -> None:
    self.kernel.gemm_nt(self.a, self.b, self.a_scale, self.b_scale, self.out)


def _reference(self) -> torch.Tensor:
    """Dequantize in float32 and multiply (TF32 off), rounded to bf16 like the kernel."""
    K = self.a.shape[1]
    k_block = torch.arange(K, device=self.a.device) // SCALE_BLOCK
    n_block = torch.arange(self.b.shape[0], device=self.a.device) // SCALE_BLOCK
    a = self.a.float() * self.a_scale[:, k_block]
    b = self.b.float() * self.b_scale[n_block][:, k_block]
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return (a @ b.t()).to(torch.bfloat16)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


class Fp8BlockGemmBenchmark(Benchmark):
    """gemm_nt(a (M,K), b (N,K), a_scale (M,K/128), b_scale (N/128,K/128)) -> (M,N) bf16."""

    seed = 0


for _name, _shape in WORKLOADS.items():
    setattr(Fp8BlockGemmBenchmark, f"setup_{_name}", lambda self, s=_shape: _setup(self, *s))
    setattr(Fp8BlockGemmBenchmark, f"benchmark_{_name}", _run)
    setattr(Fp8BlockGemmBenchmark, f"verify_{_name}", _reference)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from kernel_id import REPO_ID, VERSION
    from kernels import get_kernel

    bench = Fp8BlockGemmBenchmark()
    bench.kernel = get_kernel(REPO_ID, version=VERSION)
    bench.device = sys.argv[1] if len(sys.argv) > 1 else "cuda" if torch.cuda.is_available() else "cpu"
    bench.setup_small()
    bench.benchmark_small()
    reference = bench.verify_small()
    error = (bench.out.float() - reference.float()).abs().max().item()
    print(f"small workload on {bench.device}: max |out - reference| = {error:.3g} (the runner allows 1e-2)")
    sys.exit(0 if reference.dtype == bench.out.dtype and error <= 1e-2 else 1)
