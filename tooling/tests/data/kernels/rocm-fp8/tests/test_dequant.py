import pytest
import torch
from kernels import get_kernel

pytestmark = pytest.mark.skipif(torch.version.hip is None or not torch.cuda.is_available(), reason="needs a ROCm GPU")


def test_dequant_matches_torch():
    kernel = get_kernel("kernels-community/rocm-fp8", version=1)
    a = torch.randn(64, device="cuda").to(torch.float8_e4m3fnuz)
    scale = torch.tensor([0.5], device="cuda")
    torch.testing.assert_close(kernel.dequant(a, scale), (a.float() * 0.5).bfloat16())
