"""The child process of kbuild.card.sandbox_parent: sets its limits, reads the card, its context and
filters (pickled by the parent) from stdin, renders it in Jinja's immutable sandbox and answers
on stdout in JSON (nothing the parent would execute): {"text": ..., "unknown": [[name, line], ...]}
or {"error": [message, line, fix]}, the message null when the card ran out of memory. A card is
one file: `{% include %}`, `{% import %}` and `{% extends %}` are refused.

A variable the context lacks behaves as in kernel-builder's renderer (minijinja's default, lenient
mode): it prints as nothing, is false and iterates as empty; reading an attribute of it is an
error. `unknown` names each such variable and its first line, for the parent to warn about."""

from __future__ import annotations

import json
import pickle
import resource
import sys
import traceback
from collections.abc import Callable
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

_TAGS = {
    nodes.Include: "include",
    nodes.Import: "import",
    nodes.FromImport: "from ... import",
    nodes.Extends: "extends",
}


class _Refused(Exception):
    def __init__(self, message: str, line: int | None, fix: str):
        super().__init__(message)
        self.problem = (message, line, fix)


def main() -> None:
    seconds, memory = int(sys.argv[2]), int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    text, context, filters = pickle.loads(sys.stdin.buffer.read())
    try:
        rendered, unknown = render(text, context, filters)
        answer: dict[str, Any] = {"text": rendered, "unknown": unknown}
    except _Refused as refused:
        answer = {"error": refused.problem}
    except MemoryError as err:
        answer = {"error": (None, _line(err), None)}
    sys.stdout.write(json.dumps(answer))


def render(
    text: str, context: dict[str, Any], filters: dict[str, Callable[..., Any]]
) -> tuple[str, list[tuple[str, int]]]:
    """The rendered card and the variables it reads that `context` lacks, with their first line."""
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.Undefined, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True
    )
    env.globals.clear()  # no `lipsum`, `cycler`, `joiner`, `namespace`, `range`, `dict`
    env.filters.update(filters)
    names = ", ".join(sorted(context))
    try:
        template = env.parse(text)
        for node in template.find_all(tuple(_TAGS)):
            raise _Refused(
                f"`{{% {_TAGS[type(node)]} %}}` is not allowed in a card",
                node.lineno,
                "a card is one file: write the text here instead of loading another template",
            )
        variables = list(template.find_all(nodes.Name))
        assigned = {variable.name for variable in variables if variable.ctx != "load"}  # set, loop, macro
        first: dict[str, int] = {}
        for variable in variables:
            if variable.ctx == "load" and variable.name not in assigned and variable.name not in context:
                first.setdefault(variable.name, variable.lineno)
        return env.from_string(template).render(context), sorted(first.items(), key=lambda item: item[1])
    except jinja2.TemplateSyntaxError as err:
        raise _Refused(f"template syntax: {err.message}", err.lineno, "fix the Jinja syntax") from None
    except SecurityError as err:
        raise _Refused(
            f"the card template tried an unsafe operation: {err}", _line(err), f"a card may only show its data: {names}"
        ) from None
    except jinja2.UndefinedError as err:
        raise _Refused(f"template uses an unknown variable: {err.message}", _line(err), f"use only: {names}") from None
    except (MemoryError, _Refused):
        raise
    except Exception as err:  # the template's own expression failed: `1 / 0`, a 5000-digit number as text, ...
        detail = " ".join(str(err).split())[:200]
        raise _Refused(
            f"the card template failed: {type(err).__name__}: {detail}", _line(err), "fix the expression"
        ) from None


def _line(err: BaseException) -> int | None:
    """The template line where `err` was raised (Jinja names template frames `<template>`)."""
    lines = [frame.lineno for frame in traceback.extract_tb(err.__traceback__) if frame.filename == "<template>"]
    return lines[-1] if lines else None
