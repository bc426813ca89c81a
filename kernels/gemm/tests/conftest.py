"""Fixtures of the gemm kernel's tests: the kernel, the device, seeded random generators."""

import os
import sys
import zlib
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from kernel_id import REPO_ID, VERSION  # noqa: E402

RUN_SLOW_ENV = "GEMM_RUN_SLOW"


def pytest_collection_modifyitems(config, items):
    """The full set (marked slow) runs only when asked for: `-m slow` or GEMM_RUN_SLOW=1."""
    if "slow" in (config.getoption("-m") or "") or os.environ.get(RUN_SLOW_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"full set: run with `-m slow` or {RUN_SLOW_ENV}=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kernel():
    from kernels import get_kernel

    return get_kernel(REPO_ID, version=VERSION)


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="session")
def fp8_dtype(device) -> torch.dtype:
    """The FP8 dtype native to the device: e4m3fnuz on ROCm (MI300), e4m3fn elsewhere."""
    return torch.float8_e4m3fnuz if device.type == "cuda" and torch.version.hip else torch.float8_e4m3fn


def seed_of_test(request: pytest.FixtureRequest) -> int:
    """A seed fixed by the test's module and name (parameters included): the quick tests are
    deterministic. test_stress.py (slow) draws fresh seeds instead."""
    return zlib.crc32(f"{request.node.module.__name__}::{request.node.name}".encode())


@pytest.fixture
def rng(request, device):
    """A generator seeded from the test id; the seed is printed (pytest shows it on failure)."""
    seed = seed_of_test(request)
    print(f"seed={seed}")
    return torch.Generator(device=device).manual_seed(seed)


@pytest.fixture(params=["default", "general"])
def path(request, kernel, device):
    """On CUDA, each correctness test runs on the default dispatch (as configured, e.g. by
    GEMM_FORCE_GENERAL=1) and on the forced general path."""
    if request.param == "default":
        yield request.param
        return
    if device.type != "cuda":
        pytest.skip("the general/fast path choice exists on CUDA only")
    previous = kernel.force_general_path(True)
    yield request.param
    kernel.force_general_path(previous)
