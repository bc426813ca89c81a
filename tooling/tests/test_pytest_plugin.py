"""kbuild's pytest plugin (entry point `pytest11`): plain `pytest <kernel>/tests` runs against the
kernel's local build, offline, or stops with the command that makes the build."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbuild.build.builder import build_kernel

REPO_ID = "kernels-community/relu"
ALIAS_TEST = """\
import relu
from kernels import get_kernel


def test_import_by_name_is_the_loaded_build():
    assert relu is get_kernel("kernels-community/relu", version=1)
"""


def mark_root(folder: Path) -> None:
    """Make `folder` the root of a kbuild repository (kbuild's marker: a [tool.kbuild] table)."""
    (folder / "pyproject.toml").write_text("[tool.kbuild]\n")


def plain_pytest(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m pytest ARGS` in `cwd` as a contributor runs it: no LOCAL_KERNELS, and no network
    (a test that reached for the Hub would fail at once instead of timing out)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("LOCAL_KERNELS", "KBUILD_TEST_IMPORT")}
    environment.update(HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1", **env)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def built_relu(relu_copy: Path) -> Path:
    build_kernel(relu_copy, log=lambda line: None)
    mark_root(relu_copy.parent)
    return relu_copy


def test_plain_pytest_runs_the_tests_against_the_local_build(built_relu: Path):
    alias_test = built_relu / "tests" / "test_alias_by_plugin.py"
    alias_test.write_text(ALIAS_TEST)
    try:
        result = plain_pytest(built_relu, "tests", "-q", "-m", "kernels_ci", "--strict-markers")
    finally:
        alias_test.unlink()
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_without_a_build_pytest_stops_with_the_command_to_run(tmp_path: Path):
    mark_root(tmp_path)
    kernel = tmp_path / "relu"
    shutil.copytree(Path(__file__).resolve().parents[2] / "kernels" / "relu", kernel, ignore=_outputs)
    for args in (["relu/tests/test_relu.py::test_writes_into_out"], ["."]):
        result = plain_pytest(tmp_path, *args)
        assert result.returncode == pytest.ExitCode.USAGE_ERROR, (args, result.stdout + result.stderr)
        assert "has no build for this environment" in result.stderr
        assert "run `kbuild build relu` and pytest again, or `kbuild test relu`" in result.stderr
    assert "`kbuild build .`" in plain_pytest(kernel, "tests").stderr
    malformed = plain_pytest(kernel, "tests", KBUILD_TEST_IMPORT="x=y@z")  # issue 45: was a traceback
    assert malformed.returncode == pytest.ExitCode.USAGE_ERROR, malformed.stdout + malformed.stderr
    assert "KBUILD_TEST_IMPORT='x=y@z' is not <python_name>=<repo-id>@<version>" in malformed.stderr
    assert "Traceback" not in malformed.stderr


def test_a_stale_build_stops_pytest_with_the_command_to_run(built_relu: Path, tmp_path: Path):
    mark_root(tmp_path)
    kernel = tmp_path / "relu"
    shutil.copytree(built_relu, kernel, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    with (kernel / "relu_cpu" / "relu_cpu.cpp").open("a") as source:
        source.write("// edited after the build\n")
    result = plain_pytest(kernel, "tests", "-q")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "is stale" in result.stderr and "run `kbuild build .` and pytest again" in result.stderr


def test_a_kernel_that_local_kernels_maps_is_left_alone(built_relu: Path, tmp_path: Path):
    """As under `kbuild test`: LOCAL_KERNELS already names the build to test, so the plugin asks for none."""
    mark_root(tmp_path)
    kernel = tmp_path / "relu"
    shutil.copytree(built_relu, kernel, ignore=_outputs)
    result = plain_pytest(kernel, "tests", "--collect-only", "-q", LOCAL_KERNELS=f"{REPO_ID}={built_relu}")
    assert result.returncode == 0, result.stdout + result.stderr


def _outputs(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name in ("build", ".kbuild", "__pycache__")]


def test_pytest_in_an_unrelated_project_ignores_the_folders_above_it(tmp_path: Path):
    """Finding 4: plain `pytest` in a project under a folder holding an invalid (or another tool's)
    build.toml stopped with exit 4."""
    outer = tmp_path / "outer"
    project = outer / "project"
    project.mkdir(parents=True)
    (outer / "build.toml").write_text("[package]\nname = 'not a kernel'\n")
    (project / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    for args in ([], ["test_plain.py"], ["."]):
        result = plain_pytest(project, "-q", *args)
        assert result.returncode == 0, (args, result.stdout + result.stderr)
        assert "1 passed" in result.stdout


def test_pytest_never_loads_a_kernel_above_an_unrelated_project(built_relu: Path, tmp_path: Path):
    """Finding 4: a project's test calling get_kernel loaded the build of a kernel folder above the
    project, staged files included, though they were edited after the build."""
    kernel = tmp_path / "relu"
    shutil.copytree(built_relu, kernel, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    ran = _tamper_staged_init(kernel)
    project = kernel / "project"
    project.mkdir()
    (project / "test_loads.py").write_text(LOADS_RELU)
    result = plain_pytest(project, "-q")
    assert not ran.exists(), result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED  # relu is not on this offline machine's Hub


def test_a_build_edited_after_kbuild_built_it_stops_pytest(built_relu: Path, tmp_path: Path):
    """Finding 4: the freshness check hashes the sources only; the staged files are now checked against
    the digest in the build's metadata.json before anything is loaded."""
    mark_root(tmp_path)
    kernel = tmp_path / "relu"
    shutil.copytree(built_relu, kernel, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    ran = _tamper_staged_init(kernel)
    result = plain_pytest(kernel, "tests", "-q")
    assert not ran.exists(), result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "is not what kbuild built" in result.stderr and "run `kbuild build .` and pytest again" in result.stderr


LOADS_RELU = """\
from kernels import get_kernel


def test_loads():
    get_kernel("kernels-community/relu", version=1)
"""


def _tamper_staged_init(kernel: Path) -> Path:
    """Append to the staged `__init__.py` of `kernel`'s build a line that leaves a file when it runs."""
    ran = kernel.parent / "tampered-init-ran"
    init = next((kernel / "build").glob("*/__init__.py"))
    with init.open("a") as source:
        source.write(f"\nopen({str(ran)!r}, 'w').close()\n")
    return ran
