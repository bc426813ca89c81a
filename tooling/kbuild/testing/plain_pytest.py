"""The pytest plugin that kbuild installs (entry point `pytest11`): plain `pytest kernels/<name>/tests`
runs a kernel's tests against its local build, as `kbuild test` does, offline.

For each kernel folder that pytest is given (the folder, its tests, a test file, or a folder of
kernel folders such as `kernels/`), `kernels.get_kernel("<repo-id>")` is pointed at the kernel
through LOCAL_KERNELS and `import <python_name>` at the same build, with kbuild.testing.import_alias
loaded as `kbuild test` loads it (it also registers the `kernels_ci` marker). The plugin builds
nothing: a missing or stale build stops pytest with the command that makes it. Kernels that
LOCAL_KERNELS already maps, as `kbuild test` does, are left alone; `-p no:kbuild` turns the
plugin off.

The plugin acts only inside a kbuild repository: below the nearest folder whose `pyproject.toml`
has a `[tool.kbuild]` table (kbuild's marker of a repository root), and on the kernel folders
between a given path and that root. pytest in any other project, even one lying under a folder
that holds a kernel or a `build.toml`, runs as if the plugin were not installed. A build whose
staged files differ from the digest in its `metadata.json` (edited after `kbuild build`) stops
pytest before any of its code runs.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

MANIFEST = "build.toml"
ROOT_MARKER = "pyproject.toml"  # with a [tool.kbuild] table


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # This hook runs before the conftest.py files of the given paths are imported; they may import the kernel.
    invocation = early_config.invocation_params.dir
    given = early_config.known_args_namespace.file_or_dir or [str(invocation)]
    for kernel_dir in kernel_folders(invocation, given):
        use_local_build(kernel_dir, invocation, early_config)


def kernel_folders(invocation: Path, args: list[str]) -> list[Path]:
    """The kernel folders that the pytest arguments `args` name or lie in, in order, once each; only
    those inside a kbuild repository, never above its root."""
    found: dict[Path, None] = {}
    for arg in args:
        path = (invocation / arg.split("::")[0]).resolve()
        root = kbuild_root(path) if path.exists() else None
        if root is None:
            continue
        below_root = [folder for folder in (path, *path.parents) if folder.is_relative_to(root)]
        kernel = next((folder for folder in below_root if (folder / MANIFEST).is_file()), None)
        if kernel is not None:
            found[kernel] = None
        elif path.is_dir():
            found.update(dict.fromkeys(sorted(manifest.parent for manifest in path.glob(f"*/{MANIFEST}"))))
    return list(found)


def kbuild_root(path: Path) -> Path | None:
    """The nearest folder at or above `path` marked as a kbuild repository's root, or None."""
    from kbuild.core.tomlcompat import tomllib

    for folder in (path, *path.parents):
        try:
            tool = tomllib.loads((folder / ROOT_MARKER).read_text(encoding="utf-8")).get("tool")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if isinstance(tool, dict) and isinstance(tool.get("kbuild"), dict):
            return folder
    return None


def use_local_build(kernel_dir: Path, invocation: Path, config: pytest.Config) -> None:
    """Point the loader and `import <python_name>` at `kernel_dir`'s build for this environment, and
    load what `kbuild test` loads with `-p` (kbuild.testing.import_alias); raise pytest.UsageError, with the
    command to run, when there is no build or it is stale."""
    from kbuild.build.builder import resolve_variant
    from kbuild.build.stage import digest_problems
    from kbuild.core.errors import KbuildError
    from kbuild.model.inputs import require_fresh
    from kbuild.model.manifest import load_manifest

    try:  # importing it installs the alias that KBUILD_TEST_IMPORT names, which may be malformed
        from kbuild.testing import import_alias
        from kbuild.testing.runner import kernel_test_environment
    except KbuildError as exc:
        raise pytest.UsageError(f"kbuild: {exc}") from None
    shown = Path(os.path.relpath(kernel_dir, invocation)) if kernel_dir.is_relative_to(invocation) else kernel_dir
    try:
        manifest = load_manifest(kernel_dir)
        if any(entry.startswith(f"{manifest.repo_id}=") for entry in os.environ.get("LOCAL_KERNELS", "").split(":")):
            return
        variant = resolve_variant(manifest, None)
    except KbuildError as exc:
        raise pytest.UsageError(f"kbuild: {exc}") from None
    variant_dir = kernel_dir / "build" / variant.name
    commands = f"run `kbuild build {shown}` and pytest again, or `kbuild test {shown}` (builds, then tests)"
    if not (variant_dir / "metadata.json").is_file():
        raise pytest.UsageError(
            f"kbuild: {shown} has no build for this environment ({variant.name}): the tests would load "
            f"{manifest.repo_id} from the Hub.\n  fix: {commands}"
        )
    try:
        require_fresh(manifest, variant_dir)
    except KbuildError as exc:
        raise pytest.UsageError(f"kbuild: {exc.file}: {exc.message}\n  fix: {commands}") from None
    try:
        changed = digest_problems(variant_dir)
    except KbuildError as exc:  # kernels 0.16 (transformers 5.17's) has no digest reader
        warnings.warn(
            f"kbuild: the staged files of {shown} are not checked against metadata.json: {exc.message}", stacklevel=2
        )
        changed = []
    if changed:
        raise pytest.UsageError(
            f"kbuild: {shown}/build/{variant.name} is not what kbuild built ({'; '.join(changed)[:300]})"
            f"\n  fix: {commands}"
        )
    environment = kernel_test_environment(manifest)
    for name in ("LOCAL_KERNELS", "PYTHONPATH", import_alias.ENVIRONMENT):  # also for Pythons the tests start
        os.environ[name] = environment[name]
    import_alias.install(environment[import_alias.ENVIRONMENT])
    if not config.pluginmanager.is_registered(import_alias):
        config.pluginmanager.register(import_alias, import_alias.__name__)
