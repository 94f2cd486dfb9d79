"""Torch CUDA graphs of the trainer's torch work: the rollout's policy steps and the PPO update,
with the capture discipline of the env's warp graph (`fightlab.sim.physics.StepGraph`). The
iteration they make, replayed back to back with the env's graph on warp's stream: DESIGN.md ("One
training iteration"). Torch graphs exist only on CUDA: elsewhere the same functions run eagerly.
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
    The caller restores whatever state the warm-up moved and re-captures when a tensor the graphs
    hold was replaced (`fightlab.rl.loop.TrainLoop`). A capture that raises falls back
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
            # a host read in `fn` would invalidate the capture (leaving torch's pool and RNG state
            # half-recording): sync-debug "error" refuses it here, before any capture begins
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
