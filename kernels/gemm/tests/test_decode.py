"""Small M (decode sizes): every M the Hopper path's decode kernel may take and the sizes
around its crossover, both entry points, K and N off the 128 grid. On CUDA each test runs on
the default dispatch and the forced general path (`path`); run the file again with
GEMM_FORCE_NO_DECODE=1 for the default dispatch without the decode kernel."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gpu_kernels import gpu_kernels_run, hopper_dispatch
from reference import Layout, ceil_div, make_gemm_inputs, poisoned_out, verify
from tile_tables import sm90_table

# (N, K): N odd; K = 8 * 128 + 16 (a partial last 128-K block); two DeepSeek-V3 shapes;
# K = 1001 (rows not 16-byte aligned: not the decode kernel's); K = 48 (a single partial block).
QUICK_M = [1, 2, 7, 8, 9, 16, 31, 33, 63, 64, 65, 128, 129, 256]
QUICK_NK = [(577, 1040), (576, 7168), (1536, 7168), (300, 1001), (129, 48)]
SWEEP_NK = (577, 1040)


def nt_inputs(M, N, K, dtype, device, rng, a_scale_m_contiguous=True):
    """gemm_nt's operands: a (M, K) and w (N, K) row-major, a_scale (M, kb) M-contiguous (or
    row-major)."""
    kb, nb = ceil_div(K, 128), ceil_div(N, 128)
    a = torch.randn(M, K, generator=rng, device=device).to(dtype)
    w = torch.randn(N, K, generator=rng, device=device).to(dtype)
    a_scale = torch.randn(kb, M, generator=rng, device=device).t()
    if not a_scale_m_contiguous:
        a_scale = a_scale.contiguous()
    w_scale = torch.randn(nb, kb, generator=rng, device=device)
    return a, w, a_scale, w_scale


def check_nt(kernel, M, N, K, dtype, device, rng, a_scale_m_contiguous=True):
    a, w, a_scale, w_scale = nt_inputs(M, N, K, dtype, device, rng, a_scale_m_contiguous)
    out = poisoned_out(M, N, device)
    kernel.gemm_nt(a, w, a_scale, w_scale, out)
    verdict = verify(out, a, w.t(), a_scale.t(), w_scale.t())
    assert verdict.ok, f"gemm_nt {M}x{N}x{K}: {verdict}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("nk", QUICK_NK, ids=str)
@pytest.mark.parametrize("M", QUICK_M)
def test_gemm_nt_small_m(kernel, device, fp8_dtype, rng, path, M, nk):
    check_nt(kernel, M, *nk, fp8_dtype, device, rng)


# Each (N, K) of the decode kernel's measured table on both sides of its limit (max_m = 8) and of
# the small-M tile table's ranges (9-64, 65-128, then the cost model). CUDA only: the tables are
# the Hopper path's.
TUNED_NK = [(7168, 2048), (4608, 7168), (1536, 7168), (576, 7168), (3072, 1536), (4096, 512), (7168, 2304), (7168, 256)]


@pytest.mark.kernels_ci
@pytest.mark.parametrize("nk", TUNED_NK, ids=str)
@pytest.mark.parametrize("M", [1, 8, 9, 16, 64, 65, 128, 129])
def test_tuned_decode_shapes(kernel, device, fp8_dtype, rng, M, nk):
    if device.type != "cuda":
        pytest.skip("the measured decode table is the Hopper path's")
    check_nt(kernel, M, *nk, fp8_dtype, device, rng)


def h200_class(device) -> bool:
    """What the Hopper path takes for an H200 (its SM90_SMALL_M_H200 entries): more than 100 GiB of memory."""
    return torch.cuda.get_device_properties(device).total_memory > 100 << 30


@pytest.mark.kernels_ci
@pytest.mark.parametrize("nk", [(4608, 7168), (7168, 256)], ids=str)
@pytest.mark.parametrize("M", [1, 8])
def test_decode_kernel_takes_the_tuned_shapes_but_the_h200_entries(kernel, device, fp8_dtype, rng, M, nk):
    """Up to 8 tokens the decode kernel takes the DeepSeek-V3 shapes of its measured table, but on an
    H200-class GPU those an SM90_SMALL_M_H200 entry covers go to the tiles (7168 x 256: measured faster
    there)."""
    if not hopper_dispatch(kernel, device):
        pytest.skip("the decode kernel is the Hopper path's (not a Hopper GPU, or the general path forced)")
    table = sm90_table()
    if torch.cuda.get_device_properties(device).multi_processor_count != table.constants["kTunedSms"]:
        pytest.skip("the decode kernel's measured table is for GPUs of kTunedSms SMs")
    if os.environ.get("GEMM_FORCE_NO_DECODE") == "1":
        pytest.skip("GEMM_FORCE_NO_DECODE=1 switches the decode kernel off")
    N, K = nk
    a, w, a_scale, w_scale = nt_inputs(M, N, K, fp8_dtype, device, rng)
    out = poisoned_out(M, N, device)
    names = gpu_kernels_run(lambda: kernel.gemm_nt(a, w, a_scale, w_scale, out))
    h200_entry = any(n == N and k == K and lo <= M <= hi for n, k, lo, hi, _ in table.small_m_h200)
    decode = not (h200_class(device) and h200_entry)
    assert any("fp8_decode_kernel" in name for name in names) == decode, names
    assert verify(out, a, w.t(), a_scale.t(), w_scale.t()).ok


# The same tables with row-major A scales: the tiles' kernels that read them from global memory.
@pytest.mark.kernels_ci
@pytest.mark.parametrize("nk", TUNED_NK, ids=str)
@pytest.mark.parametrize("M", [16, 65])
def test_tuned_decode_shapes_row_major_scales(kernel, device, fp8_dtype, rng, M, nk):
    if device.type != "cuda":
        pytest.skip("the measured decode table is the Hopper path's")
    check_nt(kernel, M, *nk, fp8_dtype, device, rng, a_scale_m_contiguous=False)


# The narrow small-M tiles' element-store epilogue (column-major out), after a split of 2 whose
# partials are pushed into the peer CTA: 64x64 (1536x7168, M = 32) and 64x32 (576x7168, M = 65).
@pytest.mark.kernels_ci
@pytest.mark.parametrize("mnk", [(32, 1536, 7168), (65, 576, 7168)], ids=str)
def test_tuned_shapes_column_major_out(kernel, device, fp8_dtype, rng, mnk):
    if device.type != "cuda":
        pytest.skip("the measured small-M table is the Hopper path's")
    layout = Layout(b_row=False, out_row=False)
    a, b, a_scale, b_scale, out = make_gemm_inputs(*mnk, fp8_dtype, device, rng, layout)
    kernel.gemm(a, b, a_scale, b_scale, out)
    verdict = verify(out, a, b, a_scale, b_scale)
    assert verdict.ok, f"gemm {mnk} {layout.name}: {verdict}"


# gemm with K-contiguous b (a (K, N) view of row-major weights), and with out column-major.
@pytest.mark.kernels_ci
@pytest.mark.parametrize(
    "layout",
    [Layout(b_row=False), Layout(b_row=False, a_scale_row=False, out_row=False)],
    ids=lambda layout: layout.name,
)
@pytest.mark.parametrize("M", [1, 8, 37, 64])
def test_gemm_small_m(kernel, device, fp8_dtype, rng, path, M, layout):
    a, b, a_scale, b_scale, out = make_gemm_inputs(M, 1031, 2320, fp8_dtype, device, rng, layout)
    kernel.gemm(a, b, a_scale, b_scale, out)
    verdict = verify(out, a, b, a_scale, b_scale)
    assert verdict.ok, f"gemm {M}x1031x2320 {layout.name}: {verdict}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("M", [1, 32])
def test_small_m_is_deterministic(kernel, device, fp8_dtype, rng, M):
    """Split-K partial sums are added in a fixed order: repeated calls agree bit for bit."""
    a, w, a_scale, w_scale = nt_inputs(M, 576, 7168, fp8_dtype, device, rng)
    first = kernel.gemm_nt(a, w, a_scale, w_scale)
    for _ in range(3):
        assert torch.equal(kernel.gemm_nt(a, w, a_scale, w_scale), first)


@pytest.mark.slow
@pytest.mark.parametrize("M", range(1, 257))
def test_every_small_m(kernel, device, fp8_dtype, rng, path, M):
    check_nt(kernel, M, *SWEEP_NK, fp8_dtype, device, rng)


@pytest.mark.kernels_ci
def test_compare_writes_both_suites(tmp_path):
    """compare.py --suite all: a `-decode` result with its geomean, launch cost and rates, and
    the prefill result under the plain name (CPU smoke test; the H100 numbers come from it too)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "compare.py"
    command = [sys.executable, str(script), "--device", "cpu", "--quick", "--suite", "all", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (decode,) = tmp_path.glob("*-decode.json")
    (prefill,) = [p for p in tmp_path.glob("*.json") if p != decode]
    results = json.loads(decode.read_text())
    assert results["suite"] == "decode" and results["summary"]["ours"]["geomean_us"] > 0
    assert results["launch_us"] > 0 and all(r["launch_floor_us"] > 0 for r in results["rows"])
    assert json.loads(prefill.read_text())["suite"] == "prefill"
    assert "Launch cost" in decode.with_suffix(".md").read_text()
