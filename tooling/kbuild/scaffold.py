"""`kbuild init`: create a new kernel that builds and passes its tests as created."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from kbuild.errors import KbuildError
from kbuild.manifest import NAME_PATTERN

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("kbuild", "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
CARD_TEMPLATE = Path(__file__).parent / "templates" / "card" / "CARD.md.j2"


def _files(python_name: str, backends: list[str]) -> dict[str, str]:
    """Kernel-relative path -> template under templates/init."""
    files = {
        "build.toml": "build.toml.j2",
        f"{python_name}_common.h": "common.h.j2",
        "torch-ext/torch_binding.h": "torch_binding.h.j2",
        "torch-ext/torch_binding.cpp": "torch_binding.cpp.j2",
        f"torch-ext/{python_name}/__init__.py": "__init__.py.j2",
        "tests/conftest.py": "conftest.py.j2",
        f"tests/test_{python_name}.py": "test.py.j2",
        f"benchmarks/benchmark_{python_name}.py": "benchmark.py.j2",
    }
    if "cpu" in backends:
        files[f"{python_name}_cpu/{python_name}_cpu.cpp"] = "cpu.cpp.j2"
    if "cuda" in backends or "rocm" in backends:
        files[f"{python_name}_cuda/{python_name}.cu"] = "cuda.cu.j2"
    return files


def create_kernel(directory: Path, *, backends: list[str], license: str, repo_id: str | None = None) -> Path:
    """Write a new kernel into `directory` (which must not exist or be empty)."""
    name = directory.name
    if not NAME_PATTERN.match(name):
        raise KbuildError(
            f"`{name}` is not a valid kernel name",
            fix="name the folder with lowercase letters, digits and `-`, starting with a letter (e.g. kernels/my-op)",
        )
    if directory.exists() and any(directory.iterdir()):
        raise KbuildError(f"{directory} already exists and is not empty", fix="choose a new folder")
    repo_id = repo_id or f"kernels-community/{name}"
    if not re.match(r"^[\w.-]+/[\w.-]+$", repo_id):
        raise KbuildError(f"`{repo_id}` is not a Hub repository id", fix="use ORG/NAME")
    python_name = name.replace("-", "_")
    context = {
        "name": name,
        "python_name": python_name,
        "backends": sorted(set(backends)),
        "license": license,
        "repo_id": repo_id,
    }
    for rel, template in _files(python_name, backends).items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TEMPLATES.get_template(f"init/{template}").render(**context), encoding="utf-8")
    if CARD_TEMPLATE.is_file():
        (directory / "CARD.md").write_text(CARD_TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    return directory
