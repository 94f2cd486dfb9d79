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

from fightlab.config import REFERENCE_CHECKS, TrainConfig

__all__ = ["CHECKS", "REFERENCE_NWORLD", "reference_check"]

#: the check's worlds when none are given: `publish.MIN_PUBLISH_NWORLD`, as `TrainConfig.reference_nworld`
REFERENCE_NWORLD = 256

#: the check's runs: (label, timestep as a fraction of the task's), `config.REFERENCE_CHECKS`
CHECKS = REFERENCE_CHECKS


def reference_check(checkpoint, cfg: TrainConfig, device: str, nworld: int, seed: int = 1,
                    progress: bool = True) -> dict:
    """Re-run the policy of `checkpoint` in the reference physics at dt and dt/2
    (`fightlab.envs.task.reference_check`, which holds the rule and its result's fields).

    Args:
      checkpoint: the run's final checkpoint (path); cfg: the run's TrainConfig; device: where to
        run; nworld: worlds per run (a published training needs at least
        `publish.MIN_PUBLISH_NWORLD`); seed: the fresh worlds' seed (a training's check uses its
        seed + 1).
    Returns:
      the task's check result, with iteration: the checked policy's (the checkpoint's).
    Raises:
      CheckpointError: an unreadable checkpoint (`fightlab.run.checkpoint.load_checkpoint`).
    """
    from fightlab.envs.task import reference_check as task_check
    from fightlab.run.checkpoint import load_checkpoint, policy_agent

    ck = load_checkpoint(checkpoint)
    out = task_check(lambda env: policy_agent(ck, env, device).act_mean, cfg, device, nworld, seed=seed,
                     progress=progress)
    return {**out, "iteration": ck["iteration"]}
