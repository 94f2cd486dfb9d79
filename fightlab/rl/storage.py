"""Rollout buffer and generalised advantage estimation (GAE)."""

from __future__ import annotations

import torch


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
                next_value: torch.Tensor, gamma: float, lam: float):
    """GAE(γ, λ) advantages and returns (Schulman et al. 2016, "High-dimensional continuous control
    using generalized advantage estimation", eq. 16; the loop of CleanRL's ppo_continuous_action).

    Args:
      rewards, values, dones: [T, N] float; dones[t] = 1 if the episode ended at step t (so
        values after it belong to a new episode).
      next_value: [N] value of the observation after the last step.
      gamma, lam: discount and GAE λ.

    Returns:
      (advantages, returns): [T, N] each; returns = advantages + values.
    """
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(T)):
        nv = next_value if t == T - 1 else values[t + 1]
        notdone = 1.0 - dones[t]
        delta = rewards[t] + gamma * nv * notdone - values[t]
        last = delta + gamma * lam * notdone * last
        adv[t] = last
    return adv, adv + values


class RolloutStorage:
    """Fixed-shape rollout buffer on the device: obs [T, N, obs_dim], priv [T, N, priv_dim] (an
    asymmetric critic's privileged observation; priv_dim 0 without one), actions [T, N, act_dim],
    means [T, N, act_dim] (the policy's action means, kept for an analytic KL, `keep_means`;
    [T, N, 0] without), logprobs/rewards/dones/values [T, N] (float32). Static shapes so an
    update can be captured."""

    def __init__(self, num_steps: int, nworld: int, obs_dim: int, act_dim: int, device, priv_dim: int = 0,
                 keep_means: bool = False):
        z = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        self.obs = z(num_steps, nworld, obs_dim)
        self.priv = z(num_steps, nworld, priv_dim)
        self.actions = z(num_steps, nworld, act_dim)
        self.means = z(num_steps, nworld, act_dim if keep_means else 0)
        self.logprobs = z(num_steps, nworld)
        self.rewards = z(num_steps, nworld)
        self.dones = z(num_steps, nworld)
        self.values = z(num_steps, nworld)
        self.advantages = z(num_steps, nworld)
        self.returns = z(num_steps, nworld)
