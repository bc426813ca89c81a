"""Build relu's CPU variant for real and load it with the real `kernels` library."""

import os
import subprocess
import sys
import time

import pytest
import torch

from kbuild.build.builder import build_kernel, project_for
from kbuild.build.scaffold import create_kernel
from kbuild.model.inputs import input_digest
from kbuild.model.manifest import load_manifest
from kbuild.model.variants import detect_variant
from kbuild.testing.runner import loader_environment, run_tests


@pytest.fixture(scope="module")
def relu_build(relu_copy):
    return build_kernel(relu_copy, log=lambda line: None)


def test_staged_variant_is_flat_and_complete(relu_build, relu_copy):
    assert relu_build == relu_copy / "build" / detect_variant().name
    names = sorted(p.name for p in relu_build.iterdir())
    libraries = [n for n in names if n.endswith(".abi3.so")]
    assert len(libraries) == 1 and libraries[0].startswith("_relu_cpu_")
    assert names == sorted(["__init__.py", "_ops.py", "layers.py", "metadata.json", libraries[0]])
    ops_py = (relu_build / "_ops.py").read_text()
    ops_name = libraries[0].removesuffix(".abi3.so")
    assert f"ops = torch.ops.{ops_name}" in ops_py and f'"{ops_name}::{{op_name}}"' in ops_py


def test_metadata_is_accepted_by_kernels_and_its_digest_verifies(relu_build):
    from kernels._rust import Digest, DigestAlgorithm, Metadata

    metadata = Metadata.read_from_file(relu_build / "metadata.json")
    assert str(metadata.name) == "relu" and metadata.version == 1 and metadata.id.startswith("_relu_cpu_")
    metadata.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, relu_build))


def test_get_local_kernel_loads_the_build(relu_build, relu_copy):
    from kernels import get_local_kernel

    relu = get_local_kernel(relu_copy)
    x = torch.randn(257)
    torch.testing.assert_close(relu.relu(x), torch.relu(x), rtol=0, atol=0)


def test_get_kernel_through_local_kernels_loads_the_build(relu_build, relu_copy):
    code = (
        "import torch; from kernels import get_kernel\n"
        "relu = get_kernel('kernels-community/relu', version=1)\n"
        "x = torch.randn(100)\n"
        "assert torch.equal(relu.relu(x), torch.relu(x))\n"
        "print(relu.__name__)\n"
    )
    env = loader_environment(relu_copy, "kernels-community/relu")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("_relu_cpu_")
    assert not list(relu_build.rglob("__pycache__"))


def test_second_build_is_a_fast_no_op_and_touch_rebuilds_one_file(relu_build, relu_copy):
    lines: list[str] = []
    started = time.monotonic()
    build_kernel(relu_copy, log=lines.append)
    assert time.monotonic() - started < 2.0
    assert not [line for line in lines if line.lstrip().startswith("[")], lines
    source = relu_copy / "relu_cpu" / "relu_cpu.cpp"
    os.utime(source, None)
    lines.clear()
    build_kernel(relu_copy, log=lines.append)
    steps = [line for line in lines if line.lstrip().startswith("[")]
    assert len(steps) == 2, steps
    assert "relu_cpu.cpp.o" in steps[0] and "Linking" in steps[1]


def test_stale_files_are_removed_from_the_variant(relu_build, relu_copy):
    (relu_build / "stale.py").write_text("")
    (relu_build / "__pycache__").mkdir(exist_ok=True)
    build_kernel(relu_copy, log=lambda line: None)
    assert not (relu_build / "stale.py").exists() and not (relu_build / "__pycache__").exists()


def test_kernel_made_by_init_builds_and_passes_its_tests(tmp_path):
    kernel = create_kernel(tmp_path / "scale-op", backends=["cpu", "cuda", "rocm"], license="MIT")
    manifest = load_manifest(kernel)
    assert manifest.backends == ["cpu", "cuda", "rocm"] and manifest.repo_id == "kernels-community/scale-op"
    assert run_tests(kernel, ci=True) == 0
    assert (kernel / "build" / detect_variant().name / "metadata.json").is_file()
    assert (kernel / "CARD.md").is_file()


def test_kbuild_test_fails_when_no_test_is_selected_unless_allowed(relu_copy, relu_build, capfd):
    from kbuild.cli import main

    assert main(["test", str(relu_copy), "--no-build", "--", "-k", "typo_in_the_name"]) == 5
    err = capfd.readouterr().err
    assert "relu: pytest selected no test (exit 5): check the -k and -m expressions" in err
    assert "--allow-no-tests counts this as success" in err
    assert main(["test", str(relu_copy), "--no-build", "--allow-no-tests", "--", "-k", "typo_in_the_name"]) == 0
    assert "no tests selected (counted as success: --allow-no-tests)" in capfd.readouterr().err


def test_wrong_variant_is_a_clear_error(relu_copy, capsys):
    from kbuild.cli import main

    assert main(["build", str(relu_copy), "--variant", "torch299-cxx11-cu130-x86_64-linux"]) == 2
    err = capsys.readouterr().err
    assert "this environment builds" in err and "Traceback" not in err


def test_editing_tests_or_docs_rebuilds_nothing(relu_build, relu_copy):
    ops_name = project_for(load_manifest(relu_copy), detect_variant()).ops_name
    for rel in ("tests/test_relu.py", "benchmarks/benchmark_relu.py", "CARD.md"):
        path = relu_copy / rel
        path.write_text(path.read_text() + "\n# an edit\n")
    lines: list[str] = []
    started = time.monotonic()
    build_kernel(relu_copy, log=lines.append)
    assert time.monotonic() - started < 2.0
    assert not [line for line in lines if line.lstrip().startswith("[")], lines
    assert project_for(load_manifest(relu_copy), detect_variant()).ops_name == ops_name


def test_namespace_follows_the_build_inputs_only(kernel_dir):
    def uid() -> str:
        return input_digest(load_manifest(kernel_dir))

    first = uid()
    (kernel_dir / "tests").mkdir()
    (kernel_dir / "tests" / "test_demo.py").write_text("def test(): pass\n")
    (kernel_dir / "README.md").write_text("docs\n")
    assert uid() == first
    (kernel_dir / "demo_cpu" / "helper.h").write_text("#pragma once\n")  # included, not listed
    second = uid()
    assert second != first
    (kernel_dir / "demo_cpu" / "demo.cpp").write_text("// changed\n")
    assert uid() not in (first, second)


def test_provenance_tells_clean_dirty_and_uncommitted(kernel_dir):
    from kbuild.core import gitrepo

    repo = kernel_dir.parent
    gitrepo.git(["init", "--quiet"], repo)
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m"]
    (repo / "other.txt").write_text("x\n")
    gitrepo.git(["add", "other.txt"], repo)
    gitrepo.git([*commit, "first"], repo)
    state = gitrepo.kernel_state(kernel_dir)
    assert state is not None and state["state"] == "uncommitted" and state["dirty"] is True
    gitrepo.git(["add", "demo"], repo)
    gitrepo.git([*commit, "add the kernel"], repo)
    assert gitrepo.kernel_state(kernel_dir) == {
        "commit": gitrepo.git(["rev-parse", "HEAD"], repo).strip(),
        "state": "clean",
        "dirty": False,
    }
    (kernel_dir / "tests").mkdir()
    (kernel_dir / "tests" / "test_new.py").write_text("")
    state = gitrepo.kernel_state(kernel_dir)
    assert state is not None and state["state"] == "dirty" and state["dirty"] is True
