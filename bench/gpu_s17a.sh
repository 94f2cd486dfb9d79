#!/usr/bin/env bash
# Session 17, call A (bench/NOTES.md "Session 17"): notebooks 02 and 05 at today's defaults, both
# bodies, published (the profile and the where-the-time-goes table), then the Newton loop's form
# A/B: `graphs.run_experiment` setting "all", 1024 worlds, 30 iterations (medians past 5), loop
# unrolled / conditional / unrolled / conditional per body, published (graphs.csv rows with
# params.solver_loop).
#   source .gpu/boot.sh || exit $?; FIGHTLAB_COMMIT=<sha> bash bench/gpu_s17a.sh
set -u
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "set FIGHTLAB_COMMIT"; exit 2; }
export FIGHTLAB_COMMIT
O=${OUT:-/tmp}
stamp=$(mktemp); touch "$stamp"; sleep 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 330 python3 -m fightlab reproduce --only 02 --only 05 --size full --device cuda:0 --publish --publish-times \
  > "$O/nb-02-05.log" 2>&1
echo "reproduce rc=$?"; tail -n 5 "$O/nb-02-05.log"
timeout 200 python3 - <<'PYEOF' 2>&1 | tee "$O/loop-ab.log"
from fightlab.measure import graphs
from fightlab.paths import REPO_ROOT
for body in ("simple", "muscular-fast"):
    for loop in ("unrolled", "conditional", "unrolled", "conditional"):
        r = graphs.run_experiment(body, 1024, REPO_ROOT, device="cuda:0", settings=["all"], iterations=30,
                                  skip=5, solver_loop=loop)[0]
        print(f"loop-ab {body:14s} {loop:12s} s/it {r['s_per_iter']:.4f} rollout {r['rollout_s_per_iter']:.4f} "
              f"update {r['update_s_per_iter']:.4f} physics ms/step {r['physics_ms_per_step']:.3f}", flush=True)
PYEOF
find data figures -type f -newer "$stamp" | tar czf "$O/data.tgz" -T - 2>/dev/null
tar czf "$O/nb.tgz" runs/notebooks 2>/dev/null
ls -la "$O"
