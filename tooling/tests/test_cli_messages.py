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
    from kbuild.core.errors import KbuildError
    from kbuild.release.plan import Release

    with pytest.raises(KbuildError) as err:
        Release("org/demo", "v1", abi_findings=["x.so: needs GLIBC_2.34"]).require_portable()
    assert "--allow-nonportable" in (err.value.fix or "")


def _help(command: str) -> str:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    return " ".join(subparsers.choices[command].format_help().split())


def test_test_usage_shows_the_pytest_arguments():
    assert "[KERNEL_DIR ...] [-- PYTEST_ARGS ...]" in _help("test")


def test_init_help_shows_the_default_and_every_backend():
    from kbuild.model import backends

    text = _help("init")
    assert "(default: cpu cuda)" in text
    assert all(backend in text for backend in backends.names())


def test_repository_ids_have_one_metavar():
    texts = [_help(command) for command in ("init", "publish")]
    assert all("--repo-id ORG/NAME" in text for text in texts) and not any("REPO_ID" in text for text in texts)


@pytest.mark.parametrize(
    ("backend", "words"),
    [
        ("gpu", ["unknown backend `gpu`", "cuda (NVIDIA), rocm (AMD), xpu (Intel), metal (Apple)"]),
        ("xpu", ["writes example sources for cpu, cuda, rocm, not `xpu`", "[kernel.<name>_xpu]"]),
    ],
)
def test_init_names_what_it_cannot_scaffold(tmp_path, capsys, backend, words):
    assert main(["init", str(tmp_path / "my-op"), "--backends", "cpu", backend]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert all(word in err for word in words) and "fix: " in err
    assert not (tmp_path / "my-op").exists()


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["api-check", "{kernel}", "--agaisnt", "x/y"], "fix: --agaisnt: did you mean --against?"),
        (["test", "{kernel}", "--no-biuld"], "fix: --no-biuld: did you mean --no-build?"),
        (["build", "{kernel}", "--all-capabilites"], "fix: --all-capabilites: did you mean --all-capabilities?"),
    ],
)
def test_a_mistyped_option_gets_a_did_you_mean(kernel_dir, capsys, args, fix):
    assert main([a.format(kernel=kernel_dir) for a in args]) == 2
    err = capsys.readouterr().err
    assert fix in err and "--help` lists its options" in err


def test_commands_run_in_a_kernel_folder_use_that_kernel(kernel_dir, monkeypatch, capsys):
    (kernel_dir / "kernels").mkdir()  # not the repository root: nothing under ./kernels
    monkeypatch.chdir(kernel_dir)
    assert main(["check"]) == 0
    assert capsys.readouterr().out.startswith(f"{kernel_dir / 'tests'}: warning: no tests")


def test_build_refuses_the_registration_check_refuses(kernel_dir, capsys):
    binding = kernel_dir / "torch-ext" / "torch_binding.cpp"
    binding.write_text("#include <torch/library.h>\n\nTORCH_LIBRARY(mk, ops) {}\n")
    assert main(["check", str(kernel_dir)]) == 1
    assert "`TORCH_LIBRARY(mk, ...)` registers ops under a fixed namespace" in capsys.readouterr().out
    assert main(["build", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{binding}:3: `TORCH_LIBRARY(mk, ...)` registers ops under a fixed namespace" in err
    assert "fix: write `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)`" in err
    assert not (kernel_dir / ".kbuild").exists()


def test_the_readme_says_how_to_run_kbuild_before_its_first_kbuild_command():
    from conftest import REPO

    readme = (REPO / "README.md").read_text()
    activate = readme.find("source .venv/bin/activate")
    assert 0 <= activate < readme.index("\nkbuild ") and ".venv/bin/kbuild" in readme[: readme.index("\nkbuild ")]
