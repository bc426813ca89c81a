"""Cards written against kernel-builder's card variables render as kernel-builder renders them:
the same names, types and fallbacks, and a variable kbuild does not define is empty, not an error."""

from pathlib import Path

import pytest
from kernel_card import render_card

BUILD_TOML = """[general]
name = "kb-card"
version = 2
edition = 5
license = "Apache-2.0"
backends = ["cpu"]
upstream = "https://github.com/example/upstream"

[general.hub]
repo-id = "example-org/kb-card"

[torch]
src = ["b.cpp"]

[kernel.k]
backend = "cpu"
depends = ["torch"]
src = ["k.cpp"]
"""
# A card in kernel-builder's style: plain names, `functions[0]`, loops over strings, `has_benchmark`.
CARD = """license: {{ license }}
repo: {{ repo_id }} v{{ version }}
{% if functions %}
first: {{ functions[0] }} = kernel.{{ functions[0] }}
{% for func in functions %}
- `{{ func }}`
{% endfor %}
{% else %}
Function list not available.
{% endif %}
{% if layers %}
{% for layer in layers %}
layer `{{ layer }}`
{% endfor %}
{% endif %}
{% if has_benchmark %}
Run `kernels benchmark {{ repo_id }} --version {{ version }}`.
{% else %}
No benchmark available yet.
{% endif %}
{% if upstream %}upstream: {{ upstream }}
{% endif %}
{% if source %}source: {{ source }}
{% endif %}
{% if some_variable_kernel_builder_lacks %}never{% endif %}
"""


def _kernel(tmp_path: Path, init_py: str) -> Path:
    kernel = tmp_path / "kb-card"
    package = kernel / "torch-ext" / "kb_card"
    package.mkdir(parents=True)
    (kernel / "build.toml").write_text(BUILD_TOML)
    (kernel / "b.cpp").write_text("")
    (kernel / "k.cpp").write_text("")
    (package / "__init__.py").write_text(init_py)
    (kernel / "CARD.md").write_text(CARD)
    return kernel


def _render(kernel: Path) -> str:
    with pytest.warns(UserWarning, match="`some_variable_kernel_builder_lacks`.*renders as nothing"):
        return render_card(kernel)


def test_kernel_builder_variables_render_as_strings(tmp_path: Path):
    init_py = 'from . import layers\n\n__all__ = ["scale", "layers", "Shift"]\n\n\ndef scale(x, f=2.0):\n    return x\n'
    kernel = _kernel(tmp_path, init_py)
    layers = kernel / "torch-ext" / "kb_card" / "layers"
    layers.mkdir()
    (layers / "__init__.py").write_text("class Scale:\n    pass\n\n\nclass Shift:\n    pass\n")
    (kernel / "benchmarks").mkdir()
    (kernel / "benchmarks" / "benchmark.py").write_text("")
    assert _render(kernel) == (
        "license: apache-2.0\n"
        "repo: example-org/kb-card v2\n"
        "first: scale = kernel.scale\n"
        "- `scale`\n"
        "- `Shift`\n"
        "layer `Scale`\n"
        "layer `Shift`\n"
        "Run `kernels benchmark example-org/kb-card --version 2`.\n"
        "upstream: https://github.com/example/upstream\n"
    )


def test_fallbacks_without_all_without_benchmark_script(tmp_path: Path):
    kernel = _kernel(tmp_path, "def scale(x):\n    return x\n")
    (kernel / "benchmarks" / "results").mkdir(parents=True)  # results alone are not a benchmark script
    card = _render(kernel)
    assert "Function list not available.\n" in card and "No benchmark available yet.\n" in card
    assert "layer" not in card


def test_all_entries_that_are_not_strings_are_left_out(tmp_path: Path):
    # a real kernel's bug (an object in __all__), which kernel-builder accepts: the strings are listed
    kernel = _kernel(tmp_path, '__all__ = [quantize, "dequantize"]\n\n\ndef quantize(x):\n    pass\n')
    assert "- `dequantize`\n" in _render(kernel)
    kernel = _kernel(tmp_path / "b", "__all__ = [quantize]\n")
    assert "Function list not available.\n" in _render(kernel)
