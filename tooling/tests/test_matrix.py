"""kbuild.model.matrix: supported variants filtered by build.toml, change detection through git,
stable output."""

import json
from pathlib import Path

import pytest

from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.model import cuda
from kbuild.model.matrix import (
    VARIANTS_FILE,
    changed_kernels,
    kernel_dirs,
    load_supported,
    matrix,
    named_kernels,
    render,
)

GENERAL = """[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = {backends}
"""
CPU_KERNEL = """
[kernel.k_cpu]
backend = "cpu"
depends = ["torch"]
src = ["k.cpp"]
"""
CUDA_KERNEL = """
[kernel.k_cuda]
backend = "cuda"
depends = ["torch"]
src = ["k.cu"]
cuda-capabilities = {caps}
"""
ROCM_KERNEL = """
[kernel.k_rocm]
backend = "rocm"
depends = ["torch"]
src = ["k.cu"]
rocm-archs = ["gfx942"]
"""


def _kernel(root: Path, name: str, text: str) -> Path:
    path = root / "kernels" / name
    path.mkdir(parents=True)
    for source in ("k.cpp", "k.cu"):
        (path / source).write_text("// source\n")
    (path / "build.toml").write_text(text)
    return path


def _variants(result: dict, kernel: str) -> list[str]:
    return [job["variant"] for job in result["build"]["include"] if job["kernel"] == kernel]


@pytest.fixture
def repo(tmp_path):
    _kernel(
        tmp_path,
        "plain",
        GENERAL.format(name="plain", backends='["cpu", "cuda", "rocm"]')
        + "[torch]\n"
        + CPU_KERNEL
        + CUDA_KERNEL.format(caps='["8.0", "9.0a"]')
        + ROCM_KERNEL,
    )
    _kernel(
        tmp_path,
        "bounded",
        GENERAL.format(name="bounded", backends='["cuda"]')
        + '[general.cuda]\nminver = "13.0"\n[torch]\nminver = "2.13"\n'
        + CUDA_KERNEL.format(caps='["10.0"]'),
    )
    _kernel(
        tmp_path,
        "blackwell",
        GENERAL.format(name="blackwell", backends='["cuda", "rocm"]')
        + "[torch]\n"
        + CUDA_KERNEL.format(caps='["8.0", "10.0"]')
        + ROCM_KERNEL.replace('"gfx942"', '"gfx942", "gfx803"'),
    )
    _kernel(
        tmp_path,
        "stable",
        GENERAL.format(name="stable", backends='["cpu"]') + '[torch]\nstable-abi = "2.12"\n' + CPU_KERNEL,
    )
    _kernel(
        tmp_path,
        "python-only",
        GENERAL.format(name="python-only", backends='["cuda", "xpu"]') + "[torch-noarch]\n",
    )
    return tmp_path


def test_full_matrix_follows_build_toml(repo):
    result = matrix(repo, kernel_dirs(repo))
    assert _variants(result, "plain") == [
        "torch212-cxx11-cpu-x86_64-linux",
        "torch212-cxx11-cu126-x86_64-linux",
        "torch212-cxx11-cu130-x86_64-linux",
        "torch212-cxx11-cu132-x86_64-linux",
        "torch212-cxx11-rocm71-x86_64-linux",
        "torch212-cxx11-rocm72-x86_64-linux",
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu126-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu132-x86_64-linux",
        "torch213-cxx11-rocm71-x86_64-linux",
        "torch213-cxx11-rocm72-x86_64-linux",
    ]
    # torch >= 2.13 and CUDA >= 13.0
    assert _variants(result, "bounded") == [
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu132-x86_64-linux",
    ]
    # CUDA 12.6 compiles 8.0 but not 10.0: its jobs build 8.0 alone, as `kbuild build` does;
    # no ROCm toolkit of ours targets gfx803: no such jobs
    assert _variants(result, "blackwell") == [
        "torch212-cxx11-cu126-x86_64-linux",
        "torch212-cxx11-cu130-x86_64-linux",
        "torch212-cxx11-cu132-x86_64-linux",
        "torch213-cxx11-cu126-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu132-x86_64-linux",
    ]
    assert _variants(result, "stable") == ["torch-stable-abi212-cpu-x86_64-linux"]
    assert _variants(result, "python-only") == ["torch-cuda", "torch-xpu"]


def test_job_fields(repo):
    jobs = {(j["kernel"], j["variant"]): j for j in matrix(repo, kernel_dirs(repo))["build"]["include"]}
    cuda = jobs[("plain", "torch213-cxx11-cu130-x86_64-linux")]
    assert cuda["archs"] == ["8.0", "9.0a"] and cuda["toolkit"] == "13.0" and cuda["torch"] == "2.13"
    assert cuda["path"] == "kernels/plain" and cuda["build-runner"] == ["ubuntu-latest"]
    assert cuda["test-runner"] == ["self-hosted", "cuda"] and cuda["image"].endswith("cuda13.0")
    assert cuda["torch-index"] == "https://download.pytorch.org/whl/cu130"
    assert jobs[("plain", "torch213-cxx11-rocm71-x86_64-linux")]["archs"] == ["gfx942"]
    assert jobs[("plain", "torch213-cxx11-rocm71-x86_64-linux")]["test-runner"] == [
        "self-hosted",
        "rocm",
    ]


def test_test_matrix_leaves_out_backends_without_runner(repo):
    result = matrix(repo, named_kernels(repo, ["python-only"]))
    assert [j["variant"] for j in result["test"]["include"]] == ["torch-cuda"]
    assert [j["variant"] for j in result["build"]["include"]] == ["torch-cuda", "torch-xpu"]


def test_output_is_stable_and_sorted(repo):
    forward = render(matrix(repo, kernel_dirs(repo)))
    backward = render(matrix(repo, list(reversed(kernel_dirs(repo)))))
    assert forward == backward
    jobs = json.loads(forward)["build"]["include"]
    assert [(j["kernel"], j["variant"]) for j in jobs] == sorted((j["kernel"], j["variant"]) for j in jobs)


def test_unknown_kernel_name(repo):
    with pytest.raises(KbuildError, match="no kernel named 'nope'"):
        named_kernels(repo, ["nope"])


def _commit(root: Path, message: str) -> None:
    gitrepo.git(["add", "-A"], root)
    gitrepo.git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message], root)


def test_changed_since(repo):
    gitrepo.git(["init", "-q", "-b", "main"], repo)
    (repo / "tooling").mkdir()
    (repo / "tooling" / "x.py").write_text("")
    _commit(repo, "base")
    base = gitrepo.git(["rev-parse", "HEAD"], repo).strip()
    assert changed_kernels(repo, base) == []
    (repo / "kernels/bounded/k.cu").write_text("// changed\n")
    _commit(repo, "change bounded")
    (repo / "kernels/stable/k.cpp").write_text("// uncommitted\n")
    assert [p.name for p in changed_kernels(repo, base)] == ["bounded", "stable"]
    (repo / "tooling" / "x.py").write_text("# the build library changed\n")
    assert [p.name for p in changed_kernels(repo, base)] == [p.name for p in kernel_dirs(repo)]
    with pytest.raises(KbuildError, match="not a commit"):
        changed_kernels(repo, "no-such-ref")


def test_supported_variants_file_is_valid():
    supported = load_supported()
    assert supported.torch and supported.build_runner == ("ubuntu-latest",)
    assert {t.backend for t in supported.toolkits} >= {"cpu", "cuda", "rocm"}
    assert supported.test_runners["cuda"] == ("self-hosted", "cuda")


def test_cli_prints_the_matrix(repo, monkeypatch, capsys):
    from kbuild.cli import main

    monkeypatch.chdir(repo)
    assert main(["matrix", "--release", "kernels/plain", "stable"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == matrix(repo, named_kernels(repo, ["plain", "stable"]))
    assert main(["matrix", "--release", "nope"]) == 2
    assert "no kernel named 'nope'" in capsys.readouterr().err


def _cuda_kernel(root: Path, name: str, caps: str | None) -> Path:
    kernel = CUDA_KERNEL.format(caps=caps or "[]")
    if caps is None:
        kernel = kernel.replace("cuda-capabilities = []\n", "")
    return _kernel(root, name, GENERAL.format(name=name, backends='["cuda"]') + "[torch]\nsrc = []\n" + kernel)


def test_archs_follow_the_build_capability_choice(tmp_path):
    """Like `kbuild build`: capabilities a toolkit lacks are dropped, a missing list is the
    toolkit's default list, and a toolkit that keeps none of a kernel's list gets no job."""
    listed = _cuda_kernel(tmp_path, "listed", '["7.0", "8.0"]')
    jobs = {j["variant"]: j for j in matrix(tmp_path, [listed])["build"]["include"]}
    assert jobs["torch213-cxx11-cu130-x86_64-linux"]["archs"] == ["8.0"]
    unlisted = _cuda_kernel(tmp_path, "unlisted", None)
    jobs = {j["variant"]: j for j in matrix(tmp_path, [unlisted])["build"]["include"]}
    assert jobs["torch213-cxx11-cu130-x86_64-linux"]["archs"] == cuda.default_capabilities("13.0")
    only_old = _cuda_kernel(tmp_path, "old", '["7.0"]')
    assert not [j for j in matrix(tmp_path, [only_old])["build"]["include"] if "cu130" in j["variant"]]


def test_matrix_and_build_agree_on_every_toolkit_capability(tmp_path):
    """The matrix filters with the build's own per-toolkit list: every capability `kbuild build`
    compiles with a toolkit gets a job for it (8.8 once had a build but no CUDA 13 job)."""
    for toolkit in ("12.6", "13.0"):
        for capability in cuda.toolkit_archs(toolkit):
            kernel = _cuda_kernel(tmp_path / f"{toolkit}-{capability}", "one", f'["{capability}"]')
            archs = {j["toolkit"]: j["archs"] for j in matrix(kernel.parent, [kernel])["build"]["include"]}
            assert archs.get(toolkit) == [capability], (toolkit, capability)


def test_a_cuda_arch_list_in_the_variants_file_is_refused(tmp_path):
    variants = tmp_path / "variants.toml"
    text = VARIANTS_FILE.read_text().replace(
        'torch-index = "https://download.pytorch.org/whl/cu130"\n',
        'torch-index = "https://download.pytorch.org/whl/cu130"\narchs = ["9.0"]\n',
    )
    variants.write_text(text)
    with pytest.raises(KbuildError, match="CUDA toolkit 13.0 has an `archs` list"):
        load_supported(variants)
