"""docs/kernel-builder-compat.md stays true: every table and key of the manifest schema has a row,
every status is one of three, and every supported or differing row names tests that exist."""

import re
from pathlib import Path

from kbuild import manifest

TESTS = Path(__file__).parent
DOC = TESTS.parents[1] / "docs" / "kernel-builder-compat.md"
STATUSES = ("supported", "differs", "not supported")
ROW = re.compile(r"^\|\s*`(?P<key>[^`]+)`\s*\|(?P<status>[^|]+)\|(?P<meaning>[^|]+)\|(?P<tests>[^|]*)\|$")


def schema_keys() -> set[str]:
    """Every table and key kbuild's manifest schema knows, in the document's spelling."""
    keys = {f"[{table}]" for table in manifest.TOP_LEVEL_KEYS if table != "kernel"} | {"[kernel.*]"}
    for table, schema in (
        ("general", manifest.GENERAL_KEYS),
        ("general.hub", manifest.HUB_KEYS),
        ("general.cuda", manifest.GENERAL_CUDA_KEYS),
        ("general.xpu", manifest.GENERAL_XPU_KEYS),
        ("general.kernel-depends[]", manifest.KERNEL_DEPENDENCY_KEYS),
        ("torch", manifest.TORCH_KEYS),
        ("torch-noarch", manifest.NOARCH_KEYS),
        ("tvm-ffi", manifest.TVM_FFI_KEYS),
        ("kernel.*", manifest.KERNEL_KEYS),
    ):
        for key, kind in schema.items():
            keys.add(f"[{table}.{key}]" if kind == manifest.ANY_TABLE else f"{table}.{key}")
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
