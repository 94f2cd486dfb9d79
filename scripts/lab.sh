#!/usr/bin/env bash
# JupyterLab on fightlab's notebooks, with autosave off: a notebook you run is only written when
# you save it (Ctrl+S, File > Save), so outputs and edited parameters never land in the committed
# notebooks/ unasked; save a copy elsewhere (File > Save Notebook As...) to keep a run.
#
# Runs scripts/setup.sh first (idempotent), then .venv/bin/jupyter lab with the repository's
# jupyter/ folder on JUPYTER_CONFIG_PATH: its labconfig/default_setting_overrides.json sets the
# default of "@jupyterlab/docmanager-extension:plugin" autosave to false. It changes a default only:
# your own JupyterLab settings (~/.jupyter/lab/user-settings) stay yours and, where they set
# autosave, win. Extra arguments go to jupyter lab, e.g.
#   bash scripts/lab.sh --no-browser --ip 0.0.0.0 --port 8888
#   bash scripts/lab.sh --allow-root          (as root: jupyter lab refuses to start without it)
# Works from any directory; the server's root is the repository.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

bash "$ROOT/scripts/setup.sh"

export JUPYTER_CONFIG_PATH="$ROOT/jupyter${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"
echo "[lab] autosave off by default (jupyter/labconfig/default_setting_overrides.json): save with Ctrl+S," \
     "or save a copy elsewhere (File > Save Notebook As...) to keep a run's outputs"
exec "$ROOT/.venv/bin/jupyter" lab "$@"
