"""The public API of a kernel build, and whether a new build breaks the published one.

The API of a build is read from the build itself, each loaded in an interpreter of its own
(kbuild/release/api_dump.py): the ops registered in its namespace with their schemas, the Python
package's public names (`__all__`) with their signatures, and the layers (`<package>.layers`)
with the signatures of their `forward`. A new build breaks an old one when it removes any of
them, changes what kind of object a name is, or changes a signature so that a call that worked
before fails: an op schema that torch does not find backward compatible
(`FunctionSchema.is_backward_compatible_with`), a Python argument removed, renamed, moved,
made required, or a new argument without a default. Type annotations are not compared.
Within a major version (`v<N>` branch) no break is allowed; version 0 is exempt, as in `kernels`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbuild.core.childenv import without_credentials
from kbuild.core.errors import KbuildError
from kbuild.core.redact import say, scrub

PROBE = Path(__file__).with_name("api_dump.py")
POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
VARIADIC = ("VAR_POSITIONAL", "VAR_KEYWORD")


class BreakingChange(KbuildError):
    """A build that breaks the published API of its major version: a finding (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class Break:
    what: str  # "op", "function", "class", "layer", ...
    name: str
    where: str  # torch.ops.<namespace>, <package>.__all__, <package>.layers
    change: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.what} `{self.name}` ({self.where}) {self.change}: before `{self.before}`, after `{self.after}`"


def probe(target: Path) -> dict[str, Any]:
    """The API of the build in `target` (a `build/<variant>` folder)."""
    return probe_all([target])[0]


def probe_all(targets: list[Path]) -> list[dict[str, Any]]:
    """The API of each build, each read by an interpreter of its own, all at once."""
    env = {**without_credentials(), "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    processes = [
        subprocess.Popen(
            [sys.executable, str(PROBE), str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for target in targets
    ]
    apis = []
    for target, process in zip(targets, processes, strict=True):
        out, err = process.communicate()
        if process.returncode != 0:
            last = (err.strip().splitlines() or ["?"])[-1]
            raise KbuildError(
                f"the build does not load: {scrub(last)}",
                file=str(target),
                fix="load it with `kernels` to see the whole error; rebuild or republish it",
            )
        apis.append(json.loads(out))
    return apis


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[Break]:
    """What `after` breaks of `before` (two probe results)."""
    package = after["package"]
    breaks = _compare_ops(before["ops"], after["ops"], f"torch.ops.{after['namespace']}")
    breaks += _compare_names(before["python"], after["python"], f"{package}.__all__")
    breaks += _compare_names(before["layers"], after["layers"], f"{package}.layers", layer=True)
    return breaks


def _compare_ops(before: dict[str, str], after: dict[str, str], where: str) -> list[Break]:
    import torch

    breaks = []
    for name, schema in sorted(before.items()):
        new = after.get(name)
        if new is None:
            breaks.append(Break("op", name, where, "removed", schema, "-"))
        elif new != schema and not torch._C.parse_schema(new).is_backward_compatible_with(
            torch._C.parse_schema(schema)
        ):
            breaks.append(Break("op", name, where, "schema changed incompatibly", schema, new))
    return breaks


def _compare_names(before: dict[str, Any], after: dict[str, Any], where: str, *, layer: bool = False) -> list[Break]:
    breaks = []
    for name, old in sorted(before.items()):
        new = after.get(name)
        what = "layer" if layer else old["kind"]
        shown = f"{name}{old['signature'] or ''}"
        if new is None or new["kind"] == "missing":
            breaks.append(Break(what, name, where, "removed", shown, "-"))
        elif new["kind"] != old["kind"]:
            breaks.append(Break(what, name, where, f"is now a {new['kind']}", old["kind"], new["kind"]))
        elif old["parameters"] is not None and new["parameters"] is not None:
            problems = signature_problems(old["parameters"], new["parameters"])
            if problems:
                method = ".forward" if layer else ""
                change = f"{method} signature: {'; '.join(problems)}".lstrip()
                breaks.append(Break(what, name, where, change, shown, f"{name}{new['signature']}"))
    return breaks


def signature_problems(before: list[list[Any]], after: list[list[Any]]) -> list[str]:
    """Why a call that matched the `before` parameters ([name, kind, has_default]) may fail
    against `after`; empty when every such call still works."""
    old_positional = [p for p in before if p[1] in POSITIONAL]
    new_positional = [p for p in after if p[1] in POSITIONAL]
    by_name = {p[0]: p for p in after if p[1] not in VARIADIC}
    variadic = {p[1] for p in after if p[1] in VARIADIC}
    problems, matched = [], set()
    for index, (name, kind, default) in enumerate(old_positional):
        if index >= len(new_positional):
            if "VAR_POSITIONAL" not in variadic:
                problems.append(f"argument `{name}` removed")
            continue
        new_name, new_kind, new_default = new_positional[index]
        matched.add(new_name)
        if kind == "POSITIONAL_OR_KEYWORD" and (new_name != name or new_kind != kind):
            problems.append(f"argument `{name}` is now `{new_name}`")
        elif default and not new_default:
            problems.append(f"argument `{name}` lost its default")
    for name, kind, default in before:
        if kind != "KEYWORD_ONLY":
            continue
        new = by_name.get(name)
        if new is None or new[1] == "POSITIONAL_ONLY":
            if "VAR_KEYWORD" not in variadic:
                problems.append(f"keyword argument `{name}` removed")
            continue
        matched.add(name)
        if default and not new[2]:
            problems.append(f"argument `{name}` lost its default")
    for kind in VARIADIC:
        if any(p[1] == kind for p in before) and kind not in variadic:
            problems.append("no longer takes " + ("*args" if kind == "VAR_POSITIONAL" else "**kwargs"))
    for name, kind, default in after:
        if kind not in VARIADIC and name not in matched and not default:
            problems.append(f"new required argument `{name}`")
    return problems


def fix_line(manifest_path: Path | str, version: int) -> str:
    return (
        f"raise `version` in {manifest_path} to {version + 1} (it publishes to a new branch v{version + 1}), "
        "or keep the old API beside the new one"
    )


# -- the command ------------------------------------------------------------------------------------


def api_check(
    kernel_dir: Path, against: str | None = None, *, build: bool = True, log: Callable[[str], None] = say
) -> int:
    """`kbuild api-check`: build the working tree (unless `build` is False: then its existing
    build must be fresh), compare it with the newest build of its major version in `against`
    (default: the kernel's Hub repository); print one line per break; return 0 or 1 (breaks)."""
    from kbuild.build.builder import build_kernel, resolve_variant
    from kbuild.model.inputs import require_fresh
    from kbuild.model.manifest import load_manifest
    from kbuild.release.published_repos import open_source

    manifest = load_manifest(kernel_dir)
    against = against or manifest.repo_id
    if manifest.version == 0:
        log(f"{manifest.name}: version 0 is exempt from the API check")
        return 0
    sources = [s for s in open_source(against, manifest.repo_id) if manifest.upload_branch in s.branches()]
    if not sources:
        log(f"{manifest.name}: nothing published on {manifest.upload_branch} in {against}: no API to keep")
        return 0
    variant = build_kernel(kernel_dir).name if build else resolve_variant(manifest, None).name
    if not build:
        if not (Path(kernel_dir) / "build" / variant / "metadata.json").is_file():
            raise KbuildError(
                f"{manifest.name} has no build of {variant}", fix=f"run `kbuild build {kernel_dir}` or drop --no-build"
            )
        require_fresh(manifest, Path(kernel_dir) / "build" / variant)
    with sources[0].checkout(manifest.upload_branch, [variant]) as published:
        old = published / "build" / variant
        if not (old / "metadata.json").is_file():
            raise KbuildError(
                f"{manifest.upload_branch} of {sources[0].label} has no build of {variant}, the variant built here",
                fix="run the check in an environment that builds a published variant (`kbuild variants` "
                "names this one)",
            )
        _require_same_kernel(manifest.name, old / "metadata.json", against)
        before, after = probe_all([old, Path(kernel_dir) / "build" / variant])
    breaks = compare(before, after)
    where = f"{manifest.upload_branch} of {sources[0].label}"
    for item in breaks:
        log(f"{manifest.name}: breaking change against {where}: {item}")
    if breaks:
        log(f"  fix: {fix_line(manifest.path, manifest.version)}")
        return 1
    log(f"{manifest.name}: the API of {variant} is compatible with {where}")
    return 0


def _require_same_kernel(name: str, metadata_file: Path, against: str) -> None:
    """Refuse a published build of another kernel: its whole API would read as removed."""
    published = json.loads(metadata_file.read_text(encoding="utf-8")).get("name")
    if published != name:
        raise KbuildError(
            f"{against} is another kernel's repository: it publishes `{published}`, not `{name}`",
            fix=f"pass {name}'s own repository to --against (a hub folder or OWNER/NAME), or leave --against out "
            "to use the repo-id of build.toml",
        )
