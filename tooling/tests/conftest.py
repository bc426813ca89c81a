import os
import shutil
import tempfile
from pathlib import Path

import pytest
from minimal_manifest import MINIMAL_BUILD_TOML

REPO = Path(__file__).resolve().parents[2]
# The test kernels under data/ are built and tested by test_compat.py, never collected directly.
collect_ignore = ["data"]


# Under pytest-xdist (scripts/test.sh runs this suite with -n 2), the tests of the session's
# relu_copy run in one worker, in their usual order: relu is built once, and the tests that edit
# the copy and build it again never run beside each other. Each worker lists those tests in a file
# that the controller names; the controller's scheduler sends them as one unit, the others one by one.
RELU_TESTS = "KBUILD_TEST_RELU_TESTS"


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no":
        return
    listing = Path(tempfile.mkdtemp(prefix="kbuild-tests-")) / "relu_copy"
    os.environ[RELU_TESTS] = str(listing)
    config.add_cleanup(lambda: shutil.rmtree(listing.parent, ignore_errors=True))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listing = os.environ.get(RELU_TESTS)
    if not listing or not hasattr(config, "workerinput"):
        return
    ids = [item.nodeid for item in items if "relu_copy" in getattr(item, "fixturenames", ())]
    written = Path(f"{listing}.{config.workerinput['workerid']}.tmp")
    written.write_text("".join(f"{nodeid}\n" for nodeid in ids))
    written.replace(written.with_suffix(""))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    listing = os.environ.get(RELU_TESTS)
    if not listing or config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ReluCopyInOneWorker(LoadScopeScheduling):
        """`--dist load`, but the tests of relu_copy are one unit of work (sent first: the largest)."""

        relu_tests: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.relu_tests is None:
                self.relu_tests = set()
                for path in Path(listing).parent.glob(f"{Path(listing).name}.*"):
                    if path.suffix != ".tmp":
                        self.relu_tests.update(path.read_text().splitlines())
            return "relu_copy" if nodeid in self.relu_tests else nodeid

    return ReluCopyInOneWorker(config, log)


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
