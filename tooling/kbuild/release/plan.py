"""The plan of a release: what `kbuild publish` would commit, and where, before anything is sent.

A release is plan -> guard -> execute: this module reads the kernel (its built variants, the
benchmarks, the card) into a Release; kbuild.release.guard compares its variants' API with what
the version branch already holds; kbuild.release.execute commits it to the Hub or a local hub
folder. Layout of both: branch `v<version>` holds `build/<variant>/...` and
`benchmarks/benchmark*.py`; `main` holds the rendered card as `README.md` (plus the benchmark
plots it shows). Each variant is a unit of its own, replaced in one commit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kbuild.build.abi import check_abi
from kbuild.card.content import published_plots, render_card
from kbuild.core import paths
from kbuild.core.errors import KbuildError
from kbuild.core.hubid import check_branch, check_repo_id
from kbuild.model import arch_rules, backends
from kbuild.model.inputs import input_digest, rebuild_fix, require_fresh
from kbuild.model.manifest import Manifest, load_manifest
from kbuild.model.matrix import ci_variants
from kbuild.model.variants import NOARCH, BuiltVariant, Variant


def variant_folder(variant: str) -> str:
    """Where a variant's files lie, in the kernel folder and on the version branch."""
    return f"build/{variant}"


@dataclass(frozen=True)
class Unit:
    """Files replaced together: the commit deletes every file under `prefix` not in `files`."""

    prefix: str  # "build/torch213-cxx11-cpu-x86_64-linux", "benchmarks"; "" = only add (README on main)
    files: dict[str, Path | bytes]  # path in the repository -> local file or content
    message: str
    variant: str | None = None  # the built variant whose folder the unit replaces; None: benchmarks, card

    @property
    def metadata(self) -> Path | None:
        """The local metadata.json of the unit's variant (None for a unit of no variant)."""
        found = self.files.get(f"{variant_folder(self.variant)}/metadata.json") if self.variant else None
        return found if isinstance(found, Path) else None


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

    @property
    def variant_units(self) -> list[Unit]:
        return [unit for unit in self.branch_units if unit.variant]

    def require_portable(self) -> None:
        if self.abi_findings:
            raise KbuildError(
                "the ABI check fails:\n  " + "\n  ".join(self.abi_findings),
                fix="build in the manylinux_2_28 container that `kbuild matrix` names; "
                "to publish into a local hub folder anyway, add --allow-nonportable to `kbuild publish --to`",
            )


def plan_release(
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
    repo_id = _repository(manifest, repo_id)
    branch = check_branch(manifest.upload_branch, file=manifest.path)
    built = built_variants(kernel_dir)
    units, findings = ([], []) if card_only else _variant_units(manifest, built, variants)
    if variants is not None:
        return Release(repo_id, branch, units, [], findings)
    card = _card(manifest, repo_id, sorted(built))
    return Release(repo_id, branch, [*units, _benchmarks_unit(kernel_dir)], [_card_unit(card)], findings, card)


def _repository(manifest: Manifest, repo_id: str | None) -> str:
    """The repository published to: `repo_id` (--repo-id), else build.toml's."""
    if repo_id:
        return check_repo_id(repo_id, source="--repo-id")
    return check_repo_id(manifest.repo_id, source="[general.hub] repo-id", file=manifest.path)


def built_variants(kernel_dir: Path) -> dict[str, Path]:
    """The staged variants of the kernel (`build/<variant>/metadata.json`), by name, each inside it."""
    return {
        d.name: paths.inside(kernel_dir, variant_folder(d.name), what="built variant")
        for d in sorted((kernel_dir / "build").glob("*/"))
        if (d / "metadata.json").is_file()
    }


def _variant_units(
    manifest: Manifest, built: dict[str, Path], requested: list[str] | None
) -> tuple[list[Unit], list[str]]:
    """A unit per chosen variant (`requested`, default all built), each checked for release, and
    what the ABI check finds in them."""
    kernel_dir = manifest.kernel_dir
    digest = input_digest(manifest)
    chosen = requested or sorted(built)
    if not chosen:
        raise KbuildError(
            "nothing is built", file=str(kernel_dir / "build"), fix=f"run `kbuild build {kernel_dir}` first"
        )
    units, findings = [], []
    for name in chosen:
        if name not in built:
            raise KbuildError(
                f"variant {name} is not built",
                file=str(kernel_dir / "build"),
                fix=f"build it, or choose one of: {', '.join(built) or 'none'}",
            )
        others = [] if requested is not None else [other for other in chosen if other != name]
        _require_releasable(manifest, built[name], digest, others)
        findings += [str(f) for f in check_abi(built[name])]
        units.append(Unit(variant_folder(name), _variant_files(kernel_dir, name), f"Upload {name}", name))
    return units, findings


def _require_releasable(manifest: Manifest, variant_dir: Path, digest: str, others: list[str]) -> None:
    """Refuse a variant built from other sources than the kernel's, or for fewer archs than
    build.toml lists; the fix names how to leave it out when `others` would be published too."""
    try:
        require_fresh(manifest, variant_dir, digest=digest)
        require_all_capabilities(manifest, variant_dir)
    except KbuildError as err:
        if others:
            leave_out = " ".join(f"--variant {other}" for other in others)
            err.fix = f"{err.fix}; or leave it out: add `{leave_out}` to the publish command"
        raise


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
    variant_dir = kernel_dir / variant_folder(variant)
    files: dict[str, Path | bytes] = {}
    for path in sorted(variant_dir.rglob("*")):
        rel = path.relative_to(variant_dir)
        if "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        resolved = paths.inside(kernel_dir, path.relative_to(kernel_dir), what="variant file")
        if resolved.is_file():
            files[f"{variant_folder(variant)}/{rel.as_posix()}"] = resolved
    return files


def _benchmarks_unit(kernel_dir: Path) -> Unit:
    benchmarks: dict[str, Path | bytes] = {
        f"benchmarks/{p.name}": paths.inside(kernel_dir, f"benchmarks/{p.name}", what="benchmark")
        for p in sorted((kernel_dir / "benchmarks").glob("benchmark*.py"))
    }
    return Unit("benchmarks", benchmarks, "Upload benchmarks")


def _card(manifest: Manifest, repo_id: str, published: list[str]) -> Card:
    """The card as rendered for the variants `published` on the version branch."""
    ci = ci_variants(manifest)
    readme = render_card(manifest, ci_variants=ci, repo_id=repo_id, published=published).encode()
    return Card(manifest, ci, published, readme)


def _card_unit(card: Card) -> Unit:
    """The card on main, with the benchmark plots it shows."""
    kernel_dir = card.manifest.kernel_dir
    main: dict[str, Path | bytes] = {"README.md": card.readme}
    for plot in published_plots(kernel_dir):
        main[plot] = kernel_dir / plot
    return Unit("", main, "Update the kernel card")


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
