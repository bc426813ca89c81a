"""Correctness of gemm and gemm_nt against the float64 reference (the page's criterion)."""

import itertools

import pytest
import torch
from reference import (
    CORRECTNESS_SHAPES,
    ODD_SHAPES,
    RANKED_SHAPES,
    SCALE_BLOCK,
    Layout,
    ceil_div,
    make_gemm_inputs,
    poisoned_out,
    verify,
)

ALL_LAYOUTS = [Layout(*flags) for flags in itertools.product((True, False), repeat=5)]
LAYOUT_SHAPE = (70, 200, 300)  # odd in every dimension: edges of tiles and scale blocks
QUICK_SHAPES = [(64, 64, 128), (128, 512, 1024)]


def check_gemm(kernel, M, N, K, dtype, device, rng, layout=None):
    a, b, a_scale, b_scale, out = make_gemm_inputs(M, N, K, dtype, device, rng, layout)
    result = kernel.gemm(a, b, a_scale, b_scale, out)
    assert result is out
    verdict = verify(out, a, b, a_scale, b_scale)
    assert verdict.ok, f"gemm {M}x{N}x{K} {layout.name if layout else ''}: {verdict}"


def check_gemm_nt(kernel, M, N, K, dtype, device, rng):
    """gemm_nt with the row-major operands of DeepGEMM / torch._scaled_mm."""
    kb, nb = ceil_div(K, SCALE_BLOCK), ceil_div(N, SCALE_BLOCK)
    a = torch.randn(M, K, generator=rng, device=device).to(dtype)
    b = torch.randn(N, K, generator=rng, device=device).to(dtype)
    a_scale = torch.randn(kb, M, generator=rng, device=device).t()  # (M, kb), M-major
    b_scale = torch.randn(nb, kb, generator=rng, device=device)
    out = poisoned_out(M, N, device)
    kernel.gemm_nt(a, b, a_scale, b_scale, out)
    verdict = verify(out, a, b.t(), a_scale.t(), b_scale.t())
    assert verdict.ok, f"gemm_nt {M}x{N}x{K}: {verdict}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", ODD_SHAPES + QUICK_SHAPES, ids=str)
def test_quick_shapes(kernel, device, fp8_dtype, rng, path, shape):
    check_gemm(kernel, *shape, fp8_dtype, device, rng)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("layout", ALL_LAYOUTS, ids=lambda layout: layout.name)
def test_every_layout(kernel, device, fp8_dtype, rng, path, layout):
    check_gemm(kernel, *LAYOUT_SHAPE, fp8_dtype, device, rng, layout)


# 1152x1152x144: rows 144 bytes apart, which the Hopper path copies to a 128-byte pitch first
# (it does where M N / (M + N) >= 512; here 576).
@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 130, 129), (64, 256, 512), (1152, 1152, 144)], ids=str)
def test_gemm_nt(kernel, device, fp8_dtype, rng, path, shape):
    check_gemm_nt(kernel, *shape, fp8_dtype, device, rng)


@pytest.mark.kernels_ci
def test_strided_views(kernel, device, fp8_dtype, rng, path):
    """Operands that are slices of larger tensors (no dense layout at all)."""
    M, N, K = 40, 150, 260
    kb, nb = ceil_div(K, SCALE_BLOCK), ceil_div(N, SCALE_BLOCK)
    a = torch.randn(2 * M, K + 16, generator=rng, device=device).to(fp8_dtype)[::2, 8 : 8 + K]
    b = torch.randn(K, 3 * N, generator=rng, device=device).to(fp8_dtype)[:, ::3]
    a_scale = torch.randn(kb, 2 * M, generator=rng, device=device)[:, 1::2]
    b_scale = torch.randn(3 * kb, nb + 1, generator=rng, device=device)[::3, 1:]
    out = poisoned_out(2 * M, 2 * N, device)[::2, 1::2]
    kernel.gemm(a, b, a_scale, b_scale, out)
    verdict = verify(out, a, b, a_scale, b_scale)
    assert verdict.ok, str(verdict)


@pytest.mark.kernels_ci
def test_fnuz_dtype(kernel, device, rng, path):
    check_gemm(kernel, 33, 140, 300, torch.float8_e4m3fnuz, device, rng)


@pytest.mark.kernels_ci
def test_out_allocated(kernel, device, fp8_dtype, rng):
    a, b, a_scale, b_scale, _ = make_gemm_inputs(5, 7, 130, fp8_dtype, device, rng)
    out = kernel.gemm(a, b, a_scale, b_scale)
    assert out.shape == (5, 7) and out.dtype == torch.bfloat16 and out.device.type == device.type
    assert verify(out, a, b, a_scale, b_scale).ok


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(0, 5, 7), (5, 0, 7), (0, 0, 0), (0, 130, 300)], ids=str)
def test_empty_output(kernel, device, fp8_dtype, rng, path, shape):
    """M or N == 0: the given out comes back, an allocated one is (M, N) bf16 on the device,
    and out's shape is still checked."""
    M, N, K = shape
    a, b, a_scale, b_scale, out = make_gemm_inputs(M, N, K, fp8_dtype, device, rng)
    assert kernel.gemm(a, b, a_scale, b_scale, out) is out
    for result in (kernel.gemm(a, b, a_scale, b_scale), kernel.gemm_nt(a, b.t(), a_scale.t(), b_scale.t())):
        assert result.shape == (M, N) and result.dtype == torch.bfloat16 and result.device.type == device.type
    wrong_out = torch.empty(M, N + 1, dtype=torch.bfloat16, device=device)
    with pytest.raises(RuntimeError, match=r"out must be \(M, N\)"):
        kernel.gemm(a, b, a_scale, b_scale, wrong_out)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(1, 1, 0), (3, 130, 0), (65, 257, 0)], ids=str)
def test_zero_k_gives_zeros(kernel, device, fp8_dtype, rng, path, shape):
    """K == 0: every element is the empty sum, +0, written over out's NaN poison."""
    M, N, K = shape
    a, b, a_scale, b_scale, out = make_gemm_inputs(M, N, K, fp8_dtype, device, rng)
    zeros = torch.zeros(M, N, dtype=torch.bfloat16, device=device)
    assert torch.isnan(out).all()
    assert kernel.gemm(a, b, a_scale, b_scale, out) is out
    assert torch.equal(out, zeros)
    out_nt = poisoned_out(M, N, device)
    kernel.gemm_nt(a, b.t(), a_scale.t(), b_scale.t(), out_nt)
    assert torch.equal(out_nt, zeros)
    assert torch.equal(kernel.gemm(a, b, a_scale, b_scale), zeros)


@pytest.mark.kernels_ci
def test_seeds_example(kernel, device, fp8_dtype, rng):
    """The RadeonFlow guide's example as written (seeded), with the device's FP8 dtype."""
    M, N, K = 1024, 1536, 7168
    QUANT_SIZE = 128
    A_fp32 = torch.randn(M, K, device=device, generator=rng)
    B_fp32 = torch.randn(K, N, device=device, generator=rng)
    A_fp8 = A_fp32.to(fp8_dtype)
    B_fp8 = B_fp32.to(fp8_dtype)
    A_scale = torch.ones(K // QUANT_SIZE, M, device=device, dtype=torch.float32)
    B_scale = torch.ones(K // QUANT_SIZE, N // QUANT_SIZE, device=device, dtype=torch.float32)
    C = torch.zeros(M, N, device=device, dtype=torch.bfloat16)
    result = kernel.gemm(A_fp8, B_fp8, A_scale, B_scale, C)
    verdict = verify(result, A_fp8, B_fp8, A_scale, B_scale)
    assert verdict.ok, str(verdict)


@pytest.mark.slow
@pytest.mark.parametrize("shape", RANKED_SHAPES + CORRECTNESS_SHAPES, ids=str)
def test_peer_shapes(kernel, device, fp8_dtype, rng, path, shape):
    check_gemm(kernel, *shape, fp8_dtype, device, rng)


@pytest.mark.slow
@pytest.mark.parametrize("shape", RANKED_SHAPES + CORRECTNESS_SHAPES, ids=str)
def test_peer_shapes_nt(kernel, device, fp8_dtype, rng, path, shape):
    check_gemm_nt(kernel, *shape, fp8_dtype, device, rng)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ALL_LAYOUTS, ids=lambda layout: layout.name)
def test_every_layout_ranked_shape(kernel, device, fp8_dtype, rng, path, layout):
    """Every layout on a ranked shape (fast paths may prefer a layout; all stay correct)."""
    check_gemm(kernel, 1024, 576, 7168, fp8_dtype, device, rng, layout)
