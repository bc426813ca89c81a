"""The card of a kernel folder, rendered as `kbuild card` renders it (the tests name folders)."""

from pathlib import Path
from typing import Any

from kbuild import card
from kbuild.manifest import load_manifest
from kbuild.matrix import ci_variants


def render_card(kernel_dir: Path, **options: Any) -> str:
    manifest = load_manifest(kernel_dir)
    return card.render_card(manifest, ci_variants=ci_variants(manifest), **options)
