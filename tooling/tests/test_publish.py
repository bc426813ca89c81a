"""kbuild.release.execute end to end: through huggingface_hub's real HfApi against a Hub stand-in on
127.0.0.1 (tests/fake_hub.py), and into a local hub folder that `kernels` then loads from."""

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fake_hub import FakeHub
from huggingface_hub import HfApi
from kernel_card import render_card

from kbuild.card.content import DEFAULT_TEMPLATE
from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.model.inputs import input_digest
from kbuild.model.manifest import load_manifest
from kbuild.release.execute import publish_to_folder, publish_to_hub
from kbuild.release.plan import describe, plan_release

V212 = "torch212-cxx11-cpu-x86_64-linux"
V213 = "torch213-cxx11-cpu-x86_64-linux"
BUILD_TOML = """[general]
name = "demo"
version = 2
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[torch]

[kernel.demo_cpu]
backend = "cpu"
depends = ["torch"]
src = ["demo.cpp"]
"""


def _variant(kernel: Path, name: str, marker: str) -> Path:
    variant = kernel / "build" / name
    (variant / "sub").mkdir(parents=True)
    (variant / "__init__.py").write_text(f"# {marker}\n")
    (variant / "sub" / "data.txt").write_text(f"{name} {marker}\n")
    sources = input_digest(load_manifest(kernel))
    metadata = {"id": "_demo_cpu_0", "backend": {"type": "cpu"}, "provenance": {"sources": sources}}
    (variant / "metadata.json").write_text(json.dumps(metadata))
    (variant / "__pycache__").mkdir()
    (variant / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return variant


@pytest.fixture
def kernel(tmp_path) -> Path:
    kernel = tmp_path / "demo"
    (kernel / "torch-ext" / "demo").mkdir(parents=True)
    (kernel / "build.toml").write_text(BUILD_TOML)
    (kernel / "demo.cpp").write_text("// demo\n")
    (kernel / "torch-ext" / "demo" / "__init__.py").write_text(
        '"""Demo."""\n__all__ = ["f"]\n\ndef f(x: int) -> int:\n    """Identity."""\n    return x\n'
    )
    (kernel / "benchmarks").mkdir()
    (kernel / "benchmarks" / "benchmark_demo.py").write_text("# benchmark\n")
    shutil.copyfile(DEFAULT_TEMPLATE, kernel / "CARD.md")
    _variant(kernel, V212, "one")
    _variant(kernel, V213, "one")
    return kernel


@pytest.fixture
def hub(monkeypatch):
    with FakeHub() as hub:
        yield hub


def _api(hub: FakeHub) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token="hf_fake_token")


def _quiet(_line: str) -> None:
    pass


def test_dry_run_lists_the_operations(kernel):
    lines = describe(plan_release(kernel, repo_id="org/demo"), "hub")
    assert lines == [
        "hub: repository org/demo, create if missing",
        "hub: branch v2, create from main if missing",
        f"commit to v2: Upload {V212}",
        f"  add build/{V212}/__init__.py (6 bytes)",
        f"  add build/{V212}/metadata.json (151 bytes)",
        f"  add build/{V212}/sub/data.txt (36 bytes)",
        f"  delete every other file under build/{V212}/",
        f"commit to v2: Upload {V213}",
        f"  add build/{V213}/__init__.py (6 bytes)",
        f"  add build/{V213}/metadata.json (151 bytes)",
        f"  add build/{V213}/sub/data.txt (36 bytes)",
        f"  delete every other file under build/{V213}/",
        "commit to v2: Upload benchmarks",
        "  add benchmarks/benchmark_demo.py (12 bytes)",
        "  delete every other file under benchmarks/",
        "commit to main: Update the kernel card",
        f"  add README.md ({len(render_card(kernel, repo_id='org/demo').encode())} bytes)",
    ]
    only = describe(plan_release(kernel, repo_id="org/demo", variants=[V213]), "hub")
    assert [line for line in only if line.startswith("commit")] == [f"commit to v2: Upload {V213}"]


def test_publish_to_hub(kernel, hub):
    publish_to_hub(plan_release(kernel, repo_id="org/demo"), _api(hub), log=_quiet)
    assert hub.repos["org/demo"].type == "kernel"
    branch = hub.files("org/demo", "v2")
    assert sorted(branch) == [
        ".gitattributes",
        "benchmarks/benchmark_demo.py",
        f"build/{V212}/__init__.py",
        f"build/{V212}/metadata.json",
        f"build/{V212}/sub/data.txt",
        f"build/{V213}/__init__.py",
        f"build/{V213}/metadata.json",
        f"build/{V213}/sub/data.txt",
    ]
    assert branch[f"build/{V213}/sub/data.txt"] == f"{V213} one\n".encode()
    main = hub.files("org/demo", "main")
    assert main["README.md"].decode() == render_card(kernel, repo_id="org/demo", published=[V212, V213])
    assert not any(path.startswith("build/") for path in main)
    assert hub.authorization == {"Bearer hf_fake_token"}
    # publishing the same files again commits nothing
    commits = len(hub.repos["org/demo"].log)
    publish_to_hub(plan_release(kernel, repo_id="org/demo"), _api(hub), log=_quiet)
    assert len(hub.repos["org/demo"].log) == commits


def test_reupload_replaces_one_variant_and_deletes_its_stale_file(kernel, hub):
    publish_to_hub(plan_release(kernel, repo_id="org/demo"), _api(hub), log=_quiet)
    before = hub.files("org/demo", "v2")
    shutil.rmtree(kernel / "build" / V213)
    variant = kernel / "build" / V213
    variant.mkdir()
    (variant / "__init__.py").write_text("# two\n")
    provenance = {"sources": input_digest(load_manifest(kernel))}
    (variant / "metadata.json").write_text(json.dumps({"provenance": provenance}))
    publish_to_hub(plan_release(kernel, repo_id="org/demo", variants=[V213]), _api(hub), log=_quiet)
    after = hub.files("org/demo", "v2")
    assert f"build/{V213}/sub/data.txt" not in after
    assert after[f"build/{V213}/__init__.py"] == b"# two\n"
    assert {p: c for p, c in after.items() if V213 not in p} == {p: c for p, c in before.items() if V213 not in p}
    assert hub.repos["org/demo"].log[-1] == ("v2", f"Upload {V213}")


def test_concurrent_variant_uploads_to_one_branch(kernel, hub):
    """Two jobs plan their commits against one head; the Hub refuses the second (412), which
    plans again and succeeds."""
    publish_to_hub(plan_release(kernel, repo_id="org/demo", card_only=True), _api(hub), log=_quiet)
    hub.hold_commits(2)
    errors = []

    def job(name: str) -> None:
        try:
            publish_to_hub(plan_release(kernel, repo_id="org/demo", variants=[name]), _api(hub), log=_quiet)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(name,)) for name in (V212, V213)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert 412 in hub.statuses("commit/v2")
    files = hub.files("org/demo", "v2")
    assert {f"build/{V212}/sub/data.txt", f"build/{V213}/sub/data.txt"} <= set(files)
    uploads = [summary for branch, summary in hub.repos["org/demo"].log if summary.startswith("Upload torch")]
    assert sorted(uploads) == [f"Upload {V212}", f"Upload {V213}"]


def test_unreadable_library_stops_publishing(kernel):
    library = kernel / "build" / V213 / "_demo.abi3.so"
    library.write_text("not an ELF file")
    with pytest.raises(KbuildError, match="not a readable ELF"):
        plan_release(kernel, repo_id="org/demo")


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile a test library")
def test_abi_findings_block_publishing(kernel, tmp_path, hub):
    from test_abi import _compile

    (tmp_path / "lib").mkdir()
    _compile(tmp_path / "lib", kernel / "build" / V213 / "_demo.abi3.so", "USE_NEW_VERSION")
    release = plan_release(kernel, repo_id="org/demo")
    assert any("needs GLIBC_2.34" in finding for finding in release.abi_findings)
    assert describe(release, "hub")[-1].startswith(f"blocked: ABI check: {kernel}/build/{V213}/_demo.abi3.so")
    with pytest.raises(KbuildError, match="the ABI check fails"):
        publish_to_hub(release, _api(hub), log=_quiet)
    assert hub.responses == []
    with pytest.raises(KbuildError, match="the ABI check fails"):
        publish_to_folder(release, tmp_path / "hub", log=_quiet)
    assert publish_to_folder(release, tmp_path / "hub", allow_nonportable=True, log=_quiet).is_dir()


def test_errors(kernel, monkeypatch, tmp_path):
    with pytest.raises(KbuildError, match="is not a Hub repository id"):
        plan_release(kernel, repo_id="demo")
    with pytest.raises(KbuildError, match="variant torch299-cxx11-cpu-x86_64-linux is not built"):
        plan_release(kernel, repo_id="org/demo", variants=["torch299-cxx11-cpu-x86_64-linux"])
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr("huggingface_hub.constants.HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    with pytest.raises(KbuildError, match="no Hugging Face token"):
        publish_to_hub(plan_release(kernel, repo_id="org/demo"), log=_quiet)


def test_hub_refusal_is_a_kbuild_error(kernel, hub):
    publish_to_hub(plan_release(kernel, repo_id="org/demo"), _api(hub), log=_quiet)
    hub.repos["org/demo"].type = "model"  # the repository now answers 404 as a kernel repo
    with pytest.raises(KbuildError, match="HTTP 404"):
        publish_to_hub(plan_release(kernel, repo_id="org/demo", variants=[V212]), _api(hub), log=_quiet)


# -- the local hub folder ----------------------------------------------------------------------


def test_folder_publish_replaces_variants(kernel, tmp_path):
    folder = tmp_path / "hub"
    repo = publish_to_folder(plan_release(kernel, repo_id="org/demo"), folder, log=_quiet)
    assert repo == folder / "org" / "demo"
    listing = gitrepo.git(["ls-tree", "-r", "--name-only", "v2"], repo).split()
    assert f"build/{V213}/sub/data.txt" in listing and "benchmarks/benchmark_demo.py" in listing
    assert not any("__pycache__" in path for path in listing)
    assert gitrepo.git(["ls-tree", "-r", "--name-only", "main"], repo).split()[-1] == "README.md"
    (kernel / "build" / V213 / "sub" / "data.txt").unlink()
    publish_to_folder(plan_release(kernel, repo_id="org/demo", variants=[V213]), folder, log=_quiet)
    listing = gitrepo.git(["ls-tree", "-r", "--name-only", "v2"], repo).split()
    assert f"build/{V213}/sub/data.txt" not in listing and f"build/{V212}/sub/data.txt" in listing
    assert gitrepo.git(["status", "--porcelain"], repo) == ""
    # unchanged: no new commit
    head = gitrepo.git(["rev-parse", "v2"], repo)
    publish_to_folder(plan_release(kernel, repo_id="org/demo", variants=[V213]), folder, log=_quiet)
    assert gitrepo.git(["rev-parse", "v2"], repo) == head


@pytest.fixture(scope="module")
def built_relu(relu_copy: Path) -> Path:
    """The session's copy of kernels/relu with its CPU variant (built once a session, shared with
    test_build and the other tests of relu_copy)."""
    from kbuild.build.builder import build_kernel
    from kbuild.model.variants import detect_variant

    build_kernel(relu_copy, detect_variant("cpu").name, log=_quiet)
    return relu_copy


def test_folder_publish_loads_with_kernels(built_relu, tmp_path):
    # Built with this machine's toolchain: may need a newer glibc than manylinux_2_28 (fine here).
    release = plan_release(built_relu)
    repo = publish_to_folder(release, tmp_path / "hub", allow_nonportable=True, log=_quiet)
    assert repo == tmp_path / "hub" / "kernels-community" / "relu"
    if gitrepo.lfs_available(repo):
        assert any(
            line.endswith(".abi3.so")
            for line in gitrepo.git(["lfs", "ls-files", "--name-only", "v1"], repo).splitlines()
        )
    checkout = tmp_path / "checkout"
    gitrepo.git(["clone", "--quiet", "--branch", "v1", str(repo), str(checkout)], tmp_path)
    script = (
        "import kernels, torch\n"
        "relu = kernels.get_kernel('kernels-community/relu', version=1)\n"
        "x = torch.tensor([-2.0, 0.0, 3.5])\n"
        "assert torch.equal(relu.relu(x), torch.tensor([0.0, 0.0, 3.5])), relu.relu(x)\n"
        "print(relu.__file__)\n"
    )
    env = {**os.environ, "LOCAL_KERNELS": f"kernels-community/relu={checkout}"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert str(checkout) in result.stdout


def test_cli(kernel, tmp_path, capsys):
    from kbuild.cli import main

    assert main(["publish", str(kernel), "--repo-id", "org/demo", "--variant", V212, "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2:4] == [f"commit to v2: Upload {V212}", f"  add build/{V212}/__init__.py (6 bytes)"]
    assert main(["publish", str(kernel), "--allow-nonportable"]) == 2
    assert "applies to a local hub folder (--to) only" in capsys.readouterr().err
    assert main(["publish", str(kernel), "--repo-id", "org/demo", "--to", str(tmp_path / "hub")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == str(tmp_path / "hub" / "org" / "demo")


def test_eight_concurrent_folder_publishes_of_variants_and_kernels_all_succeed(tmp_path):
    """Two kernels x four variants, published at once into one folder by eight processes."""
    names = [f"torch21{minor}-cxx11-cpu-x86_64-linux" for minor in range(2, 6)]
    kernels = []
    for kernel_name in ("demo", "other"):
        kernel = tmp_path / kernel_name
        (kernel / "torch-ext" / kernel_name).mkdir(parents=True)
        (kernel / "build.toml").write_text(BUILD_TOML.replace('name = "demo"', f'name = "{kernel_name}"'))
        (kernel / "torch-ext" / kernel_name / "__init__.py").write_text("__all__ = []\n")
        (kernel / "demo.cpp").write_text("// demo\n")
        for name in names:
            _variant(kernel, name, kernel_name)
        kernels.append(kernel)
    folder, scratch = tmp_path / "hub", tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "kbuild.cli", "publish", str(kernel), "--repo-id", f"org/{kernel.name}"]
            + ["--variant", name, "--to", str(folder)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kernel in kernels
        for name in names
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0] * 8, [err for _, err in outputs]
    for kernel in kernels:
        repo = folder / "org" / kernel.name
        listing = set(gitrepo.git(["ls-tree", "-r", "--name-only", "v2"], repo).split())
        for name in names:
            assert {f"build/{name}/{f}" for f in ("__init__.py", "metadata.json", "sub/data.txt")} <= listing
        assert gitrepo.git(["fsck", "--strict"], repo).strip() == ""
        assert gitrepo.git(["worktree", "list", "--porcelain"], repo).count("worktree ") == 1
    assert list(scratch.iterdir()) == []


def test_sigstore_bundle_travels_with_its_variant_and_kernels_reads_it(kernel, tmp_path):
    """The release workflow signs metadata.json into metadata.json.sigstore (signing needs GitHub's
    OIDC token and sigstore's services, unreachable here); the bundle must reach the branch beside
    metadata.json, where `kernels.verify_variant` looks for it."""
    from kernels.verify import VerificationResult, verify_variant

    bundle = '{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}\n'
    (kernel / "build" / V213 / "metadata.json.sigstore").write_text(bundle)
    repo = publish_to_folder(plan_release(kernel, repo_id="org/demo"), tmp_path / "hub", log=_quiet)
    assert gitrepo.git(["show", f"v2:build/{V213}/metadata.json.sigstore"], repo) == bundle
    checkout = tmp_path / "checkout"
    gitrepo.git(["clone", "--quiet", "--branch", "v2", str(repo), str(checkout)], tmp_path)
    assert isinstance(verify_variant(checkout / "build" / V213), VerificationResult.SignatureBundleInvalid)
    assert isinstance(verify_variant(checkout / "build" / V212), VerificationResult.SignatureBundleMissing)
