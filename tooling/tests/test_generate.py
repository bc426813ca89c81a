"""Generated CMake projects for variants this machine cannot build (ROCm, Metal, XPU)."""

from kbuild.build.builder import generate_only
from kbuild.cli import main
from kbuild.model.cuda import gencode_flags

METAL_KERNEL = """
[kernel.demo_metal]
backend = "metal"
depends = ["torch"]
src = ["demo_metal/demo.mm", "demo_metal/demo.metal"]
"""


def test_rocm_project_hipifies_cuda_sources(relu_copy):
    build_dir = generate_only(relu_copy, "torch213-cxx11-rocm71-x86_64-linux")
    cmake = (build_dir / "CMakeLists.txt").read_text()
    assert "project([[relu]] LANGUAGES [[CXX]] [[HIP]])" in cmake
    assert "--offload-arch=gfx942" in cmake and "ROCM_KERNEL" in cmake
    hipified = build_dir / "generated" / "hipified" / "relu_cuda" / "relu.hip"
    assert f"[[{hipified.as_posix()}]]" in cmake
    text = hipified.read_text()
    assert "hip" in text and "cudaGetLastError" not in text
    assert not (relu_copy / "relu_cuda" / "relu.hip").exists(), "generated files never go into the sources"


def test_metal_project_is_generated(kernel_dir):
    (kernel_dir / "demo_metal").mkdir()
    (kernel_dir / "demo_metal" / "demo.mm").write_text("// placeholder\n")
    (kernel_dir / "demo_metal" / "demo.metal").write_text("// placeholder\n")
    toml = kernel_dir / "build.toml"
    toml.write_text(toml.read_text().replace('backends = ["cpu"]', 'backends = ["cpu", "metal"]') + METAL_KERNEL)
    build_dir = generate_only(kernel_dir, "torch213-metal-aarch64-darwin")
    cmake = (build_dir / "CMakeLists.txt").read_text()
    assert "LANGUAGES [[CXX]] [[OBJCXX]]" in cmake and "METAL_KERNEL" in cmake and "demo.mm" in cmake
    assert (build_dir / "generated" / "registration.h").is_file()


def test_generate_rejects_a_backend_the_kernel_lacks(relu_copy, capsys):
    assert main(["generate", str(relu_copy), "--variant", "torch213-cxx11-xpu20260-x86_64-linux"]) == 2
    assert "does not list" in capsys.readouterr().err


def test_cuda_gencode_flags():
    assert gencode_flags("9.0a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert gencode_flags("10.0+PTX") == ["-gencode=arch=compute_100,code=[sm_100,compute_100]"]
