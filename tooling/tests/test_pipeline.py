"""The main job's publishing step: the hub folder it leaves loads with `kernels` as it lies."""

import subprocess
import sys

from kbuild.build.builder import build_kernel
from kbuild.core import gitrepo
from kbuild.pipeline import KernelResult, format_table, load_command, publish_locally

LOAD = (
    "import torch; from kernels import get_kernel\n"
    "relu = get_kernel('kernels-community/relu', version=1)\n"
    "print(relu.relu(torch.tensor([-1.0, 2.0])).tolist())\n"
)


def _run(code: str, checkout) -> subprocess.CompletedProcess:
    env = {"LOCAL_KERNELS": f"kernels-community/relu={checkout}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)


def test_published_version_is_checked_out_beside_the_hub_repository(relu_copy, tmp_path):
    variant = build_kernel(relu_copy, log=lambda line: None).name
    hub = tmp_path / "hub"
    summary, checkout = publish_locally(relu_copy, variant, hub)
    repo = hub / "kernels-community" / "relu"
    assert summary == f"{repo} (v1)" and checkout == repo.with_name("relu@v1")
    result = _run(LOAD, checkout)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0.0, 2.0]"
    readme = gitrepo.git(["show", "main:README.md"], repo)
    assert f"| `{variant}` | cpu | - |" in readme
    example = readme.split("## Usage\n\n```python\n", 1)[1].split("```", 1)[0]
    result = _run(example, checkout)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tensor(")
    # a second run moves the checkout to the branch's new head
    (relu_copy / "benchmarks" / "benchmark_relu.py").write_text("# changed\n")
    publish_locally(relu_copy, variant, hub)
    assert gitrepo.git(["rev-parse", "HEAD"], checkout) == gitrepo.git(["rev-parse", "v1"], repo)
    assert (checkout / "benchmarks" / "benchmark_relu.py").read_text() == "# changed\n"


def test_summary_prints_the_command_that_loads_each_published_kernel(tmp_path):
    published = KernelResult("relu", repo_id="kernels-community/relu", version=1)
    published.checkout = tmp_path / "hub" / "kernels-community" / "relu@v1"
    relative = KernelResult("gemm", repo_id="kernels-community/gemm", version=1)
    relative.checkout = type(tmp_path)(".hub/kernels-community/gemm@v1")
    table = format_table([published, relative, KernelResult("failed")])
    assert f'LOCAL_KERNELS=kernels-community/relu="{published.checkout}" .venv/bin/python -c' in table
    assert 'LOCAL_KERNELS=kernels-community/gemm="$PWD/.hub/kernels-community/gemm@v1"' in table
    assert load_command(KernelResult("failed")) is None
