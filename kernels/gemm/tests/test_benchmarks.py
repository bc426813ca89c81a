"""The benchmark scripts themselves run (CPU smoke test; the H100 numbers come from compare.py)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.kernels_ci


def test_compare_quick_on_cpu(tmp_path):
    command = [
        sys.executable,
        str(BENCHMARKS / "compare.py"),
        "--device",
        "cpu",
        "--quick",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    (result_json,) = tmp_path.glob("*.json")
    results = json.loads(result_json.read_text())
    assert results["machine"]["date_utc"] and results["machine"]["device"]
    for row in results["rows"]:
        assert row["check"]["ours"] == "pass" and row["check"]["ours_challenge_layout"] == "pass"
        assert all(t > 0 for t in row["us"]["ours"])
    assert "| ours |" in result_json.with_suffix(".md").read_text()


def test_kernels_benchmark_small_workload(kernel, device):
    spec = importlib.util.spec_from_file_location("benchmark_gemm", BENCHMARKS / "benchmark_gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bench = module.Fp8BlockGemmBenchmark()
    bench.kernel, bench.device = kernel, device.type
    bench.setup_small()
    bench.benchmark_small()
    reference = bench.verify_small()
    # The `kernels benchmark` runner's own check.
    assert reference.dtype == bench.out.dtype
    assert (bench.out.float() - reference.float()).abs().max() <= 1e-2
