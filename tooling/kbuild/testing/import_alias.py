"""The pytest plugin that `kbuild test` loads: `import <python_name>` (and its submodules) in a
kernel's tests gives the fresh build, the very module `kernels.get_kernel(<repo-id>)` returns,
and the `kernels_ci` marker is registered.

kernel-builder's tests often import the package by name (`from relu.layers import ReLU`);
the `kernels` loader imports a build under its metadata id instead, so without this alias
those imports fail, or would load a second copy of the build. The kernel is loaded on the
first such import only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType

import pytest

from kbuild.core.errors import KbuildError

ENVIRONMENT = "KBUILD_TEST_IMPORT"  # "<python_name>=<repo-id>@<version>"
CI_MARKER = "kernels_ci"


class BuildAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves `<name>` and `<name>.<sub>` to the modules of the build that `kernels` loads."""

    def __init__(self, name: str, repo_id: str, version: int):
        self.name, self.repo_id, self.version = name, repo_id, version
        self._package: str | None = None
        self._real_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name and not fullname.startswith(self.name + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._package_name() + spec.name[len(self.name) :])
        self._real_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system gave the module our alias spec; give it back its own.
        alias = module.__spec__
        assert alias is not None
        module.__spec__ = self._real_specs.pop(alias.name)

    def _package_name(self) -> str:
        if self._package is None:
            from kernels import get_kernel

            self._package = get_kernel(self.repo_id, version=self.version).__name__
        return self._package


def install(value: str) -> BuildAlias:
    """Install the alias that `value` ("<python_name>=<repo-id>@<version>") describes; a KbuildError
    naming the variable when it is not of that form."""
    name, _, target = value.partition("=")
    repo_id, _, version = target.rpartition("@")
    if not (name.isidentifier() and repo_id.count("/") == 1 and version.isascii() and version.isdigit()):
        raise KbuildError(
            f"{ENVIRONMENT}={value!r} is not <python_name>=<repo-id>@<version>",
            fix=f"unset {ENVIRONMENT}: `kbuild test` and kbuild's pytest plugin set it",
        )
    alias = BuildAlias(name, repo_id, int(version))
    sys.meta_path.insert(0, alias)
    return alias


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker of a kernel's quick tests: kernel-builder kernels use it without
    registering it, which `--strict-markers` refuses."""
    config.addinivalue_line("markers", f"{CI_MARKER}: quick kernel tests, the ones `kbuild test --ci` runs")


if os.environ.get(ENVIRONMENT):
    install(os.environ[ENVIRONMENT])
