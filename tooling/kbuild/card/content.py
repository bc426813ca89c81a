"""The kernel card: a kernel's CARD.md (Jinja) rendered into the Hub README.

Everything the template sees is read from files, never by importing the kernel. The variables of
kernel-builder's card renderer keep its names, types and fallbacks: `repo_id`, `version`, `license`
(lower case), `upstream`, `source`, `functions` (the strings of the package's `__all__` but
`layers`; none: an empty list), `layers` (the classes of `layers.py` or the `layers/` package) and
`has_benchmark` (`benchmarks/benchmark.py` exists). Each name in `functions` and `layers` is a
string that also carries its signature and docstring (`function.signature`, `function.doc`), which
kbuild's own cards show. kbuild adds the API's docs from `torch-ext/<python_name>/__init__.py`
(parsed with `ast`), the published variants
(the target branch's, else those under `build/`), the variants CI builds (`kbuild matrix`), and
the newest benchmark result of each device and suite from `benchmarks/results/*.json` (the JSON written by
a kernel's benchmark script: `machine`, `rows` with the columns of each case and `us`, the time
per implementation in microseconds).
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbuild.card import sandbox_parent
from kbuild.core import paths
from kbuild.core.errors import KbuildError
from kbuild.model import backends
from kbuild.model.manifest import Manifest
from kbuild.model.variants import BuiltVariant, Variant

DEFAULT_TEMPLATE = Path(__file__).parents[1] / "templates" / "card" / "CARD.md.j2"
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


class Function(str):
    """A public name of the kernel. As text it is the name (what kernel-builder's card variables
    hold); its attributes are what kbuild read of its definition ("" when none was found)."""

    signature: str  # "relu(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor"
    doc: str
    required: tuple[str, ...]  # the annotations of the arguments without a default

    def __new__(cls, name: str, signature: str = "", doc: str = "", required: tuple[str, ...] = ()) -> Function:
        self = super().__new__(cls, name)
        self.signature, self.doc, self.required = signature, doc, required
        return self

    def __reduce__(self) -> tuple[type[Function], tuple[str, str, str, tuple[str, ...]]]:
        return (Function, (str(self), self.signature, self.doc, self.required))

    @property
    def name(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Benchmark:
    device: str  # "NVIDIA H100 80GB HBM3"
    date: str  # "2026-11-24"
    software: str  # "torch 2.11.0+cu130, CUDA 13.0"
    calls: int | None  # the median is taken over this many calls
    columns: list[str]  # the case's parameters, e.g. ["M", "N", "K"]
    implementations: list[str]  # keys of `us`, in the file's order
    rows: list[dict[str, Any]]
    plot: str | None  # link to the PNG of the same name, if any
    source: str  # the JSON file's name
    suite: str = ""  # the file's `suite` ("prefill", "decode"), "" when it names none

    def table(self, labels: dict[str, str] | None = None) -> str:
        """A Markdown table: one row per case, one column per implementation (those of `labels`,
        named by it, when given), the median time in microseconds of the file's first run."""
        shown = [(key, (labels or {}).get(key, key)) for key in (labels or dict.fromkeys(self.implementations))]
        header = [*self.columns, *(f"{label} (µs)" for _, label in shown)]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in self.rows:
            times = [_first(row.get("us", {}).get(key)) for key, _ in shown]
            cells = [str(row.get(column, "")) for column in self.columns]
            cells += ["-" if t is None else f"{t:.1f}" for t in times]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


def _first(value: object) -> float | None:
    """A time, or the first run's of a list of runs."""
    if isinstance(value, list):
        value = value[0] if value else None
    return float(value) if isinstance(value, (int, float)) else None


def render_card(
    manifest: Manifest,
    *,
    ci_variants: list[BuiltVariant],
    link_base: Path | None = None,
    repo_id: str | None = None,
    published: list[str] | None = None,
) -> str:
    """Render the kernel's CARD.md. Links to benchmark plots are relative to `link_base` when
    given (e.g. the folder of a copy under docs/), else to the kernel folder (the Hub layout).
    `ci_variants`: those the release workflow builds (kbuild.model.matrix.ci_variants); `repo_id`: the
    repository published to (default: build.toml's); `published`: the variants on its version
    branch after the upload (default: those built under `build/`)."""
    template_path = manifest.kernel_dir / "CARD.md"
    if not template_path.is_file():
        raise KbuildError(
            "the kernel has no card template",
            file=str(template_path),
            fix=f"copy {DEFAULT_TEMPLATE} to it and edit it",
        )
    text = card_text(manifest.kernel_dir)
    context = card_context(manifest, link_base, repo_id=repo_id, published=published, ci_variants=ci_variants)
    filters = {"hub_license": hub_license, "docstring": docstring_markdown}
    return sandbox_parent.render(text, template_path, context, filters)


def card_text(kernel_dir: Path) -> str:
    """The text of `kernel_dir/CARD.md`, read only inside the kernel folder: a symlink that leads
    out (to `/proc/self/environ`, a token file, another repository) is an error naming it."""
    template_path = paths.inside(kernel_dir, "CARD.md", file=kernel_dir / "CARD.md", what="card")
    try:
        return template_path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KbuildError(
            "the card is not UTF-8 text", file=str(kernel_dir / "CARD.md"), fix="save it as UTF-8"
        ) from None


def card_context(
    manifest: Manifest,
    link_base: Path | None = None,
    *,
    repo_id: str | None = None,
    published: list[str] | None = None,
    ci_variants: list[BuiltVariant],
) -> dict[str, Any]:
    kernel_dir = manifest.kernel_dir
    package = kernel_dir / "torch-ext" / manifest.python_name
    benchmarks = latest_benchmarks(kernel_dir, link_base)
    functions = public_functions(package / "__init__.py")
    built = built_variants(kernel_dir / "build")
    if published is not None:
        archs = {variant.name: variant.archs for variant in built}
        built = [BuiltVariant(name, Variant.parse(name).backend, archs.get(name, [])) for name in sorted(published)]
    return {
        "name": manifest.name,
        "python_name": manifest.python_name,
        "repo_id": repo_id or manifest.repo_id,
        "version": manifest.version,
        "license": manifest.general.license.lower(),
        "upstream": manifest.general.upstream,
        "source": manifest.general.source,
        "backends": manifest.backends,
        "summary": module_doc(package / "__init__.py"),
        "functions": functions,
        "layers": layer_classes(package),
        "has_benchmark": (kernel_dir / "benchmarks" / "benchmark.py").is_file(),
        "example": usage_example(manifest, functions, repo_id or manifest.repo_id),
        "variants": built,
        "ci_variants": ci_variants,
        "benchmarks": benchmarks,
    }


EXAMPLE_VALUES = {"torch.Tensor": "x", "Tensor": "x", "float": "2.0", "int": "2", "bool": "False"}


def usage_example(manifest: Manifest, functions: list[Function], repo_id: str) -> str:
    """Python that loads the kernel and calls its first function on a small tensor, from the
    signature: tensors are `x`, numbers small constants; arguments with defaults are left out."""
    name = manifest.python_name
    # torch's device names (ROCm builds of torch use GPU_DEVICE too), not backend names.
    gpu = f'"{backends.GPU_DEVICE}"'
    device = f'{gpu} if torch.cuda.is_available() else "cpu"' if backends.CPU.name in manifest.backends else gpu
    lines = [
        "import torch",
        "from kernels import get_kernel",
        "",
        f'{name} = get_kernel("{repo_id}", version={manifest.version})',
        f"device = {device}",
        "x = torch.randn(2, 4, device=device)",
    ]
    main = next((function for function in functions if function.signature), None)
    if main is not None:
        arguments = [EXAMPLE_VALUES.get(annotation, "x") for annotation in main.required]
        lines.append(f"print({name}.{main.name}({', '.join(arguments)}))")
    return "\n".join(lines)


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
    """The module at `path` (inside its kernel folder: a symlink that leads out is an error)."""
    if not path.is_file():
        return None
    root = next((folder for folder in path.absolute().parents if (folder / "build.toml").is_file()), None)
    if root is not None:
        path = paths.inside(root, path.absolute().relative_to(root), what="package file")
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
    """The string names of `__all__` in its order but `layers` (as kernel-builder lists them; no
    `__all__`, or no package: none), each with its definition's signature when it is a function of
    the package or of a sibling module."""
    tree = _parse(init_py)
    if tree is None:
        return []
    functions = []
    for name in _all_names(tree):
        if name == "layers":
            continue
        node = _find_def(tree, name) or _imported_def(tree, name, init_py.parent)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            signature = _signature(node, constants=_constants(tree, init_py.parent))
            functions.append(Function(name, f"{name}{signature}", ast.get_docstring(node) or "", _required(node)))
        else:
            functions.append(Function(name))
    return functions


def _required(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    args = node.args
    positional = args.posonlyargs + args.args
    without_default = positional[: len(positional) - len(args.defaults)]
    without_default += [arg for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is None]
    return tuple(ast.unparse(arg.annotation) if arg.annotation else "" for arg in without_default)


def _constants(tree: ast.Module, package: Path | None = None) -> dict[str, str]:
    """Module-level names bound to a literal number or string, also those imported from a sibling
    module of `package` (`from .module import NAME`): shown by value in signatures."""
    constants = {}
    for node in tree.body:
        if package is not None and isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            sibling = _parse(package / f"{node.module.replace('.', '/')}.py")
            values = _constants(sibling) if sibling else {}
            for alias in node.names:
                if alias.name in values:
                    constants[alias.asname or alias.name] = values[alias.name]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, (int, float, str)) and not isinstance(node.value.value, bool):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        constants[target.id] = repr(node.value.value)
    return constants


def layer_classes(package: Path) -> list[Function]:
    """Public classes of the package's `layers/__init__.py` or `layers.py` (its `__all__` when it
    lists names, also those it imports from a sibling module with `from .module import Name`):
    constructor and `forward`."""
    source = package / "layers" / "__init__.py"
    tree = _parse(source)
    if tree is None:
        source = package / "layers.py"
        tree = _parse(source)
    if tree is None:
        return []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")]
    wanted = _all_names(tree)
    if wanted:
        classes = [n for n in classes if n.name in wanted]
        defined = {n.name for n in classes}
        imported = [_imported_def(tree, name, source.parent) for name in wanted if name not in defined]
        classes += [n for n in imported if isinstance(n, ast.ClassDef)]
    layers = []
    for node in classes:
        lines = []
        for method, prefix in (("__init__", node.name), ("forward", f"{node.name}.forward")):
            found = _find_def(node, method)
            if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
                signature = _signature(found, skip_self=True)
                lines.append(prefix + signature.removesuffix(" -> None"))
        layers.append(Function(node.name, "\n".join(lines), ast.get_docstring(node) or ""))
    return layers


def _all_names(tree: ast.Module) -> list[str]:
    """The string entries of a literal `__all__` list or tuple (other entries are left out, as
    kernel-builder does); none without one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


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


def _signature(
    node: ast.FunctionDef | ast.AsyncFunctionDef, *, skip_self: bool = False, constants: dict[str, str] | None = None
) -> str:
    """`(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor`, PEP 8 spacing."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + args.defaults
    params = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if not (skip_self and index == 0):
            params.append(_param(arg, default, constants))
        if args.posonlyargs and index == len(args.posonlyargs) - 1:
            params.append("/")
    if args.vararg:
        params.append("*" + _param(args.vararg, None))
    elif args.kwonlyargs:
        params.append("*")
    params += [_param(arg, default, constants) for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg:
        params.append("**" + _param(args.kwarg, None))
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"({', '.join(params)}){returns}"


def _param(arg: ast.arg, default: ast.expr | None, constants: dict[str, str] | None = None) -> str:
    text = arg.arg + (f": {ast.unparse(arg.annotation)}" if arg.annotation else "")
    if default is not None:
        value = ast.unparse(default)
        if isinstance(default, ast.Name):
            value = (constants or {}).get(default.id, value)
        text += (" = " if arg.annotation else "=") + value
    return text


def _load_json(path: Path, fix: str) -> Any:
    """`path` parsed as JSON; a KbuildError naming the file, the line and `fix` if it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise KbuildError(f"invalid JSON: {err.msg}", file=str(path), where=err.lineno, fix=fix) from None
    except UnicodeDecodeError:
        raise KbuildError("invalid JSON: not UTF-8", file=str(path), fix=fix) from None


def built_variants(build_dir: Path) -> list[BuiltVariant]:
    """The staged variants: `build/<variant>/metadata.json`, sorted by name."""
    variants = []
    for metadata_file in sorted(build_dir.glob("*/metadata.json")):
        metadata = _load_json(metadata_file, fix=f"rebuild it: kbuild build {build_dir.parent}")
        backend = metadata.get("backend") if isinstance(metadata, dict) else None
        if not isinstance(backend, dict):
            backend = {}
        variants.append(
            BuiltVariant(metadata_file.parent.name, backend.get("type", ""), list(backend.get("archs", [])))
        )
    return variants


def published_plots(kernel_dir: Path) -> list[str]:
    """The benchmark plots `kbuild publish` puts on the Hub repository's main branch, beside the card."""
    return [benchmark.plot for benchmark in latest_benchmarks(kernel_dir) if benchmark.plot]


def latest_benchmarks(kernel_dir: Path, link_base: Path | None = None) -> list[Benchmark]:
    """The newest result of each device and suite in `benchmarks/results/*.json` (by the date it
    records, then by file name), sorted by device and suite; files without `machine` and `rows`
    are not results."""
    newest: dict[tuple[str, str], tuple[str, str, Benchmark]] = {}
    for path in sorted((kernel_dir / "benchmarks" / "results").glob("*.json")):
        result = paths.inside(kernel_dir, path.relative_to(kernel_dir), what="benchmark result")
        data = _load_json(result, fix="rerun the benchmark or delete the file")
        if not (
            isinstance(data, dict) and isinstance(data.get("machine"), dict) and isinstance(data.get("rows"), list)
        ):
            continue
        benchmark = _benchmark(path, data, kernel_dir, link_base)
        stamp = str(data["machine"].get("date_utc", ""))
        key = (benchmark.device, benchmark.suite)
        if key not in newest or (stamp, path.name) > newest[key][:2]:
            newest[key] = (stamp, path.name, benchmark)
    return [newest[key][2] for key in sorted(newest)]


def _benchmark(path: Path, data: dict[str, Any], kernel_dir: Path, link_base: Path | None) -> Benchmark:
    machine = data["machine"]
    rows = [row for row in data["rows"] if isinstance(row, dict) and isinstance(row.get("us", {}), dict)]
    implementations = list(dict.fromkeys(key for row in rows for key in row.get("us", {})))
    columns = list(
        dict.fromkeys(k for row in rows for k, v in row.items() if isinstance(v, (int, str)) and not k.endswith("_us"))
    )
    software = [f"torch {machine['torch']}"] if machine.get("torch") else []
    # The toolkit of each backend the benchmark ran with (`cuda = 13.0` -> CUDA 13.0).
    software += [
        f"{b.title} {machine[b.name]}" for b in backends.ALL if b.torch_field_is_toolkit and machine.get(b.name)
    ]
    png = path.with_suffix(".png")
    plot = None
    if png.is_file() or png.is_symlink():
        png = paths.inside(kernel_dir, png.relative_to(kernel_dir), what="benchmark plot")
        base = Path(link_base) if link_base is not None else kernel_dir
        plot = Path(os.path.relpath(png.resolve(), base.resolve())).as_posix()
    return Benchmark(
        device=str(machine.get("device") or "unknown device"),
        date=str(machine.get("date_utc", ""))[:10],
        software=", ".join(software),
        calls=data.get("calls") if isinstance(data.get("calls"), int) else None,
        columns=columns,
        implementations=implementations,
        rows=rows,
        plot=plot,
        source=path.name,
        suite=data["suite"] if isinstance(data.get("suite"), str) else "",
    )
