"""Every check of the binding raises a clear error (and nothing crashes)."""

import pytest
import torch
from reference import make_gemm_inputs, poisoned_out, verify

pytestmark = pytest.mark.kernels_ci

M, N, K = 8, 130, 200


@pytest.fixture
def args(device, fp8_dtype, rng):
    """Valid (a, b, a_scale, b_scale, out); each test breaks one of them."""
    return list(make_gemm_inputs(M, N, K, fp8_dtype, device, rng))


def call(kernel, a, b, a_scale, b_scale, out):
    kernel.gemm(a, b, a_scale, b_scale, out)


def test_valid_args_pass(kernel, args):
    """The arguments the other tests break are valid: the call computes the product."""
    call(kernel, *args)
    assert verify(args[4], *args[:4]).ok


@pytest.mark.parametrize(
    "index, replace, message",
    [
        (0, lambda t: t.reshape(-1), r"a must be 2-D \(M, K\)"),
        (1, lambda t: t.unsqueeze(0), r"b must be 2-D \(K, N\)"),
        (0, lambda t: t.to(torch.bfloat16), r"a must be float8_e4m3fn or float8_e4m3fnuz"),
        (1, lambda t: t.view(torch.uint8), r"b must have a's dtype"),
        (1, lambda t: t[:-1], r"b must be \(K, N\) = \(200, N\)"),
        (2, lambda t: t.double(), r"a_scale must be float32"),
        (2, lambda t: t[:, :-1], r"a_scale must be \(ceil\(K/128\), M\) = \(2, 8\)"),
        (2, lambda t: t.t(), r"a_scale must be \(ceil\(K/128\), M\)"),
        (3, lambda t: t.half(), r"b_scale must be float32"),
        (3, lambda t: t[:1], r"b_scale must be \(ceil\(K/128\), ceil\(N/128\)\) = \(2, 2\)"),
        (4, lambda t: t.float(), r"out must be bfloat16"),
        (4, lambda t: t[:, :-1], r"out must be \(M, N\) = \(8, 130\)"),
        (4, lambda t: t[:1].expand(M, N), r"out must not have elements that share memory"),
    ],
    ids=[
        "a_1d",
        "b_3d",
        "a_dtype",
        "b_dtype",
        "b_rows",
        "a_scale_dtype",
        "a_scale_shape",
        "a_scale_transposed",
        "b_scale_dtype",
        "b_scale_shape",
        "out_dtype",
        "out_shape",
        "out_expanded",
    ],
)
def test_rejected(kernel, args, index, replace, message):
    args[index] = replace(args[index])
    with pytest.raises(RuntimeError, match=message):
        call(kernel, *args)


def test_fp8_of_other_format_rejected(kernel, args):
    other = torch.float8_e4m3fnuz if args[0].dtype == torch.float8_e4m3fn else torch.float8_e4m3fn
    args[1] = args[1].float().to(other)
    with pytest.raises(RuntimeError, match=r"b must have a's dtype"):
        call(kernel, *args)


@pytest.mark.parametrize("name, index", [("a", 0), ("b", 1), ("a_scale", 2), ("b_scale", 3)])
def test_out_overlapping_input_rejected(kernel, device, fp8_dtype, rng, name, index):
    """out and one input carved from one buffer."""
    a, b, a_scale, b_scale, _ = make_gemm_inputs(M, N, K, fp8_dtype, device, rng)
    buffer = torch.zeros(4 * M * N + 4 * M * K + 4 * N * K, dtype=torch.uint8, device=device)
    inputs = [a, b, a_scale, b_scale]
    victim = inputs[index]
    shared = buffer[: victim.numel() * victim.element_size()].view(victim.dtype).view(victim.shape)
    shared.copy_(victim)
    inputs[index] = shared
    out = buffer[8 : 8 + 2 * M * N].view(torch.bfloat16).view(M, N)
    with pytest.raises(RuntimeError, match=f"out must not overlap the memory of {name}"):
        call(kernel, *inputs, out)


def test_out_adjacent_to_input_accepted(kernel, device, fp8_dtype, rng):
    """Sharing a buffer without touching the same bytes is fine, and computes the product."""
    a, b, a_scale, b_scale, _ = make_gemm_inputs(M, N, K, fp8_dtype, device, rng)
    buffer = torch.empty(M * K + 2 * M * N, dtype=torch.uint8, device=device)
    shared_a = buffer[: M * K].view(a.dtype).view(M, K)
    shared_a.copy_(a)
    out = buffer[M * K :].view(torch.bfloat16).view(M, N)
    out.copy_(poisoned_out(M, N, device))
    call(kernel, shared_a, b, a_scale, b_scale, out)
    assert torch.equal(shared_a.view(torch.uint8), a.view(torch.uint8))
    assert verify(out, a, b, a_scale, b_scale).ok


@pytest.mark.parametrize(
    "sizes, strides",
    [((8, 130), (1, 1)), ((8, 130), (130, 1)), ((8, 130), (65, 1)), ((8, 130), (2, 3)), ((130, 8), (1, 7))],
    ids=["strides-1-1", "dense", "rows-65-apart", "strides-2-3", "strides-1-7"],
)
def test_out_whose_elements_share_memory_rejected(kernel, args, device, sizes, strides):
    """Strides for which torch's own overlap check answers "too hard" are decided exactly:
    (1, 1), (65, 1), (2, 3) and (1, 7) make two elements meet; row-major (130, 1) does not."""
    store = torch.full((2000,), float("nan"), dtype=torch.bfloat16, device=device)
    out = store.as_strided(sizes, strides)
    if sizes == (130, 8):
        out = out.t()
    if strides == (130, 1):
        call(kernel, *args[:4], out)
        assert verify(out, *args[:4]).ok
        return
    with pytest.raises(RuntimeError, match="out must not have elements that share memory"):
        call(kernel, *args[:4], out)


def test_huge_scales_give_inf_with_the_sign_of_the_block_sum(kernel, device, fp8_dtype, rng):
    """a_scale * b_scale overflows fp32 (1e30 x 1e30): with one K block, each element is
    +-inf with the sign of its block sum times the scales', and NaN where that sum is 0
    (0 x inf), as the op's contract says (README, "Overflow")."""
    a, b, a_scale, b_scale, out = make_gemm_inputs(M, N, 100, fp8_dtype, device, rng)
    a[0] = torch.zeros_like(a[0])  # row 0: every block sum is 0
    a_scale.fill_(1e30)
    b_scale.fill_(1e30)
    b_scale[0, 1] = -1e30
    call(kernel, a, b, a_scale, b_scale, out)
    block_sum = a.double() @ b.double()
    block_sum[:, 128:] *= -1
    expected = torch.where(block_sum == 0, float("nan"), block_sum.sign() * float("inf"))
    assert torch.isnan(expected[0]).all() and torch.isinf(expected[1:]).all()
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=0, equal_nan=True)


def test_mixed_devices_rejected(kernel, args, device):
    if device.type != "cuda":
        pytest.skip("needs a second device type: CUDA tensors next to CPU ones")
    args[2] = args[2].cpu()
    with pytest.raises(RuntimeError, match=r"all tensors must be on one device; a is on cuda"):
        call(kernel, *args)


def nt_args(args):
    """The same problem in gemm_nt's layout: b (N, K), a_scale (M, kb), b_scale (nb, kb)."""
    a, b, a_scale, b_scale, out = args
    return [a, b.t(), a_scale.t(), b_scale.t(), out]


def test_gemm_nt_valid_args_match_gemm(kernel, args):
    expected = kernel.gemm(*args[:4])
    result = kernel.gemm_nt(*nt_args(args)[:4])
    assert result.shape == (M, N)
    assert torch.equal(result, expected)


@pytest.mark.parametrize(
    "index, replace, message",
    [
        (0, lambda t: t.reshape(-1), r"gemm_nt: a must be 2-D \(M, K\)"),
        (1, lambda t: t.reshape(-1), r"gemm_nt: b must be 2-D \(N, K\)"),
        (1, lambda t: t[:, :-1], r"gemm_nt: b must be \(N, K\) = \(N, 200\)"),
        (1, lambda t: t.t(), r"gemm_nt: b must be \(N, K\) = \(N, 200\)"),
        (2, lambda t: t.t(), r"gemm_nt: a_scale must be \(M, ceil\(K/128\)\) = \(8, 2\)"),
        (3, lambda t: t[:1], r"gemm_nt: b_scale must be \(ceil\(N/128\), ceil\(K/128\)\) = \(2, 2\)"),
        (4, lambda t: t[:, :-1], r"gemm_nt: out must be \(M, N\) = \(8, 130\)"),
        (4, lambda t: t.half(), r"gemm_nt: out must be bfloat16"),
    ],
    ids=[
        "a_1d",
        "b_1d",
        "b_columns",
        "b_in_gemm_layout",
        "a_scale_in_gemm_layout",
        "b_scale_shape",
        "out_shape",
        "out_dtype",
    ],
)
def test_gemm_nt_rejected(kernel, args, index, replace, message):
    nt = nt_args(args)
    nt[index] = replace(nt[index])
    with pytest.raises(RuntimeError, match=message):
        kernel.gemm_nt(*nt)
