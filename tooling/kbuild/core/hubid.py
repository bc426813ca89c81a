"""Hub repository ids (`owner/name`), checked by the Hub's own rules wherever they come from
(`--repo-id`, `[general.hub] repo-id`, the main job): an id becomes a folder under a local hub
folder, so one that names `..`, `.` or `.git` would publish outside it."""

from __future__ import annotations

import re

from kbuild.core.errors import KbuildError

MAX_PART = 96
_PART = re.compile(r"[A-Za-z0-9._-]+")
_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
# git's own names (`HEAD`, `FETCH_HEAD`, `ORIG_HEAD`, ...), which git reads as those refs, and
# `main`, which holds the card.
_RESERVED_BRANCH = re.compile(r"(?:[A-Z]+_)*HEAD|main")


def repo_id_problem(repo_id: str) -> str | None:
    """Why `repo_id` is not a valid Hub repository id, or None when it is."""
    parts = repo_id.split("/")
    if len(parts) != 2:
        return "must be exactly OWNER/NAME"
    for label, part in zip(("owner", "name"), parts, strict=True):
        if not part:
            return f"the {label} is empty"
        if not _PART.fullmatch(part):
            return f"the {label} {part!r} may use only letters, digits, `-`, `_` and `.`"
        if len(part) > MAX_PART:
            return f"the {label} is longer than {MAX_PART} characters"
        if part[0] in ".-" or part[-1] in ".-":
            return f"the {label} {part!r} may not start or end with `.` or `-`"
        if "--" in part or ".." in part:
            return f"the {label} {part!r} may not contain `--` or `..`"
    return None


def check_repo_id(repo_id: str, *, source: str, file: object = None) -> str:
    """`repo_id` if valid; else a KbuildError saying which rule it breaks and where it came from."""
    problem = repo_id_problem(repo_id)
    if problem is not None:
        raise KbuildError(
            f"{source} `{repo_id}` is not a Hub repository id: {problem}",
            file=file if file is None else str(file),
            fix="write it as OWNER/NAME with letters, digits, `-`, `_` and `.` (e.g. kernels-community/relu)",
        )
    return repo_id


def branch_problem(branch: str) -> str | None:
    """Why `branch` is not a plain branch name, or None when it is. git's check-ref-format rules,
    narrowed to one path component: a `/` would make `refs/...` names and Hub revisions such as
    `refs/pr/1` ambiguous."""
    if not _BRANCH.fullmatch(branch):
        return "use only letters, digits, `_`, `-` and `.`, starting with a letter, digit or `_`"
    if ".." in branch or branch.endswith((".", ".lock")):
        return "it may not contain `..` nor end with `.` or `.lock`"
    if _RESERVED_BRANCH.fullmatch(branch):
        return "git or the Hub reserves this name"
    return None


def check_branch(branch: str, *, file: object = None) -> str:
    """`branch` if it is a plain git branch name (it is passed to git and the Hub as is)."""
    problem = branch_problem(branch)
    if problem is not None:
        raise KbuildError(
            f"[general.hub] branch {branch!r} is not a plain branch name: {problem}",
            file=file if file is None else str(file),
            fix="leave `branch` out to publish to v<version>, or name one like `v1` or `release`",
        )
    return branch
