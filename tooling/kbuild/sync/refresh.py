"""`kbuild sync --refresh-patch`: carry the patch series over to new upstream files with git.

In a scratch git repository, `<kernel>/.kbuild/refresh-patches/`, the branch `pinned` holds the
mapped files of the pinned upstream commit and then one commit per patch, named after it; the
branch `new` starts from the mapped files of the new upstream commit. Each patch goes onto `new`
as it is when it still applies, else as a cherry-pick of its `pinned` commit: git's three-way
merge. A patch upstream already made leaves nothing to carry and is deleted. Where the merge
cannot decide, the repository is left mid cherry-pick with git's conflict markers in the files:
resolve them there and run the command again, which commits the resolution and goes on.
The repository is deleted once the sync has written the refreshed patches into the kernel.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbuild.core import gitrepo, paths
from kbuild.core.errors import KbuildError

WORK = ".kbuild/refresh-patches"  # relative to the kernel folder
STATE = "kbuild-refresh.json"  # in the scratch repository's .git/
_MARKER = re.compile(r"^(?:<{7}|>{7}|\|{7})(?: |$)|^={7}$", re.MULTILINE)
_PATCH_START = re.compile(r"^(?:diff --git |--- )", re.MULTILINE)
_SETTINGS = {
    "user.name": "kbuild",
    "user.email": "kbuild@localhost",
    "commit.gpgsign": "false",
    "core.autocrlf": "false",
    "core.hooksPath": "no-hooks",  # a folder that does not exist: no hook of the user's runs here
    "merge.conflictStyle": "diff3",  # the markers show the pinned upstream text too
}


class PatchConflict(KbuildError):
    """A patch that git's three-way merge could not carry over; the markers are in the scratch repository."""

    exit_code = 1


@dataclass(frozen=True)
class Tree:
    """The mapped files of one upstream commit: kernel path -> (content, git mode)."""

    commit: str
    files: dict[str, tuple[bytes, str]]


def refresh_patches(
    kernel_dir: Path, patches: list[Path], pinned: Tree, new: Tree, command: str
) -> dict[str, bytes | None]:
    """The patches that must change for `new`: name -> refreshed text, or None where upstream
    made the change. Raises PatchConflict where a merge stops (run `command` again once resolved)."""
    work = kernel_dir / WORK
    state: dict[str, Any] = {
        "pinned": pinned.commit,
        "new": new.commit,
        "patches": {patch.name: hashlib.sha256(patch.read_bytes()).hexdigest() for patch in patches},
    }
    if (work / ".git").is_dir():
        state = _resume(work, state, command)
    else:
        state = _start(paths.real_dir(kernel_dir, WORK), patches, pinned, new, state)
    for patch in patches[len(_carried(work, state)) :]:
        _carry(work, patch, state, command)
    return _export(work, patches, state)


def discard(kernel_dir: Path) -> None:
    """Delete the scratch repository (after a sync has used its patches)."""
    shutil.rmtree(kernel_dir / WORK, ignore_errors=True)


def _git(work: Path, *args: str) -> str:
    return gitrepo.git(list(args), work)


def _start(work: Path, patches: list[Path], pinned: Tree, new: Tree, state: dict[str, Any]) -> dict[str, Any]:
    _git(work, "init", "-q", "-b", "pinned")
    for key, value in _SETTINGS.items():
        _git(work, "config", key, value)
    _write(work, pinned, None)
    _commit(work, f"upstream {pinned.commit}")
    pinned_files = _git(work, "rev-parse", "HEAD").strip()
    state["sources"] = {}
    for patch in patches:
        if not gitrepo.succeeds(["apply", "--index", str(patch.resolve())], work):
            shutil.rmtree(work)
            raise KbuildError(
                f"the patch does not apply to the files of the pinned upstream commit {pinned.commit[:12]}",
                file=patch,
                fix="make the patch series apply at the commit upstream.yaml pins (`kbuild sync` at that "
                "commit must change nothing), then refresh",
            )
        _commit(work, patch.name)
        state["sources"][patch.name] = _git(work, "rev-parse", "HEAD").strip()
    _git(work, "checkout", "-q", "-b", "new", pinned_files)
    _write(work, new, pinned)
    _commit(work, f"upstream {new.commit}")
    state["base"] = _git(work, "rev-parse", "HEAD").strip()
    state["kept"] = []
    _save(work, state)
    return state


def _write(work: Path, tree: Tree, previous: Tree | None) -> None:
    for rel in previous.files if previous else ():
        (work / rel).unlink(missing_ok=True)
    for rel, (content, mode) in tree.files.items():
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(0o755 if mode == "100755" else 0o644)
    _git(work, "add", "-A")


def _commit(work: Path, message: str) -> None:
    _git(work, "commit", "-q", "--allow-empty", "--no-verify", "-m", message)


def _save(work: Path, state: dict[str, Any]) -> None:
    (work / ".git" / STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def _carried(work: Path, state: dict[str, Any]) -> list[str]:
    """The commits on `new` above the new upstream files, oldest first: one per patch carried."""
    return _git(work, "rev-list", "--reverse", f"{state['base']}..HEAD").split()


def _carry(work: Path, patch: Path, state: dict[str, Any], command: str) -> None:
    if gitrepo.succeeds(["apply", "--index", str(patch.resolve())], work):
        _commit(work, patch.name)
        state["kept"].append(patch.name)
        _save(work, state)
        return
    if gitrepo.succeeds(["cherry-pick", "--keep-redundant-commits", state["sources"][patch.name]], work):
        return
    if not _conflicted(work):
        raise KbuildError(
            f"git could not merge the patch in {work}", file=patch, fix=f"delete {work} and refresh again"
        )
    raise _conflict(work, patch.name, state, command)


def _conflicted(work: Path) -> list[str]:
    return _git(work, "diff", "--name-only", "--diff-filter=U").splitlines()


def _conflict(work: Path, name: str, state: dict[str, Any], command: str) -> PatchConflict:
    files = _conflicted(work) or _with_markers(work)
    return PatchConflict(
        f"patches/{name} conflicts with upstream {state['new'][:12]} in {', '.join(files)}; "
        f"git left conflict markers in {', '.join(str(work / rel) for rel in files)}",
        fix=f"edit those files to what the patch should make of the new upstream code (no markers left), "
        f"then run `{command}` again; to start over, delete {work}",
    )


def _with_markers(work: Path) -> list[str]:
    changed = _git(work, "diff", "--name-only", "HEAD").splitlines()
    return [
        rel for rel in changed if (work / rel).is_file() and _MARKER.search((work / rel).read_text(errors="replace"))
    ]


def _resume(work: Path, wanted: dict[str, Any], command: str) -> dict[str, Any]:
    """The saved state of an earlier refresh of the same patches to the same commit, its merge
    conflict (if any) committed as the user resolved it."""
    try:
        state: dict[str, Any] = json.loads((work / ".git" / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    if any(state.get(key) != value for key, value in wanted.items()):
        raise KbuildError(
            f"{work} holds an unfinished refresh of other patches or for another upstream commit",
            fix=f"delete {work} and run the command again",
        )
    if (work / ".git" / "CHERRY_PICK_HEAD").is_file():
        name = list(state["patches"])[len(_carried(work, state))]
        if _with_markers(work):
            raise _conflict(work, name, state, command)
        _git(work, "add", "-A")
        _commit(work, name)
    return state


def _export(work: Path, patches: list[Path], state: dict[str, Any]) -> dict[str, bytes | None]:
    refreshed: dict[str, bytes | None] = {}
    for patch, commit in zip(patches, _carried(work, state), strict=True):
        if patch.name in state["kept"]:
            continue
        diff = gitrepo.git(["diff", "--no-color", "--no-ext-diff", "--full-index", f"{commit}^", commit], work)
        if not diff:
            refreshed[patch.name] = None
            continue
        text = patch.read_text(encoding="utf-8", errors="replace")
        start = _PATCH_START.search(text)
        refreshed[patch.name] = (text[: start.start()] if start else "").encode() + diff.encode()
    return refreshed
