"""Run a kernel's tests against its fresh build through the real `kernels` loader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kbuild import pytest_imports
from kbuild.build import build_kernel
from kbuild.childenv import without_credentials
from kbuild.errors import KbuildError
from kbuild.manifest import Manifest, load_manifest
from kbuild.redact import say

NO_TESTS_COLLECTED = 5


def loader_environment(kernel_dir: Path, repo_id: str) -> dict[str, str]:
    """Environment in which `kernels.get_kernel(repo_id, ...)` loads `kernel_dir/build/<variant>`
    (without credentials: the kernel's code runs in it)."""
    overrides = [e for e in os.environ.get("LOCAL_KERNELS", "").split(":") if e and not e.startswith(f"{repo_id}=")]
    overrides.append(f"{repo_id}={kernel_dir}")
    return {**without_credentials(), "LOCAL_KERNELS": ":".join(overrides), "PYTHONDONTWRITEBYTECODE": "1"}


def kernel_test_environment(manifest: Manifest) -> dict[str, str]:
    """The loader environment, plus `import <python_name>` resolving to the same fresh build
    (through the kbuild.pytest_imports plugin)."""
    alias = f"{manifest.python_name}={manifest.repo_id}@{manifest.version}"
    return {**loader_environment(manifest.kernel_dir, manifest.repo_id), pytest_imports.ENVIRONMENT: alias}


def run_tests(
    kernel_dir: Path | str,
    *,
    variant: str | None = None,
    ci: bool = False,
    build: bool = True,
    pytest_args: list[str] | None = None,
    all_capabilities: bool = False,
    allow_no_tests: bool = False,
) -> int:
    """Build (unless `build` is False; for the local GPU only unless `all_capabilities`), then run
    pytest on `<kernel>/tests`; return its exit code. 'No tests collected' (5) is a failure, said
    in words, unless `allow_no_tests` counts it as success."""
    kernel_dir = Path(kernel_dir).resolve()
    manifest = load_manifest(kernel_dir)
    if build:
        build_kernel(kernel_dir, variant, all_capabilities=all_capabilities)
    elif not (kernel_dir / "build").is_dir():
        raise KbuildError(
            f"{manifest.name} has no build/ folder", fix=f"run `kbuild build {kernel_dir}` or drop --no-build"
        )
    tests = kernel_dir / "tests"
    if not tests.is_dir():
        raise KbuildError(f"{manifest.name} has no tests/ folder", file=tests, fix="add tests/test_*.py")
    command = [sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "-p", pytest_imports.__name__]
    command += pytest_args or []
    if ci:
        command += ["-m", pytest_imports.CI_MARKER]
    say(f"kbuild: testing {manifest.name}: {' '.join(command[2:])}", err=True)
    code = subprocess.run(command, env=kernel_test_environment(manifest), check=False).returncode
    if code == NO_TESTS_COLLECTED:
        if allow_no_tests:
            say(f"kbuild: {manifest.name}: no tests selected (counted as success: --allow-no-tests)", err=True)
            return 0
        say(
            f"kbuild: {manifest.name}: pytest selected no test (exit {NO_TESTS_COLLECTED}): check the -k and -m "
            "expressions against the test names (`-- --collect-only -q` lists them); --allow-no-tests counts "
            "this as success",
            err=True,
        )
    return code
