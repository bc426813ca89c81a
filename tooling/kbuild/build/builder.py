"""Build one kernel for one variant: choose the variant, write its CMake project, configure and
compile it with CMake + Ninja, and stage the flat `build/<variant>/` (kbuild.build.stage).

The only module that runs cmake and ninja.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

from packaging.version import Version

from kbuild.build import abi, cutlass
from kbuild.build.cmake_project import Project, ops_name, write_project
from kbuild.build.ninja import run_ninja
from kbuild.build.registration import require_cpp_registration
from kbuild.build.stage import stage
from kbuild.core import locks, paths
from kbuild.core.errors import KbuildError
from kbuild.core.redact import say
from kbuild.model import arch_rules, backends
from kbuild.model.inputs import input_digest, uid_of
from kbuild.model.manifest import Manifest, load_manifest
from kbuild.model.variants import COMPILED, NOARCH, STABLE_ABI, TorchInstall, Variant, detect_variant, find_torch

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    say(message, err=True)


def parse_variant_for(manifest: Manifest, name: str) -> Variant:
    """Parse a variant name and check that the kernel has its backend."""
    variant = Variant.parse(name)
    if variant.backend not in manifest.backends:
        raise KbuildError(
            f"variant {name} is for backend `{variant.backend}`, which {manifest.name} does not list",
            file=manifest.path,
            fix=f"choose a variant for one of: {', '.join(manifest.backends)}",
        )
    if variant.kind != NOARCH:
        expected = with_abi(manifest, variant.with_kind(COMPILED) if variant.kind == STABLE_ABI else variant)
        if expected.kind != variant.kind or (variant.kind == STABLE_ABI and expected.torch != variant.torch):
            if expected.kind == STABLE_ABI:
                kind, fix = expected.name, f"pass --variant {expected.name}"
            else:
                kind = "an ordinary compiled variant (no [torch] stable-abi version for it)"
                fix = f"name a compiled variant, e.g. torch{variant.torch_tag}-cxx11-{variant.compute}-..."
            raise KbuildError(
                f"{manifest.name} builds backend `{variant.backend}` as {kind}, not {name}",
                file=manifest.path,
                where="[torch] stable-abi",
                fix=fix,
            )
    return variant


def with_abi(manifest: Manifest, variant: Variant) -> Variant:
    """`variant` as the kernel builds it: against the stable ABI of the torch version that
    `[torch] stable-abi` gives for its backend, else as an ordinary compiled variant."""
    stable = manifest.torch.stable_abi_for(variant.backend) if manifest.torch else None
    return variant.with_stable_abi(stable) if stable else variant


def project_for(manifest: Manifest, variant: Variant, digest: str | None = None) -> Project:
    """The build tree of `variant`, its namespace named after `digest`, the hash of the build's
    inputs (computed here when the command has not computed it yet)."""
    digest = digest or input_digest(manifest)
    build_dir = manifest.kernel_dir / ".kbuild" / variant.name
    return Project(manifest, variant, ops_name(manifest, variant.backend, uid_of(digest)), build_dir, digest)


def resolve_variant(manifest: Manifest, requested: str | None) -> Variant:
    """The variant to build: the requested one if this environment can build it, else detected."""
    if manifest.is_noarch:
        backend = Variant.parse(requested).backend if requested else manifest.backends[0]
        if backend not in manifest.backends:
            raise KbuildError(f"backend `{backend}` is not in [general] backends", file=manifest.path)
        return Variant(torch=None, backend=backend, cpu="", os="", kind=NOARCH)
    if requested is None:
        variant = detect_variant()
        if variant.backend not in manifest.backends:
            if backends.CPU.name not in manifest.backends:
                raise KbuildError(
                    f"{manifest.name} has no `{variant.backend}` backend (it has {', '.join(manifest.backends)})",
                    file=manifest.path,
                    fix="build from an environment whose torch matches one of the kernel's backends, or pass --variant",
                )
            variant = detect_variant(backends.CPU.name)
        return with_abi(manifest, variant)
    wanted = parse_variant_for(manifest, requested)
    available = with_abi(manifest, detect_variant(wanted.backend if wanted.backend == backends.CPU.name else None))
    if available != wanted:
        raise KbuildError(
            f"this environment builds {available.name}, not {requested}",
            fix="run kbuild from a Python environment with the torch (and toolkit) of that variant; "
            "`kbuild variants` lists what this one builds",
        )
    return wanted


def check_torch_bounds(manifest: Manifest, torch: TorchInstall, variant: Variant) -> None:
    if variant.kind == STABLE_ABI and variant.torch and Version(torch.major_minor) < Version(variant.torch):
        raise KbuildError(
            f"{variant.name} targets the stable ABI of torch {variant.torch}, found torch {torch.version}",
            file=manifest.path,
            where="[torch] stable-abi",
            fix=f"build with torch >= {variant.torch}",
        )
    spec = manifest.torch
    if spec is None:
        return
    current = Version(torch.major_minor)
    if spec.minver and current < Version(spec.minver):
        raise KbuildError(
            f"needs torch >= {spec.minver}, found {torch.version}", file=manifest.path, where="[torch] minver"
        )
    if spec.maxver and current > Version(spec.maxver):
        raise KbuildError(
            f"needs torch <= {spec.maxver}, found {torch.version}", file=manifest.path, where="[torch] maxver"
        )


def build_kernel(
    kernel_dir: Path | str,
    variant: str | None = None,
    *,
    jobs: int | None = None,
    all_capabilities: bool = False,
    one_per_code_path: bool = False,
    log: Log = _stderr,
) -> Path:
    """Build `kernel_dir` for `variant` (default: this environment's) and return the staged folder.
    A [torch-noarch] kernel without `variant` is staged for each of its backends (it is pure
    Python, so one machine stages them all, as kernel-builder does); the first one's folder is returned.
    A CUDA build on a machine with a GPU compiles for that GPU only, unless `all_capabilities`;
    `one_per_code_path` compiles one capability per distinct code path instead (CI's check)."""
    kernel_dir = Path(kernel_dir).resolve()
    manifest = load_manifest(kernel_dir)
    if manifest.is_noarch and variant is None:
        return [build_kernel(kernel_dir, f"torch-{backend}", jobs=jobs, log=log) for backend in manifest.backends][0]
    target = resolve_variant(manifest, variant)
    require_cpp_registration(manifest)
    with build_lock(kernel_dir, log):
        project = project_for(manifest, target)
        started = time.monotonic()
        log(f"kbuild: {manifest.name} -> {target.name} ({project.ops_name})")
        library = None
        if target.kind != NOARCH:
            torch = find_torch()
            check_torch_bounds(manifest, torch, target)
            project = _select_archs(project, all_capabilities, one_per_code_path, log)
            write_project(project, torch, log)
            library = _compile(project, jobs=jobs, log=log)
        staged = stage(project, library)
    log(f"kbuild: staged {staged.relative_to(kernel_dir.parent)} in {time.monotonic() - started:.1f} s")
    return staged


class NothingToGenerate(KbuildError):
    """A [torch-noarch] kernel has no CMake project (`kbuild generate` of a batch goes on)."""


def generate_only(
    kernel_dir: Path | str,
    variant: str | None = None,
    *,
    all_capabilities: bool = False,
    one_per_code_path: bool = False,
) -> Path:
    """Write the generated CMake project of `kernel_dir` for `variant`; return the build tree.

    Any variant of the kernel's backends can be generated (rocm, metal, xpu included), also
    where it cannot be built; torch's paths in it are those of this environment's torch.
    Without `variant`, the project is the one `build_kernel` builds (for the local GPU only, unless
    `all_capabilities`); `one_per_code_path`: one capability per distinct code path, any variant."""
    kernel_dir = Path(kernel_dir).resolve()
    manifest = load_manifest(kernel_dir)
    if variant is None:
        target = resolve_variant(manifest, None)
    else:
        target = parse_variant_for(manifest, variant)
    if target.kind == NOARCH:
        raise NothingToGenerate(f"{manifest.name} is a [torch-noarch] kernel: there is nothing to generate")
    with build_lock(kernel_dir, _stderr):
        project = project_for(manifest, target)
        if variant is None or one_per_code_path:
            project = _select_archs(project, all_capabilities, one_per_code_path, _stderr)
        write_project(project, find_torch())
    return project.build_dir


def _select_archs(project: Project, all_capabilities: bool, one_per_code_path: bool, log: Log) -> Project:
    """`project` with the archs a build compiles: one per code path when `one_per_code_path`
    (saying which), else `for_local_gpu`'s."""
    if not one_per_code_path:
        return for_local_gpu(project, all_capabilities, log)
    reduced = replace(project, one_per_code_path=True)
    if reduced.archs != project.archs:
        log(
            f"kbuild: compiling one capability per code path: {', '.join(reduced.archs)} of build.toml's "
            f"{', '.join(project.archs)} (a compile check; publish refuses it, --all-capabilities compiles them all)"
        )
    return reduced


def for_local_gpu(project: Project, all_capabilities: bool, log: Log) -> Project:
    """`project` compiled only for the capabilities of this machine's GPUs (a CUDA variant on a
    machine with one, unless `all_capabilities`), saying so; else `project` unchanged."""
    gpus = None if all_capabilities else arch_rules.local_gpus(project.backend)
    if not gpus:
        return project
    local = replace(project, gpu_capabilities=gpus)
    if local.archs == project.archs:
        return project
    log(
        f"kbuild: compiling for this machine's GPU only (capability {', '.join(gpus)}): {', '.join(local.archs)} "
        f"of build.toml's {', '.join(project.archs)}; --all-capabilities compiles them all"
    )
    return local


def build_lock(kernel_dir: Path, log: Log) -> AbstractContextManager[None]:
    """Hold the kernel's build lock (`.kbuild/build.lock`); a second build waits, saying so."""
    lock_file = paths.real_dir(kernel_dir, ".kbuild") / "build.lock"
    return locks.hold(lock_file, log, f"kbuild: waiting for another build of {kernel_dir} to finish")


def _require_tool(name: str, fix: str) -> str:
    """The tool from its PyPI package (a dependency of kbuild) if installed, else from PATH."""
    try:
        module = __import__(name)
        bundled = Path(getattr(module, "CMAKE_BIN_DIR", "") or getattr(module, "BIN_DIR", "")) / name
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    path = shutil.which(name)
    if path is None:
        raise KbuildError(f"`{name}` was not found", fix=fix)
    return path


def _compile(project: Project, *, jobs: int | None, log: Log) -> Path:
    build_dir = project.build_dir
    cmake = _require_tool("cmake", "pip install 'cmake>=3.26'")
    ninja = _require_tool("ninja", "pip install ninja")
    # CUTLASS is found (or fetched) now, as kernel-builder's project does when CMake configures.
    found = cutlass.configure_options(project.kernels) if project.backend.cutlass else []
    cache = build_dir / "CMakeCache.txt"
    cached = cache.read_text(encoding="utf-8", errors="replace").splitlines() if cache.is_file() else []
    if not (build_dir / "build.ninja").is_file() or any(option[2:] not in cached for option in found):
        log(f"kbuild: configuring {build_dir}")
        args = [cmake, "-G", "Ninja", "-S", str(build_dir), "-B", str(build_dir), f"-DCMAKE_MAKE_PROGRAM={ninja}"]
        args += found
        device_compiler = project.backend.compiler
        if device_compiler and shutil.which(device_compiler[1]):
            args.append(f"-D{device_compiler[0]}={shutil.which(device_compiler[1])}")
        args += _compiler_cache(log)
        _run(args, build_dir, log, "CMake configuration")
    run_ninja([ninja, "-C", str(build_dir)] + ([f"-j{jobs}"] if jobs else []), build_dir, log)
    library = build_dir / "extension.abi3.so"
    if not library.is_file():
        raise KbuildError(f"the build finished without producing {library.name}", file=build_dir / "CMakeLists.txt")
    embedded = abi.embedded_cxx_runtime(library)
    if embedded:
        compiler = os.environ.get("CXX", "the default c++")
        raise KbuildError(
            f"{library.name} {embedded}", file=library, fix=f"CXX is {compiler}; rebuild after changing it"
        )
    return library


def _compiler_cache(log: Log) -> list[str]:
    """CMake options that compile through ccache when it is installed (KBUILD_CCACHE=0: never)."""
    ccache = shutil.which("ccache")
    if ccache is None or os.environ.get("KBUILD_CCACHE") == "0":
        return []
    log(f"kbuild: compiling through ccache ({ccache}); KBUILD_CCACHE=0 turns it off")
    return [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={ccache}" for lang in ("C", "CXX", "CUDA", "HIP")]


def _run(args: list[str], cwd: Path, log: Log, what: str) -> None:
    """Run a build tool quietly; on failure show its output and stop."""
    process = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line)
    if process.wait() != 0:
        tail = "".join(output[-60:])
        raise KbuildError(f"{what} failed:\n{tail}", file=cwd / "CMakeLists.txt", fix="see the compiler output above")
