"""The Newton solve's line search as functions of one thread block per world: MuJoCo Warp's
``_linesearch_iterative_kernel`` (pyramidal cones: limit, contact, friction and equality rows),
its per-row evaluations imported from ``mujoco_warp._src.solver``, its loop the same candidates,
bracket moves and acceptance tests in the same order; the row and DOF sums are block reductions
(``wp.tile_reduce``, which every thread of the block must reach). Used by
:mod:`fightlab.kernels.newton`. Sources: ``mujoco_warp/_src/solver.py`` (``_linesearch``,
``_linesearch_iterative_kernel``, ``_compute_efc_eval_pt*_pyramidal``, ``_eval_pt*``,
``_in_bracket``; mujoco-warp 4.0).
"""

import functools

import warp as wp

from mujoco_warp._src import types as mjw_types
from mujoco_warp._src.math import safe_div
from mujoco_warp._src.solver import _ALPHA_NOISE_EPS, _compute_efc_eval_pt_3alphas_pyramidal
from mujoco_warp._src.solver import _compute_efc_eval_pt_alpha_zero_pyramidal, _compute_efc_eval_pt_pyramidal
from mujoco_warp._src.solver import _eval_pt, _eval_pt_3alphas, _in_bracket

from fightlab.kernels import stage_clock as C

__all__ = ["block_sum2", "block_sum3", "block_sum33", "linesearch_func"]

_MAXVAL = float(mjw_types.MJ_MAXVAL)
_S_P0, _S_NEWTON = C.STAGES.index("ls p0"), C.STAGES.index("ls newton point")
_N_BRACKET = len(C.STAGES) + C.COUNTS.index("brackets")


@wp.func
def block_sum2(v: wp.vec2) -> wp.vec2:
    """Sum of ``v`` over the block's threads (every thread gets it)."""
    return wp.tile_reduce(wp.add, wp.tile(v, preserve_type=True))[0]


@wp.func
def block_sum3(v: wp.vec3) -> wp.vec3:
    """Sum of ``v`` over the block's threads (every thread gets it)."""
    return wp.tile_reduce(wp.add, wp.tile(v, preserve_type=True))[0]


@wp.func
def block_sum33(v: wp.mat33) -> wp.mat33:
    """Sum of ``v`` over the block's threads (every thread gets it)."""
    return wp.tile_reduce(wp.add, wp.tile(v, preserve_type=True))[0]



@wp.func
def _ls_gauss(worldid: int, tid: int, nthread: int, nv: int, ne: int, search_in: wp.array2d[float],
              efc_Ma_in: wp.array2d[float], qfrc_smooth_in: wp.array2d[float], mv_in: wp.array2d[float],
              jv_in: wp.array2d[float], Jaref_in: wp.array2d[float], efc_D_in: wp.array2d[float]) -> wp.vec3:
    """quad_gauss = (0, searchᵀ(Ma - qfrc_smooth), ½ searchᵀ·mv) + the equality rows, summed."""
    local = wp.vec2(0.0)
    for dofid in range(tid, nv, nthread):
        s = search_in[worldid, dofid]
        local += wp.vec2(s * (efc_Ma_in[worldid, dofid] - qfrc_smooth_in[worldid, dofid]),
                         0.5 * s * mv_in[worldid, dofid])
    for efcid in range(tid, ne, nthread):
        jv = jv_in[worldid, efcid]
        jvD = jv * efc_D_in[worldid, efcid]
        local += wp.vec2(jvD * Jaref_in[worldid, efcid], 0.5 * jv * jvD)
    g = block_sum2(local)
    return wp.vec3(0.0, g[0], g[1])


@wp.func
def _ls_rows(worldid: int, tid: int, nthread: int, ne: int, nf: int, nefc: int, alpha: float, at_zero: bool,
             efc_D_in: wp.array2d[float], efc_frictionloss_in: wp.array2d[float],
             Jaref_in: wp.array2d[float], jv_in: wp.array2d[float]) -> wp.vec3:
    """Σ over the non-equality rows of (cost - cost(0), slope, curvature) at ``alpha`` (at 0
    with ``at_zero``: the unshifted values), summed over the block."""
    local = wp.vec3(0.0)
    for efcid in range(ne + tid, nefc, nthread):
        if at_zero:
            local += _compute_efc_eval_pt_alpha_zero_pyramidal(
                efcid, ne, nf, efc_D_in[worldid, efcid], efc_frictionloss_in[worldid],
                Jaref_in[worldid, efcid], jv_in[worldid, efcid])
        else:
            local += _compute_efc_eval_pt_pyramidal(
                efcid, alpha, ne, nf, efc_D_in[worldid, efcid], efc_frictionloss_in[worldid],
                Jaref_in[worldid, efcid], jv_in[worldid, efcid])
    return block_sum3(local)


@wp.func
def _ls_rows3(worldid: int, tid: int, nthread: int, ne: int, nf: int, nefc: int, lo_alpha: float,
              hi_alpha: float, mid_alpha: float, efc_D_in: wp.array2d[float],
              efc_frictionloss_in: wp.array2d[float], Jaref_in: wp.array2d[float],
              jv_in: wp.array2d[float]) -> wp.mat33:
    """The rows' sums at three step sizes, packed as the columns (lo, hi, mid) of a mat33."""
    lo = wp.vec3(0.0)
    hi = wp.vec3(0.0)
    mid = wp.vec3(0.0)
    for efcid in range(ne + tid, nefc, nthread):
        r_lo, r_hi, r_mid = _compute_efc_eval_pt_3alphas_pyramidal(
            efcid, lo_alpha, hi_alpha, mid_alpha, ne, nf, efc_D_in[worldid, efcid],
            efc_frictionloss_in[worldid], Jaref_in[worldid, efcid], jv_in[worldid, efcid])
        lo += r_lo
        hi += r_hi
        mid += r_mid
    return block_sum33(wp.mat33(lo[0], hi[0], mid[0], lo[1], hi[1], mid[1], lo[2], hi[2], mid[2]))


@wp.func
def _ls_pick(lo_next: wp.vec3, hi_next: wp.vec3, mid: wp.vec3, lo_next_alpha: float, hi_next_alpha: float,
             mid_alpha: float, gtol_accept: float) -> wp.vec4:
    """The lowest-cost candidate that converged: (cost, slope, curvature, α); cost MJ_MAXVAL if
    none did."""
    best = wp.vec4(_MAXVAL, 0.0, 0.0, 0.0)
    if wp.abs(lo_next[1]) < gtol_accept and lo_next[0] < 0.0 and lo_next[0] < best[0]:
        best = wp.vec4(lo_next[0], lo_next[1], lo_next[2], lo_next_alpha)
    if wp.abs(hi_next[1]) < gtol_accept and hi_next[0] < 0.0 and hi_next[0] < best[0]:
        best = wp.vec4(hi_next[0], hi_next[1], hi_next[2], hi_next_alpha)
    if wp.abs(mid[1]) < gtol_accept and mid[0] < 0.0 and mid[0] < best[0]:
        best = wp.vec4(mid[0], mid[1], mid[2], mid_alpha)
    return best


@wp.func
def _ls_swap(x: wp.vec3, x_alpha: float, a: wp.vec3, a_alpha: float, b: wp.vec3, b_alpha: float,
             c: wp.vec3, c_alpha: float, cross_first: bool):
    """One end of the bracket moved to candidates a, b, c in turn when in bracket (the hi end
    also takes a first candidate that crosses the minimum: ``cross_first``). Returns (x, α, moved)."""
    s1 = _in_bracket(x, a) or (cross_first and x[1] < 0.0 and a[1] > 0.0)
    x = wp.where(s1, a, x)
    x_alpha = wp.where(s1, a_alpha, x_alpha)
    s2 = _in_bracket(x, b)
    x = wp.where(s2, b, x)
    x_alpha = wp.where(s2, b_alpha, x_alpha)
    s3 = _in_bracket(x, c)
    x = wp.where(s3, c, x)
    x_alpha = wp.where(s3, c_alpha, x_alpha)
    return x, x_alpha, s1 or s2 or s3


@wp.func
def _ls_bracket(worldid: int, tid: int, nthread: int, ne: int, nf: int, nefc: int, ls_iterations: int,
                qg: wp.vec3, p0: wp.vec3, lo_in: wp.vec3, lo_alpha_in: float, gtol: float, gtol_accept: float,
                efc_D_in: wp.array2d[float], efc_frictionloss_in: wp.array2d[float],
                Jaref_in: wp.array2d[float], jv_in: wp.array2d[float]) -> wp.vec3:
    """The bracketing loop of ``_linesearch_iterative_kernel``: (α, improvement, converged)."""
    p0_delta = wp.vec3(0.0, p0[1], p0[2])
    lo_less = lo_in[1] < p0[1]
    lo = wp.where(lo_less, lo_in, p0_delta)
    lo_alpha = wp.where(lo_less, lo_alpha_in, 0.0)
    hi = wp.where(lo_less, p0_delta, lo_in)
    hi_alpha = wp.where(lo_less, 0.0, lo_alpha_in)
    alpha = float(0.0)
    improvement = float(0.0)
    converged = float(0.0)
    for _ in range(ls_iterations):
        lo_next_alpha = lo_alpha - safe_div(lo[1], lo[2])
        hi_next_alpha = hi_alpha - safe_div(hi[1], hi[2])
        mid_alpha = 0.5 * (lo_alpha + hi_alpha)
        r = _ls_rows3(worldid, tid, nthread, ne, nf, nefc, lo_next_alpha, hi_next_alpha, mid_alpha,
                      efc_D_in, efc_frictionloss_in, Jaref_in, jv_in)
        g_lo, g_hi, g_mid = _eval_pt_3alphas(qg, lo_next_alpha, hi_next_alpha, mid_alpha)
        lo_next = g_lo + wp.vec3(r[0, 0], r[1, 0], r[2, 0])
        hi_next = g_hi + wp.vec3(r[0, 1], r[1, 1], r[2, 1])
        mid = g_mid + wp.vec3(r[0, 2], r[1, 2], r[2, 2])
        best = _ls_pick(lo_next, hi_next, mid, lo_next_alpha, hi_next_alpha, mid_alpha, gtol_accept)
        conv = best[0] < _MAXVAL
        swap_lo = False
        swap_hi = False
        if conv:
            lo = wp.vec3(best[0], best[1], best[2])
            hi = lo
            lo_alpha = best[3]
            hi_alpha = best[3]
        else:
            lo, lo_alpha, swap_lo = _ls_swap(lo, lo_alpha, lo_next, lo_next_alpha, mid, mid_alpha,
                                             hi_next, hi_next_alpha, False)
            hi, hi_alpha, swap_hi = _ls_swap(hi, hi_alpha, hi_next, hi_next_alpha, mid, mid_alpha,
                                             lo_next, lo_next_alpha, True)
        done = (conv or (not swap_lo and not swap_hi) or (lo[0] < 0.0 and lo[1] < 0.0 and lo[1] > -gtol)
                or (hi[0] < 0.0 and hi[1] > 0.0 and hi[1] < gtol))
        lo_better = lo[0] < hi[0]
        if lo[0] < 0.0 or hi[0] < 0.0:
            alpha = wp.where(lo_better, lo_alpha, hi_alpha)
            improvement = -wp.where(lo_better, lo[0], hi[0])
        if done:
            converged = 1.0
            break
    return wp.vec3(alpha, improvement, converged)


@functools.cache
def linesearch_func(profile: bool = False):
    """``linesearch`` (below) with the stage clock of :mod:`fightlab.kernels.stage_clock` on or off."""
    _start, mark, count = C.marker(profile)

    @wp.func
    def linesearch(worldid: int, tid: int, nthread: int, nv: int, ne: int, nf: int, nefc: int,
                   ls_iterations: int, tolerance: float, ls_tolerance: float, scale: float, search_dot: float,
                   search_in: wp.array2d[float], efc_Ma_in: wp.array2d[float], qfrc_smooth_in: wp.array2d[float],
                   mv_in: wp.array2d[float], jv_in: wp.array2d[float], Jaref_in: wp.array2d[float],
                   efc_D_in: wp.array2d[float], efc_frictionloss_in: wp.array2d[float],
                   prof: wp.array2d[wp.int64]) -> wp.vec4:
        """The step size along ``search``: (α, improvement, converged, noise floor of α: a step
        below it means the ray is exhausted, the incremental solve's ``ls_exhausted``), as
        ``_linesearch_iterative_kernel`` (pyramidal) computes it; ``scale``: 1 / trace M."""
        gtol = wp.max(tolerance * ls_tolerance * wp.sqrt(search_dot) / scale, 1.0e-6)
        qg = _ls_gauss(worldid, tid, nthread, nv, ne, search_in, efc_Ma_in, qfrc_smooth_in, mv_in, jv_in,
                       Jaref_in, efc_D_in)
        rows = _ls_rows(worldid, tid, nthread, ne, nf, nefc, 0.0, True, efc_D_in, efc_frictionloss_in,
                        Jaref_in, jv_in)
        mark(prof, worldid, tid, _S_P0)
        p0 = wp.vec3(qg[0], qg[1], 2.0 * qg[2]) + rows
        q1_abs = wp.sqrt(2.0 * wp.max(rows[0], 0.0) * wp.max(rows[2], 0.0)) + wp.abs(qg[1])
        gtol_accept = wp.max(gtol, _ALPHA_NOISE_EPS * q1_abs)
        floor = _ALPHA_NOISE_EPS * wp.max(1.0, safe_div(q1_abs, p0[2]))
        if wp.abs(p0[1]) < _ALPHA_NOISE_EPS * q1_abs:
            return wp.vec4(0.0, 0.0, 1.0, floor)  # the start is already the line minimum
        lo_alpha_in = -safe_div(p0[1], p0[2])
        lo_in = _eval_pt(qg, lo_alpha_in) + _ls_rows(worldid, tid, nthread, ne, nf, nefc, lo_alpha_in, False,
                                                     efc_D_in, efc_frictionloss_in, Jaref_in, jv_in)
        mark(prof, worldid, tid, _S_NEWTON)
        if wp.abs(lo_in[1]) < gtol_accept and lo_in[0] < 0.0:
            return wp.vec4(lo_alpha_in, -lo_in[0], 1.0, floor)  # the Newton step
        count(prof, worldid, tid, _N_BRACKET)
        r = _ls_bracket(worldid, tid, nthread, ne, nf, nefc, ls_iterations, qg, p0, lo_in, lo_alpha_in, gtol,
                        gtol_accept, efc_D_in, efc_frictionloss_in, Jaref_in, jv_in)
        return wp.vec4(r[0], r[1], r[2], floor)

    return linesearch
