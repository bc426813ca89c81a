"""The tile tables of both GPU paths (gemm_sm90/tile_configs.def, gemm_rocm/tile_configs.def)
through their one reader, tile_tables.py: each table is well formed and names only tiles it has.
The ROCm rule that uses its table is checked against the C++ in test_rocm_model.py."""

import pytest
import reference
from tile_tables import SM90_ENTRIES, read_table, rocm_table, sm90_table

pytestmark = pytest.mark.kernels_ci


def test_hopper_tiles_are_shapes_the_kernels_take():
    tiles = sm90_table().tiles
    assert len(tiles) == len({(m, n) for m, n, _ in tiles}), "each shape once"
    for block_m, block_n, kblock_us in tiles:
        assert block_m in (64, 128, 192) and block_n % 8 == 0 and 0 < kblock_us < 2


def test_hopper_tables_name_only_tiles_that_have_kernels():
    table = sm90_table()
    shapes = {(m, n) for m, n, _ in table.tiles}
    small_m = [*table.small_m, *table.small_m_h200]
    configs = [*table.candidates, *table.ranked.values(), *(entry[4] for entry in small_m)]
    assert configs and all((m, n) in shapes and 1 <= split <= 4 for m, n, split in configs)
    assert len(table.candidates) == len(set(table.candidates)), "each candidate once"


def test_both_tables_rank_the_same_shapes():
    assert sorted(sm90_table().ranked) == sorted(reference.RANKED_SHAPES)
    assert sorted(rocm_table().ranked) == sorted(reference.RANKED_SHAPES)
    assert sm90_table().constants == {"kTunedSms": 132}


def test_hopper_small_m_ranges_are_within_the_tokens_they_serve():
    """SM90_SMALL_M: 9-128 tokens, where the decode kernel declines; SM90_SMALL_M_H200 may start
    at one token (it then takes those from the decode kernel)."""
    table = sm90_table()
    assert table.small_m and table.small_m_h200
    for _n, _k, min_m, max_m, _config in table.small_m:
        assert 9 <= min_m <= max_m <= 128
    for _n, _k, min_m, max_m, _config in table.small_m_h200:
        assert 1 <= min_m <= max_m <= 128


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("SM90_TILE(128, 128)\n", r":2: expected SM90_TILE\(block_m, block_n, kblock_us\) or "),
        ("SM90_TILE 128, 128, 0.39\n", r":2: expected SM90_TILE"),
        ("SM90_TILES(128, 128, 0.39)\n", r":2: expected SM90_TILE"),
        ("SM90_CANDIDATE(128, 128, 0.5)\n", r":2: split = '0.5'"),
        ("SM90_CONSTANT(7, 132)\n", r":2: name = '7'"),
    ],
)
def test_a_bad_table_line_is_an_error(tmp_path, text, error):
    table = tmp_path / "tile_configs.def"
    table.write_text("SM90_TILE(128, 128, 0.39)  // a comment\n" + text)
    with pytest.raises(ValueError, match=error):
        read_table(table, SM90_ENTRIES)


def test_rocm_ranked_entries_name_a_tile_of_the_table(tmp_path):
    table = tmp_path / "tile_configs.def"
    table.write_text("ROCM_TILE(0, 128, 128)\nROCM_RANKED(1024, 512, 7168, 128, 64, 4)\n")
    with pytest.raises(ValueError, match=r":2: no ROCM_TILE of 128x64"):
        rocm_table(table)
    table.write_text("ROCM_TILE(1, 128, 128)\n")
    with pytest.raises(ValueError, match=r":1: tile ids must be 0, 1, 2"):
        rocm_table(table)
