#!/usr/bin/env bash
# Where the single-launch Newton solve's time goes, stage by stage: its instrumented build
# (fightlab/kernels/stage_clock.py: thread 0 of each world's block reads the SM clock at each
# stage boundary) over NSTEPS physics steps of each body at each world count, after 10 steps of
# MuJoCo Warp's solve, for each kernel variant in FIXES (default: the first CUDA build "none",
# then its fixes added one by one up to "all"; fightlab/kernels/newton_hessian.py FIXES). Prints a table of median cycles per stage per world's solve (and the
# factorizations and line-search brackets per solve); appends a row per (body, nworld, variant) to
# ${OUT:-runs}/newton_stages.csv (results.run_metadata's columns: gpu, driver, commit, ...) and
# the same as `newton` rows (notebook 09's table, params size "stages": no graph time, no
# correctness) to ${OUT:-runs}/data/results/newton.csv, for data/results/newton.csv.
#
#   bash bench/newton_stages.sh [BODIES] [NWORLDS]     # default "simple muscular-fast" "1024 32"
#
# NSTEPS (20), NWARM (10; 300 gives fallen worlds, most lying in contact: a late-episode state),
# DEVICE (cuda:0), FIXES and PY (the interpreter) may be set: a CPU smoke is
# DEVICE=cpu NSTEPS=2 FIXES="none all" bash bench/newton_stages.sh simple 2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BODIES=${1:-"simple muscular-fast"}; NWORLDS=${2:-"1024 32"}
NSTEPS=${NSTEPS:-20}; NWARM=${NWARM:-10}; DEVICE=${DEVICE:-cuda:0}; PY=${PY:-python3}
for v in NSTEPS NWARM; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "newton_stages: $v must be a whole number, got '${!v}'" >&2; exit 2; }
done
FIXES=${FIXES:-"none bounds bounds,scatter bounds,scatter,pairs bounds,scatter,pairs,ldlt bounds,scatter,pairs,ldlt,tree bounds,scatter,pairs,ldlt,tree,levels all"}
dest=${OUT:-runs}; mkdir -p "$dest"; dest=$(cd "$dest" && pwd)
if [ "$DEVICE" != cpu ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
fi
# shellcheck disable=SC2086
$PY -m fightlab.measure.newton_stages --body $BODIES --nworld $NWORLDS --nsteps "$NSTEPS" --nwarm "$NWARM" \
  --device "$DEVICE" --fixes $FIXES --csv "$dest/newton_stages.csv" --results-root "$dest"
