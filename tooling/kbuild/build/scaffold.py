"""`kbuild init`: create a new kernel that builds and passes its tests as created."""

from __future__ import annotations

from pathlib import Path

import jinja2

from kbuild.core.errors import KbuildError
from kbuild.core.hubid import check_repo_id
from kbuild.model import backends as registry
from kbuild.model.manifest import KERNEL_TABLE_NAME, NAME_PATTERN
from kbuild.model.schema import one_of

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("kbuild", "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
CARD_TEMPLATE = Path(__file__).parents[1] / "templates" / "card" / "CARD.md.j2"


def _files(python_name: str, chosen: list[str]) -> dict[str, str]:
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
    for backend in chosen:
        files.update((path.format(name=python_name), template) for path, template in registry.get(backend).scaffold)
    return files


def _check_backends(chosen: list[str]) -> None:
    scaffolded = registry.scaffolded()
    for backend in chosen:
        problem = one_of(registry.names(), "backend", meant=registry.meant())(backend)
        if problem:
            raise KbuildError(f"--backends: {problem[0]}", fix=problem[1])
        if backend not in scaffolded:
            raise KbuildError(
                f"--backends: kbuild init writes example sources for {', '.join(scaffolded)}, not `{backend}`",
                fix=f"run init with --backends among {', '.join(scaffolded)}, then add `{backend}` to "
                f"[general] backends and a [kernel.<name>_{backend}] table with its sources "
                "(docs/kernel-builder-compat.md lists the keys)",
            )


def create_kernel(directory: Path, *, backends: list[str], license: str, repo_id: str | None = None) -> Path:
    """Write a new kernel into `directory` (which must not exist or be empty)."""
    name = directory.name
    if not NAME_PATTERN.fullmatch(name):
        raise KbuildError(
            f"`{name}` is not a valid kernel name",
            fix="name the folder with two or more lowercase letters, digits and `-`, starting with a letter and "
            "ending with a letter or digit (e.g. kernels/my-op)",
        )
    _check_backends(backends)
    python_name = name.replace("-", "_")
    for backend in backends:
        table = f"{python_name}_{backend}"
        if not KERNEL_TABLE_NAME.fullmatch(table):
            raise KbuildError(
                f"`{name}` is too long for kbuild init: its [kernel.{table}] table name would be over 64 characters",
                fix=f"use a name of at most {64 - len(table) + len(python_name)} characters",
            )
    if directory.exists() and any(directory.iterdir()):
        raise KbuildError(f"{directory} already exists and is not empty", fix="choose a new folder")
    repo_id = repo_id or f"kernels-community/{name}"
    check_repo_id(repo_id, source="--repo-id")
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
