import torch
from kernels import get_kernel
from named_import import twice
from named_import.layers import Twice


def test_layer_doubles():
    x = torch.arange(5, dtype=torch.float32)
    torch.testing.assert_close(Twice()(x), x * 2)


def test_by_name_is_the_loaded_build():
    kernel = get_kernel("kernels-community/named-import", version=1)
    assert twice is kernel.twice
    assert Twice.__module__ == f"{kernel.__name__}.layers"
