"""The kernel card: a kernel's CARD.md (Jinja) rendered into the Hub README.

Everything the template sees is read from files, never by importing the kernel: the API from
`torch-ext/<python_name>/__init__.py` and `layers.py` (parsed with `ast`), the variants from
`build/` (folder names and each `metadata.json`), the latest benchmark from
`benchmarks/results/`.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from kbuild import paths
from kbuild.errors import KbuildError
from kbuild.manifest import Manifest, load_manifest

DEFAULT_TEMPLATE = Path(__file__).parent / "templates" / "card" / "CARD.md.j2"
# Licenses the Hub knows by id (lower case); anything else is published as `other`.
HUB_LICENSES = {
    "apache-2.0",
    "mit",
    "bsd-2-clause",
    "bsd-3-clause",
    "bsd-3-clause-clear",
    "bsl-1.0",
    "gpl-2.0",
    "gpl-3.0",
    "lgpl-2.1",
    "lgpl-3.0",
    "agpl-3.0",
    "mpl-2.0",
    "cc-by-4.0",
    "cc0-1.0",
    "unlicense",
    "isc",
    "zlib",
}

SECTION = r"(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes):"
ENTRY = re.compile(r"^(\*{0,2}\w+)(?: \(([^)]*)\))?: (.*)$")


@dataclass(frozen=True)
class Function:
    name: str
    signature: str  # "relu(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor"
    doc: str


@dataclass(frozen=True)
class BuiltVariant:
    name: str
    backend: str
    archs: list[str]


@dataclass(frozen=True)
class Benchmark:
    results: str  # the Markdown of the newest benchmarks/results/*.md
    plot: str | None  # link to the PNG next to it
    source: str  # its file name


def render_card(kernel_dir: Path, *, link_base: Path | None = None) -> str:
    """Render `kernel_dir/CARD.md`. Links to benchmark plots are relative to `link_base` when
    given (e.g. the folder of a copy under docs/), else to the kernel folder (the Hub layout)."""
    kernel_dir = Path(kernel_dir)
    manifest = load_manifest(kernel_dir)
    template_path = kernel_dir / "CARD.md"
    if not template_path.is_file():
        raise KbuildError(
            "the kernel has no card template",
            file=str(template_path),
            fix=f"copy {DEFAULT_TEMPLATE} to it and edit it",
        )
    return render_template(template_path.read_text(encoding="utf-8"), template_path, card_context(manifest, link_base))


def render_template(text: str, path: Path, context: dict) -> str:
    """Render in Jinja's immutable sandbox: a card (a contributor's file) sees only `context`,
    may not reach Python internals (`__globals__`, `os`, ...) nor change what it is given."""
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.clear()  # no `lipsum`, `cycler`, `joiner`, `namespace`, `range`, `dict`
    env.filters["hub_license"] = hub_license
    env.filters["docstring"] = docstring_markdown
    try:
        return env.from_string(text).render(context)
    except jinja2.TemplateSyntaxError as err:
        raise KbuildError(
            f"template syntax: {err.message}",
            file=str(path),
            where=err.lineno,
            fix="fix the Jinja syntax",
        ) from None
    except SecurityError as err:
        raise KbuildError(
            f"the card template tried an unsafe operation: {err}",
            file=str(path),
            fix="a card may only show its data: " + ", ".join(sorted(context)),
        ) from None
    except jinja2.UndefinedError as err:
        raise KbuildError(
            f"template uses an unknown variable: {err.message}",
            file=str(path),
            fix="use only: " + ", ".join(sorted(context)),
        ) from None


def card_context(manifest: Manifest, link_base: Path | None = None) -> dict:
    kernel_dir = manifest.kernel_dir
    package = kernel_dir / "torch-ext" / manifest.python_name
    benchmark = latest_benchmark(kernel_dir, link_base)
    return {
        "name": manifest.name,
        "python_name": manifest.python_name,
        "repo_id": manifest.repo_id,
        "version": manifest.version,
        "license": manifest.general.license,
        "upstream": manifest.general.upstream,
        "source": manifest.general.source,
        "backends": manifest.backends,
        "summary": module_doc(package / "__init__.py"),
        "functions": public_functions(package / "__init__.py"),
        "layers": layer_classes(package / "layers.py"),
        "variants": built_variants(kernel_dir / "build"),
        "has_benchmark": benchmark is not None,
        "benchmark": benchmark,
    }


def hub_license(spdx: str) -> str:
    lowered = spdx.lower()
    return lowered if lowered in HUB_LICENSES else "other"


def docstring_markdown(doc: str) -> str:
    """Google-style sections (`Args:` + indented `name: text` entries) as Markdown lists;
    other text as is."""
    out: list[str] = []
    entry_indent = None  # indent of the current section's entries; None outside a section, -1 before the first
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if indent == 0 and re.fullmatch(SECTION, stripped):
            out += ["", f"**{stripped}**", ""]
            entry_indent = -1
            continue
        if entry_indent is not None and stripped and indent == 0:
            entry_indent = None
        if entry_indent is None or not stripped:
            out.append(stripped)
            continue
        if entry_indent == -1:
            entry_indent = indent
        entry = ENTRY.match(stripped)
        if entry and indent == entry_indent:
            kind = f" ({entry[2]})" if entry[2] else ""
            out.append(f"- `{entry[1]}`{kind}: {entry[3]}")
        elif out and out[-1] and not out[-1].startswith("**"):
            out[-1] += " " + stripped
        else:
            out.append(stripped)
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", "\n".join(out))  # Sphinx roles such as :func:`name`
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _parse(path: Path) -> ast.Module | None:
    if not path.is_file():
        return None
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as err:
        raise KbuildError(
            f"cannot parse: {err.msg}",
            file=str(path),
            where=err.lineno,
            fix="fix the Python syntax",
        ) from None


def module_doc(path: Path) -> str:
    tree = _parse(path)
    return (ast.get_docstring(tree) or "") if tree else ""


def public_functions(init_py: Path) -> list[Function]:
    """The functions named in `__all__`, in that order, from the package or its sibling modules."""
    tree = _parse(init_py)
    if tree is None:
        raise KbuildError(
            "package __init__.py not found",
            file=str(init_py),
            fix="create torch-ext/<python_name>/__init__.py",
        )
    functions = []
    for name in _dunder_all(tree, init_py):
        node = _find_def(tree, name)
        if node is None:
            node = _imported_def(tree, name, init_py.parent)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(Function(name, f"{name}{_signature(node)}", ast.get_docstring(node) or ""))
    return functions


def layer_classes(layers_py: Path) -> list[Function]:
    """Public classes of layers.py (its `__all__` when present): constructor and `forward`."""
    tree = _parse(layers_py)
    if tree is None:
        return []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]
    if any(_is_all(n) for n in tree.body):
        wanted = _dunder_all(tree, layers_py)
        classes = [n for n in classes if n.name in wanted]
    layers = []
    for node in classes:
        lines = []
        for method, prefix in (("__init__", node.name), ("forward", f"{node.name}.forward")):
            found = _find_def(node, method)
            if found is not None:
                signature = _signature(found, skip_self=True)
                lines.append(prefix + signature.removesuffix(" -> None"))
        layers.append(Function(node.name, "\n".join(lines), ast.get_docstring(node) or ""))
    return layers


def _is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


def _dunder_all(tree: ast.Module, path: Path) -> list[str]:
    for node in tree.body:
        if _is_all(node):
            try:
                names = ast.literal_eval(node.value)
            except ValueError:
                names = None
            if isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names):
                return list(names)
            raise KbuildError(
                "__all__ must be a literal list of names",
                file=str(path),
                where=node.lineno,
                fix='write __all__ = ["name", ...]',
            )
    raise KbuildError("no __all__", file=str(path), fix='list the public functions: __all__ = ["my_op"]')


def _find_def(scope: ast.AST, name: str) -> ast.AST | None:
    for node in getattr(scope, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
    return None


def _imported_def(tree: ast.Module, name: str, package: Path) -> ast.AST | None:
    """`from .module import name` in the package: the definition in that sibling module."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            if any((alias.asname or alias.name) == name for alias in node.names):
                original = next(a.name for a in node.names if (a.asname or a.name) == name)
                sibling = _parse(package / f"{node.module.replace('.', '/')}.py")
                return _find_def(sibling, original) if sibling else None
    return None


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef, *, skip_self: bool = False) -> str:
    """`(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor`, PEP 8 spacing."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + args.defaults
    params = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if not (skip_self and index == 0):
            params.append(_param(arg, default))
        if args.posonlyargs and index == len(args.posonlyargs) - 1:
            params.append("/")
    if args.vararg:
        params.append("*" + _param(args.vararg, None))
    elif args.kwonlyargs:
        params.append("*")
    params += [_param(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg:
        params.append("**" + _param(args.kwarg, None))
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"({', '.join(params)}){returns}"


def _param(arg: ast.arg, default: ast.expr | None) -> str:
    text = arg.arg + (f": {ast.unparse(arg.annotation)}" if arg.annotation else "")
    if default is not None:
        text += (" = " if arg.annotation else "=") + ast.unparse(default)
    return text


def built_variants(build_dir: Path) -> list[BuiltVariant]:
    """The staged variants: `build/<variant>/metadata.json`, sorted by name."""
    variants = []
    for metadata_file in sorted(build_dir.glob("*/metadata.json")):
        try:
            backend = json.loads(metadata_file.read_text(encoding="utf-8")).get("backend", {})
        except json.JSONDecodeError as err:
            raise KbuildError(
                f"invalid JSON: {err.msg}",
                file=str(metadata_file),
                where=err.lineno,
                fix="rebuild the variant",
            ) from None
        variants.append(
            BuiltVariant(metadata_file.parent.name, backend.get("type", ""), list(backend.get("archs", [])))
        )
    return variants


def latest_benchmark(kernel_dir: Path, link_base: Path | None = None) -> Benchmark | None:
    """The newest (by file name) `benchmarks/results/*.md`, and the PNG of the same stem if any."""
    results = sorted((kernel_dir / "benchmarks" / "results").glob("*.md"))
    if not results:
        return None
    latest = results[-1]
    kernel_dir = Path(kernel_dir)
    text = paths.inside(kernel_dir, latest.relative_to(kernel_dir), what="benchmark result").read_text(encoding="utf-8")
    png = latest.with_suffix(".png")
    plot = None
    if png.is_file() or png.is_symlink():
        png = paths.inside(kernel_dir, png.relative_to(kernel_dir), what="benchmark plot")
        base = Path(link_base) if link_base is not None else kernel_dir
        plot = Path(os.path.relpath(png, base.resolve())).as_posix()
    return Benchmark(text.strip(), plot, latest.name)
