#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh), then run the notebooks with papermill into runs/.
# On a machine with an NVIDIA GPU this runs the full measurements on cuda:0; on a CPU-only
# machine it runs the small smoke size through the same code path. Extra arguments go to
# `python -m fightlab reproduce` (e.g. --only 06, --size full, --publish).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m fightlab reproduce "$@"
