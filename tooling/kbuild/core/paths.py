"""Containment: every path kbuild reads, writes or deletes stays inside its root.

Three rules, one function each:

- `inside(root, path)`: a path kbuild *reads* (sources, include folders, package files, card
  assets) resolves inside `root`; a symlink on the way that leads out is an error naming it.
- `real_dir(root, rel)` / `write_file(root, rel, data)`: a path kbuild *writes* (build/<variant>,
  .kbuild/<variant>, a hub checkout) is made of real folders: a symlink on the way is removed
  (the link, never what it points to) and replaced by a folder; a file written over a symlink
  replaces the link.
- `remove(path)`: a *delete* removes a symlink itself, never its target.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path, PurePath, PurePosixPath

from kbuild.core.errors import KbuildError


def clean_relative(rel: str | PurePath, *, what: str = "path", file: Path | str | None = None) -> PurePosixPath:
    """`rel` as a relative path with no `..` part, or an error naming it."""
    pure = PurePosixPath(Path(rel).as_posix())
    if pure.is_absolute() or ".." in pure.parts:
        raise KbuildError(
            f"{what} {str(rel)!r} leaves its folder (absolute or `..`)",
            file=file,
            fix="use a path inside the folder",
        )
    return pure


def inside(root: Path, path: str | PurePath, *, file: Path | str | None = None, what: str = "path") -> Path:
    """The resolved `root / path`, which must stay inside `root` (symlinks inside `root` that
    point inside it are fine). Raises KbuildError naming the symlink or path that leaves it."""
    root = Path(root).resolve()
    candidate = root / path
    resolved = _resolve(candidate, path, file=file, what=what)
    if resolved == root or resolved.is_relative_to(root):
        return resolved
    link = _leaving_link(root, candidate)
    if link is not None:
        message = f"{what} {link} is a symlink to {os.readlink(link)}, which leads out of {root}"
        fix = "replace the symlink with the file or folder it points to, inside the kernel"
    else:
        message = f"{what} {str(path)!r} is outside {root}"
        fix = "use a path inside the kernel folder"
    raise KbuildError(message, file=file, fix=fix)


def _resolve(candidate: Path, path: str | PurePath, *, file: Path | str | None, what: str) -> Path:
    """`candidate` resolved; a KbuildError for a path the system cannot look up (a NUL, a name
    or path too long) and for a symlink loop on the way. A missing path is the caller's concern."""
    try:
        resolved = candidate.resolve()
    except ValueError:
        raise KbuildError(
            f"{what} {str(path)!r} contains a NUL character", file=file, fix="remove it from the path"
        ) from None
    except RuntimeError:  # Python before 3.13 reports a loop this way
        raise _loop(candidate, what, file) from None
    try:
        os.stat(resolved)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _loop(candidate, what, file) from None
        if err.errno == errno.ENAMETOOLONG:
            raise KbuildError(
                f"{what} {str(path)[:60]!r}... ({len(str(path))} characters) is longer than the system allows",
                file=file,
                fix="use shorter, less deeply nested names",
            ) from None
    return resolved


def _loop(candidate: Path, what: str, file: Path | str | None) -> KbuildError:
    return KbuildError(
        f"{what} {candidate} is a symlink loop (it leads back to itself)",
        file=file,
        fix="replace the symlink with the file or folder it should point to",
    )


def _leaving_link(root: Path, candidate: Path) -> Path | None:
    """The first symlink on `candidate`'s way down from `root` whose target is outside `root`."""
    if not candidate.is_relative_to(root):
        return None
    current = root
    for part in candidate.relative_to(root).parts:
        current = current / part
        if current.is_symlink() and not current.resolve().is_relative_to(root):
            return current
    return None


def real_dir(root: Path, rel: str | PurePath) -> Path:
    """`root / rel` as a real folder: each symlink on the way below `root` is removed (not its
    target) and missing folders are created."""
    root = Path(root)
    current = root
    for part in clean_relative(rel).parts:
        current = current / part
        if current.is_symlink():
            current.unlink()
        if not current.exists():
            current.mkdir(exist_ok=True)  # a second build may make it at the same moment
        elif not current.is_dir():
            raise KbuildError(f"{current} is a file where kbuild needs a folder", fix="remove it")
    return current


def write_file(root: Path, rel: str | PurePath, data: bytes) -> bool:
    """Write `data` to `root / rel` through real folders only; a symlink at the target is
    replaced, not followed. The file is written beside the target and renamed over it, so a
    reader sees the old contents or the new ones, never part of them. Returns whether the file
    changed."""
    clean = clean_relative(rel)
    target = real_dir(root, clean.parent) / clean.name
    if target.is_dir() and not target.is_symlink():
        raise KbuildError(f"{target} is a folder where kbuild writes a file", fix="remove it")
    existing = target.is_file() and not target.is_symlink()
    if existing and target.read_bytes() == data:
        return False
    mode = target.stat().st_mode & 0o777 if existing else 0o644
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{clean.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def remove(path: Path) -> None:
    """Delete a file, a symlink (the link only) or a folder tree (whose symlinks are unlinked)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
