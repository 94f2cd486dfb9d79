"""Humanoid bodies built with ``mujoco.MjSpec``: a registry, builders and per-body facts.

    >>> from fightlab.bodies import build, body_info
    >>> model = build("muscular-fast")      # mujoco.MjModel, nv == 89, one kinematic tree
    >>> body_info("simple").bounce_joints   # joint -> coefficient of the vertical bounce

Both bodies share one skeleton (``skeleton.py``); ``muscular-fast`` adds clavicles, head joints,
fingers and the 63 ellipsoid muscles of ``muscles.py``; ``simple`` uses capsules (43 DOF).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import mujoco
import numpy as np

from fightlab.bodies import skeleton


def _muscular_fast() -> mujoco.MjSpec:
    return skeleton.add_stance_keyframe(skeleton.build_humanoid(muscular=True))


def _simple() -> mujoco.MjSpec:
    return skeleton.add_stance_keyframe(skeleton.build_humanoid(muscular=False))


BODIES: dict[str, Callable[[], mujoco.MjSpec]] = {
    "muscular-fast": _muscular_fast,
    "simple": _simple,
}


def _check_name(name) -> str:
    if not isinstance(name, str) or name not in BODIES:
        raise ValueError(f"unknown body {name!r}; valid bodies: {', '.join(sorted(BODIES))}")
    return name


def build_spec(name: str) -> mujoco.MjSpec:
    """A fresh ``mujoco.MjSpec`` of the body ``name`` (keyframe ``stance`` included)."""
    return BODIES[_check_name(name)]()


@functools.lru_cache(maxsize=None)
def _cached_model(name: str) -> mujoco.MjModel:
    return build_spec(name).compile()


def build(name: str) -> mujoco.MjModel:
    """Compile the body ``name`` into a new ``mujoco.MjModel`` (a copy: callers may edit it).

    Raises ValueError naming the bad value and listing the valid bodies.
    """
    return _copy_model(_cached_model(_check_name(name)))


def _copy_model(m: mujoco.MjModel) -> mujoco.MjModel:
    import copy

    return copy.deepcopy(m)


@dataclass(frozen=True)
class BodyInfo:
    """Names and coefficients the env needs about a body.

    bounce_joints: joint name -> coefficient c_j [rad per unit bounce signal s]; the env offsets
        each joint target by ``c_j * s``. The coefficients lower the pelvis straight down with the
        torso upright and the feet flat (see ``bounce_gain`` for metres per unit s). Knees, hip_y
        and ankle_y carry the motion (mean knee coefficient 1); hip_x, hip_z and ankle_x of both
        legs get small corrections that keep the abducted / turned-out feet in place.
    guard_joints: shoulder/elbow joints the env may sway a little around the guard.
    """

    name: str
    torso_body: str = "torso"
    pelvis_body: str = "pelvis"
    head_body: str = "head"
    support_bodies: tuple[str, ...] = skeleton.SUPPORT_BODIES
    floor_geom: str = "floor"
    keyframe: str = "stance"
    bounce_joints: dict[str, float] = field(default_factory=dict)
    guard_joints: tuple[str, ...] = ()


GUARD_JOINTS = tuple(f"{j}_{s}" for s in ("l", "r") for j in ("shoulder_x", "shoulder_y", "shoulder_z", "elbow"))


@functools.lru_cache(maxsize=None)
def body_info(name: str) -> BodyInfo:
    """Facts about body ``name`` (cached). Raises ValueError for an unknown name."""
    m = _cached_model(_check_name(name))
    return BodyInfo(name=name, bounce_joints=_bounce_coefficients(m), guard_joints=GUARD_JOINTS)


def _support_rel_pelvis(m: mujoco.MjModel, d: mujoco.MjData) -> np.ndarray:
    """Per foot (l, r): foot position relative to the pelvis (3) and foot orientation error vs
    identity-relative-to-pelvis (3), stacked [12]."""
    mujoco.mj_kinematics(m, d)
    pid = m.body("pelvis").id
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


def _bounce_coefficients(m: mujoco.MjModel) -> dict[str, float]:
    """Leg joint rates (finite-difference Jacobians, exact 6x6 solve per leg) that move each foot,
    relative to an upright pelvis, straight up by the same height with unchanged orientation, i.e.
    lower the pelvis straight down with flat feet. Scaled so the mean knee coefficient is 1.

    hip_y, knee and ankle_y carry the bounce; hip_x, hip_z and ankle_x get small corrections
    because the stance legs are abducted and the rear foot is turned out (their axes are not
    parallel), so the three sagittal joints alone would slide and tilt the rear foot."""
    d = mujoco.MjData(m)
    key = m.key("stance").id
    eps = 1e-5
    rates: dict[str, float] = {}
    knee_rates = []
    for s in ("l", "r"):
        names = tuple(f"{j}_{s}" for j in ("hip_x", "hip_y", "hip_z", "knee", "ankle_y", "ankle_x"))
        mujoco.mj_resetDataKeyframe(m, d, key)
        f0 = _support_rel_pelvis(m, d)
        idx = np.r_[0:6] + (0 if s == "l" else 6)      # this foot: position (3), orientation (3)
        cols = []
        for n in names:
            a = m.jnt_qposadr[m.joint(n).id]
            d.qpos[a] += eps
            cols.append((_support_rel_pelvis(m, d) - f0)[idx] / eps)
            d.qpos[a] -= eps
        target = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])   # foot up 1 m per unit (= pelvis down)
        x = np.linalg.solve(np.stack(cols, axis=1), target)
        rates.update({n: float(v) for n, v in zip(names, x)})
        knee_rates.append(x[3])
    scale = 1.0 / float(np.mean(knee_rates))
    return {n: v * scale for n, v in rates.items()}


def _pelvis_height_above_feet(m: mujoco.MjModel, d: mujoco.MjData) -> float:
    mujoco.mj_kinematics(m, d)
    return float(d.xpos[m.body("pelvis").id][2] - skeleton.lowest_support_z(m, d))


@functools.lru_cache(maxsize=None)
def bounce_gain(name: str) -> float:
    """Metres of pelvis drop per unit bounce signal s at s = 0 (central finite difference of the
    pelvis height above the lowest sole point, pelvis orientation fixed, joints offset by
    ``coef_j * s``). The env picks s_max = 0.03 / bounce_gain(name) for a ±3 cm bounce."""
    m = _cached_model(_check_name(name))
    coefs = body_info(name).bounce_joints
    d = mujoco.MjData(m)
    key = m.key("stance").id
    h = []
    ds = 1e-3
    for sgn in (+1.0, -1.0):
        mujoco.mj_resetDataKeyframe(m, d, key)
        for j, c in coefs.items():
            d.qpos[m.jnt_qposadr[m.joint(j).id]] += sgn * ds * c
        h.append(_pelvis_height_above_feet(m, d))
    return -(h[0] - h[1]) / (2 * ds)


__all__ = ["BODIES", "BodyInfo", "body_info", "bounce_gain", "build", "build_spec"]
