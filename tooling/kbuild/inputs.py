"""What a build reads, and the op-namespace uid named after it.

The uid is a hash of the build's inputs only: build.toml, the sources it lists, the files of
its include folders, torch-ext/, and every C, C++, CUDA, HIP or Metal file of the kernel outside
tests/, benchmarks/ and the build folders (headers a source includes need not be listed). Tests,
benchmarks, docs and the card never change it, committed or not, so editing them rebuilds nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kbuild.manifest import Manifest

SOURCE_SUFFIXES = {
    ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx",
    ".hip", ".inc", ".inl", ".ipp", ".m", ".mm", ".metal",
}  # fmt: skip
NOT_INPUTS = {"tests", "benchmarks", "docs", "build", ".kbuild", "__pycache__", ".git"}


def build_inputs(manifest: Manifest) -> list[Path]:
    """Every file the build of `manifest` may read, relative to the kernel folder, sorted."""
    kernel_dir = manifest.kernel_dir
    listed = [Path("build.toml")]
    folders = [Path("torch-ext")]
    if manifest.torch is not None:
        listed += map(Path, manifest.torch.src)
        folders += map(Path, manifest.torch.include)
    for kernel in manifest.kernels.values():
        listed += map(Path, kernel.src)
        folders += map(Path, kernel.include)
    found = {rel for rel in listed if (kernel_dir / rel).is_file()}
    for folder in folders:
        found.update(_files_under(kernel_dir, kernel_dir / folder))
    found.update(rel for rel in _files_under(kernel_dir, kernel_dir) if rel.suffix in SOURCE_SUFFIXES)
    return sorted(found)


def _files_under(kernel_dir: Path, folder: Path) -> set[Path]:
    files = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(kernel_dir)
        if path.is_file() and not NOT_INPUTS.intersection(rel.parts) and path.suffix != ".pyc":
            files.add(rel)
    return files


def input_uid(manifest: Manifest) -> str:
    """7 hex digits of a SHA-256 over the paths and contents of the build's inputs."""
    digest = hashlib.sha256()
    for rel in build_inputs(manifest):
        data = (manifest.kernel_dir / rel).read_bytes()
        digest.update(f"{rel.as_posix()}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()[:7]
