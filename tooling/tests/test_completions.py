"""`kbuild completions`: the shell code, and kbuild answering the completion requests it makes."""

import os
import subprocess
import sys

import pytest

from kbuild.cli import main


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nospace -o default -o bashdefault -F"),
        ("zsh", "#compdef kbuild"),
        ("fish", "complete --command kbuild -f"),
    ],
)
def test_shell_code(shell, marker, capsys):
    assert main(["completions", shell]) == 0
    code = capsys.readouterr().out
    assert marker in code and "kbuild" in code and "_ARGCOMPLETE" in code


def test_unknown_shell_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["completions", "tcsh"])
    assert exit_.value.code == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("kbuild ver", ["verify"]),
        ("kbuild api-check --ag", ["--against"]),
        ("kbuild publish k --create", ["--create-pr"]),
        ("kbuild verify . --all", ["--all-versions"]),
        ("kbuild completions f", ["fish"]),
    ],
)
def test_completion_requests(line, expected, tmp_path):
    """What the shell code asks: kbuild run with argcomplete's variables answers the candidates."""
    answer = tmp_path / "answer"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_SHELL": "bash",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    result = subprocess.run([sys.executable, "-m", "kbuild.cli"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [word.strip() for word in answer.read_text().split("\v")] == expected
