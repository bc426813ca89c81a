"""CPU tests of the ROCm path's numerical scheme, through the host-side model (rocm_model.py).

The ROCm kernel is compiled for gfx942 but not run on an AMD GPU by this project. These tests
check the algorithm it implements against the float64 reference with the pass criterion of
DESIGN.md's benchmark protocol (reference.py: shapes, reference, judge), and run the kernels' own
source in a host emulation (rocm_emulator.cpp, built with clang) whose output must
equal the model's bit for bit, on every tile, split count, operand layout and FP8 format.

Large shapes are evaluated as sub-problems: the float64 model of a full ranked shape takes minutes
on two CPU cores. An output element depends only on its row of A, its column of B, their scales
and the configuration chosen for the full (M, N, K); so each test draws fresh i.i.d. inputs for
min(M, 48) rows and, of N, two full 128-column blocks plus N's partial last block, and runs the
model with the full shape's configuration (split-K included). The criterion's std(ref) and norms
are then those of the sub-problem.
"""

from __future__ import annotations

import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
import reference
import rocm_model as rm
import torch
from tile_tables import rocm_table

GEMM_DIR = Path(__file__).resolve().parents[1]
EMPTY_SHAPES = [(0, 64, 128), (64, 0, 128), (48, 40, 0)]
ODD_SHAPES = reference.ODD_SHAPES + EMPTY_SHAPES
CI_RANKED = {2, 3, 6, 7}  # split-K 4, K = 256, K = 2304 (ceil(K/128) odd), split-K 4 with N = 512
FORMATS = [torch.float8_e4m3fnuz, torch.float8_e4m3fn]
SUB_ROWS = 48
SUB_FULL_COLUMN_BLOCKS = 2


def passes(out: np.ndarray, ref: torch.Tensor) -> tuple[bool, reference.Verdict]:
    """The criterion, with the Frobenius bound of reference.frobenius_limit (its derivation:
    the statistic needs many effective elements, else the worst-case bf16 rounding is added)."""
    verdict = reference.judge(torch.from_numpy(out), ref, reference.frobenius_limit(ref))
    return verdict.ok, verdict


def seed_of(*parts: object) -> int:
    """A fixed seed per case (the quick tests are deterministic; test_stress.py draws fresh ones)."""
    return zlib.crc32(repr(parts).encode())


def random_problem(m, n, k, dtype, seed):
    """Fresh random FP8 operands and fp32 scales (negative scales included), never zeros."""
    gen = torch.Generator().manual_seed(seed)
    a = reference.random_fp8(m, k, dtype, "cpu", gen)
    b = reference.random_fp8(k, n, dtype, "cpu", gen)
    a_scale = reference.random_scales(rm.ceil_div(k, rm.SCALE_BLOCK), m, "cpu", gen)
    b_scale = reference.random_scales(rm.ceil_div(k, rm.SCALE_BLOCK), rm.ceil_div(n, rm.SCALE_BLOCK), "cpu", gen)
    return a, b, a_scale, b_scale


def sub_shape(m: int, n: int) -> tuple[int, int]:
    """Rows and columns of the sub-problem standing for an (m, n) output (module docstring)."""
    full_blocks_cols = SUB_FULL_COLUMN_BLOCKS * 128
    return min(m, SUB_ROWS), n if n <= full_blocks_cols + 128 else full_blocks_cols + n % 128


def check_shape(m, n, k, dtype, path="mfma", seed=None):
    seed = seed_of(m, n, k, str(dtype), path) if seed is None else seed
    sub_m, sub_n = sub_shape(m, n)
    a, b, a_scale, b_scale = random_problem(sub_m, sub_n, k, dtype, seed)
    out = rm.model_gemm(a, b, a_scale, b_scale, path=path, config_shape=(m, n, k))
    assert out.shape == (sub_m, sub_n)
    ok, verdict = passes(out, reference.reference_gemm(a, b, a_scale, b_scale))
    assert ok, f"{(m, n, k)} as {(sub_m, sub_n, k)} {dtype} {path} seed={seed}: {verdict}"


# ----- the tile table and the configuration rule -----


def test_tile_table_lists_every_ranked_shape_once():
    table = rocm_table()
    assert sorted(table.ranked) == sorted(reference.RANKED_SHAPES)


def test_tile_table_entries_fit_the_kernel():
    table = rocm_table()
    for block_m, block_n in table.tiles:
        assert block_m % 64 == 0 and block_n % 64 == 0, "2 x 2 waves of 32 x 32 MFMA tiles"
        assert 128 % block_n == 0, "a tile must lie in one scale block of B"
    for (_m, _n, k), (tile_id, split_k) in table.ranked.items():
        assert 0 <= tile_id < len(table.tiles)
        assert 1 <= split_k <= rm.ceil_div(k, rm.SCALE_BLOCK)


@pytest.mark.kernels_ci
def test_split_ranges_partition_the_scale_blocks():
    for k_blocks in range(0, 70):
        for split_k in range(1, 9):
            ranges = rm.split_ranges(k_blocks, split_k)
            assert [kb for r in ranges for kb in r] == list(range(k_blocks))
            if split_k <= k_blocks:
                assert all(len(r) >= 1 for r in ranges)


def test_ranked_small_mn_shapes_split_k():
    table = rocm_table()
    assert rm.effective_split_k(table, 1024, 576, 7168) == 4
    assert rm.effective_split_k(table, 1024, 512, 7168) == 4
    assert rm.effective_split_k(table, 6144, 7168, 2048) == 1


def _host_compiler() -> str | None:
    return next((c for c in ("c++", "g++", "clang++", "clang++-19") if shutil.which(c)), None)


@pytest.mark.kernels_ci
def test_python_rule_matches_the_cpp_rule_and_fn_remap_is_exact(tmp_path):
    """Compiles gemm_rocm/tile_configs.h and fn_as_fnuz.h for the host (tests/rocm_host_check.cpp):
    its select_config must agree with the model's on every shape, and the e4m3fn -> e4m3fnuz
    remap of the MFMA loaders must halve every code exactly."""
    compiler = _host_compiler()
    if compiler is None:
        pytest.skip("no host C++ compiler (c++, g++ or clang++) on PATH")
    binary = tmp_path / "rocm_host_check"
    source = GEMM_DIR / "tests" / "rocm_host_check.cpp"
    command = [compiler, "-std=c++17", "-O1", f"-I{GEMM_DIR}", str(source), "-o", str(binary)]
    subprocess.run(command, check=True)
    rng = np.random.default_rng(0)
    sweep = [tuple(int(x) for x in rng.integers(1, 9000, 3)) for _ in range(300)]
    shapes = reference.RANKED_SHAPES + reference.CORRECTNESS_SHAPES + reference.ODD_SHAPES + sweep
    stdin = "".join(f"{m} {n} {k}\n" for m, n, k in shapes)
    result = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, lines[-1:]
    table = rocm_table()
    for (m, n, k), line in zip(shapes, lines, strict=True):
        assert line == f"{m} {n} {k} {' '.join(map(str, rm.select_config(table, m, n, k)))}"


# ----- the model against the float64 reference -----


@pytest.mark.parametrize(
    "index",
    [pytest.param(i, marks=[pytest.mark.kernels_ci] if i in CI_RANKED else [pytest.mark.slow]) for i in range(18)],
)
def test_model_ranked_shape(index):
    check_shape(*reference.RANKED_SHAPES[index], torch.float8_e4m3fnuz)


@pytest.mark.slow
@pytest.mark.parametrize("shape", reference.CORRECTNESS_SHAPES)
def test_model_correctness_shape(shape):
    check_shape(*shape, torch.float8_e4m3fnuz)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", FORMATS, ids=["fnuz", "fn"])
@pytest.mark.parametrize("scheme", ["mfma", "general"])
@pytest.mark.parametrize("shape", ODD_SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in ODD_SHAPES])
def test_model_odd_shape(shape, scheme, dtype):
    check_shape(*shape, dtype, path=scheme)


@pytest.mark.kernels_ci
@pytest.mark.parametrize("shape", [(64, 576, 7168), (96, 7168, 2304)])
def test_model_e4m3fn_inputs_on_the_mfma_path(shape):
    check_shape(*shape, torch.float8_e4m3fn)


@pytest.mark.kernels_ci
def test_model_general_path_long_k():
    check_shape(64, 576, 7168, torch.float8_e4m3fnuz, path="general")


@pytest.mark.kernels_ci
def test_e4m3fn_negative_zero_and_nan_codes():
    a, b, a_scale, b_scale = random_problem(8, 16, 256, torch.float8_e4m3fn, seed=1)
    codes = a.view(torch.uint8)
    codes[1, :5] = 0x80  # -0: a zero, not the e4m3fnuz NaN
    codes[3, 200] = 0x7F  # NaN: row 3 of the output is NaN
    out = rm.model_gemm(a, b, a_scale, b_scale)
    ref = reference.reference_gemm(a, b, a_scale, b_scale)
    assert np.isnan(out[3]).all()
    finite = [r for r in range(8) if r != 3]
    assert passes(out[finite], ref[finite])[0]


@pytest.mark.kernels_ci
def test_criterion_catches_a_misplaced_scale_block():
    """The checks above can fail: scales applied to the wrong N block are caught."""
    a, b, a_scale, b_scale = random_problem(64, 384, 1024, torch.float8_e4m3fnuz, seed=2)
    shifted = torch.roll(b_scale, shifts=1, dims=1)
    out = rm.model_gemm(a, b, a_scale, shifted)
    assert not passes(out, reference.reference_gemm(a, b, a_scale, b_scale))[0]


@pytest.mark.kernels_ci
def test_criterion_catches_skipping_the_last_partial_k_block():
    a, b, a_scale, b_scale = random_problem(64, 64, 300, torch.float8_e4m3fnuz, seed=3)
    truncated = rm.model_gemm(a[:, :256], b[:256], a_scale[:2], b_scale[:2])
    assert not passes(truncated, reference.reference_gemm(a, b, a_scale, b_scale))[0]


# ----- the kernels' source in host emulation (rocm_emulator.cpp) -----

EMULATED_SHAPES = [(70, 130, 300), (33, 200, 1000), (128, 64, 129)]
# (A contiguous along K?, B contiguous along K?): the four layouts of the MFMA loaders
LAYOUTS = {
    "aK-bK": (True, True),
    "aM-bN": (False, False),
    "aK-bN": (True, False),
    "aM-bK": (False, True),
}
CONFIGS = [None, (0, 2), (1, 3), (2, 1)]  # (tile id, split_k); None: the launcher's plan
CI_EMULATED = {
    ((70, 130, 300), "aK-bK", None, torch.float8_e4m3fnuz),
    ((70, 130, 300), "aM-bN", (0, 2), torch.float8_e4m3fn),
    ((33, 200, 1000), "aK-bN", (1, 3), torch.float8_e4m3fnuz),
    ((128, 64, 129), "aM-bK", (2, 1), torch.float8_e4m3fn),
}
EMULATOR_COMPILERS = ("clang++-19", "clang++")  # ext_vector_type: clang only
FORMAT_CODES = {torch.float8_e4m3fn: 0, torch.float8_e4m3fnuz: 1}


@pytest.fixture(scope="session")
def emulator(tmp_path_factory) -> Path:
    compiler = next((c for c in EMULATOR_COMPILERS if shutil.which(c)), None)
    if compiler is None:
        pytest.skip("no clang++ to build the ROCm kernel emulation (apt-get install clang-19)")
    binary = tmp_path_factory.mktemp("rocm_emulator") / "rocm_emulator"
    source = GEMM_DIR / "tests" / "rocm_emulator.cpp"
    flags = ["-std=c++20", "-O2", "-pthread", "-Wno-psabi", f"-I{GEMM_DIR}"]
    subprocess.run([compiler, *flags, str(source), "-o", str(binary)], check=True)
    return binary


def fp8_operand(rows, cols, dtype, gen, contiguous_cols: bool) -> torch.Tensor:
    """(rows, cols) FP8 from randn, stride 1 along cols (or rows); the other stride is padded to
    a multiple of 16 bytes, as the MFMA loaders need."""
    inner, outer = (cols, rows) if contiguous_cols else (rows, cols)
    base = torch.randn(outer, rm.ceil_div(inner, 16) * 16 + 16, generator=gen).to(dtype)
    view = base[:, :inner]
    return view if contiguous_cols else view.t()


def storage_bytes(t: torch.Tensor) -> bytes:
    count = t.untyped_storage().nbytes() // t.element_size()
    return torch.as_strided(t, (count,), (1,), 0).contiguous().view(torch.uint8).numpy().tobytes()


def emulate(emulator, workdir: Path, a, b, a_scale, b_scale, config=None, out_row_major=True) -> tuple[str, np.ndarray]:
    """Runs the kernels in emulation; returns the plan it ran and out as float32 values."""
    m, n = a.shape[0], b.shape[1]
    lines = [f"{m} {n} {a.shape[1]} {FORMAT_CODES[a.dtype]}"]
    for name, t in (("a", a), ("b", b), ("sa", a_scale), ("sb", b_scale)):
        (workdir / f"{name}.bin").write_bytes(storage_bytes(t))
        lines.append(f"{t.storage_offset()} {t.stride(0)} {t.stride(1)}")
    lines.append(f"{n} 1" if out_row_major else f"1 {m}")
    (workdir / "problem.txt").write_text("\n".join(lines) + "\n")
    command = [str(emulator), str(workdir), *map(str, config or ())]
    plan = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    bits = torch.from_numpy(np.frombuffer((workdir / "out.bin").read_bytes(), dtype=np.int16).copy())
    out = bits.view(torch.bfloat16).float()
    out = out.reshape(m, n) if out_row_major else out.reshape(n, m).t()
    return plan, out.contiguous().numpy()


def assert_same_bits(emulated: np.ndarray, model: np.ndarray, context: str):
    nan = np.isnan(emulated)
    assert (nan == np.isnan(model)).all(), f"{context}: NaN elements differ"
    differ = np.count_nonzero(emulated[~nan].view(np.uint32) != model[~nan].view(np.uint32))
    assert differ == 0, f"{context}: {differ} of {emulated.size} elements differ from the model"


def emulated_cases() -> list:
    cases = []
    for shape in EMULATED_SHAPES:
        for layout in LAYOUTS:
            for config in CONFIGS:
                for dtype, format_name in zip(FORMATS, ("fnuz", "fn"), strict=True):
                    ci = (shape, layout, config, dtype) in CI_EMULATED
                    marks = [pytest.mark.kernels_ci] if ci else [pytest.mark.slow]
                    config_name = "plan" if config is None else "tile{}-split{}".format(*config)
                    name = f"{'x'.join(map(str, shape))}-{layout}-{config_name}-{format_name}"
                    cases.append(pytest.param(shape, layout, config, dtype, marks=marks, id=name))
    return cases


@pytest.mark.parametrize("shape, layout, config, dtype", emulated_cases())
def test_emulated_mfma_kernel_equals_model(emulator, tmp_path, shape, layout, config, dtype):
    m, n, k = shape
    seed = seed_of(shape, layout, config, str(dtype))
    gen = torch.Generator().manual_seed(seed)
    a_k_contiguous, b_k_contiguous = LAYOUTS[layout]
    a = fp8_operand(m, k, dtype, gen, contiguous_cols=a_k_contiguous)
    b = fp8_operand(k, n, dtype, gen, contiguous_cols=not b_k_contiguous)
    a_scale = reference.random_scales(rm.ceil_div(k, rm.SCALE_BLOCK), m, "cpu", gen)
    b_scale = reference.random_scales(rm.ceil_div(k, rm.SCALE_BLOCK), rm.ceil_div(n, rm.SCALE_BLOCK), "cpu", gen)
    out_row_major = layout in ("aK-bK", "aK-bN")  # the others write a column-major out
    plan, out = emulate(emulator, tmp_path, a, b, a_scale, b_scale, config, out_row_major)
    table = rocm_table()
    expected = config or (rm.select_config(table, m, n, k)[0], rm.effective_split_k(table, m, n, k))
    layouts = f"{0 if a_k_contiguous else 1} {0 if b_k_contiguous else 1}"
    assert plan == f"mfma {expected[0]} {expected[1]} {layouts}"
    context = f"{shape} {layout} {plan} {dtype} seed={seed}"
    assert_same_bits(out, rm.model_gemm(a, b, a_scale, b_scale, split_k=expected[1]), context)
    ok, verdict = passes(out, reference.reference_gemm(a, b, a_scale, b_scale))
    assert ok, f"{context}: {verdict}"


@pytest.mark.kernels_ci
@pytest.mark.parametrize("dtype", FORMATS, ids=["fnuz", "fn"])
def test_emulated_general_kernel_equals_model(emulator, tmp_path, dtype):
    """Row strides that are not multiples of 16 bytes take the general kernel."""
    seed = seed_of("general", str(dtype))
    a, b, a_scale, b_scale = random_problem(37, 75, 300, dtype, seed)
    plan, out = emulate(emulator, tmp_path, a, b, a_scale, b_scale)
    assert plan == "general"
    context = f"general {dtype} seed={seed}"
    assert_same_bits(out, rm.model_gemm(a, b, a_scale, b_scale, path="general"), context)
    assert passes(out, reference.reference_gemm(a, b, a_scale, b_scale))[0], context


@pytest.mark.kernels_ci
def test_emulated_e4m3fn_special_codes(emulator, tmp_path):
    """-0 (0x80) stays a zero and NaN (0x7F) stays NaN through the e4m3fn -> e4m3fnuz remap."""
    gen = torch.Generator().manual_seed(4)
    a = fp8_operand(40, 256, torch.float8_e4m3fn, gen, contiguous_cols=True)
    b = fp8_operand(256, 96, torch.float8_e4m3fn, gen, contiguous_cols=False)
    a.view(torch.uint8)[1, :40] = 0x80
    a.view(torch.uint8)[5, 130] = 0x7F
    a_scale = reference.random_scales(2, 40, "cpu", gen)
    b_scale = reference.random_scales(2, 1, "cpu", gen)
    plan, out = emulate(emulator, tmp_path, a, b, a_scale, b_scale)
    assert plan.startswith("mfma")
    assert np.isnan(out[5]).all() and np.isfinite(np.delete(out, 5, axis=0)).all()
    assert_same_bits(out, rm.model_gemm(a, b, a_scale, b_scale), "special codes")
