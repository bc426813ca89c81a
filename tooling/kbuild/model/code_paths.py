"""One CUDA capability per distinct code path of a `[kernel.*]` table: what CI compiles.

A table's sources (those it lists and the kernel's own headers they include with `#include "..."`)
take a different path for a capability only where they compare `__CUDA_ARCH__` (or
`__CUDA_ARCH_SPECIFIC__`, `__CUDA_ARCH_FAMILY_SPECIFIC__`) with a number, or where the capability
is arch- or family-specific (`9.0a`, `10.0f`: the `__CUDA_ARCH_FEAT_*` macros and those two).
Capabilities on the same side of every such number, with the same suffix, compile the same code,
so one of them (the oldest) checks it. A use of those macros that
is neither a number comparison nor a `defined(...)` / `#ifdef` test keeps every capability.
The branches inside library headers (CUDA's, CUTLASS's) are theirs and not counted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from kbuild.model import cuda

if TYPE_CHECKING:
    from kbuild.model.manifest import KernelSpec

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_OPS = ("==", "!=", ">=", "<=", ">", "<")
_OP = "|".join(re.escape(op) for op in _OPS)
# __CUDA_ARCH__, and the value the arch-specific (9.0a) and family-specific (10.0f) targets also get.
_MACRO = r"__CUDA_ARCH(?:_SPECIFIC|_FAMILY_SPECIFIC)?__"
_COMPARISON = re.compile(rf"{_MACRO}\s*({_OP})\s*(\d+)|(\d+)\s*({_OP})\s*{_MACRO}")
_PRESENCE = re.compile(rf"defined\s*\(?\s*{_MACRO}\s*\)?|#\s*if(?:n)?def\s+{_MACRO}")
_MIRRORED = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "==": "==", "!=": "!="}


def _sources(kernel_dir: Path, kernel: KernelSpec) -> list[Path]:
    """The table's listed sources and, transitively, the kernel's own files they include."""
    roots = [kernel_dir / rel for rel in kernel.include]
    pending = [kernel_dir / rel for rel in kernel.src]
    seen: list[Path] = []
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file() or path.is_symlink():
            continue
        seen.append(path)
        for name in _INCLUDE.findall(path.read_text(encoding="utf-8", errors="replace")):
            for folder in (path.parent, *roots, kernel_dir):
                candidate = (folder / name).resolve()
                if candidate.is_relative_to(kernel_dir) and candidate.is_file():
                    pending.append(candidate)
                    break
    return seen


def _boundaries(text: str) -> set[int] | None:
    """The `__CUDA_ARCH__` values where `text`'s code changes (a path starts at each); None when
    `text` uses `__CUDA_ARCH__` in a way this cannot follow."""
    code = _COMMENT.sub(" ", text)
    found: set[int] = set()
    for match in _COMPARISON.finditer(code):
        op, value = (match[1], int(match[2])) if match[1] else (_MIRRORED[match[4]], int(match[3]))
        if op in (">=", "<"):
            found.add(value)
        elif op in (">", "<="):
            found.add(value + 1)
        else:
            found |= {value, value + 1}
    rest = _PRESENCE.sub(" ", _COMPARISON.sub(" ", code))
    return None if re.search(_MACRO, rest) else found


def _arch_number(capability: str) -> int:
    """'8.9' -> 890, '10.0a' -> 1000: the value of `__CUDA_ARCH__` when compiling for it."""
    major, minor = cuda.capability_base(capability).split(".")
    return int(major) * 100 + int(minor) * 10


def one_per_code_path(kernel_dir: Path, kernel: KernelSpec, capabilities: list[str]) -> list[str]:
    """The oldest of `capabilities` on each distinct code path of `kernel`'s sources, in the
    order of `capabilities`."""
    boundaries: set[int] = set()
    for path in _sources(kernel_dir, kernel):
        found = _boundaries(path.read_text(encoding="utf-8", errors="replace"))
        if found is None:
            return capabilities
        boundaries |= found
    chosen: dict[tuple[int, str], str] = {}
    for capability in sorted(capabilities, key=_arch_number):
        number = _arch_number(capability)
        suffix = capability.removesuffix("+PTX")[len(cuda.capability_base(capability)) :]
        chosen.setdefault((sum(number >= b for b in boundaries), suffix), capability)
    return [cap for cap in capabilities if cap in chosen.values()]
