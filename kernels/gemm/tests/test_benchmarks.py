"""The benchmark scripts themselves run (CPU smoke test; the H100 numbers come from compare.py)."""

import csv
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


STAND_IN_HARNESS = """#!/usr/bin/env bash
# Prints what sm90_harness/harness.cu prints, with this build's time {us} us for every call.
case "$1" in
  check) echo "check: {fails} failure(s)"; exit {fails} ;;
  ab) echo "ab-median,$2,$3,$4,$5x$6s$7,samn {us} ({us}..{us}),kmaj {us} ({us}..{us})"
      echo "ab check: {fails} failure(s)"; exit {fails} ;;
  bench) echo "geomean: kmaj {us} us, colmaj 50.00 us, kmaj with M-contiguous a_scale {us} us, deepgemm 43.00 us" ;;
esac
"""


def run_variants(tmp_path, builds, phases="check ab bench"):
    """variants.sh run over stand-in harness builds: {name: (us, check failures)}."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, (us, fails) in builds.items():
        harness = bin_dir / name
        harness.write_text(STAND_IN_HARNESS.format(us=us, fails=fails))
        harness.chmod(0o755)
    (bin_dir / "BUILDS").write_text("".join(f"{name}\n" for name in builds))
    env = dict(os.environ, SM90BIN=str(bin_dir), OUT=str(tmp_path / "out"), SHAPES="6144 4096 512 192 128 1")
    env["PHASES"] = phases
    script = BENCHMARKS / "sm90_harness" / "variants.sh"
    return subprocess.run(["bash", str(script), "run", "2"], capture_output=True, text=True, env=env, timeout=60)


def test_variants_table_compares_builds_and_skips_checks_of_diagnostic_builds(tmp_path):
    done = run_variants(tmp_path, {"main": ("10.00", 0), "exp-faster": ("9.00", 0), "diag-noepi": ("8.00", 3)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = (tmp_path / "out" / "variants-table.log").read_text()
    assert "6144x4096x512 192x128s1 | 10.00 | 9.00 (-10.0%) | 8.00 (-20.0%)" in table
    assert "bench geomean exp-faster: 9.00 / 9.00 us" in table
    assert "bench geomean diag-noepi" not in table
    checked = (tmp_path / "out" / "variants-check.log").read_text()
    assert "main: check: 0 failure(s)" in checked and "diag-noepi" not in checked
    assert "diag-noepi,round2,6144 4096 512: ab check: 3 failure(s)" in done.stderr


def test_variants_run_fails_when_a_build_fails_its_check(tmp_path):
    done = run_variants(tmp_path, {"main": ("10.00", 0), "exp-wrong": ("9.00", 2)})
    assert done.returncode == 1
    assert "a build failed its check" in done.stdout
    assert "exp-wrong: check: 2 failure(s)" in (tmp_path / "out" / "variants-check.log").read_text()


def test_variants_runs_only_the_phases_asked_for(tmp_path):
    done = run_variants(tmp_path, {"main": ("10.00", 0), "exp-wrong": ("9.00", 2)}, phases="ab")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (tmp_path / "out" / "variants-check.log").exists()
    table = (tmp_path / "out" / "variants-table.log").read_text()
    assert "| 10.00 | 9.00 (-10.0%)" in table and "bench geomean" not in table
    assert "phases: ab " in done.stdout


def test_variants_build_names_a_missing_ref():
    script = BENCHMARKS / "sm90_harness" / "variants.sh"
    done = subprocess.run(["bash", str(script), "build", "no-such-branch"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "no git ref 'no-such-branch'" in done.stderr


STAND_IN_NCU = """#!/usr/bin/env bash
# Answers like Nsight Compute: a metric list for --query-metrics, else each asked metric's value.
if [ "$1" = --query-metrics ]; then
  printf 'sm__throughput      Ratio    SM throughput\\nl1tex__data_bank_reads  Counter  bank reads\\n'
  printf 'gpu__time_duration  Counter  duration\\n'
  exit 0
fi
case "$*" in *broken*) echo "==ERROR== the application failed"; exit 1 ;; esac
while [ $# -gt 0 ]; do [ "$1" = --metrics ] && metrics=$2; shift; done
for m in ${metrics//,/ }; do echo "    $m   %   12.5"; done
"""


def test_ncu_builds_asks_only_for_counters_this_ncu_has(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "ncu").write_text(STAND_IN_NCU)
    (tools / "ncu").chmod(0o755)
    builds = tmp_path / "bin"
    builds.mkdir()
    for name in ("main", "broken"):
        (builds / name).write_text("#!/bin/sh\n")
        (builds / name).chmod(0o755)
    env = dict(os.environ, SM90BIN=str(builds), OUT=str(tmp_path / "out"), SHAPES="6144 4096 512 192 128 1")
    env["PATH"] = f"{tools}:{env['PATH']}"
    script = BENCHMARKS / "sm90_harness" / "ncu_builds.sh"
    done = subprocess.run(["bash", str(script), "main", "broken"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "=== main 6144 4096 512 192 128 1" in done.stdout
    # a failed profile shows no counters under its heading (not the previous build's)
    assert done.stdout.rstrip().endswith("=== broken 6144 4096 512 192 128 1")
    assert "ncu failed on broken" in done.stderr
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in done.stdout
    assert "l1tex__data_bank_reads.sum" in done.stdout and "gpu__time_duration.sum" in done.stdout
    assert "this ncu has no lts__throughput" in done.stderr

    missing = subprocess.run(["bash", str(script), "exp-none"], capture_output=True, text=True, env=env, timeout=60)
    assert missing.returncode == 1
    assert "no build" in missing.stderr and "exp-none" in missing.stderr


# ncu --page source --csv: a preamble line, then one row per SASS line
NCU_SOURCE_HEAD = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)"]
NCU_SOURCE_HEAD += ["Instructions Executed", "stall_barrier", "stall_barrier (Not Issued)", "stall_long_sb"]
NCU_SOURCE_HEAD += ["stall_selected"]
NCU_SOURCE_ROWS = [
    ["0x10", "SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR21], R25", "2", "0", "100", "0", "0", "0", "2"],
    ["0x20", "@!P1  BRA 0x10", "30", "28", "100", "0", "0", "30", "0"],
    ["0x30", "BAR.SYNC.DEFER_BLOCKING R196, 0x100", "0", "0", "100", "0", "0", "0", "0"],
    ["0x40", "QGMMA.64x128x32.F32.E4M3.E4M3 R88, gdesc[UR20], RZ, !UPT", "20", "15", "100", "20", "15", "0", "0"],
    ["0x50", "FFMA R180, R143, R212, R181", "40", "10", "6400", "0", "0", "0", "40"],
    ["0x60", "WARPGROUP.DEPBAR.LE gsb0, 0x0", "8", "8", "100", "8", "8", "0", "0"],
]


def test_ncu_stalls_sorts_samples_by_reason_and_instruction(tmp_path):
    csv_path = tmp_path / "stalls.csv"
    with csv_path.open("w", newline="") as f:
        f.write('"==PROF== Connected to process 1"\n')
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows([NCU_SOURCE_HEAD, *NCU_SOURCE_ROWS])
    script = BENCHMARKS / "sm90_harness" / "ncu_stalls.py"
    done = subprocess.run([sys.executable, str(script), str(csv_path), "2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "6 SASS lines, 100 samples"
    assert lines[1] == "by reason: selected 42.0%, long_sb 30.0%, barrier 28.0%"
    # the branch after a TRYWAIT is an mbarrier wait; the instruction after a BAR.SYNC waits for it
    assert lines[2] == (
        "by instruction: FFMA/FMUL 40.0%, mbarrier wait 30.0%, after a named barrier 20.0%, wgmma wait 8.0%, other 2.0%"
    )
    hottest = [line for line in lines if "*" in line.split("%")[0]]
    assert len(hottest) == 2 and "BRA" in hottest[0] and "FFMA" in hottest[1]

    not_source_page = tmp_path / "details.csv"
    not_source_page.write_text('"ID","Section Name","Metric Name"\n"0","WarpStateStats","x"\n')
    bad = subprocess.run(
        [sys.executable, str(script), str(not_source_page)], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 1 and "has no 'Warp Stall Sampling (All Samples)' column" in bad.stderr
