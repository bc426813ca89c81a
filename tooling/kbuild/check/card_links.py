"""What a kernel's card points a Hub visitor to that the visitor cannot open (a `kbuild check` rule).

The rendered card is the README of the Hub repository's main branch, which holds only the card
and the benchmark plots it shows (kbuild.release.execute). A relative link or image in it must name one
of those. A code span that names a file of the kernel folder or of its repository (like
`examples/run.py`) sends the visitor to a file the Hub does not have either. The fix is a link to
the file in the source repository (build.toml's `[general] source`), or leaving it out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt

from kbuild.card.content import card_text, published_plots, render_card
from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.core.findings import Finding
from kbuild.model.manifest import load_manifest
from kbuild.model.matrix import ci_variants


def published_on_main(kernel_dir: Path) -> set[str]:
    """The files `kbuild publish` puts on the Hub repository's main branch, beside the card."""
    return {"README.md", *published_plots(kernel_dir)}


def check_card_links(kernel_dir: Path) -> list[Finding]:
    """A finding for each link, image or path in code of the rendered card that names an unpublished
    file; a card that does not render is one finding. No CARD.md: nothing to check."""
    template = kernel_dir / "CARD.md"
    if not template.is_file():
        return []
    try:
        manifest = load_manifest(kernel_dir)
        rendered = render_card(manifest, ci_variants=ci_variants(manifest))
    except KbuildError as exc:
        return [Finding(Path(exc.file or template), exc.line, f"the card does not render: {exc.message}", fix=exc.fix)]
    published = published_on_main(kernel_dir)
    root = gitrepo.toplevel(kernel_dir) or kernel_dir
    source = manifest.general.source
    elsewhere = (
        f"link the file in the source repository ({source}) or leave it out"
        if source
        else "set `source` in build.toml's [general] to the source repository's URL and link the file there, "
        "or leave it out"
    )
    text = card_text(kernel_dir)
    findings = []
    for kind, target in dict.fromkeys(_references(rendered)):
        if kind == "code":
            found = next((base / target for base in (kernel_dir, root) if _file_inside(root, base / target)), None)
            if found is None or target in published:
                continue
            where = found.resolve().relative_to(root.resolve()).as_posix()
            message = f"the card names `{target}`" + (f" ({where} in the repository)" if where != target else "")
            message += ", which is not published on the Hub"
        elif _unpublished(target, published):
            message = f"the card links {target}, which is not published on the Hub"
        else:
            continue
        findings.append(
            Finding(
                template,
                _line_of(text, target),
                f"{message}: the Hub repository's main branch has only {', '.join(sorted(published))}",
                fix=elsewhere,
            )
        )
    return findings


def _references(markdown: str) -> Iterator[tuple[str, str]]:
    """("link", href) for links and images, ("code", text) for code spans that look like a path."""
    for block in MarkdownIt("commonmark").parse(markdown):
        for token in block.children or []:
            if token.type in ("link_open", "image"):
                yield "link", str(token.attrs.get("href" if token.type == "link_open" else "src", ""))
            elif token.type == "code_inline" and "/" in token.content and not any(c.isspace() for c in token.content):
                if not urlsplit(token.content).scheme:
                    yield "code", token.content


def _unpublished(href: str, published: set[str]) -> bool:
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or not parts.path:
        return False  # a URL, or an anchor in the card itself
    return posixpath.normpath(unquote(parts.path)).removeprefix("./") not in published


def _file_inside(root: Path, path: Path) -> bool:
    """Whether `path` is a file of the repository (a card may not probe for files outside it)."""
    return path.resolve().is_relative_to(root.resolve()) and path.is_file()


def _line_of(text: str, target: str) -> int | None:
    index = text.find(target)
    return text.count("\n", 0, index) + 1 if index >= 0 else None
