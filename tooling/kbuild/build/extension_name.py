"""How the torch binding learns its build's op namespace (`_<name>_<backend>_<uid>`).

The uid changes with every source edit. Compiled into the binding, as the TORCH_EXTENSION_NAME
compile definition, it would recompile the binding (all of torch's headers) on every edit.
So by default the namespace lives only in a generated translation unit, `extension_name.cpp`,
that defines the string the registration macros of `registration.h` read at load time and the
module's `PyInit_<namespace>`; the binding never sees it and recompiles only when it, a header
it includes or build.toml changes. The registered namespace is still the build's input digest.

That covers kernel-builder's convention, `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)`,
`TORCH_LIBRARY_IMPL_EXPAND(...)`, their STABLE_ forms and `REGISTER_EXTENSION(TORCH_EXTENSION_NAME)`.
A kernel that uses TORCH_EXTENSION_NAME in any other way (stringified, in its own PyInit) or
defines those macros itself gets the name as a compile definition, as before.
"""

from __future__ import annotations

import re
from pathlib import Path

from kbuild.model.inputs import EXTENSION_NAME as NAME
from kbuild.model.inputs import SOURCE_SUFFIXES, build_inputs, code_of
from kbuild.model.manifest import Manifest

# The first argument of the macros registration.h defines; the name as any other token is a use.
_REGISTRATION_ARGUMENT = re.compile(
    rf"\b(?:(?:STABLE_)?TORCH_LIBRARY(?:_IMPL)?_EXPAND|REGISTER_EXTENSION)\s*\(\s*{NAME}\s*[,)]"
)
_OWN_MACROS = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(?:(?:STABLE_)?TORCH_LIBRARY(?:_IMPL)?_EXPAND|REGISTER_EXTENSION)\b", re.MULTILINE
)
_NAME = re.compile(rf"\b{NAME}\b")


def _uses_in(code: str) -> list[int]:
    """Offsets in `code` where the name is used other than as a registration macro's argument."""
    allowed = {match.start() + match.group().index(NAME) for match in _REGISTRATION_ARGUMENT.finditer(code)}
    return [m.start() for m in _NAME.finditer(code) if m.start() not in allowed]


def name_in_binding(manifest: Manifest) -> str | None:
    """Why the binding must be compiled with the namespace (`file:line: reason`), or None when
    the generated translation unit can carry it."""
    for rel in build_inputs(manifest):
        if rel.suffix not in SOURCE_SUFFIXES:
            continue
        path: Path = manifest.kernel_dir / rel
        code = code_of(path)
        own = _OWN_MACROS.search(code)
        if own:
            line = code.count("\n", 0, own.start()) + 1
            return f"{rel}:{line}: defines its own registration macros"
        uses = _uses_in(code)
        if uses:
            line = code.count("\n", 0, uses[0]) + 1
            return f"{rel}:{line}: uses {NAME} outside TORCH_LIBRARY*_EXPAND and REGISTER_EXTENSION"
    return None
