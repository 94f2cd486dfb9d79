"""Humanoid bodies built with ``mujoco.MjSpec``: one registry record per body.

    >>> from fightlab.bodies import BODIES, build, body_info
    >>> model = build("muscular-fast")      # mujoco.MjModel, nv == 89, one kinematic tree
    >>> BODIES["simple"].slots.njmax        # measured constraint rows per world (+ margin)
    >>> body_info("simple").bounce_joints   # joint -> coefficient of the vertical bounce

Both bodies share one skeleton (``skeleton.py``); ``muscular-fast`` adds clavicles, head joints,
fingers and the 63 ellipsoid muscles of ``muscles.py``; ``simple`` uses capsules (43 DOF).
``BODY_NAMES`` is ``tuple(BODIES)``, the names every command accepts.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Callable

import mujoco
import numpy as np

from fightlab.bodies import skeleton


@dataclass(frozen=True)
class Slots:
    """MuJoCo Warp slot sizes per world for one body.

    Attributes:
      nconmax: contacts per world (MuJoCo Warp pools `nworld × nconmax` over all worlds);
        None: MuJoCo Warp's default (`make_data`).
      njmax: constraint rows per world (each world is capped at njmax); None: the default.
      source: where the numbers come from (the measurement and its margin).
    """

    nconmax: int | None
    njmax: int | None
    source: str


GUARD_JOINTS = tuple(f"{j}_{s}" for s in ("l", "r") for j in ("shoulder_x", "shoulder_y", "shoulder_z", "elbow"))


@dataclass(frozen=True)
class Body:
    """One body of the registry: its builder, the names the env needs, its slot sizes.

    Attributes:
      name: the registry key (one of :data:`BODY_NAMES`).
      make_spec: builder, ``() -> mujoco.MjSpec`` (a fresh spec, keyframe included).
      slots: measured MuJoCo Warp slot sizes per world, with their source (:class:`Slots`).
      keyframe: the stance keyframe; torso_body, pelvis_body, head_body: body names;
        support_bodies: the bodies allowed to touch the floor (feet, toes); floor_geom: the floor.
      guard_joints: shoulder/elbow joints the env may sway a little around the guard.
      bounce_joints (computed on first use): joint name -> coefficient c_j [rad per unit bounce
        signal s]; the env offsets each joint target by ``c_j * s`` (``_bounce_coefficients``).
      bounce_gain (computed on first use): metres of pelvis drop per unit s (see ``bounce_gain``).
    """

    name: str
    make_spec: Callable[[], mujoco.MjSpec] = field(repr=False)
    slots: Slots
    keyframe: str = skeleton.KEYFRAME
    torso_body: str = "torso"
    pelvis_body: str = "pelvis"
    head_body: str = "head"
    support_bodies: tuple[str, ...] = skeleton.SUPPORT_BODIES
    floor_geom: str = skeleton.FLOOR_GEOM
    guard_joints: tuple[str, ...] = GUARD_JOINTS

    def build(self) -> mujoco.MjModel:
        """A new compiled ``mujoco.MjModel`` of this body (a copy: callers may edit it)."""
        return copy.deepcopy(_cached_model(self.name))

    @functools.cached_property
    def bounce_joints(self) -> dict[str, float]:
        return _bounce_coefficients(_cached_model(self.name), self)

    @functools.cached_property
    def bounce_gain(self) -> float:
        return _bounce_gain(_cached_model(self.name), self)


def _spec(muscular: bool) -> mujoco.MjSpec:
    return skeleton.add_stance_keyframe(skeleton.build_humanoid(muscular=muscular))


# Slot sizes: the maximum over random falls (fightlab.measure.slots.fallen_contacts) plus a
# 1.5× margin, rounded up to a multiple of 16; data/results/slots.csv holds the measurement rows.
BODIES: dict[str, Body] = {
    "muscular-fast": Body("muscular-fast", functools.partial(_spec, True), Slots(nconmax=48, njmax=160, source=(
        "H200 2026-11-30, 4096 limp bodies pushed over, 3 s: max 25 contacts, 106 rows per world"))),
    "simple": Body("simple", functools.partial(_spec, False), Slots(nconmax=48, njmax=144, source=(
        "H200 2026-11-30, 4096 limp bodies pushed over, 3 s: max 22 contacts, 92 rows per world"))),
}

#: the registry's names, in its order: the bodies every command and config accepts
BODY_NAMES: tuple[str, ...] = tuple(BODIES)


def build_spec(name: str) -> mujoco.MjSpec:
    """A fresh ``mujoco.MjSpec`` of the body ``name`` (keyframe ``stance`` included)."""
    return body_info(name).make_spec()


@functools.lru_cache(maxsize=None)
def _cached_model(name: str) -> mujoco.MjModel:
    return build_spec(name).compile()


def build(name: str) -> mujoco.MjModel:
    """Compile the body ``name`` into a new ``mujoco.MjModel`` (a copy: callers may edit it).

    Raises ValueError naming the bad value and listing the valid bodies.
    """
    return body_info(name).build()


def max_nu() -> int:
    """The most actions (actuators, ``MjModel.nu``) of any registered body: muscular-fast's 83.
    Compiles each body once per process."""
    return max(_cached_model(n).nu for n in BODIES)


def body_info(name: str) -> Body:
    """The registry record of body ``name`` (``BODIES[name]``: builder, names, slots, bounce
    coefficients). Raises ValueError naming the bad value and listing the valid bodies."""
    if not isinstance(name, str) or name not in BODIES:
        raise ValueError(f"unknown body {name!r}; valid bodies: {', '.join(sorted(BODIES))}")
    return BODIES[name]


def bounce_gain(name: str) -> float:
    """Metres of pelvis drop per unit bounce signal s at s = 0 (central finite difference of the
    pelvis height above the lowest sole point, pelvis orientation fixed, joints offset by
    ``coef_j * s``). The env picks s_max = 0.03 / bounce_gain(name) for a ±3 cm bounce. Cached
    on the record; raises ValueError for an unknown name."""
    return body_info(name).bounce_gain


def _support_rel_pelvis(m: mujoco.MjModel, d: mujoco.MjData, pelvis: str) -> np.ndarray:
    """Per foot (l, r): foot position relative to the pelvis (3) and foot orientation error vs
    identity-relative-to-pelvis (3), stacked [12]."""
    mujoco.mj_kinematics(m, d)
    pid = m.body(pelvis).id
    out = []
    for s in ("l", "r"):
        fid = m.body(f"foot_{s}").id
        out.append(d.xpos[fid] - d.xpos[pid])
        qrel = np.zeros(4)
        qinv = np.zeros(4)
        mujoco.mju_negQuat(qinv, d.xquat[pid])
        mujoco.mju_mulQuat(qrel, qinv, d.xquat[fid])
        v = np.zeros(3)
        mujoco.mju_quat2Vel(v, qrel, 1.0)
        out.append(v)
    return np.concatenate(out)


def _bounce_coefficients(m: mujoco.MjModel, rec: Body) -> dict[str, float]:
    """Leg joint rates (finite-difference Jacobians, exact 6x6 solve per leg) that move each foot,
    relative to an upright pelvis, straight up by the same height with unchanged orientation, i.e.
    lower the pelvis straight down with flat feet. Scaled so the mean knee coefficient is 1.

    hip_y, knee and ankle_y carry the bounce; hip_x, hip_z and ankle_x get small corrections
    because the stance legs are abducted and the rear foot is turned out (their axes are not
    parallel), so the three sagittal joints alone would slide and tilt the rear foot."""
    d = mujoco.MjData(m)
    key = m.key(rec.keyframe).id
    eps = 1e-5
    rates: dict[str, float] = {}
    knee_rates = []
    for s in ("l", "r"):
        names = tuple(f"{j}_{s}" for j in ("hip_x", "hip_y", "hip_z", "knee", "ankle_y", "ankle_x"))
        mujoco.mj_resetDataKeyframe(m, d, key)
        f0 = _support_rel_pelvis(m, d, rec.pelvis_body)
        idx = np.r_[0:6] + (0 if s == "l" else 6)      # this foot: position (3), orientation (3)
        cols = []
        for n in names:
            a = m.jnt_qposadr[m.joint(n).id]
            d.qpos[a] += eps
            cols.append((_support_rel_pelvis(m, d, rec.pelvis_body) - f0)[idx] / eps)
            d.qpos[a] -= eps
        target = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])   # foot up 1 m per unit (= pelvis down)
        x = np.linalg.solve(np.stack(cols, axis=1), target)
        rates.update({n: float(v) for n, v in zip(names, x)})
        knee_rates.append(x[3])
    scale = 1.0 / float(np.mean(knee_rates))
    return {n: v * scale for n, v in rates.items()}


def _bounce_gain(m: mujoco.MjModel, rec: Body) -> float:
    """See ``bounce_gain``."""
    d = mujoco.MjData(m)
    key = m.key(rec.keyframe).id
    h = []
    ds = 1e-3
    for sgn in (+1.0, -1.0):
        mujoco.mj_resetDataKeyframe(m, d, key)
        for j, c in rec.bounce_joints.items():
            d.qpos[m.jnt_qposadr[m.joint(j).id]] += sgn * ds * c
        mujoco.mj_kinematics(m, d)
        h.append(float(d.xpos[m.body(rec.pelvis_body).id][2] - skeleton.lowest_support_z(m, d)))
    return -(h[0] - h[1]) / (2 * ds)


__all__ = ["BODIES", "Body", "GUARD_JOINTS", "Slots", "body_info", "bounce_gain", "build",
           "build_spec"]
