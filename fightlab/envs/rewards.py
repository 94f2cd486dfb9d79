"""The stance task's reward: one short `@wp.func` per term (each formula in its docstring), their
registry `REWARD_TERMS` (after mjlab's reward manager: a function and a weight per term, summed in
the list's order) and `weighted_sum`, which `fightlab.envs.stance`'s fused post-step kernel calls.
A term reads one world after the physics substeps through `RewardIn`.
"""

from __future__ import annotations

import dataclasses

import warp as wp

from fightlab.config import EnvConfig
from fightlab.envs.reference import COL_PELVIS

__all__ = ["REWARD_FALL", "REWARD_KEYS", "REWARD_TERMS", "RewardIn", "RewardTerm", "RewardWeights",
           "code_weights", "weighted_sum"]


@wp.struct
class RewardIn:
    """What a reward term reads of one world after the physics substeps (built in `_post_step`)."""

    worldid: int
    row: int                          # reference table row of the step's phase
    amp: float                        # rhythm amplitude a
    # Model:
    act_qadr: wp.array[int]           # qpos address of each actuated joint
    act_dadr: wp.array[int]           # its DOF address (qvel), one per action
    ctrl_stance: wp.array[float]
    table: wp.array2d[float]
    torso_id: int
    z_stance: float
    # Data in:
    qpos: wp.array2d[float]
    qvel: wp.array2d[float]
    xmat: wp.array2d[wp.mat33]
    # In:
    action: wp.array2d[float]         # this step's action (unclipped)
    prev_action: wp.array2d[float]    # the previous step's (clipped)


@wp.func
def alive(r: RewardIn) -> float:
    """1 per step lived."""
    return 1.0


@wp.func
def pose(r: RewardIn) -> float:
    """exp(−mean((q − q_ref)²) / 0.05): the actuated joints near the reference."""
    nu = r.act_qadr.shape[0]
    err = float(0.0)
    for i in range(nu):
        q = r.qpos[r.worldid, r.act_qadr[i]]
        qref = r.ctrl_stance[i] + r.amp * r.table[r.row, i]
        err += (q - qref) * (q - qref)
    err = err / float(nu)
    return wp.exp(-err / 0.05)


@wp.func
def bounce(r: RewardIn) -> float:
    """exp(−((Δz − z_ref) / 0.02)²): the pelvis height Δz above the stance on the commanded bounce."""
    nu = r.act_qadr.shape[0]
    dz = r.qpos[r.worldid, 2] - r.z_stance
    eb = (dz - r.amp * r.table[r.row, nu + COL_PELVIS]) / 0.02
    return wp.exp(-eb * eb)


@wp.func
def upright(r: RewardIn) -> float:
    """torso z-axis · world z."""
    return r.xmat[r.worldid, r.torso_id][2, 2]


@wp.func
def action_rate(r: RewardIn) -> float:
    """−mean((a − a_prev)²), a clipped to [−1, 1]: a penalty, so its weight is ≥ 0."""
    nu = r.act_qadr.shape[0]
    rate = float(0.0)
    for i in range(nu):
        da = wp.clamp(r.action[r.worldid, i], -1.0, 1.0) - r.prev_action[r.worldid, i]
        rate += da * da
    rate = rate / float(nu)
    return -rate


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One reward term, after mjlab's `RewardTermCfg` (mjlab/managers/reward_manager.py): `name`
    (the summary's `reward_<name>`), `func` (a `@wp.func` of `RewardIn` → float, unweighted) and
    `weight` (a number, or the name of the EnvConfig field that holds it)."""

    name: str
    func: object
    weight: float | str

    def weight_of(self, cfg: EnvConfig) -> float:
        """The term's weight under `cfg`."""
        return float(getattr(cfg, self.weight) if isinstance(self.weight, str) else self.weight)


#: the reward's terms, summed in this order (a new term: its function above and its entry here)
REWARD_TERMS = (
    RewardTerm("alive", alive, "w_alive"),
    RewardTerm("pose", pose, "w_pose"),
    RewardTerm("bounce", bounce, "w_bounce"),
    RewardTerm("upright", upright, "w_upright"),
    RewardTerm("action_rate", action_rate, "w_action_rate"),
)


def code_weights() -> dict[str, float]:
    """The terms whose weight is a number in `REWARD_TERMS` (not an EnvConfig field): name →
    weight. Train rows record them (params `reward_terms`), so a learner with such a term has
    its own learner id; {} when every term's weight is an EnvConfig field."""
    return {t.name: float(t.weight) for t in REWARD_TERMS if not isinstance(t.weight, str)}


#: the summary's per-term keys: the terms', then the fall penalty's (`reward_fall`)
REWARD_KEYS = tuple(f"reward_{t.name}" for t in REWARD_TERMS) + ("reward_fall",)
REWARD_FALL = len(REWARD_TERMS)  # the fall penalty's column of the per-term sums
RewardWeights = wp.types.vector(length=len(REWARD_TERMS), dtype=float)


@wp.func
def weighted_sum(r: RewardIn, weights: RewardWeights, dt: float, reward_terms_out: wp.array2d[float]) -> float:
    """dt · Σ weight · term over `REWARD_TERMS` (dt: control_dt, s), in the tuple's order (wp.static unrolls
    the loop: one fused kernel); each weighted term × control_dt is added to its column of
    ``reward_terms_out``."""
    total = float(0.0)
    for k in range(wp.static(len(REWARD_TERMS))):
        term = weights[k] * wp.static(REWARD_TERMS[k].func)(r)
        total = total + term
        reward_terms_out[r.worldid, k] = reward_terms_out[r.worldid, k] + dt * term
    return dt * total
