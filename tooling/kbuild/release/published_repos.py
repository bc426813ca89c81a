"""What is published: the version branches of a kernel repository and the builds on them, read
from a local hub folder (`kbuild publish --to`), a checkout of one version branch, or the Hub
(through huggingface_hub), for `kbuild api-check` and `kbuild verify`.

Every source hands out a branch as a folder holding its `build/<variant>/` files as published
(git-lfs files smudged, Hub files downloaded), removed again when the caller is done.
"""

from __future__ import annotations

import json
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbuild.core import gitrepo, paths
from kbuild.core.errors import KbuildError
from kbuild.core.hubid import repo_id_problem
from kbuild.core.redact import scrub

if TYPE_CHECKING:
    from huggingface_hub import HfApi

VERSION_BRANCH = re.compile(r"^v(\d+)$")
REPO_TYPE = "kernel"
BUNDLE = "metadata.json.sigstore"


def version_of(branch: str) -> int | None:
    match = VERSION_BRANCH.match(branch)
    return int(match.group(1)) if match else None


@dataclass
class Source(ABC):
    """One published kernel repository. `local`: a local hub folder, where builds made with this
    machine's toolchain are allowed (`kbuild publish --to --allow-nonportable`)."""

    repo_id: str
    label: str
    local: bool

    @abstractmethod
    def branches(self) -> list[str]:
        """The version branches (`v<N>`), newest first."""

    @abstractmethod
    def checkout(self, branch: str, variants: list[str] | None = None) -> AbstractContextManager[Path]:
        """A folder with the branch's `build/` (only `variants` when given)."""

    @abstractmethod
    def was_signed(self, branch: str, variant: str) -> bool:
        """Whether a signature bundle was ever published for `variant` on `branch`."""


def _newest_first(names: list[str]) -> list[str]:
    return sorted((n for n in names if version_of(n) is not None), key=lambda n: -(version_of(n) or 0))


@dataclass
class GitRepository(Source):
    """A repository of a local hub folder (`<folder>/<org>/<name>`, branches main and v<N>)."""

    path: Path

    def branches(self) -> list[str]:
        listing = gitrepo.git(["for-each-ref", "--format=%(refname:short)", "refs/heads/"], self.path, untrusted=True)
        return _newest_first(listing.split())

    @contextmanager
    def checkout(self, branch: str, variants: list[str] | None = None) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="kbuild-published-") as tmp:
            worktree = Path(tmp) / branch
            gitrepo.git(
                ["worktree", "add", "--quiet", "--detach", "--", str(worktree), branch], self.path, untrusted=True
            )
            try:
                yield worktree
            finally:
                gitrepo.git(
                    ["worktree", "remove", "--force", "--", str(worktree)], self.path, check=False, untrusted=True
                )
                gitrepo.git(["worktree", "prune"], self.path, check=False, untrusted=True)

    def was_signed(self, branch: str, variant: str) -> bool:
        history = gitrepo.git(
            ["log", "--format=%H", branch, "--", f"build/{variant}/{BUNDLE}"], self.path, untrusted=True
        )
        return bool(history.strip())


@dataclass
class Checkout(Source):
    """A folder holding one version branch's files as they are on disk (e.g. the
    `<folder>/<org>/<name>@v<N>` checkout that `kbuild all` leaves, which LOCAL_KERNELS loads)."""

    path: Path
    branch: str

    def branches(self) -> list[str]:
        return [self.branch]

    @contextmanager
    def checkout(self, branch: str, variants: list[str] | None = None) -> Iterator[Path]:
        yield self.path

    def was_signed(self, branch: str, variant: str) -> bool:
        if gitrepo.toplevel(self.path, untrusted=True) != self.path.resolve():
            return False
        return bool(
            gitrepo.git(
                ["log", "--format=%H", "HEAD", "--", f"build/{variant}/{BUNDLE}"], self.path, untrusted=True
            ).strip()
        )


@dataclass
class HubRepository(Source):
    """A kernel repository on the Hub, read through huggingface_hub (`api`: an HfApi; default
    the environment's endpoint and token)."""

    api: HfApi | None = None

    def _client(self) -> HfApi:
        from huggingface_hub import HfApi

        return self.api if self.api is not None else HfApi()

    def branches(self) -> list[str]:
        """No branch when the repository does not exist (a kernel not released yet)."""
        from huggingface_hub.errors import RepositoryNotFoundError

        with _hub_errors(self.repo_id, self._client().endpoint):
            try:
                refs = self._client().list_repo_refs(self.repo_id, repo_type=REPO_TYPE)
            except RepositoryNotFoundError:
                return []
        return _newest_first([ref.name for ref in refs.branches])

    @contextmanager
    def checkout(self, branch: str, variants: list[str] | None = None) -> Iterator[Path]:
        from huggingface_hub import RepoFile
        from huggingface_hub.errors import EntryNotFoundError

        api = self._client()
        with tempfile.TemporaryDirectory(prefix="kbuild-published-") as tmp, _hub_errors(self.repo_id, api.endpoint):
            try:
                tree = api.list_repo_tree(self.repo_id, "build", recursive=True, revision=branch, repo_type=REPO_TYPE)
                files = [entry.path for entry in tree if isinstance(entry, RepoFile)]
            except EntryNotFoundError:
                files = []
            for path in files:
                rel = paths.clean_relative(path, what=f"file of {self.repo_id}")
                if variants is None or (len(rel.parts) > 2 and rel.parts[1] in variants):
                    api.hf_hub_download(self.repo_id, path, revision=branch, repo_type=REPO_TYPE, local_dir=tmp)
            yield Path(tmp)

    def was_signed(self, branch: str, variant: str) -> bool:
        return True  # the release workflow signs every variant it publishes to the Hub


# What to do instead of reading the Hub, in every message that says it could not be read.
PASS_A_FOLDER = "or pass a folder instead of the repository id: a local hub folder such as .hub, or a version checkout"


@contextmanager
def _hub_errors(repo_id: str, endpoint: str) -> Iterator[None]:
    """Turn the Hub's refusals, offline mode and network failures into errors that say what to do."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    try:
        yield
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        raise KbuildError(
            scrub(f"the Hub refused to read {repo_id} (HTTP {status}): {err.server_message or err}"),
            fix="check the repository id, and for a private repository the token (HF_TOKEN or `hf auth login`)",
        ) from None
    except OfflineModeIsEnabled:
        raise KbuildError(
            f"cannot read {repo_id} from the Hub: HF_HUB_OFFLINE is set (huggingface_hub's offline mode)",
            fix=f"unset HF_HUB_OFFLINE to read the Hub, {PASS_A_FOLDER}",
        ) from None
    except (httpx2.TransportError, LocalEntryNotFoundError) as err:
        raise KbuildError(
            scrub(f"cannot reach the Hub at {endpoint} to read {repo_id}: {type(err).__name__}: {err}"),
            fix=f"check the network connection and HF_ENDPOINT (when set), then run it again, {PASS_A_FOLDER}",
        ) from None


def open_source(target: str, repo_id: str | None = None) -> list[Source]:
    """The repositories that `target` names: a local hub folder (every repository in it, or
    `repo_id`'s only, with the version-branch checkouts beside them), one of its repositories,
    a checkout of one version branch (a folder with `build/`), or a Hub repository id."""
    path = Path(target)
    if path.is_dir():
        if (path / "build").is_dir():
            _refuse_source_folder(path)
            return [Checkout(repo_id or path.name, str(path), True, path, _checkout_branch(path))]
        if (path / ".git").exists():
            return [GitRepository(repo_id or "/".join(path.resolve().parts[-2:]), str(path), True, path)]
        sources: list[Source] = []
        for repo in sorted(path.glob("*/*/.git")):
            if "@" in repo.parent.name:  # a checkout, listed beside its repository below
                continue
            found = "/".join(repo.parent.relative_to(path).parts)
            if repo_id is None or found == repo_id:
                sources.append(GitRepository(found, str(repo.parent), True, repo.parent))
                for checkout in sorted(repo.parent.parent.glob(f"{repo.parent.name}@v*")):
                    branch = checkout.name.partition("@")[2]
                    sources.append(Checkout(found, str(checkout), True, checkout, branch))
        if not sources:
            wanted = f" for {repo_id}" if repo_id else ""
            raise KbuildError(
                f"no published kernel repository{wanted} in this folder",
                file=str(path),
                fix="pass a local hub folder written by `kbuild publish --to` (e.g. .hub), one of its "
                "repositories, or a Hub repository id (OWNER/NAME)",
            )
        return sources
    if repo_id_problem(target) is not None or path.exists():
        raise KbuildError(
            f"`{target}` is neither a folder nor a Hub repository id",
            fix="pass a local hub folder (e.g. .hub) or a Hub repository id (OWNER/NAME)",
        )
    return [HubRepository(target, f"hub:{target}", False)]


def _refuse_source_folder(path: Path) -> None:
    """A kernel's source folder (build.toml, inside a larger work tree) holds local builds, not
    what was published: comparing or verifying them would check a build against itself."""
    if (path / "build.toml").is_file() and gitrepo.toplevel(path) != path.resolve():
        raise KbuildError(
            "this is a kernel's source folder: its build/ holds local builds, not a published release",
            file=str(path),
            fix=f"publish it first (`kbuild publish {path} --to .hub`) and pass .hub, or pass the kernel's Hub "
            "repository id (OWNER/NAME)",
        )


def _checkout_branch(path: Path) -> str:
    """The version branch a checkout holds: `<name>@v<N>` names it; else the version its builds record."""
    branch = path.name.partition("@")[2]
    if version_of(branch) is not None:
        return branch
    versions = set()
    for metadata in path.glob("build/*/metadata.json"):
        try:
            versions.add(json.loads(metadata.read_text(encoding="utf-8")).get("version"))
        except (ValueError, AttributeError):
            continue
    return f"v{versions.pop()}" if len(versions) == 1 else "checkout"
