"""Issue 45: nothing a kernel folder or a hub folder holds reaches the token or runs code. Each test
plays one attack with the command line a workflow runs (attack files under data/attacks/)."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kbuild.cli import main
from kbuild.core.errors import KbuildError
from kbuild.model.cuda import threads_flags
from kbuild.release.api_compat import probe
from kbuild.release.published_repos import open_source
from kbuild.release.verify import bundle_problems

TOKEN = "hf_trustboundariesTESTtoken0123456789"
ATTACKS = Path(__file__).parent / "data" / "attacks"


@pytest.fixture
def kernel_dir(kernel_dir: Path) -> Path:
    """conftest's minimal kernel, with a public function for its card."""
    (kernel_dir / "torch-ext" / "demo" / "__init__.py").write_text(
        '__all__ = ["demo"]\n\n\ndef demo(x):\n    return x\n'
    )
    return kernel_dir


def test_a_card_symlink_that_leads_out_is_refused_and_its_target_never_printed(
    kernel_dir, tmp_path, capsys, monkeypatch
):
    """Finding 1: CARD.md -> /proc/self/environ (here: a file outside holding the token) was rendered
    and published as the Hub README."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    secret = tmp_path / "environ"
    secret.write_text(f"HF_TOKEN={TOKEN}\n")
    (kernel_dir / "CARD.md").symlink_to(secret)
    assert main(["card", str(kernel_dir), "--out", "-"]) == 2
    out, err = capsys.readouterr()
    assert TOKEN not in out + err and "trustboundaries" not in out + err
    assert f"card {kernel_dir / 'CARD.md'} is a symlink to {secret}, which leads out of" in err
    assert main(["check", str(kernel_dir)]) == 1
    out, err = capsys.readouterr()
    assert "the card does not render" in out + err and "leads out of" in out + err
    (kernel_dir / "CARD.md").unlink()
    (kernel_dir / "CARD.md").symlink_to("/proc/self/environ")
    assert main(["card", str(kernel_dir)]) == 2
    out, err = capsys.readouterr()
    assert TOKEN not in out + err and "symlink to /proc/self/environ" in err


def test_a_card_rendering_a_lone_surrogate_is_bad_input(kernel_dir, capsys):
    """Finding 6: `{{ "\\ud800" }}` ended `kbuild card` and `publish` with exit 3; `check` passed it."""
    shutil.copy(ATTACKS / "surrogate-CARD.md", kernel_dir / "CARD.md")
    assert main(["card", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert "CARD.md" in err and "lone surrogate" in err and "fix:" in err
    assert main(["check", str(kernel_dir)]) == 1
    assert "lone surrogate" in "".join(capsys.readouterr())


def test_the_api_probe_runs_a_published_build_without_credentials(tmp_path, monkeypatch):
    """Finding 3: `publish` onto an existing v<N> probes the published build's `__init__.py`, which
    read HF_TOKEN from the environment it inherited."""
    variant = tmp_path / "build" / "torch213-cxx11-cpu-x86_64-linux"
    variant.mkdir(parents=True)
    shutil.copy(ATTACKS / "reads-the-environment.py", variant / "__init__.py")
    (variant / "metadata.json").write_text(json.dumps({"id": "_tampered_cpu_0000000", "name": "tampered"}))
    secrets = {
        "HF_TOKEN": TOKEN,
        "HUGGING_FACE_HUB_TOKEN": TOKEN + "2",
        "GITHUB_TOKEN": "ghp_trustboundaries",
        "AWS_SECRET_ACCESS_KEY": "aws-trustboundaries",
        "DB_PASSWORD": "password-trustboundaries",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    seen = probe(variant)["python"]
    assert "PATH" in seen  # the probe did read its environment ...
    assert not set(secrets) & set(seen)  # ... which held no credential
    assert not [value for value in secrets.values() if any(value in name for name in seen)]


def _hub_with_planted_programs(kernel_dir: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A local hub folder written by `publish --to`, then given a post-checkout, pre-commit and
    post-commit hook and a core.fsmonitor command that record their environment in a log file."""
    (kernel_dir / "CARD.md").write_text("# {{ name }}\n")
    hub = tmp_path / "hub"
    assert main(["publish", str(kernel_dir), "--card-only", "--to", str(hub)]) == 0
    repo = hub / "kernels-community" / "demo"
    log = tmp_path / "ran.log"
    program = tmp_path / "program.sh"
    program.write_text((ATTACKS / "records-its-environment.sh").read_text().replace("@LOG@", str(log)))
    program.chmod(0o755)
    for hook in ("post-checkout", "pre-commit", "post-commit", "reference-transaction"):
        shutil.copy(program, repo / ".git" / "hooks" / hook)
    subprocess.run(["git", "config", "core.fsmonitor", str(program)], cwd=repo, check=True)
    return hub, repo, log


def test_git_runs_no_hook_or_fsmonitor_of_a_hub_folder(kernel_dir, tmp_path, capsys, monkeypatch):
    """Finding 2: `verify DIR` and `publish --to DIR` ran the hub folder's hooks (with the caller's
    token in their environment) and its core.fsmonitor command."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub, repo, log = _hub_with_planted_programs(kernel_dir, tmp_path)
    assert main(["verify", str(repo)]) == 1  # nothing built was published: verify runs to its end
    assert "v1: no variant published" in capsys.readouterr().out
    assert main(["api-check", str(kernel_dir), "--against", str(hub), "--no-build"]) == 2  # after reading branches
    assert "demo has no build of" in capsys.readouterr().err
    (kernel_dir / "CARD.md").write_text("# {{ name }}, edited\n")
    assert main(["publish", str(kernel_dir), "--card-only", "--to", str(hub)]) == 0
    readme = subprocess.run(["git", "show", "main:README.md"], cwd=repo, capture_output=True, text=True, check=True)
    assert readme.stdout.startswith("# demo, edited")  # the publish committed, with the hooks in place
    assert not log.exists(), log.read_text()[:300]


def test_a_hub_folder_whose_config_names_a_program_is_refused(kernel_dir, tmp_path, capsys):
    """Finding 2: a filter driver (and its textconv and merge cousins) names a program under a name
    that the hub folder chooses, and core.worktree points git at another folder; kbuild refuses to
    run git there, exit 2, naming the key and the file."""
    hub, repo, log = _hub_with_planted_programs(kernel_dir, tmp_path)
    subprocess.run(["git", "config", "core.fsmonitor", "false"], cwd=repo, check=True)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n")
    program = str(tmp_path / "program.sh")
    for key, value in (
        ("filter.evil.smudge", program),
        ("diff.evil.textconv", program),
        ("merge.evil.driver", program),
        ("lfs.extension.evil.clean", program),
        ("core.worktree", str(tmp_path)),
    ):
        subprocess.run(["git", "config", key, value], cwd=repo, check=True)
        assert main(["verify", str(repo)]) == 2, key
        err = capsys.readouterr().err
        assert f"{repo / '.git' / 'config'}: the repository's config sets `{key}`" in err
        assert "fix: " in err and "Traceback" not in err
        assert main(["publish", str(kernel_dir), "--card-only", "--to", str(hub)]) == 2, key
        assert f"the repository's config sets `{key}`" in capsys.readouterr().err
        subprocess.run(["git", "config", "--unset", key], cwd=repo, check=True)
    assert not log.exists()


def test_a_publish_killed_during_its_checkout_is_recovered_by_the_next(kernel_dir, tmp_path, capsys):
    """Finding 7: `kill -9` during `publish --to` left the version branch checked out in a registered
    `kbuild-hub-*` folder; the next publish failed with git's "already checked out"."""
    (kernel_dir / "CARD.md").write_text("# {{ name }}\n")
    hub = tmp_path / "hub"
    assert main(["publish", str(kernel_dir), "--card-only", "--to", str(hub)]) == 0
    repo = hub / "kernels-community" / "demo"
    # The state a publish killed during its checkout leaves: git's own record of the checkout, made
    # by the same command that publish runs, in a folder of the same name.
    left = Path(tempfile.mkdtemp(prefix="kbuild-hub-")) / "checkout"
    subprocess.run(["git", "worktree", "add", "--quiet", str(left), "v1"], cwd=repo, check=True)
    (kernel_dir / "benchmarks").mkdir()
    (kernel_dir / "benchmarks" / "benchmark_demo.py").write_text("# timed\n")
    try:
        assert main(["publish", str(kernel_dir), "--card-only", "--to", str(hub)]) == 0, capsys.readouterr().err
        assert not left.parent.exists()
    finally:
        shutil.rmtree(left.parent, ignore_errors=True)  # kbuild removed it, unless it failed
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True, check=True)
    assert len(listed.stdout.splitlines()) == 1, listed.stdout
    tree = subprocess.run(["git", "ls-tree", "-r", "--name-only", "v1"], cwd=repo, capture_output=True, text=True)
    assert "benchmarks/benchmark_demo.py" in tree.stdout.split()


def test_upstream_yaml_nested_thousands_deep_is_bad_input(kernel_dir, capsys):
    """Finding 6: `files:` nested 5,000 deep ended `kbuild sync` with exit 3 (a RecursionError)."""
    shutil.copy(ATTACKS / "deep-upstream.yaml", kernel_dir / "upstream.yaml")
    assert main(["sync", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{kernel_dir / 'upstream.yaml'}: nested too deeply" in err and "fix: " in err


def test_a_malformed_kbuild_test_import_is_bad_input(kernel_dir):
    """Finding 6: `KBUILD_TEST_IMPORT=x=y@z kbuild test` ended with exit 3 (int('z'))."""
    environment = {**os.environ, "KBUILD_TEST_IMPORT": "x=y@z"}
    command = [str(Path(sys.executable).parent / "kbuild"), "test", str(kernel_dir)]
    result = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    assert result.returncode == 2, result.stderr
    assert "KBUILD_TEST_IMPORT='x=y@z' is not <python_name>=<repo-id>@<version>" in result.stderr
    assert "Traceback" not in result.stderr


def test_nvcc_threads_takes_ascii_digits_only(monkeypatch):
    """Also: NVCC_THREADS="٣" (an Arabic-Indic three) passed `isdigit` and reached nvcc."""
    monkeypatch.setenv("NVCC_THREADS", "\u0663")
    with pytest.raises(KbuildError, match="is not a number of threads"):
        threads_flags(2, [])
    monkeypatch.setenv("NVCC_THREADS", "3")
    assert threads_flags(2, []) == ["--threads=3"]


NOARCH_BUILD_TOML = (
    '[general]\nname = "demo"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n[torch-noarch]\n'
)


def test_verify_finds_a_build_changed_after_signing_with_its_digests_recomputed(tmp_path, capsys):
    """Finding 5: a tampered build whose metadata.json digests were recomputed passed `verify`: the
    bundle was parsed, never compared with metadata.json."""
    from kbuild.build.builder import build_kernel

    kernel = tmp_path / "demo"
    (kernel / "torch-ext" / "demo").mkdir(parents=True)
    (kernel / "torch-ext" / "demo" / "__init__.py").write_text('"""Demo."""\n__all__ = []\n')
    (kernel / "build.toml").write_text(NOARCH_BUILD_TOML)
    # verified as a release checked out on its own (a source folder inside a work tree is refused)
    subprocess.run(["git", "init", "-q", str(kernel)], check=True)
    variant = build_kernel(kernel, log=lambda line: None)
    metadata = variant / "metadata.json"
    bundle = json.loads((ATTACKS / "message-signature-bundle.json").read_text())
    bundle["messageSignature"]["messageDigest"]["digest"] = base64.b64encode(
        hashlib.sha256(metadata.read_bytes()).digest()
    ).decode()
    (variant / "metadata.json.sigstore").write_text(json.dumps(bundle))
    where = f"{kernel} v1: build/{variant.name}/metadata.json.sigstore"
    checkout = open_source(str(kernel))[0]
    assert not [problem for problem in bundle_problems(checkout, "v1", variant) if "signs another" in problem]
    with (variant / "__init__.py").open("a") as init:
        init.write("import os  # tampered after signing\n")
    recorded = json.loads(metadata.read_text())
    files = recorded["digest"]["files"]
    files["__init__.py"] = base64.b64encode(hashlib.sha256((variant / "__init__.py").read_bytes()).digest()).decode()
    metadata.write_text(json.dumps(recorded, indent=2))
    assert main(["verify", str(kernel)]) == 1
    out = capsys.readouterr().out
    assert f"{where}: signs another metadata.json" in out and "changed after it was signed" in out
    assert "digest: " not in out  # the recomputed digests themselves match the files
    assert "transparency-log entry are not" in out  # says what it does not check
