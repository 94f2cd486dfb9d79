"""MuJoCo Warp model and data on a warp device: slot sizing, solver settings, overflow read-out,
graph capture and the torch/warp shared stream.

Slot sizes (`nconmax` contacts per world, `njmax` constraint rows per world) come from
measurement, not guesses: `fightlab.measure.slots.fallen_contacts` pushes thousands of worlds
over and records the maximum contacts and rows per world; each body's registry record
(`fightlab.bodies.BODIES[name].slots`) holds those maxima plus a margin, with the measurement
named; `SLOTS` indexes them by body name. MuJoCo Warp pools contacts over worlds
(`naconmax = nworld × nconmax`) but caps constraint rows per world (`njmax`).
"""

from __future__ import annotations

import contextlib
import enum

import mujoco
import numpy as np
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src.types import OverflowType

from fightlab.bodies import BODIES, Slots
from fightlab.config import init_warp

init_warp()  # quiet: no banner, no per-module load lines (config's one setting)
wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines


# The slot sizes of every body, read from its registry record (tests may override an entry).
SLOTS: dict[str, Slots] = {name: body.slots for name, body in BODIES.items()}

# Solver settings used for training (Newton, capped iterations). Hitting a cap sets the
# ITERATIONS / LS_ITERATIONS bits of d.overflow; those are counted and reported, not treated as
# failures. Euler integration with joint damping > 0 (eulerdamp on) factors M twice per physics
# step: once in forward (qacc_smooth / solver) and once for M + h·D in the Euler update.
SOLVER_ITERATIONS = 10
SOLVER_LS_ITERATIONS = 20

# d.overflow bits that lose physics (slots ran out): the world is reset and counted as a fall.
SLOT_BITS = int(OverflowType.NEFC | OverflowType.NARROWPHASE | OverflowType.BROADPHASE
                | OverflowType.NJMAX_NNZ)


class Counter(enum.IntEnum):
    """Indices of the per-iteration summary counters kept on the device (int32)."""

    EPISODES = 0
    FALLS = 1
    TIMEOUTS = 2
    OVERFLOW_WORLDS = 3      # slot resets: a world reset because a slot ran out (NEFC/contacts);
                             # a world can run out, reset and run out again: resets, not worlds
    NAN_RESETS = 4           # worlds reset because qpos/qvel went non-finite
    SOLVER_ITER_HITS = 5     # world-steps that hit the solver iteration cap
    SOLVER_LS_HITS = 6       # world-steps that hit the line-search iteration cap
    NEFC_OVERFLOW = 7        # of OVERFLOW_WORLDS: NEFC bit
    CONTACT_OVERFLOW = 8     # of OVERFLOW_WORLDS: NARROWPHASE/BROADPHASE bit
    CONTACT_FALLS = 9        # falls by a non-support body touching the floor
    TILT_FALLS = 10          # falls by torso tilt
    OVERFLOW_DISTINCT_WORLDS = 11  # distinct worlds among the OVERFLOW_WORLDS resets
    N = 12


def slots_for(body: str, nconmax: int | None = None, njmax: int | None = None) -> Slots:
    """Slot sizes for `body` (its registry record's, through `SLOTS`), optionally overridden
    (e.g. a tiny njmax to test overflow). Raises ValueError for a body without slot sizes."""
    if body not in SLOTS:
        raise ValueError(f"no slot sizes for body {body!r}; known: {', '.join(SLOTS)}")
    s = SLOTS[body]
    if nconmax is None and njmax is None:
        return s
    return Slots(nconmax if nconmax is not None else s.nconmax,
                 njmax if njmax is not None else s.njmax, "override")


def prepare_mjmodel(mjm: mujoco.MjModel, timestep: float) -> mujoco.MjModel:
    """Set the training solver options on a MuJoCo model (in place) and return it.

    Args:
      mjm: the body's MjModel.
      timestep: physics timestep in s.
    """
    mjm.opt.timestep = timestep
    mjm.opt.iterations = SOLVER_ITERATIONS
    mjm.opt.ls_iterations = SOLVER_LS_ITERATIONS
    return mjm


def put(mjm: mujoco.MjModel, nworld: int, slots: Slots, device: str):
    """Put a MuJoCo model on `device` and allocate `nworld` worlds of data.

    The kernels' own overflow prints are switched off (`m.opt.warn_overflow = 0`): fightlab
    counts overflow bits itself and prints `OVERFLOW` once per iteration.

    Returns:
      (m, d): mujoco_warp Model and Data on `device`.
    """
    with wp.ScopedDevice(device):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow = 0
        d = mjw.make_data(mjm, nworld=nworld, nconmax=slots.nconmax, njmax=slots.njmax)
    return m, d


class StepGraph:
    """Run a function as a captured graph where possible (CUDA and warp's CPU graphs).

    The first `__call__` runs `fn` once uncaptured (so every warp module is compiled and loaded,
    timed as `compile_s`), then the caller must restore the state it cares about (the warm-up
    call advanced it); later calls replay the captured graph. With `enabled=False` the function
    simply runs each time.
    """

    def __init__(self, fn, device: str, enabled: bool = True):
        self.fn = fn
        self.device = device
        self.enabled = enabled
        self.graph = None

    def capture(self):
        """Capture `fn` (already run once for compilation) into a graph."""
        if not self.enabled:
            return
        with wp.ScopedDevice(self.device):
            with wp.ScopedCapture(device=self.device) as cap:
                self.fn()
        self.graph = cap.graph

    def __call__(self):
        if self.graph is not None:
            wp.capture_launch(self.graph)
        else:
            self.fn()


@contextlib.contextmanager
def shared_stream(device: str):
    """Make torch issue its work on warp's stream for `device` (CUDA only), so that torch ops and
    warp launches are ordered without host synchronisation. On the CPU this does nothing."""
    if not device.startswith("cuda"):
        yield
        return
    import torch

    stream = wp.get_stream(device)
    ext = torch.cuda.ExternalStream(stream.cuda_stream, device=torch.device(device))
    with torch.cuda.stream(ext):
        yield


def describe_counters(c: np.ndarray) -> dict:
    """Counter array (int, length Counter.N) → dict of named counts."""
    return {k.name.lower(): int(c[k]) for k in Counter if k != Counter.N}
