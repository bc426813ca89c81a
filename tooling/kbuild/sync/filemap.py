"""Resolve an upstream.yaml file map against the files of one upstream commit.

Pure functions over a commit's file listing (path -> (mode, object id), as
`gitrepo.tree_files` returns it): which kernel path receives which upstream file.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath

from kbuild.core.errors import KbuildError
from kbuild.sync.upstream import Upstream, is_glob

SYMLINK, SUBMODULE = "120000", "160000"
_MAX_LINK_HOPS = 8


def glob_regex(pattern: str) -> re.Pattern[str]:
    """`*` and `?` match within one path part, `**/` any number of folders (`**` at the end:
    everything below), `[...]` one character of a class (`[!...]` negates)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("(?!/)[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def fixed_prefix(pattern: str) -> str:
    """The leading folders of a glob that hold no wildcard, with a trailing `/` (or "")."""
    parts = PurePosixPath(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if is_glob(part):
            break
        fixed.append(part)
    return "".join(f"{part}/" for part in fixed)


def is_kept(upstream: Upstream, dest: str) -> bool:
    """Whether `keep` names `dest` (a `keep` entry ending in `/` covers its whole folder)."""
    for pattern in upstream.keep:
        pattern = pattern + "**" if pattern.endswith("/") else pattern
        if glob_regex(pattern).match(dest):
            return True
    return False


def resolve(upstream: Upstream, files: Mapping[str, tuple[str, str]], commit: str, *, strict: bool) -> dict[str, str]:
    """Kernel path -> upstream path for every file the map places from `files` (one commit).

    Kept paths are left out. With `strict`, an entry that matches nothing is an error (the
    upstream moved something); without it (the previous pinned commit) it places nothing.
    """
    placed: dict[str, tuple[str, str]] = {}
    for entry in upstream.files:
        if entry.is_glob:
            regex, base = glob_regex(entry.source), fixed_prefix(entry.source)
            matches = [(path, path[len(base) :]) for path in sorted(files) if regex.match(path)]
        elif entry.source in files:
            matches = [(entry.source, PurePosixPath(entry.source).name)]
        else:
            matches = []
        if not matches and strict:
            raise KbuildError(
                f"{entry.label}.from: {entry.source!r} matches no upstream file at {commit[:12]}",
                file=upstream.path,
                where=entry.line,
                fix="the upstream moved or removed it: update the map (`dir/**` maps a folder)",
            )
        for source, below in matches:
            dest = entry.dest + below if entry.to_folder else entry.dest
            if entry.suffix:
                dest = PurePosixPath(dest).with_suffix(entry.suffix).as_posix()
            if is_kept(upstream, dest):
                continue
            if dest in placed:
                other, label = placed[dest]
                raise KbuildError(
                    f"{entry.label}: {source} and {other} (from {label}) both map to {dest}",
                    file=upstream.path,
                    where=entry.line,
                    fix="narrow one of the globs, or list one destination under `keep`",
                )
            placed[dest] = (source, entry.label)
    return {dest: source for dest, (source, _) in placed.items()}


def follow_links(path: str, files: Mapping[str, tuple[str, str]], read_link: Callable[[str], str]) -> tuple[str, str]:
    """(mode, object id) of the file `path` names, following symlinks that stay inside the
    upstream tree; a symlink that points out of it, a submodule or a loop is an error."""
    start = path
    for _ in range(_MAX_LINK_HOPS):
        mode, oid = files[path]
        if mode == SUBMODULE:
            raise KbuildError(
                f"upstream {start!r} is a git submodule, which sync cannot copy",
                fix="map the files of the submodule's own repository instead",
            )
        if mode != SYMLINK:
            return mode, oid
        target = read_link(oid)
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            raise KbuildError(
                f"upstream {start!r} is a symlink to {target!r}, outside the upstream repository",
                fix="remove it from the file map",
            )
        if joined not in files:
            raise KbuildError(
                f"upstream {start!r} is a symlink to {target!r}, which is not an upstream file",
                fix="map the files it points to instead",
            )
        path = joined
    raise KbuildError(f"upstream {start!r}: too many levels of symlinks", fix="remove it from the file map")
