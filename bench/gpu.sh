#!/usr/bin/env bash
# The GPU machine's steps (checks, solo and packed trainings, learner studies, K-scans, sweeps,
# evaluations; what each measures below), one step per argument, in order,
# then a table:
#   FIGHTLAB_COMMIT=<sha> bash bench/gpu.sh STEP [STEP ...]
# STEP:
#   check        the CUDA tests of tests/test_graphs.py (graphed == eager, fused Adam; one host
#                read per iteration under sync-debug "error"), a resumed simple run on CUDA
#                (checkpoint at 2, resumed to 4: one read, no fallback), notebook 05 at size
#                full, published (the direct step split)
#   solo:BODY:SEED   one solo headline training (defaults, 1024 worlds, --publish), with the
#                `--set`s of runs/pick/BODY.sets when a `pick` step wrote one
#   pick:NAME[+NAME]  report.pick_variant over the runs of those studies (per body: the best mean
#                iterations to solve, adopted if > 5 % better than today's defaults); writes
#                runs/pick/BODY.sets (one key=value per line; empty: the defaults stay)
#   pick0:NAME[+NAME]  the same rule over stage 0 (metric "stage0") for studies of runs stopped
#                after stage 0 (`stop_after_stage=0`): the arm with the lowest mean stage 0 over
#                >= 2 seeds that all ended it, picked if > 5 % below the defaults' mean
#   psolo:BODY:SEED  solo:BODY:SEED only when a pick step wrote a non-empty runs/pick/BODY.sets
#                (a candidate learner); otherwise skipped, costing nothing
#   kscan:K:MPS[:BODY[:ITERS]]  one K-scan point: a `fightlab batch` of K trainings (BODY,
#                default simple) at 1024 worlds, ITERS (default 70) iterations, --concurrent K,
#                MPS on|off, then `measure.packing --skip 24 --publish` (one packing.csv row)
#   mgrid:K:BODIES[:COUNTS[:ITERS]]  the multi-GPU grid: per body (BODIES: simple+muscular-fast) and
#                GPU count N (COUNTS: 1+2+4+8, default every GPU; each <= the GPUs nvidia-smi lists),
#                a `fightlab batch --gpus 0..N-1 --concurrent K` of K × N trainings (seeds 1 … K×N) at
#                1024 worlds, ITERS (default 70) iterations, under one MPS daemon, then
#                `measure.packing --skip 24 --publish` (one packing.csv row with its GPU count)
#   study:NAME:BUDGET  one of the learner-study / packed-solve batches below (--publish: train rows
#                record the packing), solved or stopped with a checkpoint at BUDGET s; run again
#                (same NAME) it resumes the batch: finished jobs skipped, trainings continued
#   backends[:ITERS]  issue 18's `compare-backends --publish` (both bodies; needs warp's CPU
#                compiler restored: carry .gpu/clang, xz -d it into /opt/flsite/warp/bin/)
#   eval:BODY:SEED  the solo run's policy (runs/train/s6-BODY-sSEED) at a = 1, at 0.004 s and
#                at 0.002 s (issue 16's honesty rows, published); zero:BODY  the zero-action policy
#   ckpt:BODY:SEED  copy that run's latest.pt to $OUT/ckpt/ (render the GIF on a CPU)
#   cpusolve:BUDGET[:BODY]  issue 18's CPU-backend solve (default simple, 1024 worlds, every
#                core) in segments of BUDGET s; the same step again continues it (same machine)
#   packrow:NAME:UNTIL  the packing row of study NAME over iterations 25 … UNTIL (all K running)
#   sweep[:BODY]  issue 17's timing sweep (`fightlab sweep --publish`, 128 … 16384 worlds; both
#                bodies unless BODY), resumable: the same step again skips finished points
#   sweepsolve:BUDGET  issue 17's trainings to the solve criterion over nworld (`sweep --solve
#                --run`, packed), in a batch stopped at BUDGET s; the same step again resumes it
#   auto:BODY:SEED  a solo training at `--nworld auto` (issue 17's acceptance), published
#   bench         issue 19's `fightlab bench --publish` (both bodies, host check, 2-min trainings)
#   gputest:PATTERN  the CUDA tests (`pytest -m gpu`) whose names match PATTERN (pytest -k)
# Back in $OUT: one log per step, data.tgz (every file under data/ this call wrote) and
# result.txt (the table so far), both rewritten before every step and at the end. Exit status 1
# when any step failed.
set -uo pipefail
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "set FIGHTLAB_COMMIT=<sha of the code sent> (rows record it)"; exit 2; }
export FIGHTLAB_COMMIT
O="${OUT:-/tmp}"
stamp=$(mktemp); touch "$stamp"; sleep 1
declare -a RESULT
# study batches: NAME -> "K|job|grid flags" (job "@FILE": a jobs file, one job per line). Each
# names every learner field it studies, so it runs the same learner whatever today's defaults are
# (sessions 7-8 ran them under σ 0.5 and KL 0.01, the defaults until commit f097997); every study
# before critic ran in the training physics the defaults had then, Newton 10 / 20 with qacc_smooth:
# to rerun one as it ran, add --set env.solver_iterations=10 --set env.solver_ls_iterations=20
# --set env.solver_qacc_smooth=true
declare -A STUDY=(
  [stdA]="8|train --body simple --nworld 1024 --device cuda:0 --publish --no-progress --set ppo.desired_kl=0.01|--grid ppo.init_std=0.5,0.3,0.2,0.1 --grid seed=1,2"
  [mf4]="4|train --body muscular-fast --nworld 1024 --device cuda:0 --publish --no-progress --set ppo.desired_kl=0.01 --set ppo.init_std=0.5|--grid seed=1,2,3,4"
  [klB]="8|train --body simple --nworld 1024 --device cuda:0 --publish --no-progress --set ppo.init_std=0.5|--grid ppo.desired_kl=0.01,0.02,0.04,0.08 --grid seed=1,2"
  [klmf]="4|train --body muscular-fast --nworld 1024 --device cuda:0 --publish --no-progress --set ppo.init_std=0.5|--grid ppo.desired_kl=0.04,0.08 --grid seed=1,2"
  [klC]="8|@bench/studies/klC.jobs|--grid seed=1,2"
  [mfC]="4|@bench/studies/mfC.jobs|--grid seed=1,2"
  [clipS]="6|@bench/studies/clipS.jobs|--grid seed=1,2"
  [clipM]="4|@bench/studies/clipM.jobs|--grid seed=1,2"
  [critic]="8|@bench/studies/critic.jobs|--grid seed=1,2"  # session 16: the asymmetric critic, both bodies
  [solver14]="8|@bench/studies/solver14.jobs|--grid seed=1,2"  # planned: Newton 1 vs 2 in training, both bodies
  [stage0S]="8|@bench/studies/stage0S.jobs|--grid seed=1,2"  # planned: stage-0 levers, simple
  [stage0T]="10|@bench/studies/stage0T.jobs|--grid seed=1,2"  # planned: control, stage-0 levers and Newton 1 / 4, simple
  [stage0M]="6|@bench/studies/stage0M.jobs|--grid seed=1,2"  # planned: control, Newton 1 / 4 and a larger step, muscular-fast
  [stage0S2]="16|@bench/studies/stage0S2.jobs|--grid seed=1,2"  # planned: left–right symmetry (augment, loss, augment with the asymmetric critic), both bodies
  [stage0H]="12|@bench/studies/stage0H.jobs|--grid seed=1,2"  # planned: a short observation history (H = 2, 4), both bodies; every job at once, as stage0S2
  [stage0R]="20|@bench/studies/stage0R.jobs|--grid seed=1,2"  # the augment arms after the fix and the observation history (H = 2, 4) with their controls, both bodies; every job at once
  [stage0X]="16|@bench/studies/stage0X.jobs|--grid seed=1,2"  # session 18: stage 0 only (stop_after_stage=0), both bodies, 12 arms
  [stage0Y]="12|@bench/studies/stage0Y.jobs|--grid seed=1,2"  # session 18, round 2: the union of the two winners, one step further
  [stage0Z]="16|@bench/studies/stage0Z.jobs|--grid seed=1,2"  # session 19, round 3: one step further on each body's step size, simple's KL alone, a wider muscular-fast, the critic's own rate
  [stage0W]="12|@bench/studies/stage0W.jobs|--grid seed=1,2"  # session 21, round 4 (planned): the analytic KL for the rate, muscular-fast's larger step on the wide network, simple's larger step with the analytic KL
  [stage0V]="18|@bench/studies/stage0V.jobs|--grid seed=1,2,3"  # session 22, round 5 (planned): simple only, three seeds: discount, GAE λ, initial std, gradient clip
  [solveB]="4|@bench/studies/solveB.jobs|"  # session 19: 512- and 2048-world solve points of today's learners (each job names its seed)
  [solveC]="2|@bench/studies/solveC.jobs|"  # session 19: solveB's two muscular-fast jobs, which the budget cut
  [solveD]="2|@bench/studies/solveD.jobs|"  # session 21: the 512- and 2048-world solve points of muscular-fast's 1024-512-256 TF32 learner
  [solveE]="2|@bench/studies/solveE.jobs|"  # session 23: the 512- and 2048-world solve points of simple's learner with GAE λ 0.9
  [solveA]="4|@bench/studies/solveA.jobs|"  # issue 17's missing solve points (each job names its seed)
  [rslS]="8|@bench/studies/rslS.jobs|--grid seed=1,2"  # session 26: rsl_rl's tuning study, simple, stage 0 (initial std, KL target)
  [rslM]="6|@bench/studies/rslM.jobs|--grid seed=1,2"  # session 26: rsl_rl's tuning study, muscular-fast, stage 0
  [tinyJ]="2|@bench/studies/tinyJ.jobs|--grid seed=1"  # a CPU check of the jobs-file form
  [tiny]="2|train --body simple --nworld 2 --device cpu --max-iterations 30 --set ppo.num_steps=4 --no-progress|--grid seed=1,2"  # a CPU check of this script
)
ok() { RESULT+=("PASS $1"); }
bad() { RESULT+=("FAIL $1"); }
# the GPU machine: its python3 with the bundle on PYTHONPATH (gpu-env.sh); here: .venv when there is one
PY=${FIGHTLAB_PY:-python3}; [ -z "${FIGHTLAB_PY:-}" ] && [ -x .venv/bin/python ] && PY=.venv/bin/python
[ $# -gt 0 ] || { echo "usage: FIGHTLAB_COMMIT=<sha> bash bench/gpu.sh STEP [STEP ...] (the steps: this file's head)"; exit 2; }
if ! command -v nvidia-smi > /dev/null; then
  # only this script's own CPU checks run without a GPU; a GPU step would skip or fail its way to a false PASS
  for step in "$@"; do
    case "$step" in study:tiny|study:tiny:*|study:tinyJ|study:tinyJ:*|pick:*|pick0:*) ;;
      *) echo "gpu.sh: no NVIDIA GPU here (nvidia-smi not found): step '$step' needs one (without a GPU only study:tiny, study:tinyJ and pick steps run)"; exit 2 ;;
    esac
  done
else
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/gpu.txt"
fi

# data.tgz (every data/ file this call wrote) and result.txt (the table so far), written through a
# temporary file and renamed, before every step and after the last: a step refused with
# `continue`, or a call cut at the device's limit, still brings back what finished
flush() {
  find data -type f -newer "$stamp" | tar czf "$O/data.tgz.part" -T - 2>/dev/null && mv -f "$O/data.tgz.part" "$O/data.tgz"
  printf '%s\n' "${RESULT[@]}" > "$O/result.txt.part" && mv -f "$O/result.txt.part" "$O/result.txt"
}
for step in "$@"; do
  flush
  t0=$SECONDS
  IFS=: read -r kind a b c d <<< "$step"
  log="$O/$(printf '%s' "$step" | tr -c 'A-Za-z0-9._-' '_').log"  # a name the device brings back
  case "$kind" in
    check)
      { timeout 240 $PY -m pytest -q -p no:cacheprovider tests/test_graphs.py -m gpu -rA > "$log.t1" 2>&1 \
          && tail -n 1 "$log.t1" | grep -q " passed" && echo "CHECK1 PASS" || echo "CHECK1 FAIL"
        cat "$log.t1"; rm -f "$log.t1"
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
    solo|psolo)
      [[ -n "${a:-}" && ${b:-} =~ ^[0-9]+$ ]] || { bad "$step: want $kind:BODY:SEED (SEED a whole number)"; continue; }
      if [ "$kind" = psolo ]; then
        names=$($PY -c 'from fightlab.bodies import BODY_NAMES; print(*BODY_NAMES)')
        [[ " $names " == *" $a "* ]] || { bad "$step: unknown body '$a' (valid: $names)"; continue; }
        [ -f runs/pick/.ok ] || { bad "$step: no pick step succeeded on this machine (runs/pick/.ok absent)"; continue; }
        if ! [ -s "runs/pick/$a.sets" ]; then ok "$step: skipped (the pick kept $a's defaults)"; continue; fi
      fi
      sets=(); picked=""
      if [ -f "runs/pick/$a.sets" ]; then
        while IFS= read -r kv; do [ -n "$kv" ] && sets+=(--set "$kv") && picked="$picked $kv"; done < "runs/pick/$a.sets"
      fi
      if timeout 590 $PY -m fightlab train --body "$a" --seed "$b" --nworld 1024 --device cuda:0 --publish \
           --run-dir "runs/train/s6-$a-s$b" --no-progress "${sets[@]}" > "$log" 2>&1; then
        ok "$step${picked:+ (picked:$picked)}: $(tail -n 1 "$log" | cut -c1-160)"
      else bad "$step${picked:+ (picked:$picked)} rc=$? $(tail -n 1 "$log" | cut -c1-160)"; fi
      ;;
    kscan)
      dir="runs/batch/k$a-$b"; rm -rf "$dir"
      mps=(); [ "$b" = nomps ] && mps=(--no-mps)
      seeds=$(seq -s, 1 "$a"); body=${c:-simple}; iters=${d:-70}
      [ "$body" != simple ] && dir="$dir-$body"
      [ "$iters" != 70 ] && dir="$dir-i$iters"
      rm -rf "$dir"
      { timeout 400 $PY -m fightlab batch --job "train --body $body --nworld 1024 --device cuda:0 --max-iterations $iters --checkpoint-every 0 --no-progress" \
          --grid seed="$seeds" --concurrent "$a" "${mps[@]}" --batch-dir "$dir" --job-timeout-s 380 --no-progress \
        && $PY -m fightlab.measure.packing "$dir" --skip 24 --publish; } > "$log" 2>&1
      rc=$?
      if [ $rc = 0 ]; then ok "$step: $(tail -n 1 "$log" | cut -c1-160)"; else bad "$step rc=$rc $(tail -n 1 "$log" | cut -c1-160)"; fi
      ;;
    mgrid)  # mgrid:K:BODIES[:COUNTS[:ITERS]] — the multi-GPU grid (issue 47), one packing row per body and GPU count
      have=$(nvidia-smi -L | grep -c '^GPU ')
      counts=${c:-$have}; iters=${d:-70}
      if ! [[ ${a:-} =~ ^[1-9][0-9]*$ && -n ${b:-} && $counts =~ ^[1-9][0-9]*(\+[1-9][0-9]*)*$ && $iters =~ ^[1-9][0-9]*$ ]]; then
        bad "$step: want mgrid:K:BODY[+BODY][:N[+N]][:ITERS] (K, N, ITERS whole numbers > 0)"; continue
      fi
      for n in ${counts//+/ }; do
        [ "$n" -le "$have" ] || { bad "$step: $n GPUs asked, this machine has $have"; continue 2; }
      done
      fails=0; said=""
      for body in ${b//+/ }; do
        for n in ${counts//+/ }; do
          dir="runs/batch/mgrid-k$a-$body-g$n"; rm -rf "$dir"
          { timeout 560 $PY -m fightlab batch --job "train --body $body --nworld 1024 --device cuda:0 --max-iterations $iters --checkpoint-every 0 --no-progress" \
              --grid seed="$(seq -s, 1 $((a * n)))" --gpus "$(seq -s, 0 $((n - 1)))" --concurrent "$a" \
              --batch-dir "$dir" --job-timeout-s 540 --no-progress \
            && $PY -m fightlab.measure.packing "$dir" --skip 24 --publish; } >> "$log" 2>&1 || fails=$((fails + 1))
          said="$said $body/g$n: $(tail -n 1 "$log" | tr -s ' ' | cut -c1-90);"
        done
      done
      if [ $fails = 0 ]; then ok "$step:$said"; else bad "$step: $fails batch(es) failed;$said"; fi
      ;;
    study)
      spec=${STUDY[$a]:-}; [ -n "$spec" ] || { bad "unknown study $a"; continue; }
      IFS='|' read -r K job grid <<< "$spec"
      dir="runs/batch/study-$a"
      if [ -f "$dir/batch.json" ]; then
        cmd=($PY -m fightlab batch --resume "$dir" --budget-s "$b" --min-left-s 60 --no-progress)
      else
        if [[ $job == @* ]]; then jobarg=(--jobs "${job#@}"); else jobarg=(--job "$job"); fi
        # shellcheck disable=SC2206
        cmd=($PY -m fightlab batch "${jobarg[@]}" $grid --concurrent "$K" --batch-dir "$dir" --budget-s "$b" \
             --min-left-s 60 --with-checkpoints --no-progress)
      fi
      { "${cmd[@]}"; echo "rc=$?"; cat "$dir/summary.txt" 2>/dev/null; } >> "$log" 2>&1
      $PY - "$dir" <<'PYEOF' 2>&1 | tee -a "$log"
import json, sys
from pathlib import Path
import pandas as pd
st = json.loads(Path(sys.argv[1], "batch.json").read_text())
out = []
for j in st["jobs"]:
    r = Path(j["run_dir"]) / "rows.csv"
    rows = pd.read_csv(r) if r.is_file() else pd.DataFrame()
    last = rows.iloc[-1] if len(rows) else {}
    out.append(dict(job=j["id"], status=j["status"], args=" ".join(j.get("argv", []))[-50:], iters=len(rows),
                    stage=last.get("stage", ""), solved=bool(len(rows) and (rows["event"] == "solved").any()),
                    s_it=round(float(rows["wall_s"].iloc[24:70].median()), 4) if len(rows) > 30 else ""))
print(pd.DataFrame(out).to_string(index=False))
PYEOF
      mkdir -p "$O/batch"; cp "$dir/summary.txt" "$O/batch/$a-summary.txt" 2>/dev/null
      # the log grows when a study is resumed: only this run's (the last) rc line counts
      last=$(grep '^rc=' "$log" | tail -n 1)
      if [ "$last" = "rc=0" ]; then ok "$step"; else bad "$step ${last:-no rc}"; fi
      ;;
    pick|pick0)
      # only these steps write runs/pick/: the files of an earlier pick go first, so a solo never
      # runs with a stale pick; every body of the studies gets a file (empty: the defaults stay)
      rm -f runs/pick/*.sets runs/pick/.ok
      metric=iterations; [ "$kind" = pick0 ] && metric=stage0
      $PY - "${a:-}" "$metric" "$kind" > "$log" 2>&1 <<'PYEOF'
import json, sys
from pathlib import Path
import pandas as pd
from fightlab.config import ConfigError
from fightlab.measure import report
names = [n for n in sys.argv[1].split("+") if n]
metric, step = sys.argv[2], sys.argv[3]  # "iterations" (pick) or "stage0" (pick0); the step's name
if not names:
    sys.exit(f"{step}: name one or more studies, {step}:NAME[+NAME]")
frames = []
for name in names:
    state = Path(f"runs/batch/study-{name}/batch.json")
    if not state.is_file():
        sys.exit(f"{step}: no study {name!r} on this machine ({state} is absent)")
    jobs = json.loads(state.read_text())["jobs"]
    started = [j for j in jobs if j.get("run_dir")]
    print(f"study {name}: {len(started)} of {len(jobs)} jobs started")
    for j in started:
        root = Path(j["run_dir"])
        r = report.published_runs(root, stage_studies=metric == "stage0")
        frames.append(report.with_stage0(r, root) if metric == "stage0" else r)
if not frames:
    sys.exit(f"{step}: no job of {names} has run")
runs = pd.concat(frames, ignore_index=True)
print(runs[["body", "seed", "solved", "iterations", "learner"] + (["stage0"] if metric == "stage0" else [])]
      .to_string(index=False))
try:
    picks = report.pick_variant(runs, metric=metric)
except ConfigError as e:
    sys.exit(f"{step}: {e}")
Path("runs/pick").mkdir(parents=True, exist_ok=True)
for r in picks.itertuples():
    name = r.body if r.learner == "fightlab" else f"{r.body}-{r.learner}"  # solo:BODY reads fightlab's
    Path(f"runs/pick/{name}.sets").write_text("".join(f"{kv}\n" for kv in r.sets))
    print(f"PICK {name}: {r.best} ({r.best_mean:.1f}) vs defaults ({r.defaults_mean:.1f}) -> "
          f"{'adopt ' + ' '.join(r.sets) if r.adopt else 'defaults stay'}; variants {r.variants}")
Path("runs/pick/.ok").write_text(f"{step}:{sys.argv[1]}\n")  # psolo runs only after a pick that succeeded
PYEOF
      if [ $? = 0 ]; then ok "$step: $(grep '^PICK' "$log" | tr '\n' ' ' | cut -c1-300)"; else bad "$step $(tail -n 1 "$log" | cut -c1-200)"; fi
      ;;
    backends)  # issue 18: CPU backend (every core) vs MuJoCo Warp on the GPU, both bodies, published
      if timeout 560 $PY -m fightlab compare-backends --publish --no-progress ${a:+--iterations $a} > "$log" 2>&1; then
        ok "$step: $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-200)"; else bad "$step $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-200)"; fi
      ;;
    eval)  # eval:BODY:SEED — the solo headline run's policy at a = 1, timestep 0.004 then 0.002 (published)
      ck="runs/train/s6-$a-s$b/latest.pt"
      if [ -f "$ck" ] && timeout 280 $PY -m fightlab evaluate "$ck" --publish --no-progress > "$log" 2>&1 \
           && timeout 280 $PY -m fightlab evaluate "$ck" --timestep 0.002 --publish --no-progress >> "$log" 2>&1; then
        ok "$step: $(grep -i 'fall' "$log" | tail -n 2 | tr '\n' ' ' | cut -c1-220)"; else bad "$step $(tail -n 2 "$log" 2>/dev/null | cut -c1-160) ($ck)"; fi
      ;;
    zero)  # zero:BODY — the zero-action policy at a = 1 (published)
      if timeout 280 $PY -m fightlab evaluate --zero-action --body "$a" --publish --no-progress > "$log" 2>&1; then
        ok "$step: $(tail -n 1 "$log" | cut -c1-200)"; else bad "$step $(tail -n 2 "$log" | cut -c1-160)"; fi
      ;;
    ckpt)  # ckpt:BODY:SEED — bring the solo run's checkpoint back (for `fightlab render` on a CPU)
      mkdir -p "$O/ckpt" && cp "runs/train/s6-$a-s$b/latest.pt" "$O/ckpt/$a-s$b.pt" && ok "$step" || bad "$step"
      ;;
    cpusolve)  # cpusolve:BUDGET[:BODY] — issue 18: a CPU-backend solve (every core, 1024 worlds), in
      # segments of BUDGET s: run again on the same machine to continue (--resume), published
      if ! [[ ${a:-} =~ ^[0-9]+$ ]] || [ "$a" -lt 60 ]; then
        bad "$step: BUDGET must be whole seconds >= 60, got '${a:-}' (cpusolve:BUDGET[:BODY])"; continue
      fi
      body=${b:-simple}; R="runs/train/s8-cpu-$body"
      if [ -f "$R/latest.pt" ]; then
        cmd=($PY -m fightlab train --resume "$R/latest.pt" --segment-s "$a" --publish --no-progress)
      else
        cmd=($PY -m fightlab train --body "$body" --nworld 1024 --backend cpu --device cpu --seed 1 \
             --run-dir "$R" --segment-s "$a" --publish --no-progress)
      fi
      if timeout $((a + 120)) "${cmd[@]}" >> "$log" 2>&1; then
        ok "$step: $(tail -n 1 "$log" | cut -c1-200)"; else bad "$step $(tail -n 2 "$log" | cut -c1-160)"; fi
      ;;
    packrow)
      if $PY -m fightlab.measure.packing "runs/batch/study-$a" --skip 24 --until "$b" --publish > "$log" 2>&1; then
        ok "$step: $(tail -n 1 "$log" | cut -c1-160)"; else bad "$step $(tail -n 2 "$log" | cut -c1-160)"; fi
      ;;
    sweep)
      bodies=(); [ -n "${a:-}" ] && bodies=(--body "$a")
      if timeout 580 $PY -m fightlab sweep "${bodies[@]}" --device cuda:0 --publish --no-progress >> "$log" 2>&1; then
        ok "$step: $(tail -n 2 "$log" | tr '\n' ' ' | cut -c1-200)"; else bad "$step $(tail -n 2 "$log" | tr '\n' ' ' | cut -c1-200)"; fi
      ;;
    sweepsolve)
      if ! [[ ${a:-} =~ ^[0-9]+$ ]] || [ "$a" -lt 60 ]; then
        bad "$step: BUDGET must be whole seconds >= 60, got '${a:-}' (sweepsolve:BUDGET)"; continue
      fi
      dir="runs/batch/sweep-solve"
      if [ -f "$dir/batch.json" ]; then
        cmd=($PY -m fightlab batch --resume "$dir" --budget-s "$a" --min-left-s 60 --no-progress)
      else
        # the batch the sweep prints (measure.sweep.solve_batch_argv: its world counts, seeds, K)
        mapfile -t args < <($PY -c "from fightlab.measure import sweep; print('\n'.join('ARG ' + x for x in sweep.solve_batch_argv(batch_dir='$dir')))" 2>>"$log" | sed -n 's/^ARG //p')
        [ ${#args[@]} -gt 3 ] || { bad "$step: measure.sweep.solve_batch_argv gave no batch: $(tail -n 1 "$log" | cut -c1-160)"; continue; }
        cmd=($PY -m fightlab "${args[@]}" --budget-s "$a" --min-left-s 60 --no-progress)
      fi
      { echo "${cmd[*]}"; "${cmd[@]}"; echo "rc=$?"; cat "$dir/summary.txt" 2>/dev/null; } >> "$log" 2>&1
      last=$(grep '^rc=' "$log" | tail -n 1)
      if [ "$last" = "rc=0" ]; then ok "$step"; else bad "$step ${last:-no rc}"; fi
      ;;
    auto)
      if timeout 590 $PY -m fightlab train --body "$a" --seed "$b" --nworld auto --device cuda:0 --publish \
           --run-dir "runs/train/s9-auto-$a-s$b" --no-progress > "$log" 2>&1; then
        ok "$step: $(tail -n 1 "$log" | cut -c1-200)"; else bad "$step $(tail -n 2 "$log" | cut -c1-160)"; fi
      ;;
    bench)
      if timeout 590 $PY -m fightlab bench --publish --no-progress > "$log" 2>&1; then
        ok "$step: $(tail -n 2 "$log" | tr '\n' ' ' | cut -c1-200)"; else bad "$step $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-200)"; fi
      ;;
    gputest)
      [ -n "${a:-}" ] || { bad "$step: want gputest:PATTERN (pytest -k)"; continue; }
      # a PASS needs a test that ran: every test skipped (no usable GPU) or none matched is a FAIL
      if timeout 300 $PY -m pytest -q -p no:cacheprovider -m gpu -k "$a" tests/ -rA > "$log" 2>&1 \
           && tail -n 1 "$log" | grep -q " passed"; then
        ok "$step: $(tail -n 1 "$log" | cut -c1-160)"; else bad "$step $(tail -n 1 "$log" | cut -c1-160)"; fi
      ;;
    *) bad "unknown step $step" ;;
  esac
  RESULT[-1]="${RESULT[-1]} [$((SECONDS - t0)) s]"
done
flush
echo "data written: $(tar tzf "$O/data.tgz" 2>/dev/null | wc -l) files"
printf '%s\n' "${RESULT[@]}"
# the exit status says whether every step passed (1: at least one FAIL)
! printf '%s\n' "${RESULT[@]}" | grep -q '^FAIL'
