"""`kbuild check`: a kernel's manifest, layout, Hub repository id and branch, the op-registration
rule of the Kernel Hub (kbuild.build.registration), and the links of its card
(kbuild.check.card_links)."""

from __future__ import annotations

from pathlib import Path

from kbuild.build.registration import check_cpp_registration, check_op_registration
from kbuild.check.card_links import check_card_links
from kbuild.core.errors import ManifestError
from kbuild.core.findings import Finding
from kbuild.core.hubid import branch_problem, repo_id_problem
from kbuild.model.inputs import SOURCE_SUFFIXES, build_inputs
from kbuild.model.manifest import load_manifest


def check_kernel(kernel_dir: Path | str) -> list[Finding]:
    """Every problem found in `kernel_dir`; an empty list means the kernel passes."""
    kernel_dir = Path(kernel_dir)
    try:
        manifest = load_manifest(kernel_dir)
    except ManifestError as exc:
        return [
            Finding(Path(exc.file or kernel_dir / "build.toml"), exc.line, exc.message, fix=exc.fix, bad_input=True)
        ]
    package_dir = kernel_dir / "torch-ext" / manifest.python_name
    findings = check_layout(kernel_dir, manifest.python_name)
    problem = repo_id_problem(manifest.repo_id)
    if problem is not None:
        findings.append(
            Finding(
                manifest.path, None, f"[general.hub] repo-id `{manifest.repo_id}` is not a Hub repository id: {problem}"
            )
        )
    problem = branch_problem(manifest.upload_branch)
    if problem is not None:
        findings.append(
            Finding(
                manifest.path,
                None,
                f"[general.hub] branch {manifest.upload_branch!r} is not a plain branch name: {problem}",
            )
        )
    inputs = build_inputs(manifest)  # first: it refuses a symlink that loops or leads out of the kernel
    if package_dir.is_dir():
        for path in sorted(package_dir.rglob("*.py")):
            findings += check_op_registration(path)
    for rel in inputs:
        if rel.suffix in SOURCE_SUFFIXES:
            findings += check_cpp_registration(kernel_dir / rel)
    return findings + check_card_links(kernel_dir)


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
