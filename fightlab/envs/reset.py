"""The stance env's masked reset in one launch: MuJoCo Warp's ``reset_data(m, d, reset)`` and the
task's new episodes (`stance_kernels.reset_task`), one thread per world.

MuJoCo Warp 4.0's masked ``reset_data`` (``mujoco_warp/_src/io.py``) is six launches over the
whole grid every env step (xfrc_applied over nworld × nbody × 6, M over nworld × nM, mocap,
contacts over every contact slot, the sleep arrays, the per-world fields), whether a world
resets or not, and the task's `reset_worlds` a seventh. Here a world that does not reset returns
at once, and one that does writes, in ``reset_data``'s order, the same values to the same
per-world fields (xfrc_applied, M, the sleep arrays, solver counts, time, energy, qpos = qpos0,
qvel, act, qacc_warmstart, ctrl, qfrc_applied, qacc, act_dot, overflow; nacon when world 0
resets), then the task's episode start. Not written: the contact slots of resetting worlds,
which ``reset_data`` clears but which the next step's collision rewrites (from nacon 0) before
anything reads them (the env reads contacts only after a physics step; its state, checkpoints
included, holds none). Taken only where those are all the fields: :func:`fused_reset_support`
names the first reason it is not (mocap bodies, equality constraints, flexes, sensors, user data,
plasticity, history, sleep), and the env then launches MuJoCo Warp's ``reset_data``.
"""

from __future__ import annotations

from typing import Any

import warp as wp

from mujoco_warp._src import types as mjw_types

from fightlab.envs.stance_kernels import TaskParams, reset_task

__all__ = ["fused_reset_support", "reset_data_and_task"]

_MINAWAKE = int(mjw_types.MJ_MINAWAKE)
_AWAKE, _STATIC = int(mjw_types.SleepState.AWAKE), int(mjw_types.SleepState.STATIC)


def fused_reset_support(m: Any) -> str | None:
    """None when :func:`reset_data_and_task` writes every field ``reset_data`` writes for the
    MuJoCo Warp model ``m`` (contacts aside: module docstring), else the first field it lacks."""
    counts = dict(nmocap="mocap bodies", neq="equality constraints", nflex="flexes",
                  nsensordata="sensors", nuserdata="user data", nplastic="plasticity", nhistory="history")
    for name, what in counts.items():
        if int(getattr(m, name, 0) or 0) > 0:
            return f"{what} ({name}={int(getattr(m, name))})"
    if int(m.opt.enableflags) & int(mjw_types.EnableBit.SLEEP):
        return "sleep"
    return None


@wp.func
def _reset_arrays(worldid: int, nv: int, nbody: int, ntree: int, body_mocapid: wp.array[int],
                  body_treeid: wp.array[int], xfrc_applied_out: wp.array2d[wp.spatial_vector],
                  M_out: wp.array2d[float], tree_asleep_out: wp.array2d[int], tree_awake_out: wp.array2d[int],
                  body_awake_out: wp.array2d[int], body_awake_ind_out: wp.array2d[int],
                  dof_awake_ind_out: wp.array2d[int]):
    """``reset_data``'s reset_xfrc_applied, reset_M and reset_sleep for world ``worldid``."""
    for b in range(nbody):
        xfrc_applied_out[worldid, b] = wp.spatial_vector(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for e in range(M_out.shape[1]):
        M_out[worldid, e] = 0.0
    for e in range(wp.max(ntree, wp.max(nbody, nv))):
        if e < ntree:
            tree_asleep_out[worldid, e] = -(1 + _MINAWAKE)
            tree_awake_out[worldid, e] = 1
        if e < nbody:
            state = _AWAKE
            if body_treeid[e] < 0 and body_mocapid[e] < 0:
                state = _STATIC
            body_awake_out[worldid, e] = state
            body_awake_ind_out[worldid, e] = e
        if e < nv:
            dof_awake_ind_out[worldid, e] = e


@wp.func
def _reset_world(worldid: int, nq: int, nv: int, nu: int, na: int, nbody: int, ntree: int, qpos0: wp.array2d[float],
                 solver_niter_out: wp.array[int], ne_out: wp.array[int], nf_out: wp.array[int], nl_out: wp.array[int],
                 nefc_out: wp.array[int], ntree_awake_out: wp.array[int], nbody_awake_out: wp.array[int],
                 nv_awake_out: wp.array[int], time_out: wp.array[float], energy_out: wp.array[wp.vec2],
                 qpos_out: wp.array2d[float], qvel_out: wp.array2d[float], act_out: wp.array2d[float],
                 qacc_warmstart_out: wp.array2d[float], ctrl_out: wp.array2d[float],
                 qfrc_applied_out: wp.array2d[float], qacc_out: wp.array2d[float], act_dot_out: wp.array2d[float],
                 nacon_out: wp.array[int], overflow_out: wp.array[int]):
    """``reset_data``'s reset_nworld for world ``worldid`` (the fields of models that
    :func:`fused_reset_support` takes)."""
    solver_niter_out[worldid] = 0
    if worldid == 0:
        nacon_out[0] = 0
    ne_out[worldid] = 0
    nf_out[worldid] = 0
    nl_out[worldid] = 0
    nefc_out[worldid] = 0
    time_out[worldid] = 0.0
    energy_out[worldid] = wp.vec2(0.0, 0.0)
    ntree_awake_out[worldid] = ntree
    nbody_awake_out[worldid] = nbody
    nv_awake_out[worldid] = nv
    q0 = worldid % qpos0.shape[0]
    for i in range(nq):
        qpos_out[worldid, i] = qpos0[q0, i]
        if i < nv:
            qvel_out[worldid, i] = 0.0
            qacc_warmstart_out[worldid, i] = 0.0
            qfrc_applied_out[worldid, i] = 0.0
            qacc_out[worldid, i] = 0.0
    for i in range(nu):
        ctrl_out[worldid, i] = 0.0
    for i in range(na):
        act_out[worldid, i] = 0.0
        act_dot_out[worldid, i] = 0.0
    overflow_out[worldid] = 0


@wp.kernel
def reset_data_and_task(
    # Model:
    nq: int, nv: int, nu: int, na: int, nbody: int, ntree: int, qpos0: wp.array2d[float], body_mocapid: wp.array[int],
    body_treeid: wp.array[int], key_qpos: wp.array[float], ctrl_stance: wp.array[float], act_qadr: wp.array[int],
    # In:
    task: TaskParams, seed: int, stagger: int, reset_in: wp.array[bool],
    # Data out:
    xfrc_applied_out: wp.array2d[wp.spatial_vector], M_out: wp.array2d[float], tree_asleep_out: wp.array2d[int],
    tree_awake_out: wp.array2d[int], body_awake_out: wp.array2d[int], body_awake_ind_out: wp.array2d[int],
    dof_awake_ind_out: wp.array2d[int], solver_niter_out: wp.array[int], ne_out: wp.array[int], nf_out: wp.array[int],
    nl_out: wp.array[int], nefc_out: wp.array[int], ntree_awake_out: wp.array[int], nbody_awake_out: wp.array[int],
    nv_awake_out: wp.array[int], time_out: wp.array[float], energy_out: wp.array[wp.vec2], qpos_out: wp.array2d[float],
    qvel_out: wp.array2d[float], act_out: wp.array2d[float], qacc_warmstart_out: wp.array2d[float],
    ctrl_out: wp.array2d[float], qfrc_applied_out: wp.array2d[float], qacc_out: wp.array2d[float],
    act_dot_out: wp.array2d[float], nacon_out: wp.array[int], overflow_out: wp.array[int],
    # Out (the task's):
    step_count_out: wp.array[int], push_next_out: wp.array[float], push_left_out: wp.array[int],
    prev_action_out: wp.array2d[float], ep_acc_out: wp.array2d[float], rng_out: wp.array[int],
):
    worldid = wp.tid()
    if not reset_in[worldid]:
        return
    _reset_arrays(worldid, nv, nbody, ntree, body_mocapid, body_treeid, xfrc_applied_out, M_out, tree_asleep_out,
                  tree_awake_out, body_awake_out, body_awake_ind_out, dof_awake_ind_out)
    _reset_world(worldid, nq, nv, nu, na, nbody, ntree, qpos0, solver_niter_out, ne_out, nf_out, nl_out, nefc_out,
                 ntree_awake_out, nbody_awake_out, nv_awake_out, time_out, energy_out, qpos_out, qvel_out, act_out,
                 qacc_warmstart_out, ctrl_out, qfrc_applied_out, qacc_out, act_dot_out, nacon_out, overflow_out)
    reset_task(worldid, key_qpos, ctrl_stance, act_qadr, task, seed, stagger, qpos_out, qvel_out, ctrl_out,
               step_count_out, push_next_out, push_left_out, prev_action_out, ep_acc_out, rng_out)
