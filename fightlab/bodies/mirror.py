"""Left–right mirror maps of a body, derived from its MjModel (no table typed per body).

The mirror is the reflection y → −y in the body's sagittal plane (z up, facing +x, left on +y,
`skeleton`'s frame). A map is a `Mirror(perm, sign)`: ``mirrored[..., k] = sign[k] · x[..., perm[k]]``.

- Partners by name: ``*_l`` ↔ ``*_r`` and ``left_*`` ↔ ``right_*``; any other name is on the
  midline and its own partner.
- Signs from the joint axes in the world frame at ``qpos0`` (the zero pose must be mirror
  symmetric): a hinge axis is a pseudovector, mirrored to (−ax, ay, −az); a slide axis a vector,
  mirrored to (ax, −ay, az); the sign is the mirrored axis · the partner's axis, which must be ±1.
- The free joint (the root): position (x, −y, z), quaternion (w, −x, y, −z), linear velocity
  (vx, −vy, vz), angular velocity (−ωx, ωy, −ωz).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

#: sign patterns of a reflected vector and pseudovector (y → −y)
VECTOR_SIGN = (1.0, -1.0, 1.0)
PSEUDO_SIGN = (-1.0, 1.0, -1.0)


@dataclass(frozen=True)
class Mirror:
    """perm int64 [n], sign float32 [n] (±1): ``apply(x)[..., k] = sign[k] · x[..., perm[k]]``."""

    perm: np.ndarray
    sign: np.ndarray

    def apply(self, x):
        """The mirrored ``x`` [..., n] (numpy or torch; a new array)."""
        if isinstance(x, np.ndarray):
            return x[..., self.perm] * self.sign
        import torch

        return x[..., torch.as_tensor(self.perm, device=x.device)] * torch.as_tensor(self.sign, device=x.device)

    def is_involution(self) -> bool:
        """Whether mirroring twice is the identity."""
        return bool(np.all(self.perm[self.perm] == np.arange(len(self.perm)))
                    and np.all(self.sign * self.sign[self.perm] == 1.0))


def concat(*parts: Mirror) -> Mirror:
    """The map of the concatenated vectors (each part's indices shifted past the ones before)."""
    perms, off = [], 0
    for p in parts:
        perms.append(np.asarray(p.perm, np.int64) + off)
        off += len(p.perm)
    return Mirror(np.concatenate(perms) if perms else np.zeros(0, np.int64),
                  np.concatenate([p.sign for p in parts]).astype(np.float32) if parts else np.zeros(0, np.float32))


def fixed(signs) -> Mirror:
    """A block mirrored in place with these signs (no permutation)."""
    s = np.asarray(signs, np.float32)
    return Mirror(np.arange(len(s), dtype=np.int64), s)


def partner_name(name: str) -> str:
    """The mirror partner's name: ``*_l`` ↔ ``*_r``, ``left_*`` ↔ ``right_*``; else ``name``."""
    for a, b in (("_l", "_r"), ("_r", "_l")):
        if name.endswith(a):
            return name[:-len(a)] + b
    for a, b in (("left_", "right_"), ("right_", "left_")):
        if name.startswith(a):
            return b + name[len(a):]
    return name


def _world_axes(m: mujoco.MjModel) -> np.ndarray:
    """Every joint's axis in the world frame at qpos0, float [njnt, 3]."""
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    return np.stack([d.xmat[m.jnt_bodyid[j]].reshape(3, 3) @ m.jnt_axis[j] for j in range(m.njnt)])


def joint_mirror(m: mujoco.MjModel) -> Mirror:
    """Partner and sign of each hinge/slide joint (the free joint its own, sign 1), over joints
    [njnt]. Raises ValueError for a missing partner, a ball joint or an axis that does not mirror."""
    axes = _world_axes(m)
    perm = np.arange(m.njnt, dtype=np.int64)
    sign = np.ones(m.njnt, np.float32)
    for j in range(m.njnt):
        t = m.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            continue
        if t == mujoco.mjtJoint.mjJNT_BALL:
            raise ValueError(f"joint {m.joint(j).name!r} is a ball joint: no mirror map for it")
        name = m.joint(j).name
        k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, partner_name(name))
        if k < 0:
            raise ValueError(f"joint {name!r} has no mirror partner {partner_name(name)!r}")
        flip = PSEUDO_SIGN if t == mujoco.mjtJoint.mjJNT_HINGE else VECTOR_SIGN
        s = float(np.dot(np.asarray(flip) * axes[j], axes[k]))
        if abs(abs(s) - 1.0) > 1e-6:
            raise ValueError(f"joint {name!r}'s mirrored axis is not ± the axis of {m.joint(k).name!r} ({s:.3f})")
        perm[j], sign[j] = k, np.sign(s)
    return Mirror(perm, sign)


def _address_mirror(m: mujoco.MjModel, size: int, adr: np.ndarray, free_sign: tuple) -> Mirror:
    """A map over a per-joint-address vector [size] (qpos: `jnt_qposadr`, qvel: `jnt_dofadr`): the
    free joint's entries signed by `free_sign`, each other joint's entry from its partner's."""
    jm = joint_mirror(m)
    perm = np.arange(size, dtype=np.int64)
    sign = np.ones(size, np.float32)
    for j in range(m.njnt):
        a = adr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            sign[a:a + len(free_sign)] = free_sign
        else:
            perm[a], sign[a] = adr[jm.perm[j]], jm.sign[j]
    return Mirror(perm, sign)


def qpos_mirror(m: mujoco.MjModel) -> Mirror:
    """The map over qpos [nq] (module docstring; the free joint's quaternion as (w, −x, y, −z))."""
    return _address_mirror(m, m.nq, m.jnt_qposadr, (*VECTOR_SIGN, 1.0, -1.0, 1.0, -1.0))


def qvel_mirror(m: mujoco.MjModel) -> Mirror:
    """The map over qvel [nv] (and any per-DOF vector): the free joint's six, each joint's."""
    return _address_mirror(m, m.nv, m.jnt_dofadr, (*VECTOR_SIGN, *PSEUDO_SIGN))


def actuator_mirror(m: mujoco.MjModel) -> Mirror:
    """The map over actuators [nu], through the joint each drives (`actuator_trnid`) and that
    joint's partner and sign. Raises ValueError when the partner joint has no actuator of its own."""
    jm = joint_mirror(m)
    jnt = m.actuator_trnid[:, 0]
    of_joint = {int(j): i for i, j in enumerate(jnt)}
    perm = np.zeros(m.nu, np.int64)
    sign = np.ones(m.nu, np.float32)
    for i in range(m.nu):
        if m.actuator_trntype[i] != mujoco.mjtTrn.mjTRN_JOINT:
            raise ValueError(f"actuator {m.actuator(i).name!r} does not drive a joint: no mirror map for it")
        k = int(jm.perm[jnt[i]])
        if k not in of_joint:
            raise ValueError(f"actuator {m.actuator(i).name!r}'s mirror joint {m.joint(k).name!r} has no actuator")
        perm[i], sign[i] = of_joint[k], jm.sign[jnt[i]]
    return Mirror(perm, sign)
