"""Launch each mass-matrix factorization a few times for Nsight Compute (issue 6: where the time goes).

    ncu --clock-control none -k regex:'factor_tree|qLD_acc|qLDiag_div' --section SpeedOfLight \
        --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
        --csv python3 bench/factor_probe.py [NWORLD [DEVICE]]

Factors muscular-fast's M at random states with the stock per-level path, the "global" and the
"shared" single-launch variants (64 threads per world): one call each first (also the warm-up:
compile, load), whose L (qLD) and D (qLDiagInv) are checked against stock before anything is
timed, then ``REPEATS`` timed calls each: 1 + 3 = 4 factorizations per path, the default of
``python -m fightlab.measure.ncu``. Prints one line of wall-clock times per path (synchronised
medians, launch and wait included; under ncu they are inflated by the replays). Exits non-zero
with the relative error when a variant disagrees with stock.
"""

import sys
import time

import numpy as np
import warp as wp

import mujoco_warp as mjw
from fightlab import bodies
from fightlab.kernels import factor as K
from fightlab.measure import factor as F

REPEATS = 3
#: largest relative difference from stock accepted (max |x - stock| / max |stock|); float32
#: rounding of the 89-DOF factor is ~1e-6 (notebook 03)
TOL = 1e-4


def main(nworld: int = 1024, device: str = "cuda:0") -> None:
    wp.config.quiet = True
    mjm = bodies.build("muscular-fast")
    m, d = F.put(mjm, nworld, device)
    q, v = F.random_state(mjm, nworld, np.random.default_rng(0))
    F.set_state(d, q, v)
    with wp.ScopedDevice(device):
        mjw.fwd_position(m, d, factorize=False)
        s = K.build_schedule(m)
        calls = {
            "stock": lambda L, D: K.stock_factor(m, d, d.M, L, D),
            "global": lambda L, D: K.factor_tree(m, d, d.M, L, D, schedule=s, variant="global"),
            "shared": lambda L, D: K.factor_tree(m, d, d.M, L, D, schedule=s, variant="shared"),
        }
        # correctness first: one call per path, L and D against stock, before anything is timed
        out = {}
        for name, call in calls.items():
            L, D = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
            call(L, D)
            wp.synchronize()
            out[name] = (L.numpy(), D.numpy())
        for name in ("global", "shared"):
            for k, what in enumerate(("L (qLD)", "D (qLDiagInv)")):
                ref = out["stock"][k]
                err = float(np.max(np.abs(out[name][k] - ref))) / float(np.max(np.abs(ref)))
                if not err < TOL:
                    raise SystemExit(f"{name} disagrees with stock in {what}: relative error {err:.2e}")
        times = {}
        for name, call in calls.items():
            L, D = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
            t = []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                call(L, D)
                wp.synchronize()
                t.append(time.perf_counter() - t0)
            times[name] = float(np.median(t))
    print("probe nworld=%d: " % nworld + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in times.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024, sys.argv[2] if len(sys.argv) > 2 else "cuda:0")
