"""What a build reads, and the op-namespace uid named after it.

The uid is a hash of the build's inputs only: build.toml, the sources it lists, the files of
its include folders, torch-ext/, and every C, C++, CUDA, HIP or Metal file of the kernel outside
tests/, benchmarks/ and the build folders (headers a source includes need not be listed). Tests,
benchmarks, docs and the card never change it, committed or not, so editing them rebuilds nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from kbuild.core import paths
from kbuild.core.errors import KbuildError
from kbuild.model.manifest import Manifest

EXTENSION_NAME = "TORCH_EXTENSION_NAME"
# Comments, string and character literals of C, C++, CUDA and HIP source.
_NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def blank(match: re.Match[str]) -> str:
    """The matched text with everything but its line breaks replaced by spaces."""
    return re.sub(r"[^\n]", " ", match.group())


def code_of(path: Path) -> str:
    """A C-family source with its comments and literals blanked (offsets and lines kept)."""
    return _NOT_CODE.sub(blank, path.read_text(encoding="utf-8", errors="replace"))


SOURCE_SUFFIXES = {
    ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx",
    ".hip", ".inc", ".inl", ".ipp", ".m", ".mm", ".metal",
}  # fmt: skip
NOT_INPUTS = {"tests", "benchmarks", "docs", "build", ".kbuild", "__pycache__", ".git"}


def build_inputs(manifest: Manifest) -> list[Path]:
    """Every file the build of `manifest` may read, relative to the kernel folder, sorted.
    A listed path, or a symlink among the files, that leads out of the kernel is an error."""
    kernel_dir = manifest.kernel_dir
    listed: list[tuple[str, str]] = [("build.toml", "build.toml")]
    folders: list[tuple[str, str]] = [("torch-ext", "torch-ext")]
    if manifest.torch is not None:
        listed += [(src, "[torch] src/include") for src in manifest.torch.src]
        folders += [(folder, "[torch] src/include") for folder in manifest.torch.include]
    for kernel in manifest.kernels.values():
        listed += [(src, f"[kernel.{kernel.name}] src") for src in kernel.src]
        folders += [(folder, f"[kernel.{kernel.name}] include") for folder in kernel.include]
    for rel, what in listed + folders:
        paths.inside(kernel_dir, rel, file=manifest.path, what=what)
    found = {Path(rel) for rel, _ in listed if (kernel_dir / rel).is_file()}
    for folder, what in folders:
        found.update(_files_under(kernel_dir, kernel_dir / folder, "package file" if folder == "torch-ext" else what))
    found.update(_files_under(kernel_dir, kernel_dir, "source", suffixes=SOURCE_SUFFIXES))
    return sorted(found)


def _files_under(kernel_dir: Path, folder: Path, what: str, suffixes: set[str] | None = None) -> set[Path]:
    """Files under `folder` (relative to the kernel), outside NOT_INPUTS and hidden folders,
    with one of `suffixes` when given; a symlink among them that leads out is an error."""
    files = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(kernel_dir)
        hidden = any(part.startswith(".") for part in rel.parts[:-1])
        if hidden or NOT_INPUTS.intersection(rel.parts) or path.suffix == ".pyc":
            continue
        if suffixes is not None and path.suffix not in suffixes:
            continue
        if path.is_symlink():
            paths.inside(kernel_dir, rel, what=what)
        if path.is_file():
            files.add(rel)
    return files


def input_digest(manifest: Manifest) -> str:
    """`sha256:<hex>` over the paths and contents of the build's inputs. metadata.json's
    provenance records it; publish compares it with the inputs now to refuse a stale build."""
    digest = hashlib.sha256()
    for rel in build_inputs(manifest):
        data = (manifest.kernel_dir / rel).read_bytes()
        digest.update(f"{rel.as_posix()}\0{len(data)}\0".encode() + data)
    return "sha256:" + digest.hexdigest()


def uid_of(digest: str) -> str:
    """The op-namespace uid: 7 hex digits of an input digest."""
    return digest.removeprefix("sha256:")[:7]


def require_fresh(manifest: Manifest, variant_dir: Path, *, digest: str | None = None) -> None:
    """Refuse a variant built from other sources than the kernel's current ones (`digest`: their
    input digest, when the command computed it already)."""
    metadata_file = variant_dir / "metadata.json"
    try:
        recorded = json.loads(metadata_file.read_text(encoding="utf-8")).get("provenance", {}).get("sources")
    except (ValueError, AttributeError):
        recorded = None
    current = digest or input_digest(manifest)
    if recorded != current:
        why = "records no source digest" if recorded is None else "was built from other sources than the current ones"
        raise KbuildError(
            f"the build of {variant_dir.name} is stale: its metadata.json {why}",
            file=str(metadata_file),
            fix=rebuild_fix(manifest, variant_dir.name),
        )


def rebuild_fix(manifest: Manifest, variant: str) -> str:
    """How to rebuild `variant` as a release has it: that variant, every capability build.toml lists."""
    from kbuild.model import backends
    from kbuild.model.variants import Variant

    flags = f" --variant {variant}"
    if backends.get(Variant.parse(variant).backend).cuda_capabilities:
        flags += " --all-capabilities"
    return f"rebuild it, from a Python whose torch builds {variant}: `kbuild build {manifest.kernel_dir}{flags}`"
