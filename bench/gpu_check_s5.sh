#!/usr/bin/env bash
# Session 5 GPU run of issue 14 (after `source .gpu/gpu-env.sh`; FIGHTLAB_COMMIT set by the caller).
#   1. the CUDA tests of tests/test_graphs.py: graphed update == eager update after one iteration;
#      full iterations under torch.cuda.set_sync_debug_mode("error") + the warp read guard
#   2. a resumed run re-captures: simple 1024, 4 iterations with a checkpoint at 2, resumed from 2:
#      every row host_reads == 1 and graph_fallbacks == 0
#   3. notebook 05 at size full, published (data/results/graphs.csv): both bodies at 1024 worlds,
#      every graph setting, the physics split
# Logs and the executed notebook go to $OUT; data/results/graphs.csv is copied there. A table last.
set -uo pipefail
O="${OUT:-/tmp}"
LOG="$O/check.log"
: > "$LOG"
declare -a RESULT
ok() { RESULT+=("PASS $1"); }
bad() { RESULT+=("FAIL $1"); }
PY=python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"

t0=$SECONDS
if timeout 240 $PY -m pytest -q -p no:cacheprovider tests/test_graphs.py -m gpu -rA >>"$LOG" 2>&1; then
  ok "1 CUDA tests (graphed == eager; one host read under sync-debug error) [$((SECONDS-t0)) s]"
else bad "1 CUDA tests [$((SECONDS-t0)) s]"; fi

t0=$SECONDS
R=runs/gpu/resume
if timeout 150 $PY -m fightlab train --body simple --nworld 1024 --max-iterations 2 --checkpoint-every 2 \
     --run-dir $R --device cuda:0 --no-progress >>"$LOG" 2>&1 \
   && timeout 120 $PY -m fightlab train --resume $R/latest.pt --max-iterations 4 --device cuda:0 --no-progress >>"$LOG" 2>&1 \
   && $PY - "$R" >>"$LOG" 2>&1 <<'PYEOF'
import sys, pandas as pd
rows = pd.read_csv(f"{sys.argv[1]}/rows.csv")
print(rows[["iteration", "wall_s", "rollout_s", "update_s", "host_reads", "graph_fallbacks"]].to_string())
assert rows["iteration"].tolist() == [1, 2, 3, 4]
assert (rows["host_reads"] == 1).all() and (rows["graph_fallbacks"] == 0).all()
PYEOF
then ok "2 resumed run re-captures: 1 host read, no fallback [$((SECONDS-t0)) s]"; else bad "2 resume on CUDA [$((SECONDS-t0)) s]"; fi

t0=$SECONDS
if timeout 420 $PY -m fightlab reproduce --only 05 --size full --publish --log-output >>"$LOG" 2>&1; then
  ok "3 notebook 05 full, published [$((SECONDS-t0)) s]"; else bad "3 notebook 05 [$((SECONDS-t0)) s]"; fi
mkdir -p "$O/data" "$O/nb" && cp data/results/graphs.csv "$O/data/" 2>/dev/null; cp runs/notebooks/05_*.ipynb "$O/nb/" 2>/dev/null
$PY - <<'PYEOF' 2>&1 | tee -a "$LOG"
import json
from fightlab import results
df = results.read_rows("graphs", ".")
if len(df):
    df["setting"] = [json.loads(p)["setting"] for p in df["params"]]
    cols = ["body", "setting", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "host_reads_per_iter",
            "graph_fallbacks", "physics_ms_per_step", "env_step_ms_per_step", "rollout_ms_per_step",
            "non_physics_share", "env_non_physics_share"]
    print(df[cols].round(4).to_string())
PYEOF
printf '%s\n' "${RESULT[@]}"
