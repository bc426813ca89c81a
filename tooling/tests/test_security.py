"""The attacks of issue 28, each a test: containment of every path kbuild reads, writes or
deletes; Hub repository ids; the card sandbox; secrets in messages; locks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock
from minimal_manifest import NOARCH_BUILD_TOML, write_noarch_kernel

from kbuild.build.builder import build_kernel, build_lock, generate_only
from kbuild.check.kernel_checks import check_kernel
from kbuild.cli import main
from kbuild.core.errors import KbuildError
from kbuild.model.inputs import input_digest
from kbuild.model.manifest import load_manifest
from kbuild.pipeline import publish_locally

REPO = Path(__file__).resolve().parents[2]
BAD_REPO_IDS = [
    *("../x", "x/..", "./.", ".git/hooks", "../..", "org/-x", "org/a--b", "org/" + "n" * 97, "org/a b"),
    *("org/demo\n", "a/b\n"),  # issue 40: `$` matched before a final line break
]


@pytest.fixture
def noarch(tmp_path) -> Path:
    """A pure-Python kernel with a benchmark: `kbuild build` stages it without compiling."""
    kernel = write_noarch_kernel(tmp_path / "kernels" / "demo")
    (kernel / "benchmarks").mkdir()
    (kernel / "benchmarks" / "benchmark_demo.py").write_text("# benchmark\n")
    return kernel


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside every kernel, with a file that must survive."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("keep me\n")
    (folder / "CMakeLists.txt").write_text("# not kbuild's\n")
    return folder


def _quiet(_line: str) -> None:
    pass


# -- containment: build/<variant>, .kbuild/<variant>, sources, includes, package files ---------


def test_build_variant_symlink_is_replaced_not_followed(noarch, outside):
    (noarch / "build").mkdir()
    (noarch / "build" / "torch-cpu").symlink_to(outside)
    staged = build_kernel(noarch, log=_quiet)
    assert not staged.is_symlink() and (staged / "metadata.json").is_file()
    assert sorted(p.name for p in outside.iterdir()) == ["CMakeLists.txt", "victim.txt"]
    assert (outside / "victim.txt").read_text() == "keep me\n"


def test_symlinked_file_in_the_variant_is_removed_not_its_target(noarch, outside):
    build_kernel(noarch, log=_quiet)
    (noarch / "build" / "torch-cpu" / "__init__.py").unlink()
    (noarch / "build" / "torch-cpu" / "__init__.py").symlink_to(outside / "victim.txt")
    (noarch / "build" / "torch-cpu" / "stale").symlink_to(outside)
    staged = build_kernel(noarch, log=_quiet)
    assert not (staged / "__init__.py").is_symlink() and not (staged / "stale").exists()
    assert (outside / "victim.txt").read_text() == "keep me\n"


def _relu_sources(tmp_path: Path) -> Path:
    kernel = tmp_path / "relu"
    shutil.copytree(REPO / "kernels" / "relu", kernel, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    return kernel


def test_kbuild_variant_symlink_is_replaced_not_followed(tmp_path, outside):
    kernel = _relu_sources(tmp_path)
    tree = generate_only(kernel)
    shutil.rmtree(tree)
    tree.symlink_to(outside)
    generate_only(kernel)
    assert not tree.is_symlink() and (tree / "CMakeLists.txt").is_file()
    assert (outside / "CMakeLists.txt").read_text() == "# not kbuild's\n"


def test_source_folder_symlink_leaving_the_kernel_is_an_error(kernel_dir, outside):
    (outside / "demo.cpp").write_text("// outside\n")
    shutil.rmtree(kernel_dir / "demo_cpu")
    (kernel_dir / "demo_cpu").symlink_to(outside)
    with pytest.raises(KbuildError, match=r"src .*demo_cpu is a symlink to .*outside, which leads out of"):
        generate_only(kernel_dir)


@pytest.mark.parametrize(
    ("table", "line", "what"),
    [
        (
            "[kernel.demo_cpu]",
            'include = ["../../../../outside"]',
            r"\[kernel.demo_cpu\] include '../../../../outside'",
        ),
        ("[torch]", 'include = ["/etc"]', r"\[torch\] src/include '/etc'"),
    ],
)
def test_include_folder_outside_the_kernel_is_an_error(kernel_dir, table, line, what):
    toml = (kernel_dir / "build.toml").read_text()
    (kernel_dir / "build.toml").write_text(toml.replace(table + "\n", f"{table}\n{line}\n"))
    with pytest.raises(KbuildError, match=what + " is outside"):
        generate_only(kernel_dir)


def test_package_file_symlink_leaving_the_kernel_is_an_error(noarch):
    (noarch / "torch-ext" / "demo" / "passwd.py").symlink_to("/etc/passwd")
    with pytest.raises(KbuildError, match=r"package file .*passwd.py is a symlink to /etc/passwd"):
        build_kernel(noarch, log=_quiet)
    assert not (noarch / "build" / "torch-cpu" / "passwd.py").exists()


def test_benchmark_plot_symlink_cannot_make_publish_write_outside(noarch, outside, tmp_path, capsys):
    build_kernel(noarch, log=_quiet)
    results = noarch / "benchmarks" / "results"
    results.mkdir(parents=True)
    result = {"machine": {"device": "H100", "date_utc": "2026-01-01"}, "rows": [{"n": 1, "us": {"ours": 1.0}}]}
    (results / "2026-01-01.json").write_text(json.dumps(result))
    (results / "2026-01-01.png").symlink_to(outside / "plot.png")
    (outside / "plot.png").write_bytes(b"\x89PNG")
    folder = tmp_path / "hub" / "a" / "b"
    code = main(["publish", str(noarch), "--repo-id", "org/demo", "--to", str(folder), "--allow-nonportable"])
    assert code == 2
    assert "benchmark plot" in capsys.readouterr().err
    assert sorted(p.name for p in outside.iterdir()) == ["CMakeLists.txt", "plot.png", "victim.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernels", "outside"]


# -- Hub repository ids ------------------------------------------------------------------------


@pytest.mark.parametrize("repo_id", BAD_REPO_IDS)
def test_repo_id_flag_is_checked_by_the_hub_rules(noarch, tmp_path, repo_id, capsys):
    build_kernel(noarch, log=_quiet)
    folder = tmp_path / "hub" / "a" / "b"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["publish", str(noarch), "--repo-id", repo_id, "--to", str(folder), "--allow-nonportable"]) == 2
    assert f"--repo-id `{repo_id}` is not a Hub repository id" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("repo_id", ["../escaped", ".git/hooks"])
def test_repo_id_in_build_toml_is_checked_by_check_publish_and_the_main_job(noarch, tmp_path, repo_id, capsys):
    (noarch / "build.toml").write_text(NOARCH_BUILD_TOML.format(hub=f'\n[general.hub]\nrepo-id = "{repo_id}"\n'))
    findings = [str(f) for f in check_kernel(noarch)]
    assert any(f"repo-id `{repo_id}` is not a Hub repository id" in f for f in findings), findings
    assert main(["check", str(noarch)]) == 1
    build_kernel(noarch, log=_quiet)
    hub = tmp_path / "hub" / "a"
    assert main(["publish", str(noarch), "--to", str(hub), "--allow-nonportable"]) == 2
    assert "[general.hub] repo-id" in capsys.readouterr().err
    with pytest.raises(KbuildError, match="is not a Hub repository id"):
        publish_locally(noarch, "torch-cpu", hub)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "hub").exists()


@pytest.mark.parametrize(
    "branch",
    [
        *("--orphan", "../v1", "v1.lock", ".hidden", "a//b", "v 1"),
        # issue 40: a trailing newline, git's own names, `main` (the card's), and names with `/`
        *("v1\n", "HEAD", "FETCH_HEAD", "ORIG_HEAD", "main", "refs/heads/x", "origin/main", "v1/x"),
    ],
)
def test_hub_branch_in_build_toml_is_a_plain_branch_name(noarch, tmp_path, branch, capsys):
    hub = f"\n[general.hub]\nbranch = {json.dumps(branch)}\n"
    (noarch / "build.toml").write_text(NOARCH_BUILD_TOML.format(hub=hub))
    assert any(f"branch {branch!r} is not a plain branch name" in str(f) for f in check_kernel(noarch))
    build_kernel(noarch, log=_quiet)
    hub = tmp_path / "hub"
    assert main(["publish", str(noarch), "--repo-id", "org/demo", "--to", str(hub), "--allow-nonportable"]) == 2
    assert f"branch {branch!r} is not a plain branch name" in capsys.readouterr().err
    assert not hub.exists()


def test_valid_repo_ids():
    from kbuild.core.hubid import repo_id_problem

    for repo_id in ("kernels-community/relu", "a/b", "Org_1/name.v2", "o/" + "n" * 96):
        assert repo_id_problem(repo_id) is None, repo_id


# -- the card sandbox and secrets -----------------------------------------------------------------

TOKEN = "hf_SecretTokenForTests0123456789"
PAYLOADS = [
    '{{ lipsum.__globals__["os"].environ.get("HF_TOKEN") }}',
    '{{ cycler.__init__.__globals__.os.popen("echo ran-$HF_TOKEN").read() }}',
    '{{ backends.append("leak") }}{{ backends }}',
    "{{ name.__class__.__mro__[1].__subclasses__() }}",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_card_payloads_fail_cleanly_without_the_token(noarch, payload, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (noarch / "CARD.md").write_text(f"# {{{{ name }}}}\n{payload}\n")
    result = subprocess.run(
        [sys.executable, "-m", "kbuild.cli", "card", str(noarch)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert str(noarch / "CARD.md") in result.stderr
    assert TOKEN not in result.stdout + result.stderr and "ran-" not in result.stdout + result.stderr


def test_hub_error_echoing_headers_does_not_print_the_token(noarch):
    from fake_hub import FakeHub

    build_kernel(noarch, log=_quiet)
    with FakeHub() as hub:
        hub.echo_headers = True
        env = {**os.environ, "HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_TELEMETRY": "1"}
        result = subprocess.run(
            [sys.executable, "-m", "kbuild.cli", "publish", str(noarch), "--repo-id", "org/demo"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert any(TOKEN in value for value in hub.authorization)  # the server did receive it
    assert result.returncode == 2, result.stderr
    assert "the Hub refused a request" in result.stderr and "authorization" in result.stderr.lower()
    assert TOKEN not in result.stdout + result.stderr
    assert "Bearer" not in result.stderr


# -- stale builds ----------------------------------------------------------------------------------


def test_publish_refuses_a_build_of_other_sources(noarch, tmp_path, capsys):
    build_kernel(noarch, log=_quiet)
    (noarch / "torch-ext" / "demo" / "__init__.py").write_text('"""Changed after the build."""\n__all__ = []\n')
    folder = tmp_path / "hub"
    assert main(["publish", str(noarch), "--repo-id", "org/demo", "--to", str(folder), "--allow-nonportable"]) == 2
    err = capsys.readouterr().err
    assert "is stale" in err and f"kbuild build {noarch}" in err
    assert not (folder / "org" / "demo").exists()
    build_kernel(noarch, log=_quiet)
    assert main(["publish", str(noarch), "--repo-id", "org/demo", "--to", str(folder), "--allow-nonportable"]) == 0


# -- locks -------------------------------------------------------------------------------------------


def test_second_build_waits_for_the_first_with_a_message(noarch):
    lock = FileLock(noarch / ".kbuild" / "build.lock")
    (noarch / ".kbuild").mkdir()
    with lock:
        build = subprocess.Popen(
            [sys.executable, "-m", "kbuild.cli", "build", str(noarch)],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert build.stderr is not None
        first = build.stderr.readline()
        assert "waiting for another build" in first, first
        time.sleep(0.5)
        assert build.poll() is None  # still waiting
    out, err = build.communicate(timeout=120)
    assert build.returncode == 0, err
    assert (noarch / "build" / "torch-cpu" / "metadata.json").is_file()


@pytest.mark.slow
def test_two_concurrent_builds_of_one_kernel_both_succeed(tmp_path):
    """Without the lock, two compiles in one build tree raced in CMake's configure step."""
    kernel = _relu_sources(tmp_path)
    builds = [
        subprocess.Popen(
            [sys.executable, "-m", "kbuild.cli", "build", str(kernel), "-j", "1"],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    errors = [build.communicate(timeout=900)[1] for build in builds]
    assert [build.returncode for build in builds] == [0, 0], errors
    assert sum("waiting for another build" in err for err in errors) == 1, errors


def test_scrub_masks_tokens_authorization_values_and_url_passwords(monkeypatch):
    from kbuild.core.redact import scrub

    monkeypatch.setenv("HF_TOKEN", "plain-token-without-prefix")
    text = (
        "got plain-token-without-prefix; {'authorization': 'Bearer abc.def'} Authorization: Basic dXNlcjpw "
        "https://bot:ghp_secret@github.com/o/r.git and hf_abcdefghijklmnop"
    )
    assert scrub(text) == (
        "got ***; {'authorization': '***'} Authorization: *** https://bot:***@github.com/o/r.git and ***"
    )


def test_symlinks_outside_the_build_inputs_do_not_stop_a_build(kernel_dir, outside):
    """A local virtualenv or a notes link that leaves the kernel is no build input."""
    (kernel_dir / ".venv" / "bin").mkdir(parents=True)
    (kernel_dir / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (kernel_dir / "notes.txt").symlink_to(outside / "victim.txt")
    before = input_digest(load_manifest(kernel_dir))
    (kernel_dir / "demo_cpu" / "leak.h").symlink_to(outside / "victim.txt")
    with pytest.raises(KbuildError, match=r"source .*leak.h is a symlink"):
        input_digest(load_manifest(kernel_dir))
    (kernel_dir / "demo_cpu" / "leak.h").unlink()
    assert input_digest(load_manifest(kernel_dir)) == before


def test_the_build_lock_is_never_written_through_a_symlink(kernel_dir, outside):
    (kernel_dir / ".kbuild").mkdir()
    (kernel_dir / ".kbuild" / "build.lock").symlink_to(outside / "victim.txt")
    with build_lock(kernel_dir, _quiet):
        pass
    assert (outside / "victim.txt").read_text() == "keep me\n"
    assert not (kernel_dir / ".kbuild" / "build.lock").is_symlink()
