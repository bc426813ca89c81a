"""The contributor's inner loop: a source edit recompiles that source and not the binding, a
compile error is reported at its line as soon as the compiler gives it, local CUDA builds are
for the local GPU, and the main job does not rerun unchanged quick tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from minimal_manifest import MINIMAL_BUILD_TOML

from kbuild import pipeline
from kbuild.build.builder import build_kernel, for_local_gpu, generate_only, project_for
from kbuild.build.cmake_project import render_project
from kbuild.build.extension_name import name_in_binding
from kbuild.build.scaffold import create_kernel
from kbuild.cli import main
from kbuild.core.errors import KbuildError
from kbuild.model import cuda
from kbuild.model.manifest import load_manifest
from kbuild.model.variants import Variant, find_torch
from kbuild.release.plan import require_all_capabilities
from kbuild.testing.runner import run_tests

REPO = Path(__file__).resolve().parents[2]
CU130 = "torch214-cxx11-cu130-x86_64-linux"

# -- 1. the namespace is not compiled into the binding -----------------------------------------


def test_a_source_edit_leaves_the_binding_and_cmake_project_alone(tmp_path):
    kernel = create_kernel(tmp_path / "scale-op", backends=["cpu"], license="MIT")
    build_dir = generate_only(kernel, all_capabilities=True)
    before = {p.name: p.read_text() for p in (build_dir / "CMakeLists.txt", build_dir / "generated/registration.h")}
    old_name = project_for(load_manifest(kernel), Variant.parse(build_dir.name)).ops_name
    source = kernel / "scale_op_cpu" / "scale_op_cpu.cpp"
    source.write_text(source.read_text() + "// one more line\n")
    generate_only(kernel, all_capabilities=True)
    new_name = project_for(load_manifest(kernel), Variant.parse(build_dir.name)).ops_name
    assert new_name != old_name
    after = {p.name: p.read_text() for p in (build_dir / "CMakeLists.txt", build_dir / "generated/registration.h")}
    assert after == before  # the binding's compile command and headers did not change
    assert "TORCH_EXTENSION_NAME" not in after["CMakeLists.txt"] and old_name not in after["CMakeLists.txt"]
    assert f'kbuild_ops_namespace[] = "{new_name}"' in (build_dir / "generated/extension_name.cpp").read_text()


def test_other_uses_of_the_name_compile_it_into_the_binding(tmp_path):
    kernel = create_kernel(tmp_path / "scale-op", backends=["cpu"], license="MIT")
    assert name_in_binding(load_manifest(kernel)) is None
    binding = kernel / "torch-ext" / "torch_binding.cpp"
    binding.write_text(binding.read_text() + '// TORCH_EXTENSION_NAME in a comment is no use\nconst char* n = "x";\n')
    assert name_in_binding(load_manifest(kernel)) is None
    binding.write_text(binding.read_text() + "const char* name = KBUILD_STRINGIFY(TORCH_EXTENSION_NAME);\n")
    reason = name_in_binding(load_manifest(kernel))
    lines = binding.read_text().count("\n")
    assert reason == (
        f"torch-ext/torch_binding.cpp:{lines}: uses TORCH_EXTENSION_NAME outside TORCH_LIBRARY*_EXPAND and "
        "REGISTER_EXTENSION"
    )
    build_dir = generate_only(kernel, all_capabilities=True)
    ops_name = project_for(load_manifest(kernel), Variant.parse(build_dir.name)).ops_name
    assert f"TORCH_EXTENSION_NAME={ops_name}" in (build_dir / "CMakeLists.txt").read_text()
    assert "PyInit_, NAME" in (build_dir / "generated/registration.h").read_text()
    (kernel / "torch-ext" / "registration.h").write_text("#pragma once\n#define REGISTER_EXTENSION(NAME) x\n")
    assert name_in_binding(load_manifest(kernel)) == "torch-ext/registration.h:2: defines its own registration macros"


@pytest.mark.slow
def test_a_kernel_that_stringifies_the_name_builds_with_it_and_passes_its_tests(tmp_path):
    kernel = create_kernel(tmp_path / "scale-op", backends=["cpu"], license="MIT")
    binding = kernel / "torch-ext" / "torch_binding.cpp"
    binding.write_text(binding.read_text() + "const char* kernel_module = KBUILD_STRINGIFY(TORCH_EXTENSION_NAME);\n")
    lines: list[str] = []
    staged = build_kernel(kernel, log=lines.append)
    assert any("recompiles on every source edit" in line for line in lines)
    assert run_tests(kernel, ci=True, build=False) == 0
    assert (staged / "metadata.json").is_file()


def test_a_source_edit_recompiles_that_object_and_two_builds_load_side_by_side(relu_copy, tmp_path):
    first = build_kernel(relu_copy, log=lambda line: None)
    old_library = next(first.glob("*.abi3.so"))
    kept = shutil.copy(old_library, tmp_path / old_library.name)
    source = relu_copy / "relu_cpu" / "relu_cpu.cpp"
    original = source.read_text()
    lines: list[str] = []
    try:
        source.write_text(original + "// an edit\n")
        build_kernel(relu_copy, log=lines.append)
        new_library = next(first.glob("*.abi3.so"))
        steps = [line for line in lines if line.lstrip().startswith("[")]
        assert len(steps) == 3 and "Linking" in steps[2], steps
        assert sorted(step.rsplit("/", 1)[1] for step in steps[:2]) == ["extension_name.cpp.o", "relu_cpu.cpp.o"]
        code = textwrap.dedent(
            """
            import sys, torch
            for path in sys.argv[1:]:
                torch.ops.load_library(path)
            x = torch.tensor([-1.0, 2.0])
            for path in sys.argv[1:]:
                namespace = path.rsplit("/", 1)[1].removesuffix(".abi3.so")
                out = torch.empty_like(x)
                getattr(torch.ops, namespace).relu(out, x)
                print(namespace, out.tolist())
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", code, str(kept), str(new_library)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
        names = [line.split()[0] for line in result.stdout.splitlines()]
        assert names == [old_library.name.removesuffix(".abi3.so"), new_library.name.removesuffix(".abi3.so")]
        assert names[0] != names[1] and result.stdout.count("[0.0, 2.0]") == 2
    finally:
        source.write_text(original)


# -- 2. the first compile error stops the build, at its file and line -------------------------

SLOW_COMPILER = """\
#!{python}
# Stands in for a compile that takes long (torch's headers): sleeps before compiling the binding,
# and records when the real compiler reported a failure.
import subprocess, sys, time
if any(arg.endswith("torch_binding.cpp") for arg in sys.argv):
    time.sleep(120)
code = subprocess.run(["{cxx}", *sys.argv[1:]]).returncode
if code:
    with open("{marker}", "a") as marker:
        marker.write(f"{{time.time()}}\\n")
sys.exit(code)
"""


def test_syntax_error_is_reported_at_its_line_while_a_slow_compile_runs(tmp_path, monkeypatch):
    kernel = tmp_path / "slow"
    for rel, text in {
        "build.toml": MINIMAL_BUILD_TOML,
        "torch-ext/torch_binding.cpp": "int binding() { return 0; }\n",
        "torch-ext/demo/__init__.py": "",
        "demo_cpu/demo.cpp": "int ok() { return 1; }\n\nint broken = ;\n",
    }.items():
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text(text)
    marker = tmp_path / "failed-at"
    compiler = tmp_path / "slow-c++"
    cxx = shutil.which("g++") or "c++"
    compiler.write_text(SLOW_COMPILER.format(python=sys.executable, cxx=cxx, marker=marker))
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    lines: list[tuple[float, str]] = []
    started = time.monotonic()
    with pytest.raises(KbuildError) as error:
        build_kernel(kernel, jobs=2, log=lambda line: lines.append((time.time(), line)))
    reported = time.time()
    assert time.monotonic() - started < 60  # the 120 s compile of the binding was stopped
    assert (error.value.file, error.value.line) == (kernel / "demo_cpu" / "demo.cpp", 3)
    assert str(error.value).startswith(f"{kernel}/demo_cpu/demo.cpp:3: expected primary-expression")
    assert "look at line 3 of demo.cpp" in str(error.value)
    compiler_failed = float(marker.read_text().split()[0])
    assert reported - compiler_failed < 2.0
    assert any("demo.cpp:3:" in line and "error" in line for _, line in lines)  # the compiler's own output


# -- 3. local builds compile for the local GPU -----------------------------------------------

CUDA_TOML = """\
[general]
name = "gpu-op"
version = 1
edition = 5
license = "MIT"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.gpu]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0a", "10.0+PTX"]
src = ["gpu/gpu.cu"]
"""


@pytest.fixture
def cuda_kernel(tmp_path: Path) -> Path:
    kernel = tmp_path / "gpu-op"
    for rel in ("torch-ext/torch_binding.cpp", "gpu/gpu.cu", "torch-ext/gpu_op/__init__.py"):
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text("")
    (kernel / "build.toml").write_text(CUDA_TOML)
    return kernel


def _gencodes(cmake: str) -> list[str]:
    return sorted(part.split(",")[0] for part in cmake.split("-gencode=arch=")[1:])


def test_local_build_compiles_for_the_local_gpu_only(cuda_kernel, monkeypatch):
    project = project_for(load_manifest(cuda_kernel), Variant.parse(CU130))
    torch = find_torch()
    monkeypatch.setenv(cuda.LOCAL_CAPABILITY, "9.0")
    lines: list[str] = []
    local = for_local_gpu(project, False, lines.append)
    assert _gencodes(render_project(local, torch)["CMakeLists.txt"]) == ["compute_90a"]
    assert lines == [
        "kbuild: compiling for this machine's GPU only (capability 9.0): 9.0a of build.toml's 8.0, 9.0a, 10.0+PTX; "
        "--all-capabilities compiles them all"
    ]
    everything = ["compute_100", "compute_80", "compute_90a"]
    assert _gencodes(render_project(for_local_gpu(project, True, lines.append), torch)["CMakeLists.txt"]) == everything
    monkeypatch.setenv(cuda.LOCAL_CAPABILITY, "")  # no GPU
    assert for_local_gpu(project, False, lines.append) is project and len(lines) == 1


def test_local_capabilities_come_from_torch_cuda(monkeypatch):
    import torch

    monkeypatch.delenv(cuda.LOCAL_CAPABILITY, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: [(9, 0), (8, 6)][index])
    assert cuda.local_gpu_capabilities() == ("8.6", "9.0")
    monkeypatch.setenv(cuda.LOCAL_CAPABILITY, "sm_90")
    with pytest.raises(KbuildError, match="`sm_90` is not a GPU capability"):
        cuda.local_gpu_capabilities()
    monkeypatch.delenv(cuda.LOCAL_CAPABILITY)
    monkeypatch.setitem(sys.modules, "torch", None)  # compile-only: torch without its CUDA libraries
    assert cuda.local_gpu_capabilities() == ()


@pytest.mark.parametrize(
    ("listed", "gpus", "chosen"),
    [
        (["8.0", "9.0a", "10.0+PTX"], ("9.0",), ["9.0a"]),
        (["8.0", "9.0"], ("8.6",), ["8.0"]),  # sm_80 code runs on an 8.6
        (["8.0a", "7.5+PTX"], ("8.6",), ["7.5+PTX"]),  # 8.0a runs on an 8.0 only; PTX is compiled at load
        (["10.0f", "12.0+PTX"], ("10.3",), ["10.0f"]),
        (["9.0a"], ("8.0",), []),
        (["8.0", "9.0"], ("8.0", "9.0"), ["8.0", "9.0"]),
    ],
)
def test_capabilities_that_run_on_a_gpu(listed, gpus, chosen):
    assert cuda.running_on(listed, gpus) == chosen


def test_publish_refuses_a_build_for_the_local_gpu_only(cuda_kernel):
    variant_dir = cuda_kernel / "build" / CU130
    variant_dir.mkdir(parents=True)
    metadata = {"backend": {"type": "cuda", "archs": ["9.0a"]}}
    (variant_dir / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(KbuildError, match=r"compiled for 9.0a only .*\n  fix: .*--all-capabilities"):
        require_all_capabilities(load_manifest(cuda_kernel), variant_dir)
    metadata["backend"]["archs"] = ["8.0", "9.0a", "10.0+PTX"]
    (variant_dir / "metadata.json").write_text(json.dumps(metadata))
    require_all_capabilities(load_manifest(cuda_kernel), variant_dir)


def test_build_test_and_generate_take_all_capabilities(cuda_kernel, monkeypatch):
    calls: list[tuple[str, bool]] = []
    monkeypatch.setattr(
        "kbuild.build.builder.build_kernel", lambda *a, **k: calls.append(("build", k["all_capabilities"]))
    )
    monkeypatch.setattr(
        "kbuild.build.builder.generate_only", lambda *a, **k: calls.append(("generate", k["all_capabilities"]))
    )
    monkeypatch.setattr(
        "kbuild.testing.runner.run_tests", lambda *a, **k: calls.append(("test", k["all_capabilities"])) or 0
    )
    for command in ("build", "generate", "test"):
        assert main([command, str(cuda_kernel)]) == 0
        assert main([command, str(cuda_kernel), "--all-capabilities"]) == 0
    assert calls == [(c, flag) for c in ("build", "generate", "test") for flag in (False, True)]


# -- 4. the main job skips unchanged quick tests; the CUDA stage streams ---------------------


def test_main_job_skips_quick_tests_of_an_unchanged_build(tmp_path, monkeypatch, capsys):
    kernel = create_kernel(tmp_path / "scale-op", backends=["cpu"], license="MIT")
    staged = kernel / "build" / "torch213-cxx11-cpu-x86_64-linux"
    staged.mkdir(parents=True)
    (staged / "lib.so").write_bytes(b"one")
    builds: list[bool] = []
    runs: list[Path] = []
    monkeypatch.setattr(pipeline, "build_kernel", lambda k, **kw: builds.append(kw["all_capabilities"]) or staged)
    monkeypatch.setattr(pipeline, "run_tests", lambda k, **kw: runs.append(k) or 0)
    monkeypatch.setattr(pipeline, "load_with_kernels", lambda *args: "ok")

    def tests_run(**kwargs: bool) -> str:
        before = len(runs)
        result = pipeline.run_kernel(kernel, **kwargs)
        assert result.ok
        return f"{len(runs) - before} {result.tests}"

    assert tests_run() == "1 passed"
    capsys.readouterr()
    assert tests_run() == "0 passed (unchanged)"
    assert "quick tests skipped: the build and tests/ are unchanged" in capsys.readouterr().err
    assert tests_run(force_tests=True) == "1 passed"
    (kernel / "tests" / "test_more.py").write_text("def test_more(): pass\n")
    assert tests_run() == "1 passed"
    (staged / "lib.so").write_bytes(b"two")
    assert tests_run() == "1 passed"
    assert tests_run() == "0 passed (unchanged)"
    assert builds and all(builds)  # the main job publishes: every capability


def test_main_job_reruns_quick_tests_that_failed(tmp_path, monkeypatch):
    kernel = create_kernel(tmp_path / "scale-op", backends=["cpu"], license="MIT")
    staged = kernel / "build" / "torch213-cxx11-cpu-x86_64-linux"
    staged.mkdir(parents=True)
    codes = [0, 1, 0]
    monkeypatch.setattr(pipeline, "build_kernel", lambda k, **kw: staged)
    monkeypatch.setattr(pipeline, "run_tests", lambda k, **kw: codes.pop(0))
    monkeypatch.setattr(pipeline, "load_with_kernels", lambda *args: "ok")
    assert pipeline.run_kernel(kernel).tests == "passed"
    assert pipeline.run_kernel(kernel, force_tests=True).tests == "failed (pytest exit 1)"
    assert pipeline.run_kernel(kernel).tests == "passed" and not codes


FAKE_PYTHON = """\
#!/usr/bin/env bash
# .venv-cu130's python: `-c` reads torch's cuda-toolkit pin; `-m pip ...` (installing uv) is logged.
if [ "$1" = "-c" ]; then echo 13.0; exit 0; fi
echo "$*" >> "$(dirname "$0")/python-calls"
"""
FAKE_UV = """\
#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/uv-calls"
"""
FAKE_KBUILD = """\
#!/usr/bin/env bash
echo "first step of $2"
sleep 2
echo "second step of $2" >&2
"""


def test_cuda_compile_stage_sets_up_with_uv_and_streams_each_kernels_lines(tmp_path):
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "cuda-compile.sh", root / "scripts")
    (root / "kernels" / "one").mkdir(parents=True)
    (root / "kernels" / "one" / "build.toml").write_text('backends = ["cuda"]\n')
    bin_dir = root / ".venv-cu130" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("uv", FAKE_UV), ("kbuild", FAKE_KBUILD), ("nvcc", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    process = subprocess.Popen(
        ["bash", "scripts/cuda-compile.sh"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    arrived = [(time.monotonic(), line.rstrip("\n")) for line in process.stdout]
    assert process.wait() == 0
    lines = [line for _, line in arrived]
    at = {line: when for when, line in arrived}
    assert (bin_dir / "python-calls").read_text().splitlines() == [
        "-m pip install -q --disable-pip-version-check uv>=0.8"
    ]
    local = "".join(f" --find-links {d}" for d in ("/opt/pypi-more/files", "/opt/wheels") if Path(d).is_dir())
    into = f"pip install --quiet --python .venv-cu130/bin/python{local}"
    assert (bin_dir / "uv-calls").read_text().splitlines() == [
        f"{into} --no-deps torch==2.14.1",
        f"{into} cuda-toolkit[cublas,cusparse,cusolver]==13.0",
        f"{into} -e .",
    ]
    first, second = "  [one] first step of kernels/one", "  [one] second step of kernels/one"
    assert lines.index("cuda-compile: kernels/one: started") < lines.index(first) < lines.index(second)
    assert at[second] - at[first] > 1.5  # streamed as it came, not held until the kernel ended
    assert lines[-1].startswith("cuda-compile: kernels/one built in ")
