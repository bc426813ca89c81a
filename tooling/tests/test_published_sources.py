"""What `kbuild api-check` and `kbuild verify` read as published: the Hub through huggingface_hub's
real client (offline mode and an unreachable endpoint end as exit 2 with the fix, not as a kbuild
bug), and never a kernel's own source folder. Also the fix line of a stale variant at publish."""

import json
import os
import socket
import subprocess
import sys

import pytest
from test_publish import V212, V213
from test_publish import kernel as kernel  # noqa: F401 (the fixture)

from kbuild.cli import main

BUG = "kbuild bug"


def _closed_port() -> int:
    """A local port nothing listens on: connections to it are refused at once."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


def _kbuild(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    environment.update(HF_HUB_DISABLE_TELEMETRY="1", **env)
    command = [sys.executable, "-m", "kbuild.cli", *args]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args",
    [("verify", "kernels-community/relu"), ("api-check", "{kernel}"), ("api-check", "{kernel}", "--against", "me/x")],
    ids=["verify", "api-check", "api-check-against"],
)
def test_an_unreachable_hub_is_bad_input_with_the_fix(kernel_dir, args):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    result = _kbuild(*(a.format(kernel=kernel_dir) for a in args), HF_ENDPOINT=endpoint)
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Hub at {endpoint} to read " in result.stderr
    assert "fix: check the network connection and HF_ENDPOINT" in result.stderr
    assert "pass a folder instead of the repository id" in result.stderr
    assert BUG not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [("verify", "kernels-community/relu"), ("api-check", "{kernel}"), ("api-check", "{kernel}", "--against", "me/x")],
    ids=["verify", "api-check", "api-check-against"],
)
def test_offline_mode_is_bad_input_with_the_fix(kernel_dir, args):
    result = _kbuild(*(a.format(kernel=kernel_dir) for a in args), HF_HUB_OFFLINE="1")
    assert result.returncode == 2, result.stderr
    assert "from the Hub: HF_HUB_OFFLINE is set" in result.stderr
    assert "fix: unset HF_HUB_OFFLINE to read the Hub, or pass a folder" in result.stderr
    assert BUG not in result.stderr and "Traceback" not in result.stderr


def test_a_kernel_source_folder_is_not_a_publication(kernel_dir, capsys):
    (kernel_dir / "build").mkdir()
    assert main(["verify", str(kernel_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{kernel_dir}: this is a kernel's source folder: its build/ holds local builds" in err
    assert f"fix: publish it first (`kbuild publish {kernel_dir} --to .hub`)" in err
    assert main(["api-check", str(kernel_dir), "--against", str(kernel_dir)]) == 2
    assert "this is a kernel's source folder" in capsys.readouterr().err


def test_a_stale_variant_names_the_command_that_rebuilds_it(kernel, tmp_path, capsys):
    cuda = "torch214-cxx11-cu130-x86_64-linux"
    (kernel / "build" / V213).rename(kernel / "build" / cuda)
    metadata_file = kernel / "build" / cuda / "metadata.json"
    metadata = json.loads(metadata_file.read_text())
    metadata["provenance"]["sources"] = "older"
    metadata_file.write_text(json.dumps(metadata))
    args = ["publish", str(kernel), "--to", str(tmp_path / "hub"), "--allow-nonportable"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"the build of {cuda} is stale" in err
    assert (
        f"fix: rebuild it, from a Python whose torch builds {cuda}: "
        f"`kbuild build {kernel} --variant {cuda} --all-capabilities`; "
        f"or leave it out: add `--variant {V212}` to the publish command"
    ) in err
    assert main([*args, "--variant", V212]) == 0
    assert V212 in capsys.readouterr().out
