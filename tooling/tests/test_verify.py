"""`kbuild verify` on what `kbuild all` publishes (a local hub folder with relu's real build and its
checkout) and on the stand-in Hub (tests/fake_hub.py)."""

import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_hub import FakeHub
from packaging.version import Version

from kbuild.build.builder import build_kernel
from kbuild.cli import main
from kbuild.core import gitrepo
from kbuild.pipeline import publish_locally

AUTHOR = ["-c", "user.name=t", "-c", "user.email=t@t"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def relu_variant(relu_copy) -> Path:
    return build_kernel(relu_copy, log=lambda line: None)


@pytest.fixture
def hub(relu_copy, relu_variant, tmp_path) -> Path:
    """What `kbuild all` leaves: .hub/kernels-community/relu and its checkout relu@v1."""
    publish_locally(relu_copy, relu_variant.name, tmp_path / "hub")
    return tmp_path / "hub"


def _commit(repo: Path, branch: str, change) -> None:
    """Commit `change(worktree)` onto `branch` of a hub repository."""
    worktree = repo.parent / f"change-{branch}"
    gitrepo.git(["worktree", "add", "--quiet", str(worktree), branch], repo)
    change(worktree)
    gitrepo.git(["add", "--all"], worktree)
    gitrepo.git([*AUTHOR, "commit", "--quiet", "-m", "change"], worktree)
    gitrepo.git(["worktree", "remove", "--force", str(worktree)], repo)


def _flip_a_byte(library: Path) -> None:
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))


def test_a_local_hub_folder_verifies_until_a_byte_of_a_published_library_changes(hub, relu_variant, capsys):
    assert main(["verify", str(hub)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"{hub}/kernels-community/relu v1: ok" in out
    assert f"{hub}/kernels-community/relu@v1 v1: ok" in out
    assert len([line for line in out if line.endswith(" ok")]) == 2
    library = next(relu_variant.glob("*.abi3.so")).name
    checkout = hub / "kernels-community" / "relu@v1"
    _flip_a_byte(checkout / "build" / relu_variant.name / library)
    assert main(["verify", str(checkout)]) == 1
    digest = f"{checkout} v1: build/{relu_variant.name}: digest: File hash mismatch for {library}"
    assert any(line.startswith(digest) for line in capsys.readouterr().out.splitlines())
    repo = hub / "kernels-community" / "relu"
    _commit(repo, "v1", lambda tree: _flip_a_byte(tree / "build" / relu_variant.name / library))
    assert main(["verify", str(repo)]) == 1
    out = capsys.readouterr().out.splitlines()
    digest = f"{repo} v1: build/{relu_variant.name}: digest: File hash mismatch for {library}"
    assert any(line.startswith(digest) for line in out)


def test_a_removed_signature_bundle_fails(hub, relu_variant, capsys):
    repo = hub / "kernels-community" / "relu"
    bundle = f"build/{relu_variant.name}/metadata.json.sigstore"
    _commit(repo, "v1", lambda tree: (tree / bundle).write_text('{"mediaType": "not a bundle"}\n'))
    assert main(["verify", str(repo)]) == 1
    assert f"{repo} v1: {bundle}: not a valid sigstore bundle" in capsys.readouterr().out
    _commit(repo, "v1", lambda tree: (tree / bundle).unlink())
    assert main(["verify", str(repo)]) == 1
    assert f"{repo} v1: {bundle}: missing (the variant is not signed)" in capsys.readouterr().out.splitlines()


@pytest.mark.slow
def test_newest_version_by_default_every_version_on_request(hub, capsys):
    repo = hub / "kernels-community" / "relu"
    gitrepo.git(["branch", "v10", "v1"], repo)
    assert main(["verify", str(repo)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{repo} v10: ok"
    assert main(["verify", str(repo), "--all-versions"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.endswith(": ok")] == [
        f"{repo} v10: ok",
        f"{repo} v1: ok",
    ]


def test_a_hub_repository_needs_bundles(relu_variant):
    """Through huggingface_hub at HF_ENDPOINT: on the Hub every variant must be signed."""
    with FakeHub() as fake:
        fake.upload_build("org/relu", relu_variant)
        env = fake.environment()
        command = [sys.executable, "-m", "kbuild.cli", "verify", "org/relu"]
        result = subprocess.run(command, env=env, capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    bundle = f"hub:org/relu v1: build/{relu_variant.name}/metadata.json.sigstore: missing (the variant is not signed)"
    assert bundle in result.stdout.splitlines()
    assert "digest" not in result.stdout


def test_bad_targets(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 2
    assert "no published kernel repository in this folder" in capsys.readouterr().err
    assert main(["verify", "not/a/repo/id"]) == 2


def test_digests_are_read_with_kernels_0_17_and_0_16_says_so(tmp_path, capsys):
    """kbuild takes kernels 0.16 (transformers 5.17's) and 0.17; only 0.17 reads digests. With 0.16
    (scripts/kernels-compat.sh runs this test so) `verify` says what to install, exit 2; with 0.17
    it reads this variant's digest and names the file it lists that is missing, exit 1."""
    variant = tmp_path / "relu" / "build" / "torch213-cxx11-cpu-x86_64-linux"
    variant.mkdir(parents=True)
    shutil.copy(REPO / "kernels" / "relu" / "build.toml", tmp_path / "relu")
    digest = {"algorithm": "sha256", "files": {"__init__.py": "SXMpCJXOs0te8YlG4LvR7IA9hEIeV72HOdTa6Svw+co="}}
    metadata = {"backend": {"type": "cpu"}, "digest": digest, "id": "_relu_cpu_0000000", "kernel-depends": []}
    metadata |= {"license": "Apache-2.0", "name": "relu", "python-depends": [], "version": 1}
    (variant / "metadata.json").write_text(json.dumps(metadata))
    # A published repository as a checkout of its own (a kernel's source folder inside a larger work
    # tree is refused: its build/ holds local builds).
    repo = tmp_path / "relu"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", "-C", str(repo), *identity, "commit", "-q", "-m", "published"], check=True)
    code = main(["verify", str(tmp_path / "relu")])
    out, err = capsys.readouterr()
    if Version(importlib.metadata.version("kernels")) < Version("0.17"):
        assert code == 2 and "kbuild verify reads digests with kernels 0.17" in err
        assert "pip install 'kernels==0.17.*'" in err and "Traceback" not in err
    else:
        assert code == 1 and f"build/{variant.name}: digest:" in out and "__init__.py" in out
