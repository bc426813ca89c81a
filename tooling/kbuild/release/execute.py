"""Executing a release (the plan of kbuild.release.plan, passed by kbuild.release.guard): commit it
to a Hub kernel repository (the only module that talks to the Hub, through huggingface_hub's HfApi),
or to a local hub folder of git repositories (through kbuild.core.gitrepo).

Each unit is replaced in its own commit (files added, that unit's stale files deleted, other
variants untouched), so parallel CI jobs can each publish their own variant. On the Hub a commit
names the branch head it was planned against (`parent_commit`); when another job committed in
between, the Hub answers 409/412 and the commit is planned again from the new head.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kbuild.card.content import render_card
from kbuild.core import gitrepo, locks, paths
from kbuild.core.errors import KbuildError
from kbuild.core.hubid import check_repo_id
from kbuild.core.redact import say, scrub
from kbuild.release.guard import guard_release
from kbuild.release.plan import Release, Unit
from kbuild.release.published_repos import REPO_TYPE, GitRepository, HubRepository

if TYPE_CHECKING:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

CONFLICT_STATUSES = (409, 412)
COMMIT_ATTEMPTS = 6
LFS_PATTERNS = ("*.so", "*.dylib", "*.metallib", "*.png")
AUTHOR = ["-c", "user.name=kbuild", "-c", "user.email=kbuild@localhost"]
# The temporary folder of the version-branch checkout of `publish --to`.
HUB_CHECKOUT_PREFIX = "kbuild-hub-"


# -- the Hub ---------------------------------------------------------------------------------


def publish_to_hub(
    release: Release,
    api: HfApi | None = None,
    *,
    create_pr: bool = False,
    allow_breaking: bool = False,
    log: Callable[[str], None] = say,
) -> None:
    """Create the kernel repository and branch if missing, then commit each unit; with
    `create_pr`, open one pull request per branch instead. An existing version branch refuses
    an API break (kbuild.release.api_compat) unless `allow_breaking`."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError

    release.require_portable()
    if api is None:
        if get_token() is None:
            raise KbuildError(
                "no Hugging Face token",
                fix="set HF_TOKEN in the environment or run `hf auth login`",
            )
        api = HfApi()
    try:
        api.create_repo(release.repo_id, repo_type=REPO_TYPE, exist_ok=True)
        published = HubRepository(release.repo_id, f"hub:{release.repo_id}", False, api)
        release = guard_release(release, published, allow_breaking=allow_breaking, log=log)
        api.create_branch(release.repo_id, branch=release.branch, repo_type=REPO_TYPE, exist_ok=True)
        if create_pr:
            _open_pull_requests(api, release, log)
            return
        for unit in release.branch_units:
            commit = _commit_unit(api, release.repo_id, release.branch, unit)
            log(f"{release.branch}: {unit.message}: {commit or 'unchanged'}")
        for unit in _card_units(release, lambda: _hub_variants(api, release.repo_id, release.branch)):
            log(f"main: {unit.message}: {_commit_unit(api, release.repo_id, 'main', unit) or 'unchanged'}")
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        raise KbuildError(
            scrub(f"the Hub refused a request for {release.repo_id} (HTTP {status}): {err.server_message or err}"),
            fix="check the repository id and that the token (HF_TOKEN or `hf auth login`) "
            "may write to the organization",
        ) from None
    except json.JSONDecodeError as err:
        raise KbuildError(
            f"the Hub at {api.endpoint} answered a request for {release.repo_id} with a body that is not JSON "
            f"({err.msg} at character {err.pos})",
            fix="check that HF_ENDPOINT, when set, names a Hugging Face Hub, then publish again",
        ) from None


def _card_units(release: Release, branch_variants: Callable[[], list[str]]) -> list[Unit]:
    """The main units, the card rendered for the variants on the version branch now."""
    card = release.card
    if card is None or not any("README.md" in unit.files for unit in release.main_units):
        return release.main_units
    published = sorted(branch_variants())
    if published == card.variants:
        return release.main_units
    readme = render_card(
        card.manifest, ci_variants=card.ci_variants, repo_id=release.repo_id, published=published
    ).encode()
    return [
        Unit(u.prefix, {**u.files, "README.md": readme}, u.message) if "README.md" in u.files else u
        for u in release.main_units
    ]


def _hub_variants(api: HfApi, repo_id: str, branch: str) -> list[str]:
    from huggingface_hub import RepoFolder
    from huggingface_hub.errors import EntryNotFoundError

    try:
        entries = api.list_repo_tree(repo_id, "build", revision=branch, repo_type=REPO_TYPE)
        return sorted(entry.path.removeprefix("build/") for entry in entries if isinstance(entry, RepoFolder))
    except EntryNotFoundError:
        return []


def _commit_unit(api: HfApi, repo_id: str, branch: str, unit: Unit) -> str | None:
    """One commit replacing `unit` on `branch`, planned against the branch head and planned
    again on a conflict."""
    from huggingface_hub.errors import HfHubHTTPError

    for attempt in range(COMMIT_ATTEMPTS):
        head = _branch_head(api, repo_id, branch)
        operations = _operations(api, repo_id, head, unit)
        if not operations:
            return None
        try:
            info = api.create_commit(
                repo_id,
                operations,
                commit_message=unit.message,
                revision=branch,
                parent_commit=head,
                repo_type=REPO_TYPE,
            )
        except HfHubHTTPError as err:
            conflict = err.response is not None and err.response.status_code in CONFLICT_STATUSES
            if not conflict or attempt == COMMIT_ATTEMPTS - 1:
                raise
            time.sleep(min(8.0, 0.25 * 2**attempt) * (1 + random.random()))
            continue
        return info.oid if info.oid != head else None
    return None


def _operations(api: HfApi, repo_id: str, head: str, unit: Unit) -> list[CommitOperationAdd | CommitOperationDelete]:
    """Add every file of `unit`, delete the files under its prefix at `head` that it lacks."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    stale = sorted(_remote_files(api, repo_id, head, unit.prefix) - unit.files.keys()) if unit.prefix else []
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path, content if isinstance(content, bytes) else str(content))
        for path, content in unit.files.items()
    ]
    return operations + [CommitOperationDelete(path) for path in stale]


def _open_pull_requests(api: HfApi, release: Release, log: Callable[[str], None]) -> None:
    """One Hub pull request with every unit of the version branch, one with the card on main."""
    uploaded = {unit.variant for unit in release.variant_units if unit.variant}
    on_branch = _hub_variants(api, release.repo_id, release.branch)
    main_units = _card_units(release, lambda: sorted(uploaded | set(on_branch)))
    for branch, units in ((release.branch, release.branch_units), ("main", main_units)):
        head = _branch_head(api, release.repo_id, branch)
        operations = [operation for unit in units for operation in _operations(api, release.repo_id, head, unit)]
        info = None
        if operations:
            messages = [unit.message.partition("\n")[::2] for unit in units]
            info = api.create_commit(
                release.repo_id,
                operations,
                commit_message="; ".join(summary for summary, _ in messages),
                commit_description="\n".join(body.strip() for _, body in messages if body.strip()),
                revision=branch,
                parent_commit=head,
                create_pr=True,
                repo_type=REPO_TYPE,
            )
        log(f"{branch}: pull request: {info.pr_url if info and info.pr_url else 'nothing changed'}")


def _branch_head(api: HfApi, repo_id: str, branch: str) -> str:
    refs = api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
    for ref in refs.branches:
        if ref.name == branch:
            return ref.target_commit
    raise KbuildError(f"branch {branch} of {repo_id} disappeared", fix="publish again")


def _remote_files(api: HfApi, repo_id: str, revision: str, prefix: str) -> set[str]:
    from huggingface_hub import RepoFile
    from huggingface_hub.errors import EntryNotFoundError

    try:
        entries = api.list_repo_tree(repo_id, prefix, recursive=True, revision=revision, repo_type=REPO_TYPE)
        return {entry.path for entry in entries if isinstance(entry, RepoFile)}
    except EntryNotFoundError:
        return set()


# -- a local hub folder ----------------------------------------------------------------------


def publish_to_folder(
    release: Release,
    folder: Path,
    *,
    allow_nonportable: bool = False,
    allow_breaking: bool = False,
    log: Callable[[str], None] = say,
) -> Path:
    """Commit the release into `folder/<org>/<name>`, a git repository with branches main and
    the version branch (binaries in git-lfs when it is installed). Returns the repository path.
    `allow_nonportable`: publish variants that fail the ABI check (built with this machine's
    toolchain, to be loaded on it)."""
    if not allow_nonportable:
        release.require_portable()
    check_repo_id(release.repo_id, source="repository id")
    owner, name = release.repo_id.split("/")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise KbuildError(
            f"the hub folder {folder} is a file", fix="name a folder, or a path where one can be created (--to)"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        repo = paths.inside(folder, release.repo_id, what="hub repository")
        lock_file = paths.real_dir(folder, ".locks") / f"{owner}--{name}.lock"
        with locks.hold(lock_file, log, f"waiting for another publish into {repo}"):
            if (repo / ".git").exists():
                published = GitRepository(release.repo_id, str(repo), True, repo)
                release = guard_release(release, published, allow_breaking=allow_breaking, log=log)
            _publish_locked(release, repo, log)
    except OSError as err:
        raise KbuildError(
            f"cannot write the hub folder {folder}: {err.strerror or err} ({err.filename or folder})",
            fix="name a folder this user may write, or a path where one can be created (--to)",
        ) from None
    return repo


def _publish_locked(release: Release, repo: Path, log: Callable[[str], None]) -> None:
    if not (repo / ".git").exists():
        _init_hub_repo(repo)
    if gitrepo.git(["symbolic-ref", "--short", "HEAD"], repo, untrusted=True).strip() != "main":
        raise KbuildError(
            "the hub repository must have main checked out",
            file=str(repo),
            fix=f"git -C {repo} checkout main",
        )
    if not gitrepo.git(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{release.branch}"], repo, check=False, untrusted=True
    ).strip():
        gitrepo.git(["branch", "--end-of-options", release.branch, "main"], repo, untrusted=True)
    _remove_stale_checkouts(repo)
    with tempfile.TemporaryDirectory(prefix=HUB_CHECKOUT_PREFIX) as tmp:
        worktree = Path(tmp) / "checkout"
        gitrepo.git(["worktree", "add", "--quiet", "--", str(worktree), release.branch], repo, untrusted=True)
        try:
            for unit in release.branch_units:
                log(f"{release.branch}: {unit.message}: {_commit_local(worktree, unit) or 'unchanged'}")
        finally:
            gitrepo.git(["worktree", "remove", "--force", "--", str(worktree)], repo, check=False, untrusted=True)
            gitrepo.git(["worktree", "prune"], repo, check=False, untrusted=True)
    for unit in _card_units(release, lambda: _folder_variants(repo, release.branch)):
        log(f"main: {unit.message}: {_commit_local(repo, unit) or 'unchanged'}")


def _remove_stale_checkouts(repo: Path) -> None:
    """Remove the checkouts that an interrupted publish (killed before its cleanup) left registered
    in `repo`: they hold the version branch, so git would refuse to check it out again. They are the
    `kbuild-hub-*/checkout` folders of the temporary folder; no running publish owns one, as the
    caller holds the repository's lock."""
    gitrepo.git(["worktree", "prune"], repo, untrusted=True)
    temporary = Path(tempfile.gettempdir()).resolve()
    listing = gitrepo.git(["worktree", "list", "--porcelain", "-z"], repo, untrusted=True)
    for line in listing.split("\0"):
        path = Path(line.removeprefix("worktree ")) if line.startswith("worktree ") else None
        if path and path.name == "checkout" and path.parent.name.startswith(HUB_CHECKOUT_PREFIX):
            if path.parent.parent.resolve() == temporary:
                gitrepo.git(["worktree", "remove", "--force", "--force", "--", str(path)], repo, untrusted=True)
                paths.remove(path.parent)


def _folder_variants(repo: Path, branch: str) -> list[str]:
    listing = gitrepo.git(["ls-tree", "--name-only", "--end-of-options", branch, "build/"], repo, untrusted=True)
    return sorted(line.removeprefix("build/") for line in listing.splitlines() if line)


def _init_hub_repo(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    gitrepo.git(["init", "--quiet", "--initial-branch", "main"], repo, untrusted=True)
    if gitrepo.lfs_available(repo):
        gitrepo.git(["lfs", "install", "--local", "--skip-repo"], repo, untrusted=True)
        gitrepo.git(["lfs", "track", *LFS_PATTERNS], repo, untrusted=True)
        gitrepo.git(["add", "--", ".gitattributes"], repo, untrusted=True)
    gitrepo.git([*AUTHOR, "commit", "--quiet", "--allow-empty", "-m", "Create kernel repository"], repo, untrusted=True)


def _commit_local(checkout: Path, unit: Unit) -> str | None:
    if unit.prefix:
        prefix = paths.clean_relative(unit.prefix)
        paths.remove(paths.real_dir(checkout, prefix.parent) / prefix.name)
    for path, content in unit.files.items():
        paths.write_file(checkout, path, content if isinstance(content, bytes) else content.read_bytes())
    # `.`, not the unit's prefix: a prefix pathspec fails once its folder is gone
    gitrepo.git(["add", "--all", "--", "."], checkout, untrusted=True)
    if not gitrepo.git(["status", "--porcelain", "--", unit.prefix or "."], checkout, untrusted=True).strip():
        return None
    gitrepo.git([*AUTHOR, "commit", "--quiet", "-m", unit.message], checkout, untrusted=True)
    return gitrepo.git(["rev-parse", "HEAD"], checkout, untrusted=True).strip()
