"""One command computes the input digest once and renders the card once, and passes them down."""

import json
import shutil
from pathlib import Path

import pytest

from kbuild.build import builder as build
from kbuild.card import sandbox_parent as card_render
from kbuild.card.content import DEFAULT_TEMPLATE
from kbuild.cli import main
from kbuild.model import inputs
from kbuild.model.manifest import load_manifest
from kbuild.release import plan

CU126 = "torch213-cxx11-cu126-x86_64-linux"
CU130 = "torch213-cxx11-cu130-x86_64-linux"
CUDA_BUILD_TOML = """[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = ["cuda"]

[torch]

[kernel.demo_cuda]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0"]
src = ["demo.cu"]
"""


@pytest.fixture
def calls(monkeypatch) -> dict[str, int]:
    """How often the input digest was computed and the card rendered (the digest under each name
    a module imported it by)."""
    counts = {"digest": 0, "card": 0}
    digest, render = inputs.input_digest, card_render.render

    def counting_digest(*args, **kwargs):
        counts["digest"] += 1
        return digest(*args, **kwargs)

    def counting_render(*args, **kwargs):
        counts["card"] += 1
        return render(*args, **kwargs)

    for module in (inputs, build, plan):
        monkeypatch.setattr(module, "input_digest", counting_digest, raising=False)
    monkeypatch.setattr(card_render, "render", counting_render)
    return counts


def test_build_computes_the_input_digest_once(kernel_dir, calls, monkeypatch, tmp_path):
    library = tmp_path / "extension.abi3.so"
    library.write_bytes(b"not compiled: the build's steps around the compiler are what is counted")
    monkeypatch.setattr("kbuild.build.builder._compile", lambda project, **options: library)
    assert main(["build", str(kernel_dir)]) == 0
    assert calls["digest"] == 1


def _kernel(root: Path, build_toml: str, built: dict[str, list[str]]) -> Path:
    """A kernel with `built` variants staged (name -> archs), fresh for its sources."""
    kernel = root / "demo"
    (kernel / "torch-ext" / "demo").mkdir(parents=True)
    (kernel / "torch-ext" / "demo" / "__init__.py").write_text('"""Demo."""\n__all__ = []\n')
    (kernel / "demo.cu").write_text("// demo\n")
    (kernel / "build.toml").write_text(build_toml)
    shutil.copyfile(DEFAULT_TEMPLATE, kernel / "CARD.md")
    digest = inputs.input_digest(load_manifest(kernel))
    for name, archs in built.items():
        variant = kernel / "build" / name
        variant.mkdir(parents=True)
        (variant / "__init__.py").write_text("# demo\n")
        metadata = {"backend": {"type": "cuda", "archs": archs}, "provenance": {"sources": digest}}
        (variant / "metadata.json").write_text(json.dumps(metadata))
    return kernel


def _publish(kernel: Path, hub: Path) -> str:
    assert main(["publish", str(kernel), "--repo-id", "org/demo", "--to", str(hub)]) == 0
    return (hub / "org" / "demo" / "README.md").read_text()


def test_publish_of_one_variant_computes_the_digest_once_and_renders_the_card_once(tmp_path, calls):
    kernel = _kernel(tmp_path, CUDA_BUILD_TOML, {CU130: ["8.0", "9.0"]})
    calls.update(digest=0, card=0)
    readme = _publish(kernel, tmp_path / "hub")
    assert calls == {"digest": 1, "card": 1}
    assert f"`{CU130}`" in readme, "the card lists the variant on the branch"


def test_the_card_is_rendered_again_for_the_variants_on_the_branch(tmp_path, calls):
    kernel = _kernel(tmp_path, CUDA_BUILD_TOML, {CU126: ["8.0", "9.0"]})
    _publish(kernel, tmp_path / "hub")
    second = _kernel(tmp_path / "later", CUDA_BUILD_TOML, {CU130: ["8.0", "9.0"]})  # built elsewhere
    calls.update(digest=0, card=0)
    readme = _publish(second, tmp_path / "hub")
    assert calls["card"] == 2, "once as prepared, once for the branch that also holds the earlier variant"
    assert f"`{CU126}`" in readme and f"`{CU130}`" in readme
