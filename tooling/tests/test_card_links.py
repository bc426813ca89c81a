"""Cards point a Hub visitor only to what the visitor can open, and their Python code runs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_card import render_card
from markdown_it import MarkdownIt

from kbuild.build.builder import build_kernel
from kbuild.build.scaffold import create_kernel
from kbuild.card.content import card_context
from kbuild.check.card_links import check_card_links
from kbuild.cli import main
from kbuild.core import gitrepo
from kbuild.model.manifest import load_manifest
from kbuild.testing.runner import loader_environment

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """A scaffolded kernel in a repository whose examples/ folder is not published."""
    gitrepo.git(["init", "-q"], tmp_path)
    kernel = create_kernel(tmp_path / "kernels" / "my-op", backends=["cpu"], license="MIT")
    results = kernel / "benchmarks" / "results"
    results.mkdir(parents=True)
    machine = {"device": "NVIDIA H100", "date_utc": "2026-02-01T10:00:00+00:00"}
    (results / "h100.json").write_text(json.dumps({"machine": machine, "rows": [{"n": 1, "us": {"ours": 1.0}}]}))
    (results / "h100.png").write_bytes(b"\x89PNG")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "model.py").write_text("print('a model')\n")
    return kernel


def add_to_card(kernel: Path, text: str) -> None:
    card = kernel / "CARD.md"
    card.write_text(card.read_text() + "\n" + text + "\n")


def test_links_to_the_card_and_its_plots_urls_and_anchors_pass(kernel: Path):
    add_to_card(
        kernel,
        "[plot](benchmarks/results/h100.png), [again](./benchmarks/results/h100.png), [card](README.md), "
        "[top](#usage), [hub](https://huggingface.co/docs), `torch.nn/functional`, `a/b`, `kernels/my-op`, "
        "`../../../../../../../etc/passwd`",
    )
    assert check_card_links(kernel) == []


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[results](benchmarks/results/h100.json)", "links benchmarks/results/h100.json"),
        ("![bench](benchmarks/benchmark_my_op.py)", "links benchmarks/benchmark_my_op.py"),
        ("[missing](docs/nothing.md)", "links docs/nothing.md"),
        ("Run `examples/model.py` in the source repository.", "names `examples/model.py`"),
        ("Results: `benchmarks/results/h100.json`.", "names `benchmarks/results/h100.json`"),
    ],
)
def test_links_and_paths_to_unpublished_files_are_findings(kernel: Path, capsys, text: str, named: str):
    add_to_card(kernel, text)
    (finding,) = check_card_links(kernel)
    assert finding.path == kernel / "CARD.md" and finding.line == len((kernel / "CARD.md").read_text().splitlines())
    assert f"the card {named}" in finding.message and "not published on the Hub" in finding.message
    assert "README.md, benchmarks/results/h100.png" in finding.message
    assert "set `source` in build.toml's [general]" in (finding.fix or "")
    assert main(["check", str(kernel)]) == 1
    assert named in capsys.readouterr().out


def test_the_fix_names_the_source_repository_when_build_toml_has_one(kernel: Path):
    manifest = kernel / "build.toml"
    manifest.write_text(manifest.read_text().replace("[general]\n", '[general]\nsource = "https://github.com/o/r"\n'))
    add_to_card(kernel, "See `examples/model.py`.")
    (finding,) = check_card_links(kernel)
    assert finding.fix == "link the file in the source repository (https://github.com/o/r) or leave it out"


def test_a_card_that_does_not_render_is_a_finding(kernel: Path):
    add_to_card(kernel, "{{ no_such_variable.name }}")
    (finding,) = check_card_links(kernel)
    assert finding.message.startswith("the card does not render: template uses an unknown variable")


@pytest.mark.parametrize("name", ["relu", "gemm"])
def test_the_cards_of_the_repository_link_only_published_files(name: str):
    assert [str(finding) for finding in check_card_links(REPO / "kernels" / name)] == []


def python_blocks(kernel_dir: Path) -> list[str]:
    """The Python code blocks of the rendered card, less the signatures of its functions and layers."""
    context = card_context(load_manifest(kernel_dir), ci_variants=[])
    signatures = {entry.signature for entry in context["functions"] + context["layers"]}
    fences = [token for token in MarkdownIt("commonmark").parse(render_card(kernel_dir)) if token.type == "fence"]
    return [fence.content for fence in fences if fence.info == "python" and fence.content.strip() not in signatures]


def run_card_code(kernel_dir: Path, hub_cache: Path) -> None:
    """Run each Python block of the card on its own, offline, `kernels` loading the kernel's CPU build."""
    build_kernel(kernel_dir, log=lambda line: None)
    manifest = load_manifest(kernel_dir)
    # Stands in for the Hub's list of version branches: a LayerRepository resolves its version to a
    # commit (for a log line) before `get_kernel` loads the build that LOCAL_KERNELS names.
    refs = hub_cache / f"models--{manifest.repo_id.replace('/', '--')}" / "refs"
    refs.mkdir(parents=True)
    (refs / f"v{manifest.version}").write_text("0" * 40)
    env = {**loader_environment(kernel_dir, manifest.repo_id), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache)}
    # The transformers recipe runs on a model the reader has loaded: the kernel's own tests run it on a
    # tiny DeepseekV3 (kernels/gemm/tests/test_transformers_fp8.py), with transformers installed.
    blocks = [block for block in python_blocks(kernel_dir) if "set_experts_implementation" not in block]
    assert blocks
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{block}\n{result.stderr}"


def test_the_python_code_of_relus_card_runs_on_its_cpu_build(relu_copy: Path, tmp_path: Path):
    run_card_code(relu_copy, tmp_path / "hub-cache")


@pytest.mark.slow
def test_the_python_code_of_gemms_card_runs_on_its_cpu_build(tmp_path: Path):
    kernel = tmp_path / "gemm"
    shutil.copytree(REPO / "kernels" / "gemm", kernel, ignore=shutil.ignore_patterns("build", ".kbuild"))
    run_card_code(kernel, tmp_path / "hub-cache")
