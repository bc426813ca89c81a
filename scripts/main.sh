#!/usr/bin/env bash
# The main job: set up, then build every kernel for this machine's variant, run its quick
# tests, load each build with the real `kernels` library and print a summary table. A kernel's
# quick tests are skipped when its build and tests are those of their last passing run;
# `bash scripts/main.sh --force-tests` runs them all (arguments go to `kbuild all`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# Local hub folders store binaries with git-lfs, as the Hub does; a folder created without it
# would keep them as plain git objects for good.
bash scripts/system-packages.sh git-lfs ||
  echo "main: git-lfs could not be installed; hub folders keep binaries as plain git objects" >&2
exec .venv/bin/kbuild all "$@"
