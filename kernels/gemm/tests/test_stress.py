"""Random-seed sweeps (slow): the quick checks again on fresh seeds, each seed printed.

The quick tests draw their data from a seed fixed by the test id, so CI is deterministic.
These draw new seeds on every run and print them: replay a failure with the printed seed
(``check_gemm(..., torch.Generator().manual_seed(SEED))`` or ``check_shape(..., seed=SEED)``).
Run with ``-m slow -s`` to see every seed.
"""

import random

import pytest
import torch
from reference import ODD_SHAPES
from test_gemm import LAYOUT_SHAPE, QUICK_SHAPES, check_gemm, check_gemm_nt
from test_rocm_model import FORMATS, check_shape

pytestmark = pytest.mark.slow

ROUNDS = 5


def fresh_seed() -> int:
    seed = random.SystemRandom().randrange(2**31)
    print(f"seed={seed}")
    return seed


@pytest.mark.parametrize("round_", range(ROUNDS))
@pytest.mark.parametrize("shape", ODD_SHAPES + QUICK_SHAPES + [LAYOUT_SHAPE], ids=str)
def test_gemm_on_fresh_seeds(kernel, device, fp8_dtype, path, shape, round_):
    seed = fresh_seed()
    generator = torch.Generator(device=device).manual_seed(seed)
    check_gemm(kernel, *shape, fp8_dtype, device, generator)
    check_gemm_nt(kernel, *shape, fp8_dtype, device, generator)


@pytest.mark.parametrize("round_", range(ROUNDS))
@pytest.mark.parametrize("dtype", FORMATS, ids=["fnuz", "fn"])
@pytest.mark.parametrize("scheme", ["mfma", "general"])
@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_rocm_model_on_fresh_seeds(shape, scheme, dtype, round_):
    check_shape(*shape, dtype, path=scheme, seed=fresh_seed())
