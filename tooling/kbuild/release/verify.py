"""`kbuild verify`: check what is published, variant by variant, as a user would get it.

For each version branch chosen (the newest of each repository, or all of them) and each variant
on it: every file matches the digest in its metadata.json (`kernels`' own Digest check: a
changed, missing or extra file is named), the ABI rules (kbuild.build.abi; a local hub folder holds
builds made with this machine's toolchain, so there the manylinux_2_28 symbol versions are only
warned about), and the signature bundle `metadata.json.sigstore`: present (on the Hub always; in
a local hub folder once one was published for the variant), readable as a sigstore bundle, and
signing this very metadata.json (the bundle's message digest is its SHA-256), so that files changed
after signing, with the digests in metadata.json recomputed, are found. What needs sigstore's
services is not checked (the signature against its certificate, the certificate's chain and
identity, the transparency-log entry): verify says so, and `kernels`' `verify_variant` or
`sigstore verify identity` checks them.
Then the variant that the `kernels` library picks for this machine is loaded in a fresh
interpreter: its ops namespace must hold ops and every name of `__all__` must exist.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from kbuild.build.abi import check_abi
from kbuild.build.stage import digest_problems
from kbuild.core.errors import KbuildError
from kbuild.core.redact import say
from kbuild.release.api_compat import probe
from kbuild.release.published_repos import BUNDLE, Source, open_source


def verify(target: str, *, all_versions: bool = False, log: Callable[[str], None] = say) -> int:
    """Print one line per problem (and a summary per branch); return 1 when any, else 0."""
    failed = False
    for source in open_source(target):
        branches = source.branches()
        if not branches:
            log(f"{source.label}: warning: no version branch (v<N>) published")
        for branch in branches if all_versions else branches[:1]:
            problems = verify_branch(source, branch, log)
            for problem in problems:
                log(f"{source.label} {branch}: {problem}")
            if not problems:
                log(f"{source.label} {branch}: ok")
            failed |= bool(problems)
    return 1 if failed else 0


def verify_branch(source: Source, branch: str, log: Callable[[str], None]) -> list[str]:
    with source.checkout(branch) as root:
        variants = sorted(p.parent for p in root.glob("build/*/metadata.json"))
        if not variants:
            return ["no variant published (no build/<variant>/metadata.json)"]
        problems: list[str] = []
        for variant in variants:
            problems += [f"build/{variant.name}: {p}" for p in digest_problems(variant)]
            problems += abi_problems(
                variant, local=source.local, warn=lambda line: log(f"{source.label} {branch}: {line}")
            )
            problems += bundle_problems(source, branch, variant)
        if any((variant / BUNDLE).is_file() for variant in variants):
            log(f"{source.label} {branch}: note: {NOT_CHECKED}")
        problems += load_problems(root)
    return problems


NOT_CHECKED = (
    "each signature bundle's digest is checked against metadata.json; its signature, certificate identity and "
    "transparency-log entry are not (that needs sigstore's services: `sigstore verify identity`)"
)


def abi_problems(variant: Path, *, local: bool, warn: Callable[[str], None]) -> list[str]:
    try:
        findings = check_abi(variant, nonportable_ok=local)
    except KbuildError as err:
        return [f"build/{variant.name}: {err.message}"]
    problems = []
    for finding in findings:
        line = f"build/{variant.name}/{finding.path.relative_to(variant)}: {finding.message}"
        if finding.severity == "warning":
            warn(f"warning: not portable (allowed in a local hub folder): {line}")
        else:
            problems.append(line)
    return problems


def bundle_problems(source: Source, branch: str, variant: Path) -> list[str]:
    from sigstore.models import Bundle, InvalidBundle

    bundle = variant / BUNDLE
    where = f"build/{variant.name}/{BUNDLE}"
    if not bundle.is_file():
        if source.was_signed(branch, variant.name):
            return [f"{where}: missing (the variant is not signed)"]
        return []
    data = bundle.read_bytes()
    problems = [f"{where}: {problem}" for problem in subject_problems(data, variant / "metadata.json")]
    try:
        Bundle.from_json(data)
    except (InvalidBundle, ValueError) as err:
        problems.append(f"{where}: not a valid sigstore bundle ({' '.join(str(err).split())[:200]})")
    return problems


def subject_problems(bundle: bytes, metadata: Path) -> list[str]:
    """Whether the bundle signs `metadata` as it is: its message signature's digest must be the
    SHA-256 of the file (the release workflow signs metadata.json as a blob)."""
    try:
        document = json.loads(bundle)
    except ValueError:
        return []  # not JSON: reported as an invalid bundle
    if not isinstance(document, dict) or "messageSignature" not in document:
        return ["signs no message digest (kbuild checks bundles of a signed metadata.json only)"]
    try:
        signed = document["messageSignature"]["messageDigest"]
        algorithm, digest = signed["algorithm"], base64.b64decode(signed["digest"], validate=True)
    except (KeyError, TypeError, ValueError):
        return ["its message digest is unreadable"]
    if algorithm != "SHA2_256":
        return [f"signs a {algorithm} digest; kbuild checks SHA2_256 only"]
    actual = hashlib.sha256(metadata.read_bytes()).digest() if metadata.is_file() else b""
    if actual != digest:
        return [
            f"signs another metadata.json (sha256 {digest.hex()[:16]}..., this one is {actual.hex()[:16]}...): "
            "the build was changed after it was signed"
        ]
    return []


def load_problems(root: Path) -> list[str]:
    """Load the variant `kernels` picks for this machine; none is fine (nothing to load here)."""
    from kernels.variants import get_variants_local, resolve_variant

    chosen, _ = resolve_variant(get_variants_local(root / "build"))
    if chosen is None:
        return []
    name = chosen.variant_str
    try:
        api = probe(root / "build" / name)
    except KbuildError as err:
        return [f"build/{name}: {err.message}"]
    problems = [
        f"build/{name}: `{n}` is in __all__ but not defined" for n, o in api["python"].items() if o["kind"] == "missing"
    ]
    if list((root / "build" / name).glob("*.so")) and not api["ops"]:
        problems.append(f"build/{name}: registers no op in its namespace {api['namespace']}")
    return problems
