import zlib

import pytest
import torch
from kernels import get_kernel

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def relu():
    return get_kernel("kernels-community/relu", version=1)


@pytest.fixture(autouse=True)
def fixed_seed(request):
    """Each test draws its data from a seed fixed by its name: the tests are deterministic."""
    torch.manual_seed(zlib.crc32(request.node.name.encode()))


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (4, 33), (2, 3, 1025), (0,), (3, 0, 5)])
def test_matches_torch(relu, dtype, shape):
    x = torch.randn(shape, device=DEVICE).to(dtype)
    torch.testing.assert_close(relu.relu(x), torch.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES)
def test_writes_into_out(relu, dtype):
    x = torch.randn(1000, device=DEVICE).to(dtype)
    out = torch.full_like(x, float("nan"))
    result = relu.relu(x, out=out)
    assert result.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values(relu, dtype):
    x = torch.tensor([float("-inf"), -1.0, -0.0, 0.0, 2.5, float("inf"), float("nan")], device=DEVICE).to(dtype)
    y = relu.relu(x)
    assert y[:6].tolist() == [0.0, 0.0, 0.0, 0.0, 2.5, float("inf")]
    assert torch.isnan(y[6])


@pytest.mark.kernels_ci
def test_misaligned_input_uses_the_scalar_path(relu):
    base = torch.randn(4097, device=DEVICE)
    x = base[1:]  # 4-byte offset: not 16-byte aligned
    torch.testing.assert_close(relu.relu(x), torch.relu(x), rtol=0, atol=0)


@pytest.mark.kernels_ci
def test_bad_inputs_raise_clear_errors(relu):
    x = torch.randn(8, device=DEVICE)
    with pytest.raises(RuntimeError, match="float32, float16 or bfloat16"):
        relu.relu(torch.ones(8, dtype=torch.int32, device=DEVICE))
    with pytest.raises(RuntimeError, match="expected the shape of x"):
        relu.relu(x, out=torch.empty(9, device=DEVICE))
    with pytest.raises(RuntimeError, match="expected the dtype of x"):
        relu.relu(x, out=torch.empty(8, dtype=torch.float16, device=DEVICE))
    with pytest.raises(RuntimeError, match="contiguous"):
        relu.relu(torch.randn(8, 8, device=DEVICE).t())


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place(relu, dtype):
    x = torch.randn(4099, device=DEVICE).to(dtype)
    expected = torch.relu(x)
    assert relu.relu(x, out=x).data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, expected, rtol=0, atol=0)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shift", [1, -1, 7])
def test_out_partly_overlapping_x_is_refused(relu, shift):
    """relu(x[:-1], out=x[1:]) would read elements it already overwrote."""
    buffer = torch.randn(300_000, device=DEVICE)
    before = buffer.clone()
    n = buffer.numel() - abs(shift)
    x, out = (buffer[:n], buffer[shift:]) if shift > 0 else (buffer[-shift:], buffer[:n])
    with pytest.raises(RuntimeError, match="out partly overlaps x"):
        relu.relu(x, out=out)
    assert torch.equal(buffer, before)


@pytest.mark.kernels_ci
def test_out_next_to_x_in_one_buffer(relu):
    buffer = torch.randn(2000, device=DEVICE)
    x, out = buffer[:1000], buffer[1000:]
    expected = torch.relu(x)
    relu.relu(x, out=out)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_large_tensor(relu):
    x = torch.randn(1 << 24, device=DEVICE)
    torch.testing.assert_close(relu.relu(x), torch.relu(x), rtol=0, atol=0)
