#!/usr/bin/env bash
# Seconds per training iteration of each learner on the task (fightlab's PPO, rsl_rl's
# OnPolicyRunner through the door: `train --learner`), each body at NWORLD worlds, solo, the
# defaults, ITERS iterations (the first WARM left out), the learners run alternately: the median
# iteration wall time and its rollout / update split, host reads per iteration, and the curriculum
# stage reached. One `learner_speed` row per training under ${OUT:-runs}/data/results.
#
#   bash bench/learner_speed.sh [ITERS] [BODIES]        # e.g. 40 "simple muscular-fast"
#
# DEVICE, NWORLD, WARM and PY (the interpreter) may be set for a smoke run on the CPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ITERS=${1:-40}; BODIES=${2:-"simple muscular-fast"}; WARM=${WARM:-5}
DEVICE=${DEVICE:-cuda:0}; NWORLD=${NWORLD:-1024}; PY=${PY:-python3}
dest=${OUT:-runs}; mkdir -p "$dest"; dest=$(cd "$dest" && pwd)
work=$(mktemp -d)
for body in $BODIES; do
  for learner in fightlab rsl_rl; do
    run="$work/$learner-$body"
    if ! $PY -m fightlab train --learner "$learner" --body "$body" --nworld "$NWORLD" --device "$DEVICE" \
         --max-iterations "$ITERS" --no-progress --logger none --run-dir "$run" > "$run.log" 2>&1; then
      echo "$learner $body failed:"; tail -5 "$run.log"; continue
    fi
    $PY - "$run/rows.csv" "$learner" "$body" "$DEVICE" "$NWORLD" "$ITERS" "$WARM" "$dest" <<'PY'
import csv, sys
from fightlab import results
from fightlab.measure.sidebyside import speed_metrics
path, learner, body, device, nworld, iters, warm, dest = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
steady = rows[int(warm):]
row = results.run_metadata(body=body, nworld=int(nworld), seed=0, device=device, params={
    "study": "learner_speed", "learner": learner, "max_iterations": int(iters), "skip": int(warm)})
row.update(rsl_rl=learner == "rsl_rl", **speed_metrics(rows, steady))
results.append_row("learner_speed", row, dest)
print(f"{learner:9} {body:14} s/it {row['s_per_iter']:.4f} (rollout {row['rollout_s_per_iter']:.4f}, update "
      f"{row['update_s_per_iter']:.4f}) host reads {row['host_reads_per_iter']:.0f} stage {row['stage_reached']} "
      f"overflow {row['overflow_count']} nan {row['nan_resets']}", flush=True)
PY
  done
done
