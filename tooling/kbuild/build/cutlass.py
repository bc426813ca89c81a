"""The CUTLASS headers of a `cutlass_X_Y` kernel dependency. The generated CMake project names
them by a cache variable (`KBUILD_CUTLASS_<X>_<Y>_ROOT`) that `kbuild build` sets when it
configures the project, as kernel-builder's project fetches CUTLASS when CMake configures: `kbuild
generate` works offline. The folder is found in this order:

1. the `nvidia-cutlass` PyPI package, when the installed one is the pinned release;
2. a folder named by `KBUILD_CUTLASS_<X>_<Y>_DIR`, then `KBUILD_CUTLASS_DIR` (its
   include/cutlass/version.h, or for 2.x its CMakeLists.txt, must say X.Y);
3. a shallow git checkout of the release tag, cached under `$KBUILD_CACHE_DIR/cutlass/`
   (default ~/.cache/kbuild), from `$KBUILD_CUTLASS_GIT_URL` (default NVIDIA's GitHub).

Another version is never used in place of the one asked for.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
from pathlib import Path

from kbuild.core import gitrepo, locks
from kbuild.core.errors import KbuildError
from kbuild.core.redact import say
from kbuild.model.manifest import KernelSpec
from kbuild.model.variants import major_minor

# The release each dependency name builds with: kernel-builder's pins up to 4.0, the first
# release of the minor for the newer ones.
RELEASES = {
    "cutlass_2_10": "2.10.0",
    "cutlass_3_5": "3.5.1",
    "cutlass_3_6": "3.6.0",
    "cutlass_3_8": "3.8.0",
    "cutlass_3_9": "3.9.2",
    "cutlass_4_0": "4.0.0",
    "cutlass_4_4": "4.4.0",
    "cutlass_4_5": "4.5.0",
}
GIT_URL = "https://github.com/NVIDIA/cutlass.git"
_VERSION_DEFINE = re.compile(r"#define\s+CUTLASS_(MAJOR|MINOR|PATCH)\s+(\d+)")
# CUTLASS 2.x has no version.h: its version is in the top-level CMakeLists.txt's project().
_PROJECT_VERSION = re.compile(r"^\s*project\s*\(\s*CUTLASS\s+VERSION\s+(\d+)\.(\d+)(?:\.(\d+))?", re.I | re.M)


def dependency(kernel: KernelSpec) -> str | None:
    """The `cutlass_X_Y` dependency of `kernel` (None without one), checked without looking for it."""
    wanted = sorted({d for d in kernel.depends if d.startswith("cutlass_")})
    if not wanted:
        return None
    if len(wanted) > 1:
        raise KbuildError(
            f"[kernel.{kernel.name}] depends on {' and '.join(wanted)}; one CUTLASS version per kernel",
            fix="keep one cutlass_X_Y in depends",
        )
    if wanted[0] not in RELEASES:
        raise KbuildError(
            f"[kernel.{kernel.name}] depends on {wanted[0]}, which kbuild cannot provide",
            fix=f"use one of {', '.join(RELEASES)}",
        )
    return wanted[0]


def cmake_variable(dependency: str) -> str:
    """The CMake cache variable holding the root of the CUTLASS tree of `dependency`."""
    return f"KBUILD_{dependency.upper()}_ROOT"


def configure_options(kernels: list[KernelSpec]) -> list[str]:
    """`-D` options giving CMake the CUTLASS tree of each dependency of `kernels` (found, or
    fetched, now: at configure time)."""
    options = {}
    for kernel in kernels:
        name = dependency(kernel)
        if name is not None and name not in options:
            root = resolve(name, owner=f"[kernel.{kernel.name}]")
            options[name] = f"-D{cmake_variable(name)}:PATH={root.as_posix()}"
    return [options[name] for name in sorted(options)]


def resolve(dependency: str, *, owner: str) -> Path:
    """The root of a CUTLASS source tree of the release `dependency` pins."""
    if dependency not in RELEASES:
        raise KbuildError(
            f"{owner} depends on {dependency}, which kbuild cannot provide",
            fix=f"use one of {', '.join(RELEASES)}",
        )
    release = RELEASES[dependency]
    tried: list[str] = []
    for find in (_from_wheel, _from_folder, _from_git):
        root = find(dependency, release, tried)
        if root is not None:
            return root
    variable = _folder_variable(dependency)
    raise KbuildError(
        f"{owner} depends on {dependency} (CUTLASS {release}), which was not found: " + "; ".join(tried),
        fix=f"pip install 'nvidia-cutlass=={release}.*' where PyPI has it, or set {variable} (or "
        f"KBUILD_CUTLASS_DIR) to a CUTLASS {release} checkout, or let git reach {_git_url()}",
    )


def source_version(root: Path) -> str | None:
    """'3.9.2' from root/include/cutlass/version.h, or (CUTLASS 2.x) from the project() of
    root/CMakeLists.txt; None when neither says it."""
    header = root / "include" / "cutlass" / "version.h"
    if header.is_file():
        parts = dict(_VERSION_DEFINE.findall(header.read_text(encoding="utf-8", errors="replace")))
        if {"MAJOR", "MINOR"} <= parts.keys():
            return f"{parts['MAJOR']}.{parts['MINOR']}.{parts.get('PATCH', '0')}"
    cmake = root / "CMakeLists.txt"
    match = _PROJECT_VERSION.search(cmake.read_text(encoding="utf-8", errors="replace")) if cmake.is_file() else None
    if match is None or not (root / "include" / "cutlass").is_dir():
        return None
    return f"{match[1]}.{match[2]}.{match[3] or '0'}"


def _folder_variable(dependency: str) -> str:
    return f"KBUILD_{dependency.upper()}_DIR"


def _git_url() -> str:
    url = os.environ.get("KBUILD_CUTLASS_GIT_URL") or GIT_URL
    problem = gitrepo.url_problem(url)
    if problem:
        raise KbuildError(
            f"KBUILD_CUTLASS_GIT_URL: {problem}",
            fix=f"set KBUILD_CUTLASS_GIT_URL to an https://, ssh:// or file:// URL of CUTLASS, or unset it ({GIT_URL})",
        )
    return url


def _from_wheel(dependency: str, release: str, tried: list[str]) -> Path | None:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        tried.append("the nvidia-cutlass package is not installed")
        return None
    try:
        installed = importlib.metadata.version("nvidia-cutlass")
    except importlib.metadata.PackageNotFoundError:
        tried.append("cutlass_library is installed, but not from the nvidia-cutlass package")
        return None
    if ".".join(installed.split(".")[:3]) != release:
        tried.append(f"nvidia-cutlass {installed} is installed, not {release}")
        return None
    return Path(spec.origin).parent / "source"


def _from_folder(dependency: str, release: str, tried: list[str]) -> Path | None:
    for variable in (_folder_variable(dependency), "KBUILD_CUTLASS_DIR"):
        value = os.environ.get(variable)
        if not value:
            continue
        root = Path(value).expanduser().resolve()  # CMake configures elsewhere: no relative path
        found = source_version(root)
        if found is None:
            raise KbuildError(
                f"{variable}={value} is not a CUTLASS source tree (no include/cutlass/version.h, nor a "
                "CMakeLists.txt with project(CUTLASS VERSION ...) beside include/cutlass/)",
                fix=f"point {variable} at the root of a CUTLASS {release} checkout",
            )
        if major_minor(found) != major_minor(release):
            raise KbuildError(
                f"{variable}={value} holds CUTLASS {found}, but {dependency} needs {major_minor(release)}",
                fix=f"point {_folder_variable(dependency)} at a CUTLASS {release} checkout",
            )
        return root
    tried.append(f"neither {_folder_variable(dependency)} nor KBUILD_CUTLASS_DIR is set")
    return None


def cache_dir() -> Path:
    configured = os.environ.get("KBUILD_CACHE_DIR")
    if configured:
        return Path(configured) / "cutlass"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kbuild" / "cutlass"


def _from_git(dependency: str, release: str, tried: list[str]) -> Path | None:
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    waiting = f"kbuild: waiting for another process to fetch CUTLASS {release}"
    with locks.hold(cache / f"v{release}.lock", lambda line: say(line, err=True), waiting):
        return _clone_release(cache / f"v{release}", release, tried)


def _clone_release(target: Path, release: str, tried: list[str]) -> Path | None:
    if source_version(target) == release:
        return target
    url = _git_url()
    partial = target.with_name(f"{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        gitrepo.clone_tag(url, f"v{release}", partial)
    except KbuildError as error:
        shutil.rmtree(partial, ignore_errors=True)
        tried.append(f"no checkout of tag v{release} from {url} ({error.message.splitlines()[-1]})")
        return None
    found = source_version(partial)
    if found != release:
        shutil.rmtree(partial, ignore_errors=True)
        tried.append(f"tag v{release} of {url} holds CUTLASS {found}")
        return None
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target
