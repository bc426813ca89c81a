"""What a build stages: `build/<variant>/` holds exactly the kernel's package, `_ops.py`, the library
and metadata.json (the Kernel Hub's format: the digest of every file, the build's provenance);
and whether a staged folder is still what was staged.
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from kbuild import __version__
from kbuild.build.cmake_project import Project, render_ops
from kbuild.core import gitrepo, paths
from kbuild.core.errors import KbuildError
from kbuild.model import backends
from kbuild.model.manifest import Manifest
from kbuild.model.variants import NOARCH

SKIPPED_PARTS = {"__pycache__"}


def _package_files(manifest: Manifest) -> dict[str, Path]:
    """The kernel's Python package files to stage, by path relative to the package."""
    package_dir = manifest.kernel_dir / "torch-ext" / manifest.python_name
    if not (package_dir / "__init__.py").is_file():
        raise KbuildError(
            f"missing torch-ext/{manifest.python_name}/__init__.py",
            file=manifest.path,
            fix=f"create the Python package of the kernel in torch-ext/{manifest.python_name}/",
        )
    spec = manifest.noarch if manifest.is_noarch else manifest.torch
    suffixes = {"." + ext for ext in (spec.pyext if spec else ["py", "pyi"])}
    files = {}
    for path in sorted(package_dir.rglob("*")):
        rel = path.relative_to(package_dir)
        if path.suffix in suffixes and not SKIPPED_PARTS.intersection(rel.parts):
            resolved = paths.inside(manifest.kernel_dir, path.relative_to(manifest.kernel_dir), what="package file")
            if resolved.is_file():
                files[rel.as_posix()] = resolved
    return files


def stage(project: Project, library: Path | None) -> Path:
    """Make `build/<variant>/` hold exactly the package, `_ops.py`, the library and metadata.json."""
    manifest = project.manifest
    out = paths.real_dir(manifest.kernel_dir, f"build/{project.variant.name}")
    contents: dict[str, bytes] = {rel: path.read_bytes() for rel, path in _package_files(manifest).items()}
    contents["_ops.py"] = render_ops(project.ops_name, compiled=library is not None).encode()
    if library is not None:
        contents[f"{project.ops_name}.abi3.so"] = library.read_bytes()
    for rel, data in contents.items():
        paths.write_file(out, rel, data)
    contents_metadata = json.dumps(metadata(project, contents), indent=2, sort_keys=True) + "\n"
    paths.write_file(out, "metadata.json", contents_metadata.encode())
    keep = set(contents) | {"metadata.json"}
    for path in sorted(out.rglob("*"), reverse=True):
        rel = path.relative_to(out).as_posix()
        if path.is_dir() and not path.is_symlink():
            if path.name in SKIPPED_PARTS or not any(path.iterdir()):
                paths.remove(path)
        elif rel not in keep:
            paths.remove(path)
    return out


def metadata(project: Project, contents: dict[str, bytes]) -> dict[str, Any]:
    """metadata.json of the variant, in the Kernel Hub's kebab-case format."""
    manifest, variant = project.manifest, project.variant
    general = manifest.general
    backend: dict[str, Any] = {"type": variant.backend}
    archs = project.archs if variant.kind != NOARCH else _noarch_archs(manifest, variant.backend)
    if archs:
        backend["archs"] = archs
    data = {
        "name": manifest.name,
        "id": project.ops_name,
        "version": manifest.version,
        "license": general.license,
        "python-depends": manifest.python_depends_for(variant.backend),
        "kernel-depends": general.kernel_depends,
        "backend": backend,
        "digest": {
            "algorithm": "sha256",
            "files": {
                rel: base64.b64encode(hashlib.sha256(data).digest()).decode() for rel, data in sorted(contents.items())
            },
        },
        "provenance": _provenance(project),
    }
    for key in ("upstream", "source"):
        if getattr(general, key):
            data[key] = getattr(general, key)
    return data


def _noarch_archs(manifest: Manifest, backend: str) -> list[str]:
    spec = manifest.noarch
    if spec is None:
        return []
    key = backends.get(backend).archs_key
    return list(getattr(spec, key)) if key else []


def _provenance(project: Project) -> dict[str, Any]:
    provenance: dict[str, Any] = {"kernel-builder": {"version": __version__}, "sources": project.digest}
    state = gitrepo.kernel_state(project.manifest.kernel_dir)
    if state is not None:
        provenance["kernel"] = state
    return provenance


def digest_problems(variant: Path) -> list[str]:
    try:
        from kernels._rust import Digest, DigestValidationError, Metadata
    except ImportError:  # kernels 0.16 (transformers 5.17's) loads builds but has no digest reader
        raise KbuildError(
            f"kbuild verify reads digests with kernels 0.17; this environment has kernels {version('kernels')}",
            fix="install kernels 0.17 to verify (pip install 'kernels==0.17.*'); 0.16 loads the builds, unverified",
        ) from None
    try:
        metadata = Metadata.read_from_file(variant / "metadata.json")
    except ValueError as err:
        return [f"metadata.json: unreadable ({err})"]
    if metadata.digest is None:
        return ["metadata.json: records no digest of the files"]
    try:
        metadata.digest.validate(Digest.hash_variant(metadata.digest.algorithm, variant))
    except DigestValidationError as err:
        return [f"digest: {violation}" for violation in err.violations]
    return []
