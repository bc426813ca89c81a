"""The Hopper tile set: force_tile_config (Python picks the tile, for sweeps) and the wgmma
wrappers are their generator's output. test_tile_tables.py checks the tables themselves."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from reference import make_gemm_inputs, verify
from tile_tables import sm90_table

pytestmark = pytest.mark.kernels_ci


def is_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(is_hopper(), reason="Hopper builds take the configuration")
def test_builds_without_the_hopper_path_say_so(kernel):
    with pytest.raises(RuntimeError, match="no Hopper"):
        kernel.force_tile_config((128, 128, 1))
    kernel.force_tile_config(None)  # going back to the default is always fine


@pytest.mark.skipif(not is_hopper(), reason="needs an sm_90 GPU")
def test_every_forced_tile_computes_the_product(kernel, rng):
    """Each tile of the table, forced, gives a correct result on a shape off every tuned table;
    a tile without kernels is refused."""
    a, b, a_scale, b_scale, out = make_gemm_inputs(300, 520, 1000, torch.float8_e4m3fn, "cuda", rng)
    try:
        for block_m, block_n, _ in sm90_table().tiles:
            kernel.force_tile_config((block_m, block_n, 1))
            out.fill_(float("nan"))
            kernel.gemm(a, b, a_scale, b_scale, out)
            assert verify(out, a, b, a_scale, b_scale).ok, (block_m, block_n)
        with pytest.raises(RuntimeError, match="no kernel for this tile"):
            kernel.force_tile_config((100, 100, 1))
    finally:
        kernel.force_tile_config(None)


@pytest.mark.skipif(not is_hopper(), reason="needs an sm_90 GPU")
def test_the_bias_is_added_once_on_every_split(kernel, rng):
    """fp8_linear with a bias on forced tiles and splits 1-4: the split-K paths (partials pushed
    to the peer CTA, or reduced over the cluster) add it once, as the unsplit ones do."""
    x = torch.randn(200, 1024, generator=rng, device="cuda").to(torch.bfloat16)
    w = torch.randn(520, 1024, generator=rng, device="cuda") / 32
    weight, scale = kernel.quantize_per_block(w)
    bias = torch.randn(520, generator=rng, device="cuda").to(torch.bfloat16) * 4
    expected = kernel.fp8_linear(x, weight, scale).float() + bias.float()
    try:
        for tile in ((128, 128), (64, 128), (128, 64)):
            for split in (1, 2, 3, 4):
                kernel.force_tile_config((*tile, split))
                got = kernel.fp8_linear(x, weight, scale, bias).float()
                torch.testing.assert_close(got, expected, rtol=2**-7, atol=2**-6, msg=f"{tile} split {split}")
    finally:
        kernel.force_tile_config(None)


@pytest.mark.skipif(shutil.which("clang-format") is None, reason="needs clang-format (the dev extra has it)")
def test_wgmma_header_is_the_generators_output():
    """gemm_sm90/wgmma_fp8.cuh is gemm_sm90/wgmma_fp8.py's output after clang-format."""
    sm90 = Path(__file__).resolve().parents[1] / "gemm_sm90"
    generated = subprocess.run(
        [sys.executable, str(sm90 / "wgmma_fp8.py")], check=True, capture_output=True, text=True
    ).stdout
    formatted = subprocess.run(
        ["clang-format", f"--assume-filename={sm90 / 'wgmma_fp8.cuh'}"],
        input=generated,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert formatted == (sm90 / "wgmma_fp8.cuh").read_text(), "regenerate: see the docstring of wgmma_fp8.py"
