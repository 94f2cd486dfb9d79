#!/usr/bin/env bash
# Solo trainings in a training physics (the Newton solver's iterations / line-search iterations,
# `--set env.solver_*`), each ending with the reference check (fightlab/run/reference.py), their
# rows published; then, with ZERO=1, the zero-action policy in that physics (evaluate CKPT
# --zero-action --publish: the task must stay hard in it).
#
#   source .gpu/boot.sh || exit $?; FIGHTLAB_COMMIT=<sha> bash bench/gpu_solver.sh ITERS LS BODY SEED [SEED ...]
#   SETS="env.solver_qacc_smooth=false ..." adds those --set to every training (TAG names its runs).
#
# Back in $OUT: train.csv and evaluate.csv (the repository's, with the new rows), runs.tgz (the
# logs, the new curves, the run folders without checkpoints), warpcache.tar.xz (CACHE=1).
set -uo pipefail
its=${1:?solver iterations} ls=${2:?line-search iterations} body=${3:?body}; shift 3
[ $# -ge 1 ] || { echo "gpu_solver: give at least one seed" >&2; exit 2; }
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "gpu_solver: set FIGHTLAB_COMMIT=<sha of the code sent> (rows record it)" >&2; exit 2; }
export FIGHTLAB_COMMIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
mkdir -p runs/logs
before=$(ls data/curves | sort)
sets=(); for kv in ${SETS:-}; do sets+=(--set "$kv"); done
tag=$its-$ls${TAG:+-$TAG}
for seed in "$@"; do
  dir=runs/train/solver-$tag/$body-s$seed
  python3 -m fightlab train --body "$body" --nworld 1024 --device cuda:0 --seed "$seed" --no-progress \
    --run-dir "$dir" --set env.solver_iterations="$its" --set env.solver_ls_iterations="$ls" "${sets[@]}" --publish \
    > "runs/logs/train-$body-$tag-s$seed.log" 2>&1
  echo "train $body seed $seed: exit $?"
  grep -E "^(compiling|reference check|run |OVERFLOW|NAN|fightlab)" "runs/logs/train-$body-$tag-s$seed.log"
done
if [ "${ZERO:-0}" = 1 ]; then
  python3 -m fightlab evaluate "runs/train/solver-$tag/$body-s$1/latest.pt" --zero-action --nworld 1024 \
    --device cuda:0 --no-progress --publish 2>&1 | tee "runs/logs/zero-$body-$tag.log" | tail -n 3
fi
cp data/results/train.csv data/results/evaluate.csv "$OUT/"
new=$(comm -13 <(echo "$before") <(ls data/curves | sort) | sed 's|^|data/curves/|')
tar czf "$OUT/runs.tgz" --exclude='*.pt' runs/logs runs/train $new 2>/dev/null
[ "${CACHE:-0}" = 1 ] && gpu_env_save_cache
ls -la "$OUT"
