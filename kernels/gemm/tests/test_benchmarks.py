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


def run_compare_quick_on_cpu(out: Path):
    command = [sys.executable, str(BENCHMARKS / "compare.py"), "--device", "cpu", "--quick", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_compare_quick_on_cpu_twice_into_one_folder(tmp_path):
    run_compare_quick_on_cpu(tmp_path)
    run_compare_quick_on_cpu(tmp_path)  # most likely in the same minute: the same date in the name
    result_jsons = sorted(tmp_path.glob("*.json"))
    assert len(result_jsons) == 2, "the second run overwrote the first one's results"
    for result_json in result_jsons:
        results = json.loads(result_json.read_text())
        assert results["machine"]["date_utc"] and results["machine"]["device"]
        for row in results["rows"]:
            assert row["check"]["ours"] == "pass" and row["check"]["ours_challenge_layout"] == "pass"
            assert all(t > 0 for t in row["us"]["ours"])
        assert "| ours |" in result_json.with_suffix(".md").read_text()


def test_compare_names_its_files_next_to_an_earlier_run_of_the_same_minute(tmp_path):
    name = "2026-11-24T0926-test-device"
    (tmp_path / f"{name}.json").write_text("{}")
    spec = importlib.util.spec_from_file_location("compare", BENCHMARKS / "compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    assert compare.unused_stem(tmp_path, name) == tmp_path / f"{name}-2"
    (tmp_path / f"{name}-2.png").write_text("")
    assert compare.unused_stem(tmp_path, name) == tmp_path / f"{name}-3"
    assert compare.unused_stem(tmp_path, "2026-11-24T0927-test-device") == tmp_path / "2026-11-24T0927-test-device"


def test_host_overhead_on_cpu():
    command = [sys.executable, str(BENCHMARKS / "host_overhead.py"), "--device", "cpu"]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split(",")[0]: line.split(",")[1:] for line in done.stdout.splitlines() if not line.startswith("#")}
    assert set(rows) == {"gemm_nt", "gemm (transposed views made per call)", "tensor.zero_ (one small torch op)"}
    assert all(float(host_us) > 0 for host_us, _ in rows.values())


def test_host_overhead_rejects_a_bad_shape():
    command = [sys.executable, str(BENCHMARKS / "host_overhead.py"), "--device", "cpu", "1024", "4096"]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 2 and "expected three positive integers M N K" in done.stderr


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
