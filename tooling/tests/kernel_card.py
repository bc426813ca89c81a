"""The card of a kernel folder, rendered as `kbuild card` renders it (the tests name folders)."""

from pathlib import Path
from typing import Any

from kbuild.card import content as card
from kbuild.model.manifest import load_manifest
from kbuild.model.matrix import ci_variants


def render_card(kernel_dir: Path, **options: Any) -> str:
    manifest = load_manifest(kernel_dir)
    return card.render_card(manifest, ci_variants=ci_variants(manifest), **options)
