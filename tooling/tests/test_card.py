"""kbuild.card.content: the default CARD.md template rendered from a kernel's files."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from kernel_card import render_card

from kbuild.card.content import DEFAULT_TEMPLATE, docstring_markdown, hub_license
from kbuild.core.errors import KbuildError

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


def _result(path: Path, device: str, date: str, us: float, suite: str | None = None) -> None:
    machine = {"date_utc": date, "device": device, "torch": "2.11.0", "cuda": "13.0"}
    rows = [{"M": 64, "dtype": "bf16", "floor_us": 1.0, "us": {"fancy": [us, us + 1], "torch": None}}]
    suites = {"suite": suite} if suite else {}
    path.write_text(json.dumps({"machine": machine, "calls": 30, "rows": rows, **suites}))


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_default_template_with_everything(tmp_path):
    kernel = _kernel(tmp_path)
    _built(kernel, "torch213-cxx11-cu130-x86_64-linux", "cuda", ["9.0a"])
    _built(kernel, "torch213-cxx11-cpu-x86_64-linux", "cpu", [])
    results = kernel / "benchmarks" / "results"
    results.mkdir(parents=True)
    _result(results / "2026-01-01-h100.json", "NVIDIA H100", "2026-01-01T10:00:00+00:00", 99.0)
    _result(results / "2026-02-01-h100.json", "NVIDIA H100", "2026-02-01T10:00:00+00:00", 12.25)
    _result(results / "2026-01-15-mi300.json", "AMD MI300X", "2026-01-15T10:00:00+00:00", 20.0)
    (results / "notes.json").write_text('{"not": "a result"}')
    (results / "2026-02-01-h100.png").write_bytes(b"\x89PNG")
    card = render_card(kernel)

    assert _front_matter(card) == {
        "library_name": "kernels",
        "license": "apache-2.0",
        "tags": ["kernels", "cpu", "cuda"],
    }
    assert "# fancy-op\n\nFancy op: doubles things.\n" in card
    assert 'fancy_op = get_kernel("org/fancy-op", version=3)' in card
    assert "x = torch.randn(2, 4, device=device)\nprint(fancy_op.fancy(x))" in card
    assert 'get_kernel("me/x", version=3)' in render_card(kernel, repo_id="me/x")
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
    assert card.index("### AMD MI300X (2026-01-15)") < card.index("### NVIDIA H100 (2026-02-01)")
    assert "over 30 calls, torch 2.11.0, CUDA 13.0; lower is better" in card
    assert "| M | dtype | fancy (µs) | torch (µs) |\n|---|---|---|---|\n| 64 | bf16 | 12.2 | - |" in card
    assert "99.0" not in card and "not a result" not in card
    assert "![Benchmark results on NVIDIA H100](benchmarks/results/2026-02-01-h100.png)" in card
    assert "- Upstream project: <https://github.com/example/fancy>" in card
    assert "- Source code: <https://github.com/example/kernels>" in card
    # a copy elsewhere links the plot relative to itself
    docs = tmp_path / "docs" / "cards"
    assert "(../../kernels/fancy-op/benchmarks/results/2026-02-01-h100.png)" in render_card(kernel, link_base=docs)


def test_default_template_renders_a_bare_kernel(tmp_path):
    kernel = _kernel(tmp_path, license="LicenseRef-Custom")
    (kernel / "torch-ext" / "fancy_op" / "layers.py").unlink()
    card = render_card(kernel)
    assert _front_matter(card)["license"] == "other"
    assert _front_matter(card)["license_name"] == "licenseref-custom"
    assert "No build has been published yet." in card
    assert "## Layers" not in card and "## Benchmarks" not in card


def test_template_errors(tmp_path):
    kernel = _kernel(tmp_path)
    (kernel / "CARD.md").write_text("line one\n{{ repo_idd }}.\n")
    with pytest.warns(UserWarning, match=r"CARD.md:2: the card reads `repo_idd`.*use one of .*repo_id"):
        assert render_card(kernel) == "line one\n.\n"  # as kernel-builder's lenient renderer
    (kernel / "CARD.md").write_text("line one\n{{ repo_idd.name }}\n")
    with pytest.raises(KbuildError, match="'repo_idd' is undefined") as err:
        render_card(kernel)
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
    card = render_card(kernel)
    assert "## Functions" not in card and "print(fancy_op." not in card


def test_docstring_markdown_leaves_plain_text_alone():
    assert docstring_markdown("One line.\n\nTwo\nlines.") == "One line.\n\nTwo\nlines."
    assert docstring_markdown("Args:\n    a: first\n\nAfter.") == "**Args:**\n\n- `a`: first\n\nAfter."


def test_hub_license():
    assert hub_license("MIT") == "mit" and hub_license("BSD-3-Clause") == "bsd-3-clause"
    assert hub_license("Proprietary") == "other"


def test_kbuild_init_writes_a_card_that_renders(tmp_path):
    from kbuild.build.scaffold import create_kernel

    kernel = create_kernel(tmp_path / "kernels" / "my-op", backends=["cpu", "cuda"], license="MIT")
    card = render_card(kernel)
    assert _front_matter(card) == {
        "library_name": "kernels",
        "license": "mit",
        "tags": ["kernels", "cpu", "cuda"],
    }
    assert 'my_op = get_kernel("kernels-community/my-op", version=1)' in card
    assert "## Functions" in card and "No build has been published yet." in card


def test_gemm_card_states_what_rocm_support_means():
    card = render_card(Path(__file__).resolve().parents[2] / "kernels" / "gemm")
    assert "ROCm: compiled and algorithm-tested, not run on hardware by this project's CI" in card


def test_published_variants_come_from_the_branch_and_ci_variants_apart(tmp_path):
    kernel = _kernel(tmp_path)
    _built(kernel, "torch213-cxx11-cu130-x86_64-linux", "cuda", ["9.0a"])
    _built(kernel, "torch213-cxx11-cpu-x86_64-linux", "cpu", [])
    card = render_card(kernel, published=["torch212-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux"])
    assert "| `torch212-cxx11-cpu-x86_64-linux` | cpu | - |" in card
    assert "| `torch213-cxx11-cu130-x86_64-linux` | cuda | 9.0a |" in card
    assert "torch213-cxx11-cpu-x86_64-linux" not in card
    assert "Each release is built for " in card and "the table lists those published so far" in card


def test_module_constants_show_by_value_in_signatures(tmp_path):
    kernel = _kernel(tmp_path)
    init = kernel / "torch-ext" / "fancy_op" / "__init__.py"
    init.write_text(
        INIT_PY.replace("times: int = 2", "times: int = TIMES").replace("from ._ops", "TIMES = 2\nfrom ._ops")
    )
    assert "fancy(x: 'torch.Tensor', *, times: int = 2) -> 'torch.Tensor'" in render_card(kernel)


# Words of the project's own logs and tools that mean nothing to a Hub user.
INTERNAL_WORDS = ["lent", "device call", "ours", "ours_challenge_layout", "run 4", "NOTES", "DEVICE_RUNS", "_dirty"]


def _html(card: str):
    from markdown_it import MarkdownIt

    body = card.split("---\n", 2)[2]  # the Hub shows the front matter apart
    return body, MarkdownIt("commonmark").enable("table").render(body)


def _card_structure(card: str, python_name: str) -> None:
    import re

    body, html = _html(card)
    levels = [int(level) for level in re.findall(r"<h([1-6])>", html)]
    assert levels.count(1) == 1 and levels[0] == 1, levels
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False)), f"a heading level is skipped: {levels}"
    fenced = re.sub(r"```.*?```", "", body, flags=re.DOTALL)
    table_blocks = re.findall(r"(?:^\|.*\|\n)+", fenced, flags=re.MULTILINE)
    assert html.count("<table>") == len(table_blocks)
    for table in re.findall(r"<table>.*?</table>", html, flags=re.DOTALL):
        rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.DOTALL)
        widths = {len(re.findall(r"<t[hd][ >]", row)) for row in rows}
        assert len(widths) == 1, table
    text = re.sub(r"<[^>]+>", " ", html)
    for word in INTERNAL_WORDS:
        assert not re.search(rf"(?<![\w.]){re.escape(word)}", text, flags=re.IGNORECASE), word
    usage = re.search(r"## Usage\n\n```python\n(.*?)```", body, flags=re.DOTALL)
    assert usage and re.search(rf"print\({python_name}\.\w+\(", usage[1]), "the example calls no function"


@pytest.mark.parametrize("kernel", ["relu", "gemm"])
def test_repository_cards_render_to_well_formed_html(kernel):
    card = render_card(Path(__file__).resolve().parents[2] / "kernels" / kernel, repo_id="me/x")
    assert 'get_kernel("me/x", version=1)' in card
    _card_structure(card, kernel)


def test_newest_result_of_each_device_and_suite(tmp_path):
    kernel = _kernel(tmp_path)
    results = kernel / "benchmarks" / "results"
    results.mkdir(parents=True)
    _result(results / "a-prefill.json", "NVIDIA H100", "2026-02-01T10:00:00+00:00", 40.0, "prefill")
    _result(results / "a-decode.json", "NVIDIA H100", "2026-02-01T10:00:00+00:00", 11.0, "decode")
    _result(results / "old-decode.json", "NVIDIA H100", "2026-01-01T10:00:00+00:00", 99.0, "decode")
    card = render_card(kernel)
    assert card.index("### NVIDIA H100, decode suite (2026-02-01)") < card.index("### NVIDIA H100, prefill suite")
    assert "| 64 | bf16 | 11.0 | - |" in card and "| 64 | bf16 | 40.0 | - |" in card and "99.0" not in card


def test_gemm_card_benchmarks_come_from_json_with_user_words():
    card = render_card(Path(__file__).resolve().parents[2] / "kernels" / "gemm")
    assert "## Benchmarks\n\n### NVIDIA H100 80GB HBM3, decode suite (" in card
    assert "### NVIDIA H100 80GB HBM3, prefill suite (" in card
    assert "| M | N | K | gemm_nt (µs) |" in card
    assert "SCALE_BLOCK" not in card and "group: int = 128" in card


def test_card_of_a_new_kernel_renders_to_well_formed_html(tmp_path):
    from kbuild.build.scaffold import create_kernel

    kernel = create_kernel(tmp_path / "kernels" / "my-op", backends=["cpu", "cuda"], license="MIT")
    _card_structure(render_card(kernel), "my_op")


def test_unreadable_metadata_and_results_are_errors_naming_the_file(tmp_path):
    kernel = _kernel(tmp_path)
    metadata = kernel / "build" / "torch213-cxx11-cpu-x86_64-linux" / "metadata.json"
    metadata.parent.mkdir(parents=True)
    metadata.write_text("[]")  # JSON, but not an object: a variant without a backend
    assert "| `torch213-cxx11-cpu-x86_64-linux` |  | - |" in render_card(kernel)
    metadata.write_bytes(b'{"backend": \xff}')
    with pytest.raises(KbuildError, match="not UTF-8") as err:
        render_card(kernel)
    assert err.value.file == str(metadata)
    metadata.write_text('{"backend": {"type": "cpu"}}')
    results = kernel / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "run.json").write_text('{"machine": {},\n"rows": [}')
    with pytest.raises(KbuildError, match="invalid JSON") as err:
        render_card(kernel)
    assert err.value.file == str(results / "run.json") and err.value.where == 2


def test_layers_imported_from_a_sibling_module_are_listed(tmp_path):
    """A layer that layers.py imports from a module of its own (and names in `__all__`) is on the card."""
    kernel = _kernel(tmp_path)
    package = kernel / "torch-ext" / "fancy_op"
    (package / "_other.py").write_text(
        'from torch import nn\n\n\nclass OtherLayer(nn.Module):\n    """Halves its input."""\n\n'
        '    def forward(self, x: "torch.Tensor") -> "torch.Tensor":\n        return x\n'
    )
    layers = LAYERS_PY + '\n\n__all__ = ["FancyLayer", "OtherLayer"]\n\nfrom ._other import OtherLayer  # noqa: E402\n'
    (package / "layers.py").write_text(layers)
    card = render_card(kernel)
    assert "### `OtherLayer`" in card and "OtherLayer.forward(x: 'torch.Tensor') -> 'torch.Tensor'" in card
    assert "Halves its input." in card and card.index("### `FancyLayer`") < card.index("### `OtherLayer`")
