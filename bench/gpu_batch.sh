#!/usr/bin/env bash
# The GPU machine's call: its environment, the kernel checks first, then one `fightlab batch`
# (which replaced bench/gpu_lanes.sh: lanes, budget, logs and the tarball are the batch's now).
#   FIGHTLAB_COMMIT=<sha> bash bench/gpu_batch.sh BUDGET_S JOBS_FILE [fightlab batch options ...]
#   e.g. bash bench/gpu_batch.sh 1500 bench/jobs_example.txt --concurrent 4 --grid seed=1,2,3,4
#   RESUME=<batch id or folder> bash bench/gpu_batch.sh BUDGET_S -     # continue an earlier call's batch
# JOBS_FILE: one job per line (fightlab/batch.py): a fightlab command (`train --body simple
# --nworld 1024 --device cuda:0 --publish`), `notebook 06 size=full device=cuda:0 publish=True`,
# or `python bench/x.py ...`; bench/jobs_example.txt says how each old gpu_lanes job reads.
# Every GPU runs --concurrent K jobs at once (CUDA MPS started for the batch when K > 1); a job
# starts only with more than --min-left-s (60 s) of the budget left; trainings stop with a
# checkpoint before the budget ends (--resume continues them while the machine is warm).
# CHECKS="1024 4096": bench/factor_probe.py NWORLD for each, before the batch; a failed check
# stops the call (no training or row with a suspect kernel). NCU="1024": Nsight Compute on
# bench/factor_probe.py NWORLD before the batch: $OUT/ncu_NWORLD.csv, and rows in
# data/results/ncu.csv (python -m fightlab.measure.ncu).
# Back in $OUT: batch.tar.gz (logs, batch.json, rows, curves, executed notebooks; checkpoints
# with CKPT=1), gpu.txt, the check and ncu logs.
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
BUDGET=$1 JOBS=$2; shift 2
export FIGHTLAB_COMMIT
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv | tee $OUT/gpu.txt

for n in ${CHECKS:-}; do
  python3 bench/factor_probe.py $n > $OUT/check_$n.log 2>&1 \
    || { echo "check $n FAILED: $(tail -n 1 $OUT/check_$n.log); no batch runs"; exit 1; }
done
for n in ${NCU:-}; do
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)
  [ -n "$ncu_bin" ] || { echo "no ncu"; break; }
  $ncu_bin --clock-control none --target-processes all \
    -k regex:'factor_tree|qLD_acc|qLDiag_div' --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis --csv \
    --log-file $OUT/ncu_$n.csv python3 bench/factor_probe.py $n > $OUT/ncu_$n.log 2>&1 \
    && python3 -m fightlab.measure.ncu $OUT/ncu_$n.csv $n >> $OUT/ncu_$n.log 2>&1
done

left=$(( BUDGET - ($(date +%s) - t0) - 30 ))  # 30 s to bring the tarball back
ckpt=(); [ "${CKPT:-0}" = 1 ] && ckpt=(--with-checkpoints)
if [ -n "${RESUME:-}" ]; then
  python3 -m fightlab batch --resume "$RESUME" --budget-s $left --no-progress "${ckpt[@]}" "$@"
  dir=$( [ -d "$RESUME" ] && echo "$RESUME" || echo "runs/batch/$RESUME" )
else
  dir=runs/batch/gpu-$(date -u +%Y%m%d-%H%M%S)
  python3 -m fightlab batch --jobs "$JOBS" --batch-dir $dir --budget-s $left --no-progress \
    "${ckpt[@]}" "$@"
fi
echo "batch rc=$?: $dir (continue with RESUME=$dir)"
cp $dir/batch.tar.gz $OUT/ 2>/dev/null
[ $(stat -c %s $OUT/batch.tar.gz 2>/dev/null || echo 0) -lt 16000000 ] \
  || echo "batch.tar.gz is over 16 MB: it will not come back; re-run without CKPT=1"
ls -la $OUT
