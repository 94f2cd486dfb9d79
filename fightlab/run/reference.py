"""The reference check: a solved run's final policy re-run in the reference physics
(`config.REFERENCE_SOLVER` at the task's timestep dt and at dt/2). A policy may train in cheaper
physics than the task's; it counts as a solve of the task only when it also holds there, by the
task's own solve thresholds (the rule and its result: `fightlab.envs.task.reference_check`).
"""

from __future__ import annotations

from fightlab.config import TrainConfig

__all__ = ["REFERENCE_NWORLD", "reference_check"]

#: the check's worlds when none are given: a training's default (`publish.MIN_PUBLISH_NWORLD`)
REFERENCE_NWORLD = TrainConfig.reference_nworld


def reference_check(checkpoint, cfg: TrainConfig, device: str, nworld: int, seed: int = 1,
                    progress: bool = True) -> dict:
    """Re-run the policy of `checkpoint` (a path) in the reference physics at dt and dt/2 on
    `nworld` fresh worlds of `seed` (a training's check uses its seed + 1); `cfg` is the run's.
    Returns the task's check result with iteration: the checked policy's. Raises
    CheckpointError: an unreadable checkpoint."""
    from fightlab.envs.task import reference_check as task_check
    from fightlab.run.checkpoint import load_checkpoint, policy_agent

    ck = load_checkpoint(checkpoint)
    out = task_check(lambda env: policy_agent(ck, env, device).act_mean, cfg, device, nworld, seed=seed,
                     progress=progress)
    return {**out, "iteration": ck["iteration"]}
