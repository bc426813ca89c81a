"""git argument injection (issue 40): every URL and path kbuild gives git comes after `--`, git
fetches over https, ssh and file only (KBUILD_CUTLASS_GIT_URL included), and a build that does
not use CUTLASS (a CPU variant) never clones it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kbuild.build import cutlass
from kbuild.build.builder import build_kernel, generate_only
from kbuild.card.content import DEFAULT_TEMPLATE
from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.model.manifest import load_manifest
from kbuild.pipeline import check_out_branch
from kbuild.release.execute import publish_to_folder
from kbuild.release.plan import plan_release

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
CPU = "torch213-cxx11-cpu-x86_64-linux"
CU130 = "torch214-cxx11-cu130-x86_64-linux"


@pytest.fixture
def git_calls(monkeypatch) -> list[list[str]]:
    """Every command line kbuild runs git with, while the test runs (git still runs)."""
    calls: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        if args and args[0] == "git":
            calls.append(list(args))
        return real_run(args, *rest, **kwargs)

    monkeypatch.setattr(gitrepo.subprocess, "run", recording_run)
    return calls


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _repository(root: Path, files: dict[str, str], tag: str | None = None) -> str:
    """A git repository at `root` holding `files`; returns the commit."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "files")
    if tag:
        _git(root, "tag", tag)
    return _git(root, "rev-parse", "HEAD").strip()


def _cutlass_repository(root: Path) -> Path:
    version = "#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 9\n#define CUTLASS_PATCH 2\n"
    _repository(root, {"include/cutlass/version.h": version, "tools/util/include/README": "util\n"}, tag="v3.9.2")
    return root


@pytest.fixture
def no_cutlass(monkeypatch, tmp_path) -> Path:
    """No wheel of the pinned release, no folder variables, a private cache."""
    for variable in ("KBUILD_CUTLASS_DIR", "KBUILD_CUTLASS_3_9_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(cutlass, "_from_wheel", lambda dependency, release, tried: None)
    monkeypatch.setenv("KBUILD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/NVIDIA/cutlass.git",
        "ssh://git@github.com/NVIDIA/cutlass.git",
        "file:///srv/mirrors/cutlass",
        "git@github.com:NVIDIA/cutlass.git",
    ],
)
def test_https_ssh_and_file_urls_are_fetched(url):
    assert gitrepo.url_problem(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "--upload-pack=touch /tmp/pwned",
        "--config=core.sshCommand=touch /tmp/pwned",
        "-oProxyCommand=touch@host:x",
        "ext::sh -c touch% /tmp/pwned",
        "fd::17",
        "git://github.com/NVIDIA/cutlass",
        "http://github.com/NVIDIA/cutlass",
        "/srv/mirrors/cutlass",
        "https://-x/y",
        "git@-host:path",
        "git@host:-path",
        "https://github.com/a b",
    ],
)
def test_other_urls_and_options_are_refused(url):
    assert "is not a git URL kbuild fetches from" in (gitrepo.url_problem(url) or "")
    with pytest.raises(KbuildError, match="git is not run on"):
        gitrepo.ls_remote(url, "HEAD", Path.cwd())


@pytest.mark.parametrize("url", ["--upload-pack=touch {tmp}/pwned", "--config=core.sshCommand=touch {tmp}/pwned"])
def test_cutlass_git_url_that_is_an_option_is_refused_before_git_runs(no_cutlass, monkeypatch, git_calls, url):
    url = url.format(tmp=no_cutlass)
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", url)
    with pytest.raises(KbuildError, match=r"KBUILD_CUTLASS_GIT_URL: .* is not a git URL kbuild fetches from") as err:
        cutlass.resolve("cutlass_3_9", owner="[kernel.gemm]")
    assert "https://" in (err.value.fix or "")
    assert not [call for call in git_calls if url in call], git_calls
    assert not (no_cutlass / "pwned").exists()


CUTLASS_KERNEL = """[general]
name = "tiles"
version = 1
edition = 5
license = "MIT"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.tiles_cpu]
backend = "cpu"
depends = ["torch", "cutlass_3_9"]
src = ["tiles_cpu/tiles.cpp"]

[kernel.tiles_cuda]
backend = "cuda"
depends = ["torch", "cutlass_3_9"]
cuda-capabilities = ["9.0"]
src = ["tiles_cuda/tiles.cu"]
"""


def test_a_cpu_build_of_a_kernel_with_a_cutlass_dependency_clones_nothing(no_cutlass, monkeypatch, git_calls):
    repository = _cutlass_repository(no_cutlass / "cutlass-repo")
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", repository.as_uri())
    kernel = no_cutlass / "tiles"
    for rel in ("torch-ext/torch_binding.cpp", "tiles_cpu/tiles.cpp", "tiles_cuda/tiles.cu"):
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text("// placeholder\n")
    (kernel / "build.toml").write_text(CUTLASS_KERNEL)
    with pytest.warns(UserWarning, match=r"\[kernel.tiles_cpu\] depends on CUTLASS, .* the cpu build leaves it out"):
        cmake = (generate_only(kernel, CPU) / "CMakeLists.txt").read_text()
    assert "cutlass" not in cmake
    assert not [call for call in git_calls if "clone" in call] and not (no_cutlass / "cache" / "cutlass").exists()
    cmake = (generate_only(kernel, CU130) / "CMakeLists.txt").read_text()
    assert '"${KBUILD_CUTLASS_3_9_ROOT}/include"' in cmake
    assert not [call for call in git_calls if "clone" in call], "generating the CUDA project clones nothing either"
    options = cutlass.configure_options(load_manifest(kernel).kernels_for("cuda"))  # the CUDA build's configure
    assert options == [f"-DKBUILD_CUTLASS_3_9_ROOT:PATH={(no_cutlass / 'cache' / 'cutlass' / 'v3.9.2').as_posix()}"]
    assert [call for call in git_calls if "clone" in call]


def _subcommand(call: list[str]) -> str:
    """The git command of `call`, after the `-c key=value` settings (those of a hub folder)."""
    index = 1
    while call[index] == "-c":
        index += 2
    return call[index]


def _after_double_dash(call: list[str]) -> list[str]:
    """The arguments of `call` that are URLs or absolute paths but come before `--`."""
    end = call.index("--") if "--" in call else len(call)
    return [arg for arg in call[1:end] if "://" in arg or arg.startswith("/")]


def test_every_url_and_path_kbuild_gives_git_comes_after_double_dash(no_cutlass, monkeypatch, git_calls):
    """The git calls of the CUTLASS clone, the upstream sync's fetch, tree reads and patches, the
    change detection of `kbuild matrix`, provenance, and a publish into a hub folder with the
    checkout `kbuild all` makes of it."""
    tmp = no_cutlass
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", _cutlass_repository(tmp / "cutlass-repo").as_uri())
    cutlass.resolve("cutlass_3_9", owner="test")

    upstream = tmp / "upstream"
    commit = _repository(upstream, {"a/kernel.h": "int a;\n"})
    cache = tmp / "sync-cache"
    assert gitrepo.fetch(cache, upstream.as_uri(), "HEAD") == commit
    assert gitrepo.ls_remote(upstream.as_uri(), "HEAD", tmp) == commit
    assert gitrepo.has_commit(cache, commit)
    files = gitrepo.tree_files(cache, commit)
    assert gitrepo.read_blob(cache, files["a/kernel.h"][1]) == b"int a;\n"
    assert gitrepo.log_oneline(cache, commit, commit) == []
    work = tmp / "work"
    (work / "a").mkdir(parents=True)
    (work / "a" / "kernel.h").write_text("int a;\n")
    patch = tmp / "edit.patch"
    patch.write_text("--- a/a/kernel.h\n+++ b/a/kernel.h\n@@ -1 +1 @@\n-int a;\n+int b;\n")
    assert gitrepo.patch_paths(patch, work) == ["a/kernel.h"]
    gitrepo.apply_patch(patch, work)
    assert (work / "a" / "kernel.h").read_text() == "int b;\n"
    assert gitrepo.changed_files("HEAD", upstream) == []
    assert gitrepo.kernel_state(upstream / "a") is not None

    kernel = tmp / "kernels" / "demo"
    (kernel / "torch-ext" / "demo").mkdir(parents=True)
    (kernel / "torch-ext" / "demo" / "__init__.py").write_text('"""Demo."""\n__all__ = []\n')
    (kernel / "build.toml").write_text(
        '[general]\nname = "demo"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n'
    )
    shutil.copyfile(DEFAULT_TEMPLATE, kernel / "CARD.md")
    build_kernel(kernel, log=lambda line: None)
    release = plan_release(kernel, variants=["torch-cpu"])
    repo = publish_to_folder(release, tmp / "hub", allow_nonportable=True, log=lambda line: None)
    for _ in range(2):  # the second one moves the existing checkout
        check_out_branch(repo, release.branch)

    assert {_subcommand(call) for call in git_calls} >= {"clone", "fetch", "ls-remote", "apply", "worktree", "checkout"}
    assert not [call for call in git_calls if _after_double_dash(call)], [
        call for call in git_calls if _after_double_dash(call)
    ]
