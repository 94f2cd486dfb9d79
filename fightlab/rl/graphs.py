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

import sys

import torch

from fightlab.sim.physics import graph_warning, suspend_gc


class TorchGraph:
    """`fn` (torch work without host reads) captured as one CUDA graph, or run eagerly.

    Capture (`capture(pool)`): warm-up calls on a side stream (cuBLAS handles, the autograd
    streams, lazily created optimizer state) under `torch.cuda.set_sync_debug_mode("error")`, so
    that a host read is refused before capture, then one capture with the garbage collector off.
    `fn` must not draw random numbers (a captured RNG ties the graph to torch's generator state;
    the rollout draws its noise eagerly, once per iteration).
    The caller restores whatever state the warm-up moved. A capture that raises leaves no graph,
    prints one warning and counts a fallback; `watch` (a callable returning the tensors the graph
    reads and writes) is checked by storage pointer before each replay, and a replaced tensor
    re-captures with a warning.

    Args:
      fn: the work; device: a torch device; enabled: capture at all (False: eager); name: for the
      warnings; warmup: warm-up calls before capture (the torch docs use 3 for a training step).

    Attributes: graph (torch.cuda.CUDAGraph or None), fallbacks, recaptures (ints).
    """

    def __init__(self, fn, device, enabled: bool = True, name: str = "update", warmup: int = 1,
                 watch=None):
        self.fn = fn
        self.device = torch.device(device)
        self.enabled = bool(enabled) and self.device.type == "cuda"
        self.name = name
        self.warmup = warmup
        self.watch = watch
        self.graph = None
        self.fallbacks = 0
        self.fallback_reason: str | None = None
        self.recaptures = 0
        self._ptrs: tuple = ()
        self._pool = None

    def _fallback(self, reason: str) -> None:
        self.graph = None
        self.enabled = False
        self.fallbacks += 1
        self.fallback_reason = reason
        graph_warning(self.name, reason)

    def _fingerprint(self) -> tuple:
        return tuple(t.data_ptr() for t in self.watch()) if self.watch else ()

    def capture(self, pool=None) -> bool:
        """Warm up and capture (CUDA only; `pool` a shared `torch.cuda.graph_pool_handle()`).
        Returns whether a graph was captured."""
        if not self.enabled:
            return False
        self._pool = pool
        self.graph = None
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            # the warm-up under sync-debug "error": a host read in `fn` (which would invalidate
            # the capture, and a failed capture leaves torch's pool and RNG state half-recording)
            # is refused here, eagerly and cleanly, before any capture begins
            mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("error")
            try:
                with torch.cuda.stream(side):
                    for _ in range(self.warmup):
                        self.fn()
            finally:
                torch.cuda.set_sync_debug_mode(mode)
            torch.cuda.current_stream(self.device).wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with suspend_gc(), torch.cuda.graph(g, pool=pool):
                self.fn()
        except Exception as e:  # noqa: BLE001 — any capture error means: run eager
            first = (str(e).strip().splitlines() or [""])[0][:200]
            self._fallback(f"capture failed ({type(e).__name__}: {first})")
            return False
        self.graph = g
        self._ptrs = self._fingerprint()
        return True

    def check(self) -> None:
        """Re-capture if a watched tensor was replaced since the capture (a warning says so).
        Call between iterations, not between the graphs of one iteration."""
        if self.graph is not None and self._fingerprint() != self._ptrs:
            print(f"fightlab: warning: tensors of the {self.name} graph were replaced; re-capturing",
                  file=sys.stderr, flush=True)
            self.recaptures += 1
            self.capture(self._pool)

    def __call__(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.fn()


def torch_graphs_unsupported(device) -> str | None:
    """Why torch graphs are not used on `device` (a sentence), or None where they are."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return f"torch CUDA graphs need a CUDA device, not {dev.type!r} (the same functions run eagerly)"
    return None
