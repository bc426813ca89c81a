import torch
from kernels import get_kernel


def test_negate_matches_torch():
    kernel = get_kernel("kernels-community/stable-cpu", version=1)
    x = torch.randn(33, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(kernel.negate(x), -x)
