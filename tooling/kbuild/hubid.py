"""Hub repository ids (`owner/name`), checked by the Hub's own rules wherever they come from
(`--repo-id`, `[general.hub] repo-id`, the main job): an id becomes a folder under a local hub
folder, so one that names `..`, `.` or `.git` would publish outside it."""

from __future__ import annotations

import re

from kbuild.errors import KbuildError

MAX_PART = 96
_PART = re.compile(r"^[A-Za-z0-9._-]+$")
_BRANCH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]*$")


def repo_id_problem(repo_id: str) -> str | None:
    """Why `repo_id` is not a valid Hub repository id, or None when it is."""
    parts = repo_id.split("/")
    if len(parts) != 2:
        return "must be exactly OWNER/NAME"
    for label, part in zip(("owner", "name"), parts, strict=True):
        if not part:
            return f"the {label} is empty"
        if not _PART.match(part):
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


def check_branch(branch: str, *, file: object = None) -> str:
    """`branch` if it is a plain git branch name (it is passed to git and the Hub as is)."""
    parts = branch.split("/")
    if (
        not _BRANCH.match(branch)
        or ".." in branch
        or any(not part or part.startswith(".") or part.endswith((".", ".lock")) for part in parts)
    ):
        raise KbuildError(
            f"[general.hub] branch `{branch}` is not a plain branch name",
            file=file if file is None else str(file),
            fix="use letters, digits, `_`, `-`, `.` and `/` (e.g. v1), starting with a letter or digit",
        )
    return branch
