"""PPO update (clipped surrogate, value loss, entropy bonus, gradient clipping, Adam over
minibatches and epochs), after CleanRL's `ppo_continuous_action.py` (Huang et al. 2022), with
rsl_rl's KL-adaptive learning rate (Rudin et al. 2022) computed on the device.

The update reads nothing back to the host: the learning rate is a device tensor that Adam takes
as it is (`capturable=True` on CUDA), the KL rule moves it in place, the minibatch permutations
are drawn before the update into a fixed buffer, and the losses land in a fixed stats tensor.
So `PPOUpdate.run` can be captured as one CUDA graph (`fightlab.rl.graphs`) and replayed; the
eager call runs the same kernels.
"""

from __future__ import annotations

import torch
from torch import nn

from fightlab.config import PPOConfig
from fightlab.rl.models import ActorCritic, matmul_precision
from fightlab.rl.storage import RolloutStorage

#: the entries of `PPOUpdate.stats` (float32 [6]): means over the update's minibatches, and the
#: learning rate after the update
STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "learning_rate")

#: bounds of the KL-adaptive learning rate and its factor (rsl_rl's `PPO.update`)
LR_MIN, LR_MAX, LR_FACTOR = 1e-5, 1e-2, 1.5


def kl_adaptive_lr(lr: torch.Tensor, kl: torch.Tensor, desired_kl: float) -> None:
    """rsl_rl's KL-adaptive rule on the 0-d tensor ``lr``, in place (no host read): ÷ LR_FACTOR
    (not below LR_MIN) when ``kl`` (0-d, the epoch's last minibatch's) > 2·desired_kl, × LR_FACTOR
    (not above LR_MAX) when 0 < kl < desired_kl / 2 (`PPOConfig.kl_target`), else unchanged."""
    down = torch.clamp(lr / LR_FACTOR, min=LR_MIN)
    up = torch.clamp(lr * LR_FACTOR, max=LR_MAX)
    new = torch.where(kl > 2.0 * desired_kl, down, torch.where((kl > 0.0) & (kl < 0.5 * desired_kl), up, lr))
    lr.copy_(new)


def gaussian_kl(old_mean: torch.Tensor, old_logstd: torch.Tensor, mean: torch.Tensor,
                std: torch.Tensor) -> torch.Tensor:
    """KL(old ‖ new) of two diagonal Gaussians, summed over actions (rsl_rl's adaptive schedule):
    Σ log(σ/σ_old) + (σ_old² + (μ_old − μ)²) / (2σ²) − ½, float [B] in nats, from old_mean, mean,
    std float [B, act_dim] and old_logstd float [act_dim] (state-independent)."""
    old_std = old_logstd.exp()
    return (torch.log(std / old_std) + (old_std.square() + (old_mean - mean).square()) / (2.0 * std.square())
            - 0.5).sum(-1)


def mirror(x: torch.Tensor, perm_sign: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``x`` [..., n] mirrored by the door's map (perm int64 [n], sign float32 [n], on x's
    device): ``out[..., k] = sign[k] · x[..., perm[k]]`` (`VecEnv.mirror_maps`)."""
    perm, sign = perm_sign
    return x[..., perm] * sign


#: the prefix of the critic's parameter names in an ActorCritic state dict: with
#: `PPOConfig.critic_learning_rate` set they form Adam's second group
CRITIC_PREFIX = "critic."


def optimizer_order(names: list[str], ngroups: int) -> list[str]:
    """Parameter names (an ActorCritic's, in its state dict's order) in the order Adam numbers
    them: as they are with one group; with two, the actor's and log-std's first, then the
    critic's (`CRITIC_PREFIX`), as `make_optimizer` groups them. ValueError for other ngroups."""
    if ngroups == 1:
        return list(names)
    if ngroups == 2:
        return [n for n in names if not n.startswith(CRITIC_PREFIX)] + [n for n in names if n.startswith(CRITIC_PREFIX)]
    raise ValueError(f"fightlab's Adam has one or two parameter groups, got {ngroups}")


def make_optimizer(agent: ActorCritic, learning_rate: float, device,
                   critic_learning_rate: float | None = None) -> tuple[torch.optim.Adam, torch.Tensor]:
    """(Adam, lr): Adam (eps 1e-5, CleanRL's) over the agent's parameters with the learning rate
    ``lr`` a 0-d float32 tensor on `device`, moved by `kl_adaptive_lr` (never by assigning the
    group); on CUDA capturable (step counts on the device) and fused (one kernel per step: fewer
    nodes in the update graph; not bitwise the foreach path's). With ``critic_learning_rate``
    the critic's parameters (`CRITIC_PREFIX`) are a second group at that fixed float rate.
    """
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    lr = torch.tensor(float(learning_rate), dtype=torch.float32, device=dev)
    if critic_learning_rate is None:
        params = agent.parameters()
    else:
        named = list(agent.named_parameters())
        params = [dict(params=[p for n, p in named if not n.startswith(CRITIC_PREFIX)]),
                  dict(params=[p for n, p in named if n.startswith(CRITIC_PREFIX)],
                       lr=float(critic_learning_rate))]
    opt = torch.optim.Adam(params, lr=lr, eps=1e-5, capturable=cuda, fused=True if cuda else None)
    return opt, lr


def adopt_optimizer_state(optimizer: torch.optim.Optimizer, lr: torch.Tensor) -> None:
    """After `optimizer.load_state_dict` (a checkpoint of any device, an older float learning
    rate): copy the first group's loaded rate into `lr` and hand that group `lr` again (a
    critic's group of its own keeps its fixed rate as a float), keep this optimizer's
    `capturable` setting and its step counts on the parameters' device (so a captured update
    sees the same tensors)."""
    cap = lr.device.type == "cuda"
    for i, g in enumerate(optimizer.param_groups):
        v = g["lr"]
        if i == 0:
            lr.fill_(float(v))  # a host read: only when a checkpoint is loaded
            g["lr"] = lr
        else:
            g["lr"] = float(v)
        g["capturable"] = cap  # this optimizer's settings, not the file's (another device's)
        g["fused"] = True if cap else None
        if cap:
            g["foreach"] = None
    for p, st in optimizer.state.items():
        if "step" in st:
            st["step"] = torch.as_tensor(st["step"], dtype=torch.float32).to(p.device if cap else "cpu")


class PPOUpdate:
    """One PPO update over a filled rollout buffer, with every input and output in fixed tensors.

    Args: agent, optimizer, lr (from `make_optimizer`); buf: the rollout storage (advantages and
    returns computed); cfg: PPOConfig; generator: torch RNG for the permutations (buf's device);
    mirror: the door's `mirror_maps` as tensors on buf's device (needed by `PPOConfig.symmetry`).
    Attributes: perm, int64 [update_epochs, B] minibatch permutations (B = num_steps × nworld);
    stats, float32 [6] (`STATS`). `draw()` then `run()` is one update; `stats_dict()` reads the
    stats (one read).
    """

    def __init__(self, agent: ActorCritic, optimizer: torch.optim.Optimizer, lr: torch.Tensor,
                 buf: RolloutStorage, cfg: PPOConfig, generator: torch.Generator | None = None,
                 mirror: dict | None = None):
        self.agent, self.optimizer, self.lr, self.buf, self.cfg = agent, optimizer, lr, buf, cfg
        self.generator, self.mirror = generator, mirror
        if cfg.symmetry != "none" and mirror is None:
            raise ValueError(f"PPOConfig.symmetry {cfg.symmetry!r} needs the task's mirror maps; this task has none")
        #: the KL target of the adaptive rate (PPOConfig.kl_target of this policy's action count)
        self.desired_kl = cfg.kl_target(agent.actor_logstd.numel())
        T, N = buf.rewards.shape
        self.B = T * N
        self.mb = self.B // cfg.num_minibatches
        dev = buf.obs.device
        self.perm = torch.zeros(cfg.update_epochs, self.B, dtype=torch.long, device=dev)
        self.stats = torch.zeros(len(STATS), device=dev)
        #: an analytic KL (PPOConfig.kl_estimator): the rollout's action means and the log-std it
        #: sampled with (copied at the start of each update)
        self.analytic = cfg.kl_estimator == "analytic"
        if self.analytic and buf.means.shape[-1] != buf.actions.shape[-1]:
            raise ValueError("PPOConfig.kl_estimator 'analytic' needs a RolloutStorage built with keep_means=True")
        self.old_logstd = agent.actor_logstd.detach().clone()

    def draw(self) -> None:
        """Draw this update's permutations into `perm` (torch.randperm with `generator`)."""
        for e in range(self.cfg.update_epochs):
            self.perm[e].copy_(torch.randperm(self.B, device=self.perm.device, generator=self.generator))

    def run(self) -> None:
        """`update_epochs` × `num_minibatches` PPO steps over `perm`, the KL rule after each
        epoch, the loss means and the final rate into `stats`; no host read, only temporaries
        allocated (capturable). At `PPOConfig.matmul_precision`."""
        with matmul_precision(self.cfg.matmul_precision):
            self._run()

    def _run(self) -> None:
        cfg, agent, buf = self.cfg, self.agent, self.buf
        B = self.B
        b = dict(obs=buf.obs.reshape(B, -1), priv=buf.priv.reshape(B, -1) if agent.priv_dim else None,
                 act=buf.actions.reshape(B, -1), logp=buf.logprobs.reshape(B), adv=buf.advantages.reshape(B),
                 ret=buf.returns.reshape(B), mean=buf.means.reshape(B, -1) if self.analytic else None)
        if self.analytic:
            self.old_logstd.copy_(agent.actor_logstd.detach())
        if cfg.symmetry == "augment":
            self._mirror_batch(b)
        acc = torch.zeros(5, device=b["obs"].device)  # pg, v, ent, kl, clipfrac
        count = 0
        for epoch in range(cfg.update_epochs):
            perm = self.perm[epoch]
            for start in range(0, B, self.mb):
                part, approx_kl = self._minibatch(b, perm[start:start + self.mb])
                acc += part
                count += 1
            if cfg.adaptive_lr:  # the last minibatch's KL sets the next epoch's rate, on the device
                with torch.no_grad():
                    kl_adaptive_lr(self.lr, approx_kl, self.desired_kl)
        self.stats[:5].copy_(acc / count)
        self.stats[5].copy_(self.lr)

    def _mirror_batch(self, b: dict) -> None:
        """Add the mirrored samples to the flat batch ``b`` ("augment"): m_obs, m_priv, m_act.
        A mirrored sample's old log-probability is its original's (rsl_rl's `PPO.update` with
        symmetry data augmentation): exact for a symmetric policy, and its ratio then stays below
        the Gaussian's peak over the original's density. Recomputed under an asymmetric policy,
        a mirrored action far out in its tails had a log-probability so low that one Adam step
        made the ratio overflow float32 (non-finite weights on the GPU)."""
        mir = self.mirror
        b["m_obs"] = mirror(b["obs"], mir["policy"])
        b["m_priv"] = None if b["priv"] is None else mirror(b["priv"], mir["critic"])
        b["m_act"] = mirror(b["act"], mir["actions"])

    def _minibatch(self, b: dict, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One PPO step on the samples ``idx`` of the flat batch ``b`` (with their mirrors under
        "augment", the mirror loss under "loss"); returns (the step's [pg, v, ent, kl, clipfrac],
        its KL), the KL and clip fraction over the original samples."""
        cfg, agent, opt = self.cfg, self.agent, self.optimizer
        obs, act, logp, ret = b["obs"][idx], b["act"][idx], b["logp"][idx], b["ret"][idx]
        priv = None if b["priv"] is None else b["priv"][idx]
        adv = b["adv"][idx]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        n = idx.numel()
        if cfg.symmetry == "augment":
            obs, act = torch.cat([obs, b["m_obs"][idx]]), torch.cat([act, b["m_act"][idx]])
            priv = None if priv is None else torch.cat([priv, b["m_priv"][idx]])
            logp, adv, ret = torch.cat([logp, logp]), torch.cat([adv, adv]), torch.cat([ret, ret])
        _, newlogp, entropy, newvalue, newmean, newstd = agent.get_action_and_value(obs, act, priv=priv)
        logratio = newlogp - logp
        ratio = logratio.exp()
        with torch.no_grad():
            lr0, r0 = (logratio, ratio) if n == ratio.numel() else (logratio[:n], ratio[:n])
            if self.analytic:
                approx_kl = gaussian_kl(b["mean"][idx], self.old_logstd, newmean[:n], newstd[:n]).mean()
            else:
                approx_kl = ((r0 - 1) - lr0).mean()  # k3 estimator (Schulman 2020)
            clipfrac = ((r0 - 1.0).abs() > cfg.clip_coef).float().mean()
        pg_loss = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
        v_loss = 0.5 * ((newvalue - ret) ** 2).mean()
        ent = entropy.mean()
        loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
        if cfg.symmetry == "loss":  # rsl_rl's mirror loss: π(mirror(o)) toward mirror(π(o)), held fixed
            target = mirror(newmean.detach(), self.mirror["actions"])
            loss = loss + cfg.symmetry_coef * (agent.act_mean(mirror(obs, self.mirror["policy"])) - target).square().mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
        opt.step()
        return torch.stack([pg_loss.detach(), v_loss.detach(), ent.detach(), approx_kl, clipfrac]), approx_kl

    def stats_dict(self) -> dict:
        """The last update's `stats` as floats (one device→host read)."""
        return dict(zip(STATS, self.stats.tolist()))


def ppo_update(agent: ActorCritic, optimizer: torch.optim.Optimizer, buf: RolloutStorage,
               cfg: PPOConfig, generator: torch.Generator | None = None,
               lr: torch.Tensor | None = None, mirror: dict | None = None) -> dict:
    """One eager PPO update (`PPOUpdate.draw` + `run`), for scripts and tests; returns
    `stats_dict()`. ``lr``: the rate tensor of `make_optimizer`; None takes the first group's (a
    float one becomes a tensor the group then holds, so the KL rule moves the rate Adam uses);
    ``mirror``: the task's mirror maps, for `PPOConfig.symmetry` (`VecEnv.mirror_maps`)."""
    if lr is None:
        lr = optimizer.param_groups[0]["lr"]
        if not isinstance(lr, torch.Tensor):
            lr = torch.tensor(float(lr), dtype=torch.float32, device=buf.obs.device)
            optimizer.param_groups[0]["lr"] = lr
    upd = PPOUpdate(agent, optimizer, lr, buf, cfg, generator, mirror)
    upd.draw()
    upd.run()
    return upd.stats_dict()
