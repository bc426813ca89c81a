"""`kbuild api-check` and the API guard of `kbuild publish`: real builds of relu compared with
their publication in a local hub folder and on the stand-in Hub (tests/fake_hub.py)."""

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_hub import FakeHub
from huggingface_hub import HfApi
from test_publish import BUILD_TOML, V213, _variant

from kbuild.build.builder import build_kernel
from kbuild.card.content import DEFAULT_TEMPLATE
from kbuild.cli import main
from kbuild.core import gitrepo
from kbuild.release.api_compat import compare, probe, signature_problems
from kbuild.release.execute import publish_to_folder, publish_to_hub
from kbuild.release.plan import plan_release

REPO = Path(__file__).resolve().parents[2]
P, PK, KW = "POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"


def _quiet(_line: str) -> None:
    pass


@pytest.mark.parametrize(
    ("before", "after", "problems"),
    [
        ([["x", PK, False]], [["x", PK, False], ["alpha", PK, True]], []),
        ([["x", PK, False]], [["x", PK, False], ["alpha", KW, True]], []),
        ([["x", PK, False]], [["x", PK, False], ["alpha", PK, False]], ["new required argument `alpha`"]),
        ([["x", PK, False]], [["input", PK, False]], ["argument `x` is now `input`"]),
        ([["x", P, False]], [["input", P, False]], []),
        ([["x", PK, False], ["out", PK, True]], [["x", PK, False]], ["argument `out` removed"]),
        (
            [["x", PK, False], ["out", PK, True]],
            [["x", PK, False], ["out", PK, False]],
            ["argument `out` lost its default"],
        ),
        ([["x", PK, False], ["k", KW, True]], [["x", PK, False]], ["keyword argument `k` removed"]),
        ([["x", PK, False], ["k", KW, True]], [["x", PK, False], ["kw", "VAR_KEYWORD", False]], []),
        ([["a", "VAR_POSITIONAL", False]], [], ["no longer takes *args"]),
        ([["self", PK, False], ["x", PK, False]], [["self", PK, False], ["x", PK, False]], []),
    ],
)
def test_signature_problems(before, after, problems):
    assert signature_problems(before, after) == problems


def _api(ops: dict, python: dict | None = None, layers: dict | None = None) -> dict:
    return {"package": "demo", "namespace": "_demo_cpu_0", "ops": ops, "python": python or {}, "layers": layers or {}}


def test_compare_ops_by_torch_schema_compatibility():
    before = _api({"relu": "relu(Tensor! out, Tensor x) -> ()", "gone": "gone(Tensor x) -> Tensor"})
    after = _api({"relu": "relu(Tensor! out, Tensor x, float alpha=1.0) -> ()", "new": "new(Tensor x) -> Tensor"})
    assert [(b.name, b.change) for b in compare(before, after)] == [("gone", "removed")]
    renamed = _api({"relu": "relu(Tensor! out, Tensor input) -> ()", "gone": "gone(Tensor x) -> Tensor"})
    (item,) = compare(before, renamed)
    assert str(item) == (
        "op `relu` (torch.ops._demo_cpu_0) schema changed incompatibly: "
        "before `relu(Tensor! out, Tensor x) -> ()`, after `relu(Tensor! out, Tensor input) -> ()`"
    )


def test_compare_names_and_layers():
    function = {"kind": "function", "signature": "(x)", "parameters": [["x", PK, False]]}
    layer = {"kind": "class", "signature": "(self, x)", "parameters": [["self", PK, False], ["x", PK, False]]}
    before = _api({}, {"f": function, "N": {"kind": "int", "signature": None, "parameters": None}}, {"L": layer})
    wider = {**layer, "signature": "(self, x, y)", "parameters": [*layer["parameters"], ["y", PK, False]]}
    after = _api({}, {"f": {**function, "kind": "class"}}, {"L": wider})
    assert [str(b) for b in compare(before, after)] == [
        "int `N` (demo.__all__) removed: before `N`, after `-`",
        "function `f` (demo.__all__) is now a class: before `function`, after `class`",
        "layer `L` (demo.layers) .forward signature: new required argument `y`: before `L(self, x)`, "
        "after `L(self, x, y)`",
    ]


# -- real builds --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def relu_variant(relu_copy) -> Path:
    """relu's CPU build (shared with test_build through the session's relu_copy)."""
    return build_kernel(relu_copy, log=_quiet)


@pytest.fixture
def hub(relu_copy, relu_variant, tmp_path) -> Path:
    """A local hub folder with relu's build published on v1."""
    release = plan_release(relu_copy, variants=[relu_variant.name])
    publish_to_folder(release, tmp_path / "hub", allow_nonportable=True, log=_quiet)
    return tmp_path / "hub"


def _edit_published(repo: Path, branch: str, rel: str, edit) -> None:
    """Commit `edit(text)` of `rel` onto `branch` of a hub repository, its metadata.json's digest
    updated: another build published before this one."""
    worktree = repo.parent / f"edit-{branch}"
    gitrepo.git(["worktree", "add", "--quiet", str(worktree), branch], repo)
    path = worktree / rel
    path.write_text(edit(path.read_text()))
    metadata_file = path.parent / "metadata.json"
    metadata = json.loads(metadata_file.read_text())
    metadata["digest"]["files"][path.name] = base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()
    metadata_file.write_text(json.dumps(metadata, indent=2))
    gitrepo.git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "edit"], worktree)
    gitrepo.git(["worktree", "remove", "--force", str(worktree)], repo)


def _legacy_function(text: str) -> str:
    return text.replace('__all__ = ["relu"]', '__all__ = ["relu", "relu_legacy"]') + (
        "\n\ndef relu_legacy(x, inplace=False):\n    return relu(x, x if inplace else None)\n"
    )


def test_probe_reads_the_api_of_a_build(relu_variant):
    api = probe(relu_variant)
    assert api["variant"] == relu_variant.name and api["namespace"].startswith("_relu_cpu_")
    assert api["package"] == "relu"
    assert api["ops"] == {"relu": "relu(Tensor! out, Tensor x) -> ()"}
    assert api["python"]["relu"]["parameters"] == [["x", PK, False], ["out", PK, True]]
    assert api["layers"]["ReLU"]["parameters"] == [["self", PK, False], ["x", PK, False]]


def test_api_check_and_publish_against_a_local_hub_folder(relu_copy, relu_variant, hub, capsys):
    """Unchanged: compatible. Then v1 holds a build with one more function (published before):
    api-check fails naming it, and publishing refuses unless --allow-breaking."""
    assert main(["api-check", str(relu_copy), "--against", str(hub)]) == 0
    assert "compatible with v1 of" in capsys.readouterr().out
    repo = hub / "kernels-community" / "relu"
    _edit_published(repo, "v1", f"build/{relu_variant.name}/__init__.py", _legacy_function)
    assert main(["api-check", str(relu_copy), "--against", str(repo)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("relu: breaking change against v1 of ")
    assert "function `relu_legacy` (relu.__all__) removed: before `relu_legacy(x, inplace=False)`, after `-`" in out[0]
    assert out[1] == (
        f"  fix: raise `version` in {relu_copy / 'build.toml'} to 2 (it publishes to a new branch v2), "
        "or keep the old API beside the new one"
    )
    head = gitrepo.git(["rev-parse", "v1"], repo)
    args = ["publish", str(relu_copy), "--variant", relu_variant.name, "--to", str(hub), "--allow-nonportable"]
    assert main(args) == 1
    refused = capsys.readouterr().err
    assert f"breaking changes against v1 of {repo}:" in refused
    assert "function `relu_legacy` (relu.__all__) removed" in refused
    assert (
        "fix: raise `version` in build.toml (it publishes to a new branch v2)" in refused
        and "--allow-breaking" in refused
    )
    assert gitrepo.git(["rev-parse", "v1"], repo) == head
    assert main([*args, "--allow-breaking"]) == 0
    message = gitrepo.git(["log", "-1", "--format=%B", "v1"], repo)
    assert message.startswith(f"Upload {relu_variant.name}\n\nBreaking change published with --allow-breaking:\n")
    assert "function `relu_legacy`" in message


def test_api_check_refuses_another_kernels_repository(relu_copy, relu_variant, hub, capsys):
    """A repository whose v1 publishes another kernel (here: its metadata.json says gemm) is named as
    such, not read as every op and function of relu removed."""
    repo = hub / "kernels-community" / "relu"
    metadata = f"build/{relu_variant.name}/metadata.json"
    _edit_published(repo, "v1", metadata, lambda text: text.replace('"relu"', '"gemm"'))
    assert main(["api-check", str(relu_copy), "--no-build", "--against", str(repo)]) == 2
    captured = capsys.readouterr()
    assert f"{repo} is another kernel's repository: it publishes `gemm`, not `relu`" in captured.err
    assert "fix: pass relu's own repository to --against" in captured.err
    assert "breaking change" not in captured.out


def test_api_check_against_the_hub(relu_copy, relu_variant):
    """The command as CI runs it: the repository id of build.toml (or another one), read through
    huggingface_hub at HF_ENDPOINT, against the existing build."""
    with FakeHub() as fake:
        fake.upload_build("kernels-community/relu", relu_variant)
        env = fake.environment()
        command = [sys.executable, "-m", "kbuild.cli", "api-check", str(relu_copy), "--no-build"]
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "compatible with v1 of hub:kernels-community/relu" in result.stdout
        assert any(
            path.endswith("/resolve/v1/build/" + relu_variant.name + "/metadata.json") for _, path, _ in fake.responses
        )
        result = subprocess.run(
            [*command, "--against", "kernels-community/new"], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        assert "relu: nothing published on v1 in kernels-community/new: no API to keep" in result.stdout
        fake.echo_headers = True  # every request refused, the request's headers (the token) in the answer
        result = subprocess.run(command, env={**env, "HF_TOKEN": "hf_secret123456789"}, capture_output=True, text=True)
        assert result.returncode == 2
        assert "error: the Hub refused to read kernels-community/relu (HTTP 400)" in result.stderr
        assert "hf_secret123456789" not in result.stderr + result.stdout


def test_nothing_published_and_version_zero_pass_without_building(kernel_dir, tmp_path, capsys):
    (tmp_path / "hub").mkdir()
    gitrepo.git(["init", "--quiet", "-b", "main", str(tmp_path / "hub" / "kernels-community" / "demo")], tmp_path)
    assert main(["api-check", str(kernel_dir), "--against", str(tmp_path / "hub")]) == 0
    assert "nothing published on v1" in capsys.readouterr().out
    (kernel_dir / "build.toml").write_text(
        (kernel_dir / "build.toml").read_text().replace("version = 1", "version = 0")
    )
    assert main(["api-check", str(kernel_dir), "--against", "not a repository id"]) == 0
    assert "version 0 is exempt" in capsys.readouterr().out
    assert not (kernel_dir / "build").exists()


def test_no_build_needs_a_build(kernel_dir, tmp_path, capsys):
    repo = tmp_path / "hub" / "kernels-community" / "demo"
    gitrepo.git(["init", "--quiet", "-b", "main", str(repo)], tmp_path)
    gitrepo.git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "x"], repo)
    gitrepo.git(["branch", "v1"], repo)
    assert main(["api-check", str(kernel_dir), "--against", str(tmp_path / "hub"), "--no-build"]) == 2
    assert "demo has no build of torch" in capsys.readouterr().err


def test_bad_against_is_a_usage_error(kernel_dir, tmp_path, capsys):
    assert main(["api-check", str(kernel_dir), "--against", "no/such/thing"]) == 2
    assert "neither a folder nor a Hub repository id" in capsys.readouterr().err
    assert main(["api-check", str(kernel_dir), "--against", str(tmp_path)]) == 2
    assert "no published kernel repository for kernels-community/demo" in capsys.readouterr().err


# -- publishing as a Hub pull request -------------------------------------------------------------


def test_publish_create_pr_opens_pull_requests_and_leaves_the_branches(tmp_path):
    kernel_dir = tmp_path / "demo"
    (kernel_dir / "torch-ext" / "demo").mkdir(parents=True)
    (kernel_dir / "build.toml").write_text(BUILD_TOML)
    (kernel_dir / "demo.cpp").write_text("// demo\n")
    (kernel_dir / "torch-ext" / "demo" / "__init__.py").write_text("__all__ = []\n")
    shutil.copyfile(DEFAULT_TEMPLATE, kernel_dir / "CARD.md")
    _variant(kernel_dir, V213, "one")
    with FakeHub() as fake:
        api = HfApi(endpoint=fake.endpoint, token="hf_fake_token")
        publish_to_hub(plan_release(kernel_dir, repo_id="org/demo"), api, create_pr=True, log=_quiet)
        repo = fake.repos["org/demo"]
        assert sorted(repo.pulls) == ["refs/pr/1", "refs/pr/2"]
        assert [target for target, _ in repo.pulls.values()] == ["v2", "main"]
        assert set(fake.files("org/demo", "v2")) == {".gitattributes"}
        assert f"build/{V213}/sub/data.txt" in fake.files("org/demo", "refs/pr/1")
        assert "README.md" in fake.files("org/demo", "refs/pr/2")
    assert main(["publish", str(kernel_dir), "--to", str(tmp_path / "hub"), "--create-pr"]) == 2


@pytest.mark.slow
def test_publish_does_not_compare_a_build_that_does_not_load(tmp_path):
    kernel_dir = tmp_path / "demo"
    (kernel_dir / "torch-ext" / "demo").mkdir(parents=True)
    (kernel_dir / "build.toml").write_text(BUILD_TOML)
    (kernel_dir / "demo.cpp").write_text("// demo\n")
    (kernel_dir / "torch-ext" / "demo" / "__init__.py").write_text("__all__ = []\n")
    variant = _variant(kernel_dir, V213, "one")
    publish_to_folder(plan_release(kernel_dir, repo_id="org/demo", variants=[V213]), tmp_path / "hub", log=_quiet)
    (variant / "__init__.py").write_text("raise ImportError('boom')\n")
    (variant / "metadata.json").write_text(
        (variant / "metadata.json").read_text().replace('"id"', '"name": "demo", "id"')
    )
    lines: list[str] = []
    release = plan_release(kernel_dir, repo_id="org/demo", variants=[V213])
    publish_to_folder(release, tmp_path / "hub", log=lines.append)
    assert lines[0] == f"api-check: build/{V213} not compared with v2: the build does not load: ImportError: boom"
    assert gitrepo.git(["show", f"v2:build/{V213}/__init__.py"], tmp_path / "hub" / "org" / "demo").startswith("raise")


@pytest.mark.slow
def test_api_check_follows_relu_through_a_rename_an_optional_argument_and_a_schema_change(tmp_path, capsys):
    """The issue's scenario on a private copy of today's relu (about two minutes: two full builds)."""
    kernel = tmp_path / "relu"
    shutil.copytree(REPO / "kernels" / "relu", kernel, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    hub = tmp_path / "hub"
    assert main(["build", str(kernel)]) == 0
    assert main(["publish", str(kernel), "--to", str(hub), "--allow-nonportable"]) == 0
    check = ["api-check", str(kernel), "--against", str(hub)]
    assert main(check) == 0
    init = kernel / "torch-ext" / "relu" / "__init__.py"
    original = init.read_text()
    init.write_text(original.replace('["relu"]', '["rectify"]').replace("def relu(", "def rectify("))
    layers = kernel / "torch-ext" / "relu" / "layers.py"
    layers_original = layers.read_text()
    layers.write_text(layers_original.replace("from . import relu", "from . import rectify as relu"))
    capsys.readouterr()
    assert main(check) == 1
    assert "function `relu` (relu.__all__) removed" in capsys.readouterr().out
    layers.write_text(layers_original)
    init.write_text(
        original.replace("out: torch.Tensor | None = None)", "out: torch.Tensor | None = None, *, scale=1.0)")
    )
    assert main(check) == 0
    init.write_text(original)
    binding = kernel / "torch-ext" / "torch_binding.cpp"
    binding.write_text(binding.read_text().replace("Tensor! out, Tensor x)", "Tensor! out, Tensor input)"))
    capsys.readouterr()
    assert main(check) == 1
    assert "op `relu` (torch.ops._relu_cpu_" in capsys.readouterr().out
