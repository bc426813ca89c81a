"""quantize_per_token_group / quantize_per_block round trips, and FP8Linear vs nn.Linear."""

import pytest
import torch
from reference import SCALE_BLOCK, ceil_div, verify

pytestmark = pytest.mark.kernels_ci

FP8_DTYPES = [torch.float8_e4m3fn, torch.float8_e4m3fnuz]
# e4m3 keeps 3 mantissa bits: a normal value rounds within 2^-4 of itself; below the
# normal range the step is a fixed 2^-9 (fn) or 2^-10 (fnuz) of the scale.
RELATIVE_STEP = 2.0**-4
SUBNORMAL_STEP = 2.0**-9


def expand_token_scales(scale, cols, group):
    return scale.repeat_interleave(group, dim=1)[:, :cols]


def expand_block_scales(scale, rows, cols, block):
    return scale.repeat_interleave(block, 0).repeat_interleave(block, 1)[:rows, :cols]


def check_round_trip(x, q, expanded_scale, dtype):
    assert q.dtype == dtype and q.shape == x.shape and q.is_contiguous()
    back = q.float() * expanded_scale
    bound = RELATIVE_STEP * x.abs() + SUBNORMAL_STEP * expanded_scale
    assert ((back - x).abs() <= bound).all()


@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 128), (33, 300), (64, 1000)], ids=str)
def test_token_group_round_trip(device, rng, kernel, dtype, shape):
    x = torch.randn(shape, generator=rng, device=device) * 10
    x[0, : min(128, shape[1])] = 0  # an all-zero group
    q, scale = kernel.quantize_per_token_group(x, 128, dtype)
    rows, cols = shape
    assert scale.shape == (rows, ceil_div(cols, SCALE_BLOCK)) and scale.dtype == torch.float32
    assert scale.t().is_contiguous(), "scales are M-major, as gemm_nt's fast paths take them"
    assert scale[0, 0] == 0 and torch.isfinite(q.float()).all()
    check_round_trip(x, q, expand_token_scales(scale, cols, 128), dtype)
    # the largest element of each nonzero group maps to the format's largest value
    group_max = torch.nn.functional.pad(q.float().abs(), (0, -cols % 128)).view(rows, -1, 128)
    assert (group_max.amax(-1)[scale > 0] == torch.finfo(dtype).max).all()


@pytest.mark.parametrize("dtype", FP8_DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (128, 128), (130, 300), (257, 64)], ids=str)
def test_block_round_trip(device, rng, kernel, dtype, shape):
    w = torch.randn(shape, generator=rng, device=device)
    w[:128, :128] = 0  # an all-zero block
    q, scale = kernel.quantize_per_block(w, 128, dtype)
    rows, cols = shape
    assert scale.shape == (ceil_div(rows, SCALE_BLOCK), ceil_div(cols, SCALE_BLOCK)) and scale.is_contiguous()
    assert scale[0, 0] == 0 and torch.isfinite(q.float()).all()
    check_round_trip(w, q, expand_block_scales(scale, rows, cols, 128), dtype)


def test_quantized_operands_feed_gemm_nt(device, rng, kernel, fp8_dtype):
    """The quantizers' outputs go straight into gemm_nt and match the dequantized product."""
    x = torch.randn(50, 700, generator=rng, device=device, dtype=torch.bfloat16)
    w = torch.randn(300, 700, generator=rng, device=device, dtype=torch.bfloat16)
    qx, sx = kernel.quantize_per_token_group(x, dtype=fp8_dtype)
    qw, sw = kernel.quantize_per_block(w, dtype=fp8_dtype)
    out = kernel.gemm_nt(qx, qw, sx, sw)
    assert verify(out, qx, qw.t(), sx.t(), sw.t()).ok
    exact = x.double() @ w.double().t()
    assert ((out.double() - exact).norm() / exact.norm()).item() < 0.05


@pytest.mark.parametrize("bias", [True, False])
def test_fp8_linear_matches_linear(device, rng, kernel, fp8_dtype, bias):
    torch.manual_seed(rng.initial_seed())
    linear = torch.nn.Linear(300, 200, bias=bias, device=device, dtype=torch.bfloat16)
    layer = kernel.layers.FP8Linear.from_linear(linear, fp8_dtype=fp8_dtype)
    x = torch.randn(2, 3, 300, generator=rng, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        expected = linear(x).double()
        got = layer(x)
    assert got.shape == (2, 3, 200) and got.dtype == torch.bfloat16
    assert ((got.double() - expected).norm() / expected.norm()).item() < 0.05


def test_fp8_linear_rejects_wrong_width(device, kernel):
    layer = kernel.layers.FP8Linear(64, 32, device=device)
    with pytest.raises(ValueError, match=r"expected input \(\.\.\., 64\)"):
        layer(torch.randn(4, 63, device=device))


def test_standalone_fp8_linear(device, kernel):
    """FP8Linear built standalone (the class kernelize takes, test_kernelize.py); Fp8Linear, its
    former name, warns and gives the same class."""
    layers = kernel.layers
    layer = layers.FP8Linear(256, 128, bias=False, device=device)
    assert isinstance(layer, layers.FP8Linear) and layer.bias is None
    assert layer.weight.shape == (128, 256) and layer.weight_scale_inv.shape == (1, 2)
    assert "in_features=256, out_features=128, bias=False" in repr(layer)
    with pytest.warns(DeprecationWarning, match="use layers.FP8Linear"):
        assert layers.Fp8Linear is layers.FP8Linear
