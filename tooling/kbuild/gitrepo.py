"""The one module that runs git."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from kbuild.errors import KbuildError


def git(args: list[str], cwd: Path | str, *, check: bool = True, input: str | None = None) -> str:
    """Run `git <args>` in `cwd` and return its stdout; raise KbuildError with git's message on failure."""
    if shutil.which("git") is None:
        raise KbuildError("git is not installed", fix="install git (apt-get install git)")
    result = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise KbuildError(f"`git {' '.join(args)}` failed in {cwd}: {detail}")
    return result.stdout


def changed_files(ref: str, cwd: Path) -> list[str]:
    """Paths (relative to the repository root) changed between the merge base of `ref` and HEAD,
    plus uncommitted changes to tracked files; renames count as both paths."""
    root = toplevel(cwd) or cwd
    if not git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root, check=False).strip():
        raise KbuildError(
            f"`{ref}` is not a commit in {root}",
            fix="fetch it first (actions/checkout with fetch-depth: 0, or `git fetch origin <branch>`)",
        )
    committed = git(["diff", "--name-only", "--no-renames", f"{ref}...HEAD"], root)
    uncommitted = git(["diff", "--name-only", "--no-renames", "HEAD"], root)
    return sorted({line for line in (committed + uncommitted).splitlines() if line})


def toplevel(path: Path) -> Path | None:
    """The root of the git work tree holding `path`, or None outside git."""
    if shutil.which("git") is None:
        return None
    out = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True, check=False
    )
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def source_uid(directory: Path) -> str:
    """7 hex digits naming the committed tree of `directory`, `_dirty` added when tracked
    files differ from it. Outside git (or for an untracked folder) a hash of the files."""
    directory = directory.resolve()
    root = toplevel(directory)
    if root is not None:
        rel = directory.relative_to(root).as_posix()
        spec = f"HEAD:{rel}" if rel != "." else "HEAD^{tree}"
        tree = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", spec], cwd=root, capture_output=True, text=True, check=False
        ).stdout.strip()
        if tree:
            dirty = git(["status", "--porcelain", "--untracked-files=no", "--", rel], root).strip()
            return tree[:7] + ("_dirty" if dirty else "")
    return _content_hash(directory)


def head_commit(directory: Path) -> tuple[str, bool] | None:
    """(commit id, dirty) of the repository holding `directory`, or None outside git."""
    root = toplevel(directory)
    if root is None:
        return None
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=root, capture_output=True, text=True, check=False
    ).stdout.strip()
    if not commit:
        return None
    rel = directory.resolve().relative_to(root).as_posix()
    dirty = bool(git(["status", "--porcelain", "--untracked-files=no", "--", rel], root).strip())
    return commit, dirty


def _content_hash(directory: Path) -> str:
    digest = hashlib.sha1()
    skip = {"build", ".kbuild", "__pycache__"}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if path.is_file() and not skip.intersection(rel.parts):
            digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:7]
