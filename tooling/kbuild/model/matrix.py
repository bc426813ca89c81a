"""CI jobs as data: supported variants (data/variants.toml) filtered by each kernel's build.toml.

`kbuild matrix` prints `{"build": {"include": [...]}, "test": {"include": [...]}}` for
GitHub's `fromJSON`: every job to build, and the subset that has a test runner. Output is
sorted and stable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.core.tomlcompat import tomllib
from kbuild.model import arch_rules, backends
from kbuild.model.manifest import Manifest, TorchSpec, load_manifest
from kbuild.model.variants import COMPILED, NOARCH, STABLE_ABI, BuiltVariant, Variant, major_minor

VARIANTS_FILE = Path(__file__).parents[1] / "data" / "variants.toml"
# A change here rebuilds every kernel: the build library itself.
TOOLING_PATHS = ("tooling/", "pyproject.toml")


@dataclass(frozen=True)
class Toolkit:
    backend: str
    version: str | None
    image: str
    torch_index: str
    archs: tuple[str, ...]


@dataclass(frozen=True)
class Supported:
    torch: tuple[str, ...]
    cpu: str
    os: str
    toolkits: tuple[Toolkit, ...]
    build_runner: tuple[str, ...]
    test_runners: dict[str, tuple[str, ...]]


def load_supported(path: Path = VARIANTS_FILE) -> Supported:
    try:
        data = tomllib.loads(path.read_text())
        for t in data["toolkit"]:
            record = backends.by_name().get(t["backend"])
            if record and record.cuda_capabilities and "archs" in t:
                raise KbuildError(
                    f"{record.title} toolkit {t.get('version')} has an `archs` list",
                    file=str(path),
                    fix=f"remove it: the capabilities each {record.title} toolkit builds are kbuild's own "
                    "(kbuild/data/cuda_capabilities.toml)",
                )
        return Supported(
            torch=tuple(data["torch"]),
            cpu=data["cpu"],
            os=data["os"],
            toolkits=tuple(
                Toolkit(
                    t["backend"],
                    t.get("version"),
                    t["image"],
                    t["torch-index"],
                    tuple(t.get("archs", ())),
                )
                for t in data["toolkit"]
            ),
            build_runner=tuple(data["runners"]["build"]),
            test_runners={k: tuple(v) for k, v in data["runners"]["test"].items()},
        )
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as err:
        raise KbuildError(
            f"invalid supported-variants file ({err!r})",
            file=str(path),
            fix="compare with the keys described at its top",
        ) from None


def kernel_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / "kernels").glob("*/build.toml"))


def changed_kernels(root: Path, ref: str) -> list[Path]:
    """Kernels with a file changed since `ref` (all of them when the tooling changed)."""
    changed = gitrepo.changed_files(ref, root)
    if any(path.startswith(TOOLING_PATHS) for path in changed):
        return kernel_dirs(root)
    names = {path.split("/")[1] for path in changed if path.startswith("kernels/") and path.count("/") >= 2}
    return [d for d in kernel_dirs(root) if d.name in names]


def named_kernels(root: Path, names: list[str]) -> list[Path]:
    dirs = []
    for name in names:
        path = root / "kernels" / name
        if not (path / "build.toml").is_file():
            raise KbuildError(
                f"no kernel named {name!r}",
                file=str(path / "build.toml"),
                fix="use a folder name under kernels/",
            )
        dirs.append(path)
    return dirs


def matrix(root: Path, kernels: list[Path], supported: Supported | None = None) -> dict[str, Any]:
    supported = supported or load_supported()
    jobs = [job for kernel_dir in kernels for job in kernel_jobs(root, load_manifest(kernel_dir), supported)]
    jobs.sort(key=lambda job: (job["kernel"], job["variant"]))
    return {
        "build": {"include": jobs},
        "test": {"include": [job for job in jobs if job["test-runner"]]},
    }


def render(result: dict[str, Any]) -> str:
    return json.dumps(result, sort_keys=True, separators=(",", ":"))


def kernel_jobs(root: Path, manifest: Manifest, supported: Supported) -> list[dict[str, Any]]:
    if manifest.framework == "tvm-ffi":
        raise KbuildError(
            "kbuild matrix does not build tvm-ffi kernels yet",
            file=str(manifest.path),
            fix="use [torch] or [torch-noarch]",
        )
    jobs = []
    for backend in manifest.backends:
        toolkits = [t for t in supported.toolkits if t.backend == backend]
        if manifest.torch is None:  # [torch-noarch]
            # Pure Python: built once, in the newest toolkit's container (or the CPU one).
            variant = Variant(torch=None, backend=backend).with_kind(NOARCH)
            toolkit = toolkits[-1] if toolkits else _cpu_toolkit(supported)
            jobs.append(_job(root, manifest, variant, toolkit, [], supported))
            continue
        for toolkit in toolkits:
            if not _toolkit_in_bounds(manifest, toolkit):
                continue
            archs = _archs(manifest, toolkit)
            if archs is None:
                continue
            for torch, kind in _torch_versions(manifest.torch, backend, supported):
                variant = Variant(torch, backend, toolkit.version, supported.cpu, supported.os, kind)
                jobs.append(_job(root, manifest, variant, toolkit, archs, supported))
    return jobs


def ci_variants(manifest: Manifest) -> list[BuiltVariant]:
    """The variants the release workflow builds for this kernel (`kbuild matrix --release`)."""
    if manifest.framework == "tvm-ffi":
        return []  # `kbuild matrix` does not build tvm-ffi kernels yet
    jobs = kernel_jobs(manifest.kernel_dir, manifest, load_supported())
    return [BuiltVariant(job["variant"], job["backend"], list(job["archs"])) for job in jobs]


def _job(
    root: Path,
    manifest: Manifest,
    variant: Variant,
    toolkit: Toolkit,
    archs: list[str],
    supported: Supported,
) -> dict[str, Any]:
    return {
        "kernel": manifest.name,
        "path": manifest.kernel_dir.resolve().relative_to(root.resolve()).as_posix(),
        "variant": variant.name,
        "backend": variant.backend,
        "torch": variant.torch or "",
        "toolkit": variant.toolkit or "",
        "archs": archs,
        "image": toolkit.image,
        "torch-index": toolkit.torch_index,
        "build-runner": list(supported.build_runner),
        "test-runner": list(supported.test_runners.get(variant.backend, ())),
    }


def _cpu_toolkit(supported: Supported) -> Toolkit:
    return next(t for t in supported.toolkits if t.backend == backends.CPU.name)


def _torch_versions(spec: TorchSpec, backend: str, supported: Supported) -> list[tuple[str, str]]:
    """(torch version, kind) pairs: one stable-ABI build, or one compiled build per
    supported torch within the kernel's bounds."""
    stable = spec.stable_abi_for(backend)
    if stable:
        return [(major_minor(stable), STABLE_ABI)]
    return [(torch, COMPILED) for torch in supported.torch if _in_bounds(torch, spec.minver, spec.maxver)]


def _toolkit_in_bounds(manifest: Manifest, toolkit: Toolkit) -> bool:
    if toolkit.version is None:
        return True
    return _in_bounds(toolkit.version, *manifest.toolkit_bounds(toolkit.backend))


def _in_bounds(version: str, low: str | None, high: str | None) -> bool:
    """Whether `version`'s major.minor lies within [low, high]; a missing bound is open."""
    current = Version(major_minor(version))
    return (not low or current >= Version(low)) and (not high or current <= Version(high))


def _archs(manifest: Manifest, toolkit: Toolkit) -> list[str] | None:
    """The archs a build with `toolkit` compiles, as `kbuild build` chooses them: each CUDA kernel's
    list less what the toolkit cannot build (the toolkit's default list when it has none), each
    ROCm kernel's list. None (no job) when the toolkit can build none of a CUDA kernel's list, or
    lacks any arch a ROCm kernel lists."""
    record = backends.get(toolkit.backend)
    wanted: set[str] = set()
    for spec in manifest.kernels_for(toolkit.backend):
        kept = arch_rules.ci_archs(record, spec, toolkit.version or "")
        if kept is None:
            return None
        wanted |= set(kept)
    if toolkit.archs and any(arch not in toolkit.archs for arch in wanted):
        return None
    return arch_rules.in_order(record, wanted)
