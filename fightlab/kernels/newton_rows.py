"""The single-launch Newton solve's stages over DOFs and constraint rows (one thread block per
world, each thread a stride of DOFs or rows; the caller, :mod:`fightlab.kernels.newton`, places
the block barriers), in global memory: the start, the constraint update, Jᵀ·force, the
gradient, M·x and J·x, the step, the fast path's rescaling, the convergence test. Sources:
``mujoco_warp/_src/solver.py`` (``_solve_init_dof``, ``_update_constraint_efc``,
``_update_constraint_init_qfrc_constraint_sparse``, ``_update_gradient_grad``,
``_update_gradient_zero_grad_dot``, ``_qfrc_constraint_from_grad``, ``_inertia_scale``,
``_solve_done``), ``support.mul_m``; mujoco-warp 4.0.
"""

import warp as wp

from mujoco_warp._src import types as mjw_types
from mujoco_warp._src.solver import _eval_constraint

__all__ = ["sync_threads", "row_dot", "mul_m", "init_qacc", "update_constraint", "update_row", "qfrc_constraint", "grad", "mv_jv", "jx", "step",
           "done", "stale", "qfrc_from_grad", "per_world", "inertia_scale"]

_LS_BIT = int(mjw_types.OverflowType.LS_ITERATIONS)
_ITER_BIT = int(mjw_types.OverflowType.ITERATIONS)
_MINVAL = float(mjw_types.MJ_MINVAL)


@wp.func_native(snippet="WP_TILE_SYNC();")
def sync_threads():
    """Block-wide barrier (``__syncthreads`` on CUDA, a fiber yield on CPU blocks)."""
    ...


@wp.func
def row_dot(worldid: int, efcid: int, J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
            J_colind: wp.array3d[int], J: wp.array3d[float], x: wp.array2d[float]) -> float:
    """Row ``efcid`` of the sparse constraint Jacobian times ``x[worldid]`` (nv,)."""
    s = float(0.0)
    adr = J_rowadr[worldid, efcid]
    for k in range(J_rownnz[worldid, efcid]):
        s += J[worldid, 0, adr + k] * x[worldid, J_colind[worldid, 0, adr + k]]
    return s


@wp.func
def mul_m(worldid: int, dofid: int, rowadr: wp.array[int], col: wp.array[int], madr: wp.array[int],
          M: wp.array2d[float], x: wp.array2d[float]) -> float:
    """Row ``dofid`` of M·x: the gather of ``support.mul_m`` (same terms, same order)."""
    acc = float(0.0)
    for k in range(rowadr[dofid], rowadr[dofid + 1]):
        acc += M[worldid, madr[k]] * x[worldid, col[k]]
    return acc


@wp.func
def init_qacc(worldid: int, tid: int, nthread: int, nv: int, qacc_mode: int, nefc: int,
              qacc_warmstart_in: wp.array2d[float], qacc_smooth_in: wp.array2d[float],
              qacc_out: wp.array2d[float], solver_niter_out: wp.array[int]):
    """``_solve_init_dof``: qacc = warmstart (mode 0: qacc_smooth skipped; mode 1: warmstart on
    and rows present), else qacc_smooth; niter 0 (``_solve_init_efc``)."""
    if tid == 0:
        solver_niter_out[worldid] = 0
    for dofid in range(tid, nv, nthread):
        if qacc_mode == 0 or (qacc_mode == 1 and nefc > 0):
            qacc_out[worldid, dofid] = qacc_warmstart_in[worldid, dofid]
        else:
            qacc_out[worldid, dofid] = qacc_smooth_in[worldid, dofid]


@wp.func
def update_row(worldid: int, efcid: int, ne: int, nf: int, efc_D_in: wp.array2d[float],
               efc_frictionloss_in: wp.array2d[float], Jaref_in: wp.array2d[float],
               efc_force_out: wp.array2d[float], efc_state_out: wp.array2d[int]) -> wp.vec2i:
    """Row ``efcid`` of ``_update_constraint_efc`` (pyramidal): its force and state from Jaref.
    Returns (old state, new state)."""
    is_friction = efcid >= ne and efcid < ne + nf
    fl = float(0.0)
    if is_friction:
        fl = efc_frictionloss_in[worldid, efcid]
    res = _eval_constraint(efcid < ne, is_friction, False, Jaref_in[worldid, efcid],
                           efc_D_in[worldid, efcid], fl, efcid, -1, 0.0, 0.0, 0.0, 0.0, 0.0)
    old = efc_state_out[worldid, efcid]
    efc_force_out[worldid, efcid] = res[0]
    efc_state_out[worldid, efcid] = int(res[1])
    return wp.vec2i(old, int(res[1]))


@wp.func
def update_constraint(worldid: int, tid: int, nthread: int, nv: int, ne: int, nf: int, nefc: int,
                      efc_D_in: wp.array2d[float], efc_frictionloss_in: wp.array2d[float],
                      Jaref_in: wp.array2d[float], efc_force_out: wp.array2d[float],
                      efc_state_out: wp.array2d[int], qfrc_constraint_out: wp.array2d[float]) -> float:
    """``_update_constraint_efc`` (pyramidal): each row's force and state from Jaref; zeroes
    qfrc_constraint for :func:`_qfrc_constraint` (after a barrier). Returns how many of this
    thread's rows changed state (``state_changed_count``)."""
    for dofid in range(tid, nv, nthread):
        qfrc_constraint_out[worldid, dofid] = 0.0
    changed = float(0.0)
    for efcid in range(tid, nefc, nthread):
        s = update_row(worldid, efcid, ne, nf, efc_D_in, efc_frictionloss_in, Jaref_in, efc_force_out, efc_state_out)
        changed += wp.where(s[0] != s[1], 1.0, 0.0)
    return changed


@wp.func
def qfrc_constraint(worldid: int, tid: int, nthread: int, nefc: int, J_rownnz: wp.array2d[int],
                    J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
                    efc_force_in: wp.array2d[float], qfrc_constraint_out: wp.array2d[float]):
    """qfrc_constraint += Jᵀ·force, one thread per row, atomics (as MuJoCo Warp's sparse path)."""
    for efcid in range(tid, nefc, nthread):
        force = efc_force_in[worldid, efcid]
        if force != 0.0:
            adr = J_rowadr[worldid, efcid]
            for k in range(J_rownnz[worldid, efcid]):
                wp.atomic_add(qfrc_constraint_out[worldid], J_colind[worldid, 0, adr + k],
                              J[worldid, 0, adr + k] * force)


@wp.func
def grad(worldid: int, tid: int, nthread: int, nv: int, efc_Ma_in: wp.array2d[float],
         qfrc_smooth_in: wp.array2d[float], qfrc_constraint_in: wp.array2d[float],
         grad_out: wp.array2d[float]) -> float:
    """grad = Ma - qfrc_smooth - qfrc_constraint; returns this thread's part of |grad|²."""
    local = float(0.0)
    for dofid in range(tid, nv, nthread):
        g = efc_Ma_in[worldid, dofid] - qfrc_smooth_in[worldid, dofid] - qfrc_constraint_in[worldid, dofid]
        grad_out[worldid, dofid] = g
        local += g * g
    return local


@wp.func
def jx(worldid: int, tid: int, nthread: int, nefc: int, J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
       J_colind: wp.array3d[int], J: wp.array3d[float], x_in: wp.array2d[float], jx_out: wp.array2d[float],
       jx_minus: wp.array2d[float]):
    """jx = J·x - jx_minus, a row per thread (:func:`mv_jv`'s second half)."""
    for efcid in range(tid, nefc, nthread):
        v = row_dot(worldid, efcid, J_rownnz, J_rowadr, J_colind, J, x_in)
        if jx_minus.shape[1] > 0:
            v = v - jx_minus[worldid, efcid]
        jx_out[worldid, efcid] = v


@wp.func
def mv_jv(worldid: int, tid: int, nthread: int, nv: int, nefc: int, M_mulm_rowadr: wp.array[int],
          M_mulm_col: wp.array[int], M_mulm_madr: wp.array[int], M_in: wp.array2d[float],
          J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int], J_colind: wp.array3d[int],
          J: wp.array3d[float], x_in: wp.array2d[float], mx_out: wp.array2d[float],
          jx_out: wp.array2d[float], jx_minus: wp.array2d[float]):
    """mx = M·x and jx = J·x - jx_minus (pass ``jx_minus`` = efc.aref for Jaref, or a zero-row
    array with shape[1] = 0 for jv)."""
    for dofid in range(tid, nv, nthread):
        mx_out[worldid, dofid] = mul_m(worldid, dofid, M_mulm_rowadr, M_mulm_col, M_mulm_madr, M_in, x_in)
    jx(worldid, tid, nthread, nefc, J_rownnz, J_rowadr, J_colind, J, x_in, jx_out, jx_minus)


@wp.func
def step(worldid: int, tid: int, nthread: int, nv: int, nefc: int, alpha: float,
         search_in: wp.array2d[float], mv_in: wp.array2d[float], jv_in: wp.array2d[float],
         qacc_out: wp.array2d[float], efc_Ma_out: wp.array2d[float], Jaref_out: wp.array2d[float]):
    """qacc += α·search, efc.Ma += α·mv, Jaref += α·jv (the line search's last lines), then a
    barrier."""
    for dofid in range(tid, nv, nthread):
        qacc_out[worldid, dofid] += alpha * search_in[worldid, dofid]
        efc_Ma_out[worldid, dofid] += alpha * mv_in[worldid, dofid]
    for efcid in range(tid, nefc, nthread):
        Jaref_out[worldid, efcid] += alpha * jv_in[worldid, efcid]
    sync_threads()


@wp.func
def done(tid: int, worldid: int, it: int, iterations: int, tolerance: float, scale: float, ls: wp.vec4,
         sums: wp.vec3, solver_niter_out: wp.array[int], overflow_out: wp.array[int]) -> bool:
    """``_solve_done`` after iteration ``it`` (0-based) with the line search's (α, improvement,
    converged) ``ls`` and the direction's sums: the overflow bits and niter (thread 0)."""
    improvement = scale * ls[1]
    converged = ((ls[0] == 0.0) or (improvement > 0.0 and improvement < tolerance)
                 or (scale * wp.sqrt(sums[0]) < tolerance) or (scale * 0.5 * sums[2] < tolerance))
    if tid == 0:
        solver_niter_out[worldid] = it + 1
        bits = wp.where(ls[2] == 0.0, _LS_BIT, 0)
        if not converged and it + 1 == iterations:
            bits = bits | _ITER_BIT
        overflow_out[worldid] = overflow_out[worldid] | bits
    return converged


@wp.func
def stale(sums: wp.vec3, sigma: float, alpha: float) -> wp.vec4:
    """The stable-state fast path (``_update_gradient_zero_grad_dot``): no row changed state, so
    the cost was quadratic along the ray and the true gradient is σ·grad; a step α makes it
    (σ - α)·grad. Returns (|grad|², |search|², newton_decrement, σ) rescaled; search is kept."""
    new_sigma = sigma - alpha
    ratio = float(0.0)
    if sigma != 0.0:
        ratio = new_sigma / sigma
    return wp.vec4(sums[0] * ratio * ratio, sums[1], sums[2] * ratio * ratio, new_sigma)


@wp.func
def qfrc_from_grad(worldid: int, tid: int, nthread: int, nv: int, sigma: float, efc_Ma_in: wp.array2d[float],
                   qfrc_smooth_in: wp.array2d[float], grad_in: wp.array2d[float],
                   qfrc_constraint_out: wp.array2d[float]):
    """``_qfrc_constraint_from_grad``: qfrc_constraint = Ma - qfrc_smooth - σ·grad, after the loop."""
    for dofid in range(tid, nv, nthread):
        qfrc_constraint_out[worldid, dofid] = (efc_Ma_in[worldid, dofid] - qfrc_smooth_in[worldid, dofid]
                                               - sigma * grad_in[worldid, dofid])


@wp.func
def per_world(a: wp.array[float], worldid: int) -> float:
    """A per-world option (MuJoCo Warp keeps one value, or one per world)."""
    return a[worldid % a.shape[0]]


@wp.func
def inertia_scale(worldid: int, nv: int, M_rownnz: wp.array[int], M_rowadr: wp.array[int],
                  M_in: wp.array2d[float]) -> float:
    """1 / trace M (``solver._inertia_scale``)."""
    trace = float(0.0)
    for i in range(nv):
        trace += M_in[worldid, M_rowadr[i] + M_rownnz[i] - 1]
    return 1.0 / wp.max(_MINVAL, trace)
