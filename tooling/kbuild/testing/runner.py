"""Run a kernel's tests against its fresh build through the real `kernels` loader."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kbuild.build.builder import build_kernel
from kbuild.core import paths
from kbuild.core.childenv import without_credentials
from kbuild.core.errors import KbuildError
from kbuild.core.redact import say
from kbuild.model.backends import CPU
from kbuild.model.manifest import Manifest, load_manifest
from kbuild.model.variants import find_torch
from kbuild.testing import import_alias

NO_TESTS_COLLECTED = 5


def loader_environment(kernel_dir: Path, repo_id: str) -> dict[str, str]:
    """Environment in which `kernels.get_kernel(repo_id, ...)` loads `kernel_dir/build/<variant>`
    (without credentials: the kernel's code runs in it)."""
    overrides = [e for e in os.environ.get("LOCAL_KERNELS", "").split(":") if e and not e.startswith(f"{repo_id}=")]
    overrides.append(f"{repo_id}={kernel_dir}")
    return {**without_credentials(), "LOCAL_KERNELS": ":".join(overrides), "PYTHONDONTWRITEBYTECODE": "1"}


# `import <python_name>` in a Python started by a kernel's tests (`subprocess` with `sys.executable`):
# this package, first on the child's PYTHONPATH, puts kbuild.testing.import_alias' alias in place (it
# installs itself from the environment) and hands the import over to it, so the child gets the
# fresh build as the test process does.
CHILD_IMPORT = '''"""Written by kbuild test: `import {name}` in a child process gives the fresh build."""

import importlib
import sys

import kbuild.testing.import_alias  # noqa: F401  (installs the alias named by $KBUILD_TEST_IMPORT)

del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
'''


def child_import_path(manifest: Manifest) -> Path:
    """The folder that, on PYTHONPATH, makes `import <python_name>` load the build in any Python
    started with kbuild installed (written under the kernel's `.kbuild/`)."""
    folder = Path(".kbuild") / "child-imports"
    source = CHILD_IMPORT.format(name=manifest.python_name).encode()
    paths.write_file(manifest.kernel_dir, folder / manifest.python_name / "__init__.py", source)
    return manifest.kernel_dir / folder


def kernel_test_environment(manifest: Manifest) -> dict[str, str]:
    """The loader environment, plus `import <python_name>` resolving to the same fresh build: in
    pytest through the kbuild.testing.import_alias plugin, in the Pythons the tests start through
    PYTHONPATH (kernel-builder's test runner exports PYTHONPATH and LOCAL_KERNELS likewise)."""
    alias = f"{manifest.python_name}={manifest.repo_id}@{manifest.version}"
    python_path = [str(child_import_path(manifest)), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        **loader_environment(manifest.kernel_dir, manifest.repo_id),
        import_alias.ENVIRONMENT: alias,
        "PYTHONPATH": os.pathsep.join(python_path),
    }


def backends_elsewhere(manifest: Manifest, variant: str | None) -> str | None:
    """Why a [torch-noarch] kernel cannot run here (None when it can, or when `variant` was asked
    for): its backends are not this machine's torch's and not the CPU. A compiled kernel's build
    already says so."""
    if not manifest.is_noarch or variant is not None:
        return None
    here = find_torch().backend
    if here in manifest.backends or CPU.name in manifest.backends:
        return None
    return (
        f"its backends ({', '.join(manifest.backends)}) cannot run with this machine's torch ({here}); "
        f"run `kbuild test {manifest.kernel_dir}` where torch has one of them"
    )


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
    if not tests.is_dir():  # kernel-builder's test runner skips such a kernel too
        say(f"kbuild: {manifest.name}: not tested: it has no tests/ folder", err=True)
        return 0
    elsewhere = backends_elsewhere(manifest, variant)
    if elsewhere:
        say(f"kbuild: {manifest.name}: not tested: {elsewhere}", err=True)
        return 0
    command = [sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "-p", import_alias.__name__]
    command += pytest_args or []
    if ci:
        command += ["-m", import_alias.CI_MARKER]
    say(f"kbuild: testing {manifest.name}: {' '.join(command[2:])}", err=True)
    # From an empty folder: a folder in the caller's one named like a package (a kernels-community
    # checkout has `einops/`) would shadow the installed package in the tests.
    with tempfile.TemporaryDirectory(prefix="kbuild-test-") as empty:
        code = subprocess.run(command, env=kernel_test_environment(manifest), cwd=empty, check=False).returncode
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
