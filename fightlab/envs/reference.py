"""The stance rhythm: a boxer's bounce, stored as one stacked reference table.

All per-joint reference tables sit side by side in one array `table[n_phase, nu + NCOL_EXTRA]`,
read by one gather per env step (the original study cut non-physics work from 21 ms to 8.7 ms per
step by stacking its 8 tables, read one by one three times per step, into one):

- columns `0 … nu-1`: position-target offset of each actuator at amplitude a = 1 (rad), added to
  the stance keyframe's ctrl;
- column `nu + COL_PELVIS`: the pelvis height offset the bounce should produce at a = 1 (m):
  `bounce_m · sin(2π φ)`;
- column `nu + COL_SIGNAL`: the unit bounce signal `sin(2π φ)` (lock-in reference for tracking).

Row `i` holds phase `φ = i / n_phase` of one rhythm period. The bounce joints (hips, knees,
ankles) move by `coef_j · u` where `u = -(bounce_m / gain) · sin(2π φ)` and `gain` is the
pelvis drop per unit `u` from the body's kinematics (`fightlab.bodies.bounce_gain`), so the pelvis
follows ±bounce_m at a = 1 when the joints track; the guard joints sway by
`arm_sway_rad · coef_j · cos(2π φ)`.
"""

from __future__ import annotations

import mujoco
import numpy as np

from fightlab.config import EnvConfig

# columns after the nu actuator columns (module docstring)
COL_PELVIS, COL_SIGNAL, NCOL_EXTRA = 0, 1, 2


def _as_coefs(joints) -> dict[str, float]:
    if isinstance(joints, dict):
        return {str(k): float(v) for k, v in joints.items()}
    return {str(k): 1.0 for k in joints}


def build_table(mjm: mujoco.MjModel, info, gain: float, cfg: EnvConfig) -> np.ndarray:
    """Build the stacked reference table for one body.

    Args:
      mjm: the body's MjModel (actuators named after their joints).
      info: the body's registry record, `fightlab.bodies.Body` (`bounce_joints`: joint name →
        coefficient, `guard_joints`).
      gain: pelvis drop in m per unit bounce signal u (> 0).
      cfg: the env config (bounce_m, arm_sway_rad, n_phase).

    Returns:
      float32 array [n_phase, nu + NCOL_EXTRA] as described in the module docstring.

    Raises:
      ValueError: a bounce/guard joint has no actuator, or gain is not positive.
    """
    if not gain > 0:
        raise ValueError(f"bounce gain must be > 0 m per unit, got {gain!r}")
    nu = mjm.nu
    phi = np.arange(cfg.n_phase) / cfg.n_phase
    s = np.sin(2 * np.pi * phi)
    c = np.cos(2 * np.pi * phi)
    table = np.zeros((cfg.n_phase, nu + NCOL_EXTRA), np.float64)
    act_of_joint = {}
    for i in range(nu):
        jid = mjm.actuator_trnid[i, 0]
        act_of_joint[mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, jid)] = i
    u = -(cfg.bounce_m / gain) * s
    for name, coef in _as_coefs(info.bounce_joints).items():
        if name not in act_of_joint:
            raise ValueError(f"bounce joint {name!r} has no actuator; actuated joints: "
                             f"{sorted(act_of_joint)[:8]}…")
        table[:, act_of_joint[name]] += coef * u
    for name, coef in _as_coefs(info.guard_joints).items():
        if name not in act_of_joint:
            raise ValueError(f"guard joint {name!r} has no actuator")
        table[:, act_of_joint[name]] += cfg.arm_sway_rad * coef * c
    table[:, nu + COL_PELVIS] = cfg.bounce_m * s
    table[:, nu + COL_SIGNAL] = s
    return table.astype(np.float32)
