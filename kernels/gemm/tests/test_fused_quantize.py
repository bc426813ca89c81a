"""The fused activation quantization (`quantize_per_token_group`, `silu_and_mul_quantize`),
`silu_and_mul` and `fp8_linear` against their references, bit for bit where the rounding is the
same computation."""

import pytest
import torch
from reference import SCALE_BLOCK, ceil_div, quantize_reference

pytestmark = pytest.mark.kernels_ci

FP8_DTYPES = [torch.float8_e4m3fn, torch.float8_e4m3fnuz]
INPUT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def codes(q: torch.Tensor) -> torch.Tensor:
    """FP8 codes as integers, every NaN mapped to one value (NaN signs may differ between
    devices' casts; the kernel's NaN is any NaN)."""
    as_int = q.view(torch.uint8).to(torch.int32)
    return torch.where(torch.isnan(q.float()), torch.full_like(as_int, -1), as_int)


def assert_same_quantization(got, expected):
    (q, scale), (q_ref, scale_ref) = got, expected
    assert q.shape == q_ref.shape and q.dtype == q_ref.dtype and q.is_contiguous()
    assert scale.shape == scale_ref.shape and scale.dtype == torch.float32
    assert scale.t().is_contiguous(), "scales are M-major, as gemm_nt's fast paths take them"
    assert torch.equal(codes(q), codes(q_ref)), f"{(codes(q) != codes(q_ref)).sum()} codes differ"
    same = (scale == scale_ref) | (torch.isnan(scale) & torch.isnan(scale_ref))
    assert same.all(), f"{(~same).sum()} scales differ"


def adversarial(shape, dtype, device, generator) -> torch.Tensor:
    """Random values with whole groups of zeros, tiny values, huge values, infinities and NaN,
    values on rounding boundaries, and a ragged last group."""
    rows, cols = shape
    x = torch.randn(shape, generator=generator, device=device) * 4
    x[0, :SCALE_BLOCK] = 0  # an all-zero group (scale 0, codes 0)
    if rows > 1:
        x[1] = torch.randn(cols, generator=generator, device=device) * 1e-38  # near fp32 denormals
    if rows > 2:
        x[2, 3] = float("inf")
        x[2, min(cols - 1, SCALE_BLOCK + 5)] = float("-inf")
    if rows > 3:
        x[3, 7] = float("nan")
    if rows > 4:
        # Exact halfway cases once scaled: a group with amax 448 holds values on ties.
        x[4, :SCALE_BLOCK] = torch.arange(SCALE_BLOCK, device=device).float() * 0.5 - 16
        x[4, 0] = 448
    if rows > 5:
        x[5] = x[5] * 1e4
    return x.to(dtype)


@pytest.mark.parametrize("fp8", FP8_DTYPES, ids=str)
@pytest.mark.parametrize("dtype", INPUT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (1, 128), (7, 300), (33, 1000), (64, 7168), (130, 256)], ids=str)
def test_quantize_matches_reference_bit_for_bit(kernel, device, rng, fp8, dtype, shape):
    x = adversarial(shape, dtype, device, rng)
    assert_same_quantization(kernel.quantize_per_token_group(x, 128, fp8), quantize_reference(x, fp8))


@pytest.mark.parametrize("fp8", FP8_DTYPES, ids=str)
def test_quantize_any_strides(kernel, device, rng, fp8):
    """A transposed view and a column slice (no 16-byte rows) take the element path."""
    base = torch.randn(520, 96, generator=rng, device=device).to(torch.bfloat16)
    for x in (base.t(), base[:, 1:90], base[::2]):
        assert_same_quantization(kernel.quantize_per_token_group(x, 128, fp8), quantize_reference(x, fp8))


def test_quantize_empty(kernel, device):
    for shape in ((0, 256), (5, 0)):
        q, scale = kernel.quantize_per_token_group(torch.zeros(shape, device=device, dtype=torch.bfloat16))
        assert q.shape == shape and scale.shape == (shape[0], ceil_div(shape[1], SCALE_BLOCK))


def test_quantize_other_groups_keep_torch_path(kernel, device, rng):
    x = torch.randn(9, 100, generator=rng, device=device)
    q, scale = kernel.quantize_per_token_group(x, 32)
    assert q.shape == (9, 100) and scale.shape == (9, 4)
    groups = torch.nn.functional.pad(x, (0, 28)).view(9, 4, 32)
    torch.testing.assert_close(scale, groups.abs().amax(-1) / 448, rtol=2**-23, atol=0)
    back = q.float() * scale.repeat_interleave(32, dim=1)[:, :100]
    assert ((back - x).abs() <= 2**-4 * x.abs() + 2**-9 * scale.repeat_interleave(32, dim=1)[:, :100]).all()


def test_quantize_bad_input(kernel, device):
    with pytest.raises(RuntimeError, match="x must be bfloat16, float16 or float32"):
        kernel.ops.quantize(torch.zeros(2, 2, dtype=torch.int32, device=device), torch.float8_e4m3fn, False)
    with pytest.raises(RuntimeError, match="dtype must be float8_e4m3fn or float8_e4m3fnuz"):
        kernel.ops.quantize(torch.zeros(2, 2, device=device), torch.float16, False)
    with pytest.raises(RuntimeError, match="even number of columns"):
        kernel.silu_and_mul_quantize(torch.zeros(2, 3, device=device))
    # The dtypes are checked before the shape (and before anything is allocated).
    with pytest.raises(RuntimeError, match="x must be bfloat16, float16 or float32"):
        kernel.ops.quantize(torch.zeros(4, dtype=torch.int32, device=device), torch.float8_e4m3fn, False)
    with pytest.raises(RuntimeError, match="dtype must be float8_e4m3fn or float8_e4m3fnuz"):
        kernel.ops.quantize(torch.zeros(4, device=device), torch.float32, True)


@pytest.mark.parametrize("fp8", FP8_DTYPES, ids=str)
@pytest.mark.parametrize("dtype", INPUT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 256), (5, 600), (40, 4096)], ids=str)
def test_silu_and_mul_quantize(kernel, device, rng, fp8, dtype, shape):
    """exp() may differ in the last place between the kernel and torch, so a code may sit one
    step away where the fp32 value was within an ulp of a rounding boundary: codes equal for all
    but a handful, none more than one step apart, scales within an ulp."""
    x = (torch.randn(shape, generator=rng, device=device) * 3).to(dtype)
    q, scale = kernel.silu_and_mul_quantize(x, fp8)
    q_ref, scale_ref = quantize_reference(x, fp8, silu_and_mul=True)
    assert q.shape == q_ref.shape and scale.shape == scale_ref.shape
    torch.testing.assert_close(scale, scale_ref, rtol=2**-22, atol=0)
    steps = (q.view(torch.uint8).to(torch.int32) - q_ref.view(torch.uint8).to(torch.int32)).abs()
    assert steps.max() <= 1 and (steps > 0).float().mean() < 1e-3


@pytest.mark.parametrize("dtype", INPUT_DTYPES, ids=str)
def test_silu_and_mul(kernel, device, rng, dtype):
    x = (torch.randn(3, 5, 512, generator=rng, device=device) * 3).to(dtype)
    gate, up = x.float().chunk(2, dim=-1)
    expected = (torch.nn.functional.silu(gate) * up).to(dtype)
    got = kernel.silu_and_mul(x)
    assert got.shape == (3, 5, 256) and got.dtype == dtype
    torch.testing.assert_close(got, expected, rtol=2**-7 if dtype != torch.float32 else 1e-6, atol=1e-6)


def unfused_linear(kernel, x, weight, scale, bias):
    """quantize -> gemm_nt -> + bias, as FP8Linear ran before fp8_linear."""
    q, sx = quantize_reference(x.reshape(-1, x.shape[-1]), weight.dtype)
    q = q.contiguous()
    sx = sx.t().contiguous().t()
    out = kernel.gemm_nt(q, weight, sx, scale).float()
    if bias is not None:
        out = out + bias.float()
    return out.reshape(*x.shape[:-1], weight.shape[0])


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize(
    "shape", [((1,), 256, 384), ((3, 5), 300, 200), ((8,), 7168, 512), ((2, 3), 1000, 520), ((64,), 1024, 640)], ids=str
)
def test_fp8_linear_matches_quantize_gemm_bias(kernel, device, rng, fp8_dtype, bias, dtype, shape):
    """Within a bfloat16 rounding of the unfused chain (which rounds to bf16 before the bias)."""
    leading, in_features, out_features = shape
    x = torch.randn(*leading, in_features, generator=rng, device=device).to(dtype)
    w = torch.randn(out_features, in_features, generator=rng, device=device) / in_features**0.5
    weight, scale = kernel.quantize_per_block(w, 128, fp8_dtype)
    b = torch.randn(out_features, generator=rng, device=device).to(torch.bfloat16) if bias else None
    got = kernel.fp8_linear(x, weight, scale, b)
    expected = unfused_linear(kernel, x, weight, scale, b)
    assert got.shape == (*leading, out_features) and got.dtype == dtype
    tolerance = 2**-7 * expected.abs() + 2**-7 * expected.abs().mean()
    assert ((got.float() - expected).abs() <= tolerance).all()


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize(
    "shape", [((1,), 256, 384), ((3, 5), 300, 200), ((8,), 2048, 7168), ((64,), 1000, 640)], ids=str
)
def test_silu_and_mul_fp8_linear_matches_fused_quantize_gemm_bias(kernel, device, rng, fp8_dtype, bias, dtype, shape):
    """silu_and_mul_quantize -> gemm_nt -> + bias, within the same bfloat16 rounding as fp8_linear."""
    leading, inner, out_features = shape
    x = torch.randn(*leading, 2 * inner, generator=rng, device=device).to(dtype)
    w = torch.randn(out_features, inner, generator=rng, device=device) / inner**0.5
    weight, scale = kernel.quantize_per_block(w, 128, fp8_dtype)
    b = torch.randn(out_features, generator=rng, device=device).to(torch.bfloat16) if bias else None
    got = kernel.silu_and_mul_fp8_linear(x, weight, scale, b)
    q, sx = kernel.silu_and_mul_quantize(x.reshape(-1, 2 * inner), fp8_dtype)
    expected = kernel.gemm_nt(q, weight, sx, scale).float()
    if b is not None:
        expected = expected + b.float()
    expected = expected.reshape(*leading, out_features)
    assert got.shape == (*leading, out_features) and got.dtype == dtype
    tolerance = 2**-7 * expected.abs() + 2**-7 * expected.abs().mean()
    assert ((got.float() - expected).abs() <= tolerance).all()


def test_silu_and_mul_fp8_linear_bad_input(kernel, device, fp8_dtype):
    weight = torch.zeros(256, 128, device=device).to(fp8_dtype)
    scale = torch.ones(2, 1, device=device)
    with pytest.raises(RuntimeError, match=r"silu_and_mul_fp8_linear: x must be \(\.\.\., 256\).*gate and up"):
        kernel.silu_and_mul_fp8_linear(torch.zeros(3, 128, device=device, dtype=torch.bfloat16), weight, scale)
    out = kernel.silu_and_mul_fp8_linear(torch.zeros(0, 256, device=device, dtype=torch.bfloat16), weight, scale)
    assert out.shape == (0, 256)


def test_fp8_linear_bad_input(kernel, device, fp8_dtype):
    weight = torch.zeros(256, 128, device=device).to(fp8_dtype)
    scale = torch.ones(2, 1, device=device)
    x = torch.zeros(3, 128, device=device, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"x must be \(\.\.\., 128\)"):
        kernel.fp8_linear(torch.zeros(3, 64, device=device, dtype=torch.bfloat16), weight, scale)
    with pytest.raises(RuntimeError, match="weight_scale_inv must be float32"):
        kernel.fp8_linear(x, weight, torch.ones(1, 1, device=device))
    with pytest.raises(RuntimeError, match=r"bias must be \(256\)"):
        kernel.fp8_linear(x, weight, scale, torch.zeros(5, device=device))
    with pytest.raises(RuntimeError, match="weight must be float8"):
        kernel.fp8_linear(x, weight.float(), scale)


def test_fp8_linear_empty(kernel, device, fp8_dtype):
    weight = torch.zeros(256, 128, device=device).to(fp8_dtype)
    scale = torch.ones(2, 1, device=device)
    out = kernel.fp8_linear(torch.zeros(0, 128, device=device, dtype=torch.bfloat16), weight, scale)
    assert out.shape == (0, 256)


def test_fp8_linear_and_quantize_compile_once_for_every_token_count(kernel, device, fp8_dtype):
    """The fake kernels keep symbolic sizes: a token count marked dynamic compiles one graph."""
    from torch._dynamo.testing import CompileCounter

    weight = torch.zeros(256, 384, device=device).to(fp8_dtype)
    scale = torch.ones(2, 3, device=device)

    def layer(x):
        q, s = kernel.quantize_per_token_group(x)
        return kernel.fp8_linear(x, weight, scale), q, s

    counter = CompileCounter()
    compiled = torch.compile(layer, backend=counter, fullgraph=True)
    for tokens in (3, 5, 9, 17):
        x = torch.randn(tokens, 384, device=device, dtype=torch.bfloat16)
        torch._dynamo.mark_dynamic(x, 0)
        out, q, s = compiled(x)
        assert out.shape == (tokens, 256) and q.shape == (tokens, 384) and s.shape == (tokens, 3)
        assert s.stride() == (1, tokens)
    assert counter.frame_count == 1


def test_fp8_linear_with_no_input_columns_gives_the_bias(kernel, device, fp8_dtype):
    weight = torch.zeros(5, 0, device=device).to(fp8_dtype)
    scale = torch.ones(1, 0, device=device)
    bias = torch.arange(5, device=device, dtype=torch.bfloat16)
    out = kernel.fp8_linear(torch.zeros(2, 3, 0, device=device, dtype=torch.bfloat16), weight, scale, bias)
    assert out.shape == (2, 3, 5) and torch.equal(out, bias.expand(2, 3, 5))
    assert kernel.silu_and_mul(torch.zeros(4, 0, device=device)).shape == (4, 0)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="programmatic launches are CUDA's")


def plain_linear(kernel, x, weight, scale, silu_and_mul=False):
    """The same layer from the separate quantization and gemm_nt ops (the GEMM launched plainly)."""
    rows = x.reshape(-1, x.shape[-1])
    if silu_and_mul:
        q, sx = kernel.silu_and_mul_quantize(rows, weight.dtype)
    else:
        q, sx = kernel.quantize_per_token_group(rows, 128, weight.dtype)
    return kernel.gemm_nt(q, weight, sx, scale).reshape(*x.shape[:-1], weight.shape[0])


@needs_cuda
@pytest.mark.parametrize("tokens", [1, 8, 16, 64, 300], ids=lambda t: f"{t}tok")
def test_chained_layers_read_what_the_kernel_before_wrote(kernel, device, rng, fp8_dtype, tokens):
    """Each quantization and GEMM starts while the kernel before it runs (programmatic dependent
    launch) and the allocator hands a freed buffer to the next call. Chains of layers queued at
    once, on a new input each time (a kernel reading its input before it is written would see the
    previous chain's values), equal the same layers built from the plainly launched ops."""
    shapes = [(512, 1024), (1024, 256), (256, 1024), (512, 256)]  # (out, in); the second is gated
    layers = []
    for out_features, in_features in shapes:
        w = torch.randn(out_features, in_features, generator=rng, device=device) / in_features**0.5
        layers.append(kernel.quantize_per_block(w, 128, fp8_dtype))
    inputs = [torch.randn(tokens, 1024, generator=rng, device=device).to(torch.bfloat16) for _ in range(8)]

    def chain(x: torch.Tensor, linear) -> torch.Tensor:
        for i, (weight, scale) in enumerate(layers):
            x = linear(x, weight, scale, i == 1)
        return x

    def fused(x, weight, scale, gated):
        return (kernel.silu_and_mul_fp8_linear if gated else kernel.fp8_linear)(x, weight, scale)

    expected = [chain(x, lambda *a: plain_linear(kernel, *a)) for x in inputs]
    torch.cuda.synchronize()
    got = [chain(x, fused) for x in inputs]
    for g, e in zip(got, expected, strict=True):
        assert torch.equal(g, e)


@needs_cuda
def test_a_weight_written_just_before_the_layer_is_read_as_written(kernel, device, rng, fp8_dtype):
    """The GEMM behind the quantization loads weights before it waits for the quantization: a
    weight copied in just before the call (no synchronize) must still be the one multiplied."""
    for tokens in (1, 64):  # the decode kernel and the wgmma tiles
        x = torch.randn(tokens, 1024, generator=rng, device=device).to(torch.bfloat16)
        weight, scale = kernel.quantize_per_block(torch.randn(512, 1024, generator=rng, device=device), 128, fp8_dtype)
        expected = plain_linear(kernel, x, weight, scale)
        written = torch.empty_like(weight)
        for _ in range(5):
            written.view(torch.uint8).zero_()
            written.view(torch.uint8).copy_(weight.view(torch.uint8))
            assert torch.equal(kernel.fp8_linear(x, written, scale), expected)
