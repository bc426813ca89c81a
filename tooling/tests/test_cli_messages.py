"""What the command line says when it is used wrongly: the problem, then the fix, no traceback."""

import pytest

from kbuild.cli import build_parser, main


def test_missing_or_non_kernel_folder_is_named(tmp_path, capsys):
    assert main(["test", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nope'} does not exist" in err and f"kbuild init {tmp_path / 'nope'}" in err
    assert main(["build", str(tmp_path)]) == 2
    assert f"{tmp_path} has no build.toml" in capsys.readouterr().err


def test_matrix_outside_the_repository_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["matrix"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "run `kbuild matrix` from the repository root" in captured.err


def test_pytest_arguments_without_the_separator_get_a_hint(tmp_path, capsys):
    assert main(["test", str(tmp_path), "-k", "x"]) == 2
    assert "fix: pass pytest arguments after --: kbuild test" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["build", str(tmp_path), "-k", "x"])


@pytest.mark.parametrize(("command", "words"), [("publish", ["HF_TOKEN", "hf auth login"]), ("build", ["incremental"])])
def test_help_says_where_the_token_comes_from_and_that_builds_are_incremental(command, words):
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    text = subparsers.choices[command].format_help()
    assert all(word in " ".join(text.split()) for word in words)


def test_nonportable_fix_names_the_flag():
    from kbuild.errors import KbuildError
    from kbuild.publish import Release

    with pytest.raises(KbuildError) as err:
        Release("org/demo", "v1", abi_findings=["x.so: needs GLIBC_2.34"]).require_portable()
    assert "--allow-nonportable" in (err.value.fix or "")
