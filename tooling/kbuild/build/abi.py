"""Binary checks of built extensions: what a `.so` imports must fit the platforms we publish for.

- glibc/libstdc++ symbol versions within manylinux_2_28,
- from libpython only the limited API of Python 3.9 (abi3), list in data/python-abi3-3.9.txt,
- in torch stable-ABI variants (`torch-stable-abi*` folders), no imported `c10::`/`at::`/`torch::`
  C++ symbol outside `torch::stable::` (those bind to libtorch's unstable C++ ABI).

Only undefined (imported) dynamic symbols are judged: that is what the loader must resolve
against the system. ELF is read with pyelftools; C++ names are demangled with binutils' `c++filt`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection
from packaging.version import Version

from kbuild.core.errors import KbuildError
from kbuild.core.findings import Finding

# manylinux_2_28 (AlmaLinux 8: glibc 2.28, GCC 8 runtime): newest version allowed per namespace.
MANYLINUX_2_28 = {"GLIBC": "2.28", "GLIBCXX": "3.4.24", "CXXABI": "1.3.11", "GCC": "7.0.0"}
LIMITED_API_FILE = Path(__file__).parents[1] / "data" / "python-abi3-3.9.txt"
STABLE_ABI_PREFIX = "torch-stable-abi"
# A C++ qualified name in one of torch's unstable namespaces; `torch::stable::` is the stable ABI.
UNSTABLE_TORCH_NAME = re.compile(r"(?<![\w:])(?:c10|at|torch(?!::stable::))::")


@dataclass(frozen=True)
class Import:
    """An undefined dynamic symbol and the version it is bound to (None when unversioned)."""

    name: str
    version: str | None


def check_abi(build_dir: Path, *, nonportable_ok: bool = False) -> list[Finding]:
    """Check every `*.so` under `build_dir` (a kernel folder, its `build/` folder or one variant
    folder; a kernel folder's build trees under `.kbuild/` are left out).
    `nonportable_ok`: symbol versions beyond manylinux_2_28 are warnings (builds made with this
    machine's toolchain, in a local hub folder), the other rules still errors."""
    build_dir = Path(build_dir)
    if not build_dir.is_dir():
        raise KbuildError(
            "not a directory",
            file=str(build_dir),
            fix="pass a kernel's build/ folder or one build/<variant>/ folder",
        )
    findings: list[Finding] = []
    for library in sorted(build_dir.rglob("*.so")):
        if ".kbuild" in library.relative_to(build_dir).parts:
            continue  # a kernel folder's build trees: what they link is staged into build/ and checked there
        stable = any(part.startswith(STABLE_ABI_PREFIX) for part in library.relative_to(build_dir.parent).parts)
        findings += check_library(library, stable_abi=stable, nonportable_ok=nonportable_ok)
    return findings


def check_library(library: Path, *, stable_abi: bool, nonportable_ok: bool = False) -> list[Finding]:
    imports = read_imports(library)
    severity = "warning" if nonportable_ok else "error"
    findings = [Finding(library, None, message, severity) for message in symbol_version_problems(imports)]
    embedded = embedded_cxx_runtime(library)
    if embedded:
        findings.append(Finding(library, None, embedded, "error"))
    python = python_problems(imports)
    if python:
        findings.append(Finding(library, None, python, "error"))
    if stable_abi:
        torch = stable_abi_problems(imports)
        if torch:
            findings.append(Finding(library, None, torch, "error"))
    return findings


def read_imports(library: Path) -> list[Import]:
    try:
        with open(library, "rb") as stream:
            elf = ELFFile(stream)
            dynsym = elf.get_section_by_name(".dynsym")
            if not isinstance(dynsym, SymbolTableSection):
                return []
            versions = _needed_versions(elf)
            versym = elf.get_section_by_name(".gnu.version")
            imports = []
            for index, symbol in enumerate(dynsym.iter_symbols()):
                if symbol["st_shndx"] != "SHN_UNDEF" or not symbol.name:
                    continue
                ndx = versym.get_symbol(index)["ndx"] if isinstance(versym, GNUVerSymSection) else None
                imports.append(Import(symbol.name, versions.get(ndx) if isinstance(ndx, int) else None))
            return imports
    except ELFError as err:
        raise KbuildError(
            f"not a readable ELF shared library ({err})",
            file=str(library),
            fix="rebuild the variant",
        ) from None


# Symbols that only libstdc++ itself defines: a library defining them carries a static copy
# of the C++ runtime, whose locale state clashes with the process's libstdc++ (a crash in
# the first `ostream << long`, e.g. while formatting a TORCH_CHECK message).
CXX_RUNTIME_PREFIXES = ("_ZNSt6locale", "_ZNSo9_M_insert", "_ZNKSt7__cxx119money_put", "_ZNSt8ios_base")


def embedded_cxx_runtime(library: Path) -> str | None:
    """A message when `library` defines libstdc++'s own symbols (static libstdc++), else None."""
    with open(library, "rb") as stream:
        dynsym = ELFFile(stream).get_section_by_name(".dynsym")
        defined = sorted(
            symbol.name
            for symbol in (dynsym.iter_symbols() if isinstance(dynsym, SymbolTableSection) else [])
            if symbol["st_shndx"] != "SHN_UNDEF" and symbol.name.startswith(CXX_RUNTIME_PREFIXES)
        )
    if not defined:
        return None
    return (
        f"defines libstdc++'s own symbols ({_some(defined, 2)}): the C++ runtime was linked "
        "statically and will crash next to torch's libstdc++; build with a compiler that links "
        "the shared libstdc++ (e.g. CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++)"
    )


def _needed_versions(elf: ELFFile) -> dict[int, str]:
    """Version index -> version name (e.g. 7 -> "GLIBCXX_3.4.21") from `.gnu.version_r`."""
    section = elf.get_section_by_name(".gnu.version_r")
    if not isinstance(section, GNUVerNeedSection):
        return {}
    return {aux["vna_other"]: aux.name for _, auxiliaries in section.iter_versions() for aux in auxiliaries}


def symbol_version_problems(imports: list[Import]) -> list[str]:
    too_new: dict[str, list[str]] = {}
    for item in imports:
        if item.version is None or "_" not in item.version:
            continue
        namespace, _, number = item.version.partition("_")
        limit = MANYLINUX_2_28.get(namespace)
        if limit is None:
            continue
        if not re.fullmatch(r"\d+(\.\d+)*", number) or Version(number) > Version(limit):
            too_new.setdefault(item.version, []).append(item.name)
    problems = []
    for version, names in sorted(too_new.items()):
        namespace = version.partition("_")[0]
        newest = f"{namespace}_{MANYLINUX_2_28[namespace]}"
        problems.append(
            f"needs {version} ({_some(names)}); manylinux_2_28 allows at most {newest}: "
            "build in the "
            "manylinux_2_28 container that `kbuild matrix` names, or avoid these symbols"
        )
    return problems


def python_problems(imports: list[Import]) -> str | None:
    allowed = limited_api_symbols()
    outside = sorted({i.name for i in imports if re.match(r"_?Py", i.name) and i.name not in allowed})
    if not outside:
        return None
    return (
        f"imports Python symbols outside the limited API 3.9 ({_some(outside)}); "
        "compile the binding with "
        "Py_LIMITED_API=0x03090000 and use only functions of the stable ABI"
    )


def stable_abi_problems(imports: list[Import]) -> str | None:
    mangled = [i.name for i in imports if i.name.startswith("_Z")]
    unstable = sorted({name for name in demangle(mangled) if UNSTABLE_TORCH_NAME.search(name)})
    if not unstable:
        return None
    return (
        "stable-ABI variant imports torch C++ symbols outside torch::stable:: "
        f"({_some(unstable)}); use the torch/csrc/stable API (torch::stable::Tensor, "
        "STABLE_TORCH_LIBRARY) instead of ATen/c10"
    )


def limited_api_symbols() -> frozenset[str]:
    lines = LIMITED_API_FILE.read_text().splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def demangle(names: list[str]) -> list[str]:
    if not names:
        return []
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None:
        raise KbuildError("c++filt not found (needed to read C++ symbol names)", fix="install binutils")
    result = subprocess.run([cxxfilt], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


def _some(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"
