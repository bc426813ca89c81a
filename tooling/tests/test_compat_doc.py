"""docs/kernel-builder-compat.md stays true: every table and key of the manifest schema has a row,
every status is one of three, and every supported or differing row names tests that exist."""

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

from kbuild.model import manifest
from kbuild.model.schema import fields_of

TESTS = Path(__file__).parent
DOC = TESTS.parents[1] / "docs" / "kernel-builder-compat.md"
STATUSES = ("supported", "differs", "not supported")
ROW = re.compile(r"^\|\s*`(?P<key>[^`]+)`\s*\|(?P<status>[^|]+)\|(?P<meaning>[^|]+)\|(?P<tests>[^|]*)\|$")


def _schema_class(tp: Any) -> Any:
    """The schema class within `tp` (X, X | None, list[X], dict[str, X]), or None."""
    return next((c for c in (tp, *typing.get_args(tp)) if dataclasses.is_dataclass(c)), None)


def schema_keys() -> set[str]:
    """Every table and key of kbuild's manifest schema, in the document's spelling."""
    keys: set[str] = set()

    def walk(cls: Any, prefix: str) -> None:
        for field in fields_of(cls):
            name = f"{prefix}.{field.toml}" if prefix else field.toml
            inner = _schema_class(field.type)
            if inner is None:
                keys.add(name)
            elif typing.get_origin(field.type) is list:
                keys.add(name)
                walk(inner, f"{field.toml}[]")  # one entry table, wherever the list is
            elif typing.get_origin(field.type) is dict:
                keys.add(f"[{name}.*]")
                walk(inner, f"{name}.*")
            else:
                keys.add(f"[{name}]")
                walk(inner, name)

    walk(manifest.BuildToml, "")
    return keys


def rows() -> dict[str, re.Match]:
    found = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            match = ROW.match(line)
            assert match, f"malformed row: {line}"
            found[match["key"]] = match
    return found


def test_every_schema_key_has_a_row():
    missing = schema_keys() - set(rows())
    assert not missing, f"add rows to {DOC.name} for: {', '.join(sorted(missing))}"


def test_statuses_and_tests_are_real():
    for key, row in rows().items():
        status = row["status"].strip()
        assert status in STATUSES, f"{key}: status `{status}`"
        tests = [t.strip() for t in row["tests"].split(",") if t.strip()]
        if status == "not supported":
            continue
        assert tests, f"{key}: a {status} row names the tests that show it"
        for test in tests:
            file, _, name = test.partition("::")
            source = (TESTS / file).read_text(encoding="utf-8") if (TESTS / file).is_file() else ""
            assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"{key}: no test {test}"
