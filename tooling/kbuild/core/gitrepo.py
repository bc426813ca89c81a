"""The one module that runs git."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kbuild.core.errors import KbuildError
from kbuild.core.redact import scrub

Process = subprocess.CompletedProcess[bytes]
# The transports kbuild fetches over; git refuses the others (ext::, fd::, git://, http://)
# for every command it runs, and URLs are checked against them before (url_problem).
ALLOWED_PROTOCOLS = ("https", "ssh", "file")
# user@host:path, git's short form of an ssh URL; neither part may look like an option.
_SCP_URL = re.compile(r"[\w.+][\w.+-]*@[\w.][\w.-]*:[^\s-]\S*")


def url_problem(url: str) -> str | None:
    """Why git must not be given `url` (None: an https://, ssh://, file:// or user@host:path URL)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ALLOWED_PROTOCOLS and rest and not rest.startswith("-") and not re.search(r"\s", url):
        return None
    if not sep and _SCP_URL.fullmatch(url):
        return None
    return f"{url!r} is not a git URL kbuild fetches from (https://, ssh://, file:// or user@host:path)"


def _require_url(url: str) -> None:
    problem = url_problem(url)
    if problem:
        raise KbuildError(f"git is not run on {scrub(problem)}", fix="use an https://, ssh:// or file:// URL")


def clone_tag(url: str, tag: str, target: Path) -> None:
    """A shallow clone of the tag `tag` of `url` into the new folder `target`."""
    _require_url(url)
    git(["clone", "--quiet", "--depth", "1", "--branch", tag, "--", url, str(target)], target.parent)


# A repository kbuild does not own (a local hub folder, a checkout of one) may carry hooks and
# config that make git run programs. git runs there with these settings, given on the command line
# (which wins over every config file): no hook, no fsmonitor, no signing or signature check, no
# automatic gc or submodule update, and git-lfs's own filter commands.
UNTRUSTED_SETTINGS = {
    "core.hooksPath": os.devnull,
    "core.fsmonitor": "false",
    "commit.gpgSign": "false",
    "log.showSignature": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "submodule.recurse": "false",
    "filter.lfs.clean": "git-lfs clean -- %f",
    "filter.lfs.smudge": "git-lfs smudge -- %f",
    "filter.lfs.process": "git-lfs filter-process",
}
# Config keys that name a program the settings above cannot switch off one by one (the driver
# names are the repository's choice), or a work tree outside the repository: such a repository is
# refused.
_REFUSED_KEY = re.compile(
    r"filter\.(?!lfs\.)[^\n]*\.(clean|smudge|process)|diff\..*\.(textconv|command)|diff\.external"
    r"|merge\..*\.driver|lfs\.(extension|customtransfer)\..*|lfs\.standalonetransferagent|hook\..*"
    r"|core\.worktree",
)


def _run(
    args: list[str],
    cwd: Path | str,
    *,
    input: bytes | None = None,
    outside_repo: bool = False,
    untrusted: bool = False,
) -> Process:
    """Run `git <args>` in `cwd`, never prompting; `outside_repo` keeps git from using a repository
    above `cwd`; `untrusted`: a repository kbuild does not own (UNTRUSTED_SETTINGS, and one whose
    config names a program is refused). Every git command kbuild runs goes through here."""
    if shutil.which("git") is None:
        raise KbuildError("git is not installed", fix="install git (apt-get install git)")
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL=":".join(ALLOWED_PROTOCOLS))
    if outside_repo:
        env["GIT_CEILING_DIRECTORIES"] = str(Path(cwd).resolve().parent)
    settings: list[str] = []
    if untrusted:
        settings = [arg for key, value in UNTRUSTED_SETTINGS.items() for arg in ("-c", f"{key}={value}")]
        _refuse_programs(cwd, env)
    command = ["git", *settings, *args]
    return subprocess.run(command, cwd=cwd, input=input, capture_output=True, env=env, check=False)


def _refuse_programs(cwd: Path | str, env: dict[str, str]) -> None:
    """A KbuildError when the config of the repository at `cwd` (its own files, not the user's
    global or system config) sets a key of _REFUSED_KEY."""
    listing = ["git", "config", "--list", "--show-scope", "--show-origin", "-z"]
    proc = subprocess.run(listing, cwd=cwd, capture_output=True, env=env, check=False)
    records = proc.stdout.decode(errors="replace").split("\0")
    for scope, origin, entry in zip(records[0::3], records[1::3], records[2::3], strict=False):
        key = entry.partition("\n")[0]
        if scope in ("local", "worktree") and _REFUSED_KEY.fullmatch(key.lower()):
            raise KbuildError(
                f"the repository's config sets `{key}`, which makes git run a program or work on another folder",
                file=str(Path(cwd) / origin.removeprefix("file:")),
                fix="kbuild runs git there only without such settings: remove the key (`git config --unset`), "
                "or use a hub folder written by `kbuild publish --to`",
            )


def _stderr(proc: Process) -> str:
    """What git said on failure, with secrets (tokens, URL passwords) masked."""
    detail = (proc.stderr or proc.stdout).decode(errors="replace").strip()
    return scrub(detail) or f"git exited with status {proc.returncode}"


def git(
    args: list[str], cwd: Path | str, *, check: bool = True, input: str | None = None, untrusted: bool = False
) -> str:
    """Run `git <args>` in `cwd` and return its stdout; raise KbuildError naming the command and
    git's message on failure (unless `check` is False). `untrusted`: `cwd` is in a repository
    kbuild does not own (a hub folder): git runs no hook, fsmonitor or other program it names."""
    proc = _run(args, cwd, input=None if input is None else input.encode(), untrusted=untrusted)
    if check and proc.returncode != 0:
        raise KbuildError(f"`{scrub(' '.join(['git', *args]))}` failed in {cwd}: {_stderr(proc)}")
    return proc.stdout.decode(errors="replace")


def changed_files(ref: str, cwd: Path) -> list[str]:
    """Paths (relative to the repository root) changed between the merge base of `ref` and HEAD,
    plus uncommitted changes to tracked files; renames count as both paths."""
    root = toplevel(cwd) or cwd
    verify = ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"]
    if not git(verify, root, check=False).strip():
        raise KbuildError(
            f"`{ref}` is not a commit in {root}",
            fix="fetch it first (actions/checkout with fetch-depth: 0, or `git fetch origin <branch>`)",
        )
    committed = git(["diff", "--name-only", "--no-renames", "--end-of-options", f"{ref}...HEAD", "--"], root)
    uncommitted = git(["diff", "--name-only", "--no-renames", "HEAD", "--"], root)
    return sorted({line for line in (committed + uncommitted).splitlines() if line})


def lfs_available(cwd: Path) -> bool:
    """Whether the git-lfs extension is installed."""
    return bool(git(["lfs", "version"], cwd, check=False).strip())


def toplevel(path: Path, *, untrusted: bool = False) -> Path | None:
    """The root of the git work tree holding `path`, or None outside git."""
    if shutil.which("git") is None:
        return None
    proc = _run(["rev-parse", "--show-toplevel"], path, untrusted=untrusted)
    return Path(proc.stdout.decode().strip()) if proc.returncode == 0 else None


def kernel_state(directory: Path) -> dict[str, Any] | None:
    """Where `directory` stands against the commit checked out, None outside git:
    {"commit": HEAD or None, "state": "clean" | "dirty" | "uncommitted", "dirty": bool}.
    `dirty`: a tracked file changed or an untracked one (not ignored) appeared in it;
    `uncommitted`: HEAD holds no such folder (or there is no commit yet)."""
    directory = directory.resolve()
    root = toplevel(directory)
    if root is None:
        return None
    rel = directory.relative_to(root).as_posix()
    commit = git(["rev-parse", "--verify", "--quiet", "HEAD"], root, check=False).strip() or None
    spec = f"HEAD:{rel}" if rel != "." else "HEAD^{tree}"
    in_commit = commit is not None and bool(git(["rev-parse", "--verify", "--quiet", spec], root, check=False).strip())
    if not in_commit:
        state = "uncommitted"
    elif git(["status", "--porcelain", "--untracked-files=all", "--", rel], root).strip():
        state = "dirty"
    else:
        state = "clean"
    return {"commit": commit, "state": state, "dirty": state != "clean"}


# --- upstream sync (kbuild.sync.kernel_sync): fetch into a cache, read trees and blobs, apply patches ---

_FAILED_HUNK = re.compile(r"^error: patch failed: (?P<file>.+):(?P<line>\d+)$", re.MULTILINE)
_HUNK_HEADER = re.compile(r"^@@ -(?P<line>\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def fetch(cache: Path, url: str, ref: str) -> str:
    """Fetch `ref` (branch, tag, HEAD or commit id) of `url` into the bare repository `cache`;
    return the commit it names."""
    _require_url(url)
    if not (cache / "HEAD").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        git(["init", "--bare", "--quiet"], cache)
    proc = _run(["fetch", "--quiet", "--no-tags", "--", url, ref], cache)
    if proc.returncode != 0:
        raise KbuildError(
            f"cannot fetch {ref!r} from {scrub(url)}: {_stderr(proc)}",
            fix="check `url` and `ref` in upstream.yaml (a branch, a tag or a full commit id) "
            "and your access to the repository",
        )
    return git(["rev-parse", "--verify", "FETCH_HEAD^{commit}"], cache).strip()


def has_commit(repo: Path, commit: str) -> bool:
    """Whether the repository `repo` holds the commit `commit`."""
    return _run(["cat-file", "-e", "--end-of-options", f"{commit}^{{commit}}"], repo).returncode == 0


def ls_remote(url: str, ref: str, cwd: Path) -> str | None:
    """The commit that `ref` (HEAD, a branch or a tag) names on `url`, or None if none."""
    _require_url(url)
    proc = _run(["ls-remote", "--", url], cwd)
    if proc.returncode != 0:
        raise KbuildError(
            f"cannot list the refs of {scrub(url)}: {_stderr(proc)}",
            fix="check `url` in upstream.yaml and your access to the repository",
        )
    refs = {}
    for line in proc.stdout.decode().splitlines():
        commit, _, name = line.partition("\t")
        refs[name] = commit
    for name in (f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", ref):
        if name in refs:
            return refs[name]
    return None


def tree_files(repo: Path, commit: str) -> dict[str, tuple[str, str]]:
    """Every file of `commit`: path -> (mode, object id); 120000: symlink, 160000: submodule."""
    out = git(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit], repo)
    files = {}
    for record in filter(None, out.split("\0")):
        meta, _, path = record.partition("\t")
        mode, _kind, oid = meta.split(" ")
        files[path] = (mode, oid)
    return files


def read_blob(repo: Path, oid: str) -> bytes:
    """The content of the blob `oid`."""
    proc = _run(["cat-file", "blob", "--end-of-options", oid], repo)
    if proc.returncode != 0:
        raise KbuildError(f"cannot read object {oid} in {repo}: {_stderr(proc)}")
    return proc.stdout


def log_oneline(repo: Path, old: str, new: str) -> list[str]:
    """`git log --oneline old..new`: the commits in `new` that `old` lacks, newest first."""
    return git(["log", "--oneline", "--no-decorate", "--end-of-options", f"{old}..{new}", "--"], repo).splitlines()


def patch_paths(patch: Path, cwd: Path) -> list[str]:
    """The paths that `patch` reads or writes (both names of a rename), relative to `cwd`."""
    proc = _run(["apply", "--numstat", "-z", "--", str(patch.resolve())], cwd, outside_repo=True)
    if proc.returncode != 0:
        raise KbuildError(f"cannot read patch: {_stderr(proc)}", file=str(patch))
    fields = proc.stdout.decode().split("\0")
    paths, i = [], 0
    while i < len(fields) and fields[i]:
        added_deleted_path = fields[i].split("\t")
        if added_deleted_path[2]:
            paths.append(added_deleted_path[2])
            i += 1
        else:  # a rename: the two names follow as their own fields
            paths += fields[i + 1 : i + 3]
            i += 3
    return paths


def apply_patch(patch: Path, cwd: Path) -> None:
    """Apply `patch` to the files under `cwd`, all hunks or none; a failure names file and hunk."""
    proc = _run(["apply", "--verbose", "--", str(patch.resolve())], cwd, outside_repo=True)
    if proc.returncode == 0:
        return
    err = proc.stderr.decode(errors="replace")
    failed = _FAILED_HUNK.search(err)
    if failed is None:
        lines = [line[len("error: ") :] for line in err.splitlines() if line.startswith("error: ")]
        detail = "; ".join(lines) or _stderr(proc)
        raise KbuildError(f"patch does not apply: {detail}", file=str(patch))
    file, line = failed["file"], int(failed["line"])
    hunk = _find_hunk(patch, file, line)
    if hunk is None:
        raise KbuildError(f"the hunk at line {line} of {file} no longer applies", file=str(patch))
    number, header = hunk
    raise KbuildError(f"{header} of {file} no longer applies", file=str(patch), where=f"hunk #{number}")


def _find_hunk(patch: Path, path: str, line: int) -> tuple[int, str] | None:
    """Number (from 1, within `path`) and header of the hunk of `patch` at old line `line`."""
    current, number = None, 0
    for text in patch.read_text(errors="replace").splitlines():
        if text.startswith("--- "):
            name = text[4:].split("\t")[0]
            current, number = name.removeprefix("a/"), 0
        elif text.startswith("+++ ") and current == "/dev/null":
            current = text[4:].split("\t")[0].removeprefix("b/")
        elif (match := _HUNK_HEADER.match(text)) and current == path:
            number += 1
            if int(match["line"]) == line:
                return number, text.split(" @@")[0] + " @@"
    return None


def succeeds(args: list[str], cwd: Path) -> bool:
    """Run `git <args>` in `cwd` and say whether it exited 0: for commands whose failure is an
    answer, not an error (a patch that does not apply, a merge that stops on conflicts)."""
    return _run(args, cwd).returncode == 0
