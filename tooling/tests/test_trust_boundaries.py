"""Issue 45: nothing a kernel folder or a hub folder holds reaches the token or runs code. Each test
plays one attack with the command line a workflow runs (attack files under data/attacks/)."""

import json
import shutil
from pathlib import Path

import pytest

from kbuild.apicheck import probe
from kbuild.cli import main

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
