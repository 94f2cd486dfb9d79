#!/usr/bin/env bash
# fightlab's PPO beside rsl_rl's OnPolicyRunner (notebook 08, `fightlab.measure.sidebyside`), solo
# on one GPU. Two modes:
#
#   bash bench/side_by_side.sh study [BODIES] [LEARNERS]   # e.g. study "simple muscular-fast" "fightlab rsl_rl"
#   bash bench/side_by_side.sh sweep [BODIES]               # rsl_rl's world-count sweep
#
# study: per body, fightlab's seeds (SEEDS, default 1 2 3) at NWORLD worlds to the solve, then
# rsl_rl's at RSL_NWORLD worlds (default NWORLD; "best": its own best from the sweep's rows of this
# card, `sidebyside.best_nworld`, the most samples per second, read from both data/results/ and
# ${OUT:-runs}/data/results/, where `sweep` writes) with `--set
# time_limit_s=` 10 × fightlab's median time to solve of that body on this card (BUDGET_S
# overrides): from the rows this call just wrote, else from data/results/train.csv's side-by-side
# rows of this card. Every training is tagged `--set study=side_by_side` and published (PUBLISH=1,
# the default on a CUDA device) into data/results/train.csv; RSL_SETS="ppo.learning_rate=3e-4 ..."
# adds rsl_rl's tuned settings (each word one `--set`). A body whose fightlab median is unknown
# (at most half solved, none on this card) runs no rsl_rl and says so.
# sweep: rsl_rl at SWEEP_NWORLDS (default 512 1024 2048 4096) for SWEEP_ITERS iterations (60; the
# first WARM=5 left out), one `learner_speed` row each (params study "rsl_rl_nworld_sweep", the
# curriculum's last window: stage-0 progress) under ${OUT:-runs}/data/results, never data/.
#
# Run folders: WORK (default ${FIGHTLAB_RUNS:-runs}/side_by_side/<stamp>/); one log each. A training
# longer than one call (rsl_rl's muscular-fast budget, 10 × fightlab's median, outlasts a 600 s
# call): SEGMENT_S=S stops each training with a checkpoint after S s, and the same command again
# with the same WORK resumes every unfinished run from its latest.pt (a run with its row is
# skipped); with OUT set, WORK's unfinished runs (latest.pt as a file, rows, manifest; no ckpt_*.pt) are
# packed into $OUT/sbs-work.tgz after each training, to be carried and unpacked (`tar xzf`) into
# the next machine's repository root when the first one is gone (its members relative to the root, so
# with OUT a study's WORK must lie inside the repository, e.g. runs/...; one outside is refused). With
# OUT, every finished run's own record (<run>/data/: its train row and curve, and <run>.log) also goes
# into $OUT/sbs-rows.tgz: the device's data/ does not outlive the call (the next call's tree replaces
# it). With OUT and
# POLICIES=1, every finished run's latest.pt also goes into $OUT/policies.tgz (as
# <run>/latest.pt), for `fightlab export` / `evaluate --backend cpu` elsewhere. DEVICE, NWORLD, ITERS (max
# iterations; default the config's), PY (the interpreter) may be set; a CPU smoke (nothing published):
#   DEVICE=cpu NWORLD=4 ITERS=2 SEEDS=1 BUDGET_S=60 SWEEP_NWORLDS="4 8" SWEEP_ITERS=2 WARM=0 \
#     bash bench/side_by_side.sh study simple && ... sweep simple
# Checked before anything is written (one line, exit 2): the mode, LEARNERS (fightlab, rsl_rl), the
# numbers, WORK's place; then OUT and WORK are made and write-tested, and WORK is locked for the
# whole call (a second copy on the same WORK is refused). `sweep` skips a world count whose row
# an earlier call wrote (its <run>.done marker in WORK).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd -P)
die() { echo "side_by_side.sh: error: $*" >&2; exit 2; }
posint() { [[ $1 =~ ^[0-9]+$ ]] && [[ $1 =~ [1-9] ]]; }
nonneg() { [[ $1 =~ ^[0-9]+$ ]]; }
posnum() { [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] && awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; }
one() { $2 "$4" || die "$1='$4'; it takes $3"; }  # one NAME TEST DESCRIPTION VALUE: VALUE passes TEST
words() {  # words NAME TEST DESCRIPTION VALUE: every word of VALUE (at least one) passes TEST
  local w; [ -n "${4// }" ] || die "$1 is empty; it takes $3"
  for w in $4; do $2 "$w" || die "$1 has '$w'; it takes $3"; done
}
MODE=${1:-study}; BODIES=${2:-"simple muscular-fast"}; LEARNERS=${3:-"fightlab rsl_rl"}
DEVICE=${DEVICE:-cuda:0}; NWORLD=${NWORLD:-1024}; RSL_NWORLD=${RSL_NWORLD:-$NWORLD}; SEEDS=${SEEDS:-"1 2 3"}
PY=${PY:-python3}; WARM=${WARM:-5}; SWEEP_ITERS=${SWEEP_ITERS:-60}; SWEEP_NWORLDS=${SWEEP_NWORLDS:-"512 1024 2048 4096"}
case "$DEVICE" in cuda*) PUBLISH=${PUBLISH:-1} ;; *) PUBLISH=${PUBLISH:-0} ;; esac
case "$MODE" in study|sweep) ;; *) die "mode must be study or sweep, got '$MODE'" ;; esac
one NWORLD posint "a positive integer" "$NWORLD"
[ -z "${ITERS:-}" ] || one ITERS posint "a positive integer" "$ITERS"
[ -z "${SEGMENT_S:-}" ] || one SEGMENT_S posnum "a positive number of seconds" "$SEGMENT_S"
if [ "$MODE" = study ]; then
  for l in $LEARNERS; do case "$l" in fightlab|rsl_rl) ;; *) die "LEARNERS has '$l'; each must be fightlab or rsl_rl" ;; esac; done
  [ "$RSL_NWORLD" = best ] || one RSL_NWORLD posint 'a positive integer or "best"' "$RSL_NWORLD"
  words SEEDS nonneg "non-negative integers" "$SEEDS"
  [ -z "${BUDGET_S:-}" ] || one BUDGET_S posnum "a positive number of seconds" "$BUDGET_S"
else
  one SWEEP_ITERS posint "a positive integer" "$SWEEP_ITERS"; one WARM nonneg "a non-negative integer" "$WARM"
  [ "$WARM" -lt "$SWEEP_ITERS" ] || die "WARM=$WARM must be below SWEEP_ITERS=$SWEEP_ITERS (a steady window is left)"
  words SWEEP_NWORLDS posint "positive integers" "$SWEEP_NWORLDS"
fi
work=${WORK:-"${FIGHTLAB_RUNS:-runs}/side_by_side/$(date -u +%Y%m%dT%H%M%S)-$$"}
abs=$(realpath -m -- "$work")
case "$abs/" in
  "$root"/?*) work=${abs#"$root"/} ;;  # relative to the root: the archive's members are
  *) [ "$MODE" = sweep ] || [ -z "${OUT:-}" ] ||
       die "WORK=$work lies outside the repository ($root); with OUT its runs are archived relative to the repository root, so WORK must lie inside it (e.g. runs/side_by_side/...)" ;;
esac
writable() { mkdir -p -- "$1" 2>/dev/null && [ -d "$1" ] && local t && t=$(mktemp -p "$1" .sbs-write-test.XXXXXX 2>/dev/null) && rm -f -- "$t"; }
dest=${OUT:-runs}; writable "$dest" || die "OUT=$dest cannot be made or written (it must be a writable folder)"
dest=$(cd "$dest" && pwd)
writable "$work" || die "WORK=$work cannot be made or written (it must be a writable folder)"
{ exec {lock}>>"$work/.side_by_side.lock"; } 2>/dev/null || die "WORK=$work: its lock file cannot be opened"
flock -n "$lock" || die "WORK=$work is in use by another side_by_side.sh (it holds $work/.side_by_side.lock); wait for it or give another WORK"
iters=(); [ -n "${ITERS:-}" ] && iters=(--max-iterations "$ITERS")
pub=(); [ "$PUBLISH" = 1 ] && pub=(--publish)
rsl_sets=(); for kv in ${RSL_SETS:-}; do rsl_sets+=(--set "$kv"); done

seg=(); [ -n "${SEGMENT_S:-}" ] && seg=(--segment-s "$SEGMENT_S")

train() {  # train LEARNER BODY NWORLD SEED RUN_DIR [extra flags...]: one training (or its next segment), its last line
  local learner=$1 body=$2 nworld=$3 seed=$4 run=$5; shift 5
  local what="$learner $body s$seed" cmd
  if [ -f "$run/data/results/train.csv" ]; then echo "$what: finished earlier (its row in $run)"; return 0; fi
  if [ -f "$run/latest.pt" ]; then  # a segment ran: its config, budget and folder come from the checkpoint
    cmd=(train --resume "$run/latest.pt" --device "$DEVICE" --no-progress --logger none "${seg[@]}" "${pub[@]}")
  else
    cmd=(train --learner "$learner" --body "$body" --nworld "$nworld" --seed "$seed" --device "$DEVICE"
         --no-progress --logger none --run-dir "$run" --set study=side_by_side "${iters[@]}" "${seg[@]}" "$@")
  fi
  if $PY -m fightlab "${cmd[@]}" >> "$run.log" 2>&1; then
    echo "$what: $(grep -E '^(run .* solved=|segment ended)' "$run.log" | tail -n 1 | cut -c1-200)"
  else
    echo "$what FAILED:"; tail -n 3 "$run.log"; return 1
  fi
  pack
}

pack() {  # WORK's unfinished runs into $OUT/sbs-work.tgz (a new machine continues from it)
  [ -n "${OUT:-}" ] || return 0
  local d files=() done_=() rows=()
  for d in "$work"/*/; do
    d=${d%/}; [ -f "$d/latest.pt" ] || continue
    if [ -f "$d/data/results/train.csv" ]; then  # finished: its policy, its row and curve, its log
      done_+=("$d/latest.pt"); rows+=("$d/data"); [ -f "$d.log" ] && rows+=("$d.log"); continue
    fi
    while IFS= read -r f; do files+=("$f"); done < <(find "$d" -maxdepth 1 \( -type f -o -type l \) ! -name 'ckpt_*.pt' ! -name '*.lock')
    [ -f "$d.log" ] && files+=("$d.log")
  done
  if [ "${POLICIES:-0}" = 1 ] && [ ${#done_[@]} -gt 0 ]; then
    tar czhf "$OUT/policies.tgz.tmp" -C "$root" "${done_[@]}" && mv "$OUT/policies.tgz.tmp" "$OUT/policies.tgz"
  fi
  if [ ${#rows[@]} -gt 0 ]; then
    tar czf "$OUT/sbs-rows.tgz.tmp" -C "$root" "${rows[@]}" && mv "$OUT/sbs-rows.tgz.tmp" "$OUT/sbs-rows.tgz"
  fi
  if [ ${#files[@]} -gt 0 ]; then tar czhf "$OUT/sbs-work.tgz.tmp" -C "$root" "${files[@]}" && mv "$OUT/sbs-work.tgz.tmp" "$OUT/sbs-work.tgz"
  else rm -f "$OUT/sbs-work.tgz"; fi
}

budget() {  # budget BODY: "BUDGET=<s>", rsl_rl's time limit on this card, or no such line (said why)
  [ -n "${BUDGET_S:-}" ] && { echo "budget $1: BUDGET_S=$BUDGET_S s (given)" >&2; echo "BUDGET=$BUDGET_S"; return; }
  $PY - "$1" "$NWORLD" "$DEVICE" "$work" <<'PY'
import math, sys
from pathlib import Path
import pandas as pd
from fightlab import meta, results
from fightlab.measure.sidebyside import fightlab_budget_s
from fightlab.paths import REPO_ROOT
body, nworld, device, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
gpu = meta.gpu_name(device)  # the rows' gpu column
mine = [results.read_rows("train", d) for d in sorted(work.glob(f"fightlab-{body}-s*")) if d.is_dir()]
for rows, where in ((pd.concat(mine) if mine else None, f"this call's runs ({work})"),
                    (results.read_rows("train", REPO_ROOT), "data/results/train.csv")):
    if rows is not None and len(rows) and math.isfinite(b := fightlab_budget_s(rows, body, nworld, gpu)):
        print(f"BUDGET={b:.1f}")
        print(f"budget {body}: 10 x fightlab's median time to solve on {gpu} from {where}: {b:.1f} s", file=sys.stderr)
        break
else:
    print(f"budget {body}: no fightlab median time to solve at {nworld} worlds on {gpu} (at most half of "
          "its side-by-side runs solved, or none): no rsl_rl run; set BUDGET_S to give one", file=sys.stderr)
PY
}

if [ "$MODE" = study ]; then
  status=0
  for body in $BODIES; do
    if [[ " $LEARNERS " == *" fightlab "* ]]; then
      for seed in $SEEDS; do train fightlab "$body" "$NWORLD" "$seed" "$work/fightlab-$body-s$seed" "${pub[@]}" || status=1; done
    fi
    [[ " $LEARNERS " == *" rsl_rl "* ]] || continue
    b=$(budget "$body" | sed -n 's/^BUDGET=//p'); [ -n "$b" ] || { status=1; continue; }  # resumed runs keep their own
    n=$RSL_NWORLD
    if [ "$n" = best ]; then
      n=$($PY - "$body" "$DEVICE" "$dest" <<'PY' | sed -n 's/^NWORLD=//p'
import sys
import pandas as pd
from fightlab import meta, results
from fightlab.measure.sidebyside import best_nworld
from fightlab.paths import REPO_ROOT
body, device, dest = sys.argv[1:]
gpu = meta.gpu_name(device)  # the rows' gpu column
n = best_nworld(pd.concat([results.read_rows("learner_speed", REPO_ROOT), results.read_rows("learner_speed", dest)],
                          ignore_index=True), body, gpu)  # the committed rows and the sweep's in OUT
print(f"NWORLD={n or ''}")  # a marker line: warp's start-up banner goes to stdout too
print(f"rsl_rl {body}: its best world count on {gpu} from the sweep: {n}" if n else
      f"rsl_rl {body}: no sweep rows on {gpu} in data/results/ or {dest}/data/results/: run `sweep` first",
      file=sys.stderr)
PY
)
      [ -n "$n" ] || { status=1; continue; }
    fi
    for seed in $SEEDS; do
      train rsl_rl "$body" "$n" "$seed" "$work/rsl_rl-$body-${n}w-s$seed" --set "time_limit_s=$b" \
        "${rsl_sets[@]}" "${pub[@]}" || status=1
    done
  done
  echo "run folders: $work"; exit $status
fi

for body in $BODIES; do  # sweep
  for n in $SWEEP_NWORLDS; do
    run="$work/sweep-$body-$n"
    if [ -f "$run.done" ]; then echo "sweep $body $n: done earlier (its row in $dest)"; continue; fi
    if ! $PY -m fightlab train --learner rsl_rl --body "$body" --nworld "$n" --device "$DEVICE" \
         --max-iterations "$SWEEP_ITERS" --no-progress --logger none --run-dir "$run" "${rsl_sets[@]}" > "$run.log" 2>&1; then
      echo "sweep $body $n FAILED:"; tail -n 3 "$run.log"; continue
    fi
    $PY - "$run/rows.csv" "$body" "$DEVICE" "$n" "$SWEEP_ITERS" "$WARM" "$dest" "${RSL_SETS:-}" <<'PY'
import csv, math, sys
from fightlab import results
from fightlab.measure.sidebyside import speed_metrics
num = lambda x: None if math.isnan(float(x)) else float(x)  # an empty window: no number
path, body, device, nworld, iters, warm, dest, sets = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
steady = rows[int(warm):] or rows
last = rows[-1]
row = results.run_metadata(body=body, nworld=int(nworld), seed=0, device=device, params={
    "study": "rsl_rl_nworld_sweep", "learner": "rsl_rl", "max_iterations": int(iters), "skip": int(warm),
    "sets": sets.split(), **{f"last_{k}": num(last[f"window_{k}"]) for k in ("fall_rate", "tracking", "episode_s")},
    "last_amplitude": num(last["amplitude"])})
row.update(rsl_rl=True, **speed_metrics(rows, steady))
results.append_row("learner_speed", row, dest)
print(f"rsl_rl {body:14} {nworld:>6} worlds: s/it {row['s_per_iter']:.4f} (rollout {row['rollout_s_per_iter']:.4f}, "
      f"update {row['update_s_per_iter']:.4f}) stage {row['stage_reached']}, amplitude {last['amplitude']}, last "
      f"window fall rate {last['window_fall_rate']}, episode {last['window_episode_s']} s", flush=True)
PY
    : > "$run.done.tmp" && mv "$run.done.tmp" "$run.done"  # its row is written: a rerun skips it
  done
done
echo "run folders: $work; rows: $dest/data/results/learner_speed.csv"
