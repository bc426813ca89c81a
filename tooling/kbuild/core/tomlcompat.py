"""The standard library's TOML reader, or its backport `tomli` on Python 3.10."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["tomllib"]
