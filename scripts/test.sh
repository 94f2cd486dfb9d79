#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite: bash scripts/test.sh [pytest arguments...]
# pytest's exit code 5 ("no tests collected") is a failure here: a run that tests nothing is not a pass.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# the survey extra too: the launcher's tests read its task YAML with SkyPilot itself
EXTRAS=test,survey bash scripts/setup.sh

echo "[test] .venv/bin/python -m pytest -q $*"
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e

if [ "$rc" -eq 5 ]; then
  echo "[test] FAILED: pytest collected no tests (exit code 5); running no test is not a pass" >&2
  exit 5
fi
exit "$rc"
