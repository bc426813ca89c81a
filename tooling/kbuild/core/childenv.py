"""The environment of every child process that runs a kernel's code (`kbuild test`'s pytest, the
loading check of `kbuild all`, the API probes of `kbuild api-check`, `publish` and `verify`): the
caller's, less every credential, so that a tampered `__init__.py` or test reads no token.

A variable is a credential when its name holds `token`, `secret`, `passw`, `key`, `credential` or
`auth` (any case): `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
`SSH_AUTH_SOCK`, ... `HF_TOKEN_PATH` points at an empty file, so huggingface_hub in the child does
not pick up the token stored by `hf auth login` either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

CREDENTIAL = re.compile(r"token|secret|passw|key|credential|auth", re.IGNORECASE)


def without_credentials(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) without the variables that hold credentials."""
    source = os.environ if environ is None else environ
    kept = {name: value for name, value in source.items() if not CREDENTIAL.search(name)}
    kept["HF_TOKEN_PATH"] = os.devnull
    return kept
