"""`kbuild sync`: move a kernel's mapped upstream files to a new upstream commit.

A sync fetches the upstream into a cache, copies the mapped files of the new commit into a
staged copy of the kernel, re-applies `patches/*.patch` there, records the new commit,
runs `kbuild check` on the copy and only then writes the changed files into the kernel.
Any failure before that leaves the kernel folder as it was. Files the map did not place at
the previous pinned commit (the map's "owned" files) are never deleted or overwritten.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.model.manifest import load_manifest
from kbuild.sync import filemap, refresh
from kbuild.sync.upstream import FILE_NAME, PATCH_DIR, Upstream, is_dot_git, load_upstream, record_commit

_LOG_LINES = 100  # upstream commits listed in a summary
_NOT_STAGED = ("build", ".kbuild")  # top-level build outputs a sync neither needs nor touches
_SYMLINK_MODE = re.compile(r"^(?:new file mode|new mode|index \S+) 120000\b.*$", re.MULTILINE)


@dataclass
class SyncResult:
    """What one sync did; `summary()` is the pull request body."""

    kernel: str
    url: str
    ref: str
    old: str
    new: str
    log: list[str]
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # kernel path -> upstream path
    patches: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)  # patches carried over to the new upstream files
    findings: list[str] = field(default_factory=list)  # non-error findings of `kbuild check`

    @property
    def changed(self) -> bool:
        """Whether the kernel folder changed: new pinned commit or mapped files."""
        return self.old != self.new or bool(self.added or self.modified or self.deleted)

    @property
    def title(self) -> str:
        return f"{self.kernel}: sync with upstream {self.new[:7]}"

    def summary(self) -> str:
        """Markdown: a title line, the commits, the upstream log and the changed files."""
        lines = [f"# {self.title}", "", f"Upstream: {self.url} (`{self.ref}`)", ""]
        if self.old == self.new:
            lines.append(f"Already at `{self.new}`.")
        else:
            lines.append(f"Pinned commit: `{self.old}` -> `{self.new}`")
        if self.log:
            shown = self.log[:_LOG_LINES]
            lines += ["", f"## Upstream commits ({len(self.log)})", "", "```", *shown]
            if len(self.log) > len(shown):
                lines.append(f"... and {len(self.log) - len(shown)} more")
            lines.append("```")
        lines += ["", "## Files changed", ""]
        changes = [("added", p) for p in self.added] + [("modified", p) for p in self.modified]
        changes += [("deleted", p) for p in self.deleted]
        if not changes:
            lines.append("None: the mapped files are unchanged.")
        for kind, path in sorted(changes, key=lambda change: change[1]):
            origin = f" (upstream `{self.sources[path]}`)" if path in self.sources else ""
            lines.append(f"- {kind} `{path}`{origin}")
        if self.patches:
            lines += ["", "## Patches re-applied", ""]
            lines += [f"- `{PATCH_DIR}/{p}`" + (" (refreshed)" if p in self.refreshed else "") for p in self.patches]
        lines += ["", "## kbuild check", ""] + ([f"- {f}" for f in self.findings] or ["No findings."])
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class UpstreamStatus:
    """Whether a kernel's pinned commit is what its followed ref names now."""

    kernel: str
    path: str
    url: str
    ref: str
    pinned: str
    latest: str

    @property
    def behind(self) -> bool:
        return self.pinned != self.latest

    def __str__(self) -> str:
        if not self.behind:
            return f"{self.kernel}: up to date ({self.ref} at {self.pinned[:12]})"
        return f"{self.kernel}: behind ({self.ref} is {self.latest[:12]}, pinned {self.pinned[:12]})"

    def as_dict(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "path": self.path,
            "url": self.url,
            "ref": self.ref,
            "pinned": self.pinned,
            "latest": self.latest,
            "behind": self.behind,
        }


def status_report(statuses: list[UpstreamStatus]) -> dict[str, list[Any]]:
    """The `--check --json` report: folders of the kernels behind, and every kernel's status."""
    return {
        "behind": [status.path for status in statuses if status.behind],
        "kernels": [status.as_dict() for status in statuses],
    }


def synced_kernels(kernels_root: Path) -> list[Path]:
    """Every kernel folder under `kernels_root` that has an upstream.yaml."""
    return sorted(path.parent for path in Path(kernels_root).glob(f"*/{FILE_NAME}"))


def cache_dir(url: str) -> Path:
    """The bare repository that caches fetches of `url` ($XDG_CACHE_HOME/kbuild/upstreams/...)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kbuild" / "upstreams" / hashlib.sha256(url.encode()).hexdigest()[:16]


def upstream_status(kernel_dirs: list[Path]) -> list[UpstreamStatus]:
    """Each kernel's pinned commit against its remote ref (git ls-remote); changes nothing."""
    statuses = []
    for kernel_dir in kernel_dirs:
        manifest = load_manifest(kernel_dir)
        upstream = load_upstream(kernel_dir, manifest.general.upstream)
        with _naming(upstream):
            latest = (
                upstream.ref if _is_commit(upstream.ref) else gitrepo.ls_remote(upstream.url, upstream.ref, kernel_dir)
            )
        if latest is None:
            raise KbuildError(
                f"ref: {upstream.ref!r} is not a branch or tag of {upstream.url}",
                file=upstream.path,
                fix="set `ref` to an upstream branch, tag or commit (or drop it to follow HEAD)",
            )
        statuses.append(
            UpstreamStatus(
                manifest.name,
                kernel_dir.as_posix(),
                upstream.url,
                upstream.ref,
                upstream.commit,
                latest,
            )
        )
    return statuses


@dataclass(frozen=True)
class _Move:
    """The files a sync moves, from the upstream cache: those the map placed at the pinned commit
    (`owned`) and those it places at the new one (`wanted`), kernel path -> upstream path."""

    cache: Path
    new: str  # the new commit
    old_files: dict[str, tuple[str, str]]  # upstream path -> (mode, blob) at the pinned commit
    new_files: dict[str, tuple[str, str]]  # ... at the new commit
    owned: dict[str, str]
    wanted: dict[str, str]


def sync_kernel(kernel_dir: Path, ref: str | None = None, *, refresh_patches: bool = False) -> SyncResult:
    """Sync `kernel_dir` to `ref` (default: upstream.yaml's `ref`); see the module docstring.
    `refresh_patches`: carry the patches over to the new upstream files with git (kbuild.sync.refresh)
    instead of stopping at the first one that no longer applies."""
    kernel_dir = Path(kernel_dir)
    again = f"kbuild sync {kernel_dir} --refresh-patch" + (f" --ref {ref}" if ref else "")
    manifest = load_manifest(kernel_dir)
    upstream = load_upstream(kernel_dir, manifest.general.upstream)
    root = kernel_dir.resolve()
    ref = ref or upstream.ref
    move = _fetch_and_map(root, upstream, ref)
    patches = upstream.patches()
    log = gitrepo.log_oneline(move.cache, upstream.commit, move.new)
    result = SyncResult(
        manifest.name, upstream.url, ref, upstream.commit, move.new, log, patches=[patch.name for patch in patches]
    )
    refreshed: dict[str, bytes | None] = {}
    if refresh_patches and patches:
        refreshed = _refresh_patches(root, upstream, move, patches, again, result)
    with tempfile.TemporaryDirectory(prefix="kbuild-sync-") as tmp:
        stage = _stage(root, Path(tmp), upstream, move, patches, refreshed)
        result.findings = _check(stage, kernel_dir, upstream)
        patch_files = {f"{PATCH_DIR}/{name}" for name in refreshed}
        _compare(root, stage, sorted(move.owned.keys() | move.wanted.keys() | patch_files), result)
        result.sources = {path: move.wanted[path] for path in result.added + result.modified if path in move.wanted}
        _swap_in(root, stage, result, Path(tmp) / "backup")
    if refresh_patches:
        refresh.discard(root)
    return result


def _fetch_and_map(root: Path, upstream: Upstream, ref: str) -> _Move:
    """Fetch `ref` (and the pinned commit) into the cache and map the files of both commits,
    refusing upstream paths and kernel destinations a sync may not touch."""
    cache = cache_dir(upstream.url)
    with _naming(upstream):
        new = gitrepo.fetch(cache, upstream.url, ref)
        if not gitrepo.has_commit(cache, upstream.commit):
            gitrepo.fetch(cache, upstream.url, upstream.commit)
    old_files = gitrepo.tree_files(cache, upstream.commit)
    new_files = gitrepo.tree_files(cache, new)
    _check_tree(new_files, new, upstream)
    owned = filemap.resolve(upstream, old_files, upstream.commit, strict=False)
    wanted = filemap.resolve(upstream, new_files, new, strict=True)
    _check_tree({**dict.fromkeys(owned), **dict.fromkeys(wanted)}, new, upstream, side="kernel")
    _check_destinations(root, upstream, owned, wanted)
    return _Move(cache, new, old_files, new_files, owned, wanted)


def _refresh_patches(
    root: Path, upstream: Upstream, move: _Move, patches: list[Path], again: str, result: SyncResult
) -> dict[str, bytes | None]:
    """The patches carried over to the new upstream files (None: a patch upstream made unneeded),
    recorded in `result`."""
    pinned_tree = _mapped(move.cache, upstream.commit, move.owned, move.old_files)
    new_tree = _mapped(move.cache, move.new, move.wanted, move.new_files)
    refreshed = refresh.refresh_patches(root, patches, pinned_tree, new_tree, again)
    result.refreshed = sorted(name for name, text in refreshed.items() if text is not None)
    result.patches = [name for name in result.patches if refreshed.get(name, b"") is not None]
    return refreshed


def _stage(
    root: Path, tmp: Path, upstream: Upstream, move: _Move, patches: list[Path], refreshed: dict[str, bytes | None]
) -> Path:
    """A copy of the kernel under `tmp` with the new upstream files, the patches applied and the
    new commit recorded: what the kernel becomes if it passes `kbuild check`."""
    stage = tmp / root.name
    shutil.copytree(root, stage, symlinks=True, ignore=_ignore_outputs(root))
    for dest in move.owned.keys() - move.wanted.keys():
        _staged(stage, dest).unlink(missing_ok=True)
    for dest, source in move.wanted.items():
        mode, oid = filemap.follow_links(
            source, move.new_files, lambda oid: gitrepo.read_blob(move.cache, oid).decode()
        )
        _write(_staged(stage, dest), gitrepo.read_blob(move.cache, oid), mode, upstream)
    for name, text in refreshed.items():
        if text is None:
            (stage / PATCH_DIR / name).unlink()
        else:
            (stage / PATCH_DIR / name).write_bytes(text)
    for patch in patches:
        if (stage / PATCH_DIR / patch.name).is_file():
            _apply(stage / PATCH_DIR / patch.name if patch.name in refreshed else patch, stage, move.wanted)
    if move.new != upstream.commit:
        record_commit(stage / FILE_NAME, move.new)
    return stage


def _mapped(cache: Path, commit: str, mapping: dict[str, str], files: dict[str, tuple[str, str]]) -> refresh.Tree:
    """The content and mode of each file `mapping` places from the upstream `commit`."""
    contents = {}
    for dest, source in mapping.items():
        mode, oid = filemap.follow_links(source, files, lambda oid: gitrepo.read_blob(cache, oid).decode())
        contents[dest] = (gitrepo.read_blob(cache, oid), mode)
    return refresh.Tree(commit, contents)


@contextmanager
def _naming(upstream: Upstream) -> Iterator[None]:
    """Name upstream.yaml in the errors of git calls about its upstream."""
    try:
        yield
    except KbuildError as exc:
        exc.file = exc.file or upstream.path
        raise


def _is_commit(ref: str) -> bool:
    return len(ref) == 40 and all(c in "0123456789abcdef" for c in ref)


def _check_tree(files: Iterable[str], commit: str, upstream: Upstream, *, side: str = "upstream") -> None:
    """Refuse paths with a `..`, `.` or `.git` part (or one that Windows or macOS reads as `.git`,
    see `is_dot_git`): written into the kernel they would leave it or plant a git repository whose
    config runs commands."""
    for path in files:
        bad = next((part for part in path.split("/") if part in ("", ".", "..") or is_dot_git(part)), None)
        if bad is not None:
            raise KbuildError(
                f"{side} path {path!r} (upstream commit {commit[:12]}) has a part named {bad!r}; "
                "sync refuses `..`, `.` and `.git` path parts (also `.git ` or `GIT~1`: Windows reads them as `.git`)",
                file=upstream.path,
                fix="sync from a commit whose tree has no such entries, or narrow the file map",
            )


def _check_destinations(root: Path, upstream: Upstream, owned: dict[str, str], wanted: dict[str, str]) -> None:
    """Refuse, before anything is written, destinations that leave the kernel folder through a
    symlink and files the map would overwrite without owning them."""
    for dest in sorted(owned.keys() | wanted.keys()):
        if not (root / dest).resolve().is_relative_to(root):
            raise KbuildError(
                f"{dest} leads out of the kernel folder through a symlink",
                file=upstream.path,
                fix="replace the symlink with a real folder or file, or change the file map",
            )
    for dest in sorted(wanted.keys() - owned.keys()):
        if (root / dest).exists() or (root / dest).is_symlink():
            raise KbuildError(
                f"the map now places upstream {wanted[dest]} at {dest}, but {dest} already exists "
                f"and the map did not place it at the pinned commit {upstream.commit[:12]}",
                file=upstream.path,
                fix=f"delete {dest} if the upstream copy should replace it, or add it to `keep`",
            )


def _staged(stage: Path, dest: str) -> Path:
    """`stage / dest`, unless a symlink copied from the kernel (an absolute one) leads out of
    the staged copy: writing there would change the real kernel before the sync succeeds."""
    path = stage / dest
    if not path.parent.resolve().is_relative_to(stage.resolve()):
        raise KbuildError(
            f"{dest} goes through an absolute symlink in the kernel folder; sync cannot stage it",
            fix="make the symlink relative, or replace it with a real folder",
        )
    return path


def _write(target: Path, content: bytes, mode: str, upstream: Upstream) -> None:
    if target.is_symlink() or target.is_dir():
        raise KbuildError(
            f"{target.name} is a symlink or folder in the kernel; the map places a file there",
            file=upstream.path,
            fix="remove it from the kernel or from the file map",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    target.chmod(0o755 if mode == "100755" else 0o644)


def _apply(patch: Path, stage: Path, wanted: dict[str, str]) -> None:
    """Apply one patch of the series to the staged kernel. A patch may change only files the
    map places: those are fresh upstream copies on every sync."""
    for path in gitrepo.patch_paths(patch, stage):
        if path not in wanted:
            raise KbuildError(
                f"the patch changes {path}, which the file map does not place",
                file=patch,
                fix="patches apply to fresh upstream copies only: edit other files directly; "
                "patch paths are relative to the kernel folder (`git diff --relative`)",
            )
    link = _SYMLINK_MODE.search(patch.read_text(encoding="utf-8", errors="replace"))
    if link is not None:
        raise KbuildError(
            f"the patch makes a symlink ({link.group(0).strip()}); patches may not create symlinks",
            file=patch,
            fix="change file contents only",
        )
    try:
        gitrepo.apply_patch(patch, stage)
    except KbuildError as exc:
        exc.fix = exc.fix or (
            "refresh the patch for the new upstream files: `kbuild sync KERNEL_DIR --refresh-patch` carries it "
            "over with git's three-way merge (docs/upstream-sync.md); or delete it if upstream made the change"
        )
        raise
    for dest in wanted:
        if (stage / dest).is_symlink():
            raise KbuildError(
                f"after the patch, {dest} is a symlink; patches may not create symlinks",
                file=patch,
                fix="change file contents only",
            )


def _check(stage: Path, kernel_dir: Path, upstream: Upstream) -> list[str]:
    """`kbuild check` on the staged kernel: errors stop the sync, the rest is returned."""
    from kbuild.check.kernel_checks import check_kernel
    from kbuild.core.findings import format_findings

    findings = check_kernel(stage)
    errors = [finding for finding in findings if finding.severity == "error"]
    warnings = [finding for finding in findings if finding.severity != "error"]
    # Name the kernel folder, not the staged copy.
    errors_text, warnings_text = (
        [line.replace(str(stage), str(kernel_dir)) for line in format_findings(group)] for group in (errors, warnings)
    )
    if errors:
        raise KbuildError(
            "`kbuild check` fails on the synced files; nothing was changed:\n  " + "\n  ".join(errors_text),
            file=upstream.path,
            fix="fix the kernel or add a patch under patches/, then sync again",
        )
    return warnings_text


def _ignore_outputs(root: Path) -> Callable[[str, list[str]], list[str]]:
    def ignore(directory: str, names: list[str]) -> list[str]:
        skip = [n for n in names if n == "__pycache__"]
        if Path(directory) == root:
            skip += [n for n in names if n in _NOT_STAGED]
        return skip

    return ignore


def _compare(root: Path, stage: Path, paths: list[str], result: SyncResult) -> None:
    for rel in paths:
        before, after = root / rel, stage / rel
        if after.is_file() and not before.is_file():
            result.added.append(rel)
        elif before.is_file() and not after.is_file():
            result.deleted.append(rel)
        elif after.is_file() and (
            before.read_bytes() != after.read_bytes() or os.access(before, os.X_OK) != os.access(after, os.X_OK)
        ):
            result.modified.append(rel)


def _swap_in(root: Path, stage: Path, result: SyncResult, backup: Path) -> None:
    """Write the staged changes into the kernel; on an OS error put everything back as it was."""
    changed = [*result.added, *result.modified] + ([FILE_NAME] if result.old != result.new else [])
    existing = [rel for rel in dict.fromkeys([*changed, *result.deleted]) if (root / rel).is_file()]
    for rel in existing:
        (backup / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, backup / rel)
    new_folders: list[Path] = []
    try:
        for rel in changed:
            target = root / rel
            new_folders += [p for p in target.relative_to(root).parents if not (root / p).exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.kbuild-sync")
            try:
                shutil.copy2(stage / rel, temporary)
                os.replace(temporary, target)
            finally:
                temporary.unlink(missing_ok=True)
        for rel in result.deleted:
            (root / rel).unlink()
            _remove_empty_parents(root, root / rel)
    except OSError as exc:
        for rel in changed:
            if rel not in existing:
                (root / rel).unlink(missing_ok=True)
        for folder in sorted(set(new_folders), key=lambda p: len(p.parts), reverse=True):
            if (root / folder).is_dir() and not any((root / folder).iterdir()):
                (root / folder).rmdir()
        for rel in existing:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(backup / rel, root / rel)
        raise KbuildError(
            f"could not write the synced files ({exc}); the kernel was put back as it was",
            file=root,
        ) from None


def _remove_empty_parents(root: Path, path: Path) -> None:
    folder = path.parent
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
