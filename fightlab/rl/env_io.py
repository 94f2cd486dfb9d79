"""`PolicyIO`: a CPU-backend task's step tensors on the policy's device."""

from __future__ import annotations

import torch


class PolicyIO:
    """The env's step tensors on the policy's device, for a CPU-backend env whose policy runs on
    another device (`TrainConfig.policy_device`): obs [nworld, obs_dim], priv_obs [nworld,
    priv_dim], reward, done, timeout [nworld] (float32 views of one buffer on that device, copied
    from the env's) and action [nworld, nu] (copied to the env's).

    Args: env, a `fightlab.envs.vecenv.VecEnv` (its float32 views on the CPU); device, the
    policy's torch device ("cpu", "cuda:N").
    `pull()` (after a reset, a load or a step) packs the env's outputs into one host buffer
    (pinned on CUDA) and copies it to the device without waiting: the buffer is written again
    only at the next pull, after a `push()` has waited for the device. `push()` (before a step)
    copies the action to the env and waits for it: on CUDA one host read per env step.
    """

    def __init__(self, env, device: str):
        dev = torch.device(device)
        n, k, p = int(env.obs.shape[0]), int(env.obs.shape[1]), int(env.priv_obs.shape[1])
        self.env = env
        self._host = torch.zeros((n, k + 3 + p), dtype=torch.float32, pin_memory=dev.type == "cuda")
        self._dev = torch.zeros((n, k + 3 + p), dtype=torch.float32, device=dev)
        self.obs = self._dev[:, :k]
        self.reward, self.done, self.timeout = (self._dev[:, k + i] for i in range(3))
        self.priv_obs = self._dev[:, k + 3:]
        self.action = torch.zeros(tuple(env.action.shape), dtype=env.action.dtype, device=dev)

    def pull(self) -> None:
        """The env's obs, reward, done and timeout to the device (one copy, not waited for)."""
        e = self.env
        torch.cat([e.obs, e.reward[:, None], e.done[:, None], e.timeout[:, None], e.priv_obs], dim=1,
                  out=self._host)
        self._dev.copy_(self._host, non_blocking=True)

    def push(self) -> None:
        """The action to the env (waits for the device: the env reads it on the host next)."""
        self.env.action.copy_(self.action)
