"""The main job: build every kernel for this machine, run its quick tests (skipped when the
build and the tests are those of the last passing run), load each build with the real
`kernels` library, and summarise."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kbuild import __version__
from kbuild.build.builder import build_kernel
from kbuild.core import gitrepo, paths
from kbuild.core.errors import KbuildError
from kbuild.core.redact import say, scrub
from kbuild.model.manifest import load_manifest
from kbuild.testing.runner import loader_environment, run_tests

LOAD_PROBE = (
    "import sys; from kernels import get_kernel\n"
    "module = get_kernel(sys.argv[1], version=int(sys.argv[2]))\n"
    "print(module.__name__, ','.join(getattr(module, '__all__', [])))\n"
)
QUICK_TESTS_STAMP = "quick-tests-passed"


@dataclass
class KernelResult:
    name: str
    variant: str = "-"
    build: str = "not run"
    tests: str = "not run"
    load: str = "not run"
    published: str = "not run"
    seconds: float = 0.0
    repo_id: str = ""
    version: int = 0
    checkout: Path | None = None  # the published version branch, checked out beside the hub repository

    @property
    def ok(self) -> bool:
        published = not self.published.startswith("failed")
        return self.build == "ok" and self.tests.startswith("passed") and self.load.startswith("ok") and published


def load_with_kernels(kernel_dir: Path, repo_id: str, version: int) -> str:
    """Import the fresh build in a clean interpreter through `kernels.get_kernel` + LOCAL_KERNELS."""
    result = subprocess.run(
        [sys.executable, "-c", LOAD_PROBE, repo_id, str(version)],
        env=loader_environment(kernel_dir, repo_id),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return "failed: " + scrub((result.stderr.strip().splitlines() or ["?"])[-1])
    module, _, functions = result.stdout.strip().partition(" ")
    count = len([f for f in functions.split(",") if f])
    return f"ok ({module}, {count} function{'' if count == 1 else 's'})"


def publish_locally(kernel_dir: Path, variant: str, hub: Path) -> tuple[str, Path]:
    """Publish the tested variant, the card and the benchmarks into the local hub folder (this
    machine's toolchain is not manylinux-portable: ABI findings are allowed there and only there);
    return a summary and the checkout of the version branch that `kernels` loads."""
    from kbuild.release.execute import publish_to_folder
    from kbuild.release.plan import plan_release

    for release in (plan_release(kernel_dir, variants=[variant]), plan_release(kernel_dir, card_only=True)):
        repo = publish_to_folder(release, hub, allow_nonportable=True, log=lambda line: None)
    return f"{repo} ({release.branch})", check_out_branch(repo, release.branch)


def check_out_branch(repo: Path, branch: str) -> Path:
    """`<repo>@<branch>`: a worktree of `repo` at the head of `branch` (detached, so that
    publishing can still check the branch out), created or moved to the branch's new head."""
    checkout = repo.with_name(f"{repo.name}@{branch}")
    if (checkout / ".git").exists():
        gitrepo.git(
            ["checkout", "--quiet", "--force", "--detach", f"refs/heads/{branch}", "--"], checkout, untrusted=True
        )
    else:
        gitrepo.git(["worktree", "prune"], repo, untrusted=True)
        gitrepo.git(
            ["worktree", "add", "--quiet", "--detach", "--", str(checkout.resolve()), branch], repo, untrusted=True
        )
    return checkout


def load_command(result: KernelResult) -> str | None:
    """The shell command that loads the published checkout of `result` with `kernels`."""
    if result.checkout is None:
        return None
    path = str(result.checkout) if result.checkout.is_absolute() else f"$PWD/{result.checkout}"
    code = f"from kernels import get_kernel; print(get_kernel('{result.repo_id}', version={result.version}))"
    python = os.path.relpath(sys.executable) if Path(sys.executable).is_relative_to(Path.cwd()) else sys.executable
    return f'LOCAL_KERNELS={result.repo_id}="{path}" {python} -c "{code}"'


def quick_tests_key(kernel_dir: Path, variant_dir: Path) -> str:
    """A digest of what a quick-test run depends on: the staged build, tests/, and the versions
    of Python, torch, kernels and kbuild."""
    digest = hashlib.sha256()
    for label, folder in (("build", variant_dir), ("tests", kernel_dir / "tests")):
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            data = path.read_bytes()
            digest.update(f"{label}/{path.relative_to(folder).as_posix()}\0{len(data)}\0".encode() + data)
    versions = [sys.version, importlib.metadata.version("torch"), importlib.metadata.version("kernels"), __version__]
    digest.update("\0".join(versions).encode())
    return digest.hexdigest()


def run_quick_tests(kernel_dir: Path, variant_dir: Path, *, force: bool) -> str:
    """Run the kernel's quick tests against `variant_dir`, unless they passed last time on the same
    build and tests (`.kbuild/<variant>/quick-tests-passed` keeps the key of that run); the result."""
    key = quick_tests_key(kernel_dir, variant_dir)
    stamp = f".kbuild/{variant_dir.name}/{QUICK_TESTS_STAMP}"
    if not force and (kernel_dir / stamp).is_file() and (kernel_dir / stamp).read_text() == key:
        say(
            f"kbuild: {kernel_dir.name}: quick tests skipped: the build and tests/ are unchanged since they last "
            "passed (--force-tests runs them)",
            err=True,
        )
        return "passed (unchanged)"
    code = run_tests(kernel_dir, ci=True, build=False)
    if code != 0:
        paths.remove(kernel_dir / stamp)
        return f"failed (pytest exit {code})"
    paths.write_file(kernel_dir, stamp, key.encode())
    return "passed"


def run_kernel(kernel_dir: Path, hub: Path | None = None, *, force_tests: bool = False) -> KernelResult:
    started = time.monotonic()
    result = KernelResult(kernel_dir.name)
    try:
        manifest = load_manifest(kernel_dir)
        staged = build_kernel(kernel_dir, all_capabilities=True)
        result.variant = staged.name
        result.build = "ok"
        result.tests = run_quick_tests(kernel_dir.resolve(), staged, force=force_tests)
        result.load = load_with_kernels(kernel_dir.resolve(), manifest.repo_id, manifest.version)
        result.repo_id, result.version = manifest.repo_id, manifest.version
        if hub is not None and result.ok:
            result.published = "failed"
            result.published, result.checkout = publish_locally(kernel_dir, result.variant, hub)
    except KbuildError as exc:
        say(f"error: {exc}", err=True)
        result.build = "failed" if result.build != "ok" else result.build
    result.seconds = time.monotonic() - started
    return result


def format_table(results: list[KernelResult]) -> str:
    header = ("kernel", "variant", "build", "quick tests", "loaded by kernels", "published to", "time")
    rows = [(r.name, r.variant, r.build, r.tests, r.load, r.published, f"{r.seconds:.0f} s") for r in results]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    commands = [command for command in map(load_command, results) if command]
    if commands:
        lines += ["", "Load a published build with `kernels` (from the repository root):", *commands]
    return "\n".join(lines)


def run_all(
    kernel_dirs: list[Path], hub: Path | None = None, *, force_tests: bool = False
) -> tuple[list[KernelResult], bool]:
    results = [run_kernel(d, hub, force_tests=force_tests) for d in kernel_dirs]
    return results, all(r.ok for r in results)
