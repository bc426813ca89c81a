"""The pass criterion itself: it accepts the correctly rounded result and rejects wrong ones."""

import pytest
import torch
from reference import (
    MAX_RELATIVE_FROBENIUS,
    effective_elements,
    frobenius_limit,
    judge,
    make_gemm_inputs,
    reference_gemm,
    verify,
)

pytestmark = pytest.mark.kernels_ci


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1, 300), (7, 5, 1), (64, 64, 256)], ids=str)
def test_correctly_rounded_result_passes(shape):
    """bf16(exact) passes, for tiny outputs too (where bf16 rounding alone exceeds 2.5e-3)."""
    generator = torch.Generator().manual_seed(sum(shape))
    for _ in range(20):
        a, b, a_scale, b_scale, _ = make_gemm_inputs(*shape, torch.float8_e4m3fn, "cpu", generator)
        out = reference_gemm(a, b, a_scale, b_scale).to(torch.bfloat16)
        verdict = verify(out, a, b, a_scale, b_scale)
        assert verdict.ok, str(verdict)


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 5, 1), (64, 64, 256)], ids=str)
def test_wrong_results_fail(shape):
    generator = torch.Generator().manual_seed(1)
    a, b, a_scale, b_scale, _ = make_gemm_inputs(*shape, torch.float8_e4m3fn, "cpu", generator)
    exact = reference_gemm(a, b, a_scale, b_scale)
    off_by_two_percent = (exact * 1.02).to(torch.bfloat16)
    one_element_off = exact.to(torch.bfloat16)
    one_element_off[-1, -1] += exact.abs().max().to(torch.bfloat16)
    with_nan = exact.to(torch.bfloat16)
    with_nan[0, 0] = float("nan")
    for wrong in (off_by_two_percent, one_element_off, with_nan):
        assert not verify(wrong, a, b, a_scale, b_scale).ok


def test_frobenius_bound_applies_to_large_outputs():
    ref = torch.randn(64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    slightly_off = ref * (1 + 5e-3)  # within the elementwise bound, over the Frobenius one
    verdict = judge(slightly_off, ref)
    assert not verdict.ok and verdict.violations == 0


def test_frobenius_bound_applies_to_outputs_with_many_effective_elements():
    """A 64x64 output of random data: the 2.5e-3 statistic holds and is enforced."""
    ref = torch.randn(64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert effective_elements(ref) > 1000
    assert frobenius_limit(ref) == MAX_RELATIVE_FROBENIUS


def test_an_output_held_by_few_elements_gets_the_worst_case_rounding():
    """2210 elements whose norm sits in about 4 of them (reference.py, above
    MIN_EFFECTIVE_ELEMENTS): bf16(exact) exceeds 2.5e-3 and must still pass."""
    generator = torch.Generator().manual_seed(599368484)
    a, b, a_scale, b_scale, _ = make_gemm_inputs(17, 130, 129, torch.float8_e4m3fnuz, "cpu", generator)
    exact = reference_gemm(a, b, a_scale, b_scale)
    rounded = exact.to(torch.bfloat16)
    assert effective_elements(exact) < 10
    assert judge(rounded, exact).relative_frobenius > MAX_RELATIVE_FROBENIUS
    assert verify(rounded, a, b, a_scale, b_scale).ok
