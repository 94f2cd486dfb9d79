"""PPO update (clipped surrogate, value loss, entropy bonus, gradient clipping, Adam over
minibatches and epochs), after CleanRL's `ppo_continuous_action.py` (Huang et al. 2022), with
rsl_rl's KL-adaptive learning rate (Rudin et al. 2022)."""

from __future__ import annotations

import torch
from torch import nn

from fightlab.config import PPOConfig
from fightlab.rl.models import ActorCritic
from fightlab.rl.storage import RolloutStorage


def ppo_update(agent: ActorCritic, optimizer: torch.optim.Optimizer, buf: RolloutStorage,
               cfg: PPOConfig, generator: torch.Generator | None = None) -> dict:
    """Run `update_epochs` × `num_minibatches` PPO steps on a filled rollout buffer.

    Args:
      agent: the actor-critic; optimizer: its Adam optimizer (lr adapted in place when
        `cfg.adaptive_lr`); buf: storage with advantages and returns computed;
      cfg: PPOConfig; generator: torch RNG for the minibatch permutation (device of buf).

    Returns:
      dict of floats: policy_loss, value_loss, entropy, approx_kl, clipfrac, learning_rate
      (means over minibatches). Reading them syncs once per update.
    """
    T, N = buf.rewards.shape
    B = T * N
    mb = B // cfg.num_minibatches
    b_obs = buf.obs.reshape(B, -1)
    b_act = buf.actions.reshape(B, -1)
    b_logp = buf.logprobs.reshape(B)
    b_adv = buf.advantages.reshape(B)
    b_ret = buf.returns.reshape(B)
    stats = torch.zeros(5, device=b_obs.device)  # pg, v, ent, kl, clipfrac
    count = 0
    lr = optimizer.param_groups[0]["lr"]
    for _epoch in range(cfg.update_epochs):
        perm = torch.randperm(B, device=b_obs.device, generator=generator)
        for start in range(0, B, mb):
            idx = perm[start:start + mb]
            _, newlogp, entropy, newvalue, mean, std = agent.get_action_and_value(b_obs[idx], b_act[idx])
            logratio = newlogp - b_logp[idx]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()  # k3 estimator (Schulman 2020)
                clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
            adv = b_adv[idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(-adv * ratio,
                                -adv * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
            v_loss = 0.5 * ((newvalue - b_ret[idx]) ** 2).mean()
            ent = entropy.mean()
            loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
            optimizer.zero_grad(set_to_none=False)
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
            optimizer.step()
            stats += torch.stack([pg_loss.detach(), v_loss.detach(), ent.detach(), approx_kl, clipfrac])
            count += 1
        if cfg.adaptive_lr:
            # one host read per epoch: the KL decides the learning rate of the next epoch
            kl = float(approx_kl)
            if kl > 2.0 * cfg.desired_kl:
                lr = max(1e-5, lr / 1.5)
            elif 0.0 < kl < 0.5 * cfg.desired_kl:
                lr = min(1e-2, lr * 1.5)
            for g in optimizer.param_groups:
                g["lr"] = lr
    s = (stats / count).tolist()
    return dict(policy_loss=s[0], value_loss=s[1], entropy=s[2], approx_kl=s[3], clipfrac=s[4],
                learning_rate=lr)
