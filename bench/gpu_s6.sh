#!/usr/bin/env bash
# Session 6 GPU calls (issues 14 and 15), one step per argument, in order, then a table:
#   FIGHTLAB_COMMIT=<sha> bash bench/gpu_s6.sh STEP [STEP ...]
# STEP:
#   check        the CUDA tests of tests/test_graphs.py (graphed == eager, fused Adam; one host
#                read per iteration under sync-debug "error"), a resumed simple run on CUDA
#                (checkpoint at 2, resumed to 4: one read, no fallback), notebook 05 at size
#                full, published (the direct step split)
#   solo:BODY:SEED   one solo headline training (defaults, 1024 worlds, --publish)
#   kscan:K:MPS      one K-scan point: a `fightlab batch` of K simple trainings at 1024 worlds,
#                70 iterations, --concurrent K, MPS on|off, then `measure.packing --skip 24
#                --publish` (one data/results/packing.csv row)
# Back in $OUT: one log per step, data.tgz (every file under data/ this call wrote).
set -uo pipefail
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "set FIGHTLAB_COMMIT=<sha of the code sent> (rows record it)"; exit 2; }
export FIGHTLAB_COMMIT
O="${OUT:-/tmp}"
stamp=$(mktemp); touch "$stamp"; sleep 1
declare -a RESULT
ok() { RESULT+=("PASS $1"); }
bad() { RESULT+=("FAIL $1"); }
PY=python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"

for step in "$@"; do
  t0=$SECONDS
  IFS=: read -r kind a b <<< "$step"
  log="$O/${step//:/_}.log"
  case "$kind" in
    check)
      { timeout 240 $PY -m pytest -q -p no:cacheprovider tests/test_graphs.py -m gpu -rA \
          && echo "CHECK1 PASS" || echo "CHECK1 FAIL"
        R=runs/gpu/resume6; rm -rf "$R"
        timeout 150 $PY -m fightlab train --body simple --nworld 1024 --max-iterations 2 --checkpoint-every 2 \
             --run-dir $R --device cuda:0 --no-progress \
          && timeout 120 $PY -m fightlab train --resume $R/latest.pt --max-iterations 4 --device cuda:0 --no-progress \
          && $PY - "$R" <<'PYEOF' && echo "CHECK2 PASS" || echo "CHECK2 FAIL"
import sys, pandas as pd
rows = pd.read_csv(f"{sys.argv[1]}/rows.csv")
print(rows[["iteration", "wall_s", "rollout_s", "update_s", "host_reads", "graph_fallbacks"]].to_string())
assert rows["iteration"].tolist() == [1, 2, 3, 4]
assert (rows["host_reads"] == 1).all() and (rows["graph_fallbacks"] == 0).all()
PYEOF
        timeout 400 $PY -m fightlab reproduce --only 05 --size full --publish --log-output \
          && echo "CHECK3 PASS" || echo "CHECK3 FAIL"
        mkdir -p "$O/nb"; cp runs/notebooks/05_*.ipynb "$O/nb/" 2>/dev/null
      } > "$log" 2>&1
      for c in 1 2 3; do
        if grep -q "CHECK$c PASS" "$log"; then ok "check $c"; else bad "check $c"; fi
      done
      $PY - <<'PYEOF' 2>&1 | tee -a "$log"
import json
from fightlab import results
df = results.read_rows("graphs", ".")
df = df[df["commit"].astype(str) == __import__("os").environ["FIGHTLAB_COMMIT"]]
if len(df):
    df["setting"] = [json.loads(p)["setting"] for p in df["params"]]
    cols = ["body", "setting", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "host_reads_per_iter",
            "graph_fallbacks", "physics_ms_per_step", "env_extra_ms_per_step", "policy_ms_per_step",
            "rollout_ms_per_step", "measured_non_physics_share", "non_physics_share"]
    print(df[[c for c in cols if c in df]].round(4).to_string())
PYEOF
      ;;
    solo)
      if timeout 590 $PY -m fightlab train --body "$a" --seed "$b" --nworld 1024 --device cuda:0 --publish \
           --run-dir "runs/train/s6-$a-s$b" --no-progress > "$log" 2>&1; then
        ok "$step: $(tail -n 1 "$log" | cut -c1-160)"
      else bad "$step rc=$? $(tail -n 1 "$log" | cut -c1-160)"; fi
      ;;
    kscan)
      dir="runs/batch/k$a-$b"; rm -rf "$dir"
      mps=(); [ "$b" = nomps ] && mps=(--no-mps)
      seeds=$(seq -s, 1 "$a")
      { timeout 400 $PY -m fightlab batch --job 'train --body simple --nworld 1024 --device cuda:0 --max-iterations 70 --checkpoint-every 0 --no-progress' \
          --grid seed="$seeds" --concurrent "$a" "${mps[@]}" --batch-dir "$dir" --job-timeout-s 380 --no-progress \
        && $PY -m fightlab.measure.packing "$dir" --skip 24 --publish; } > "$log" 2>&1
      rc=$?
      if [ $rc = 0 ]; then ok "$step: $(tail -n 1 "$log" | cut -c1-160)"; else bad "$step rc=$rc $(tail -n 1 "$log" | cut -c1-160)"; fi
      ;;
    *) bad "unknown step $step" ;;
  esac
  RESULT[-1]="${RESULT[-1]} [$((SECONDS - t0)) s]"
done
find data -type f -newer "$stamp" | tar czf "$O/data.tgz" -T - 2>/dev/null
echo "data written: $(tar tzf "$O/data.tgz" 2>/dev/null | wc -l) files"
printf '%s\n' "${RESULT[@]}"
