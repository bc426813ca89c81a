"""Reports the CUTLASS version it was compiled with (a dependency-resolution test kernel)."""

from ._ops import ops


def cutlass_version() -> int:
    return ops.cutlass_version()


__all__ = ["cutlass_version"]
