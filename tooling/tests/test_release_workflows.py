"""The pull-request staging workflow and the nightly verification workflow: wired as
docs/release.md says, the token only where nothing untrusted runs, and their `run:` scripts
behaving as described when run here with bash and a stand-in `gh` (the generic rules of every
workflow are in test_workflows.py)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kbuild.release.staging_repo import staging_repo

ROOT = Path(__file__).resolve().parents[2]
STAGING = ROOT / ".github" / "workflows" / "pr-staging.yml"
VERIFY = ROOT / ".github" / "workflows" / "verify.yml"
FAKE_GH = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
body = ""
if "--body-file" in args:
    body = open(args[args.index("--body-file") + 1]).read()
with open(os.environ["GH_CALLS"], "a") as calls:
    calls.write(json.dumps({"args": args, "body": body}) + "\\n")
if args[:2] == ["issue", "list"]:
    print(os.environ.get("GH_OPEN_ISSUE", ""))
"""


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _checkouts(job: dict) -> list[dict]:
    return [s.get("with", {}) for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]


def _run_step(tmp_path: Path, step: dict, env: dict[str, str]) -> list[dict]:
    """Run a step's script with bash and the stand-in gh; return gh's calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    calls = tmp_path / "calls"
    script = tmp_path / "step.sh"
    script.write_text(step["run"])
    full_env = {
        **os.environ,
        **step.get("env", {}),
        **env,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GH_CALLS": str(calls),
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_REPOSITORY": "org/kernels",
    }
    result = subprocess.run(["bash", "-e", str(script)], cwd=tmp_path, env=full_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="needs jq")


def test_staging_runs_on_a_maintainers_label_or_comment_only():
    workflow = _load(STAGING)
    assert set(workflow[True]) == {"pull_request_target", "issue_comment"}  # YAML reads `on` as True
    condition = workflow["jobs"]["matrix"]["if"]
    assert "github.event.label.name == 'stage'" in condition
    assert "startsWith(github.event.comment.body, '/stage')" in condition
    assert '["OWNER", "MEMBER", "COLLABORATOR"]' in condition and "author_association" in condition
    for name, job in workflow["jobs"].items():
        assert name == "matrix" or "matrix" in job["needs"], f"job {name} would run without the maintainer check"


def test_staging_builds_unprivileged_and_publishes_from_the_base_branch():
    jobs = _load(STAGING)["jobs"]
    build = jobs["build"]
    assert build["permissions"] == {"contents": "read"}
    assert "environment" not in build and "secrets." not in yaml.safe_dump(build)
    assert not any("cache" in step.get("uses", "") for step in build["steps"]), "no cache writes from PR code"
    assert _checkouts(build) == [{"ref": "${{ needs.matrix.outputs.sha }}", "persist-credentials": False}]
    publish = jobs["publish"]
    assert publish["environment"] == "kernel-staging" and publish["permissions"] == {"contents": "read"}
    base, pull = _checkouts(publish)
    assert base == {"persist-credentials": False}, "the code that runs comes from the base branch"
    assert pull["path"] == "pr" and pull["ref"] == "${{ needs.matrix.outputs.sha }}"
    installs = [s for s in publish["steps"] if "pip install" in s.get("run", "")]
    assert installs and all("working-directory" not in s for s in installs)
    downloads = [s["with"] for s in publish["steps"] if "download-artifact" in s.get("uses", "")]
    assert downloads == [{"pattern": "staged-${{ matrix.kernel }}_*", "path": "${{ runner.temp }}/artifacts"}]
    secret_steps = [s for s in publish["steps"] if "secrets." in yaml.safe_dump(s)]
    assert secret_steps == [publish["steps"][-1]]
    assert secret_steps[0]["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    command = secret_steps[0]["run"]
    assert 'kbuild publish "pr/$KERNEL_DIR" --repo-id "$STAGING" --branch "pr-$PR"' in command
    for name, job in jobs.items():
        if name != "publish":
            assert "secrets." not in yaml.safe_dump(job), f"job {name} sees a secret"


def test_staging_matrix_is_computed_by_the_base_branchs_kbuild():
    matrix = _load(STAGING)["jobs"]["matrix"]
    steps = matrix["steps"]
    install = next(i for i, s in enumerate(steps) if "pip install ." in s.get("run", ""))
    pull = next(i for i, s in enumerate(steps) if s.get("with", {}).get("path") == "pr")
    assert install < pull, "kbuild is installed before the pull request's tree is checked out"
    script = next(s for s in steps if s.get("id") == "matrix")["run"]
    assert 'kbuild matrix --changed-since "origin/$DEFAULT_BRANCH"' in script
    assert "python -I -m kbuild.release.staging_repo" in script


def test_staging_repository_names():
    assert staging_repo("kernels-community/relu") == "kernels-community-staging/relu"
    assert staging_repo("kernels-community/relu", "my-org") == "my-org/relu"
    completed = subprocess.run(
        [sys.executable, "-m", "kbuild.release.staging_repo", str(ROOT)],
        input=json.dumps([{"kernel": "relu", "path": "kernels/relu"}]),
        env={**os.environ, "STAGING_ORG": "me"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(completed.stdout) == [{"kernel": "relu", "path": "kernels/relu", "staging": "me/relu"}]


@needs_jq
def test_staging_targets_the_base_branchs_repository_not_the_pull_requests(tmp_path):
    """Issue 45, finding 8: with STAGING_ORG unset, a pull request setting `repo-id` in its own
    build.toml chose the repository that the staging token writes to."""
    pull = tmp_path / "pr"
    shutil.copytree(ROOT / "kernels" / "relu", pull / "kernels" / "relu", ignore=shutil.ignore_patterns("build"))
    manifest = pull / "kernels" / "relu" / "build.toml"
    manifest.write_text(manifest.read_text() + '\n[general.hub]\nrepo-id = "victim-org/relu"\n')
    new = pull / "kernels" / "new-op"
    shutil.copytree(pull / "kernels" / "relu", new)
    kernels = [{"kernel": "relu", "path": "kernels/relu"}, {"kernel": "new-op", "path": "kernels/new-op"}]
    environment = {k: v for k, v in os.environ.items() if k != "STAGING_ORG"}
    completed = subprocess.run(
        [sys.executable, "-I", "-m", "kbuild.release.staging_repo", str(ROOT)],
        input=json.dumps(kernels),
        env=environment,
        cwd=pull,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    staged = {entry["kernel"]: entry["staging"] for entry in json.loads(completed.stdout)}
    assert staged == {"relu": "kernels-community-staging/relu", "new-op": "kernels-community-staging/new-op"}
    script = next(s for s in _load(STAGING)["jobs"]["matrix"]["steps"] if s.get("id") == "matrix")["run"]
    assert "python -I -m kbuild.release.staging_repo .." in script  # the base branch's checkout, above `pr/`


def _approved_commit(tmp_path: Path, **env: str) -> tuple[int, str, str]:
    """Run the matrix job's "approved commit" step; its exit status, the sha it outputs and its stdout."""
    step = next(s for s in _load(STAGING)["jobs"]["matrix"]["steps"] if s.get("id") == "approved")
    output = tmp_path / "output"
    output.write_text("")
    script = tmp_path / "approved.sh"
    script.write_text(step["run"])
    environment = {**os.environ, "HEAD_SHA": "", "COMMENT": "", **env, "GITHUB_OUTPUT": str(output)}
    result = subprocess.run(["bash", "-e", str(script)], env=environment, capture_output=True, text=True)
    lines = output.read_text().splitlines()
    return result.returncode, lines[1] if len(lines) == 3 else "", result.stdout


def test_staging_builds_the_commit_the_maintainer_approved(tmp_path):
    """Issue 45, finding 8: the jobs checked out `refs/pull/N/head` when they ran, so a push after
    the label (or the comment) was built and published with the staging token."""
    workflow = STAGING.read_text()
    assert "refs/pull/" not in workflow
    matrix = _load(STAGING)["jobs"]["matrix"]
    pull = next(c for c in _checkouts(matrix) if c.get("path") == "pr")
    assert pull["ref"] == "${{ steps.approved.outputs.sha }}"
    approved = next(s for s in matrix["steps"] if s.get("id") == "approved")
    assert approved["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    labeled = "a" * 40
    assert _approved_commit(tmp_path, EVENT="pull_request_target", HEAD_SHA=labeled)[:2] == (0, labeled)
    commented = "0123456789abcdef0123456789abcdef01234567"
    comment = f"/stage {commented}\nlooks good"
    assert _approved_commit(tmp_path, EVENT="issue_comment", COMMENT=comment)[:2] == (0, commented)
    for comment in ("/stage", "/stage 0123abc", f"/stage {commented} now", f"/staged {commented}"):
        status, sha, out = _approved_commit(tmp_path, EVENT="issue_comment", COMMENT=comment)
        assert (status, sha) == (2, ""), comment
        assert "::error::comment `/stage <commit>` with the full 40-character id" in out


def test_staging_comments_the_exact_load_command(tmp_path):
    comment = _load(STAGING)["jobs"]["comment"]
    assert comment["permissions"] == {"pull-requests": "write"} and not _checkouts(comment)
    (step,) = comment["steps"]
    kernels = [{"kernel": "layer-norm", "path": "kernels/layer-norm", "staging": "org-staging/layer-norm"}]
    (call,) = _run_step(tmp_path, step, {"KERNELS": json.dumps(kernels), "SHA": "abc123", "PR": "12"})
    assert call["args"][:3] == ["pr", "comment", "12"] and "--repo" in call["args"]
    assert call["body"].splitlines() == [
        "Staged abc123 on branch `pr-12`. Load it with:",
        "",
        "```python",
        "from kernels import get_kernel",
        'layer_norm = get_kernel("org-staging/layer-norm", revision="pr-12", '
        'trust_remote_code=["org-staging/layer-norm"])',
        "```",
    ]


def test_nightly_verification_runs_kbuild_verify_for_every_kernel():
    workflow = _load(VERIFY)
    assert "schedule" in workflow[True]
    verify = workflow["jobs"]["verify"]
    assert verify["permissions"] == {"contents": "read"}
    script = next(s["run"] for s in verify["steps"] if "kbuild verify" in s.get("run", ""))
    assert "for manifest in kernels/*/build.toml" in script
    assert 'kbuild verify "$repo" --all-versions' in script
    report = workflow["jobs"]["report"]
    assert report["permissions"] == {"issues": "write"} and report["needs"] == "verify"
    assert not _checkouts(report), "the job that may write issues runs nothing from the repository"


@needs_jq
@pytest.mark.parametrize(("open_issue", "action"), [("", "create"), ("7", "comment")])
def test_nightly_opens_or_updates_one_issue_per_failure(tmp_path, open_issue, action):
    (step,) = [s for s in _load(VERIFY)["jobs"]["report"]["steps"] if "run" in s]
    report = tmp_path / "report"
    report.mkdir()
    (report / "failed").write_text("org/relu\n")
    (report / "org--relu.txt").write_text("hub:org/relu v1: build/x: digest: File hash mismatch for a.so\n")
    calls = _run_step(tmp_path, step, {"GH_OPEN_ISSUE": open_issue, "RUN_URL": "https://ci/run/1"})
    listing, change = calls
    assert listing["args"][:2] == ["issue", "list"] and '"kbuild verify: org/relu" in:title' in listing["args"]
    if action == "create":
        assert change["args"][:2] == ["issue", "create"] and "kbuild verify: org/relu" in change["args"]
    else:
        assert change["args"][:3] == ["issue", "comment", "7"]
    assert "digest: File hash mismatch for a.so" in change["body"] and "https://ci/run/1" in change["body"]
