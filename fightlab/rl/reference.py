"""The reference check: a solved run's final policy re-run in the reference physics.

A policy may train in cheaper physics than the task's (fewer Newton iterations: the
`EnvConfig.solver_*` fields). It counts as a solve of the task only when it also holds in the
reference physics, `config.REFERENCE_SOLVER` at the task's timestep dt and at dt/2: on fresh
worlds, one episode each at amplitude 1 with the pushes on, its mean action falls in at most
`TrainConfig.max_fall_rate` of the episodes (5 %) and tracks the rhythm at least
`TrainConfig.min_tracking` (0.75), the task's own solve thresholds (docs/task.md), at both
timesteps. Slot overflows and NaN resets during the check are counted in its result.
"""

from __future__ import annotations

import math
import time

from fightlab.config import REFERENCE_CHECKS, REFERENCE_SOLVER, TrainConfig
from fightlab.rl.evaluate import evaluate

__all__ = ["CHECKS", "REFERENCE_NWORLD", "reference_check"]

#: the check's worlds when none are given: `publish.MIN_PUBLISH_NWORLD`, as `TrainConfig.reference_nworld`
REFERENCE_NWORLD = 256

#: the check's runs: (label, timestep as a fraction of the task's), `config.REFERENCE_CHECKS`
CHECKS = REFERENCE_CHECKS

#: what each run keeps of `evaluate`'s result
_KEEP = ("timestep", "episodes", "falls", "fall_rate", "tracking", "mean_episode_s", "overflow_count",
         "nan_resets")


def reference_check(checkpoint, cfg: TrainConfig, device: str, nworld: int, seed: int = 1,
                    progress: bool = True) -> dict:
    """Re-run the policy of `checkpoint` in the reference physics at dt and dt/2 (:data:`CHECKS`).

    Args:
      checkpoint: the run's final checkpoint (path); cfg: the run's TrainConfig (its task
        thresholds, timestep, graphs); device: where to run; nworld: worlds per run (a published
        training needs at least `publish.MIN_PUBLISH_NWORLD`); seed: the fresh worlds' seed
        (a training's check uses its seed + 1). The thresholds are `cfg`'s (max_fall_rate,
        min_tracking: the run's task; the task's are 0.05 and 0.75).
    Returns:
      dict: passed (bool), reason (None, or why it failed: "dt/2: fall rate 0.083 > 0.05"),
      nworld, seed, seconds (wall time of the whole check, s; reported apart from the time to
      solve), iteration (the checked policy's: the checkpoint's), solver (:data:`REFERENCE_SOLVER`),
      solver_engine (as the engine ran it: MuJoCo Warp runs tolerance 1e-8 as 1e-6,
      `sim.physics.engine_solver`), thresholds (max_fall_rate, min_tracking), and per run
      label ("dt", "dt/2") a dict of timestep (s), episodes, falls, fall_rate, tracking,
      mean_episode_s, overflow_count, nan_resets.
    Raises:
      CheckpointError: an unreadable checkpoint (`fightlab.rl.checkpoint.load_checkpoint`).
    """
    t0 = time.perf_counter()
    out = dict(nworld=int(nworld), seed=int(seed), solver=dict(REFERENCE_SOLVER),
               thresholds=dict(max_fall_rate=cfg.max_fall_rate, min_tracking=cfg.min_tracking))
    reasons = []
    for label, frac in CHECKS:
        r = evaluate(checkpoint, nworld=nworld, device=device, episodes_per_world=1.0,
                     timestep=cfg.env.timestep * frac, amplitude=1.0, seed=seed, graph=cfg.graph,
                     progress=progress, physics="reference")
        run = {k: r[k] for k in _KEEP}
        out[label] = run
        out.setdefault("iteration", r["ckpt_iteration"])
        out.setdefault("solver_engine", r["physics_engine"])
        fall, trk = run["fall_rate"], run["tracking"]
        if not (math.isfinite(fall) and fall <= cfg.max_fall_rate):
            reasons.append(f"{label}: fall rate {fall:.3f} > {cfg.max_fall_rate:g}")
        if not (math.isfinite(trk) and trk >= cfg.min_tracking):
            reasons.append(f"{label}: tracking {trk:.3f} < {cfg.min_tracking:g}")
    out["passed"] = not reasons
    out["reason"] = "; ".join(reasons) or None
    out["seconds"] = time.perf_counter() - t0
    return out
