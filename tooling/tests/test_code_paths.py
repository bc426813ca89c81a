"""CI's CUDA compile check: one capability per distinct code path of each [kernel.*] table
(`kbuild build --one-per-code-path`, what scripts/cuda-compile.sh compiles), read from the sources."""

import re
import shutil

import pytest
from conftest import REPO

from kbuild.cli import main

CU130 = "torch214-cxx11-cu130-x86_64-linux"

CUDA_TABLES = """
[kernel.demo_cuda]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0+PTX"]
src = ["demo_cuda/demo.cu"]

[kernel.demo_hopper]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["9.0a"]
src = ["demo_hopper/hopper.cu"]
"""


def _table_archs(cmake, table):
    """The capabilities `[kernel.<table>]` compiles for, from its target's -gencode options."""
    options = cmake.split(f"target_compile_options([[kernel_{table}]] PRIVATE", 1)[1].split("\n)", 1)[0]
    return re.findall(r"-gencode=arch=compute_(\w+),", options)


def _gencodes(kernel_dir, *flags):
    assert main(["generate", str(kernel_dir), "--variant", CU130, *flags]) == 0
    cmake = (kernel_dir / ".kbuild" / CU130 / "CMakeLists.txt").read_text()
    return {table: _table_archs(cmake, table) for table in ("demo_cuda", "demo_hopper")}


@pytest.fixture
def cuda_kernel(kernel_dir):
    toml = kernel_dir / "build.toml"
    toml.write_text(toml.read_text().replace('backends = ["cpu"]', 'backends = ["cpu", "cuda"]') + CUDA_TABLES)
    (kernel_dir / "demo_cuda").mkdir()
    (kernel_dir / "demo_hopper").mkdir()
    (kernel_dir / "demo_hopper" / "hopper.cu").write_text("__global__ void k() {}\n")
    return kernel_dir


def _write(kernel_dir, cu, header=""):
    (kernel_dir / "demo_cuda" / "demo.cu").write_text('#include "paths.cuh"\n' + cu)
    (kernel_dir / "demo_cuda" / "paths.cuh").write_text(header)


def test_one_capability_per_arch_test_in_the_sources_and_their_headers(cuda_kernel):
    _write(
        cuda_kernel,
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 // __CUDA_ARCH__ + 1: a comment\n#endif\n",
        "#ifdef __CUDA_ARCH__\n#if 900 <= __CUDA_ARCH__\n#endif\n#endif\n",
    )
    assert _gencodes(cuda_kernel, "--one-per-code-path") == {"demo_cuda": ["75", "89", "90"], "demo_hopper": ["90a"]}
    everything = {"demo_cuda": ["75", "80", "86", "89", "90", "100"], "demo_hopper": ["90a"]}
    assert _gencodes(cuda_kernel, "--all-capabilities") == everything


def test_sources_without_arch_tests_compile_for_the_oldest_capability(cuda_kernel):
    _write(cuda_kernel, "__global__ void k() {}\n")
    assert _gencodes(cuda_kernel, "--one-per-code-path") == {"demo_cuda": ["75"], "demo_hopper": ["90a"]}


def test_an_arch_use_it_cannot_follow_keeps_every_capability(cuda_kernel):
    _write(cuda_kernel, "", "constexpr int kArch = __CUDA_ARCH__;\n")
    assert _gencodes(cuda_kernel, "--one-per-code-path")["demo_cuda"] == ["75", "80", "86", "89", "90", "100"]


def test_equality_tests_split_on_both_sides(cuda_kernel):
    _write(cuda_kernel, "#if __CUDA_ARCH__ == 860\n#endif\n")
    assert _gencodes(cuda_kernel, "--one-per-code-path")["demo_cuda"] == ["75", "86", "89"]


def test_family_specific_tests_split_family_capabilities(cuda_kernel):
    toml = cuda_kernel / "build.toml"
    toml.write_text(toml.read_text().replace('"10.0+PTX"]', '"10.0f", "12.0f"]'))
    _write(cuda_kernel, "__global__ void k() {}\n")
    assert _gencodes(cuda_kernel, "--one-per-code-path")["demo_cuda"] == ["75", "100f"]
    _write(cuda_kernel, "#if __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1200\n#endif\n")
    assert _gencodes(cuda_kernel, "--one-per-code-path")["demo_cuda"] == ["75", "100f", "120f"]


def test_the_repository_kernels(tmp_path):
    """Today's kernels as CI compiles them: relu has no arch test (7.5 checks its one path); gemm's
    generic tables test 890 and 900, so 8.0, 8.9 and 9.0 each take a path, and sm90 is 9.0a only."""
    for name in ("relu", "gemm"):
        shutil.copytree(REPO / "kernels" / name, tmp_path / name, ignore=shutil.ignore_patterns("build", ".kbuild"))
    found = {}
    for kernel, table in (("relu", "relu_cuda"), ("gemm", "gemm_cuda"), ("gemm", "gemm_sm90")):
        assert main(["generate", str(tmp_path / kernel), "--variant", CU130, "--one-per-code-path"]) == 0
        found[table] = _table_archs((tmp_path / kernel / ".kbuild" / CU130 / "CMakeLists.txt").read_text(), table)
    assert found == {"relu_cuda": ["75"], "gemm_cuda": ["80", "89", "90"], "gemm_sm90": ["90a"]}


def test_one_per_code_path_and_all_capabilities_exclude_each_other(cuda_kernel, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["build", str(cuda_kernel), "--one-per-code-path", "--all-capabilities"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
