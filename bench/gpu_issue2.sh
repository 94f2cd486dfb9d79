#!/usr/bin/env bash
# GPU session for issue 2 (run on the device machine after `bash .gpu/gpu-env.sh stage`):
#   FIGHTLAB_COMMIT=<sha> bash bench/gpu_issue2.sh SEGMENT_S [resume]
# 1. zero-action checks at a = 1 (both bodies, 1024 worlds, one 10 s episode each)
# 2. slot sizing: 4096 limp bodies pushed over per body
# 3. trainings from scratch (or resumed from runs/train/*/latest.pt), two processes side by side
# Everything under data/ and runs/ comes back as $OUT/results.tgz; the kernel cache as well.
set -u
source .gpu/gpu-env.sh || exit $?
SEG=${1:-330}
MODE=${2:-fresh}
export FIGHTLAB_COMMIT=${FIGHTLAB_COMMIT:-unknown}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, warp, mujoco_warp; print('torch', torch.__version__, 'warp', warp.__version__, 'mjw', mujoco_warp.__version__)" | tee -a $OUT/gpu.txt
if [ "$MODE" = fresh ]; then
  for b in simple muscular-fast; do
    python3 -m fightlab evaluate --zero-action --body $b --nworld 1024 --device cuda:0 --publish 2>&1 | grep -v "^Warp\|^   \|^Module" | tee -a $OUT/checks.txt
  done
  python3 -m fightlab slots --nworld 4096 --seconds 3 --device cuda:0 --limp --publish 2>&1 | grep SLOTS | tee -a $OUT/checks.txt
fi
# training variants, side by side: "name body seed --set ..." (VARIANTS env overrides)
VARIANTS=${VARIANTS:-"simple-s0 simple 0
simple-std02-s0 simple 0 --set ppo.init_std=0.2
simple-std02-kl02-s0 simple 0 --set ppo.init_std=0.2 --set ppo.desired_kl=0.02
muscular-fast-s0 muscular-fast 0"}
export FIGHTLAB_SHARED_GPU=$(grep -c . <<< "$VARIANTS")   # recorded in each row's params
pids=()
while read -r name body seed extra; do
  [ -n "$name" ] || continue
  dir=runs/train/$name
  if [ "$MODE" = resume ]; then r="--resume $dir/latest.pt"; else r=""; fi
  python3 -m fightlab train --body $body --seed $seed --nworld 1024 --device cuda:0 --segment-s $SEG \
    --run-dir $dir --no-progress --publish $r $extra > $OUT/train_$name.log 2>&1 &
  pids+=($!)
done <<< "$VARIANTS"
wait "${pids[@]}"
tail -n 3 $OUT/train_*.log
# checkpoints: only each run's latest (dereferenced); the rest stays behind (16 MiB per file)
tar czhf $OUT/results.tgz data runs/eval runs/slots runs/train/*/rows.csv runs/train/*/latest.pt runs/train/*/data 2>/dev/null
ls -la $OUT
gpu_env_save_cache
