import pytest
import torch
from kernels import get_kernel

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_affine_in_place():
    kernel = get_kernel("kernels-community/cuda-lambda", version=1)
    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    expected = x * 2 + 1
    torch.testing.assert_close(kernel.affine_(x, 2.0, 1.0), expected)
