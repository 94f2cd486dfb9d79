"""MuJoCo Warp model and data on a warp device: slot sizing, solver settings, overflow read-out,
graph capture and the torch/warp shared stream. Slot sizes are measured
(`fightlab.measure.slots`), held by each body's registry record (`fightlab.bodies.Slots`) and
indexed here by body name (`SLOTS`).
"""

from __future__ import annotations

import contextlib
import enum
import gc
import operator
import sys

import mujoco
import numpy as np
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src.types import OverflowType

from fightlab.bodies import BODIES, Slots
from fightlab.config import SOLVER_LOOPS, ConfigError
from fightlab.devices import init_warp

init_warp()  # quiet: no banner, no per-module load lines (config's one setting)
wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)  # no per-module load lines


# tests may override an entry
SLOTS: dict[str, Slots] = {name: body.slots for name, body in BODIES.items()}

# The Newton solver runs with the env config's caps (`EnvConfig.solver_*`); hitting one sets the
# ITERATIONS / LS_ITERATIONS bits of d.overflow: counted and reported, not failures. Euler with
# eulerdamp on factors M twice per step (qacc_smooth in forward, M + h·D in the update); a physics
# without qacc_smooth (`EnvConfig.solver_qacc_smooth`) skips the first.

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


def prepare_mjmodel(mjm: mujoco.MjModel, env) -> mujoco.MjModel:
    """`mjm` with the physics options of the `EnvConfig` `env` set in place: the timestep (s), the
    Newton solver's iterations, line-search iterations and tolerances, and MuJoCo's eulerdamp
    flag (`mjDSBL_EULERDAMP` set when `env.solver_eulerdamp` is False)."""
    mjm.opt.timestep = env.timestep
    mjm.opt.iterations = env.solver_iterations
    mjm.opt.ls_iterations = env.solver_ls_iterations
    mjm.opt.tolerance = env.solver_tolerance
    mjm.opt.ls_tolerance = env.solver_ls_tolerance
    bit = int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    flags = int(mjm.opt.disableflags)
    mjm.opt.disableflags = flags & ~bit if env.solver_eulerdamp else flags | bit
    return mjm


def engine_solver(mjm: mujoco.MjModel, m=None) -> dict:
    """The Newton solver's settings as the engine runs them, named as `EnvConfig`'s fields
    (solver_qacc_smooth always True on the C engine), and `solver_loop` ("conditional" on the C
    engine, which stops at convergence too). `m`: the MuJoCo Warp model put from `mjm`, or None
    for the C engine (which runs `mjm.opt` as set); `put_model` raises `opt.tolerance` to at
    least 1e-6 for float32 (mujoco_warp `io.put_model`), so 1e-8 runs as 1e-6.
    """
    def first(x):  # MuJoCo Warp keeps a tolerance per world (an array), the C engine one float
        return float(x.numpy().reshape(-1)[0]) if hasattr(x, "numpy") else float(x)

    o = mjm.opt if m is None else m.opt
    return dict(solver_iterations=int(o.iterations), solver_ls_iterations=int(o.ls_iterations),
                solver_tolerance=first(o.tolerance), solver_ls_tolerance=first(o.ls_tolerance),
                solver_qacc_smooth=True if m is None else bool(o.run_qacc_smooth),
                solver_eulerdamp=not (int(o.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)),
                solver_loop="conditional" if m is None or o.graph_conditional else "unrolled")


#: `SOLVER_LOOPS` (`TrainConfig.solver_loop`): "conditional" is MuJoCo Warp's default
#: (`opt.graph_conditional`: a `wp.capture_while` loop, a conditional graph node, that stops when
#: every world has converged); "unrolled" launches exactly `opt.iterations` iterations in a row (a
#: world that has converged skips them, so the physics is the same); "auto" unrolls up to this
#: many iterations: at 1024 worlds some world needs every iteration of a short loop, so the
#: conditional node only adds its own launches, while a long loop (the reference's 10) mostly
#: stops early, which unrolled launches would not
UNROLL_MAX_ITERATIONS = 4


def resolve_solver_loop(loop: str, iterations: int) -> str:
    """"conditional" or "unrolled" for a `SOLVER_LOOPS` choice and the Newton iteration cap
    ("single_launch" as "auto": MuJoCo Warp's loop where the single-launch solve is not taken).

    Raises:
      ConfigError: `loop` not one of `SOLVER_LOOPS` (one line naming it and the choices).
    """
    if loop not in SOLVER_LOOPS:
        raise ConfigError(f"solver_loop must be one of {', '.join(SOLVER_LOOPS)}, got {loop!r}")
    if loop in ("auto", "single_launch"):
        return "unrolled" if int(iterations) <= UNROLL_MAX_ITERATIONS else "conditional"
    return loop


def training_solver_loop(loop: str, device: str, backend: str = "gpu") -> str:
    """The loop a training's physics asks for: ``"auto"`` (`TrainConfig.solver_loop`'s default)
    is ``"single_launch"`` on a CUDA device of the MuJoCo Warp backend (fightlab's one-launch
    Newton solve, `fightlab.kernels.newton`: faster in training there, bench/NOTES.md); on warp's
    CPU device and the C engine, and for any other choice, ``loop`` itself. Evaluation and the
    reference check do not call this: they keep MuJoCo Warp's solve."""
    cuda = backend == "gpu" and str(device).startswith("cuda")
    return "single_launch" if loop == "auto" and cuda else loop


def put(mjm: mujoco.MjModel, nworld: int, slots: Slots, device: str, qacc_smooth: bool = True,
        solver_loop: str = "auto"):
    """(m, d): `mjm` put on `device` as a mujoco_warp Model, and Data of `nworld` worlds. The
    kernels' own overflow prints are off (fightlab counts the bits itself); the model's lights
    are left out of m (no physics reads them; MuJoCo's renderer uses `mjm`'s); `qacc_smooth` is
    `opt.run_qacc_smooth`; `solver_loop` sets `opt.graph_conditional` (`resolve_solver_loop`,
    whose ConfigError it raises).
    """
    loop = resolve_solver_loop(solver_loop, mjm.opt.iterations)
    with wp.ScopedDevice(device):
        m = mjw.put_model(mjm)
        m.nlight = 0  # lights only place a rendering's lamps: MuJoCo Warp's camlight would launch a kernel a step
        m.opt.warn_overflow = 0
        m.opt.run_qacc_smooth = bool(qacc_smooth)
        m.opt.graph_conditional = loop == "conditional"
        d = mjw.make_data(mjm, nworld=nworld, nconmax=slots.nconmax, njmax=slots.njmax)
    return m, d


#: CUDA driver and toolkit that MuJoCo Warp's captured solver loop needs (conditional graph nodes,
#: `wp.capture_while`); mjlab's `_GRAPH_CAPTURE_MIN_DRIVER`
MIN_GRAPH_CUDA = (12, 4)


@contextlib.contextmanager
def suspend_gc():
    """The garbage collector off for a capture (after mjlab's `sim._suspend_gc`): a collection
    during capture would record the destructors of stale graphs and arrays into the new graph."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def graph_unsupported(device: str) -> str | None:
    """Why a graph of MuJoCo Warp's step cannot be captured on `device` (a sentence), or None
    when it can: CUDA needs warp's memory pool on the device and conditional graph nodes (CUDA
    driver and toolkit >= 12.4); warp's CPU device captures its own graphs."""
    dev = wp.get_device(device)
    if dev.is_cpu:
        return None
    if not wp.is_mempool_enabled(dev):
        return f"warp's memory pool is off on {dev} (wp.set_mempool_enabled)"
    if not wp.is_conditional_graph_supported():
        return (f"conditional graph nodes need CUDA >= {MIN_GRAPH_CUDA[0]}.{MIN_GRAPH_CUDA[1]} "
                f"(driver {_version(wp.get_cuda_driver_version)}, warp's toolkit "
                f"{_version(wp.get_cuda_toolkit_version)})")
    return None


def _version(get) -> str:
    """A CUDA version as "12.4" from warp's getter (an int 12040 or a tuple), "?" if unknown."""
    try:
        v = get()
    except Exception:  # noqa: BLE001 — only for a message
        return "?"
    if isinstance(v, int):
        return f"{v // 1000}.{(v % 1000) // 10}"
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def graph_warning(name: str, reason: str) -> None:
    """The one loud line of a graph that runs eager instead (stderr)."""
    print(f"fightlab: warning: the {name} graph runs eager: {reason}", file=sys.stderr, flush=True)


class FallbackGraph:
    """What warp's `StepGraph` and torch's `fightlab.rl.graphs.TorchGraph` share: `fn`, a `name`
    for warnings, and the fallback to running `fn` eagerly: for good, with one warning, counted.
    Attributes: fn, name, enabled, graph (None until captured), fallbacks (int), fallback_reason.
    """

    def __init__(self, fn, name: str, enabled: bool):
        self.fn = fn
        self.name = name
        self.enabled = enabled
        self.graph = None
        self.fallbacks = 0
        self.fallback_reason: str | None = None

    def _fallback(self, reason: str) -> None:
        self.graph = None
        self.enabled = False  # eager from now on: one warning, one count
        self.fallbacks += 1
        self.fallback_reason = reason
        graph_warning(self.name, reason)

    def _capture_failed(self, e: BaseException) -> None:
        """Fall back after a capture raised, naming the error's first line."""
        first = (str(e).strip().splitlines() or [""])[0][:200]
        self._fallback(f"capture failed ({type(e).__name__}: {first})")


class StepGraph(FallbackGraph):
    """`fn` (launches, no host reads; run once before `capture()`, so every module is loaded) as
    a captured warp graph where possible (CUDA and warp's CPU graphs), replayed by `__call__`.

    Capture discipline after mjlab (`src/mjlab/sim/sim.py`): the garbage collector off while
    capturing; `watch` (optional: returns the objects the graph reads, e.g. `Data`'s arrays)
    checked by identity before each replay, a replaced one re-captured with a warning; an
    unsupported device (`graph_unsupported`) or a failed capture falls back (`FallbackGraph`).
    Attributes besides FallbackGraph's: device, captures, recaptures.
    """

    def __init__(self, fn, device: str, enabled: bool = True, name: str = "env step", watch=None):
        super().__init__(fn, name, enabled)
        self.device = device
        self.watch = watch
        self.captures = 0
        self.recaptures = 0
        self._watched: tuple = ()

    def capture(self) -> bool:
        """Capture `fn` (already run once for compilation) into a graph. Returns whether a graph
        was captured (False: disabled, or fallen back to eager with a warning)."""
        if not self.enabled:
            return False
        try:
            reason = graph_unsupported(self.device)
        except Exception as e:  # noqa: BLE001 — a support check that fails means: run eager
            reason = f"the graph support check failed ({type(e).__name__}: {e})"
        if reason:
            self._fallback(reason)
            return False
        self.graph = None
        try:
            with suspend_gc(), wp.ScopedDevice(self.device):
                with wp.ScopedCapture(device=self.device) as cap:
                    self.fn()
        except Exception as e:  # noqa: BLE001 — any capture error means: run eager
            self._capture_failed(e)
            return False
        self.graph = cap.graph
        self._watched = tuple(self.watch()) if self.watch else ()
        self.captures += 1
        return True

    def _stale(self) -> bool:
        if not self.watch:
            return False
        now = tuple(self.watch())
        return len(now) != len(self._watched) or not all(map(operator.is_, now, self._watched))

    def __call__(self):
        if self.graph is not None and self._stale():
            print(f"fightlab: warning: arrays of the {self.name} graph were replaced; re-capturing",
                  file=sys.stderr, flush=True)
            self.recaptures += 1
            self.capture()
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
