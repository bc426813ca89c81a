"""kbuild.core.gitrepo: the one place kbuild runs git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError

TOKEN = "hf_" + "A1b2C3d4E5f6G7h8"


def test_a_failed_command_names_itself_and_masks_secrets(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    with pytest.raises(KbuildError) as caught:
        gitrepo.git(["checkout", TOKEN], tmp_path)
    message = str(caught.value)
    assert message.startswith("`git checkout ***` failed in ")
    assert "did not match" in message  # git's own words
    assert TOKEN not in message


def test_toplevel_is_the_work_tree_root(tmp_path: Path) -> None:
    (tmp_path / "repo" / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "--quiet", str(tmp_path / "repo")], check=True)
    root = gitrepo.toplevel(tmp_path / "repo" / "sub")
    assert root is not None and root.resolve() == (tmp_path / "repo").resolve()
