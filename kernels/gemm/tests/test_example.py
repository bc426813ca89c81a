"""The end-to-end example (examples/fp8_block.py) runs on the CPU with tiny sizes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_kernelize import kernel_dir

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fp8_block.py"


@pytest.mark.kernels_ci
def test_kernelize_example_runs_on_cpu(tmp_path):
    out = tmp_path / "result.json"
    command = [sys.executable, str(EXAMPLE), "--device", "cpu", "--tiny", "--no-compile", "--reps", "2"]
    subprocess.run([*command, "--out", str(out), "--kernel-dir", str(kernel_dir())], check=True, timeout=300)
    result = json.loads(out.read_text())
    assert (result["device"], result["hidden"], result["inner"], result["compiled"]) == ("cpu", 256, 128, False)
    assert [row["tokens"] for row in result["results"]] == [1, 8]
    assert result["host_us"] is None and result["host_us_128_tokens"] is None  # measured on CUDA only
    for row in result["results"]:
        assert "compiled" not in row
        eager = row["eager"]
        assert eager["bf16_linear_ms"] > 0 and eager["fp8_kernelized_ms"] > 0
        # The JSON rounds times to 1e-4 ms and the speed-up to 1e-3: compare within those steps.
        ratio = eager["bf16_linear_ms"] / eager["fp8_kernelized_ms"]
        assert eager["speedup"] == pytest.approx(ratio, rel=1e-2, abs=1e-3)
        layers_ratio = eager["bf16_linear_ms"] / eager["fp8_layers_ms"]
        assert eager["speedup_layers"] == pytest.approx(layers_ratio, rel=1e-2, abs=1e-3)
        assert eager["relative_error_layers"] < 0.1
        # Three activations are rounded to e4m3 (gate and up share one input, then down's input),
        # each ~2.5% rms relative error: ~4% expected against the bf16 block with the same weights.
        assert eager["relative_error"] < 0.1


@pytest.mark.kernels_ci
def test_stack_example_runs_on_cpu(tmp_path):
    """--stack 3 on the CPU: three distinct blocks on one input, times per block, no floor (no copy
    bandwidth measured off CUDA)."""
    out = tmp_path / "stack.json"
    command = [sys.executable, str(EXAMPLE), "--device", "cpu", "--tiny", "--no-compile", "--reps", "2", "--stack", "3"]
    subprocess.run([*command, "--out", str(out), "--kernel-dir", str(kernel_dir())], check=True, timeout=300)
    result = json.loads(out.read_text())
    assert (result["blocks"], result["copy_tbps"], result["hidden"]) == (3, None, 256)
    assert [row["tokens"] for row in result["results"]] == [1, 8]
    for row in result["results"]:
        assert row["bf16_us"] > 0 and row["fp8_us"] > 0 and row["floor_us"] is None
        assert row["speedup"] == pytest.approx(row["bf16_us"] / row["fp8_us"], rel=1e-2)
        assert row["relative_error"] < 0.1  # the worst block's, ~4% expected (three e4m3 roundings)


def test_stack_needs_a_block(tmp_path):
    command = [sys.executable, str(EXAMPLE), "--device", "cpu", "--stack", "0", "--out", str(tmp_path / "x.json")]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2 and "--stack 0: the stack needs at least one block" in run.stderr


MOE_EXAMPLE = EXAMPLE.with_name("fp8_moe.py")


@pytest.mark.kernels_ci
def test_moe_example_runs_on_cpu(tmp_path):
    """examples/fp8_moe.py --tiny on the CPU: transformers' own experts modules, ours registered in
    its FP8ExpertsInterface, the issue's JSON schema (no peers here, so no transformers FP8 columns)."""
    pytest.importorskip("transformers", reason="transformers is a test dependency of this kernel (kbuild[test])")
    out = tmp_path / "moe.json"
    command = [sys.executable, str(MOE_EXAMPLE), "--device", "cpu", "--tiny", "--no-compile", "--reps", "1"]
    command += ["--tokens", "1", "8", "--kernel-dir", str(kernel_dir()), "--out", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "transformers' FP8 implementations are left out" in run.stderr
    result = json.loads(out.read_text())
    assert [(row["tokens"], row["routing"]) for row in result["results"]] == [
        (1, "uniform"), (1, "zipf"), (8, "uniform"), (8, "zipf")
    ]  # fmt: skip
    for row in result["results"]:
        eager = row["eager"]
        assert set(eager["us"]) == {"ours", "bf16"} and eager["floor_us"] > 0
        assert eager["speedup_vs_bf16"] == pytest.approx(eager["us"]["bf16"] / eager["us"]["ours"], rel=1e-2)
        assert "speedup_vs_transformers" not in eager and "graph" not in row
        assert row["rel_error_vs_bf16"]["ours"] < 0.1  # two e4m3 roundings of the activations, ~0.045
