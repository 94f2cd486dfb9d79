"""The contact budget of a body after a fall: how many contacts and constraint rows do pushed-over
bodies need? ``fallen_contacts`` pushes many copies of a body over with MuJoCo Warp and records the
most contacts and constraint rows any world needed while falling and lying; ``fallen_contacts_cpu``
does the same with plain MuJoCo (C) on the CPU. Both recommend slot sizes (``nconmax``, ``njmax``)
with the margin rule of :func:`recommend_slots`; :func:`slots_row` stores a measurement as a
``slots`` result row. The chosen sizes live in the body registry (``physics.SLOTS``).
"""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np

from fightlab import results
from fightlab.paths import RUNS

# Slot sizing rule: 50 % above the largest count seen in any world, rounded up to a multiple of 16.
# (The original study overflowed 320 constraint rows although one body lying down needed 260: piles
# and bounces exceed the resting count, hence a margin over the measured maximum, not the mean.)
SLOT_MARGIN = 1.5
SLOT_MULTIPLE = 16


def recommend_slots(max_ncon: int, max_nefc: int) -> tuple[int, int]:
    """(nconmax, njmax) = ceil(1.5 * max) rounded up to a multiple of 16, per world."""

    def rule(x: float) -> int:
        n = math.ceil(SLOT_MARGIN * x)
        return max(SLOT_MULTIPLE, SLOT_MULTIPLE * math.ceil(n / SLOT_MULTIPLE))

    return rule(max_ncon), rule(max_nefc)


def _push_states(m: mujoco.MjModel, n: int, rng: np.random.Generator,
                 speed=(1.5, 3.0), spin=(1.5, 3.0), joint_noise=1.0):
    """Initial (qpos, qvel, ctrl) of n worlds: the stance keyframe plus a push (a horizontal root
    velocity ``speed`` [m/s] in a random direction, a ``spin`` [rad/s] tipping it the same way,
    N(0, joint_noise) [rad/s] on every hinge)."""
    key = m.key("stance")
    qpos = np.tile(key.qpos, (n, 1))
    ctrl = np.tile(key.ctrl, (n, 1))
    qvel = np.zeros((n, m.nv))
    ang = rng.uniform(0, 2 * np.pi, n)
    direction = np.stack([np.cos(ang), np.sin(ang), np.zeros(n)], axis=1)
    qvel[:, :3] = direction * rng.uniform(*speed, n)[:, None]
    # free-joint angular velocity is in the body frame; the keyframe pelvis is not rotated
    tip_axis = np.cross(np.array([0.0, 0.0, 1.0]), direction)
    qvel[:, 3:6] = tip_axis * rng.uniform(*spin, n)[:, None]
    qvel[:, 6:] = rng.normal(0.0, joint_noise, (n, m.nv - 6))
    return qpos, qvel, ctrl


def _fall_model(name: str, limp: bool) -> mujoco.MjModel:
    """The body's model; ``limp`` zeroes the servo gains (kp, kv) so the body falls relaxed and
    lies flatter (more segments on the floor: the worst case for slots), joint damping kept."""
    from fightlab.bodies import build

    m = build(name)
    if limp:
        m.actuator_gainprm[:, 0] = 0.0
        m.actuator_biasprm[:, 1:3] = 0.0
    return m


def _summary(max_ncon: np.ndarray, max_nefc: np.ndarray, **extra) -> dict:
    nconmax, njmax = recommend_slots(int(max_ncon.max()), int(max_nefc.max()))
    out = {}
    for name, x in (("ncon", max_ncon), ("nefc", max_nefc)):
        out.update({f"{name}_max": int(x.max()), f"{name}_p99": float(np.percentile(x, 99)),
                    f"{name}_mean": float(x.mean())})
    return {**out, "nconmax": nconmax, "njmax": njmax, **extra}


def fallen_contacts(name: str, nworld: int = 64, seconds: float = 3.0, seed: int = 0,
                    device: str | None = None, nconmax: int = 256, njmax: int = 1024,
                    sample_every: int = 1, limp: bool = False, progress: bool = False) -> dict:
    """Contacts and constraint rows of ``nworld`` bodies pushed over (``_push_states``) from the
    ``stance`` keyframe, ctrl held, simulated ``seconds`` with MuJoCo Warp on ``device`` (None:
    warp's default). Per world the maximum over time (sampled every ``sample_every`` steps) of its
    contacts (from ``d.contact.worldid[:d.nacon]``) and of ``d.nefc``; ``nconmax``, ``njmax``:
    generous slots for the measurement (a capacity overflow raises RuntimeError); ``limp``: see
    ``_fall_model``; ``progress``: a tqdm bar over the steps.

    Returns a dict: ncon_max, ncon_p99, ncon_mean, nefc_max, nefc_p99, nefc_mean (over worlds of
    the per-world maxima), nconmax, njmax (``recommend_slots``), nworld, seconds, steps, device.
    """
    import mujoco_warp as mjw
    from tqdm import tqdm

    from fightlab.devices import init_warp

    wp = init_warp()  # quiet: no banner, no per-module load lines
    mjm = _fall_model(name, limp)
    rng = np.random.default_rng(seed)
    qpos, qvel, ctrl = _push_states(mjm, nworld, rng)
    nsteps = int(round(seconds / mjm.opt.timestep))
    capacity = int(mjw.OverflowType.NEFC | mjw.OverflowType.NJMAX_NNZ | mjw.OverflowType.BROADPHASE
                   | mjw.OverflowType.NARROWPHASE | mjw.OverflowType.CCD)

    with wp.ScopedDevice(device):
        m = mjw.put_model(mjm)
        # iteration-limit flags are not capacity problems; keep the measurement quiet about them
        m.opt.warn_overflow = capacity
        d = mjw.make_data(mjm, nworld=nworld, nconmax=nconmax, njmax=njmax)
        mjw.reset_data(m, d)
        d.qpos.assign(qpos.astype(np.float32))
        d.qvel.assign(qvel.astype(np.float32))
        d.ctrl.assign(ctrl.astype(np.float32))

        max_ncon, max_nefc = np.zeros(nworld, dtype=int), np.zeros(nworld, dtype=int)
        for step in tqdm(range(nsteps), desc=f"slots {name} ×{nworld}", unit="step", disable=not progress):
            mjw.step(m, d)
            if step % sample_every == 0 or step == nsteps - 1:
                nacon = int(d.nacon.numpy()[0])
                wid = d.contact.worldid.numpy()[:nacon]
                max_ncon = np.maximum(max_ncon, np.bincount(wid, minlength=nworld)[:nworld])
                max_nefc = np.maximum(max_nefc, d.nefc.numpy())
        overflow = d.overflow.numpy() & capacity
        if overflow.any():
            bad = np.flatnonzero(overflow)
            raise RuntimeError(f"slot overflow in {bad.size} of {nworld} worlds (flags "
                               f"{sorted(set(overflow[bad].tolist()))}, nconmax={nconmax}, njmax={njmax}); "
                               "rerun with larger nconmax/njmax")
    return _summary(max_ncon, max_nefc, nworld=nworld, seconds=seconds, steps=nsteps,
                    device=str(wp.get_device(device)), limp=limp)


def fallen_contacts_cpu(name: str, n: int = 16, seconds: float = 3.0, seed: int = 0,
                        limp: bool = False) -> dict:
    """``fallen_contacts`` with plain MuJoCo (C, one thread; ``d.ncon``, ``d.nefc`` after every
    step); the same keys (nworld = n)."""
    m = _fall_model(name, limp)
    rng = np.random.default_rng(seed)
    qpos, qvel, ctrl = _push_states(m, n, rng)
    nsteps = int(round(seconds / m.opt.timestep))
    d = mujoco.MjData(m)
    max_ncon, max_nefc = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    for w in range(n):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        for _ in range(nsteps):
            mujoco.mj_step(m, d)
            max_ncon[w] = max(max_ncon[w], d.ncon)
            max_nefc[w] = max(max_nefc[w], d.nefc)
    return _summary(max_ncon, max_nefc, nworld=n, seconds=seconds, steps=nsteps, device="mujoco-cpu",
                    limp=limp)


def slots_row(body: str, res: dict, device: str, limp: bool, publish: bool = False,
              local_root: Path = RUNS / "slots") -> dict:
    """Print a fallen-contacts measurement (:func:`fallen_contacts`) and store it
    as a `slots` row (runs/slots always, data/results with `publish`). Returns the row."""
    row = results.run_metadata(body=body, nworld=int(res["nworld"]), seed=int(res.get("seed", 0)),
                               params=dict(limp=limp, steps=res.get("steps")), device=device)
    row.update(seconds=float(res["seconds"]), ncon_max=int(res["ncon_max"]),
               ncon_p99=float(res["ncon_p99"]), nefc_max=int(res["nefc_max"]),
               nefc_p99=float(res["nefc_p99"]), nconmax=int(res["nconmax"]), njmax=int(res["njmax"]))
    results.publish_row("slots", row, publish, local_root, device)
    print(f"SLOTS {body} nworld={row['nworld']} limp={limp}: contacts max {row['ncon_max']} "
          f"(p99 {row['ncon_p99']:.0f}), rows max {row['nefc_max']} (p99 {row['nefc_p99']:.0f}) "
          f"-> nconmax {row['nconmax']}, njmax {row['njmax']}" + (" [published]" if publish else ""),
          flush=True)
    return row


def command(bodies=None, nworld=4096, seconds: float = 3.0, device: str | None = None, limp: bool = False,
            publish: bool = False, progress: bool = True) -> list[dict]:
    """`python -m fightlab slots`, its flags as given (None: not given): per body (default all)
    the fallen bodies' contacts and rows (`fallen_contacts`), a `slots` row each (`slots_row`,
    printed, with `publish` also in data/). Returns the rows.

    Raises:
      ConfigError: one line: a bad body, nworld, device or seconds (> 0 and at most 3600), before any
        work (a publish the rule refuses: the command line's `cli.publish_plans`)."""
    from fightlab import devices
    from fightlab.bodies import BODY_NAMES
    from fightlab.config import ConfigError, validate_body, validate_nworld
    nworld = validate_nworld(nworld)
    device = devices.pick_device(device)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not (math.isfinite(seconds) and 0.01 <= seconds <= 3600):
        raise ConfigError(f"--seconds must be > 0 and at most 3600 (simulated seconds; at least 0.01), got {seconds!r}")
    rows = []
    for body in [validate_body(b) for b in (bodies or BODY_NAMES)]:
        res = fallen_contacts(body, nworld=nworld, seconds=seconds, device=device, limp=limp, progress=progress)
        rows.append(slots_row(body, res, device=device, limp=limp, publish=publish))
    return rows

