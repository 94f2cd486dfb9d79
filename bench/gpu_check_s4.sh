#!/usr/bin/env bash
# Session 4 GPU check of issues 11 and 12 on CUDA (not a measurement: nothing is published).
# Run on the device machine after `source .gpu/gpu-env.sh`. Prints a PASS/FAIL table last;
# logs go to $OUT/check.log.
#   1. simple, 1024 worlds: a fresh run with checkpoints, resumed to more iterations: rows.csv
#      holds iterations 1..N once, one result row, the manifest lists what was written
#   2. a second training into a folder in use is refused, naming the holder's pid
#   3. muscular-fast (tree factor, CUDA graph) through a checkpoint: resume on CUDA restores the
#      env through StanceEnv.load_state_dict
#   4. notebook 06 from notebooks/ as working directory (JupyterLab's), size full, a few
#      iterations: its run folder is under the repository's runs/, not notebooks/runs/
set -uo pipefail
LOG="${OUT:-/tmp}/check.log"
: > "$LOG"
declare -a RESULT
ok() { RESULT+=("PASS $1"); }
bad() { RESULT+=("FAIL $1"); }
PY=python3
A=(--device cuda:0 --no-progress)

R1=runs/gpu/simple-1024
if $PY -m fightlab train --body simple --nworld 1024 --max-iterations 12 --checkpoint-every 5 \
     --run-dir $R1 "${A[@]}" >>"$LOG" 2>&1 \
   && $PY -m fightlab train --resume $R1/latest.pt --max-iterations 20 "${A[@]}" >>"$LOG" 2>&1 \
   && $PY - "$R1" >>"$LOG" 2>&1 <<'EOF'
import json, sys, pandas as pd
d = sys.argv[1]
rows = pd.read_csv(f"{d}/rows.csv")
assert rows["iteration"].tolist() == list(range(1, 21)), rows["iteration"].tolist()
res = pd.read_csv(f"{d}/data/results/train.csv")
assert len(res) == 1 and res["iterations"].item() == 20, res
files = json.load(open(f"{d}/.fightlab-run.json"))["files"]
assert "rows.csv" in files and "data/results/train.csv" in files, files
print("check 1:", len(rows), "rows;", "update_s median", rows["update_s"].iloc[3:].median(),
      "rollout_s median", rows["rollout_s"].iloc[3:].median())
EOF
then ok "1 simple fresh+resume on CUDA: rows 1..20 once, one row, manifest"; else bad "1 simple fresh+resume"; fi

R2=runs/gpu/busy
$PY -m fightlab train --body simple --nworld 256 --max-iterations 400 --run-dir $R2 "${A[@]}" >>"$LOG" 2>&1 &
HOLDER=$!
for _ in $(seq 1 120); do [ -f $R2/.fightlab-run.lock ] && [ -s $R2/.fightlab-run.lock ] && break; sleep 0.5; done
MSG=$($PY -m fightlab train --body simple --nworld 256 --max-iterations 2 --run-dir $R2 "${A[@]}" 2>&1)
RC=$?
echo "$MSG" >>"$LOG"
kill -9 $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
if [ $RC -eq 2 ] && echo "$MSG" | grep -q "pid $HOLDER"; then ok "2 second writer refused (pid $HOLDER named)"; else bad "2 second writer: rc=$RC"; fi

R3=runs/gpu/mf-1024
if $PY -m fightlab train --body muscular-fast --nworld 1024 --max-iterations 6 --checkpoint-every 3 \
     --run-dir $R3 "${A[@]}" >>"$LOG" 2>&1 \
   && $PY -m fightlab train --resume $R3/ckpt_000003.pt --max-iterations 6 "${A[@]}" >>"$LOG" 2>&1 \
   && $PY - "$R3" >>"$LOG" 2>&1 <<'EOF'
import sys, pandas as pd
d = sys.argv[1]
rows = pd.read_csv(f"{d}/rows.csv")
assert rows["iteration"].tolist() == list(range(1, 7)), rows["iteration"].tolist()
print("check 3: muscular-fast rows", rows[["iteration", "rollout_s", "update_s", "env_steps_per_s"]].to_string())
EOF
then ok "3 muscular-fast resume from iteration 3 on CUDA"; else bad "3 muscular-fast resume"; fi

if (cd notebooks && $PY -m papermill 06_train.ipynb "${OUT:-/tmp}/nb06-cwd.ipynb" --cwd . \
      -p size full -p nworld 1024 -p max_iterations 3 -p device cuda:0 >>"$LOG" 2>&1) \
   && [ ! -d notebooks/runs ] && ls runs/train/ | grep -q nb06; then
  ok "4 notebook 06 from notebooks/: run under the repository's runs/"
else bad "4 notebook 06 from notebooks/ (notebooks/runs exists: $([ -d notebooks/runs ] && echo yes || echo no))"; fi

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$LOG" 2>&1
printf '%s\n' "${RESULT[@]}"
