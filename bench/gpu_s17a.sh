#!/usr/bin/env bash
# Session 17, call A (bench/NOTES.md "Session 17"): notebooks 02 and 05 at today's defaults, both
# bodies, published (the profile and the where-the-time-goes table); the profile at 1024 worlds
# with training's factor path (tree kernel) in today's physics and with explicit damping
# (env.solver_eulerdamp=false), published; then per body, twice in turn, setting "all" at 1024
# worlds, 30 iterations (medians past 5), published (graphs.csv rows with params.solver_loop):
# the Newton loop unrolled, conditional, and unrolled with explicit damping.
#   source .gpu/boot.sh || exit $?; FIGHTLAB_COMMIT=<sha> bash bench/gpu_s17a.sh ab|nb
# (ab: the profiles and the A/B; nb: the two notebooks; one device call each)
set -u
part=${1:?ab or nb}
[ -n "${FIGHTLAB_COMMIT:-}" ] || { echo "set FIGHTLAB_COMMIT"; exit 2; }
export FIGHTLAB_COMMIT
O=${OUT:-/tmp}
stamp=$(mktemp); touch "$stamp"; sleep 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ "$part" = ab ] && timeout 480 python3 - <<'PYEOF' 2>&1 | tee "$O/ab.log"
from fightlab import results
from fightlab.config import EnvConfig
from fightlab.measure import graphs, profile
from fightlab.paths import REPO_ROOT
xd = EnvConfig(solver_eulerdamp=False)
for body in ("simple", "muscular-fast"):
    for env in (None, xd):
        res = profile.profile(body, nworld=1024, nstep=20, device="cuda:0", tree_factor=True, env=env)
        results.append_row("profile", profile.result_row(res), REPO_ROOT)
        print(f"profile {body} eulerdamp={env is None}: {res.summary()}", flush=True)
for body in ("simple", "muscular-fast"):
    for rep in range(2):
        for loop, env in (("unrolled", None), ("conditional", None), ("unrolled", xd)):
            kw = dict(env=env) if env is not None else {}
            r = graphs.run_experiment(body, 1024, REPO_ROOT, device="cuda:0", settings=["all"], iterations=30,
                                      skip=5, solver_loop=loop, **kw)[0]
            print(f"ab {body:14s} {loop:12s} eulerdamp={env is None!s:5s} s/it {r['s_per_iter']:.4f} "
                  f"rollout {r['rollout_s_per_iter']:.4f} update {r['update_s_per_iter']:.4f} "
                  f"physics ms/step {r['physics_ms_per_step']:.3f}", flush=True)
PYEOF
if [ "$part" = nb ]; then
  timeout 500 python3 -m fightlab reproduce --only 02 --only 05 --size full --device cuda:0 --publish --publish-times \
    > "$O/nb-02-05.log" 2>&1
  echo "reproduce rc=$?"; tail -n 5 "$O/nb-02-05.log"
fi
find data figures -type f -newer "$stamp" | tar czf "$O/data.tgz" -T - 2>/dev/null
tar czf "$O/nb.tgz" runs/notebooks 2>/dev/null
ls -la "$O"
