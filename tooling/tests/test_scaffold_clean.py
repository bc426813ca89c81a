"""A kernel made by `kbuild init` passes the repository's lint and format checks unchanged: those of
the pre-commit hooks, as scripts/test.sh runs them, with the repository's settings."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from kbuild.cli import main
from kbuild.model.backends import scaffolded

BIN = Path(sys.executable).parent
# Names whose files sort before and after registration.h and torch_binding.h, the shortest and the
# longest init takes (its [kernel.<name>_cuda] table name has 64 characters, the most a table may have).
NAMES = ("demo-op", "zz-op", "a1", "x" + "y" * 58)
CXX_SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".hip"}


def _run(root: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)


@pytest.fixture
def checkout(tmp_path):
    """A folder with the repository's ruff and clang-format settings."""
    for name in ("pyproject.toml", ".clang-format"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("backends", [[backend] for backend in scaffolded()] + [list(scaffolded())], ids=str)
def test_scaffolded_kernels_pass_the_format_and_lint_checks(checkout, backends, capsys):
    for name in NAMES:
        assert main(["init", str(checkout / "kernels" / name), "--backends", *backends]) == 0
    capsys.readouterr()
    for command in (("ruff", "check", "."), ("ruff", "format", "--check", ".")):
        result = _run(checkout, str(BIN / command[0]), *command[1:])
        assert result.returncode == 0, result.stdout + result.stderr
    sources = sorted(str(p) for p in (checkout / "kernels").rglob("*") if p.suffix in CXX_SUFFIXES)
    assert sources
    result = _run(checkout, str(BIN / "clang-format"), "--dry-run", "--Werror", *sources)
    assert result.returncode == 0, result.stderr
    result = _run(checkout, str(BIN / "kbuild"), "check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_init_names_the_rule_a_rejected_name_breaks(tmp_path, capsys):
    assert main(["init", str(tmp_path / "a")]) == 2
    assert "two or more" in capsys.readouterr().err
    assert main(["init", str(tmp_path / ("x" + "y" * 59)), "--backends", "cpu", "cuda"]) == 2
    assert "use a name of at most 59 characters" in capsys.readouterr().err
    assert main(["init", str(tmp_path / "ab")]) == 0


def test_init_says_how_plain_pytest_finds_the_kernel_outside_a_kbuild_repository(tmp_path, capsys):
    """kbuild's pytest plugin acts only under a [tool.kbuild] root: a kernel made elsewhere is told so."""
    assert main(["init", str(tmp_path / "elsewhere" / "my-op"), "--backends", "cpu"]) == 0
    assert "add a `[tool.kbuild]` table to the pyproject.toml" in capsys.readouterr().out
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "pyproject.toml").write_text("[tool.kbuild]\n")
    assert main(["init", str(tmp_path / "repo" / "kernels" / "my-op"), "--backends", "cpu"]) == 0
    assert "[tool.kbuild]" not in capsys.readouterr().out
