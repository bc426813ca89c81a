"""Where pull-request staging publishes a kernel (.github/workflows/pr-staging.yml): the staging
repository `<org>-staging/<name>` of its Hub repository id, or `<STAGING_ORG>/<name>`.

`python -m kbuild.staging` reads the pull request's kernels as JSON ([{"kernel", "path"}, ...])
on stdin and writes them back with "staging" added; STAGING_ORG in the environment names
another organisation.
"""

from __future__ import annotations

import json
import os
import sys

from kbuild.hubid import check_repo_id
from kbuild.manifest import load_manifest
from kbuild.redact import say


def staging_repo(repo_id: str, org: str | None = None) -> str:
    owner, name = repo_id.split("/")
    return check_repo_id(f"{org or owner + '-staging'}/{name}", source="the staging repository")


def main() -> int:
    kernels = json.load(sys.stdin)
    org = os.environ.get("STAGING_ORG") or None
    staged = [{**kernel, "staging": staging_repo(load_manifest(kernel["path"]).repo_id, org)} for kernel in kernels]
    say(json.dumps(staged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
