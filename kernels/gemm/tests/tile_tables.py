"""The tile tables of the GPU paths, as Python reads them: `gemm_sm90/tile_configs.def` (Hopper)
and `gemm_rocm/tile_configs.def` (ROCm).

Both are X-macro tables that the C++ includes (`gemm_sm90/sm90_tiles.h` and `sm90_config.h`,
`gemm_rocm/tile_configs.h`), in one style: the tile shapes that have kernels, then the ranked
shapes' measured (Hopper) or computed (ROCm) configurations as `<GPU>_RANKED(m, n, k, block_m,
block_n, split)`. This module is their one Python reader (a benchmark may import it from here, as
compare.py imports reference.py; the tests import nothing from benchmarks/). Each line of a table
is blank, a `//` comment or one entry; anything else, or an entry with the wrong number of fields,
is an error naming the file and line, so a table and its readers cannot drift apart silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

GEMM_DIR = Path(__file__).resolve().parents[1]
SM90_TABLE = GEMM_DIR / "gemm_sm90" / "tile_configs.def"
ROCM_TABLE = GEMM_DIR / "gemm_rocm" / "tile_configs.def"

# The entries of each table and their fields. A field is an integer, but `kblock_us` (a number)
# and `name` (an identifier).
SM90_ENTRIES = {
    "SM90_TILE": ("block_m", "block_n", "kblock_us"),
    "SM90_CANDIDATE": ("block_m", "block_n", "split"),
    "SM90_CONSTANT": ("name", "value"),
    "SM90_RANKED": ("m", "n", "k", "block_m", "block_n", "split"),
    "SM90_SMALL_M": ("n", "k", "min_m", "max_m", "block_m", "block_n", "split"),
    "SM90_SMALL_M_H200": ("n", "k", "min_m", "max_m", "block_m", "block_n", "split"),
}
ROCM_ENTRIES = {
    "ROCM_CONSTANT": ("name", "value"),
    "ROCM_TILE": ("id", "block_m", "block_n"),
    "ROCM_RANKED": ("m", "n", "k", "block_m", "block_n", "split"),
}

_ENTRY = re.compile(r"([A-Z0-9_]+)\((.*)\)")
_FIELD = {
    "kblock_us": re.compile(r"\d+(\.\d+)?"),
    "name": re.compile(r"[A-Za-z_]\w*"),
}
_INTEGER = re.compile(r"\d+")

Shape = tuple[int, int, int]  # (M, N, K)
Config = tuple[int, int, int]  # (block_m, block_n, split)


@dataclass(frozen=True)
class Entry:
    kind: str
    fields: dict[str, int | float | str]
    line: int


def read_table(path: Path, entries: Mapping[str, Sequence[str]]) -> list[Entry]:
    """The entries of the X-macro table at `path`, in order."""
    expected = " or ".join(f"{kind}({', '.join(fields)})" for kind, fields in entries.items())
    found = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        text = raw.split("//", 1)[0].strip()
        if not text:
            continue
        match = _ENTRY.fullmatch(text)
        values = [v.strip() for v in match[2].split(",")] if match else []
        names = entries.get(match[1], ()) if match else ()
        if not names or len(values) != len(names):
            raise ValueError(f"{path}:{number}: expected {expected}, got {text!r}")
        fields: dict[str, int | float | str] = {}
        for name, value in zip(names, values, strict=True):
            if not (_FIELD.get(name) or _INTEGER).fullmatch(value):
                raise ValueError(f"{path}:{number}: {name} = {value!r} in {text!r}")
            fields[name] = value if name == "name" else float(value) if name == "kblock_us" else int(value)
        found.append(Entry(match[1], fields, number))
    return found


def _config(entry: Entry) -> Config:
    return int(entry.fields["block_m"]), int(entry.fields["block_n"]), int(entry.fields["split"])


def _shape(entry: Entry) -> Shape:
    return int(entry.fields["m"]), int(entry.fields["n"]), int(entry.fields["k"])


@dataclass(frozen=True)
class Sm90Table:
    tiles: list[tuple[int, int, float]]  # (block_m, block_n, kblock_us): every shape that has kernels
    candidates: list[Config]  # what the cost model ranks, in its order
    constants: dict[str, int]
    ranked: dict[Shape, Config]  # measured best, on GPUs with constants["kTunedSms"] SMs
    small_m: list[tuple[int, int, int, int, Config]]  # (N, K, min M, max M, config), first match wins
    small_m_h200: list[tuple[int, int, int, int, Config]]  # the same, consulted first on H200-class GPUs


def sm90_table(path: Path = SM90_TABLE) -> Sm90Table:
    table = Sm90Table([], [], {}, {}, [], [])
    for entry in read_table(path, SM90_ENTRIES):
        f = entry.fields
        if entry.kind == "SM90_TILE":
            table.tiles.append((int(f["block_m"]), int(f["block_n"]), float(f["kblock_us"])))
        elif entry.kind == "SM90_CANDIDATE":
            table.candidates.append(_config(entry))
        elif entry.kind == "SM90_CONSTANT":
            table.constants[str(f["name"])] = int(f["value"])
        elif entry.kind == "SM90_RANKED":
            table.ranked[_shape(entry)] = _config(entry)
        else:
            small_m = table.small_m if entry.kind == "SM90_SMALL_M" else table.small_m_h200
            small_m.append((int(f["n"]), int(f["k"]), int(f["min_m"]), int(f["max_m"]), _config(entry)))
    return table


@dataclass(frozen=True)
class RocmTable:
    constants: dict[str, int]
    tiles: list[tuple[int, int]]  # (block_m, block_n), index = tile id
    ranked: dict[Shape, tuple[int, int]]  # (m, n, k) -> (tile id, split_k)


def rocm_table(path: Path = ROCM_TABLE) -> RocmTable:
    table = RocmTable({}, [], {})
    for entry in read_table(path, ROCM_ENTRIES):
        f = entry.fields
        if entry.kind == "ROCM_CONSTANT":
            table.constants[str(f["name"])] = int(f["value"])
        elif entry.kind == "ROCM_TILE":
            if f["id"] != len(table.tiles):
                raise ValueError(f"{path}:{entry.line}: tile ids must be 0, 1, 2, ... in order")
            table.tiles.append((int(f["block_m"]), int(f["block_n"])))
        else:
            block_m, block_n, split = _config(entry)
            if (block_m, block_n) not in table.tiles:
                raise ValueError(f"{path}:{entry.line}: no ROCM_TILE of {block_m}x{block_n} above it")
            table.ranked[_shape(entry)] = (table.tiles.index((block_m, block_n)), split)
    return table
