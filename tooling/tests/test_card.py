"""kbuild.card: the default CARD.md template rendered from a kernel's files."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from kbuild.card import DEFAULT_TEMPLATE, docstring_markdown, hub_license, render_card
from kbuild.errors import KbuildError

BUILD_TOML = """[general]
name = "fancy-op"
version = 3
edition = 5
license = "{license}"
backends = ["cpu", "cuda"]
upstream = "https://github.com/example/fancy"
source = "https://github.com/example/kernels"

[general.hub]
repo-id = "org/fancy-op"

[torch]

[kernel.cpu]
backend = "cpu"
depends = ["torch"]
src = ["k.cpp"]

[kernel.cuda]
backend = "cuda"
depends = ["torch"]
src = ["k.cu"]
cuda-capabilities = ["9.0a"]
"""
INIT_PY = '''"""Fancy op: doubles things."""

from ._ops import ops
from .helpers import scale as rescale

__all__ = ["fancy", "rescale"]


def fancy(x: "torch.Tensor", *, times: int = 2) -> "torch.Tensor":
    """Multiply `x`.

    Args:
        x: the input, any
            shape.
        times (int): how often.

    Returns:
        A new tensor.
    """
    return ops.fancy(x, times)


def _private():
    pass
'''
HELPERS_PY = '''def scale(x, factor=1.0):
    """Scale by :func:`factor`."""
'''
LAYERS_PY = '''from torch import nn


class FancyLayer(nn.Module):
    """Doubles its input."""

    def __init__(self, size: int = 4) -> None:
        super().__init__()

    def forward(self, x: "torch.Tensor", scale: float = 1.0) -> "torch.Tensor":
        return x


class _Hidden(nn.Module):
    pass
'''


def _kernel(tmp_path: Path, license: str = "Apache-2.0") -> Path:
    kernel = tmp_path / "kernels" / "fancy-op"
    package = kernel / "torch-ext" / "fancy_op"
    package.mkdir(parents=True)
    (kernel / "build.toml").write_text(BUILD_TOML.format(license=license))
    (kernel / "k.cpp").write_text("")
    (kernel / "k.cu").write_text("")
    (package / "__init__.py").write_text(INIT_PY)
    (package / "helpers.py").write_text(HELPERS_PY)
    (package / "layers.py").write_text(LAYERS_PY)
    shutil.copyfile(DEFAULT_TEMPLATE, kernel / "CARD.md")
    return kernel


def _built(kernel: Path, name: str, backend: str, archs: list[str]) -> None:
    (kernel / "build" / name).mkdir(parents=True)
    (kernel / "build" / name / "metadata.json").write_text(json.dumps({"backend": {"type": backend, "archs": archs}}))


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_default_template_with_everything(tmp_path):
    kernel = _kernel(tmp_path)
    _built(kernel, "torch213-cxx11-cu130-x86_64-linux", "cuda", ["9.0a"])
    _built(kernel, "torch213-cxx11-cpu-x86_64-linux", "cpu", [])
    results = kernel / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "2026-01-01-h100.md").write_text("| old |\n")
    (results / "2026-02-01-h100.md").write_text("| shape | TFLOPS |\n|---|---|\n| 4096 | 1000 |\n")
    (results / "2026-02-01-h100.png").write_bytes(b"\x89PNG")
    card = render_card(kernel)

    assert _front_matter(card) == {
        "library_name": "kernels",
        "license": "apache-2.0",
        "tags": ["kernels", "cpu", "cuda"],
    }
    assert "# fancy-op\n\nFancy op: doubles things.\n" in card
    assert 'fancy_op = get_kernel("org/fancy-op", version=3)' in card
    assert "fancy(x: 'torch.Tensor', *, times: int = 2) -> 'torch.Tensor'" in card
    assert "- `x`: the input, any shape.\n- `times` (int): how often." in card
    assert "**Returns:**\n\nA new tensor." in card
    assert "rescale(x, factor=1.0)" in card and "Scale by `factor`." in card
    assert "_private" not in card
    assert "### `FancyLayer`" in card
    assert "FancyLayer(size: int = 4)\nFancyLayer.forward(x: 'torch.Tensor', scale: float = 1.0)" in card
    assert "_Hidden" not in card
    assert card.index("torch213-cxx11-cpu-x86_64-linux") < card.index("torch213-cxx11-cu130-x86_64-linux")
    assert "| `torch213-cxx11-cu130-x86_64-linux` | cuda | 9.0a |" in card
    assert "| `torch213-cxx11-cpu-x86_64-linux` | cpu | - |" in card
    assert (
        "From `benchmarks/results/2026-02-01-h100.md`" in card and "| 4096 | 1000 |" in card and "| old |" not in card
    )
    assert "![Benchmark results](benchmarks/results/2026-02-01-h100.png)" in card
    assert "- Upstream: <https://github.com/example/fancy>" in card
    # a copy elsewhere links the plot relative to itself
    docs = tmp_path / "docs" / "cards"
    assert "(../../kernels/fancy-op/benchmarks/results/2026-02-01-h100.png)" in render_card(kernel, link_base=docs)


def test_default_template_renders_a_bare_kernel(tmp_path):
    kernel = _kernel(tmp_path, license="LicenseRef-Custom")
    (kernel / "torch-ext" / "fancy_op" / "layers.py").unlink()
    card = render_card(kernel)
    assert _front_matter(card)["license"] == "other"
    assert _front_matter(card)["license_name"] == "licenseref-custom"
    assert "No variant has been built yet." in card
    assert "## Layers" not in card and "## Benchmarks" not in card


def test_template_errors(tmp_path):
    kernel = _kernel(tmp_path)
    (kernel / "CARD.md").write_text("line one\n{{ repo_idd }}\n")
    with pytest.raises(KbuildError, match="unknown variable: 'repo_idd' is undefined") as err:
        render_card(kernel)
    assert "repo_id" in err.value.fix
    (kernel / "CARD.md").write_text("line one\n{% for x in %}\n")
    with pytest.raises(KbuildError, match="template syntax") as err:
        render_card(kernel)
    assert err.value.where == 2
    (kernel / "CARD.md").unlink()
    with pytest.raises(KbuildError, match="no card template"):
        render_card(kernel)


def test_package_without_all(tmp_path):
    kernel = _kernel(tmp_path)
    (kernel / "torch-ext" / "fancy_op" / "__init__.py").write_text("def f():\n    pass\n")
    with pytest.raises(KbuildError, match="no __all__"):
        render_card(kernel)


def test_docstring_markdown_leaves_plain_text_alone():
    assert docstring_markdown("One line.\n\nTwo\nlines.") == "One line.\n\nTwo\nlines."
    assert docstring_markdown("Args:\n    a: first\n\nAfter.") == "**Args:**\n\n- `a`: first\n\nAfter."


def test_hub_license():
    assert hub_license("MIT") == "mit" and hub_license("BSD-3-Clause") == "bsd-3-clause"
    assert hub_license("Proprietary") == "other"


def test_kbuild_init_writes_a_card_that_renders(tmp_path):
    from kbuild.scaffold import create_kernel

    kernel = create_kernel(tmp_path / "kernels" / "my-op", backends=["cpu", "cuda"], license="MIT")
    card = render_card(kernel)
    assert _front_matter(card) == {
        "library_name": "kernels",
        "license": "mit",
        "tags": ["kernels", "cpu", "cuda"],
    }
    assert 'my_op = get_kernel("kernels-community/my-op", version=1)' in card
    assert "## Functions" in card and "No variant has been built yet." in card


def test_gemm_card_states_what_rocm_support_means():
    from kbuild.card import render_card

    card = render_card(Path(__file__).resolve().parents[2] / "kernels" / "gemm")
    assert "ROCm: compiled and algorithm-tested, not run on hardware by this project's CI" in card
