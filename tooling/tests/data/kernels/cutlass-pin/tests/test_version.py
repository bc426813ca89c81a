from kernels import get_kernel


def test_compiled_with_cutlass_3_9():
    assert get_kernel("kernels-community/cutlass-pin", version=1).cutlass_version() == 309
