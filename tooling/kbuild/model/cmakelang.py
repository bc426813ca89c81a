"""The one writer of values into the generated CMake project (templates/project/CMakeLists.txt.j2).

Every value the template emits is written here as a CMake bracket argument (`[==[...]==]`,
with a bracket that the value cannot close), which CMake reads verbatim: no variable
references, no escapes, no end of the argument before the closing bracket. What CMake still
interprets after reading the argument is refused (`problem`): the values land in list
properties (sources, include folders, compile options), where `;` separates items, `\\` and
an unbalanced `[` or `]` move those separators, and `$<...>` is evaluated as a generator
expression. The template environment accepts no value that did not come from here.
"""

from __future__ import annotations

import re

from kbuild.core.errors import KbuildError
from kbuild.model.schema import show

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LIST_SYNTAX = {
    ";": "`;`, which separates list items in CMake",
    "\\": "`\\`, which escapes list separators in CMake",
    "$": "`$`, which starts variable references and generator expressions in CMake",
}

# Compile options that CMake rewrites instead of passing them on as written.
OPTION_PREFIXES = ("SHELL:", "LINKER:")


class Argument(str):
    """A value as this module writes it: the only kind of value the project template accepts."""


def problem(value: str) -> str | None:
    """What CMake would make of `value` other than its literal text (None: nothing)."""
    control = _CONTROL.search(value)
    if control:
        return f"a control character (`{show(control.group())}`, e.g. a line break), which ends CMake arguments"
    for char, why in _LIST_SYNTAX.items():
        if char in value:
            return why
    depth = 0
    for char in value:
        depth += (char == "[") - (char == "]")
        if depth < 0:
            break
    if depth:
        return "an unbalanced `[` or `]`, which changes how CMake splits lists"
    return None


def _checked(value: str) -> str:
    issue = problem(value)
    if issue:
        raise KbuildError(
            f"kbuild cannot write `{show(value, 120)}` into the generated CMake project: it contains {issue}",
            fix="rename the file or folder (or change the value) so that it holds none of these characters",
        )
    return value


def _bracket(text: str) -> Argument:
    level = 0
    while (text + f"]{'=' * level}]").find(f"]{'=' * level}]") != len(text):
        level += 1
    return Argument(f"[{'=' * level}[{text}]{'=' * level}]")


def argument(value: str | int) -> Argument:
    """`value` as one CMake argument that reads back as exactly `value`."""
    return _bracket(_checked(str(value)))


def compile_option(flag: str, language: str | None = None) -> Argument:
    """A compile option, for sources of `language` only when one is given. Compile options are
    evaluated as generator expressions, in which `>` is written `$<ANGLE-R>`."""
    if flag.startswith(OPTION_PREFIXES):
        raise KbuildError(
            f"kbuild cannot write the compile option `{show(flag, 120)}`: CMake splits a `SHELL:` option "
            "into several and reads `LINKER:` as a link option",
            fix="write each compiler argument as its own flag",
        )
    text = _checked(flag).replace(">", "$<ANGLE-R>")
    return _bracket(f"$<$<COMPILE_LANGUAGE:{_checked(language)}>:{text}>" if language else text)


def target_objects(target: str) -> Argument:
    """The object files of the OBJECT library `target`."""
    return _bracket(f"$<TARGET_OBJECTS:{_checked(target)}>")


def variable(name: str, suffix: str = "") -> Argument:
    """With a suffix, the value of the CMake variable `name` followed by `suffix` as one quoted
    argument (`"${NAME}/include"`); without, the name itself (`if(NOT NAME)`). Names are kbuild's own
    upper-case identifiers; suffixes are paths of letters, `_`, `.` and `/`."""
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or not re.fullmatch(r"[\w./]*", suffix):
        raise ValueError(f"not a kbuild CMake variable and suffix: {name!r} {suffix!r}")
    return Argument(f'"${{{name}}}{suffix}"' if suffix else name)


def only_arguments(value: object) -> Argument:
    """The template's `finalize`: an expression that did not pass through this module is a kbuild bug."""
    if isinstance(value, Argument):
        return value
    raise TypeError(f"a template value was not written by kbuild.model.cmakelang: {value!r}")
