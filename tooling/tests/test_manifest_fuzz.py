"""Any bytes given as build.toml give a Manifest or a KbuildError naming the file, the line and the fix."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from manifest_fuzz import run
from minimal_manifest import MINIMAL_BUILD_TOML

from kbuild.cli import main
from kbuild.core.errors import KbuildError

QUICK_SEEDS = range(2400)
SLOW_SEEDS = range(2400, 42400)
# Errors about something the file lacks have no line to point at.
NO_LINE = ("missing table [general]", "no framework table")


def assert_total(outcomes, root: Path) -> None:
    crashes = [
        f"seed {o.seed} ({o.source}): {type(o.error).__name__}: {o.error}" for o in outcomes if o.kind == "crash"
    ]
    assert not crashes, f"{len(crashes)} tracebacks:\n" + "\n".join(crashes[:20])
    for outcome in outcomes:
        if outcome.kind != "error":
            continue
        error = outcome.error
        assert isinstance(error, KbuildError)
        context = f"seed {outcome.seed}: {error}"
        assert Path(error.file).name == "build.toml" and Path(error.file).is_relative_to(root), context
        assert error.line is not None or error.message in NO_LINE, context
        assert error.fix, context


def test_quick_fuzz_finds_no_traceback(tmp_path):
    outcomes = run(QUICK_SEEDS, tmp_path)
    assert len(outcomes) >= 2000
    assert_total(outcomes, tmp_path)
    kinds = {kind: sum(o.kind == kind for o in outcomes) for kind in ("ok", "error")}
    assert kinds["ok"] > 100 and kinds["error"] > 1000, kinds  # the mutants reach both outcomes


@pytest.mark.slow
def test_slow_fuzz_finds_no_traceback(tmp_path):
    outcomes = run(SLOW_SEEDS, tmp_path)
    for outcome in outcomes:
        print(f"seed {outcome.seed}: {outcome.source}: {outcome.kind}")
    assert_total(outcomes, tmp_path)


EDITION_4 = MINIMAL_BUILD_TOML.replace("edition = 5\n", "")  # no edition key: edition 4
PATHOLOGICAL = {
    "invalid UTF-8": (EDITION_4.replace('"MIT"', '"M\xffT"').encode("latin-1"), 4),
    "general = []": (b"general = []\n" + EDITION_4.split("\n", 6)[6].encode(), 1),
    "5,000-digit version": (EDITION_4.replace("version = 1", "version = " + "9" * 5000).encode(), 3),
    "1000-deep nesting": (EDITION_4.replace('["cpu"]', "[" * 1000 + "]" * 1000, 1).encode(), 5),
    "300-character name": (EDITION_4.replace('"demo"', '"' + "a" * 300 + '"').encode(), 2),
    "backend list, no edition": (EDITION_4.replace('backend = "cpu"', 'backend = ["cpu"]').encode(), 11),
    "backend integer, no edition": (EDITION_4.replace('backend = "cpu"', "backend = 1").encode(), 11),
    "universal not a boolean": (EDITION_4.replace("version = 1", 'universal = "no"').encode(), 3),
}


@pytest.mark.parametrize("case", PATHOLOGICAL)
def test_cli_answers_pathological_manifests_with_file_line_and_fix(kernel_dir, capsys, case):
    content, line = PATHOLOGICAL[case]
    (kernel_dir / "build.toml").write_bytes(content)
    assert main(["check", str(kernel_dir)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"{kernel_dir / 'build.toml'}:{line}: error: ") and "\n  fix: " in out
    assert main(["build", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert f"error: {kernel_dir / 'build.toml'}:{line}: " in err and "Traceback" not in err


def test_check_of_a_path_that_is_no_kernel_folder_is_a_usage_error(kernel_dir, capsys):
    assert main(["check", str(kernel_dir / "torch-ext" / "torch_binding.cpp")]) == 2
    assert "is a file, not a kernel folder\n  fix: pass a kernel folder" in capsys.readouterr().err
    assert main(["check", str(kernel_dir / "torch-ext")]) == 2
    assert "has no build.toml, so it is not a kernel folder\n  fix: " in capsys.readouterr().err
    assert main(["check", str(kernel_dir / "build.toml")]) == 2
    assert f"fix: pass its folder: {kernel_dir}\n" in capsys.readouterr().err


def test_an_unexpected_exception_exits_3_with_one_line(kernel_dir):
    """`-W error` turns the edition-4 upgrade warning into an exception kbuild does not expect."""
    (kernel_dir / "build.toml").write_text(EDITION_4)
    command = [sys.executable, "-W", "error::UserWarning", "-m", "kbuild.cli", "check", str(kernel_dir)]
    quiet = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "KBUILD_DEBUG": "0"})
    assert quiet.returncode == 3
    assert quiet.stderr.count("\n") == 1 and "kbuild bug" in quiet.stderr and "KBUILD_DEBUG=1" in quiet.stderr
    debug = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "KBUILD_DEBUG": "1"})
    assert debug.returncode == 3 and "Traceback (most recent call last)" in debug.stderr
