"""Actor-critic MLP (separate actor and critic networks, state-independent Gaussian log-std) with
running observation normalisation, after CleanRL's `ppo_continuous_action.py` and rsl_rl's
`ActorCritic` / `EmpiricalNormalization`."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal


def nonfinite_tensors(state: dict) -> list[str]:
    """Names of the floating-point tensors of ``state`` (a state dict: name → tensor; other
    values are skipped) holding a NaN or an infinity, in ``state``'s order: weights no
    checkpoint may carry (one read per tensor)."""
    return [k for k, v in state.items()
            if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())]


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    """Orthogonal weight init with gain `std`, constant bias (CleanRL)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(sizes: list[int], out_std: float) -> nn.Sequential:
    """Linear+ELU stack; the last layer is initialised with gain `out_std`."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        last = i == len(sizes) - 2
        layers.append(layer_init(nn.Linear(sizes[i], sizes[i + 1]), std=out_std if last else np.sqrt(2)))
        if not last:
            layers.append(nn.ELU())
    return nn.Sequential(*layers)


class ObsNormalizer(nn.Module):
    """Running mean/variance of observations (parallel Welford update, Chan et al. 1979).

    `forward(obs)` returns `clamp((obs - mean) / sqrt(var + eps), ±clip)`; `update(obs)` folds a
    batch [N, obs_dim] into the statistics. Buffers are saved with the state dict.
    """

    def __init__(self, obs_dim: int, eps: float = 1e-8, clip: float = 10.0, min_std=None):
        super().__init__()
        self.register_buffer("mean", torch.zeros(obs_dim))
        self.register_buffer("var", torch.ones(obs_dim))
        self.register_buffer("count", torch.tensor(0.0))
        # floor on the std per feature: a feature that was constant so far (the curriculum
        # amplitude during its first stage) must not jump to the clip when it first moves
        floor = torch.zeros(obs_dim) if min_std is None else torch.as_tensor(min_std, dtype=torch.float32)
        self.register_buffer("min_var", floor**2, persistent=False)
        self.eps, self.clip = eps, clip

    @torch.no_grad()
    def update(self, obs: torch.Tensor) -> None:
        n = obs.shape[0]
        bmean = obs.mean(0)
        bvar = obs.var(0, unbiased=False)
        tot = self.count + n
        delta = bmean - self.mean
        self.mean += delta * n / tot
        self.var.copy_((self.var * self.count + bvar * n + delta**2 * self.count * n / tot) / tot)
        self.count.copy_(tot)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        std = torch.sqrt(torch.maximum(self.var, self.min_var) + self.eps)
        return torch.clamp((obs - self.mean) / std, -self.clip, self.clip)


@contextlib.contextmanager
def matmul_precision(precision: str | None):
    """The block at torch's float32 matmul ``precision`` (`PPOConfig.matmul_precision`; "high":
    TensorFloat-32 on cuBLAS), then the process's setting back, so it never leaks into another
    learner; None leaves it as it is. Graphs captured inside keep the precision of their capture.
    Raises ValueError for a value not in `config.MATMUL_PRECISIONS`."""
    if precision is None:
        yield
        return
    check_matmul_precision(precision)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def check_matmul_precision(precision) -> None:
    """Raise ValueError unless ``precision`` is None or one of `config.MATMUL_PRECISIONS`."""
    from fightlab.config import MATMUL_PRECISIONS

    if precision is not None and precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul precision must be one of {', '.join(MATMUL_PRECISIONS)}, got {precision!r}")


class ActorCritic(nn.Module):
    """Gaussian policy and value function; with `priv_dim` > 0 an asymmetric critic (Pinto et al.
    2018, "Asymmetric actor critic for image-based robot learning"): the value function also sees
    a privileged observation the policy does not, normalised by its own `priv_norm`.

    Args:
      obs_dim, act_dim: sizes; hidden: hidden layer sizes; init_std: initial action std;
      obs_min_std: optional [obs_dim] floor on the normaliser's std (see ObsNormalizer);
      priv_dim: width of the critic's privileged observation (0: none); matmul_precision: the
        float32 matmul precision of its forward passes (`matmul_precision`; None: the process's);
      obs_history: H, the observations stacked in its input (`PPOConfig.obs_history`, `rl.history`):
        `obs_norm` keeps one set of statistics per observation (obs_dim) and normalises each block.
    Shapes: obs [B, H · obs_dim], priv [B, priv_dim] float32 → action mean [B, act_dim], value [B].
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden=(256, 128, 64), init_std: float = 0.3,
                 obs_min_std=None, priv_dim: int = 0, matmul_precision: str | None = None,
                 obs_history: int = 1):
        super().__init__()
        check_matmul_precision(matmul_precision)
        self.matmul_precision = matmul_precision
        self.obs_norm = ObsNormalizer(obs_dim, min_std=obs_min_std)
        self.priv_dim, self.obs_history, self.obs_dim = int(priv_dim), int(obs_history), int(obs_dim)
        self.actor = mlp([self.obs_history * obs_dim, *hidden, act_dim], out_std=0.01)
        self.critic = mlp([self.obs_history * obs_dim + self.priv_dim, *hidden, 1], out_std=1.0)
        self.actor_logstd = nn.Parameter(torch.full((act_dim,), float(np.log(init_std))))
        if self.priv_dim:  # registered last: the policy-only agent's modules, RNG draws and order stay
            self.priv_norm = ObsNormalizer(self.priv_dim, min_std=np.full(self.priv_dim, 0.01, np.float32))

    def _norm(self, obs: torch.Tensor) -> torch.Tensor:
        """`obs_norm` of each of the H stacked observations of ``obs`` [B, H · obs_dim]."""
        if self.obs_history == 1:
            return self.obs_norm(obs)
        return self.obs_norm(obs.reshape(*obs.shape[:-1], self.obs_history, self.obs_dim)).flatten(-2)

    def _critic_in(self, x: torch.Tensor, priv: torch.Tensor | None) -> torch.Tensor:
        """The critic's input: the normalised observation `x`, and the normalised privileged one."""
        if not self.priv_dim:
            return x
        if priv is None:
            raise ValueError(f"this critic sees a privileged observation of {self.priv_dim} values; none was given")
        return torch.cat([x, self.priv_norm(priv)], dim=-1)

    def get_value(self, obs: torch.Tensor, priv: torch.Tensor | None = None) -> torch.Tensor:
        with matmul_precision(self.matmul_precision):
            return self.critic(self._critic_in(self._norm(obs), priv)).squeeze(-1)

    def act_mean(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action (the mean), for evaluation."""
        with matmul_precision(self.matmul_precision):
            return self.actor(self._norm(obs))

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None,
                             noise: torch.Tensor | None = None, priv: torch.Tensor | None = None):
        """Sample (or score) an action. Returns (action, log_prob [B], entropy [B], value [B],
        mean [B, act_dim], std [B, act_dim]).

        The sample is `mean + std · noise`, with `noise` [B, act_dim] standard normal given by
        the caller (the rollout draws a whole rollout's noise at once, so a captured policy step
        holds no RNG) or drawn here with `torch.randn_like`. `priv`: the privileged observation
        [B, priv_dim] of an asymmetric critic (None without one). Reads nothing back to the host:
        `torch.normal(mean, std)` would (it checks std >= 0 with a host read).
        """
        with matmul_precision(self.matmul_precision):
            x = self._norm(obs)
            mean = self.actor(x)
            std = self.actor_logstd.exp().expand_as(mean)
            # validate_args=False: torch's argument check (`constraints.real.check(...).all()` in a
            # Python `if`) reads the device to the host at every call; the inputs are checked finite
            # by construction (the env zeroes non-finite observations)
            dist = Normal(mean, std, validate_args=False)
            if action is None:
                action = mean + std * (torch.randn_like(mean) if noise is None else noise)
            return (action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1),
                    self.critic(self._critic_in(x, priv)).squeeze(-1), mean, std)
