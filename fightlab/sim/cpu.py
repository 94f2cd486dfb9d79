"""The CPU MuJoCo backend: MuJoCo's C engine for the physics substeps, every core busy.

`CpuPhysics` holds `nworld` simulations of one model in a `mujoco.batch.Batch` (mujoco 4.0.0:
simulations on a C++ thread pool, the GIL released, state rows as live numpy arrays). The env
keeps its MuJoCo Warp `Data` on warp's CPU device as the one place of the state and runs its own
kernels there; only the substeps change hands. Each control step, `step` copies qpos, qvel,
qacc_warmstart, time, ctrl and xfrc_applied (float32) into the batch's rows (float64), runs
`substeps` `Batch.step` calls (reading after each the contact sensors and the solver's iteration
count), and copies back qpos, qvel, qacc_warmstart, time and xmat (of the last substep's start, as
`mujoco_warp.step` leaves it), with MuJoCo Warp's overflow bits set from what the C engine
reports (iteration cap → ITERATIONS; a full arena → NARROWPHASE / NEFC). So the state is the warp
arrays at every control-step boundary (float32, as on the GPU): resets and `load_state_dict` need
no hook.

Contacts: the C engine's contact list lives in its arena, which `Batch` cannot bind; the fall
rule asks only whether a geom that may not touch (the env's `geom_support == 0`) has a contact,
so the backend's model carries one contact sensor (`mjSENS_CONTACT`, data "found") per such geom;
a world whose sensors find one in any substep is `touched`. The sensors add nothing to the physics.
A simulation the C engine resets itself (its bad qpos / qvel / qacc guard) gets NaN in the warp
qpos, so the env counts a NaN reset as on the GPU; the warning goes to stderr, never to a
MUJOCO_LOG.TXT in the current directory.
"""

from __future__ import annotations

import sys

import mujoco
import mujoco.batch
import numpy as np
import warp as wp

from mujoco_warp._src.types import OverflowType

from fightlab.meta import cpu_count, cpu_model  # noqa: F401 (the backend's facts, kept importable here)

#: the original study's CPU layout: 72 worker processes × 6 worlds on a 96-vCPU machine
ORIGINAL_LAYOUT = (72, 6)

#: a contact sensor's data bits (intprm[0]): 1 << mjCONDATA_FOUND (mjtype.h: mjCONDATA_FOUND = 0),
#: the number of contacts matched
_FOUND = 1 << 0

#: the Data fields `CpuPhysics` reads or writes (step and reset)
_DATA_FIELDS = ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "qfrc_applied", "xfrc_applied", "time",
                "xmat", "overflow")

_BAD_STATE = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
              mujoco.mjtWarning.mjWARN_BADQACC)


def with_contact_sensors(spec: mujoco.MjSpec, watch: np.ndarray) -> tuple[mujoco.MjModel, np.ndarray]:
    """(model, sensor_adr): `spec` (edited in place) compiled with one contact sensor (data
    "found", any partner) per geom with `watch[g]` (bool [ngeom]) true, unnamed ones named
    `_fightlab_geom_<id>`; sensor_adr: int32 [nwatch], each sensor's address in sensordata.
    Raises ValueError when `watch` is not ngeom long.
    """
    geoms = list(spec.geoms)
    watch = np.asarray(watch, bool)
    if watch.shape != (len(geoms),):
        raise ValueError(f"watch must have one entry per geom ({len(geoms)}), got shape {watch.shape}")
    names = []
    for g, (geom, w) in enumerate(zip(geoms, watch)):
        if not w:
            continue
        if not geom.name:
            geom.name = f"_fightlab_geom_{g}"
        names.append(geom.name)
        spec.add_sensor(name=f"_fightlab_contact_{g}", type=mujoco.mjtSensor.mjSENS_CONTACT,
                        objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=geom.name,
                        intprm=[_FOUND, 0, 1])
    model = spec.compile()
    adr = np.array([model.sensor_adr[model.sensor(f"_fightlab_contact_{g}").id]
                    for g in np.flatnonzero(watch)], np.int32)
    return model, adr


class CpuPhysics:
    """`nworld` simulations on MuJoCo's C engine (`mujoco.batch.Batch`), stepped for an env whose
    MuJoCo Warp `Data` lives on warp's CPU device.

    Args: spec (the body's fresh MjSpec: sensors are added), like (the env's MjModel: its options
    are copied, its sizes must match), nworld (int > 0), watch (bool [ngeom], the geoms whose
    contacts make a world `touched`), nthread (the pool's threads, the caller's included, > 0).
    Attributes: model (the C engine's MjModel, sensors included), nworld, nthread, batch.
    Raises ValueError: nworld or nthread not positive, or `like` of another size than the spec.
    """

    def __init__(self, spec: mujoco.MjSpec, like: mujoco.MjModel, nworld: int, watch: np.ndarray,
                 nthread: int):
        if isinstance(nworld, bool) or not isinstance(nworld, (int, np.integer)) or nworld <= 0:
            raise ValueError(f"nworld must be a positive integer, got {nworld!r}")
        if isinstance(nthread, bool) or not isinstance(nthread, (int, np.integer)) or nthread <= 0:
            raise ValueError(f"nthread must be a positive integer, got {nthread!r}")
        model, self._sensor_adr = with_contact_sensors(spec, watch)
        for size in ("nq", "nv", "nu", "nbody", "ngeom", "na"):
            if getattr(model, size) != getattr(like, size):
                raise ValueError(f"the spec's model has {size}={getattr(model, size)}, the env's "
                                 f"{getattr(like, size)}: not the same body")
        copy_options(like, model)
        _no_log_file()
        self.model = model
        self.nworld = int(nworld)
        self.nthread = int(nthread)
        self.batch = mujoco.batch.Batch(model, self.nworld, nthread=self.nthread)
        b = self.batch
        self._qpos, self._qvel = b.bind("qpos"), b.bind("qvel")
        self._warm, self._time = b.bind("qacc_warmstart"), b.bind("time")
        self._ctrl, self._xfrc = b.bind("ctrl"), b.bind("xfrc_applied")
        self._sensordata, self._xmat = b.bind("sensordata"), b.bind("xmat")
        self._niter = b.bind("solver_niter")
        self._warning = b.warning  # live (nworld, mjNWARNING, 2): [lastinfo, number]
        self._iterations = int(model.opt.iterations)
        self._touch = np.zeros(self.nworld, bool)
        self._ncon_sum = np.zeros(self.nworld, np.int32)
        self._iter_hit = np.zeros(self.nworld, bool)
        self._ncon = b.bind("ncon")
        self._qpos0 = np.asarray(like.qpos0, np.float32)  # reset_data's qpos (m.qpos0, float32)
        self._views: dict = {}  # id(warp array) -> (array, ptr, numpy view)

    def step(self, d, substeps: int, ncon_out: wp.array | None = None,
             touched_out: wp.array | None = None) -> None:
        """Advance every world of `d` (the env's Data on warp's CPU device) by `substeps` C engine
        steps (the module docstring says what is copied each way; overflow bits OR-ed in).
        Optional int32 [nworld] outputs: ncon_out += contacts summed over the substeps (as the
        env's contact check counts them), touched_out = 1 where a watched geom touched.
        """
        v = self._data_views(d)
        qpos, qvel, warm, time_ = v["qpos"], v["qvel"], v["qacc_warmstart"], v["time"]
        rows = ((self._qpos, qpos), (self._qvel, qvel), (self._warm, warm), (self._time, time_))
        for row, arr in rows:
            row[:] = arr
        self._ctrl[:] = v["ctrl"]
        self._xfrc[:] = v["xfrc_applied"].reshape(self._xfrc.shape)
        warn0 = self._warning[:, :, 1].copy()
        touch, ncon, iter_hit = self._touch, self._ncon_sum, self._iter_hit
        touch[:], ncon[:], iter_hit[:] = False, 0, False
        adr = self._sensor_adr
        for _ in range(substeps):
            self.batch.step()
            if adr.size:
                touch |= (self._sensordata[:, adr] > 0).any(axis=1)
            ncon += self._ncon
            iter_hit |= self._niter.max(axis=1) >= self._iterations
        for row, arr in rows:
            arr[:] = row
        v["xmat"].reshape(self._xmat.shape)[:] = self._xmat
        rose = self._warning[:, :, 1] > warn0
        bits = np.where(iter_hit, int(OverflowType.ITERATIONS), 0)
        bits |= np.where(rose[:, mujoco.mjtWarning.mjWARN_CONTACTFULL], int(OverflowType.NARROWPHASE), 0)
        bits |= np.where(rose[:, mujoco.mjtWarning.mjWARN_CNSTRFULL], int(OverflowType.NEFC), 0)
        if bits.any():
            ov = v["overflow"]
            ov |= bits.astype(ov.dtype)
        bad = rose[:, list(map(int, _BAD_STATE))].any(axis=1)
        if bad.any():  # the C engine reset these itself: show the env a non-finite state
            qpos[bad] = np.nan
        if ncon_out is not None:
            self._view(ncon_out)[:] += ncon
        if touched_out is not None:
            self._view(touched_out)[touch] = 1

    def reset(self, d, reset: wp.array) -> None:
        """The CPU backend's `mujoco_warp.reset_data(m, d, reset)` (bool [nworld], True = reset
        that world), bitwise, without its kernels (which MuJoCo Warp builds and hashes anew on
        every call): the fields this backend uses get qpos = qpos0, qvel, act, ctrl,
        qacc_warmstart, qfrc_applied, xfrc_applied, time, overflow = 0; nothing when no world is
        flagged (host memory). The C engine keeps its own contacts, rows, mass matrix, sensors.
        """
        mask = self._view(reset)
        if not mask.any():
            return
        v = self._data_views(d)
        v["qpos"][mask] = self._qpos0
        for k in ("qvel", "act", "ctrl", "qacc_warmstart", "qfrc_applied", "xfrc_applied", "time",
                  "overflow"):
            v[k][mask] = 0

    def _data_views(self, d) -> dict:
        """Zero-copy numpy views of the Data fields the backend touches (`_DATA_FIELDS`)."""
        return {k: self._view(getattr(d, k)) for k in _DATA_FIELDS}

    def _view(self, a: wp.array) -> np.ndarray:
        """A zero-copy numpy view of a warp array on the CPU device, made once per array (warp's
        `numpy()` builds a new view each call; a replaced array gets a new one)."""
        hit = self._views.get(id(a))
        if hit is None or hit[0] is not a or hit[1] != a.ptr:
            hit = self._views[id(a)] = (a, a.ptr, a.numpy())
        return hit[2]


def _no_log_file() -> None:
    """The C engine's warnings (a NaN state it resets) to stderr only: by default MuJoCo also
    appends them to MUJOCO_LOG.TXT in the current directory, a file fightlab did not ask for
    (a process-wide MuJoCo setting)."""
    log = mujoco.MjLogConfig.get()
    if log.logto_file:
        log.logto_file = False
        log.set()


#: the MjOption fields `copy_options` copies from the env's model onto the C engine's: every
#: field of MjOption in the pinned mujoco 4.0.0 (the env's model may change any of them, e.g.
#: timestep, solver iterations, flags)
OPTION_FIELDS = ("timestep", "impratio", "tolerance", "ls_tolerance", "noslip_tolerance",
                  "ccd_tolerance", "sleep_tolerance", "density", "viscosity", "o_margin",
                  "gravity", "wind", "magnetic", "o_solref", "o_solimp", "o_friction",
                  "integrator", "cone", "jacobian", "solver", "iterations", "ls_iterations",
                  "noslip_iterations", "ccd_iterations", "sdf_iterations", "sdf_initpoints",
                  "disableflags", "enableflags", "disableactuator")

#: MjOption fields deliberately not copied, with why: none (every field of MjOption is physics
#: the two backends must share). A field that a later mujoco adds is in neither tuple, and
#: `copy_options` refuses it until it is listed in one of them.
OPTION_SKIPPED: dict[str, str] = {}


def copy_options(src: mujoco.MjModel, dst: mujoco.MjModel) -> None:
    """Copy the MjOption fields `OPTION_FIELDS` of `src` onto `dst` and check each equal on both.
    RuntimeError for a field listed neither there nor in `OPTION_SKIPPED`, or one that did not
    copy (names it and both values)."""
    public = {n for n in dir(src.opt) if not n.startswith("_") and not callable(getattr(src.opt, n))}
    unlisted = sorted(public - set(OPTION_FIELDS) - set(OPTION_SKIPPED))
    if unlisted:
        raise RuntimeError(f"MjOption field(s) {', '.join(unlisted)} neither copied to the CPU backend's "
                           "model nor listed as skipped (fightlab.sim.cpu.OPTION_FIELDS / OPTION_SKIPPED)")
    for name in OPTION_FIELDS:
        v = getattr(src.opt, name)
        if isinstance(v, np.ndarray):
            getattr(dst.opt, name)[...] = v
        else:
            setattr(dst.opt, name, v)
    for name in OPTION_FIELDS:
        a, b = getattr(src.opt, name), getattr(dst.opt, name)
        if not np.array_equal(np.asarray(a), np.asarray(b)):
            raise RuntimeError(f"MjOption.{name} did not copy to the CPU backend's model: the env's "
                               f"model has {a!r}, the C engine's {b!r}")


def layout(workers: int | None, worlds_per_worker: int | None,
           nworld: int | None = None) -> tuple[int, int, int]:
    """The CPU backend's layout: (workers W, worlds_per_worker K, nworld). workers None: every
    core (`cpu_count()`). Given K, nworld is W × K (a given nworld must equal it); without K, K is
    nworld over the workers, rounded up. More workers than cores: one warning on stderr.
    ConfigError (a ValueError): a value not a positive integer (named), neither nworld nor K,
    or a nworld other than W × K.
    """
    from fightlab.config import ConfigError

    for name, v in (("workers", workers), ("worlds_per_worker", worlds_per_worker), ("nworld", nworld)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0):
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    cores = cpu_count()
    w = cores if workers is None else int(workers)
    if worlds_per_worker is None and nworld is None:
        raise ConfigError("the CPU layout needs nworld or worlds_per_worker")
    if worlds_per_worker is not None and nworld is not None and int(nworld) != w * int(worlds_per_worker):
        raise ConfigError(f"nworld {nworld} is not workers × worlds_per_worker "
                          f"({w} × {worlds_per_worker} = {w * int(worlds_per_worker)})")
    if w > cores:
        print(f"fightlab: warning: {w} workers on {cores} cores: threads will share cores",
              file=sys.stderr, flush=True)
    if worlds_per_worker is None:
        return w, -(-int(nworld) // w), int(nworld)
    return w, int(worlds_per_worker), w * int(worlds_per_worker)


def layout_record(workers: int, nworld: int) -> dict:
    """The CPU layout as a result row records it: workers W (the pool's threads), nworld (the
    real world count) and worlds_per_worker_max (ceil(nworld / W), the most worlds one worker
    has; every worker has that many only when W divides nworld)."""
    w, n = int(workers), int(nworld)
    return dict(workers=w, nworld=n, worlds_per_worker_max=-(-n // w))


def backend_record(env) -> dict:
    """What a result row records of an env's physics backend: backend ("gpu" / "cpu"), physics
    ("MuJoCo Warp on <device>" or "MuJoCo's C engine"), cores (this process's), and for "cpu"
    threads, layout (`layout_record`) and cpu (the CPU's model name; the row's `gpu` column then
    says `fightlab.meta.cpu_label()`)."""
    backend = getattr(env, "backend", "gpu")
    physics = ("MuJoCo's C engine" if backend == "cpu"
               else f"MuJoCo Warp on {getattr(env, 'device', '?')}")
    rec = dict(backend=backend, physics=physics, cores=cpu_count())
    threads = getattr(env, "threads", None)
    if backend == "cpu" and threads:
        rec.update(threads=int(threads), layout=layout_record(threads, env.nworld), cpu=cpu_model())
    return rec
