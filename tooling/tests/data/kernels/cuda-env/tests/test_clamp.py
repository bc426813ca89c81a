import pytest
import torch
from kernels import get_kernel

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_clamp_keeps_finite_values():
    kernel = get_kernel("kernels-community/cuda-env", version=1)
    x = torch.tensor([1.0, -2.0, float("inf")], device="cuda")
    torch.testing.assert_close(kernel.clamp_(x).cpu(), torch.tensor([1.0, -2.0, torch.finfo(torch.float32).max]))
    assert kernel.devices() == torch.cuda.device_count()
