#!/usr/bin/env bash
# Session 16, call C: solo trainings in training physics with qacc_smooth off, one after another
# while the call's budget lasts (a training starts only with its expected time left), each with
# its reference check, rows published (bench/gpu_solver.sh per run).
#   source .gpu/boot.sh || exit $?; FIGHTLAB_COMMIT=<sha> bash bench/gpu_s16c.sh BUDGET_S
set -u
t0=$(date +%s); budget=${1:?budget s}
export SETS=env.solver_qacc_smooth=false TAG=noqs
run() {  # ITERS LS BODY SEED EXPECTED_S
  left=$(( budget - ($(date +%s) - t0) ))
  if [ "$left" -lt "$5" ]; then echo "skip $3 $1/$2 seed $4: ${left}s left < ${5}s"; return; fi
  bash bench/gpu_solver.sh "$1" "$2" "$3" "$4" 2>&1 | grep -E "^(train|reference|run |OVERFLOW|NAN|fightlab)"
  tar czf "$OUT/runs-$3-$1-$2-s$4.tgz" --exclude='*.pt' runs/logs "runs/train/solver-$1-$2-noqs/$3-s$4" \
    $(ls -t data/curves/*.csv* | head -n 1) 2>/dev/null
}
run 1 4 simple 0 90
run 1 4 muscular-fast 0 170
run 2 4 simple 1 80
run 2 4 simple 2 80
run 2 4 muscular-fast 1 160
rm -f "$OUT/runs.tgz"
ls "$OUT"
