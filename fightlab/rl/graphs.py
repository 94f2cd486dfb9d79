"""Torch CUDA graphs of the trainer's torch work: the policy step of the rollout and the PPO
update, with the capture discipline of the env's warp graph (`fightlab.sim.physics.StepGraph`).

Structure of one iteration on CUDA, every graph replayed on warp's stream (`shared_stream`), so
torch and warp work stay ordered without host synchronisation:

    policy[0] → env step → policy[1] → env step → … → env step → policy[num_steps] → update

`policy[s]` (a torch graph) stores step s−1's reward and done, samples step s's action from the
env's observation into the buffer and the env's action; the env step is MuJoCo Warp's own graph
(its solver loop is a conditional node, which cannot nest inside a torch capture, so the two kinds
of graph are replayed back to back); `policy[num_steps]` bootstraps the value and computes GAE;
`update` is the whole PPO update (`fightlab.rl.ppo.PPOUpdate.run`) and the normaliser's update.
Only the minibatch permutations are drawn eagerly, before the update.

Torch graphs exist only on CUDA: elsewhere (warp's CPU device) the same functions run eagerly.
"""

from __future__ import annotations

import torch

from fightlab.sim.physics import FallbackGraph, suspend_gc
from fightlab.timing import set_sync_debug_mode


class TorchGraph(FallbackGraph):
    """`fn` (torch work without host reads) captured as one CUDA graph, or run eagerly.

    Capture (`capture(pool)`): warm-up calls on a side stream (cuBLAS handles, the autograd
    streams, lazily created optimizer state) under `torch.cuda.set_sync_debug_mode("error")`, so
    that a host read is refused before capture, then one capture with the garbage collector off.
    `fn` must not draw random numbers (a captured RNG ties the graph to torch's generator state;
    the rollout draws its noise eagerly, once per iteration).
    The caller restores whatever state the warm-up moved, and checks once per iteration whether
    a tensor the graphs hold was replaced (`fightlab.run.runner.Trainer` re-captures all of them
    then). A capture that raises leaves no graph, prints one warning and counts a fallback
    (`fightlab.sim.physics.FallbackGraph`).

    Args:
      fn: the work; device: a torch device; enabled: capture at all (False: eager); name: for the
      warnings; warmup: warm-up calls before capture (the torch docs use 3 for a training step).

    Attributes: graph (torch.cuda.CUDAGraph or None), fallbacks (int), fallback_reason.
    """

    def __init__(self, fn, device, enabled: bool = True, name: str = "update", warmup: int = 1):
        self.device = torch.device(device)
        super().__init__(fn, name, bool(enabled) and self.device.type == "cuda")
        self.warmup = warmup

    def capture(self, pool=None) -> bool:
        """Warm up and capture (CUDA only; `pool` a shared `torch.cuda.graph_pool_handle()`).
        Returns whether a graph was captured."""
        if not self.enabled:
            return False
        self.graph = None
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            # the warm-up under sync-debug "error": a host read in `fn` (which would invalidate
            # the capture, and a failed capture leaves torch's pool and RNG state half-recording)
            # is refused here, eagerly and cleanly, before any capture begins
            mode = torch.cuda.get_sync_debug_mode()
            set_sync_debug_mode("error")  # without torch's "prototype feature" note
            try:
                with torch.cuda.stream(side):
                    for _ in range(self.warmup):
                        self.fn()
            finally:
                set_sync_debug_mode(mode)
            torch.cuda.current_stream(self.device).wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with suspend_gc(), torch.cuda.graph(g, pool=pool):
                self.fn()
        except Exception as e:  # noqa: BLE001 — any capture error means: run eager
            self._capture_failed(e)
            return False
        self.graph = g
        return True

    def __call__(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.fn()
