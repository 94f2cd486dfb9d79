"""Launch each mass-matrix factorization a few times for Nsight Compute (issue 6: where the time goes).

    ncu --clock-control none -k regex:'factor_tree|qLD_acc' --section SpeedOfLight \
        --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
        --csv python3 bench/factor_probe.py [NWORLD [DEVICE]]

Factors muscular-fast's M at random states with the stock per-level path, the "global" and the
"shared" single-launch variants (64 threads per world), each ``REPEATS`` times after one warm-up
call, and checks the two variants against stock before anything is profiled. Prints one line of
wall-clock times per path (synchronised medians; under ncu these are inflated by the replays).
"""

import sys
import time

import numpy as np
import warp as wp

import mujoco_warp as mjw
from fightlab import bodies
from fightlab.kernels import factor as F

REPEATS = 3


def main(nworld: int = 1024, device: str = "cuda:0") -> None:
    wp.config.quiet = True
    mjm = bodies.build("muscular-fast")
    m, d = F._put(mjm, nworld, device)
    q, v = F._random_state(mjm, nworld, np.random.default_rng(0))
    F._set_state(d, q, v)
    with wp.ScopedDevice(device):
        mjw.fwd_position(m, d, factorize=False)
        s = F.build_schedule(m)
        out = {}
        calls = {
            "stock": lambda L, D: F.stock_factor(m, d, d.M, L, D),
            "global": lambda L, D: F.factor_tree(m, d, d.M, L, D, schedule=s, variant="global"),
            "shared": lambda L, D: F.factor_tree(m, d, d.M, L, D, schedule=s, variant="shared"),
        }
        times = {}
        for name, call in calls.items():
            L, D = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
            call(L, D)  # warm-up (compile, load)
            wp.synchronize()
            t = []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                call(L, D)
                wp.synchronize()
                t.append(time.perf_counter() - t0)
            times[name] = float(np.median(t))
            out[name] = L.numpy()
    scale = float(np.max(np.abs(out["stock"])))
    for name in ("global", "shared"):
        err = float(np.max(np.abs(out[name] - out["stock"]))) / scale
        if not err < 1e-4:
            raise SystemExit(f"{name} disagrees with stock: relative error {err:.2e}")
    print("probe nworld=%d: " % nworld + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in times.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024, sys.argv[2] if len(sys.argv) > 2 else "cuda:0")
