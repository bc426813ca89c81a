"""kbuild's pytest plugin (entry point `pytest11`): plain `pytest <kernel>/tests` runs against the
kernel's local build, offline, or stops with the command that makes the build."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbuild.build import build_kernel

REPO_ID = "kernels-community/relu"
ALIAS_TEST = """\
import relu
from kernels import get_kernel


def test_import_by_name_is_the_loaded_build():
    assert relu is get_kernel("kernels-community/relu", version=1)
"""


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
    kernel = tmp_path / "relu"
    shutil.copytree(Path(__file__).resolve().parents[2] / "kernels" / "relu", kernel, ignore=_outputs)
    for args in (["relu/tests/test_relu.py::test_writes_into_out"], ["."]):
        result = plain_pytest(tmp_path, *args)
        assert result.returncode == pytest.ExitCode.USAGE_ERROR, (args, result.stdout + result.stderr)
        assert "has no build for this environment" in result.stderr
        assert "run `kbuild build relu` and pytest again, or `kbuild test relu`" in result.stderr
    assert "`kbuild build .`" in plain_pytest(kernel, "tests").stderr


def test_a_stale_build_stops_pytest_with_the_command_to_run(built_relu: Path, tmp_path: Path):
    kernel = tmp_path / "relu"
    shutil.copytree(built_relu, kernel, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    with (kernel / "relu_cpu" / "relu_cpu.cpp").open("a") as source:
        source.write("// edited after the build\n")
    result = plain_pytest(kernel, "tests", "-q")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "is stale" in result.stderr and "run `kbuild build .` and pytest again" in result.stderr


def test_a_kernel_that_local_kernels_maps_is_left_alone(built_relu: Path, tmp_path: Path):
    """As under `kbuild test`: LOCAL_KERNELS already names the build to test, so the plugin asks for none."""
    kernel = tmp_path / "relu"
    shutil.copytree(built_relu, kernel, ignore=_outputs)
    result = plain_pytest(kernel, "tests", "--collect-only", "-q", LOCAL_KERNELS=f"{REPO_ID}={built_relu}")
    assert result.returncode == 0, result.stdout + result.stderr


def _outputs(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name in ("build", ".kbuild", "__pycache__")]
