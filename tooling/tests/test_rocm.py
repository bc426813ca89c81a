"""kbuild.build.rocm: hipify, device-only compiles for gfx942 with clang-19, the MFMA assembly check.

Compiling tests need clang-19 with the HIP headers (`apt-get install clang-19 lld-19
libamdhip64-dev rocm-device-libs`; CI installs them) and skip with that reason when it is missing.
"""

import shutil
from pathlib import Path

import pytest

from kbuild.build import rocm
from kbuild.cli import main
from kbuild.core.errors import KbuildError
from kbuild.model.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]
needs_clang = pytest.mark.skipif(
    shutil.which(rocm.CLANG) is None or shutil.which(rocm.ASSEMBLER) is None,
    reason=f"{rocm.CLANG}/{rocm.ASSEMBLER} not installed: {rocm.APT_INSTALL}",
)

ROCM_BUILD_TOML = """\
[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = ["rocm"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.demo_rocm]
backend = "rocm"
depends = ["torch"]
rocm-archs = {archs}
src = {src}
"""

CUDA_SOURCE = """\
#include <cuda_runtime.h>
#include <cstdint>
#include "scale.cuh"

__global__ void scale_kernel(float* x, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}

const char* scale(float* x, int64_t n, cudaStream_t stream) {
  scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
  return cudaGetLastError() == cudaSuccess ? nullptr : "launch failed";
}
"""
CUDA_HEADER = """\
#pragma once
#include <cuda_runtime.h>
__device__ inline float twice(float v) { return 2.0f * v; }
"""

MFMA_SOURCE = """\
#include <hip/hip_runtime.h>
typedef float Acc __attribute__((ext_vector_type(16)));
__global__ void fp8_mfma(const long* a, const long* b, float* out) {
  Acc acc = {};
  acc = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a[threadIdx.x], b[threadIdx.x], acc, 0, 0, 0);
  for (int i = 0; i < 16; ++i) out[16 * threadIdx.x + i] = acc[i];
}
__global__ void scalar_dot(const float* a, const float* b, float* out) {
  out[threadIdx.x] = a[threadIdx.x] * b[threadIdx.x];
}
"""

ASM = """\
\t.text
\t.globl\tfast_kernel
\t.type\tfast_kernel,@function
fast_kernel:
\ts_load_dwordx4 s[0:3], s[4:5], 0x0
\tv_mfma_f32_32x32x16_fp8_fp8 a[0:15], v[4:5], v[2:3], 0
\tv_mfma_f32_32x32x16_fp8_fp8 a[0:15], v[6:7], v[8:9], a[0:15]
\ts_endpgm
.Lfunc_end0:
\t.type\tslow_kernel,@function
slow_kernel:
\tv_fma_f32 v0, v1, v2, v0 ; v_mfma_f32_32x32x16_fp8_fp8 in a comment is not an instruction
\ts_endpgm
.Lfunc_end1:
"""


def write_kernel(root: Path, files: dict[str, str], archs=("gfx942",)) -> Path:
    for rel, text in {"torch-ext/torch_binding.cpp": "// binding\n", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    src = [rel for rel in files]
    (root / "build.toml").write_text(ROCM_BUILD_TOML.format(archs=list(archs), src=src).replace("'", '"'))
    return root


# ----- hipify -----


def test_hipify_translates_cuda_runtime_names(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(CUDA_SOURCE)
    out = rocm.hipify(src, tmp_path / "out" / "k.hip").read_text()
    assert "#include <hip/hip_runtime.h>" in out
    assert "hipStream_t stream" in out and "hipGetLastError() == hipSuccess" in out
    assert "cuda" not in out.split("\n", 1)[1]  # below the breadcrumb line
    assert out.startswith("// hipified by kbuild.build.rocm from k.cu")


def test_hipify_rewrites_only_on_change(tmp_path):
    src, dst = tmp_path / "k.cu", tmp_path / "k.hip"
    src.write_text(CUDA_SOURCE)
    rocm.hipify(src, dst)
    first = dst.stat().st_mtime_ns
    rocm.hipify(src, dst)
    assert dst.stat().st_mtime_ns == first
    src.write_text(CUDA_SOURCE.replace("twice", "double_it"))
    rocm.hipify(src, dst)
    assert "double_it" in dst.read_text()


def test_hipify_missing_source_is_a_kbuild_error(tmp_path):
    with pytest.raises(KbuildError, match="cannot read the CUDA source"):
        rocm.hipify(tmp_path / "absent.cu", tmp_path / "absent.hip")


# ----- the assembly check -----


def test_check_mfma_counts_instructions_per_function():
    found = rocm.check_mfma(ASM, function_pattern="fast")
    assert found == {"fast_kernel": {"v_mfma_f32_32x32x16_fp8_fp8": 2}}


def test_check_mfma_fails_when_a_checked_function_lacks_them():
    with pytest.raises(KbuildError, match="slow_kernel lacks") as info:
        rocm.check_mfma(ASM)
    assert "fast_kernel lacks" not in str(info.value)


def test_check_mfma_fails_when_no_function_matches():
    with pytest.raises(KbuildError, match="no function matching 'gemm'"):
        rocm.check_mfma(ASM, function_pattern="gemm")


# ----- device-only compiles -----


def test_missing_compiler_says_what_to_install(tmp_path, monkeypatch):
    root = write_kernel(tmp_path / "demo", {"demo_rocm/k.hip": MFMA_SOURCE})
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(KbuildError, match="clang\\+\\+-19 not found") as info:
        rocm.compile_device_only(load_manifest(root), tmp_path / "out")
    assert "apt-get install" in info.value.fix


def test_kernel_without_rocm_sources_is_an_error(tmp_path, kernel_dir):
    with pytest.raises(KbuildError, match='no \\[kernel.\\*\\] with backend = "rocm"'):
        rocm.compile_device_only(load_manifest(kernel_dir), tmp_path / "out")


@needs_clang
def test_hipified_cuda_kernel_compiles_for_gfx942(tmp_path):
    root = write_kernel(tmp_path / "demo", {"demo_rocm/scale.cu": CUDA_SOURCE, "demo_rocm/scale.cuh": CUDA_HEADER})
    [obj] = rocm.compile_device_only(load_manifest(root), tmp_path / "out")
    assert (obj.kernel, obj.arch, obj.source) == (
        "demo_rocm",
        "gfx942",
        root / "demo_rocm" / "scale.cu",
    )
    assert obj.obj.stat().st_size > 0
    functions = rocm.asm_functions(obj.asm_text())
    [kernel] = [f for name, f in functions.items() if "scale_kernel" in name]
    assert kernel.mnemonics["global_store_dword"] >= 1


@needs_clang
def test_mfma_check_on_compiled_code(tmp_path):
    root = write_kernel(tmp_path / "demo", {"demo_rocm/k.hip": MFMA_SOURCE})
    [obj] = rocm.compile_device_only(load_manifest(root), tmp_path / "out")
    found = rocm.check_mfma(obj.asm_text(), function_pattern="fp8_mfma")
    assert list(found.values()) == [{"v_mfma_f32_32x32x16_fp8_fp8": 1}]
    with pytest.raises(KbuildError, match="scalar_dot.* lacks"):
        rocm.check_mfma(obj.asm_text(), function_pattern="scalar_dot")


@needs_clang
def test_compile_error_names_the_source_and_the_arch(tmp_path):
    root = write_kernel(tmp_path / "demo", {"demo_rocm/bad.hip": "__global__ void k() { undeclared(); }\n"})
    with pytest.raises(KbuildError, match="failed to compile bad.hip for gfx942; first error: ") as info:
        rocm.compile_device_only(load_manifest(root), tmp_path / "out")
    assert info.value.file == root / "demo_rocm" / "bad.hip"
    assert "undeclared" in info.value.message


@needs_clang
def test_unknown_arch_is_explained(tmp_path):
    root = write_kernel(tmp_path / "demo", {"demo_rocm/k.hip": MFMA_SOURCE}, archs=("gfx9999",))
    with pytest.raises(KbuildError) as info:
        rocm.compile_device_only(load_manifest(root), tmp_path / "out")
    assert "does not know gfx9999" in info.value.fix


@needs_clang
def test_relu_compiles_for_gfx942_through_hipify(tmp_path):
    [obj] = rocm.compile_device_only(load_manifest(REPO / "kernels" / "relu"), tmp_path / "out")
    assert obj.source == REPO / "kernels" / "relu" / "relu_cuda" / "relu.cu"
    names = rocm.asm_functions(obj.asm_text())
    assert sum("relu_kernel" in name for name in names) == 3  # float, half, bfloat16


# Slow: CI's ROCm stage (scripts/rocm-compile.sh) compiles the same sources with --require-mfma;
# this adds the instantiation counts.
@pytest.mark.slow
@needs_clang
def test_gemm_fast_path_has_fp8_mfma_in_every_instantiation(tmp_path):
    objects = rocm.compile_device_only(load_manifest(REPO / "kernels" / "gemm"), tmp_path / "out")
    by_source = {obj.source.name: obj for obj in objects}
    assert sorted(by_source) == ["gemm_rocm.hip", "moe_rocm.hip", "quantize_rocm.hip"]
    found = rocm.check_mfma(by_source["gemm_rocm.hip"].asm_text(), function_pattern="mfma_gemm_kernel")
    assert len(found) >= 3  # one per tile shape at least
    quantize = rocm.asm_functions(by_source["quantize_rocm.hip"].asm_text())
    # 3 input dtypes x (plain, SiLU-and-mul) x (16-byte, element path); 3 dtypes x 2 widths
    assert sum("quantize_kernel" in name for name in quantize) == 12
    assert sum("silu_mul_kernel" in name for name in quantize) == 6
    moe = rocm.asm_functions(by_source["moe_rocm.hip"].asm_text())
    assert sum("route_kernel" in name for name in moe) == 1 and sum("combine_kernel" in name for name in moe) == 2
    assert not [name for name in moe if "quantize_kernel" in name], "the routing's file compiles only its own kernels"


@needs_clang
def test_in_function_checks_the_sources_that_define_it(tmp_path, capsys):
    """With --in-function, a second source without that function is compiled and not checked
    (gemm's quantization kernel beside its MFMA kernel); no source defining it is an error."""
    other = "#include <hip/hip_runtime.h>\n__global__ void copy_kernel(float* x) { x[threadIdx.x] += 1.0f; }\n"
    root = write_kernel(tmp_path / "demo", {"demo_rocm/k.hip": MFMA_SOURCE, "demo_rocm/other.hip": other})
    assert main(["rocm-compile", str(root), "--require-mfma", "--in-function", "fp8_mfma"]) == 0
    out = capsys.readouterr().out
    assert "in 1 function(s) matching 'fp8_mfma'" in out and "no function matching 'fp8_mfma': not checked" in out
    assert main(["rocm-compile", str(root), "--require-mfma", "--in-function", "no_such_kernel"]) == 2
    assert "no function matching 'no_such_kernel' in any ROCm source" in capsys.readouterr().err


@needs_clang
def test_cli_rocm_compile(tmp_path, capsys):
    root = write_kernel(tmp_path / "demo", {"demo_rocm/k.hip": MFMA_SOURCE})
    assert main(["rocm-compile", str(root), "--require-mfma", "--in-function", "fp8_mfma"]) == 0
    assert "v_mfma_f32_32x32x16_fp8_fp8 x1 in 1 function(s)" in capsys.readouterr().out
    assert main(["rocm-compile", str(root), "--require-mfma"]) == 2
    assert "scalar_dot" in capsys.readouterr().err


def _clang_errors(path: Path, count: int) -> str:
    """Output as clang writes it for `count` undeclared names in `path`, one a line from line 2."""
    out = []
    for index in range(count):
        line = index + 2
        out += [
            f"{path}:{line}:5: error: use of undeclared identifier 'missing_{index}'",
            f"  {line} |     missing_{index}();",
            "    |     ^",
        ]
    return "\n".join(out) + f"\n{count} errors generated when compiling for gfx942.\n"


def test_the_first_of_many_errors_is_shown_at_its_line(tmp_path):
    source = tmp_path / "demo_rocm" / "k.hip"
    error = rocm.compile_error(_clang_errors(source, 20), source, source, "gfx942")
    assert error.file == source and error.line == 2
    assert error.message.startswith("clang++-19 failed to compile k.hip for gfx942; first error: ")
    assert "missing_0" in error.message and "missing_1'" not in error.message
    assert error.message.endswith("(19 more errors after it)")
    assert error.fix == "fix the code at k.hip:2"


def test_a_missing_third_party_header_is_not_blamed_on_the_flags(tmp_path):
    source = tmp_path / "demo_rocm" / "k.cu"
    hipified = tmp_path / "out" / "hipified" / "demo_rocm" / "k.hip"
    output = (
        f"In file included from {hipified}:1:\n"
        f"{tmp_path}/demo_rocm/tiles.h:3:10: fatal error: 'cute/tensor.hpp' file not found\n"
        "    3 | #include <cute/tensor.hpp>\n"
        "      |          ^~~~~~~~~~~~~~~~~\n"
        "1 error generated when compiling for gfx942.\n"
    )
    error = rocm.compile_error(output, source, hipified, "gfx942")
    assert error.file == tmp_path / "demo_rocm" / "tiles.h" and error.line == 3
    assert "`cute/tensor.hpp` is on no include path" in error.fix and "hip-flags" not in error.fix


@needs_clang
def test_a_real_compile_shows_its_first_error(tmp_path):
    body = "".join(f"    missing_{index}();\n" for index in range(25))
    root = write_kernel(tmp_path / "demo", {"demo_rocm/bad.hip": f"__global__ void k() {{\n{body}}}\n"})
    with pytest.raises(KbuildError) as info:
        rocm.compile_device_only(load_manifest(root), tmp_path / "out")
    assert info.value.file == root / "demo_rocm" / "bad.hip" and info.value.line == 2
    assert "missing_0" in info.value.message
