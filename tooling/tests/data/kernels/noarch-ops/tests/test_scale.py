import pytest
import torch
from kernels import get_kernel
from torch._subclasses.fake_tensor import FakeTensorMode


@pytest.mark.kernels_ci
def test_scale():
    kernel = get_kernel("kernels-community/noarch-ops", version=1)
    x = torch.arange(4, dtype=torch.float32)
    torch.testing.assert_close(kernel.scale(x, 2.0), x * 2)


@pytest.mark.kernels_ci
def test_fake_gives_the_shape():
    kernel = get_kernel("kernels-community/noarch-ops", version=1)
    with FakeTensorMode():
        assert kernel.scale(torch.empty(3, 5), 2.0).shape == (3, 5)
