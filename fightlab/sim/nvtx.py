"""NVTX ranges for Nsight Systems (``nsys profile``): the env and the trainer mark their stages.

    from fightlab.sim.nvtx import nvtx_range
    with nvtx_range("physics"):   # a range in domain "fightlab"; a shared no-op without nvtx
        ...
"""

from __future__ import annotations

import contextlib
from typing import Any

_NO_RANGE = contextlib.nullcontext()  # one shared no-op
_nvtx: Any = None      # the nvtx module once imported; False when absent
NVTX_DOMAIN = "fightlab"
#: the env/trainer stage ranges: physics (StanceEnv pre-step + substeps), observation/reward
#: (post-step + observe), reset (masked reset), policy (actor-critic forward in the rollout),
#: update (GAE + PPO update + normaliser)
NVTX_RANGES = ("physics", "observation/reward", "reset", "policy", "update")
_COLORS = {"physics": "blue", "observation/reward": "green", "reset": "red", "policy": "purple",
           "update": "orange"}


def set_backend(mod: Any = None) -> None:
    """The nvtx module ranges go to: None (the default) imports ``nvtx`` afresh at the next
    range, False turns ranges off, any object with ``push_range``/``pop_range`` is used as is."""
    global _nvtx
    _nvtx = mod


def _nvtx_module():
    global _nvtx
    if _nvtx is None:
        try:
            import nvtx as mod
        except ImportError:
            mod = False
        _nvtx = mod
    return _nvtx


@contextlib.contextmanager
def _range(name: str, mod):
    mod.push_range(message=name, color=_COLORS.get(name, "grey"), domain=NVTX_DOMAIN)
    try:
        yield
    finally:
        mod.pop_range(domain=NVTX_DOMAIN)


def nvtx_range(name: str):
    """An NVTX range ``name`` in domain "fightlab" for Nsight Systems (``nsys profile``).

    Use as ``with nvtx_range("physics"): ...``. Without the ``nvtx`` package it is a shared
    no-op context manager. Ranges are host-side markers: inside a captured graph they appear
    once, at capture, not at each replay (profile with ``--no-graph`` to see per-step ranges).
    """
    mod = _nvtx_module()
    return _range(name, mod) if mod else _NO_RANGE
