import shutil
from pathlib import Path

import pytest
from minimal_manifest import MINIMAL_BUILD_TOML

REPO = Path(__file__).resolve().parents[2]
# The test kernels under data/ are built and tested by test_compat.py, never collected directly.
collect_ignore = ["data"]


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    """A minimal valid kernel folder (sources exist; nothing is compiled)."""
    root = tmp_path / "demo"
    for rel in ("torch-ext/torch_binding.cpp", "demo_cpu/demo.cpp", "torch-ext/demo/__init__.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("// placeholder\n" if rel.endswith(".cpp") else "from ._ops import ops\n")
    (root / "build.toml").write_text(MINIMAL_BUILD_TOML)
    return root


@pytest.fixture(scope="session")
def relu_copy(tmp_path_factory) -> Path:
    """A private copy of kernels/relu, so that builds in tests never touch the repository."""
    target = tmp_path_factory.mktemp("kernels") / "relu"
    shutil.copytree(REPO / "kernels" / "relu", target, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    return target
