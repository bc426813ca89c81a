"""The rules for compiler flags (`cxx-flags`, `cuda-flags`, `hip-flags`, `sycl-flags`) and for
the file and folder names a build.toml gives (`src`, `include`, the kernel folder).

A flag reaches the compiler as written, one argument each, so it may hold nothing that CMake
would read as syntax (kbuild.model.cmakelang), must not be one of the compile options that CMake
rewrites, must not choose a program the compiler runs or loads, and every file or folder it
names must lie inside the kernel folder (the containment `src` and `include` have). Flags run
in the build folder `<kernel>/.kbuild/<variant>/`, so relative paths are read from there.
"""

from __future__ import annotations

import re
from pathlib import Path

from kbuild.model import cmakelang
from kbuild.model.schema import Problem, show

# Options whose value (attached, after `=`, or the next flag) is a file or folder.
PATH_OPTIONS = (
    "-I", "-isystem", "-iquote", "-idirafter", "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-isysroot",
    "-cxx-isystem", "-iframework", "-F", "--sysroot", "-include", "-include-pch", "-imacros", "--pre-include",
    "--include-path", "--include-directory", "--system-include", "-L", "--library-path", "-o", "--output-file",
    "-odir", "--output-directory", "--keep-dir", "-MF", "-MJ", "--dependency-output", "--cuda-path",
    "--rocm-path", "--hip-path", "--rocm-device-lib-path", "--hip-device-lib-path", "--gcc-toolchain",
    "--gcc-install-dir", "-resource-dir", "--options-file", "-optf",
)  # fmt: skip
# Options that pick a program (or plugin) for the compiler to run or load.
PROGRAM_OPTIONS = (
    "-B", "-specs", "--specs", "-wrapper", "-fplugin", "-fpass-plugin", "-load", "-ccbin", "--compiler-bindir",
    "--config", "-fuse-ld", "--ld-path",
)  # fmt: skip
# Options that pass a comma-separated list of flags on to another tool (nvcc's host compiler,
# the preprocessor, assembler or linker): each of those is checked as a flag.
PASS_ON_OPTIONS = (
    "-Xcompiler", "--compiler-options", "-Xlinker", "--linker-options", "-Xptxas", "--ptxas-options",
    "-Xnvlink", "--nvlink-options", "-Xarchive", "--archive-options", "-Xpreprocessor", "-Xassembler",
)  # fmt: skip
_WORDS = re.compile(r"[\s,]+")
# CMake-special characters refused in file and folder names (besides control characters).
NAME_SPECIALS = "\"'`$;<>\\#()[]{}"
NAME_FIX = f"rename it: file and folder names may not contain {' '.join(NAME_SPECIALS)} or control characters"
FLAG_FIX = "remove the flag, or write what it means without CMake syntax"


def _prefix(word: str, options: tuple[str, ...]) -> str | None:
    """The longest of `options` that `word` starts with."""
    found = [o for o in options if word.startswith(o)]
    return max(found, key=len) if found else None


def syntax_problem(flag: str) -> Problem | None:
    """What makes `flag` unfit for the generated project regardless of the kernel folder."""
    issue = cmakelang.problem(flag)
    if issue:
        return f"the flag `{show(flag)}` contains {issue}", FLAG_FIX
    if flag.startswith(cmakelang.OPTION_PREFIXES):
        return (
            f"the flag `{show(flag)}` starts with `{flag.split(':')[0]}:`, which CMake rewrites",
            "write each compiler argument as its own flag",
        )
    for word in _words(flag):
        program = _prefix(word, PROGRAM_OPTIONS)
        if program:
            return (
                f"the flag `{show(flag)}` uses `{program}`, which makes the compiler run or load another program",
                "remove it: kbuild compiles with the compilers of the build environment only",
            )
    return None


def _words(flag: str) -> list[str]:
    """The arguments `flag` may stand for once a tool splits it (at spaces and commas), with the
    flags passed on by PASS_ON_OPTIONS unwrapped."""
    words = []
    for word in filter(None, _WORDS.split(flag)):
        option = _prefix(word, PASS_ON_OPTIONS)
        rest = word[len(option) :].lstrip("=") if option else ""
        words.append(rest or word)
    return words


def paths_named(flag: str) -> list[str]:
    """The files and folders `flag` may name: the value of a path option, the value after `=`
    of any other option but -D/-U, `@file`, and each word that is not an option (the value of
    the flag before it, such as `-I`, `dir`)."""
    named = []
    for word in _words(flag):
        if word.startswith("@"):
            named.append(word[1:])
        elif not word.startswith("-"):
            named.append(word)
        elif not word.startswith(("-D", "-U")):
            option = _prefix(word, PATH_OPTIONS)
            value = word[len(option) :] if option else word.partition("=")[2]
            named.append(value.removeprefix("="))
    return [path for path in named if path]


def path_problem(flag: str, kernel_dir: Path) -> Problem | None:
    """A path that `flag` names outside `kernel_dir` (relative ones read from the build folder)."""
    root = kernel_dir.resolve()
    build_dir = root / ".kbuild" / "variant"
    for path in paths_named(flag):
        try:
            resolved = (build_dir / path).resolve() if not path.startswith("~") else None
        except (OSError, RuntimeError):
            resolved = None
        if resolved is None or not (resolved == root or resolved.is_relative_to(root)):
            return (
                f"the flag `{show(flag)}` names `{show(path)}`, which is outside the kernel folder (flags are read "
                "in its build folder .kbuild/<variant>/; a build reads only files of its kernel folder)",
                "list include folders in `include` (relative to the kernel folder) instead, or remove the flag",
            )
    return None


def name_problem(name: str) -> Problem | None:
    """A character of a file or folder name that CMake or a shell would read as syntax."""
    bad = next((c for c in name if c in NAME_SPECIALS or ord(c) < 32 or ord(c) == 127), None)
    if bad is None:
        return None
    return f"`{show(name)}` contains `{show(bad)}`, which CMake reads as syntax", NAME_FIX
