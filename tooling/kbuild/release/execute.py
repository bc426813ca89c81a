"""Publishing built variants: to a Hub kernel repository (the only module that talks to the
Hub, through huggingface_hub's HfApi), or to a local hub folder of git repositories (through
kbuild.core.gitrepo).

Layout of both: branch `v<version>` holds `build/<variant>/...` and
`benchmarks/benchmark*.py`; `main` holds the rendered card as `README.md` (plus the benchmark plot
it shows). Each variant is replaced as a unit in its own commit (files added, that variant's stale
files deleted, other variants untouched), so parallel CI jobs can each publish their own variant.
On the Hub a commit names the branch head it was planned against (`parent_commit`); when another
job committed in between, the Hub answers 409/412 and the commit is planned again from the new
head.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kbuild.build.abi import check_abi
from kbuild.card.content import published_plots, render_card
from kbuild.core import gitrepo, locks, paths
from kbuild.core.errors import KbuildError
from kbuild.core.hubid import check_branch, check_repo_id
from kbuild.core.redact import say, scrub
from kbuild.model import arch_rules, backends
from kbuild.model.inputs import input_digest, rebuild_fix, require_fresh
from kbuild.model.manifest import Manifest, load_manifest
from kbuild.model.matrix import ci_variants
from kbuild.model.variants import NOARCH, BuiltVariant, Variant
from kbuild.release.api_compat import guard_release
from kbuild.release.published_repos import REPO_TYPE, GitRepository, HubRepository

if TYPE_CHECKING:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

CONFLICT_STATUSES = (409, 412)
COMMIT_ATTEMPTS = 6
LFS_PATTERNS = ("*.so", "*.dylib", "*.metallib", "*.png")
AUTHOR = ["-c", "user.name=kbuild", "-c", "user.email=kbuild@localhost"]
# The temporary folder of the version-branch checkout of `publish --to`.
HUB_CHECKOUT_PREFIX = "kbuild-hub-"


@dataclass(frozen=True)
class Unit:
    """Files replaced together: the commit deletes every file under `prefix` not in `files`."""

    prefix: str  # "build/torch213-cxx11-cpu-x86_64-linux", "benchmarks"; "" = only add (README on main)
    files: dict[str, Path | bytes]  # path in the repository -> local file or content
    message: str


@dataclass(frozen=True)
class Card:
    """The kernel card of a release: README.md as rendered for `variants` on the version branch, and
    what renders it again when the branch holds other variants after the upload."""

    manifest: Manifest
    ci_variants: list[BuiltVariant]
    variants: list[str]  # sorted
    readme: bytes


@dataclass(frozen=True)
class Release:
    repo_id: str
    branch: str
    branch_units: list[Unit] = field(default_factory=list)
    main_units: list[Unit] = field(default_factory=list)
    abi_findings: list[str] = field(default_factory=list)  # `kbuild check --abi` of the variants
    card: Card | None = None

    def require_portable(self) -> None:
        if self.abi_findings:
            raise KbuildError(
                "the ABI check fails:\n  " + "\n  ".join(self.abi_findings),
                fix="build in the manylinux_2_28 container that `kbuild matrix` names; "
                "to publish into a local hub folder anyway, add --allow-nonportable to `kbuild publish --to`",
            )


def prepare_release(
    kernel_dir: Path,
    *,
    repo_id: str | None = None,
    variants: list[str] | None = None,
    card_only: bool = False,
) -> Release:
    """What to publish: the named (default: all built) variants, the benchmarks and the card.

    `variants` given: only those variants. `card_only`: only the card (main) and benchmarks.
    Each variant is ABI-checked; publishing requires `release.require_portable()` to pass."""
    kernel_dir = Path(kernel_dir)
    manifest = load_manifest(kernel_dir)
    if repo_id:
        check_repo_id(repo_id, source="--repo-id")
    else:
        repo_id = check_repo_id(manifest.repo_id, source="[general.hub] repo-id", file=manifest.path)
    branch = check_branch(manifest.upload_branch, file=manifest.path)
    built = {
        d.name: paths.inside(kernel_dir, f"build/{d.name}", what="built variant")
        for d in sorted((kernel_dir / "build").glob("*/"))
        if (d / "metadata.json").is_file()
    }
    units: list[Unit] = []
    findings: list[str] = []
    if not card_only:
        digest = input_digest(manifest)
        chosen = variants or sorted(built)
        if not chosen:
            raise KbuildError(
                "nothing is built",
                file=str(kernel_dir / "build"),
                fix=f"run `kbuild build {kernel_dir}` first",
            )
        for name in chosen:
            if name not in built:
                raise KbuildError(
                    f"variant {name} is not built",
                    file=str(kernel_dir / "build"),
                    fix=f"build it, or choose one of: {', '.join(built) or 'none'}",
                )
            try:
                require_fresh(manifest, built[name], digest=digest)
                require_all_capabilities(manifest, built[name])
            except KbuildError as err:
                others = [other for other in chosen if other != name]
                if variants is None and others:
                    leave_out = " ".join(f"--variant {other}" for other in others)
                    err.fix = f"{err.fix}; or leave it out: add `{leave_out}` to the publish command"
                raise
            findings += [str(f) for f in check_abi(built[name])]
            units.append(Unit(f"build/{name}", _variant_files(kernel_dir, name), f"Upload {name}"))
    if variants is None:
        benchmarks: dict[str, Path | bytes] = {
            f"benchmarks/{p.name}": paths.inside(kernel_dir, f"benchmarks/{p.name}", what="benchmark")
            for p in sorted((kernel_dir / "benchmarks").glob("benchmark*.py"))
        }
        units.append(Unit("benchmarks", benchmarks, "Upload benchmarks"))

        ci = ci_variants(manifest)
        readme = render_card(manifest, ci_variants=ci, repo_id=repo_id, published=sorted(built)).encode()
        main: dict[str, Path | bytes] = {"README.md": readme}
        for plot in published_plots(kernel_dir):
            main[plot] = kernel_dir / plot
        card = Card(manifest, ci, sorted(built), readme)
        return Release(repo_id, branch, units, [Unit("", main, "Update the kernel card")], findings, card)
    return Release(repo_id, branch, units, [], findings)


def require_all_capabilities(manifest: Manifest, variant_dir: Path) -> None:
    """Refuse a variant built for the local GPU only: its metadata.json records fewer archs than
    build.toml lists for it (kbuild.model.arch_rules)."""
    variant = Variant.parse(variant_dir.name)
    if not backends.get(variant.backend).cuda_capabilities or variant.kind == NOARCH:
        return
    metadata_file = variant_dir / "metadata.json"
    recorded = json.loads(metadata_file.read_text(encoding="utf-8")).get("backend", {}).get("archs", [])
    expected = arch_rules.variant_archs(manifest, variant)
    if recorded != expected:
        raise KbuildError(
            f"{variant_dir.name} was compiled for {', '.join(recorded)} only (a local or CI build), "
            f"not every capability build.toml lists ({', '.join(expected)})",
            file=str(metadata_file),
            fix=rebuild_fix(manifest, variant_dir.name),
        )


def _variant_files(kernel_dir: Path, variant: str) -> dict[str, Path | bytes]:
    """The files of `build/<variant>/` (its sigstore bundle included), each inside the kernel."""
    variant_dir = kernel_dir / "build" / variant
    files: dict[str, Path | bytes] = {}
    for path in sorted(variant_dir.rglob("*")):
        rel = path.relative_to(variant_dir)
        if "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        resolved = paths.inside(kernel_dir, path.relative_to(kernel_dir), what="variant file")
        if resolved.is_file():
            files[f"build/{variant}/{rel.as_posix()}"] = resolved
    return files


def describe(release: Release, target: str, *, allow_nonportable: bool = False) -> list[str]:
    """The plan, one line per operation (what --dry-run prints), then what the ABI check found."""
    lines = [
        f"{target}: repository {release.repo_id}, create if missing",
        f"{target}: branch {release.branch}, create from main if missing",
    ]
    for branch, units in ((release.branch, release.branch_units), ("main", release.main_units)):
        for unit in units:
            lines.append(f"commit to {branch}: {unit.message}")
            lines += [f"  add {path} ({_size(content)} bytes)" for path, content in unit.files.items()]
            if unit.prefix:
                lines.append(f"  delete every other file under {unit.prefix}/")
    label = "warning: not portable, published anyway" if allow_nonportable else "blocked: ABI check"
    return lines + [f"{label}: {finding}" for finding in release.abi_findings]


def _size(content: Path | bytes) -> int:
    return len(content) if isinstance(content, bytes) else content.stat().st_size


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
    uploaded = {unit.prefix.removeprefix("build/") for unit in release.branch_units if unit.prefix.startswith("build/")}
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
