"""The door between a batched GPU task and any learner: rsl_rl's ``VecEnv`` interface
(``rsl_rl/env/vec_env.py``: ``num_envs``, ``num_actions``, ``max_episode_length``, ``device``,
``get_observations()``, ``step(actions) -> (obs, rewards, dones, extras)``), matched from its
source so that no learner needs rsl_rl installed, plus an optional graph-capturable form of the
same step for learners that capture their rollout (fightlab's own PPO).

Two ways through the door, one task behind it: rsl_rl's ``step(actions)`` (every
``iteration_steps`` steps it also calls `end_iteration`), or the captured form: the learner writes
``action`` in place (inside its own CUDA graph), calls `advance` ``iteration_steps`` times, then
`end_iteration` itself with its own device values, so that the iteration reads the host once.

Observations are a mapping of observation groups as rsl_rl's ``obs_groups`` expect: ``"policy"``
[num_envs, obs_dim] always, ``"critic"`` [num_envs, priv_dim] when the task was built with a
privileged observation. (rsl_rl ≥ 3 wraps them in a ``tensordict.TensorDict``; a plain dict keeps
this module free of that dependency; an adapter wraps it.)
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

__all__ = ["CAPTURED", "VecEnv"]

#: what the captured form adds to rsl_rl's members (the class docstring says each one's shape)
CAPTURED = ("obs", "priv_obs", "reward", "done", "timeout", "action", "obs_dim", "priv_dim",
            "obs_min_std", "substeps", "graph_fallbacks", "advance", "end_iteration", "reset")


class VecEnv(ABC):
    """A batch of ``num_envs`` synchronised worlds of one task.

    Attributes (rsl_rl's): num_envs (int), num_actions (int), max_episode_length (int, env
    steps), episode_length_buf (int32 tensor [num_envs], env steps into each world's episode),
    device (str), cfg (the task's config).
    Attributes (the captured form's buffers, torch views on ``device``, written in place by every
    step: copy what you keep): obs [num_envs, obs_dim] float32, priv_obs [num_envs, priv_dim]
    float32 (priv_dim 0 without a privileged observation), reward, done, timeout [num_envs]
    float32 (0/1), action [num_envs, num_actions] float32 (read by the next step), and
    iteration_steps (int: steps between the task's own checks, `end_iteration`), obs_dim,
    priv_dim, obs_min_std (float32 [obs_dim], a floor for an observation normaliser's std),
    substeps (physics steps per env step), graph_fallbacks (int).
    """

    num_envs: int
    num_actions: int
    max_episode_length: int
    episode_length_buf: torch.Tensor
    device: str
    cfg: object
    iteration_steps: int

    @abstractmethod
    def get_observations(self) -> dict[str, torch.Tensor]:
        """The current observation groups (starting the task first if it has not started)."""

    @abstractmethod
    def reset(self) -> dict[str, torch.Tensor]:
        """Start every world afresh (episodes staggered over their length) and return the
        observation groups; the counters of the iteration are cleared."""

    @abstractmethod
    def advance(self) -> None:
        """One env step of every world from the ``action`` buffer; reads nothing back to the host
        (safe inside a learner's CUDA stream, between its captured graphs)."""

    @abstractmethod
    def end_iteration(self, learner: torch.Tensor | None = None) -> dict:
        """End the task's iteration: the one host read (the task's counters and ``learner``, a float
        tensor of the learner's own on ``device``, in one copy), the task's own decisions, and
        the ``extras``: at least "episode" (the iteration's statistics: name → number or text,
        one row), "log" (rsl_rl's: "/<group>/<name>" → number), "solved" (bool), "learner"
        (``learner``'s values, float64 numpy) when given. Restarts `step`'s count."""

    def mirror_maps(self) -> dict | None:
        """The task's left–right mirror maps, or None for a task without one: {"policy",
        "critic", "actions"} → (perm int64 [n], sign float32 [n]) over the observation groups and
        the actions, ``mirrored[..., k] = sign[k] · x[..., perm[k]]`` (a learner's symmetry)."""
        return None

    def step(self, actions: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, dict]:
        """rsl_rl's step: ``actions`` [num_envs, num_actions] in, one env step.

        Returns:
          (observations, rewards [num_envs], dones [num_envs], extras): views overwritten by the
          next step. ``extras["time_outs"]`` [num_envs] (episodes cut by the time limit, not
          ended); every ``iteration_steps``-th step ``extras`` also holds what `end_iteration`
          returns ("log", "episode", "curriculum", ...).
        Raises:
          ValueError: ``actions`` of another shape.
        """
        if tuple(actions.shape) != tuple(self.action.shape):
            raise ValueError(f"actions must have shape {tuple(self.action.shape)}, got {tuple(actions.shape)}")
        self.action.copy_(actions)
        self.advance()
        self._steps_since_end = getattr(self, "_steps_since_end", 0) + 1
        extras: dict = {}
        if self._steps_since_end >= self.iteration_steps:
            extras = self.end_iteration()
        extras["time_outs"] = self.timeout
        return self.get_observations(), self.reward, self.done, extras
