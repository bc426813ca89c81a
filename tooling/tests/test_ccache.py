"""`kbuild build` compiles through ccache when it is installed, and says so."""

import pytest

from kbuild.build import builder as build
from kbuild.build.builder import project_for
from kbuild.model.manifest import load_manifest
from kbuild.model.variants import detect_variant


class Configured(Exception):
    """Raised instead of compiling: the test looks at the CMake configuration only."""


@pytest.fixture
def configure(kernel_dir, monkeypatch, tmp_path):
    """Run the configure step of a build; return (the cmake arguments, kbuild's log lines)."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    commands: list[list[str]] = []

    def run(args, *rest, **options):
        if "-G" not in args:  # not CMake's configuration: the compilation
            raise Configured
        commands.append(args)

    monkeypatch.setattr(build, "_run", run)
    monkeypatch.setattr(build, "run_ninja", run, raising=False)

    def go() -> tuple[list[str], list[str]]:
        lines: list[str] = []
        project = project_for(load_manifest(kernel_dir), detect_variant("cpu"))
        project.build_dir.mkdir(parents=True)
        with pytest.raises(Configured):
            build._compile(project, jobs=None, log=lines.append)
        return commands[-1], lines

    return fake_bin, go


def test_ccache_on_the_path_is_the_compiler_launcher(configure, monkeypatch):
    fake_bin, go = configure
    (fake_bin / "ccache").write_text('#!/bin/sh\nexec "$@"\n')
    (fake_bin / "ccache").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:/usr/bin:/bin")
    monkeypatch.delenv("KBUILD_CCACHE", raising=False)
    args, lines = go()
    launchers = [a for a in args if "_COMPILER_LAUNCHER=" in a]
    assert launchers == [
        f"-DCMAKE_{lang}_COMPILER_LAUNCHER={fake_bin / 'ccache'}" for lang in ("C", "CXX", "CUDA", "HIP")
    ]
    assert f"kbuild: compiling through ccache ({fake_bin / 'ccache'}); KBUILD_CCACHE=0 turns it off" in lines


@pytest.mark.parametrize("case", ["not installed", "KBUILD_CCACHE=0"])
def test_no_launcher_without_ccache_or_when_turned_off(configure, monkeypatch, case):
    fake_bin, go = configure
    if case == "not installed":
        monkeypatch.setenv("PATH", str(fake_bin))
    else:
        (fake_bin / "ccache").write_text("#!/bin/sh\n")
        (fake_bin / "ccache").chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake_bin}:/usr/bin:/bin")
        monkeypatch.setenv("KBUILD_CCACHE", "0")
    args, lines = go()
    assert not [a for a in args if "LAUNCHER" in a] and not [line for line in lines if "ccache" in line]
