"""kbuild's packages are layers: a module imports only from its own package and from the floors
below it, and no two modules import each other, directly or through others.

Every import counts: at the top of a module, inside a function, and under TYPE_CHECKING (a cycle
that only the type checker sees is still two modules that cannot be read one without the other).
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import kbuild

KBUILD = Path(kbuild.__file__).parent

# The floors, lowest first: packages, and on top kbuild's own modules (kbuild/__init__.py, which holds
# the version, counts as core). The parts of one floor do not import each other.
FLOORS = (
    ("core",),
    ("model",),
    ("build", "card"),
    ("check",),
    ("testing", "release", "sync"),
    ("pipeline",),
    ("cli",),
)
FLOOR_OF = {part: number for number, parts in enumerate(FLOORS) for part in parts}


def _modules() -> dict[str, Path]:
    """Every module of kbuild by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(KBUILD.rglob("*.py")):
        parts = path.relative_to(KBUILD.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The kbuild modules that module `name` imports, wherever in it the import is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    yield f"{base}.{alias.name}"  # `from kbuild.core import paths`: the module paths
                elif base in modules:
                    yield base


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_imported(name, path, modules)) - {name} for name, path in modules.items()}


def floor_part(module: str) -> str:
    """The package of `module` below kbuild (`core`, `model`, ...), or the top-level module's name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "core"


def test_every_module_lies_on_a_floor():
    unplaced = sorted(module for module in import_graph() if floor_part(module) not in FLOOR_OF)
    assert not unplaced, f"modules outside the packages of FLOORS: {unplaced}"


def test_no_module_imports_from_its_own_floor_or_above():
    upward = []
    for module, imported in sorted(import_graph().items()):
        here = floor_part(module)
        for target in sorted(imported):
            there = floor_part(target)
            if there != here and FLOOR_OF.get(there, -1) >= FLOOR_OF.get(here, -1):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that do not go down a floor:\n  " + "\n  ".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (strongly connected components of two or more)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                lowest[module] = min(lowest[module], lowest[target])
            elif target in stack:
                lowest[module] = min(lowest[module], index[target])
        if lowest[module] == index[module]:
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_modules_import_each_other():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found_however_it_is_imported():
    graph = {"kbuild.a": {"kbuild.b"}, "kbuild.b": {"kbuild.c"}, "kbuild.c": {"kbuild.a"}, "kbuild.d": {"kbuild.a"}}
    assert cycles(graph) == [["kbuild.a", "kbuild.b", "kbuild.c"]]


def test_imports_in_functions_and_under_type_checking_count(tmp_path, monkeypatch):
    package = tmp_path / "kbuild"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kbuild.core.b import B\n"
    )
    (package / "core" / "b.py").write_text("def f():\n    from kbuild.core import a\n    from . import c\n")
    (package / "core" / "c.py").write_text("from ..core.a import x\n")
    monkeypatch.setattr(f"{__name__}.KBUILD", package)
    graph = import_graph()
    assert graph["kbuild.core.a"] == {"kbuild.core.b"}
    assert graph["kbuild.core.b"] == {"kbuild.core.a", "kbuild.core.c"}
    assert graph["kbuild.core.c"] == {"kbuild.core.a"}
    assert cycles(graph) == [["kbuild.core.a", "kbuild.core.b", "kbuild.core.c"]]
