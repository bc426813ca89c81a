"""Where pull-request staging publishes a kernel (.github/workflows/pr-staging.yml): the staging
repository `<org>-staging/<name>` of its Hub repository id, or `<STAGING_ORG>/<name>`.

`python -m kbuild.release.staging_repo BASE_DIR` reads the pull request's kernels as JSON ([{"kernel", "path"},
...]) on stdin and writes them back with "staging" added. The repository id is the one in the base
branch's build.toml (BASE_DIR: the base branch's checkout), never the pull request's, which could
otherwise aim the token at any repository; a kernel new in the pull request gets the default
owner's. STAGING_ORG in the environment names another organisation.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kbuild.core import paths
from kbuild.core.hubid import check_repo_id
from kbuild.core.redact import say
from kbuild.model.manifest import DEFAULT_HUB_OWNER, load_manifest


def staging_repo(repo_id: str, org: str | None = None) -> str:
    owner, name = repo_id.split("/")
    return check_repo_id(f"{org or owner + '-staging'}/{name}", source="the staging repository")


def base_repo_id(base: Path, kernel: dict[str, str]) -> str:
    """The repository id that the base branch gives `kernel` (its default owner's for a new kernel)."""
    folder = paths.inside(base, kernel["path"], what="kernel folder")
    if (folder / "build.toml").is_file():
        return load_manifest(folder).repo_id
    return f"{DEFAULT_HUB_OWNER}/{kernel['kernel']}"


def main() -> int:
    if len(sys.argv) != 2:
        say("usage: python -m kbuild.release.staging_repo BASE_DIR < kernels.json", err=True)
        return 2
    base = Path(sys.argv[1])
    kernels = json.load(sys.stdin)
    org = os.environ.get("STAGING_ORG") or None
    staged = [{**kernel, "staging": staging_repo(base_repo_id(base, kernel), org)} for kernel in kernels]
    say(json.dumps(staged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
