"""`ObsHistory`: the last H policy observations of every world, stacked newest first, the input
of a learner with `PPOConfig.obs_history` = H > 1 (as the observation history of legged-robot
policies, e.g. Rudin et al. 2022, or mjlab's ``history_length``)."""

from __future__ import annotations

import torch


class ObsHistory:
    """The last ``H`` observations of ``nworld`` worlds, kept on the policy's device.

    Attributes: stacked, float32 [nworld, H · obs_dim]: block k (``stacked[:, k·obs_dim:(k+1)·obs_dim]``)
    is the observation k env steps ago, block 0 the newest. `fill(obs)` (a start) writes every block;
    `push(obs, done)` (after each env step) shifts the blocks one back, writes ``obs`` into block
    0 and refills a done world's blocks with its ``obs`` (its new episode's first observation:
    nothing of the previous episode stays). `push` writes only into tensors made here (no
    allocation, no host read): it can be captured in a CUDA graph.

    Args: nworld, obs_dim, H (>= 1), device.
    """

    def __init__(self, nworld: int, obs_dim: int, H: int, device):
        self.H, self.obs_dim = int(H), int(obs_dim)
        self.stacked = torch.zeros(nworld, self.H * self.obs_dim, device=device)
        self._older = torch.zeros(nworld, (self.H - 1) * self.obs_dim, device=device)  # the shift's copy
        self._done = torch.zeros(nworld, 1, dtype=torch.bool, device=device)

    def fill(self, obs: torch.Tensor) -> None:
        """Every block of every world := ``obs`` [nworld, obs_dim]."""
        self.stacked.view(-1, self.H, self.obs_dim).copy_(obs[:, None, :])

    def push(self, obs: torch.Tensor, done: torch.Tensor) -> None:
        """One env step: ``obs`` [nworld, obs_dim] the new observations, ``done`` [nworld] float
        (1: the world's episode ended at this step and ``obs`` is its next episode's first)."""
        D = self.obs_dim
        if self.H > 1:
            self._older.copy_(self.stacked[:, :-D])  # through a copy: the two ranges overlap
            self.stacked[:, D:].copy_(self._older)
        self.stacked[:, :D].copy_(obs)
        torch.gt(done[:, None], 0.5, out=self._done)
        blocks = self.stacked.view(-1, self.H, D)
        torch.where(self._done[:, :, None], obs[:, None, :], blocks, out=blocks)

    def state_dict(self) -> dict:
        """{"stacked": a CPU copy} (a checkpoint's)."""
        return {"stacked": self.stacked.detach().cpu()}

    def load_state_dict(self, state: dict) -> None:
        """Copy a `state_dict` back in place (the captured graphs keep their tensor). ValueError
        for another shape."""
        t = state["stacked"]
        if tuple(t.shape) != tuple(self.stacked.shape):
            raise ValueError(f"observation history of shape {tuple(t.shape)} does not fit this run's "
                             f"{tuple(self.stacked.shape)} (nworld, obs_history × obs_dim)")
        self.stacked.copy_(t.to(self.stacked.device))


def mirror_blocks(perm: torch.Tensor, sign: torch.Tensor, H: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An observation's mirror map (perm int64 [obs_dim], sign float32 [obs_dim]) over H stacked
    observations: each block mirrored within itself (perm [H · obs_dim], sign tiled)."""
    D = perm.numel()
    offsets = torch.arange(H, device=perm.device).repeat_interleave(D) * D
    return perm.repeat(H) + offsets, sign.repeat(H)
