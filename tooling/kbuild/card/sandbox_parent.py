"""Rendering a contributor's CARD.md in a child process (kbuild.card.sandbox_child) bounded in time
(a wall-clock timeout and a CPU-time limit) and memory (an address-space limit).

Jinja's sandbox keeps a card from Python internals; the bounds keep it from the machine: a
template can ask for `"a" * 10**9`, `10**10**7` or nested loops that would run for hours, and the
release job that renders it holds the Hub token (the child gets an empty environment).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kbuild.core.errors import KbuildError

SECONDS = 10
MEMORY_BYTES = 256 << 20
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from kbuild.card.sandbox_child import main; main()"
_GROWS = "a card shows its data: drop repetition, arithmetic or loops that grow without bound"


def render(text: str, path: Path, context: dict[str, Any], filters: dict[str, Callable[..., Any]]) -> str:
    """`text` rendered with `context` and `filters` (module-level functions); a KbuildError naming
    `path` when the template is invalid, fails, or passes a bound."""
    command = [sys.executable, "-I", "-c", _CHILD, str(_PACKAGE_ROOT), str(SECONDS), str(MEMORY_BYTES)]
    request = pickle.dumps((text, context, filters))
    try:
        result = subprocess.run(command, input=request, capture_output=True, env={}, timeout=SECONDS)
    except subprocess.TimeoutExpired:
        raise KbuildError(f"rendering the card took longer than {SECONDS} s", file=str(path), fix=_GROWS) from None
    if result.returncode < 0:  # killed at its CPU-time limit
        raise KbuildError(f"rendering the card used more than {SECONDS} s of CPU", file=str(path), fix=_GROWS)
    if result.returncode != 0:
        raise RuntimeError(f"the card renderer failed: {result.stderr.decode(errors='replace').strip()[-500:]}")
    answer = json.loads(result.stdout)
    if "error" in answer:
        message, line, fix = answer["error"]
        if message is None:
            message, fix = f"rendering the card needs more than {MEMORY_BYTES >> 20} MiB of memory", _GROWS
        raise KbuildError(message, file=str(path), where=line, fix=fix)
    for name, line in answer["unknown"]:
        warnings.warn(
            f"{path}:{line}: the card reads `{name}`, which kbuild's card context does not define: it renders as "
            f"nothing (as in kernel-builder); fix: use one of {', '.join(sorted(context))}",
            stacklevel=2,
        )
    text = str(answer["text"])
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise KbuildError(
            f"the card renders {text[err.start]!r}, a lone surrogate that is not Unicode text",
            file=str(path),
            fix="remove the `\\ud800`-style escape from the card",
        ) from None
    return text
