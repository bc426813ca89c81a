"""Issue 40, as an attacker would try it: the token in what the Hub answers, a CARD.md that runs
without bound, input that ended in exit 3 (a kbuild bug) instead of exit 2 naming the file and
key, and names that passed because `$` matches before a final line break. The sync side
(`.git` look-alikes) is in test_sync.py."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_hub import FakeHub
from minimal_manifest import MINIMAL_BUILD_TOML, NOARCH_BUILD_TOML, write_noarch_kernel

from kbuild.build.builder import build_kernel
from kbuild.build.scaffold import create_kernel
from kbuild.card import sandbox_parent as card_render
from kbuild.check.kernel_checks import check_kernel
from kbuild.cli import main
from kbuild.core.errors import KbuildError
from kbuild.model.cuda import gencode_flags
from kbuild.model.variants import Variant
from kbuild.sync.upstream import load_upstream

KBUILD = Path(__file__).resolve().parents[1] / "kbuild"
TOKEN = "hf_SecretTokenForTests0123456789"


@pytest.fixture
def noarch(tmp_path) -> Path:
    """A pure-Python kernel with the default card: `kbuild build` stages it without compiling."""
    return write_noarch_kernel(tmp_path / "kernels" / "demo")


def _quiet(_line: str) -> None:
    pass


def _publish_to(hub: FakeHub, kernel: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_TELEMETRY": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kbuild.cli", "publish", str(kernel), "--repo-id", "org/demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


# -- everything printed goes through the scrubber ------------------------------------------------


def _output_calls(path: Path) -> list[str]:
    """`print` (called or passed on), `sys.stdout`/`sys.stderr` and `logging` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id == "print":
            found.append(f"{path.name}:{node.lineno}: print")
        elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{path.name}:{node.lineno}: sys.{node.attr}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
            found += [f"{path.name}:{node.lineno}: logging" for module in modules if module == "logging"]
    return found


# `say` itself, and the child processes whose stdout is their answer to kbuild, read as data.
NOT_OUTPUT = {"redact.py", "sandbox_child.py", "api_dump.py"}


def test_kbuild_prints_only_through_the_scrubbing_say():
    """One output function (kbuild.core.redact.say), so no printed value can skip the scrubber."""
    modules = [path for path in sorted(KBUILD.rglob("*.py")) if path.name not in NOT_OUTPUT]
    assert [line for path in modules for line in _output_calls(path)] == []


def test_publish_never_prints_the_token_a_hub_echoes(noarch):
    """A hostile endpoint answers each commit with the request's Authorization header as its id."""
    build_kernel(noarch, log=_quiet)
    with FakeHub() as hub:
        hub.echo_in_commit_oid = True
        result = _publish_to(hub, noarch)
    assert result.returncode == 0, result.stderr
    assert "main: Update the kernel card: leak:" in result.stdout  # the echoed value was printed
    assert TOKEN not in result.stdout + result.stderr


def test_a_hub_answering_200_with_html_is_bad_input(noarch):
    build_kernel(noarch, log=_quiet)
    with FakeHub() as hub:
        hub.not_json = True
        result = _publish_to(hub, noarch)
        endpoint = hub.endpoint
    assert result.returncode == 2, result.stderr
    assert f"the Hub at {endpoint} answered a request for org/demo with a body that is not JSON" in result.stderr
    assert "fix: check that HF_ENDPOINT" in result.stderr


# -- CARD.md: bounded in time and memory, one file ---------------------------------------------

LOOPS = (
    '{% for a in "x" * 5000 %}{% for b in "x" * 5000 %}{% for c in "x" * 5000 %}{% endfor %}{% endfor %}{% endfor %}'
)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{{ "a" * 1000000000 }}', "rendering the card needs more than 256 MiB of memory"),
        ("{{ [1] * 1000000000 }}", "rendering the card needs more than 256 MiB of memory"),
        ("{{ 10 ** 10000000 }}", "rendering the card took longer than 1 s"),
        (LOOPS, "rendering the card took longer than 1 s"),
        ('{{ "x" | center(1000000000) }}', "rendering the card needs more than 256 MiB of memory"),
    ],
)
def test_card_rendering_is_bounded(noarch, monkeypatch, capsys, payload, message):
    monkeypatch.setattr(card_render, "SECONDS", 1)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (noarch / "CARD.md").write_text(f"# {{{{ name }}}}\n{payload}\n")
    started = time.monotonic()
    assert main(["card", str(noarch)]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith(f"error: {noarch / 'CARD.md'}") and message in err, err
    assert "fix: a card shows its data" in err


@pytest.mark.parametrize(
    ("tag", "shown"),
    [
        ('{% include "README.md" %}', "include"),
        ('{% import "macros.j2" as m %}', "import"),
        ('{% from "macros.j2" import m %}', "from ... import"),
        ('{% extends "base.j2" %}', "extends"),
    ],
)
def test_card_may_not_load_other_templates(noarch, capsys, tag, shown):
    (noarch / "CARD.md").write_text(f"# {{{{ name }}}}\n\n{tag}\n")
    assert main(["card", str(noarch)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {noarch / 'CARD.md'}:3: `{{% {shown} %}}` is not allowed in a card"), err
    assert "fix: a card is one file" in err


def test_a_failing_card_expression_is_bad_input_with_its_line(noarch, capsys):
    (noarch / "CARD.md").write_text("# {{ name }}\n\n{{ version / 0 }}\n")
    assert main(["card", str(noarch)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {noarch / 'CARD.md'}:3: the card template failed: ZeroDivisionError"), err


def test_the_card_renderer_gets_no_token(noarch, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (noarch / "CARD.md").write_text("{{ name }}\n")
    seen: dict[str, object] = {}
    real_run = subprocess.run

    def run(*args, **kwargs):
        seen.update(kwargs)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    assert main(["card", str(noarch)]) == 0
    assert seen["env"] == {} and seen["timeout"] == card_render.SECONDS


# -- exit 2 naming the file and key, never exit 3 -----------------------------------------------


def _kernel(tmp_path: Path, include: str | None = None) -> Path:
    """The minimal compiled kernel, its [kernel.demo_cpu] given `include` (a TOML value)."""
    kernel = tmp_path / "demo"
    for rel in ("torch-ext/torch_binding.cpp", "demo_cpu/demo.cpp", "torch-ext/demo/__init__.py"):
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text("// placeholder\n" if rel.endswith(".cpp") else "from ._ops import ops\n")
    toml = MINIMAL_BUILD_TOML
    if include is not None:
        toml = toml.replace('src = ["demo_cpu/demo.cpp"]\n', f'src = ["demo_cpu/demo.cpp"]\ninclude = [{include}]\n')
    (kernel / "build.toml").write_text(toml)
    return kernel


INCLUDE = "[kernel.demo_cpu] include"


def _nul_include(tmp_path: Path) -> tuple[Path, str]:
    return _kernel(tmp_path, '"inc\\u0000lude"'), INCLUDE


def _long_include(tmp_path: Path) -> tuple[Path, str]:
    return _kernel(tmp_path, f'"{"a" * 300}"'), f"build.toml: {INCLUDE} '{'a' * 60}'... (300 characters) is longer"


def _deep_include(tmp_path: Path) -> tuple[Path, str]:
    deep = "/".join(["folder"] * 700)
    return _kernel(tmp_path, f'"{deep}"'), f"build.toml: {INCLUDE} '{deep[:60]}'... (4899 characters) is longer"


def _looping_header(tmp_path: Path) -> tuple[Path, str]:
    kernel = _kernel(tmp_path)
    (kernel / "demo_cpu" / "loop.h").symlink_to("loop.h")
    return kernel, f"source {kernel.resolve() / 'demo_cpu' / 'loop.h'} is a symlink loop"


def _looping_package_file(tmp_path: Path) -> tuple[Path, str]:
    kernel = _kernel(tmp_path)
    (kernel / "torch-ext" / "demo" / "ops.py").symlink_to("other.py")
    (kernel / "torch-ext" / "demo" / "other.py").symlink_to("ops.py")
    return kernel, f"package file {kernel.resolve() / 'torch-ext' / 'demo' / 'ops.py'} is a symlink loop"


def _looping_include_folder(tmp_path: Path) -> tuple[Path, str]:
    kernel = _kernel(tmp_path, '"inc"')
    (kernel / "inc").symlink_to("inc")
    return kernel, f"build.toml: {INCLUDE} {kernel.resolve() / 'inc'} is a symlink loop"


@pytest.mark.parametrize("command", ["check", "generate"])
@pytest.mark.parametrize(
    "make",
    [_nul_include, _long_include, _deep_include, _looping_header, _looping_package_file, _looping_include_folder],
)
def test_unusable_paths_are_bad_input(tmp_path, capsys, command, make):
    kernel, message = make(tmp_path)
    assert main([command, str(kernel)]) == 2
    output = capsys.readouterr()
    text = output.out + output.err  # `check` lists a build.toml error as a finding
    assert message in text and "fix: " in text and "internal error" not in text, text


def test_publish_into_a_file_or_an_unwritable_folder_is_bad_input(noarch, tmp_path, capsys):
    build_kernel(noarch, log=_quiet)
    (tmp_path / "hub.txt").write_text("not a folder\n")
    publish = ["publish", str(noarch), "--repo-id", "org/demo", "--allow-nonportable", "--to"]
    assert main([*publish, str(tmp_path / "hub.txt")]) == 2
    assert f"error: the hub folder {tmp_path / 'hub.txt'} is a file" in capsys.readouterr().err
    assert main([*publish, str(tmp_path / "hub.txt" / "sub")]) == 2
    assert f"error: cannot write the hub folder {tmp_path / 'hub.txt' / 'sub'}: " in capsys.readouterr().err
    assert main([*publish, "/sys/kbuild-hub"]) == 2  # sysfs: no one, root included, may create a folder there
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the hub folder /sys/kbuild-hub: ") and "fix: name a folder" in err


# -- names: whole-string matches ---------------------------------------------------------------


@pytest.mark.parametrize("repo_id", ["a/b\n", "org/demo\n"])
def test_check_reports_a_repo_id_with_a_line_break(noarch, repo_id):
    hub = f"\n[general.hub]\nrepo-id = {json.dumps(repo_id)}\n"
    (noarch / "build.toml").write_text(NOARCH_BUILD_TOML.format(hub=hub))
    assert any(f"repo-id `{repo_id}` is not a Hub repository id" in str(f) for f in check_kernel(noarch))


@pytest.mark.parametrize(
    "validate",
    [
        lambda _: Variant.parse("torch-cpu\n"),
        lambda _: gencode_flags("9.0a\n"),
        lambda tmp: create_kernel(tmp / "my-op\n", backends=["cpu"], license="MIT"),
        lambda tmp: create_kernel(tmp / "my-op", backends=["cpu"], license="MIT", repo_id="org/my-op\n"),
    ],
    ids=["noarch-variant", "cuda-capability", "kernel-name", "init-repo-id"],
)
def test_names_are_matched_as_whole_strings(tmp_path, validate):
    with pytest.raises(KbuildError):
        validate(tmp_path)


@pytest.mark.parametrize(
    ("key", "value"),
    [("url", '"https://example.com/up.git\\n"'), ("commit", '"' + "a" * 40 + '\\n"')],
)
def test_upstream_url_and_commit_are_matched_as_whole_strings(tmp_path, key, value):
    values = {"url": "https://example.com/up.git", "commit": "a" * 40, key: value}
    (tmp_path / "upstream.yaml").write_text(
        f"url: {values['url']}\ncommit: {values['commit']}\nfiles:\n  - {{from: a.h, to: a.h}}\n"
    )
    with pytest.raises(KbuildError) as failure:
        load_upstream(tmp_path)
    assert failure.value.message.startswith(f"{key}: ")
