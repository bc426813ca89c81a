"""The benchmark scripts run (CPU smoke tests, each script as its own process: the tests import
nothing from benchmarks/; the GPU numbers come from the same scripts)."""

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.kernels_ci


def run_compare_quick_on_cpu(out: Path):
    command = [sys.executable, str(BENCHMARKS / "compare.py"), "--device", "cpu", "--quick", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_compare_quick_on_cpu_twice_into_one_folder(tmp_path):
    """The second run of the same device writes next to the first, never over it: files of its
    minute (the first run's, or placeholders for the minutes after) get it a `-2` name."""
    run_compare_quick_on_cpu(tmp_path)
    (first,) = tmp_path.glob("*.json")
    device = first.stem[len("2026-11-24T0926-") :]
    now = datetime.now(timezone.utc)
    for minutes in (0, 1, 2):
        stem = f"{now + timedelta(minutes=minutes):%Y-%m-%dT%H%M}-{device}"
        if stem != first.stem:
            (tmp_path / f"{stem}.png").write_text("")
    run_compare_quick_on_cpu(tmp_path)
    result_jsons = sorted(tmp_path.glob("*.json"))
    assert len(result_jsons) == 2, "the second run overwrote the first one's results"
    (second,) = [path for path in result_jsons if path != first]
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\dT\d{{4}}-{re.escape(device)}-2", second.stem), second
    for result_json in result_jsons:
        results = json.loads(result_json.read_text())
        assert results["machine"]["date_utc"] and results["machine"]["device"]
        for row in results["rows"]:
            assert row["check"]["ours"] == "pass" and row["check"]["ours_challenge_layout"] == "pass"
            assert all(t > 0 for t in row["us"]["ours"])
        assert "| ours |" in result_json.with_suffix(".md").read_text()


def test_kernels_benchmark_small_workload(device):
    """benchmark_gemm.py's small workload and the `kernels benchmark` runner's check."""
    command = [sys.executable, str(BENCHMARKS / "benchmark_gemm.py"), device.type]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "max |out - reference|" in done.stdout
