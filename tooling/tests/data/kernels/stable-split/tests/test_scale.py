import torch
from kernels import get_kernel


def test_scale_matches_torch():
    kernel = get_kernel("kernels-community/stable-split", version=1)
    x = torch.arange(10, dtype=torch.float32)
    torch.testing.assert_close(kernel.scale(x, 2.5), x * 2.5)
