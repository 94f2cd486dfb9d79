#!/usr/bin/env bash
# Set up fightlab on a fresh Linux machine with python3 >= 3.11: a .venv in the repository root
# with fightlab installed editable plus the test extra. Idempotent: re-running reuses the .venv and
# skips pip when pyproject.toml is unchanged since the last successful install (FORCE=1 reinstalls).
# Works from any directory. Override the interpreter with PYTHON=/path/to/python3.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
STAMP="$VENV/.fightlab-installed"

say() { echo "[setup] $*"; }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "[setup] error: '$PYTHON' not found; install Python >= 3.11 or set PYTHON=..." >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "[setup] error: $("$PYTHON" --version 2>&1) is too old; fightlab needs Python >= 3.11" >&2
    exit 1
  fi
  say "creating $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
else
  say "reusing $VENV ($("$VENV/bin/python" --version 2>&1))"
fi

PY="$VENV/bin/python"

# Editable installs from pyproject.toml need pip >= 21.3; upgrade pip only if it is older.
if ! "$PY" -c 'import sys, pip; v = tuple(int(x) for x in pip.__version__.split(".")[:2]); sys.exit(0 if v >= (21, 3) else 1)' 2>/dev/null; then
  say "pip in $VENV is older than 21.3: upgrading pip"
  "$PY" -m pip install --upgrade pip
fi

want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
# installed, editable, from this folder? (reads metadata only: never imports fightlab)
installed_here() {
  "$PY" - "$ROOT" <<'PYEOF' 2>/dev/null
import json, sys, pathlib, importlib.metadata as m
d = json.loads(m.distribution("fightlab").read_text("direct_url.json") or "{}")
sys.exit(0 if d.get("url") == pathlib.Path(sys.argv[1]).as_uri() and d.get("dir_info", {}).get("editable") else 1)
PYEOF
}

if [ "${FORCE:-0}" != "1" ] && [ "$want" = "$have" ] && installed_here; then
  say "fightlab already installed and pyproject.toml unchanged: skipping pip install (FORCE=1 to redo)"
else
  say "pip install -e '.[test]' (pinned versions from pyproject.toml)"
  "$PY" -m pip install -e '.[test]'
  echo "$want" > "$STAMP"
fi

say "done: fightlab $("$PY" -c 'import importlib.metadata as m; print(m.version("fightlab"))') installed editable in $VENV"
