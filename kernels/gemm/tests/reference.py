"""Float64 reference, pass criterion, shapes and input generation for the FP8 GEMM.

Shared by the tests and the benchmarks (which import it via sys.path). The shapes, the
criterion and the floor model are those of DESIGN.md's benchmark protocol.
"""

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch


def _load_scale_module():
    """The package's own scale-block module (torch-ext/gemm/_scale.py), loaded by path: the
    tests and benchmarks run against a built package, not an importable source tree."""
    path = Path(__file__).resolve().parents[1] / "torch-ext" / "gemm" / "_scale.py"
    spec = importlib.util.spec_from_file_location("gemm_scale", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_scale = _load_scale_module()
SCALE_BLOCK: int = _scale.SCALE_BLOCK
ceil_div = _scale.ceil_div

# (M, N, K): DeepSeek-V3/R1 linear layers at TP=8, ranked in the peers' table.
RANKED_SHAPES = [
    (1024, 1536, 7168),
    (1024, 3072, 1536),
    (1024, 576, 7168),
    (1024, 7168, 256),
    (1024, 7168, 2048),
    (1024, 4608, 7168),
    (1024, 7168, 2304),
    (1024, 512, 7168),
    (1024, 4096, 512),
    (6144, 1536, 7168),
    (6144, 3072, 1536),
    (6144, 576, 7168),
    (6144, 7168, 256),
    (6144, 7168, 2048),
    (6144, 4608, 7168),
    (6144, 7168, 2304),
    (6144, 512, 7168),
    (6144, 4096, 512),
]
CORRECTNESS_SHAPES = [
    (64, 64, 128),
    (64, 1536, 7168),
    (64, 3072, 1536),
    (64, 576, 7168),
    (96, 7168, 256),
    (96, 7168, 2048),
    (96, 4608, 7168),
    (128, 7168, 2304),
    (128, 512, 7168),
    (512, 4096, 512),
    (512, 1536, 7168),
]
# Shapes at the edges: single rows/columns, K and N off the 128 grid.
ODD_SHAPES = [
    (1, 1, 1),
    (1, 128, 128),
    (3, 1, 300),
    (7, 5, 1),
    (17, 130, 129),
    (130, 7, 255),
    (65, 257, 384),
    (1, 300, 1000),
]

# Pass criterion (DESIGN.md, "Benchmark protocol").
MAX_RELATIVE_FROBENIUS = 2.5e-3
ELEMENT_ATOL_OF_STD = 1e-2
ELEMENT_RTOL = 2e-2

# When the Frobenius bound holds, and what replaces it when it need not.
# The FP8 operands are the inputs: the reference multiplies the same e4m3 values, so their own
# rounding from randn (up to 2^-4 of a value) is no error of the GEMM. A product of two e4m3
# values (4 significant bits each) is exact in fp32. What remains:
#   (1) the sums: fp32 adds and the per-block FMA with the fp32 scale product, at most
#       (min(K, 128) + ceil(K/128) + 1) * 2^-24 of sum_k |term| per element, under 1e-5 of
#       the result for these inputs (Hopper's FP8 wgmma keeps fewer bits inside a 128-K block:
#       the bound's room beyond (2) is for that);
#   (2) rounding each output to bf16 (8 significant bits): at most 2^-8 of the element, and
#       1.66e-3 in root mean square over many elements of random data.
# 2.5e-3 is (2)'s mean plus room for (1). The squared relative Frobenius error is the mean of
# the elements' squared relative roundings d_i^2 (each in [0, 2^-16]) weighted by ref_i^2, so
# its spread depends on the effective number of elements n_eff = (sum ref^2)^2 / sum ref^4,
# not on the element count: one row with a large scale product can hold the whole norm
# (17x130x129 drawn with seed 599368484 has 2210 elements but n_eff = 4.5, and rounding its
# exact result to bf16 alone gives 2.505e-3). By Hoeffding's inequality the weighted mean
# exceeds 2.5e-3^2, from a mean of 1.66e-3^2, with probability at most
# exp(-2 (2.5e-3^2 - 1.66e-3^2)^2 n_eff / 2^-32) = exp(-0.105 n_eff): below 1e-9 from
# n_eff = 200 on. Below that only the worst case of (2) holds, 2^-8 of every element and so of
# the Frobenius norm, which is added to the bound. The elementwise check applies to every size.
MIN_EFFECTIVE_ELEMENTS = 200
BF16_UNIT_ROUNDOFF = 2.0**-8

# H100 SXM rates measured for the peers' table (attainable floor).
ATTAINABLE_TFLOPS = 1450.0
ATTAINABLE_TBPS = 3.0


def reference_gemm(a, b, a_scale, b_scale) -> torch.Tensor:
    """``sum_k a[m,k] a_scale[k//128,m] b[k,n] b_scale[k//128,n//128]`` in float64.

    Takes the operands of ``gemm`` (a (M,K), b (K,N), a_scale (kb,M), b_scale (kb,nb)).
    """
    M, K = a.shape
    N = b.shape[1]
    k_block = torch.arange(K, device=a.device) // SCALE_BLOCK
    n_block = torch.arange(N, device=a.device) // SCALE_BLOCK
    a64 = a.to(torch.float64) * a_scale.to(torch.float64).t()[:, k_block]
    b64 = b.to(torch.float64) * b_scale.to(torch.float64)[k_block][:, n_block]
    return a64 @ b64


@dataclass
class Verdict:
    ok: bool
    relative_frobenius: float
    violations: int
    nonfinite: int
    frobenius_limit: float = MAX_RELATIVE_FROBENIUS

    def __str__(self) -> str:
        return (
            f"relative Frobenius error {self.relative_frobenius:.3e} "
            f"(max {self.frobenius_limit:.2e}), {self.violations} elementwise violations, "
            f"{self.nonfinite} NaN/inf"
        )


def judge(out: torch.Tensor, ref: torch.Tensor, frobenius_limit: float = MAX_RELATIVE_FROBENIUS) -> Verdict:
    """The page's criterion: all finite; relative Frobenius error <= 2.5e-3 (or the given
    limit); and ``|out - ref| <= 1e-2 * std(ref) + 2e-2 * |ref|`` for every element."""
    got = out.to(torch.float64)
    nonfinite = int((~torch.isfinite(got)).sum())
    if ref.numel() == 0:
        return Verdict(nonfinite == 0, 0.0, 0, nonfinite, frobenius_limit)
    diff = (got - ref).abs()
    ref_norm = ref.norm().item()
    rel = (got - ref).norm().item() / ref_norm if ref_norm > 0 else (got - ref).norm().item()
    std = ref.std().item() if ref.numel() > 1 else 0.0
    bad = diff > ELEMENT_ATOL_OF_STD * std + ELEMENT_RTOL * ref.abs()
    violations = int(bad.sum())
    ok = nonfinite == 0 and rel <= frobenius_limit and violations == 0
    return Verdict(ok, rel, violations, nonfinite, frobenius_limit)


def effective_elements(ref: torch.Tensor) -> float:
    """(sum ref^2)^2 / sum ref^4: how many elements hold the norm (numel when all are equal)."""
    squares = ref.to(torch.float64).square()
    fourth = squares.square().sum().item()
    return squares.sum().item() ** 2 / fourth if fourth > 0 else 0.0


def frobenius_limit(ref: torch.Tensor) -> float:
    """The Frobenius bound for this reference (the derivation above MIN_EFFECTIVE_ELEMENTS)."""
    if effective_elements(ref) >= MIN_EFFECTIVE_ELEMENTS:
        return MAX_RELATIVE_FROBENIUS
    return MAX_RELATIVE_FROBENIUS + BF16_UNIT_ROUNDOFF


def verify(out, a, b, a_scale, b_scale) -> Verdict:
    """Judges ``out = gemm(a, b, a_scale, b_scale)`` against the float64 reference with the
    criterion, the Frobenius bound as frobenius_limit gives it."""
    ref = reference_gemm(a, b, a_scale, b_scale)
    return judge(out, ref, frobenius_limit(ref))


def random_fp8(rows: int, cols: int, dtype, device, generator, contiguous_rows: bool = True):
    """(rows, cols) FP8 from randn; row-major, or column-major when contiguous_rows=False."""
    shape = (rows, cols) if contiguous_rows else (cols, rows)
    x = torch.randn(shape, generator=generator, device=device).to(dtype)
    return x if contiguous_rows else x.t()


def random_scales(rows: int, cols: int, device, generator, row_major: bool = True):
    """(rows, cols) float32 scales from randn (negative ones included), in either layout."""
    shape = (rows, cols) if row_major else (cols, rows)
    s = torch.randn(shape, generator=generator, device=device, dtype=torch.float32)
    return s if row_major else s.t()


@dataclass(frozen=True)
class Layout:
    """Storage order of each gemm operand: True = row-major (last dim contiguous)."""

    a_row: bool = True  # a (M, K): K-contiguous
    b_row: bool = True  # b (K, N): N-contiguous
    a_scale_row: bool = True  # (kb, M): M-contiguous
    b_scale_row: bool = True
    out_row: bool = True

    @property
    def name(self) -> str:
        return "-".join(
            f"{n}{'R' if r else 'C'}"
            for n, r in zip(
                ("a", "b", "sa", "sb", "out"),
                (self.a_row, self.b_row, self.a_scale_row, self.b_scale_row, self.out_row),
                strict=True,
            )
        )


def make_gemm_inputs(M, N, K, dtype, device, generator, layout: Layout | None = None):
    """Fresh random operands of ``gemm`` in the given layout, and a NaN-poisoned out."""
    layout = layout or Layout()
    kb, nb = ceil_div(K, SCALE_BLOCK), ceil_div(N, SCALE_BLOCK)
    a = random_fp8(M, K, dtype, device, generator, layout.a_row)
    b = random_fp8(K, N, dtype, device, generator, layout.b_row)
    a_scale = random_scales(kb, M, device, generator, layout.a_scale_row)
    b_scale = random_scales(kb, nb, device, generator, layout.b_scale_row)
    out = poisoned_out(M, N, device, layout.out_row)
    return a, b, a_scale, b_scale, out


def poisoned_out(M, N, device, row_major: bool = True) -> torch.Tensor:
    shape = (M, N) if row_major else (N, M)
    out = torch.full(shape, float("nan"), dtype=torch.bfloat16, device=device)
    return out if row_major else out.t()


def flop(M: int, N: int, K: int) -> float:
    return 2.0 * M * N * K


def min_bytes(M: int, N: int, K: int) -> float:
    """Each input read once, the output written once (the page's byte count)."""
    kb, nb = ceil_div(K, SCALE_BLOCK), ceil_div(N, SCALE_BLOCK)
    return M * K + N * K + 4 * M * kb + 4 * nb * kb + 2 * M * N


def attainable_floor_us(M: int, N: int, K: int) -> float:
    """max(FLOP / 1450 TFLOP/s, bytes / 3.0 TB/s) in microseconds (H100 SXM)."""
    return (
        max(
            flop(M, N, K) / (ATTAINABLE_TFLOPS * 1e12),
            min_bytes(M, N, K) / (ATTAINABLE_TBPS * 1e12),
        )
        * 1e6
    )


def quantize_reference(x: torch.Tensor, dtype: torch.dtype, silu_and_mul: bool = False):
    """The activation quantization as the kernels define it, in torch operations on x's device.

    Per row and 128 columns: ``scale = amax / fp8_max`` (a tensor division, which is an IEEE
    division on every device; torch computes ``tensor / python_float`` as a multiply by the
    reciprocal on CUDA), ``q = fp8(clamp(x / d))`` with ``d = scale if scale > 0 else 1``.
    With silu_and_mul, x is (M, 2K) and ``silu(gate) * up`` is quantized, computed in fp32.
    Returns ``(q (M, K), scale (M, ceil(K/128)))``.
    """
    x = x.float()
    if silu_and_mul:
        gate, up = x.chunk(2, dim=-1)
        x = gate / (1 + torch.exp(-gate)) * up
    rows, cols = x.shape
    padded = torch.nn.functional.pad(x, (0, -cols % SCALE_BLOCK)).view(rows, -1, SCALE_BLOCK)
    fp8_max = torch.finfo(dtype).max
    amax = padded.abs().amax(dim=-1)
    scale = amax / torch.full_like(amax, fp8_max)
    divisor = torch.where(scale > 0, scale, torch.ones_like(scale)).unsqueeze(-1)
    q = (padded / divisor).clamp(-fp8_max, fp8_max).to(dtype)
    return q.view(rows, -1)[:, :cols], scale
