"""fightlab: train a muscle-bodied humanoid fighter with PPO on MuJoCo Warp, and measure it.

Public API (imported lazily, so `python -m fightlab --help` stays fast):
  build_body(name) -> mujoco.MjModel, BODIES, describe
  StanceTask (the task behind the door, rsl_rl's VecEnv), VecEnv, StanceEnv (the env under it),
  EnvConfig, PPOConfig, TrainConfig
  train(cfg) -> result dict, evaluate(checkpoint, ...) -> dict
  REPO_ROOT: the repository every default path resolves from (fightlab.paths)
"""

__version__ = "0.1.0"

_LAZY = {
    "build_body": ("fightlab.bodies", "build"),
    "BODIES": ("fightlab.bodies", "BODIES"),
    "describe": ("fightlab.bodies.describe", "describe"),
    "StanceEnv": ("fightlab.envs.stance", "StanceEnv"),
    "StanceTask": ("fightlab.envs.task", "StanceTask"),
    "VecEnv": ("fightlab.envs.vecenv", "VecEnv"),
    "EnvConfig": ("fightlab.config", "EnvConfig"),
    "PPOConfig": ("fightlab.config", "PPOConfig"),
    "TrainConfig": ("fightlab.config", "TrainConfig"),
    "train": ("fightlab.run.runner", "train"),
    "evaluate": ("fightlab.run.evaluate", "evaluate"),
    "REPO_ROOT": ("fightlab.paths", "REPO_ROOT"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'fightlab' has no attribute {name!r}")
