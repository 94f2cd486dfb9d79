#!/usr/bin/env bash
# Solo (headline) trainings, one after another, on the device machine:
#   FIGHTLAB_COMMIT=<sha> bash bench/gpu_solo.sh BUDGET_S body:seed [body:seed ...]
# Each run trains alone (FIGHTLAB_SHARED_GPU=1) in runs/train/solo-<body>-s<seed>, resuming from
# its latest checkpoint when one exists (carry runs/train to a fresh machine). Runs stop with a
# checkpoint when the call's budget is spent; a finished run publishes its row and curve.
# Everything comes back as $OUT/solo.tgz (rows, latest checkpoints, data/).
set -u
source .gpu/gpu-env.sh || exit $?
BUDGET=$1; shift
export FIGHTLAB_COMMIT=${FIGHTLAB_COMMIT:-unknown} FIGHTLAB_SHARED_GPU=1
t0=$(date +%s)
for spec in "$@"; do
  body=${spec%%:*}; seed=${spec##*:}; dir=runs/train/solo-$body-s$seed
  left=$(( BUDGET - ($(date +%s) - t0) ))
  [ $left -gt 60 ] || { echo "no time left for $spec"; break; }
  if [ -e $dir/latest.pt ]; then r="--resume $dir/latest.pt"; else r=""; fi
  python3 -m fightlab train --body $body --seed $seed --nworld 1024 --device cuda:0 \
    --segment-s $(( left - 30 )) --run-dir $dir --no-progress --publish $r > $OUT/solo_$body-s$seed.log 2>&1
  tail -n 2 $OUT/solo_$body-s$seed.log
done
tar czhf $OUT/solo.tgz data runs/train/solo-*/rows.csv runs/train/solo-*/latest.pt runs/train/solo-*/data 2>/dev/null
ls -la $OUT
