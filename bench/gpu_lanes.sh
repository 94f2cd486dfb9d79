#!/usr/bin/env bash
# One job list per GPU ("lane"), lanes side by side, jobs in a lane one after another, so every
# job has its GPU to itself (the host's CPU cores are shared: recorded as host_jobs):
#   FIGHTLAB_COMMIT=<sha> bash bench/gpu_lanes.sh BUDGET_S "JOBS for GPU 0" ["JOBS for GPU 1" ...]
# JOBS, space separated:
#   nb:NN                  reproduce --only NN --size full --publish
#   train:BODY:SEED[:notf] solo training in runs/train/solo-BODY[-notf]-sSEED (resumed from its
#                          latest.pt when there is one; notf = --no-tree-factor)
#   eval:BODY:SEED[:notf]  evaluate that run's latest.pt at timestep 0.002 s (half the default)
#   check:NWORLD           bench/factor_probe.py (stock vs global vs shared factor, correctness
#                          first, then synchronised medians); all check jobs run before the lanes
#                          start, and if one fails no lane runs anything ($OUT/STOP)
#   ncu:NWORLD             Nsight Compute on bench/factor_probe.py (stock / global / shared factor
#                          kernels of muscular-fast): $OUT/ncu_NWORLD.csv, and one row per path
#                          in data/results/ncu.csv (python -m fightlab.measure.ncu)
# A job starts only with more than 60 s of the budget left; trainings stop with a checkpoint
# before the budget ends (continue them in the next call: runs/ stays while the machine is warm).
# Logs, data/, figures/, each run's rows and the executed notebooks come back in $OUT/lanes.tgz
# (checkpoints in $OUT/ckpt.tgz with CKPT=1). data/ is reset to the committed tree at every call:
# rows published in an earlier call survive only in runs/train/solo-*/data and this tarball.
set -u
t0=$(date +%s)  # the budget counts from here: set-up below is part of it
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "set FIGHTLAB_COMMIT=<sha of the code sent> (rows record it)"; exit 2; }
source .gpu/gpu-env.sh || exit $?
# the bundle leaves out Warp's CPU compiler (notebook 00 compares CPU and GPU kernels): a call
# carrying .gpu/clang (warp-clang.so.xz from the same warp-lang 1.19.0 wheel) restores it
clang=$(python3 -c "import warp, os; print(os.path.join(os.path.dirname(warp.__file__), 'bin', 'warp-clang.so'))")
if [ ! -e "$clang" ] && [ -e .gpu/clang/warp-clang.so.xz ]; then
  xz -d < .gpu/clang/warp-clang.so.xz > "$clang" && echo "warp CPU compiler restored: $clang"
fi
BUDGET=$1; shift
export FIGHTLAB_COMMIT FIGHTLAB_SHARED_GPU=1 FIGHTLAB_HOST_JOBS=$#
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv | tee $OUT/gpu.txt

lane() {  # lane GPU_INDEX JOBS...
  local gpu=$1; shift
  export CUDA_VISIBLE_DEVICES=$gpu
  for job in "$@"; do
    local left=$(( BUDGET - ($(date +%s) - t0) ))
    [ $left -gt 60 ] || { echo "[gpu$gpu] no time left for $job"; break; }
    # a failed check stops every lane (checks run before the lanes; see below)
    [ -e $OUT/STOP ] && { echo "[gpu$gpu] stopped before $job: $(cat $OUT/STOP)"; break; }
    IFS=: read -r kind a b c <<< "$job"
    local log=$OUT/gpu${gpu}_${job//:/_}.log s=$(date +%s)
    case $kind in
      nb) timeout $(( left - 15 )) python3 -m fightlab reproduce --only $a --size full --device cuda:0 --publish > $log 2>&1 ;;
      train|eval)
        local dir=runs/train/solo-$a${c:+-$c}-s$b flag=""
        [ "${c:-}" = notf ] && flag=--no-tree-factor
        if [ $kind = train ]; then
          local r=""; [ -e $dir/latest.pt ] && r="--resume $dir/latest.pt"
          [ -n "$r" ] && flag=""  # a resumed run keeps its checkpoint's settings
          # --segment-s stops between iterations with a checkpoint; timeout is the hard stop
          timeout $(( left - 15 )) python3 -m fightlab train --body $a --seed $b --nworld 1024 \
            --device cuda:0 $flag --segment-s $(( left - 60 )) --run-dir $dir --no-progress \
            --publish $r > $log 2>&1
        else
          timeout $(( left - 15 )) python3 -m fightlab evaluate $dir/latest.pt --nworld 1024 \
            --timestep 0.002 --device cuda:0 --publish > $log 2>&1
        fi ;;
      check)
        timeout $(( left - 15 )) python3 bench/factor_probe.py $a > $log 2>&1 \
          || { echo "gpu$gpu $job failed: $(tail -n 1 $log)" > $OUT/STOP
               echo "[gpu$gpu] $job FAILED: $(tail -n 1 $log); every lane stops"; break; } ;;
      ncu)
        local ncu_bin; ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)
        [ -n "$ncu_bin" ] || { echo "no ncu" > $log; continue; }
        timeout $(( left - 15 )) $ncu_bin --clock-control none --target-processes all \
          -k regex:'factor_tree|qLD_acc|qLDiag_div' --section SpeedOfLight --section Occupancy \
          --section WarpStateStats --section MemoryWorkloadAnalysis --csv \
          --log-file $OUT/ncu_$a.csv python3 bench/factor_probe.py $a > $log 2>&1 \
          && python3 -m fightlab.measure.ncu $OUT/ncu_$a.csv $a >> $log 2>&1 ;;  # rows -> data/
      *) echo "[gpu$gpu] unknown job $job" ;;
    esac
    echo "[gpu$gpu] $job rc=$? $(( $(date +%s) - s )) s: $(tail -n 1 $log)"
  done
}

# check: jobs run first, one GPU after another, before any lane starts: a failed check leaves
# $OUT/STOP and no lane runs anything (no training or row with a suspect kernel)
i=0; lanes=()
for jobs in "$@"; do
  checks=""; rest=""
  for job in $jobs; do
    case $job in check:*) checks="$checks $job" ;; *) rest="$rest $job" ;; esac
  done
  [ -n "$checks" ] && lane $i $checks >> $OUT/lane$i.txt 2>&1
  lanes+=("$rest"); i=$((i + 1))
done
i=0; pids=()
for jobs in "${lanes[@]}"; do
  lane $i $jobs >> $OUT/lane$i.txt 2>&1 &
  pids+=($!); i=$((i + 1))
done
wait "${pids[@]}"
cat $OUT/lane[0-9]*.txt
# rows, curves, figures, logs and executed notebooks (small); checkpoints only with CKPT=1
# (each latest.pt is ~4 MB; files over 16 MiB do not come back)
tar czf $OUT/lanes.tgz $OUT/*.log data figures runs/train/solo-*/rows.csv runs/train/solo-*/data \
  runs/notebooks 2>/dev/null
if [ $(stat -c %s $OUT/lanes.tgz) -lt 16000000 ]; then
  rm -f $OUT/*.log  # they are in the tarball
else  # too big to come back: keep the logs and the rows, drop the figures and notebooks
  tar czf $OUT/lanes.tgz data/results data/curves runs/train/solo-*/data 2>/dev/null
  echo "lanes.tgz cut down to rows and curves ($(stat -c %s $OUT/lanes.tgz) bytes)"
fi
[ "${CKPT:-0}" = 1 ] && tar czhf $OUT/ckpt.tgz runs/train/solo-*/latest.pt
ls -la $OUT
