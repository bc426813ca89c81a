"""The Kernel Hub's op-registration rule: a build registers its ops in its own namespace, so that
two builds of one kernel load side by side. C++ registers with the `*_EXPAND` macros of the
generated registration.h on TORCH_EXTENSION_NAME; Python registers under
`add_op_namespace_prefix(...)`. A build refuses a C++ source that breaks the rule (the first
registration found); `kbuild check` (kbuild.check.kernel_checks) reports every one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kbuild.core.errors import KbuildError
from kbuild.core.findings import Finding
from kbuild.model.inputs import EXTENSION_NAME, SOURCE_SUFFIXES, blank, build_inputs, code_of
from kbuild.model.manifest import Manifest

REGISTERING_DECORATORS = {
    "custom_op",
    "triton_op",
    "register_kernel",
    "register_fake",
    "register_vmap",
    "register_torch_dispatch",
}
# The methods of the op object that `custom_op`/`triton_op` return (`@my_op.register_fake`) take
# no op name: they register for that op, already namespaced.
OP_METHODS = {"register_fake", "register_kernel", "register_vmap", "register_torch_dispatch"}
PREFIX_FUNCTION = "add_op_namespace_prefix"
# TORCH_LIBRARY(ns, m), TORCH_LIBRARY_IMPL_EXPAND(ns, CPU, m), STABLE_TORCH_LIBRARY(ns, m), ...
REGISTRATION_MACRO = re.compile(
    r"\b(?P<macro>(?P<stable>STABLE_)?TORCH_LIBRARY(?P<kind>_IMPL|_FRAGMENT)?(?P<expand>_EXPAND)?)"
    r"\s*\(\s*(?P<namespace>[^,()\s]*)"
)
# Preprocessor definitions (blanked before matching, with comments and literals).
DEFINE = re.compile(r"^[ \t]*#[ \t]*define\b.*?(?<!\\)$", re.MULTILINE | re.DOTALL)


def _decorator_name(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Name):
        return target.id
    return None


def _is_prefixed(arg: ast.expr) -> bool:
    return isinstance(arg, ast.Call) and _decorator_name(arg) == PREFIX_FUNCTION


def _dotted(node: ast.expr) -> str | None:
    """`torch.library` for the expression `torch.library`; None for anything but names."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _library_names(tree: ast.Module) -> set[str]:
    """The names under which the module refers to the `torch.library` module."""
    names = {"torch.library"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname for a in node.names if a.name == "torch.library" and a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            names.update(a.asname or a.name for a in node.names if a.name == "library")
    return names


def _is_op_method(decorator: ast.expr, library: set[str]) -> bool:
    """`@my_op.register_fake`: a method of an op object, not a function of torch.library."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr in OP_METHODS and _dotted(target.value) not in library


def _op_name(args: list[ast.expr], default: str) -> str:
    """The op's name without a namespace: `fixed` for "relu::fixed", else `default`."""
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        return args[0].value.rpartition("::")[2] or default
    return default


def check_op_registration(path: Path) -> list[Finding]:
    """Module-level ops must be registered under `add_op_namespace_prefix(...)`, never a fixed name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return [Finding(path, exc.lineno, f"Python syntax error: {exc.msg}")]
    library = _library_names(tree)
    findings = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for decorator in node.decorator_list:
            name = _decorator_name(decorator)
            if name not in REGISTERING_DECORATORS or _is_op_method(decorator, library):
                continue
            args = decorator.args if isinstance(decorator, ast.Call) else []
            if not args or not _is_prefixed(args[0]):
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                findings.append(
                    Finding(
                        path,
                        decorator.lineno,
                        f"`@{name}` on `{node.name}` registers a fixed op name, the same in every build, "
                        "so two builds of the kernel cannot load side by side",
                        fix=f'write `@{_dotted(target) or name}({PREFIX_FUNCTION}("{_op_name(args, node.name)}"), '
                        f"...)` with `from ._ops import {PREFIX_FUNCTION}`",
                    )
                )
    return findings


def require_cpp_registration(manifest: Manifest) -> None:
    """Refuse a build whose C/C++/CUDA sources register ops under a fixed namespace (what
    `kbuild check` reports): the first such registration, as an error naming its line and the fix."""
    for rel in build_inputs(manifest):
        if rel.suffix in SOURCE_SUFFIXES:
            for finding in check_cpp_registration(manifest.kernel_dir / rel):
                raise KbuildError(finding.message, file=finding.path, where=finding.line, fix=finding.fix)


def check_cpp_registration(path: Path) -> list[Finding]:
    """C++ ops must be registered in the build's namespace: `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME,
    ...)` (and its IMPL and STABLE_ forms), never under a literal namespace."""
    code = DEFINE.sub(blank, code_of(path))
    findings = []
    for match in REGISTRATION_MACRO.finditer(code):
        macro, namespace = match["macro"], match["namespace"]
        if match["expand"] and namespace == EXTENSION_NAME:
            continue
        kind = "_IMPL" if match["kind"] == "_IMPL" else ""
        wanted = f"{match['stable'] or ''}TORCH_LIBRARY{kind}_EXPAND"
        rest = ", <dispatch key>, ops" if kind else ", ops"
        if namespace == EXTENSION_NAME:
            problem = (
                f"`{macro}` does not expand its arguments: `{macro}({EXTENSION_NAME}, ...)` registers ops under "
                f"the literal namespace `{EXTENSION_NAME}`, the same in every build, so two builds of the kernel "
                "cannot load side by side"
            )
            fix = f"write `{wanted}({EXTENSION_NAME}{rest})`: registration.h defines it to expand {EXTENSION_NAME}"
        else:
            problem = (
                f"`{macro}({namespace}, ...)` registers ops under a fixed namespace; each build must register them "
                f"under its own ({EXTENSION_NAME}) so that two builds of the kernel can load side by side"
            )
            fix = f"write `{wanted}({EXTENSION_NAME}{rest})` (registration.h defines it)"
        findings.append(Finding(path, code.count("\n", 0, match.start()) + 1, problem, fix=fix))
    return findings
