"""`<kernel>/upstream.yaml`: the upstream a kernel is synced from, read into typed objects.

The file names the upstream git URL, the pinned commit, the ref to follow, a file map from
upstream paths (or globs) to kernel paths, and kernel paths to leave alone. Every path is
checked here, before a sync touches anything: none may be absolute or climb out with `..`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import NoReturn

import yaml

from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError

FILE_NAME = "upstream.yaml"
PATCH_DIR = "patches"
# Kernel paths a file map may not write: the sync's own inputs and the build output.
RESERVED = (FILE_NAME, PATCH_DIR, "build")
GLOB_CHARS = frozenset("*?[")

_COMMIT = re.compile(r"[0-9a-f]{40}")
# Characters HFS+ ignores in names: on macOS `.g\u200cit` is `.git`.
_HFS_IGNORED = dict.fromkeys(
    map(ord, "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")
)
_KEYS = ("url", "commit", "ref", "files", "keep")
_ENTRY_KEYS = ("from", "to", "suffix")


@dataclass(frozen=True)
class FileMapping:
    """One `files` entry: an upstream path or glob and where it lands in the kernel.

    `dest` ending in `/` is a folder: a plain source keeps its file name there, a glob's
    matches keep their path below the glob's fixed leading folders. `suffix` (folders only)
    replaces each file's suffix, e.g. `.cpp` sources that are HIP code become `.hip`.
    """

    source: str
    dest: str
    suffix: str | None
    label: str  # "files[2]", for messages
    line: int

    @property
    def is_glob(self) -> bool:
        return is_glob(self.source)

    @property
    def to_folder(self) -> bool:
        return self.dest.endswith("/")


@dataclass(frozen=True)
class Upstream:
    """A parsed upstream.yaml. `ref` is what to follow ("HEAD": the remote's default branch)."""

    path: Path
    url: str
    commit: str
    ref: str
    files: tuple[FileMapping, ...]
    keep: tuple[str, ...]

    @property
    def kernel_dir(self) -> Path:
        return self.path.parent

    def patches(self) -> list[Path]:
        """The patch series: `patches/*.patch`, applied in file-name order."""
        return sorted((self.kernel_dir / PATCH_DIR).glob("*.patch"))


def load_upstream(kernel_dir: Path | str, manifest_upstream: str | None = None) -> Upstream:
    """Read and check `<kernel_dir>/upstream.yaml`. `manifest_upstream` is build.toml's
    `[general] upstream`; when given, `url` must name the same repository."""
    path = Path(kernel_dir) / FILE_NAME
    if not path.is_file():
        raise KbuildError(
            "this kernel has no upstream.yaml",
            file=path,
            fix="add one to put the kernel under sync (see docs/upstream-sync.md)",
        )
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text)
    except UnicodeDecodeError:
        raise KbuildError("not UTF-8 text", file=path, fix="save upstream.yaml as UTF-8") from None
    except RecursionError:
        raise KbuildError(
            "nested too deeply to read (lists or mappings inside each other thousands of levels deep)",
            file=path,
            fix="write `files` as a list of mappings, as docs/upstream-sync.md shows",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise KbuildError(
            f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
            file=path,
            where=mark.line + 1 if mark else None,
        ) from None
    upstream = _Reader(path).upstream(root)
    if manifest_upstream is not None and _same_repo(manifest_upstream) != _same_repo(upstream.url):
        raise KbuildError(
            f"url: {upstream.url} is not build.toml's [general] upstream ({manifest_upstream})",
            file=path,
            where=_line_of(root, "url"),
            fix="make the two name the same repository",
        )
    return upstream


def record_commit(path: Path, commit: str) -> None:
    """Write `commit` as the pinned commit, changing nothing else in the file (comments stay)."""
    text = path.read_text(encoding="utf-8")
    document = yaml.compose(text)
    for key, value in document.value if document is not None else []:
        if key.value == "commit":
            start, end = value.start_mark.index, value.end_mark.index
            if text[start] in "'\"":  # keep the quotes, replace what they hold
                start, end = start + 1, end - 1
            path.write_text(text[:start] + commit + text[end:], encoding="utf-8")
            return
    raise KbuildError("no `commit` key", file=path)


def is_glob(pattern: str) -> bool:
    return bool(GLOB_CHARS.intersection(pattern))


def is_dot_git(part: str) -> bool:
    """Whether a checkout may take the path part `part` for `.git`: in any case, with trailing dots
    or spaces or an NTFS stream name (`.git::$INDEX_ALLOCATION`), as the 8.3 short name `GIT~1`
    (Windows), or with characters that HFS+ ignores (macOS)."""
    name = part.translate(_HFS_IGNORED).partition(":")[0].rstrip(". ").lower()
    return name == ".git" or re.fullmatch(r"git~\d+", name) is not None


def _check_relative(path: str) -> str:
    """`path` as a clean relative POSIX path; raise ValueError when it is absolute or climbs out."""
    if path.strip() != path:
        raise ValueError(f"path {path!r} has surrounding spaces")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ValueError(f"path {path!r} contains a control character (NUL, line break, tab, ...)")
    if "\\" in path:
        raise ValueError(f"path {path!r} contains a backslash; write paths with `/`")
    pure = PurePosixPath(path)
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", path):
        raise ValueError(f"path {path!r} is absolute; `from` is relative to the upstream, `to` to the kernel")
    if ".." in pure.parts:
        raise ValueError(f"path {path!r} climbs out with `..`")
    if any(is_dot_git(part) for part in pure.parts):
        raise ValueError(f"path {path!r} names `.git` (or a name that Windows or macOS reads as `.git`)")
    clean = pure.as_posix()
    if clean == ".":
        raise ValueError(f"path {path!r} names the folder itself, not a file")
    return clean + ("/" if path.endswith("/") else "")


def _same_repo(url: str) -> str:
    return url.rstrip("/").removesuffix(".git")


def _line_of(node: yaml.Node | None, key: str) -> int | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key:
                return v.start_mark.line + 1
    return None


class _Reader:
    """Turns the YAML node tree into an Upstream; every failure names key and line."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, node: yaml.Node | None, label: str, message: str, fix: str | None = None) -> NoReturn:
        line = node.start_mark.line + 1 if node is not None else None
        raise KbuildError(f"{label}: {message}", file=self.path, where=line, fix=fix)

    def mapping(self, node: yaml.Node, label: str, keys: tuple[str, ...]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, label, "must be a mapping of keys to values")
        found: dict[str, yaml.Node] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else "?"
            if name not in keys:
                self.fail(key, label, f"unknown key `{name}`", fix=f"allowed keys: {', '.join(keys)}")
            if name in found:
                self.fail(key, label, f"`{name}` is given twice")
            found[name] = value
        return found

    def string(self, node: yaml.Node, label: str) -> str:
        # The raw scalar text: a commit id of digits or a ref like `1.0` stays a string.
        if not isinstance(node, yaml.ScalarNode) or not node.value:
            self.fail(node, label, "must be a non-empty string")
        return node.value

    def sequence(self, node: yaml.Node, label: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            self.fail(node, label, "must be a non-empty list")
        return node.value

    def path_value(self, node: yaml.Node, label: str, *, kernel_side: bool) -> str:
        value = self.string(node, label)
        try:
            clean = _check_relative(value)
        except ValueError as exc:
            self.fail(
                node,
                label,
                str(exc),
                fix="map only files inside the upstream and the kernel folder",
            )
        if kernel_side and PurePosixPath(clean).parts[0] in RESERVED:
            self.fail(
                node,
                label,
                f"{value!r} is reserved for the sync itself",
                fix=f"the file map may not write {', '.join(RESERVED)}",
            )
        return clean

    def upstream(self, root: yaml.Node | None) -> Upstream:
        if root is None:
            self.fail(
                None,
                "upstream.yaml",
                "the file is empty",
                fix="see docs/upstream-sync.md for an example",
            )
        top = self.mapping(root, "upstream.yaml", _KEYS)
        for key in ("url", "commit", "files"):
            if key not in top:
                self.fail(root, "upstream.yaml", f"missing required key `{key}`")
        url = self.string(top["url"], "url")
        problem = gitrepo.url_problem(url)
        if problem:
            self.fail(top["url"], "url", problem, fix="use https://..., ssh://..., git@host:path or file://...")
        commit = self.string(top["commit"], "commit")
        if not _COMMIT.fullmatch(commit):
            self.fail(
                top["commit"],
                "commit",
                f"{commit!r} is not a full 40-character commit id",
                fix="pin the full id (`git rev-parse <ref>` in the upstream repository)",
            )
        ref = self.string(top["ref"], "ref") if "ref" in top else "HEAD"
        if ref.startswith("-") or any(c.isspace() for c in ref):
            self.fail(top["ref"], "ref", f"{ref!r} is not a branch, tag or commit name")
        files = tuple(self.entry(node, f"files[{i}]") for i, node in enumerate(self.sequence(top["files"], "files")))
        keep = (
            tuple(
                self.path_value(node, f"keep[{i}]", kernel_side=True)
                for i, node in enumerate(self.sequence(top["keep"], "keep"))
            )
            if "keep" in top
            else ()
        )
        plain_dests: dict[str, str] = {}
        for entry in files:
            if entry.is_glob or entry.to_folder:
                continue
            if entry.dest in plain_dests:
                raise KbuildError(
                    f"{entry.label}.to: {entry.dest} is also the destination of {plain_dests[entry.dest]}",
                    file=self.path,
                    where=entry.line,
                )
            plain_dests[entry.dest] = entry.label
        return Upstream(self.path, url, commit, ref, files, keep)

    def entry(self, node: yaml.Node, label: str) -> FileMapping:
        keys = self.mapping(node, label, _ENTRY_KEYS)
        for key in ("from", "to"):
            if key not in keys:
                self.fail(
                    node,
                    label,
                    f"missing `{key}`",
                    fix="each entry is {from: <upstream path>, to: <kernel path>}",
                )
        source = self.path_value(keys["from"], f"{label}.from", kernel_side=False)
        if source.endswith("/"):
            self.fail(
                keys["from"],
                f"{label}.from",
                "must name a file or a glob, not a folder",
                fix=f"use `{source}**` for everything below it",
            )
        dest = self.path_value(keys["to"], f"{label}.to", kernel_side=True)
        suffix = self.string(keys["suffix"], f"{label}.suffix") if "suffix" in keys else None
        entry = FileMapping(source, dest, suffix, label, node.start_mark.line + 1)
        if entry.is_glob and not entry.to_folder:
            self.fail(keys["to"], f"{label}.to", f"a glob maps to a folder: end `{dest}` with `/`")
        if suffix is not None and (not entry.to_folder or not re.fullmatch(r"\.[\w.-]+", suffix)):
            self.fail(
                keys["suffix"],
                f"{label}.suffix",
                "`suffix` (like `.hip`) is for entries whose `to` is a folder",
                fix="to rename one file, write the new name in `to`",
            )
        return entry
