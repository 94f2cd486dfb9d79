#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite: bash scripts/test.sh [pytest arguments...]
# pytest's exit code 5 ("no tests collected") is a failure here: a run that tests nothing is not a pass.
#
# .venv is set up exactly as scripts/run.sh sets it up (same extras, same stamp: neither script
# reinstalls after the other). SkyPilot, which the launcher's tests use to read its task YAML, goes
# into its own environment, .venv-survey (git-ignored; its pin is pyproject.toml's `survey` extra):
# it pins click < 8.2 and would downgrade .venv's. Idempotent like setup.sh: pip runs only when the
# pin changed since the last successful install (FORCE=1 reinstalls).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

bash scripts/setup.sh

SURVEY_VENV="$ROOT/.venv-survey"
SURVEY_STAMP="$SURVEY_VENV/.fightlab-survey-installed"
say() { echo "[test] $*"; }
# the survey extra's requirements, one per line, from pyproject.toml (the one place the pin lives)
survey_reqs="$(.venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["survey"]))')"
if [ -z "$survey_reqs" ]; then
  echo "[test] error: pyproject.toml has no survey extra (the SkyPilot pin the launcher's tests use)" >&2
  exit 1
fi
survey_ok=0  # 1: the pin installed already (nothing to write)
[ "${FORCE:-0}" != "1" ] && [ "$survey_reqs" = "$(cat "$SURVEY_STAMP" 2>/dev/null || true)" ] \
  && "$SURVEY_VENV/bin/python" -c 'import importlib.metadata as m; m.distribution("skypilot")' 2>/dev/null \
  && survey_ok=1
# setup.sh's check with a bar for this ≈ 0.5 GB environment (1 GiB unless SETUP_MIN_FREE_GB says)
[ "$survey_ok" = 1 ] || SETUP_MIN_FREE_GB="${SETUP_MIN_FREE_GB:-1}" bash scripts/setup.sh --check-disk "$SURVEY_VENV"
if [ ! -x "$SURVEY_VENV/bin/python" ]; then
  say "creating $SURVEY_VENV (SkyPilot for the launcher's tests, apart from .venv)"
  .venv/bin/python -m venv "$SURVEY_VENV"
fi
if [ "$survey_ok" = 1 ]; then
  say "$SURVEY_VENV has $(echo "$survey_reqs" | tr '\n' ' ')(unchanged): skipping pip install (FORCE=1 to redo)"
else
  say "pip install into $SURVEY_VENV: $(echo "$survey_reqs" | tr '\n' ' ')"
  mapfile -t reqs <<< "$survey_reqs"
  "$SURVEY_VENV/bin/python" -m pip install -q "${reqs[@]}"
  echo "$survey_reqs" > "$SURVEY_STAMP"
fi
# the launcher's SkyPilot tests run through this interpreter and fail (not skip) without it
export FIGHTLAB_SURVEY_PYTHON="$SURVEY_VENV/bin/python"

echo "[test] .venv/bin/python -m pytest -q -rfs $*"
set +e
.venv/bin/python -m pytest -q -rfs "$@"  # -rfs: each failed test's name and each skipped test's reason in the summary
rc=$?
set -e

if [ "$rc" -eq 5 ]; then
  echo "[test] FAILED: pytest collected no tests (exit code 5); running no test is not a pass" >&2
  exit 5
fi
exit "$rc"
