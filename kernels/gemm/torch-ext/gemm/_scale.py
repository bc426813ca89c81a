"""The scale block of the op's layout, for the package, its layers and the tests.

One float32 scale covers SCALE_BLOCK values of K (per row of ``a``) and SCALE_BLOCK x
SCALE_BLOCK values of ``b``, so a dimension of n values has ``ceil_div(n, SCALE_BLOCK)``
scales. The C++ side's twin is ``gemm_common/scale_block.h``.
"""

SCALE_BLOCK = 128


def ceil_div(a: int, b: int) -> int:
    """The smallest integer >= a / b, for a >= 0 and b > 0."""
    return -(-a // b)
