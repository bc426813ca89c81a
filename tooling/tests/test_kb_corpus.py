"""The kernel-builder regression corpus (tooling/tests/data/kb-corpus/): kernel folders written in
kernels-community's layout (at the top level, build.toml files without `edition`) that exercise what
real kernel-builder kernels do: cards on kernel-builder's template variables, a package without
`__all__`, a `layers/` package, a benchmark script, tests that start a child Python, a kernel for
CUDA only, a kernel without tests/ and a CUTLASS dependency. Each is checked and generated here;
the build and test runs are the slow set (scripts/test.sh runs them in its compatibility stage)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbuild.cli import main

CORPUS = Path(__file__).parent / "data" / "kb-corpus"
KERNELS = ["card-vars", "cuda-only", "cutlass-dep", "no-all"]
CU130 = "torch213-cxx11-cu130-x86_64-linux"


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the corpus, as the current folder, with no CUTLASS reachable (offline)."""
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS, root, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    for variable in ("KBUILD_CUTLASS_DIR", "KBUILD_CUTLASS_3_6_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("KBUILD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", (tmp_path / "no-such-repository").as_uri())
    monkeypatch.chdir(root)
    return root


def test_the_corpus_is_what_this_file_says():
    assert sorted(p.parent.name for p in CORPUS.glob("*/build.toml")) == KERNELS


def test_check_finds_the_top_level_kernels_and_passes_them(corpus: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["check"]) == 0
    out, err = capsys.readouterr()
    assert "card-vars: ok\ncuda-only: ok\n" in out and "does not render" not in out
    for kernel in KERNELS:
        assert kernel in out
        assert err.count(f"warning: {kernel}/build.toml: no `edition` key") == 1, "each warning once"


def test_generate_of_a_batch_goes_past_kernels_with_nothing_to_generate(corpus: Path, capsys):
    assert main(["generate", "card-vars", "cutlass-dep", "no-all"]) == 0
    out = capsys.readouterr().out
    assert "card-vars: card-vars is a [torch-noarch] kernel: there is nothing to generate" in out
    assert "no-all: no-all is a [torch-noarch] kernel: there is nothing to generate" in out
    assert (corpus / "cutlass-dep" / ".kbuild" / "torch213-cxx11-cpu-x86_64-linux" / "CMakeLists.txt").is_file()


def test_a_cutlass_kernel_generates_offline(corpus: Path):
    assert main(["generate", "cutlass-dep", "--variant", CU130]) == 0
    cmake = (corpus / "cutlass-dep" / ".kbuild" / CU130 / "CMakeLists.txt").read_text()
    assert '"${KBUILD_CUTLASS_3_6_ROOT}/include"' in cmake
    assert not (corpus.parent / "cache" / "cutlass").exists(), "nothing was fetched"


def _kbuild_test(kernel: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "kbuild"), "test", str(kernel)]  # the command users run
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_the_cpu_kernels_build_and_pass_their_tests(corpus: Path, tmp_path: Path):
    # Run from a folder holding a `torch` package of its own: pytest must not pick it up.
    caller = tmp_path / "caller"
    (caller / "torch").mkdir(parents=True)
    (caller / "torch" / "__init__.py").write_text('raise ImportError("the caller folder shadowed torch")\n')
    run = _kbuild_test(corpus / "card-vars", caller)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout  # one of them starts a child Python that imports the kernel
    run = _kbuild_test(corpus / "no-all", caller)
    assert run.returncode == 0 and "no-all: not tested: it has no tests/ folder" in run.stderr
    # plain pytest, through kbuild's plugin, on the build just made: the child Python imports it too.
    # The plugin acts only inside a kbuild repository (its [tool.kbuild] marker).
    (corpus / "pyproject.toml").write_text("[tool.kbuild]\n")
    command = [sys.executable, "-m", "pytest", str(corpus / "card-vars" / "tests"), "-q", "-p", "no:cacheprovider"]
    plain = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert plain.returncode == 0 and "2 passed" in plain.stdout, plain.stdout + plain.stderr


@pytest.mark.slow
def test_a_cuda_only_kernel_is_not_tested_on_a_cpu_machine(corpus: Path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine runs CUDA")
    run = _kbuild_test(corpus / "cuda-only", corpus)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cuda-only: not tested: its backends (cuda) cannot run with this machine's torch (cpu)" in run.stderr
