"""Source checks of a kernel: manifest, layout, and the op-registration rule of the Kernel Hub."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kbuild.errors import ManifestError
from kbuild.findings import Finding
from kbuild.hubid import repo_id_problem
from kbuild.inputs import SOURCE_SUFFIXES, build_inputs
from kbuild.manifest import load_manifest

REGISTERING_DECORATORS = {
    "custom_op",
    "triton_op",
    "register_kernel",
    "register_fake",
    "register_vmap",
    "register_torch_dispatch",
}
PREFIX_FUNCTION = "add_op_namespace_prefix"
EXTENSION_NAME = "TORCH_EXTENSION_NAME"
# TORCH_LIBRARY(ns, m), TORCH_LIBRARY_IMPL_EXPAND(ns, CPU, m), STABLE_TORCH_LIBRARY(ns, m), ...
REGISTRATION_MACRO = re.compile(
    r"\b(?P<macro>(?P<stable>STABLE_)?TORCH_LIBRARY(?P<kind>_IMPL|_FRAGMENT)?(?P<expand>_EXPAND)?)"
    r"\s*\(\s*(?P<namespace>[^,()\s]*)"
)
# Comments, string and character literals (blanked before matching), and preprocessor definitions.
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)
DEFINE = re.compile(r"^[ \t]*#[ \t]*define\b.*?(?<!\\)$", re.MULTILINE | re.DOTALL)


def check_kernel(kernel_dir: Path | str) -> list[Finding]:
    """Every problem found in `kernel_dir`; an empty list means the kernel passes."""
    kernel_dir = Path(kernel_dir)
    try:
        manifest = load_manifest(kernel_dir)
    except ManifestError as exc:
        return [Finding(Path(exc.file or kernel_dir / "build.toml"), exc.line, exc.message, fix=exc.fix)]
    package_dir = kernel_dir / "torch-ext" / manifest.python_name
    findings = check_layout(kernel_dir, manifest.python_name)
    problem = repo_id_problem(manifest.repo_id)
    if problem is not None:
        findings.append(
            Finding(
                manifest.path, None, f"[general.hub] repo-id `{manifest.repo_id}` is not a Hub repository id: {problem}"
            )
        )
    if package_dir.is_dir():
        for path in sorted(package_dir.rglob("*.py")):
            findings += check_op_registration(path)
    for rel in build_inputs(manifest):
        if rel.suffix in SOURCE_SUFFIXES:
            findings += check_cpp_registration(kernel_dir / rel)
    return findings


def check_layout(kernel_dir: Path, python_name: str) -> list[Finding]:
    package_dir = kernel_dir / "torch-ext" / python_name
    findings = []
    if not (package_dir / "__init__.py").is_file():
        findings.append(
            Finding(
                package_dir / "__init__.py",
                None,
                f"missing: the kernel's Python package must be torch-ext/{python_name}/__init__.py",
            )
        )
    if (package_dir / python_name).is_dir():
        findings.append(
            Finding(
                package_dir / python_name,
                None,
                f"nested package torch-ext/{python_name}/{python_name}/: move its files up one level",
            )
        )
    tests = kernel_dir / "tests"
    if not any(tests.rglob("test_*.py")) and not any(tests.rglob("*_test.py")):
        findings.append(
            Finding(tests, None, "no tests: add tests/test_*.py (quick ones marked @pytest.mark.kernels_ci)", "warning")
        )
    return findings


def _decorator_name(node: ast.expr) -> str | None:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Name):
        return target.id
    return None


def _is_prefixed(arg: ast.expr) -> bool:
    return isinstance(arg, ast.Call) and _decorator_name(arg) == PREFIX_FUNCTION


def check_op_registration(path: Path) -> list[Finding]:
    """Module-level ops must be registered under `add_op_namespace_prefix(...)`, never a fixed name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return [Finding(path, exc.lineno, f"Python syntax error: {exc.msg}")]
    findings = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for decorator in node.decorator_list:
            name = _decorator_name(decorator)
            if name not in REGISTERING_DECORATORS:
                continue
            args = decorator.args if isinstance(decorator, ast.Call) else []
            if not args or not _is_prefixed(args[0]):
                findings.append(
                    Finding(
                        path,
                        decorator.lineno,
                        f"`@{name}` on `{node.name}` registers a fixed op name; pass "
                        f'`{PREFIX_FUNCTION}("...")` (from ._ops) as its first argument so that '
                        "two builds of the kernel can load side by side",
                    )
                )
    return findings


def _blank(match: re.Match[str]) -> str:
    """The matched text with everything but its line breaks replaced by spaces."""
    return re.sub(r"[^\n]", " ", match.group())


def check_cpp_registration(path: Path) -> list[Finding]:
    """C++ ops must be registered in the build's namespace: `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME,
    ...)` (and its IMPL and STABLE_ forms), never under a literal namespace."""
    code = DEFINE.sub(_blank, NOT_CODE.sub(_blank, path.read_text(encoding="utf-8", errors="replace")))
    findings = []
    for match in REGISTRATION_MACRO.finditer(code):
        macro, namespace = match["macro"], match["namespace"]
        if match["expand"] and namespace == EXTENSION_NAME:
            continue
        kind = "_IMPL" if match["kind"] == "_IMPL" else ""
        wanted = f"{match['stable'] or ''}TORCH_LIBRARY{kind}_EXPAND"
        rest = ", <dispatch key>, ops" if kind else ", ops"
        findings.append(
            Finding(
                path,
                code.count("\n", 0, match.start()) + 1,
                f"`{macro}({namespace}, ...)` registers ops under a fixed namespace; each build must register "
                f"them under its own ({EXTENSION_NAME}) so that two builds of the kernel can load side by side",
                fix=f"write `{wanted}({EXTENSION_NAME}{rest})` (registration.h defines it)",
            )
        )
    return findings
