"""The guard of a release: before a plan (kbuild.release.plan) is executed onto an existing version
branch, each of its variants that loads here is compared with the build of that variant on the
branch (kbuild.release.api_compat). A break of the branch's API stops the release; with
--allow-breaking it is published, the breaks named in its commit messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kbuild.core.errors import KbuildError
from kbuild.core.redact import say
from kbuild.model.backends import CPU
from kbuild.model.variants import NOARCH, Variant, detect_variant
from kbuild.release.api_compat import Break, BreakingChange, compare, probe_all
from kbuild.release.plan import Release, variant_folder
from kbuild.release.published_repos import Source, version_of


def guard_release(
    release: Release, source: Source, *, allow_breaking: bool, log: Callable[[str], None] = say
) -> Release:
    """`release`, checked against the existing version branch of `source`: unchanged when nothing
    breaks (or the branch is new, or version 0); with the breaks in the commit messages of the
    units that make them when `allow_breaking`; else a BreakingChange."""
    major = version_of(release.branch)
    if not major or release.branch not in source.branches():
        return release
    found = _breaks(release, source, log)
    lines = [f"{prefix}: {item}" for prefix, items in found.items() for item in items]
    if not lines:
        return release
    if not allow_breaking:
        raise BreakingChange(
            f"breaking changes against {release.branch} of {source.label}:\n  " + "\n  ".join(lines),
            fix=f"raise `version` in build.toml (it publishes to a new branch v{major + 1}); "
            "in an emergency, publish anyway with --allow-breaking",
        )
    note = "\n\nBreaking change published with --allow-breaking:\n" + "\n".join(lines)
    units = [replace(u, message=u.message + note) if found.get(u.prefix) else u for u in release.branch_units]
    return replace(release, branch_units=units)


def _breaks(release: Release, source: Source, log: Callable[[str], None]) -> dict[str, list[Break]]:
    """What each variant of `release` that loads here breaks of its build on the version branch,
    by the unit's prefix."""
    loadable = [(unit, unit.variant) for unit in release.variant_units if unit.variant and loads_here(unit.variant)]
    if not loadable:
        if release.variant_units:
            log(f"api-check: no variant of this release loads here; not compared with {release.branch}")
        return {}
    found: dict[str, list[Break]] = {}
    with source.checkout(release.branch, [variant for _, variant in loadable]) as published:
        for unit, variant in loadable:
            old, new = published / variant_folder(variant) / "metadata.json", unit.metadata
            if not old.is_file() or new is None or old.read_bytes() == new.read_bytes():
                continue  # new on the branch, or the very build published (its metadata holds every file's digest)
            try:
                before, after = probe_all([old.parent, new.parent])
            except KbuildError as err:
                log(f"api-check: {unit.prefix} not compared with {release.branch}: {err.message}")
                continue
            found[unit.prefix] = compare(before, after)
    return found


def loads_here(variant: str) -> bool:
    """Whether `variant` is this environment's (its builds can be loaded and compared here)."""
    try:
        parsed = Variant.parse(variant)
        return (
            parsed.kind == NOARCH
            or detect_variant(parsed.backend if parsed.backend == CPU.name else None).name == variant
        )
    except KbuildError:
        return False
