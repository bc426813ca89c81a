"""kbuild sync against real git repositories made by the tests (offline: file:// URLs)."""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbuild import cli
from kbuild.core import gitrepo
from kbuild.core.errors import KbuildError
from kbuild.sync import filemap
from kbuild.sync.kernel_sync import sync_kernel, upstream_status
from kbuild.sync.upstream import FileMapping, Upstream, load_upstream

Edits = tuple[tuple[str, str], ...]  # text replacements a test patch makes
IDENTITY = [
    "-c",
    "user.name=Upstream Dev",
    "-c",
    "user.email=dev@example.com",
    "-c",
    "commit.gpgsign=false",
]

# The upstream ships HIP code as .cpp files; the kernel renames them by role (seeds' guide).
KERNEL_V1 = """#pragma once
#include "gpu_types.h"
// pipeline depth
constexpr int kStages = 2;






constexpr int kTileM = 128;
constexpr int kTileN = 128;
// end
"""
KERNEL_V2 = KERNEL_V1.replace("kTileN = 128", "kTileN = 256")
LAUNCHER_V1 = '#include "gemm_kernel.h"\nvoid launch(int m, int n, int k) {}\n'
LAUNCHER_V3 = '#include "gemm_kernel.h"\nvoid launch(int m, int n, int k) { /* K tails */ }\n'
LOCAL_TIMER = "// our own timer, not upstream's\n"

BUILD_TOML = """[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["rocm"]
upstream = "{url}"

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.gemm]
backend = "rocm"
depends = ["torch"]
rocm-archs = ["gfx942"]
src = ["gemm/gemm_kernel.h", "gemm/gemm_launcher.hip", "include/gpu_types.h"]
include = ["include"]
"""

UPSTREAM_YAML = """# Synced from the upstream GEMM; this comment must survive a sync.
url: {url}
commit: {commit}  # pinned by kbuild sync
ref: {ref}
files:
  # role: header
  - {{from: gemm/gemm_kernel.cpp, to: gemm/gemm_kernel.h}}
  # role: HIP implementation, compiled on its own
  - {{from: gemm/gemm_launcher.cpp, to: gemm/gemm_launcher.hip}}
  - {{from: "include/*.h", to: include/}}
keep:
  - include/timer.h
"""


def git(repo: Path, *args: str) -> str:
    return gitrepo.git([*IDENTITY, *args], repo).strip()


def commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    for rel, text in files.items():
        if text is None:
            git(repo, "rm", "-q", rel)
        else:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def unified_patch(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
    )


def snapshot(root: Path) -> dict[str, object]:
    """Every file, folder and symlink under `root` with its content, except the fetch cache."""
    state: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("cache"):
            continue
        if path.is_symlink():
            state[rel] = ("link", os.readlink(path))
        elif path.is_file():
            state[rel] = ("file", path.read_bytes(), os.access(path, os.X_OK))
        else:
            state[rel] = ("dir",)
    return state


def make_upstream(repo: Path) -> list[str]:
    """An upstream repository with three commits; returns their ids, oldest first."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return [
        commit(
            repo,
            "Initial GEMM",
            {
                "gemm/gemm_kernel.cpp": KERNEL_V1,
                "gemm/gemm_launcher.cpp": LAUNCHER_V1,
                "include/gpu_types.h": "// types v1\n",
                "include/timer.h": "// upstream timer\n",
                "include/old_helpers.h": "// helpers\n",
                "README.md": "# upstream\n",
                "tests/checker.cpp": "int main() {}\n",
            },
        ),
        commit(
            repo,
            "Tune the N tile",
            {
                "gemm/gemm_kernel.cpp": KERNEL_V2,
                "include/gpu_libs.h": "// libs\n",
            },
        ),
        commit(
            repo,
            "Handle K tails in the launcher",
            {
                "gemm/gemm_launcher.cpp": LAUNCHER_V3,
                "include/old_helpers.h": None,
            },
        ),
    ]


class Project:
    """A copy of the upstream repository and a kernels/ folder synced from it."""

    def __init__(self, tmp_path: Path, template: Path, commits: list[str]):
        self.root = tmp_path
        self.upstream = tmp_path / "upstream"
        self.url = self.upstream.as_uri()
        self.kernels = tmp_path / "kernels"
        shutil.copytree(template, self.upstream, symlinks=True)
        self.c1, self.c2, self.c3 = commits

    def kernel(
        self,
        name: str = "gemm",
        *,
        commit: str | None = None,
        ref: str = "main",
        patches: dict[str, Edits] | None = None,
    ) -> Path:
        """A kernel pinned at `commit` (default c1) whose mapped files are that commit's,
        renamed, with `patches` (name -> text replacements in gemm_kernel.h) applied in order."""
        commit = commit or self.c1
        kernel_dir = self.kernels / name
        python_name = name.replace("-", "_")
        kernel_text = gitrepo.git(["show", f"{commit}:gemm/gemm_kernel.cpp"], self.upstream)
        series = {}
        for patch_name, edits in (patches or {}).items():
            patched = kernel_text
            for old, new in edits:
                assert old in patched
                patched = patched.replace(old, new)
            series[patch_name] = unified_patch("gemm/gemm_kernel.h", kernel_text, patched)
            kernel_text = patched
        files = {
            "build.toml": BUILD_TOML.format(name=name, url=self.url),
            "upstream.yaml": UPSTREAM_YAML.format(url=self.url, commit=commit, ref=ref),
            "gemm/gemm_kernel.h": kernel_text,
            "gemm/gemm_launcher.hip": gitrepo.git(["show", f"{commit}:gemm/gemm_launcher.cpp"], self.upstream),
            "gemm/local_notes.h": "// written by hand in the kernel; the map does not own it\n",
            "torch-ext/torch_binding.cpp": "// binding\n",
            "torch-ext/torch_binding.h": "#pragma once\n",
            f"torch-ext/{python_name}/__init__.py": "from ._ops import ops\n",
            "tests/test_gemm.py": "def test_nothing():\n    pass\n",
            "include/timer.h": LOCAL_TIMER,
        }
        for path in gitrepo.git(["ls-tree", "-r", "--name-only", commit, "include/"], self.upstream).split():
            if path != "include/timer.h":
                files[path] = gitrepo.git(["show", f"{commit}:{path}"], self.upstream)
        for rel, text in files.items():
            (kernel_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (kernel_dir / rel).write_text(text)
        for patch_name, patch in series.items():
            (kernel_dir / "patches").mkdir(exist_ok=True)
            (kernel_dir / "patches" / patch_name).write_text(patch)
        return kernel_dir

    def edit_map(self, kernel_dir: Path, old: str, new: str) -> None:
        path = kernel_dir / "upstream.yaml"
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))


MORE_STAGES: Edits = (("kStages = 2", "kStages = 3"),)  # far from upstream's changes: re-applies
# Two hunks: the first re-applies, the second edits the line upstream changes in c2.
WIDER_N: Edits = (
    ("// pipeline depth", "// pipeline depth, for a wider N"),
    ("kTileN = 128", "kTileN = 192"),
)


def isolate_git(patch: pytest.MonkeyPatch, home: Path) -> None:
    """No user or system git configuration, and a fetch cache of the test's own."""
    patch.setenv("HOME", str(home))
    patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    patch.setenv("XDG_CACHE_HOME", str(home / "cache"))


@pytest.fixture(autouse=True)
def isolated_git(tmp_path, monkeypatch):
    isolate_git(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def upstream_template(tmp_path_factory) -> tuple[Path, list[str]]:
    home = tmp_path_factory.mktemp("template")
    with pytest.MonkeyPatch.context() as patch:
        isolate_git(patch, home)
        return home / "upstream", make_upstream(home / "upstream")


@pytest.fixture
def project(tmp_path, upstream_template) -> Project:
    return Project(tmp_path, *upstream_template)


def test_sync_copies_renamed_files_applies_patches_and_records_commit(project):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES})
    yaml_before = (kernel / "upstream.yaml").read_text()

    result = sync_kernel(kernel)

    assert (result.old, result.new) == (project.c1, project.c3)
    assert (kernel / "gemm/gemm_kernel.h").read_text() == KERNEL_V2.replace(*MORE_STAGES[0])
    assert (kernel / "gemm/gemm_launcher.hip").read_text() == LAUNCHER_V3
    assert (kernel / "include/gpu_libs.h").read_text() == "// libs\n"
    assert not (kernel / "include/old_helpers.h").exists()  # owned at c1, gone upstream
    assert (kernel / "include/timer.h").read_text() == LOCAL_TIMER  # keep
    assert not (kernel / "README.md").exists() and not (kernel / "tests/checker.cpp").exists()
    assert (kernel / "upstream.yaml").read_text() == yaml_before.replace(project.c1, project.c3)
    assert result.added == ["include/gpu_libs.h"]
    assert result.modified == ["gemm/gemm_kernel.h", "gemm/gemm_launcher.hip"]
    assert result.deleted == ["include/old_helpers.h"]
    assert result.patches == ["0001-more-stages.patch"]
    assert load_upstream(kernel).commit == project.c3


def test_sync_to_a_ref_given_on_the_command_line(project):
    kernel = project.kernel()
    result = sync_kernel(kernel, ref=project.c2)
    assert result.new == project.c2
    assert (kernel / "gemm/gemm_kernel.h").read_text() == KERNEL_V2
    assert (kernel / "gemm/gemm_launcher.hip").read_text() == LAUNCHER_V1
    assert (kernel / "include/old_helpers.h").exists()


def test_sync_at_the_pinned_commit_changes_nothing(project):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES})
    before = snapshot(project.root)
    result = sync_kernel(kernel, ref=project.c1)
    assert not result.changed
    assert snapshot(project.root) == before
    assert f"Already at `{project.c1}`" in result.summary()


def test_conflicting_patch_names_patch_and_hunk_and_leaves_tree_unchanged(project):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES, "0002-wider-n.patch": WIDER_N})
    before = snapshot(project.root)

    with pytest.raises(KbuildError) as failure:
        sync_kernel(kernel)

    error = failure.value
    assert Path(error.file) == kernel / "patches/0002-wider-n.patch"
    assert error.where == "hunk #2"
    assert error.message == "@@ -9,5 +9,5 @@ of gemm/gemm_kernel.h no longer applies"
    assert "refresh the patch" in error.fix
    assert snapshot(project.root) == before


@pytest.mark.parametrize(
    ("old", "new", "label"),
    [
        ("to: gemm/gemm_kernel.h}", "to: ../evil.h}", "files[0].to"),
        ("to: gemm/gemm_kernel.h}", "to: gemm/../../evil.h}", "files[0].to"),
        ("to: gemm/gemm_kernel.h}", "to: /tmp/evil.h}", "files[0].to"),
        ("from: gemm/gemm_kernel.cpp", "from: ../../etc/passwd", "files[0].from"),
        ("from: gemm/gemm_kernel.cpp", "from: /etc/passwd", "files[0].from"),
        ("  - include/timer.h", "  - ../include/timer.h", "keep[0]"),
    ],
)
def test_escaping_map_entry_is_rejected_before_anything_is_touched(project, old, new, label):
    kernel = project.kernel()
    project.edit_map(kernel, old, new)
    before = snapshot(project.root)
    with pytest.raises(KbuildError) as failure:
        sync_kernel(kernel)
    assert failure.value.message.startswith(f"{label}: path ")
    assert "absolute" in failure.value.message or "`..`" in failure.value.message
    assert isinstance(failure.value.where, int)
    assert snapshot(project.root) == before
    assert not (project.root / "cache").exists()  # not even fetched


def test_failure_while_writing_puts_the_kernel_back(project, monkeypatch):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES})
    # A file the sync adds in new folders (c2 adds the source).
    project.edit_map(kernel, "keep:", "  - {from: include/gpu_libs.h, to: extra/libs/}\nkeep:")
    before = snapshot(project.root)
    replace = os.replace
    calls = []

    def fail_on_third(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_third)
    with pytest.raises(KbuildError, match="No space left on device.*put back as it was"):
        sync_kernel(kernel)
    monkeypatch.setattr(os, "replace", replace)
    assert [Path(dst).relative_to(kernel).as_posix() for dst in calls] == [
        "extra/libs/gpu_libs.h",
        "include/gpu_libs.h",
        "gemm/gemm_kernel.h",
    ]
    assert snapshot(project.root) == before


def test_symlink_in_the_kernel_pointing_out_is_rejected(project):
    kernel = project.kernel()
    outside = project.root / "outside"
    (kernel / "include").rename(outside)
    (kernel / "include").symlink_to(outside, target_is_directory=True)
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match="leads out of the kernel folder through a symlink"):
        sync_kernel(kernel)
    assert snapshot(project.root) == before


def test_absolute_symlink_inside_the_kernel_is_not_written_through_while_staging(project):
    kernel = project.kernel()
    (kernel / "include").rename(kernel / "real_include")
    (kernel / "include").symlink_to(kernel.resolve() / "real_include", target_is_directory=True)
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match="include/.* goes through an absolute symlink"):
        sync_kernel(kernel)
    assert snapshot(project.root) == before


def test_upstream_symlinks_are_followed_inside_and_rejected_outside(project):
    git(project.upstream, "checkout", "-q", "-b", "links")
    (project.upstream / "include/alias.h").symlink_to("gpu_types.h")
    inside = commit(project.upstream, "Add an alias", {})
    (project.upstream / "include/escape.h").symlink_to("../../outside.h")
    escaping = commit(project.upstream, "Add an escaping link", {})
    kernel = project.kernel()

    sync_kernel(kernel, ref=inside)
    alias = kernel / "include/alias.h"
    assert not alias.is_symlink() and alias.read_text() == "// types v1\n"

    before = snapshot(project.root)
    with pytest.raises(KbuildError, match=r"'include/escape.h' is a symlink to '../../outside.h', outside"):
        sync_kernel(kernel, ref=escaping)
    assert snapshot(project.root) == before


def test_files_the_map_does_not_own_survive_and_are_never_overwritten(project):
    kernel = project.kernel()
    (kernel / "include/gpu_libs.h").write_text("// hand-written, before upstream had one\n")
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match="include/gpu_libs.h already exists and the map did not place it") as failure:
        sync_kernel(kernel)
    assert "add it to `keep`" in failure.value.fix
    assert snapshot(project.root) == before

    (kernel / "include/gpu_libs.h").unlink()
    sync_kernel(kernel)
    assert (kernel / "gemm/local_notes.h").is_file()
    assert (kernel / "torch-ext/torch_binding.cpp").is_file()


def test_a_patch_may_only_change_mapped_files(project):
    kernel = project.kernel()
    (kernel / "patches").mkdir()
    toml = (kernel / "build.toml").read_text()
    (kernel / "patches/0001-toml.patch").write_text(
        unified_patch("build.toml", toml, toml.replace("version = 1", "version = 2"))
    )
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match="changes build.toml, which the file map does not place"):
        sync_kernel(kernel)
    assert snapshot(project.root) == before


def test_sync_that_fails_kbuild_check_changes_nothing(project):
    git(project.upstream, "checkout", "-q", "-b", "drop-types")
    dropped = commit(project.upstream, "Drop gpu_types.h", {"include/gpu_types.h": None})
    kernel = project.kernel()
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match="`kbuild check` fails") as failure:
        sync_kernel(kernel, ref=dropped)
    assert "include/gpu_types.h" in failure.value.message
    assert (
        f"{kernel}/build.toml:16: error: [kernel.gemm] src: `include/gpu_types.h` does not exist"
        in failure.value.message
    )
    assert snapshot(project.root) == before


def test_url_must_match_build_toml_upstream(project):
    kernel = project.kernel()
    toml = kernel / "build.toml"
    toml.write_text(toml.read_text().replace(project.url, "https://example.com/other/repo.git"))
    with pytest.raises(KbuildError) as failure:
        sync_kernel(kernel)
    assert project.url in failure.value.message
    assert "https://example.com/other/repo.git" in failure.value.message
    assert failure.value.where == 2


def test_check_all_reports_behind_and_up_to_date_without_changes(project, monkeypatch, capsys):
    project.kernel("gemm")
    project.kernel("gemm-current", commit=project.c3)
    monkeypatch.chdir(project.root)
    before = snapshot(project.root)

    assert cli.main(["sync", "--all", "--check", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["behind"] == ["kernels/gemm"]
    by_name = {k["kernel"]: k for k in report["kernels"]}
    assert by_name["gemm"]["pinned"] == project.c1 and by_name["gemm"]["latest"] == project.c3
    assert by_name["gemm-current"]["behind"] is False
    assert snapshot(project.root) == before

    assert cli.main(["sync", "kernels/gemm"]) == 0
    capsys.readouterr()
    assert cli.main(["sync", "--all", "--check"]) == 0
    out = capsys.readouterr().out
    assert f"gemm: up to date (main at {project.c3[:12]})" in out


def test_check_follows_annotated_tags(project):
    git(project.upstream, "tag", "-a", "v1", "-m", "release 1", project.c2)
    kernel = project.kernel(ref="v1")
    [status] = upstream_status([kernel])
    assert status.behind and status.latest == project.c2


def test_summary_lists_commits_log_and_files(project, monkeypatch, capsys):
    project.kernel(patches={"0001-more-stages.patch": MORE_STAGES})
    monkeypatch.chdir(project.root)

    assert cli.main(["sync", "kernels/gemm", "--summary", "body.md"]) == 0

    body = (project.root / "body.md").read_text()
    assert body == capsys.readouterr().out
    lines = body.splitlines()
    assert lines[0] == f"# gemm: sync with upstream {project.c3[:7]}"
    assert f"Pinned commit: `{project.c1}` -> `{project.c3}`" in lines
    assert f"{project.c3[:7]} Handle K tails in the launcher" in lines
    assert f"{project.c2[:7]} Tune the N tile" in lines
    assert not any("Initial GEMM" in line for line in lines)  # old..new excludes the pinned commit
    assert "- modified `gemm/gemm_kernel.h` (upstream `gemm/gemm_kernel.cpp`)" in lines
    assert "- added `include/gpu_libs.h` (upstream `include/gpu_libs.h`)" in lines
    assert "- deleted `include/old_helpers.h`" in lines
    assert "- `patches/0001-more-stages.patch`" in lines


def test_cli_reports_errors_without_traceback(project, monkeypatch, capsys):
    kernel = project.kernel()
    project.edit_map(kernel, "to: gemm/gemm_kernel.h}", "to: ../evil.h}")
    monkeypatch.chdir(project.root)
    assert cli.main(["sync", "kernels/gemm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: kernels/gemm/upstream.yaml:7: files[0].to: path '../evil.h' climbs out")
    assert "Traceback" not in err
    assert cli.main(["sync", "--all"]) == 2  # --all only reports


@pytest.mark.parametrize(
    ("to", "shown"),
    [
        ('"gemm/gemm\\0kernel.h"', "'gemm/gemm\\x00kernel.h' contains a control character"),
        ("gemm/git~1/gemm_kernel.h", "'gemm/git~1/gemm_kernel.h' names `.git`"),
        ('"gemm/.GIT./gemm_kernel.h"', "'gemm/.GIT./gemm_kernel.h' names `.git`"),
    ],
)
def test_nul_or_git_look_alike_in_a_destination_is_bad_input(project, monkeypatch, capsys, to, shown):
    """Issue 40: a NUL in `to` ended in exit 3; `git~1` (`.git` to Windows) was accepted."""
    kernel = project.kernel()
    project.edit_map(kernel, "to: gemm/gemm_kernel.h}", f"to: {to}}}")
    monkeypatch.chdir(project.root)
    before = snapshot(project.root)
    assert cli.main(["sync", "kernels/gemm"]) == 2
    assert capsys.readouterr().err.startswith(f"error: kernels/gemm/upstream.yaml:7: files[0].to: path {shown}")
    assert snapshot(project.root) == before


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        ("ref: main", "ref: main\nbranch: main", "upstream.yaml: unknown key `branch`", 5),
        (
            "commit: ",
            "commit: abc123 #",
            "commit: 'abc123' is not a full 40-character commit id",
            3,
        ),
        ("to: include/}", "to: include}", "files[2].to: a glob maps to a folder", 10),
        ("to: gemm/gemm_kernel.h}", "to: gemm/gemm_kernel.h, suffix: .hip}", "files[0].suffix:", 7),
        (
            "to: gemm/gemm_kernel.h}",
            "to: patches/x.h}",
            "files[0].to: 'patches/x.h' is reserved",
            7,
        ),
        ("url: ", "url: --upload-pack=evil #", "url: '--upload-pack=evil' is not a git URL", 2),
        (
            "to: gemm/gemm_launcher.hip}",
            "to: gemm/gemm_kernel.h}",
            "files[1].to: gemm/gemm_kernel.h is also the destination of files[0]",
            9,
        ),
        ("ref: main", "ref: [main", "not valid YAML", 5),
    ],
)
def test_upstream_yaml_errors_name_key_and_line(project, old, new, message, line):
    kernel = project.kernel()
    project.edit_map(kernel, old, new)
    with pytest.raises(KbuildError) as failure:
        load_upstream(kernel)
    assert failure.value.message.startswith(message)
    assert failure.value.where == line


def test_glob_patterns():
    assert filemap.glob_regex("include/*.h").match("include/a.h")
    assert not filemap.glob_regex("include/*.h").match("include/sub/a.h")
    assert filemap.glob_regex("src/**/*.cpp").match("src/a.cpp")
    assert filemap.glob_regex("src/**/*.cpp").match("src/x/y/a.cpp")
    assert filemap.glob_regex("src/**").match("src/x/y/a.cpp")
    assert filemap.glob_regex("k[!_]?.h").match("kab.h")
    assert not filemap.glob_regex("k[!_]?.h").match("k_b.h")
    assert filemap.fixed_prefix("src/**/*.cpp") == "src/"


def _map(entries: list[tuple[str, str, str | None]], keep: tuple[str, ...] = ()) -> Upstream:
    mappings = tuple(
        FileMapping(source, dest, suffix, f"files[{i}]", i + 1) for i, (source, dest, suffix) in enumerate(entries)
    )
    return Upstream(Path("upstream.yaml"), "file:///u", "0" * 40, "HEAD", mappings, keep)


TREE = {path: ("100644", "0" * 40) for path in ["src/utils/timer.cpp", "src/utils/arith.h", "src/main.cpp"]}


def test_glob_with_suffix_renames_by_role_and_keeps_subfolders():
    upstream = _map(
        [("src/**/*.cpp", "hip/", ".hip"), ("src/utils/*.h", "include/", None)],
        keep=("hip/main.hip",),
    )
    assert filemap.resolve(upstream, TREE, "0" * 40, strict=True) == {
        "hip/utils/timer.hip": "src/utils/timer.cpp",
        "include/arith.h": "src/utils/arith.h",
    }


def test_two_entries_placing_one_file_is_an_error():
    upstream = _map([("src/main.cpp", "x/main.cpp", None), ("src/*.cpp", "x/", None)])
    with pytest.raises(
        KbuildError,
        match=r"src/main.cpp and src/main.cpp \(from files\[0\]\) both map to x/main.cpp",
    ):
        filemap.resolve(upstream, TREE, "0" * 40, strict=True)


def test_entry_matching_nothing_is_an_error_only_when_strict():
    upstream = _map([("src/gone.cpp", "gone.cpp", None)])
    assert filemap.resolve(upstream, TREE, "0" * 40, strict=False) == {}
    with pytest.raises(KbuildError, match="'src/gone.cpp' matches no upstream file"):
        filemap.resolve(upstream, TREE, "0" * 40, strict=True)


def test_documented_example_maps_the_seed_guides_layout(tmp_path):
    """docs/upstream-sync.md's upstream.yaml is valid and renames by role as the ROCm guide does."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "upstream-sync.md").read_text()
    (tmp_path / "upstream.yaml").write_text(re.search(r"```yaml\n(.*?)```", doc, re.S).group(1))
    upstream = load_upstream(tmp_path, "https://github.com/RadeonFlow/RadeonFlow_Kernels")
    sources = [
        "gemm/gemm_kernel.cpp", "gemm/gemm_kernel_legacy.cpp", "gemm/transpose_kernel.cpp",
        "gemm/gemm_launcher.cpp", "include/gpu_types.h", "include/timer.h", "src/utils/timer.cpp",
        "src/utils/arithmetic.h", "tests/checker/metrics.h", "tests/checker/checker.cpp",
    ]  # fmt: skip
    placed = filemap.resolve(upstream, dict.fromkeys(sources, ("100644", "0" * 40)), "0" * 40, strict=True)
    assert sorted(placed) == [
        "gemm/gemm_kernel.h", "gemm/gemm_kernel_legacy.h", "gemm/gemm_launcher.hip",
        "gemm/transpose_kernel.h", "include/gpu_types.h", "src/utils/arithmetic.h",
        "src/utils/timer.hip", "tests/checker/metrics.h",
    ]  # fmt: skip


def test_unreachable_upstream_or_unknown_ref_is_a_clear_error(project):
    kernel = project.kernel(ref="no-such-branch")
    with pytest.raises(KbuildError, match="is not a branch or tag of") as failure:
        upstream_status([kernel])
    assert failure.value.file == kernel / "upstream.yaml"
    with pytest.raises(KbuildError, match="cannot fetch 'no-such-branch' from") as failure:
        sync_kernel(kernel)
    assert failure.value.file == kernel / "upstream.yaml"

    shutil.rmtree(project.upstream)
    with pytest.raises(KbuildError, match="cannot list the refs of"):
        upstream_status([kernel])


# -- an upstream that attacks the kernel (issue 28) -------------------------------------------


def _commit_with_tree(project: Project, parent: str, folder: str, entries: dict[str, str]) -> str:
    """A commit of `parent`'s tree plus `folder`, whose entries (`name/file` -> text) are written
    with git's plumbing, which, unlike `git add`, allows names like `..` and `.git`."""
    upstream = project.upstream
    subtrees: dict[str, list[str]] = {}
    for rel, text in entries.items():
        name, _, file = rel.partition("/")
        blob = gitrepo.git(["hash-object", "-w", "--stdin"], upstream, input=text).strip()
        subtrees.setdefault(name, []).append(f"100644 blob {blob}\t{file}\n")
    lines = [
        f"040000 tree {gitrepo.git(['mktree'], upstream, input=''.join(rows)).strip()}\t{name}\n"
        for name, rows in subtrees.items()
    ]
    inner = gitrepo.git(["mktree"], upstream, input="".join(lines)).strip()
    root_rows = gitrepo.git(["ls-tree", parent], upstream) + f"040000 tree {inner}\t{folder}\n"
    root = gitrepo.git(["mktree"], upstream, input=root_rows).strip()
    return git(project.upstream, "commit-tree", root, "-p", parent, "-m", "vendor")


VENDOR_MAP = '  - {from: "include/*.h", to: include/}\n'


def test_upstream_dotdot_entry_cannot_overwrite_the_kernel(project):
    toml = BUILD_TOML.format(name="gemm", url=project.url)  # valid, so `kbuild check` passes it
    pinned = _commit_with_tree(project, project.c1, "vendor", {"../build.toml": toml})
    new = _commit_with_tree(
        project, project.c1, "vendor", {"../build.toml": toml.replace("version = 1", "version = 9")}
    )
    kernel = project.kernel(commit=pinned)
    project.edit_map(kernel, VENDOR_MAP, VENDOR_MAP + '  - {from: "vendor/**", to: third_party/}\n')
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match=r"'vendor/\.\./build\.toml' .* has a part named '\.\.'; sync refuses"):
        sync_kernel(kernel, ref=new)
    assert snapshot(project.root) == before


# `.git ` `.git.` `git~1` `.git::$INDEX_ALLOCATION`: what a Windows checkout reads as `.git` (issue 40)
@pytest.mark.parametrize("dot_git", [".git", ".GIT", ".git ", ".Git. ", "git~1", "GIT~2", ".git::$INDEX_ALLOCATION"])
def test_upstream_git_folder_is_never_written(project, dot_git):
    config = '[core]\n\tfsmonitor = "touch pwned; false"\n'
    new = _commit_with_tree(project, project.c1, "vendor", {f"{dot_git}/config": config})
    kernel = project.kernel()
    project.edit_map(kernel, VENDOR_MAP, VENDOR_MAP + '  - {from: "vendor/**", to: third_party/}\n')
    before = snapshot(project.root)
    with pytest.raises(
        KbuildError, match=re.escape(f"'vendor/{dot_git}/config' ") + f".* has a part named {re.escape(repr(dot_git))}"
    ):
        sync_kernel(kernel, ref=new)
    assert snapshot(project.root) == before
    assert not (kernel / "third_party").exists()


def test_a_patch_may_not_turn_a_mapped_file_into_a_symlink(project, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the kernel\n")
    kernel = project.kernel()
    scratch = tmp_path / "scratch"
    shutil.copytree(kernel, scratch)
    git(scratch, "init", "-q")
    git(scratch, "add", "-A")
    git(scratch, "commit", "-q", "-m", "kernel")
    (scratch / "gemm/gemm_kernel.h").unlink()
    (scratch / "gemm/gemm_kernel.h").symlink_to(secret)
    (kernel / "patches").mkdir()
    (kernel / "patches/0001-link.patch").write_text(gitrepo.git(["diff"], scratch))
    before = snapshot(project.root)
    with pytest.raises(KbuildError, match="patches may not create symlinks"):
        sync_kernel(kernel, ref=project.c1)
    assert snapshot(project.root) == before
    assert "outside the kernel" not in (kernel / "gemm/gemm_kernel.h").read_text()


# --- kbuild sync --refresh-patch ---


def refresh_work(kernel: Path) -> Path:
    return kernel / ".kbuild" / "refresh-patches"


def without_refresh_work(state: dict[str, object]) -> dict[str, object]:
    return {rel: value for rel, value in state.items() if "/.kbuild" not in f"/{rel}"}


def test_refresh_patch_carries_a_patch_whose_context_upstream_changed(project):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES})
    # Upstream edits a line of the patch's context, not the line it changes: `git apply` fails, a merge does not.
    noted = KERNEL_V2.replace('#include "gpu_types.h"\n', '#include "gpu_types.h"  // and nothing else\n')
    c4 = commit(project.upstream, "Note the include", {"gemm/gemm_kernel.cpp": noted})
    with pytest.raises(KbuildError, match="no longer applies"):
        sync_kernel(kernel, ref=c4)
    patch_before = (kernel / "patches/0001-more-stages.patch").read_text()

    result = sync_kernel(kernel, ref=c4, refresh_patches=True)

    assert (kernel / "gemm/gemm_kernel.h").read_text() == noted.replace(*MORE_STAGES[0])
    assert result.refreshed == ["0001-more-stages.patch"] and result.patches == ["0001-more-stages.patch"]
    assert "patches/0001-more-stages.patch" in result.modified
    assert (kernel / "patches/0001-more-stages.patch").read_text() != patch_before
    assert "- `patches/0001-more-stages.patch` (refreshed)" in result.summary()
    assert load_upstream(kernel).commit == c4
    assert not refresh_work(kernel).exists()
    assert not sync_kernel(kernel, ref=c4).changed  # the refreshed series reproduces the kernel


def test_refresh_patch_leaves_conflict_markers_and_goes_on_once_they_are_resolved(project, monkeypatch, capsys):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES, "0002-wider-n.patch": WIDER_N})
    first_patch = (kernel / "patches/0001-more-stages.patch").read_text()
    before = snapshot(project.root)
    monkeypatch.chdir(project.root)

    assert cli.main(["sync", "kernels/gemm", "--refresh-patch"]) == 1
    err = capsys.readouterr().err
    assert "patches/0002-wider-n.patch conflicts with upstream" in err and "in gemm/gemm_kernel.h" in err
    assert "then run `kbuild sync kernels/gemm --refresh-patch` again" in err
    conflicted = refresh_work(kernel) / "gemm/gemm_kernel.h"
    text = conflicted.read_text()
    assert "<<<<<<< " in text and "kTileN = 256" in text and "kTileN = 192" in text and ">>>>>>> " in text
    assert without_refresh_work(snapshot(project.root)) == without_refresh_work(before)

    assert cli.main(["sync", "kernels/gemm", "--refresh-patch"]) == 1  # markers still there
    assert "conflicts with upstream" in capsys.readouterr().err

    resolved = KERNEL_V2.replace("kStages = 2", "kStages = 3").replace("kTileN = 256", "kTileN = 384")
    resolved = resolved.replace("// pipeline depth", "// pipeline depth, for a wider N")
    conflicted.write_text(resolved)
    assert cli.main(["sync", "kernels/gemm", "--refresh-patch"]) == 0
    assert (kernel / "gemm/gemm_kernel.h").read_text() == resolved
    assert (kernel / "patches/0001-more-stages.patch").read_text() == first_patch  # still applies: kept as is
    assert "+constexpr int kTileN = 384;" in (kernel / "patches/0002-wider-n.patch").read_text()
    assert "- `patches/0002-wider-n.patch` (refreshed)" in capsys.readouterr().out
    assert not refresh_work(kernel).exists()


def test_refresh_patch_deletes_a_patch_that_upstream_made(project):
    kernel = project.kernel(patches={"0001-wider-n.patch": (("kTileN = 128", "kTileN = 256"),)})
    result = sync_kernel(kernel, ref=project.c2, refresh_patches=True)
    assert (kernel / "gemm/gemm_kernel.h").read_text() == KERNEL_V2
    assert result.deleted == ["patches/0001-wider-n.patch"] and result.patches == []
    assert not (kernel / "patches/0001-wider-n.patch").exists()


def test_refresh_patch_refuses_a_scratch_repository_of_another_refresh(project):
    kernel = project.kernel(patches={"0001-more-stages.patch": MORE_STAGES, "0002-wider-n.patch": WIDER_N})
    with pytest.raises(KbuildError, match="conflicts with upstream") as conflict:
        sync_kernel(kernel, refresh_patches=True)
    assert conflict.value.exit_code == 1
    with pytest.raises(KbuildError, match="unfinished refresh of other patches or for another upstream commit"):
        sync_kernel(kernel, ref=project.c2, refresh_patches=True)


def test_refresh_patch_does_not_go_with_check(project, monkeypatch, capsys):
    project.kernel()
    monkeypatch.chdir(project.root)
    assert cli.main(["sync", "kernels/gemm", "--check", "--refresh-patch"]) == 2
    assert "--refresh-patch goes with a sync" in capsys.readouterr().err


WALKTHROUGH = Path(__file__).resolve().parents[2] / "scripts" / "sync-walkthrough.sh"


def test_the_walkthrough_script_runs_from_start_to_end(tmp_path):
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this environment's kbuild
    result = subprocess.run(
        ["bash", str(WALKTHROUGH), str(tmp_path / "walkthrough")],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "- `patches/0001-empty-input.patch` (refreshed)" in result.stdout
    assert "<<<<<<< HEAD" in result.stdout and "- deleted `patches/0001-empty-input.patch`" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("scale: up to date (main at ")


def test_the_docs_quote_the_walkthrough_script():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "upstream-sync.md").read_text()
    assert f"```bash\n{WALKTHROUGH.read_text()}```" in doc


def test_the_walkthrough_script_finds_the_venv_or_says_how_to_make_it(tmp_path):
    """Run as the docs say (`bash scripts/sync-walkthrough.sh`, no virtual environment activated):
    the repository's .venv when there is one, else the command that makes it."""
    scripts = tmp_path / "repo" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy(WALKTHROUGH, scripts)
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    command = ["bash", str(scripts / WALKTHROUGH.name), str(tmp_path / "walkthrough")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "kbuild not found; fix: run bash scripts/bootstrap.sh" in result.stderr
    assert "source .venv/bin/activate" in result.stderr
    (tmp_path / "repo" / ".venv").symlink_to(Path(sys.executable).parent.parent)
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith("scale: up to date (main at ")
