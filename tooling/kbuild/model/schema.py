"""TOML tables as typed dataclasses: the classes are the schema, this module validates against them.

A dataclass field is a key of its table. Its annotation is the value's type (`str`, `int`,
`bool`, `list[T]`, `dict[str, T]`, another dataclass for a sub-table, `A | B`, `| None` for an
optional key); a field without a default is a required key. `key(...)` adds what the
annotation cannot say: the TOML name when it is not the field name with `_` -> `-`, a rule
for each value, one for the names of a `dict` table, and an example for the fix line. A
class that derives from `Checked` adds a rule across its keys.
Every error names the file, the line of the key (or of its table) and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from kbuild.core.errors import ManifestError

T = TypeVar("T")
# A rule looks at one value and returns None, or (what is wrong, how to fix it).
Problem = tuple[str, str]
Rule = Callable[[Any], "Problem | None"]
TOML_INT_RANGE = range(-(2**63), 2**63)
TABLE_NAME = "table-name"


@dataclass(frozen=True)
class Key:
    toml: str | None = None
    rule: Rule | None = None
    names: Rule | None = None
    example: str = ""


def key(
    toml: str | None = None,
    *,
    default: Any = dataclasses.MISSING,
    factory: Callable[[], Any] | None = None,
    rule: Rule | None = None,
    names: Rule | None = None,
    example: str = "",
) -> Any:
    """A field with schema details."""
    metadata = {"key": Key(toml, rule, names, example)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def table_name() -> Any:
    """A field that receives the name of its table (`[kernel.<name>]`) instead of a key."""
    return dataclasses.field(metadata={TABLE_NAME: True})


class Checked:
    """A schema class with a rule across its keys: `problem()` returns None or (message, fix)."""

    def problem(self) -> Problem | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Field:
    name: str
    toml: str
    type: Any
    info: Key
    required: bool


@cache
def fields_of(cls: Any) -> tuple[Field, ...]:
    """The TOML keys of a schema class, in declaration order."""
    hints = typing.get_type_hints(cls)
    result = []
    for f in dataclasses.fields(cls):
        if f.metadata.get(TABLE_NAME):
            continue
        info = f.metadata.get("key", Key())
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        result.append(Field(f.name, info.toml or f.name.replace("_", "-"), hints[f.name], info, required))
    return tuple(result)


def closest(value: str, allowed: Sequence[str]) -> str | None:
    """The one spelling in `allowed` closest to `value`; None when none is close, or when two
    are equally close (`gpu` is as near to `cpu` as to `xpu`: neither is what was meant)."""
    scores = sorted(((difflib.SequenceMatcher(None, value, a).ratio(), a) for a in allowed), reverse=True)
    if not scores or scores[0][0] < 0.6 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return None
    return scores[0][1]


def one_of(
    allowed: Sequence[str] | Callable[[], Sequence[str]],
    what: str = "value",
    *,
    meant: dict[str, str] | Callable[[], dict[str, str]] | None = None,
) -> Rule:
    """Allow only `allowed`; the fix suggests the closest one and lists them all. `meant` maps
    words users write for a value that no spelling is close to (`gpu`) to what they mean. Either
    may be a function, asked each time a value is checked (the backends registered then)."""

    def rule(value: str) -> Problem | None:
        values = allowed() if callable(allowed) else allowed
        if value in values:
            return None
        close = closest(value, values)
        hint = f"did you mean `{close}`? " if close else ""
        words = meant() if callable(meant) else meant
        if words and value.lower() in words:
            hint = f"{words[value.lower()]}; "
        return f"unknown {what} `{show(value)}`", f"{hint}valid: {', '.join(values)}"

    return rule


def matches(pattern: str, what: str, example: str) -> Rule:
    regex = re.compile(pattern)

    def rule(value: str) -> Problem | None:
        if regex.fullmatch(value):
            return None
        return f"invalid {what} `{show(value)}`", f"write it like {example}"

    return rule


def show(value: Any, limit: int = 60) -> str:
    """A value for a message: short, on one line."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_type(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is list:
        return f"list of {describe_type(typing.get_args(tp)[0])}s"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "table"
    return {str: "string", int: "integer", bool: "boolean"}.get(tp, str(tp))


def describe_value(value: Any) -> str:
    if isinstance(value, str):
        return f'string "{show(value)}"'
    kind = {int: "integer", bool: "boolean", float: "float", list: "list", dict: "table"}
    return f"{kind.get(type(value), type(value).__name__)} {show(value)}"


def _has_shape(tp: Any, value: Any) -> bool:
    """Whether `value` has the outer shape of `tp` (picks the arm of a union)."""
    origin = typing.get_origin(tp)
    if origin is list:
        return isinstance(value, list)
    if origin is dict or dataclasses.is_dataclass(tp):
        return isinstance(value, dict)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def dotted(path: Sequence[str]) -> str:
    return ".".join(p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else f'"{show(p)}"' for p in path)


_BARE_OR_QUOTED = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_BARE_OR_QUOTED}(?:\s*\.\s*{_BARE_OR_QUOTED})*"
_HEADER = re.compile(rf"\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?")
_KEY = re.compile(rf"\s*({_DOTTED})\s*=")
_PART = re.compile(_BARE_OR_QUOTED)


def _parts(text: str) -> tuple[str, ...]:
    return tuple(p[1:-1] if p[0] in "\"'" else p for p in _PART.findall(text))


class SourceMap:
    """Line numbers of tables and keys, read from the text (tomllib keeps none)."""

    def __init__(self, text: str):
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.split("\n"), start=1):
            header = _HEADER.fullmatch(line)
            if header:
                table = _parts(header.group(1))
                self.lines.setdefault(table, number)
                continue
            assignment = _KEY.match(line)
            if assignment:
                self.lines.setdefault(table + _parts(assignment.group(1)), number)

    def line(self, path: tuple[str, ...]) -> int | None:
        """The line of `path`; else of the first key inside it; else of the nearest enclosing table."""
        if path in self.lines:
            return self.lines[path]
        inside = [n for p, n in self.lines.items() if p[: len(path)] == path]
        if inside:
            return min(inside)
        for end in range(len(path) - 1, 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None


class Validator:
    """Builds schema objects from parsed TOML, raising ManifestError at the first problem."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.source = SourceMap(text)

    def error(self, where: tuple[str, ...], message: str, fix: str) -> ManifestError:
        label = f"[{dotted(where[:-1])}] {where[-1]}" if len(where) > 1 else f"[{dotted(where)}]"
        return ManifestError(f"{label}: {message}", file=self.path, line=self.source.line(where), fix=fix)

    def table(self, cls: type[T], value: Any, where: tuple[str, ...], name: str | None = None) -> T:
        if not isinstance(value, dict):
            raise self.error(
                where, f"expected a table, got {describe_value(value)}", f"write [{dotted(where)}] as a table"
            )
        schema: Any = cls
        known = {f.toml: f for f in fields_of(schema)}
        for toml_key in value:
            if toml_key not in known:
                close = difflib.get_close_matches(toml_key, list(known), n=1)
                if not where:
                    raise ManifestError(
                        f"unknown table `[{show(toml_key)}]`",
                        file=self.path,
                        line=self.source.line((toml_key,)),
                        fix=f"did you mean `[{close[0]}]`?" if close else f"valid tables: {', '.join(known)}",
                    )
                fix = f"did you mean `{close[0]}`?" if close else f"valid keys: {', '.join(known) or 'none'}"
                raise self.error((*where, toml_key), f"unknown key `{show(toml_key)}`", fix)
        values: dict[str, Any] = {}
        for f in known.values():
            if f.toml in value:
                values[f.name] = self.value(f.type, value[f.toml], (*where, f.toml), f.info)
            elif f.required:
                example = f.info.example or "..."
                raise self.error(
                    where, f"missing required key `{f.toml}`", f"add `{f.toml} = {example}` to [{dotted(where)}]"
                )
        if name is not None:
            values.update({f.name: name for f in dataclasses.fields(schema) if f.metadata.get(TABLE_NAME)})
        result = cls(**values)
        problem = result.problem() if isinstance(result, Checked) else None
        if problem:
            raise self.error(where, *problem)
        return result

    def value(self, tp: Any, value: Any, where: tuple[str, ...], info: Key) -> Any:
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            for arm in typing.get_args(tp):
                if arm is not type(None) and _has_shape(arm, value):
                    return self.value(arm, value, where, info)
            raise self.type_error(tp, value, where, info)
        if dataclasses.is_dataclass(tp):
            return self.table(typing.cast(type, tp), value, where)
        if not _has_shape(tp, value):
            raise self.type_error(tp, value, where, info)
        if origin is list:
            (item_type,) = typing.get_args(tp)
            return [self.value(item_type, item, where, info) for item in value]
        if origin is dict:
            _, item_type = typing.get_args(tp)
            result: dict[str, Any] = {}
            for name, item in value.items():
                problem = info.names(name) if info.names else None
                if problem:
                    raise self.error((*where, name), *problem)
                if dataclasses.is_dataclass(item_type):
                    result[name] = self.table(typing.cast(type, item_type), item, (*where, name), name=name)
                else:
                    result[name] = self.value(item_type, item, (*where, name), info)
            return result
        if tp is int and value not in TOML_INT_RANGE:
            raise self.error(where, f"{show(value)} is out of range", "TOML integers are 64-bit: use a smaller number")
        problem = info.rule(value) if info.rule else None
        if problem:
            raise self.error(where, *problem)
        return value

    def type_error(self, tp: Any, value: Any, where: tuple[str, ...], info: Key) -> ManifestError:
        expected = describe_type(tp)
        example = f", e.g. `{where[-1]} = {info.example}`" if info.example else ""
        article = "an" if expected[0] in "aeiou" else "a"
        return self.error(
            where, f"expected {article} {expected}, got {describe_value(value)}", f"write {article} {expected}{example}"
        )
