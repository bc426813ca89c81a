"""kernel-builder semantics of build.toml, each shown on a test kernel of tests/data/kernels/.

The CUDA compiles need nvcc and a CUDA torch: they run the `kbuild` of the Python environment
named by KBUILD_CUDA_ENV (e.g. the .venv-cu130 that scripts/cuda-compile.sh creates) and are
skipped when it is not set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from kbuild.build import cutlass
from kbuild.build.builder import generate_only, project_for, resolve_variant
from kbuild.check.kernel_checks import check_kernel
from kbuild.core.errors import KbuildError
from kbuild.model import cuda
from kbuild.model.manifest import CUTLASS_DEPENDS, load_manifest
from kbuild.model.variants import Variant, detect_variant
from kbuild.testing.runner import run_tests

DATA = Path(__file__).parent / "data" / "kernels"
CU130 = "torch214-cxx11-cu130-x86_64-linux"
CUDA_ENV = Path(os.environ.get("KBUILD_CUDA_ENV", "/nonexistent"))

needs_cuda_env = pytest.mark.skipif(
    shutil.which("nvcc") is None or not (CUDA_ENV / "bin" / "kbuild").is_file(),
    reason="needs nvcc and KBUILD_CUDA_ENV naming a Python environment with a CUDA torch and kbuild",
)


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(DATA / name, target, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    return target


def _cuda_build(kernel: Path, variant: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CXX": "/usr/bin/g++", "CUDAHOSTCXX": "/usr/bin/g++"}
    command = [str(CUDA_ENV / "bin" / "kbuild"), "build", str(kernel), "--variant", variant, "-j", "2"]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


# -- 1. a [torch.stable-abi] table applies to the backends it names ------------------------


def test_stable_abi_table_leaves_other_backends_compiled(tmp_path):
    kernel = _copy("stable-split", tmp_path)
    cpu = resolve_variant(load_manifest(kernel), None)
    assert cpu == detect_variant("cpu")
    assert cpu.name.startswith("torch213-cxx11-cpu-")
    registration = (generate_only(kernel) / "generated" / "registration.h").read_text()
    assert "STABLE_TORCH_LIBRARY_EXPAND" not in registration
    cmake = (generate_only(kernel) / "CMakeLists.txt").read_text()
    assert "TORCH_TARGET_VERSION" not in cmake


def test_stable_abi_table_applies_to_named_backend(tmp_path):
    kernel = _copy("stable-split", tmp_path)
    build_dir = generate_only(kernel, "torch-stable-abi210-cu130-x86_64-linux")
    assert "STABLE_TORCH_LIBRARY_EXPAND" in (build_dir / "generated" / "registration.h").read_text()
    assert "TORCH_TARGET_VERSION=0x020a000000000000" in (build_dir / "CMakeLists.txt").read_text()


def test_variant_kind_must_match_the_table(tmp_path, capsys):
    from kbuild.cli import main

    kernel = _copy("stable-split", tmp_path)
    assert main(["generate", str(kernel), "--variant", "torch-stable-abi210-cpu-x86_64-linux"]) == 2
    assert "ordinary compiled variant" in capsys.readouterr().err
    assert main(["generate", str(kernel), "--variant", CU130]) == 2
    assert "pass --variant torch-stable-abi210-cu130-x86_64-linux" in capsys.readouterr().err


@pytest.mark.slow
def test_stable_split_cpu_builds_and_passes_its_tests(tmp_path):
    kernel = _copy("stable-split", tmp_path)
    assert run_tests(kernel, pytest_args=["-q"]) == 0
    assert [p.name for p in (kernel / "build").iterdir()] == [detect_variant("cpu").name]


# -- 2. stable-ABI variants take the table's torch version --------------------------------


def test_stable_variant_is_named_after_the_table_version(tmp_path):
    manifest = load_manifest(_copy("stable-cpu", tmp_path))
    assert resolve_variant(manifest, None).name == "torch-stable-abi210-cpu-x86_64-linux"
    requested = "torch-stable-abi210-cpu-x86_64-linux"
    assert resolve_variant(manifest, requested) == Variant.parse(requested)


def test_stable_cuda_variant_name_is_accepted(tmp_path):
    kernel = _copy("stable-split", tmp_path)
    build_dir = generate_only(kernel, "torch-stable-abi210-cu130-x86_64-linux")
    assert build_dir.name == "torch-stable-abi210-cu130-x86_64-linux"


@pytest.mark.slow
def test_stable_cpu_kernel_builds_against_the_210_abi_and_loads(tmp_path):
    kernel = _copy("stable-cpu", tmp_path)
    assert run_tests(kernel, pytest_args=["-q"]) == 0
    assert (kernel / "build" / "torch-stable-abi210-cpu-x86_64-linux" / "metadata.json").is_file()


# -- 3., 4., 5. the CUDA compile: torch's flags, CUDA headers, capabilities ----------------


def test_torch_nvcc_flags_are_torchs_without_the_half_switches():
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    expected = [flag for flag in COMMON_NVCC_FLAGS if flag not in cuda.TORCH_NVCC_FLAGS_DROPPED]
    assert list(cuda.TORCH_NVCC_FLAGS) == expected


def test_torch_cmake_nvcc_flags_are_those_of_torchs_cmake_package():
    import torch

    cmake = Path(torch.__file__).parent / "share" / "cmake" / "Caffe2" / "public" / "cuda.cmake"
    appended = re.findall(r'^list\(APPEND CUDA_NVCC_FLAGS "(--expt-[a-z-]+)"\)', cmake.read_text(), re.M)
    assert appended == ["--expt-relaxed-constexpr", "--expt-extended-lambda"]
    assert [*cuda.TORCH_NVCC_FLAGS, *cuda.TORCH_CMAKE_NVCC_FLAGS] == appended


def test_cuda_flags_order_and_headers(tmp_path):
    with pytest.warns(UserWarning, match=r"CUDA 13.0 cannot build 7.0; building 8.0"):
        build_dir = generate_only(_copy("cuda-env", tmp_path), CU130)
    cmake = (build_dir / "CMakeLists.txt").read_text()
    flags = (
        "--expt-relaxed-constexpr;--expt-extended-lambda;-DENABLE_FP8;-gencode=arch=compute_80,code=sm_80;"
        "-DCUDA_ENV_OWN_FLAG"
    )
    assert "".join(f"  [[$<$<COMPILE_LANGUAGE:CUDA>:{flag}>]]\n" for flag in flags.split(";")) in cmake
    assert "__CUDA_NO_HALF" not in cmake and "compute_70" not in cmake
    assert "target_include_directories([[kernel_flags]] SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})" in cmake


def test_default_capabilities_follow_the_toolkit(tmp_path):
    kernel = _copy("cuda-env", tmp_path)
    toml = kernel / "build.toml"
    toml.write_text(toml.read_text().replace('cuda-capabilities = ["7.0", "8.0"]\n', ""))
    manifest = load_manifest(kernel)
    for variant, expected in (
        (CU130, ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0+PTX"]),
        (
            "torch213-cxx11-cu128-x86_64-linux",
            ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX"],
        ),
        ("torch213-cxx11-cu126-x86_64-linux", ["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX"]),
    ):
        assert project_for(manifest, Variant.parse(variant)).archs == expected
    cmake = (generate_only(kernel, CU130) / "CMakeLists.txt").read_text()
    assert "-gencode=arch=compute_75,code=sm_75" in cmake
    assert "-gencode=arch=compute_120,code=[sm_120,compute_120]" in cmake


def test_capability_filter_keeps_suffixes_and_refuses_an_empty_list():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cuda.select_capabilities("k", ["9.0a", "10.0f", "12.0+PTX"], "13.0") == ["9.0a", "10.0f", "12.0+PTX"]
    with pytest.warns(UserWarning, match="cannot build 10.1"):
        assert cuda.select_capabilities("k", ["10.1", "11.0"], "13.0") == ["11.0"]
    with pytest.raises(KbuildError, match="can build none of 7.0, 7.2"):
        cuda.select_capabilities("k", ["7.0", "7.2"], "13.0")


@pytest.mark.slow
@needs_cuda_env
def test_cuda_env_kernel_compiles(tmp_path):
    kernel = _copy("cuda-env", tmp_path)
    result = _cuda_build(kernel, CU130)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "CUDA 13.0 cannot build 7.0; building 8.0" in result.stderr
    metadata = json.loads((kernel / "build" / CU130 / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["8.0"]}


def test_nvcc_compiles_the_capabilities_on_threads(tmp_path, monkeypatch):
    kernel = _copy("cuda-lambda", tmp_path)
    monkeypatch.delenv("NVCC_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    cuda_flags = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90", "--threads=2")
    flags = "".join(f"  [[$<$<COMPILE_LANGUAGE:CUDA>:{flag}>]]\n" for flag in cuda_flags)
    assert flags in (generate_only(kernel, CU130) / "CMakeLists.txt").read_text(), "one thread per capability"
    monkeypatch.setenv("NVCC_THREADS", "8")
    assert (
        "code=sm_90>]]\n  [[$<$<COMPILE_LANGUAGE:CUDA>:--threads=8>"
        in (generate_only(kernel, CU130) / "CMakeLists.txt").read_text()
    )
    assert cuda.threads_flags(9, []) == ["--threads=8"]
    assert cuda.threads_flags(9, ["-t", "3"]) == [], "the kernel's own cuda-flags decide"
    monkeypatch.delenv("NVCC_THREADS")
    assert cuda.threads_flags(9, []) == ["--threads=4"], "kernel-builder's default"
    assert cuda.threads_flags(1, []) == []


def test_nvcc_threads_must_be_a_number(tmp_path, monkeypatch, capsys):
    from kbuild.cli import main

    monkeypatch.setenv("NVCC_THREADS", "many")
    assert main(["generate", str(_copy("cuda-lambda", tmp_path)), "--variant", CU130]) == 2
    assert "NVCC_THREADS='many' is not a number of threads" in capsys.readouterr().err


@pytest.mark.slow
@needs_cuda_env
def test_device_lambda_kernel_compiles(tmp_path):
    kernel = _copy("cuda-lambda", tmp_path)
    result = _cuda_build(kernel, CU130)
    assert result.returncode == 0, result.stderr[-3000:]
    metadata = json.loads((kernel / "build" / CU130 / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["8.0", "9.0"]}


@pytest.mark.slow
@needs_cuda_env
def test_stable_split_cuda_variant_compiles(tmp_path):
    kernel = _copy("stable-split", tmp_path)
    result = _cuda_build(kernel, "torch-stable-abi210-cu130-x86_64-linux")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (kernel / "build" / "torch-stable-abi210-cu130-x86_64-linux" / "metadata.json").is_file()


# -- 6. CUTLASS: wheel, folder, or a cached checkout of the release tag --------------------


def _cutlass_source(root: Path, version: str) -> Path:
    major, minor, patch = version.split(".")
    header = root / "include" / "cutlass" / "version.h"
    header.parent.mkdir(parents=True)
    header.write_text(f"#define CUTLASS_MAJOR {major}\n#define CUTLASS_MINOR {minor}\n#define CUTLASS_PATCH {patch}\n")
    (root / "tools" / "util" / "include").mkdir(parents=True)
    (root / "tools" / "util" / "include" / "README").write_text("util headers\n")
    return root


def _cutlass_repository(root: Path, version: str) -> Path:
    """A local git repository standing in for github.com/NVIDIA/cutlass, tagged v<version>."""
    _cutlass_source(root, version)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", f"CUTLASS {version}")
    git("tag", f"v{version}")
    return root


@pytest.fixture
def no_cutlass(monkeypatch, tmp_path):
    """No folder variables, a private cache, and a git URL that does not exist."""
    for variable in ("KBUILD_CUTLASS_DIR", "KBUILD_CUTLASS_3_9_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("KBUILD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", (tmp_path / "no-such-repository").as_uri())
    return tmp_path


def test_every_cutlass_dependency_has_a_release():
    assert set(CUTLASS_DEPENDS) == set(cutlass.RELEASES)


def test_cutlass_from_a_cached_checkout_of_the_release_tag(no_cutlass, monkeypatch, tmp_path):
    repository = _cutlass_repository(tmp_path / "cutlass-repo", "3.9.2")
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", repository.as_uri())
    kernel = _copy("cutlass-pin", tmp_path)
    checkout = tmp_path / "cache" / "cutlass" / "v3.9.2"
    options = cutlass.configure_options(list(load_manifest(kernel).kernels.values()))
    assert options == [f"-DKBUILD_CUTLASS_3_9_ROOT:PATH={checkout.as_posix()}"]
    assert (checkout / "tools" / "util" / "include").is_dir()
    shutil.rmtree(repository)
    assert cutlass.resolve("cutlass_3_9", owner="test") == checkout, "the second build uses the cache"


def test_cutlass_tag_with_another_version_is_refused(no_cutlass, monkeypatch, tmp_path):
    repository = _cutlass_repository(tmp_path / "cutlass-repo", "3.9.0")
    subprocess.run(["git", "tag", "v3.9.2"], cwd=repository, check=True)
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", repository.as_uri())
    with pytest.raises(KbuildError, match=r"tag v3.9.2 of .* holds CUTLASS 3.9.0"):
        cutlass.resolve("cutlass_3_9", owner="[kernel.k]")


def test_cutlass_from_the_per_version_folder_variable(no_cutlass, monkeypatch, tmp_path):
    source = _cutlass_source(tmp_path / "cutlass-3.9", "3.9.2")
    monkeypatch.setenv("KBUILD_CUTLASS_3_9_DIR", str(source))
    monkeypatch.setenv("KBUILD_CUTLASS_DIR", str(_cutlass_source(tmp_path / "cutlass-3.8", "3.8.0")))
    assert cutlass.resolve("cutlass_3_9", owner="test") == source


def test_a_relative_cutlass_folder_is_resolved_from_where_kbuild_runs(no_cutlass, monkeypatch, tmp_path):
    """CMake configures in the build tree: a relative KBUILD_CUTLASS_<X>_<Y>_DIR handed on as it was
    named pointed at nothing there (deep-gemm's build could not find CUTLASS's headers)."""
    source = _cutlass_source(tmp_path / "cutlass-3.9", "3.9.2")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBUILD_CUTLASS_3_9_DIR", "cutlass-3.9")
    root = cutlass.resolve("cutlass_3_9", owner="test")
    assert root.is_absolute() and root == source.resolve()


def test_cutlass_folder_of_another_version_is_an_error(no_cutlass, monkeypatch, tmp_path):
    monkeypatch.setenv("KBUILD_CUTLASS_DIR", str(_cutlass_source(tmp_path / "cutlass-3.8", "3.8.0")))
    with pytest.raises(KbuildError, match=r"KBUILD_CUTLASS_DIR=.* holds CUTLASS 3.8.0, but cutlass_3_9 needs 3.9"):
        cutlass.resolve("cutlass_3_9", owner="test")


def test_unresolved_cutlass_names_every_fix(no_cutlass, tmp_path, capsys):
    from kbuild.cli import main

    kernel = _copy("cutlass-pin", tmp_path)
    assert main(["generate", str(kernel), "--variant", CU130]) == 0, "generating needs no CUTLASS (offline)"
    cmake = (kernel / ".kbuild" / CU130 / "CMakeLists.txt").read_text()
    assert '"${KBUILD_CUTLASS_3_9_ROOT}/include"' in cmake
    assert "configure with -DKBUILD_CUTLASS_3_9_ROOT=<a CUTLASS 3.9.2 checkout>" in cmake
    with pytest.raises(KbuildError) as raised:  # what `kbuild build` says when it configures the project
        cutlass.configure_options(list(load_manifest(kernel).kernels.values()))
    err = str(raised.value)
    assert "[kernel.gemm_tile] depends on cutlass_3_9 (CUTLASS 3.9.2), which was not found" in err
    assert "no checkout of tag v3.9.2" in err
    for fix in ("pip install 'nvidia-cutlass==3.9.2.*'", "KBUILD_CUTLASS_3_9_DIR", "KBUILD_CUTLASS_DIR"):
        assert fix in err


def _cutlass_2_source(root: Path, version: str) -> Path:
    """A CUTLASS 2.x tree: no version.h, the version in CMakeLists.txt's project()."""
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    (root / "tools" / "util" / "include").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.12.4 FATAL_ERROR)\nproject(CUTLASS VERSION {version} LANGUAGES CXX)\n"
    )
    return root


def test_cutlass_2_version_is_read_from_its_cmake_project(no_cutlass, monkeypatch, tmp_path):
    source = _cutlass_2_source(tmp_path / "cutlass-2.10", "2.10.0")
    assert cutlass.source_version(source) == "2.10.0"
    monkeypatch.setenv("KBUILD_CUTLASS_2_10_DIR", str(source))
    assert cutlass.resolve("cutlass_2_10", owner="test") == source
    monkeypatch.setenv("KBUILD_CUTLASS_2_10_DIR", str(_cutlass_2_source(tmp_path / "cutlass-2.9", "2.9.1")))
    with pytest.raises(KbuildError, match=r"holds CUTLASS 2.9.1, but cutlass_2_10 needs 2.10"):
        cutlass.resolve("cutlass_2_10", owner="test")


def test_cutlass_2_from_a_checkout_of_the_release_tag(no_cutlass, monkeypatch, tmp_path):
    repository = _cutlass_2_source(tmp_path / "cutlass-repo", "2.10.0")
    for args in (("init", "-q"), ("add", "."), ("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "2.10")):
        subprocess.run(["git", *args], cwd=repository, check=True, capture_output=True)
    subprocess.run(["git", "tag", "v2.10.0"], cwd=repository, check=True)
    monkeypatch.setenv("KBUILD_CUTLASS_GIT_URL", repository.as_uri())
    assert cutlass.resolve("cutlass_2_10", owner="test") == tmp_path / "cache" / "cutlass" / "v2.10.0"


# -- 7. tests import the package by name, from subfolders ---------------------------------


def test_tests_import_the_package_by_name_from_a_subfolder(tmp_path):
    kernel = _copy("named-import", tmp_path)
    assert not [f for f in check_kernel(kernel) if "no tests" in f.message]
    assert run_tests(kernel, pytest_args=["-q"]) == 0


# -- 8. [torch-noarch] for every backend; op-object registrations; the kernels_ci marker ---


def test_noarch_kernel_is_staged_for_every_backend_and_passes_its_tests(tmp_path):
    kernel = _copy("noarch-ops", tmp_path)
    assert [f for f in check_kernel(kernel) if f.severity == "error"] == []
    assert (
        run_tests(kernel, pytest_args=["-q", "--strict-markers", "-W", "error::pytest.PytestUnknownMarkWarning"]) == 0
    )
    staged = sorted(p.name for p in (kernel / "build").iterdir())
    assert staged == ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]
    metadata = json.loads((kernel / "build" / "torch-rocm" / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "rocm"}


def test_kernels_ci_marker_is_registered_by_the_plugin(tmp_path):
    import kbuild

    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n\n\n@pytest.mark.kernels_ci\ndef test_quick():\n    pass\n"
    )
    # This kbuild, without the plugin of the installed one's entry point.
    env = {**os.environ, "PYTHONPATH": str(Path(kbuild.__file__).resolve().parents[1])}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:kbuild", "--strict-markers"]
    result = subprocess.run([*command, "-p", "kbuild.testing.import_alias"], cwd=tmp_path, env=env, capture_output=True)
    assert result.returncode == 0, result.stdout.decode()[-2000:]
    without = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert without.returncode != 0 and "'kernels_ci' not found in `markers`" in without.stdout, "the check can fail"


# -- 10. <hip/hip_fp8.h> stand-in for ROCm compile checks ----------------------------------

needs_clang = pytest.mark.skipif(
    shutil.which("clang++-19") is None or not Path("/usr/include/hip/hip_runtime.h").is_file(),
    reason="needs clang-19 and the HIP headers (bash scripts/system-packages.sh)",
)
FP8_DTYPES = ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3fn", "float8_e5m2")  # __HIP_E4M3_FNUZ, ... order
FP8_PROGRAM = r"""
#include <hip/hip_fp8.h>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  const __hip_fp8_interpretation_t kinds[4] = {__HIP_E4M3_FNUZ, __HIP_E5M2_FNUZ, __HIP_E4M3, __HIP_E5M2};
  for (int k = 0; k < 4; ++k) {
    for (int code = 0; code < 256; ++code) printf("%a ", static_cast<double>(kbuild_hip_fp8::decode(code, kinds[k])));
    printf("\n");
    for (int i = 1; i < argc; ++i) {
      printf("%d ", __hip_cvt_float_to_fp8(strtof(argv[i], nullptr), __HIP_SATFINITE, kinds[k]));
    }
    printf("\n");
  }
  __hip_fp8_e4m3_fnuz x = 1.5f;
  printf("%a %d\n", static_cast<double>(float(x)), static_cast<int>(sizeof(__hip_fp8x4_e4m3_fnuz)));
  return 0;
}
"""


@needs_clang
def test_rocm_fp8_kernel_compiles_for_gfx942(tmp_path, capsys):
    from kbuild.cli import main

    kernel = _copy("rocm-fp8", tmp_path)
    assert main(["rocm-compile", str(kernel)]) == 0
    assert "dequant gfx942 dequant/dequant.hip" in capsys.readouterr().out


@needs_clang
def test_hip_fp8_stand_in_converts_like_torch(tmp_path):
    import torch

    from kbuild.build.rocm import COMPAT_INCLUDE

    source, program = tmp_path / "fp8.hip", tmp_path / "fp8"
    source.write_text(FP8_PROGRAM)
    compile_command = ["clang++-19", "-x", "hip", "--cuda-host-only", "-std=c++17", "-nogpulib"]
    compile_command += ["-idirafter", str(COMPAT_INCLUDE), str(source), "-o", str(program), "-lamdhip64"]
    subprocess.run(compile_command, check=True, capture_output=True)
    generator = torch.Generator().manual_seed(0)
    values = torch.cat([torch.randn(300, generator=generator) * 4, torch.randn(100, generator=generator) * 1e-3])
    values = torch.cat([values, torch.tensor([0.0, -0.0, 1e6, -1e6, float("inf"), float("-inf")])])
    output = subprocess.run([program, *(v.hex() for v in values.tolist())], capture_output=True, text=True, check=True)
    lines = output.stdout.splitlines()
    for index, name in enumerate(FP8_DTYPES):
        dtype = getattr(torch, name)
        decoded = torch.tensor([float.fromhex(v) for v in lines[2 * index].split()])
        expected = torch.arange(256, dtype=torch.uint8).view(dtype).float()
        torch.testing.assert_close(decoded, expected, equal_nan=True, rtol=0, atol=0)
        encoded = torch.tensor([int(v) for v in lines[2 * index + 1].split()], dtype=torch.uint8)
        finfo = torch.finfo(dtype)
        saturated = values.clamp(-finfo.max, finfo.max)  # SATFINITE: overflow gives the largest finite value
        assert torch.equal(encoded, saturated.to(dtype).view(torch.uint8)), name
    assert lines[-1] == "0x1.8p+0 4"


# -- the other keys of build.toml, as docs/kernel-builder-compat.md lists them -------------

EVERY_BACKEND = """
[general]
name = "every-key"
version = 2
edition = 5
license = "MIT"
backends = ["cpu", "cuda", "rocm", "xpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]
include = ["binding_include"]
cxx-flags = ["-DBINDING_FLAG"]
minver = "2.12"

[kernel.on_cpu]
backend = "cpu"
depends = ["torch"]
src = ["k/k.cpp"]
include = ["kernel_include"]
cxx-flags = ["-DKERNEL_CXX_FLAG"]

[kernel.on_cuda]
backend = "cuda"
depends = ["torch"]
src = ["k/k.cu"]
cuda-capabilities = ["9.0"]

[kernel.on_cuda_14]
backend = "cuda"
depends = ["torch"]
src = ["k/new.cu"]
cuda-minver = "14.0"

[kernel.on_rocm]
backend = "rocm"
depends = ["torch"]
src = ["k/k.hip"]
rocm-archs = ["gfx942", "gfx950"]
hip-flags = ["-DHIP_FLAG"]

[kernel.on_xpu]
backend = "xpu"
depends = ["torch"]
src = ["k/k.cpp"]
sycl-flags = ["-fsycl-targets=spir64"]
"""


@pytest.fixture
def every_key(tmp_path) -> Path:
    root = tmp_path / "every-key"
    for rel in (
        "torch-ext/torch_binding.cpp",
        "k/k.cpp",
        "k/k.cu",
        "k/new.cu",
        "k/k.hip",
        "torch-ext/every_key/__init__.py",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    (root / "binding_include").mkdir()
    (root / "kernel_include").mkdir()
    (root / "build.toml").write_text(EVERY_BACKEND)
    return root


def test_generated_projects_carry_the_keys_of_each_backend(every_key):
    cpu = (generate_only(every_key, "torch213-cxx11-cpu-x86_64-linux") / "CMakeLists.txt").read_text()
    assert f"[[{(every_key / 'binding_include').as_posix()}]]" in cpu and "BINDING_FLAG" in cpu
    assert f"[[{(every_key / 'kernel_include').as_posix()}]]" in cpu and "-DKERNEL_CXX_FLAG" in cpu
    cu130 = (generate_only(every_key, CU130) / "CMakeLists.txt").read_text()
    assert "[[kernel_on_cuda]]" in cu130 and "kernel_on_cuda_14" not in cu130, "cuda-minver 14.0 skips it on 13.0"
    rocm = (generate_only(every_key, "torch213-cxx11-rocm71-x86_64-linux") / "CMakeLists.txt").read_text()
    hip_flags = ("--offload-arch=gfx942", "--offload-arch=gfx950", "-DHIP_FLAG")
    assert "".join(f"  [[$<$<COMPILE_LANGUAGE:HIP>:{flag}>]]\n" for flag in hip_flags) in rocm
    xpu = (generate_only(every_key, "torch213-cxx11-xpu20260-x86_64-linux") / "CMakeLists.txt").read_text()
    assert "-fsycl-targets=spir64" in xpu


def test_torch_minver_is_checked(every_key):
    from kbuild.build.builder import check_torch_bounds
    from kbuild.model.variants import find_torch

    toml = every_key / "build.toml"
    toml.write_text(toml.read_text().replace('minver = "2.12"', 'minver = "9.0"\nmaxver = "9.1"'))
    manifest = load_manifest(every_key)
    with pytest.raises(KbuildError, match="needs torch >= 9.0"):
        check_torch_bounds(manifest, find_torch(), detect_variant("cpu"))


NOARCH_KEYS = """
[general]
name = "noarch-keys"
version = 3
edition = 5
license = "MIT"
backends = ["cpu", "cuda", "rocm", "xpu"]
upstream = "https://github.com/example/upstream"
source = "https://github.com/example/source"
python-depends = ["einops"]
kernel-depends = [{ repo-id = "org/other", version = 1 }]

[general.hub]
repo-id = "org/noarch-keys"
branch = "release"

[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/pinned", revision = "0123abc" }]

[general.xpu]
python-depends = ["onednn"]

[torch-noarch]
pyext = ["py", "json"]
cuda_capabilities = ["9.0"]
rocm_archs = ["gfx942"]
"""


def test_noarch_build_records_the_general_keys(tmp_path):
    from kbuild.build.builder import build_kernel

    root = tmp_path / "noarch-keys"
    (root / "torch-ext" / "noarch_keys").mkdir(parents=True)
    (root / "torch-ext" / "noarch_keys" / "__init__.py").write_text("")
    (root / "torch-ext" / "noarch_keys" / "table.json").write_text("{}")
    (root / "build.toml").write_text(NOARCH_KEYS)
    manifest = load_manifest(root)
    assert (manifest.repo_id, manifest.upload_branch) == ("org/noarch-keys", "release")
    staged = build_kernel(root, "torch-cuda", log=lambda _: None)
    metadata = json.loads((staged / "metadata.json").read_text())
    assert metadata["version"] == 3 and metadata["license"] == "MIT"
    assert metadata["python-depends"] == ["einops", "nvidia-cutlass-dsl"]
    assert metadata["kernel-depends"] == [
        {"repo-id": "org/other", "version": 1},
        {"repo-id": "org/pinned", "revision": "0123abc"},
    ]
    assert metadata["backend"] == {"type": "cuda", "archs": ["9.0"]}
    assert (metadata["upstream"], metadata["source"]) == (
        "https://github.com/example/upstream",
        "https://github.com/example/source",
    )
    assert (staged / "table.json").is_file()
    rocm = json.loads((build_kernel(root, "torch-rocm", log=lambda _: None) / "metadata.json").read_text())
    assert rocm["backend"] == {"type": "rocm", "archs": ["gfx942"]}
    xpu = json.loads((build_kernel(root, "torch-xpu", log=lambda _: None) / "metadata.json").read_text())
    assert xpu["python-depends"] == ["einops", "onednn"]
