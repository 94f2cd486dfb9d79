"""Single-launch Newton constraint solve for single-tree bodies: one thread block per world.

What MuJoCo Warp 4.0 does for fightlab's training physics (``EnvConfig``: Newton, 2 iterations,
4 line-search iterations, tolerance 1e-8 (``io.put_model`` raises it to 1e-6 in float32),
ls_tolerance 0.01, ``run_qacc_smooth`` False, eulerdamp off; Euler; warmstart on, no sleep, no
noslip). Sources: ``mujoco_warp/_src/solver.py`` (below), ``io.py``, ``types.py``, ``smooth.py``.

* **Constraints.** Both bodies are one kinematic tree (``ntree`` 1), every geom condim 3, the
  default pyramidal cone: a contact gives 4 ``CONTACT_PYRAMIDAL`` rows; limited hinges give
  ``LIMIT_JOINT`` rows (37 / 83 limited joints). No equality (``ne`` 0), no frictionloss (``nf``
  0), no tendon, no flex. Contact and limit rows are both "limit/other" rows of the pyramidal
  path: quadratic (force ``-D·Jaref``) while ``Jaref < 0``, else satisfied (``_eval_constraint``).
* **Jacobian.** nv 43 and 89 are > 32, so ``io.is_sparse`` (jacobian auto) picks the sparse
  Jacobian: ``efc.J_rownnz / J_rowadr`` ``(nworld, njmax)``, ``efc.J_colind / J`` ``(nworld, 1,
  nnz)``. H is dense ``(nworld, nv_pad, nv_pad)`` (nv_pad 48 / 96) and factored by the blocked
  16×16-tile Cholesky augmented with the gradient (``block_cholesky``), since 32 < nv <= 96.
* **Init** (``_solve``, ``init_context``): ``_solve_init_dof`` (qacc = qacc_warmstart: with
  ``run_qacc_smooth`` off, ``smooth.skip_qacc_smooth``); ``_inertia_scale`` (1 / trace M);
  ``_solve_init_efc`` (niter 0, done False); ``_solve_init_jaref_kernel`` (Jaref = J·qacc -
  aref); ``support.mul_m`` (efc.Ma = M·qacc, gather over ``M_mulm_*``); ``_update_constraint``
  (efc.force, efc.state, qfrc_constraint = Jᵀ·force); ``_update_gradient`` (grad = Ma -
  qfrc_smooth - qfrc_constraint; H = M + Σ_quadratic D·JᵀJ by ``_update_gradient_init_h_sparse``
  + ``_JTDACJ_sparse``; ``_cholesky_factorize_solve``: search = -H⁻¹·grad, search_dot,
  newton_decrement = gradᵀH⁻¹grad).
* **One iteration** (``_solver_iteration``; a ``wp.capture_while`` loop when
  ``opt.graph_conditional``, else unrolled; fightlab's solver_loop "auto" unrolls these 2):
  ``_linesearch`` (mv = M·search, ``_linesearch_jv_fused_kernel`` jv = J·search, then
  ``_linesearch_iterative_kernel``: already one block per world), ``_zero_change_counters``,
  ``_update_constraint``, ``_update_gradient_incremental``, ``_solve_done``. A pyramidal Newton
  solve is "incremental" (``_use_incremental``): H changes by ±D·JᵀJ of the rows whose quadratic
  state flipped and is refactored only then; a world with no state change keeps its search
  direction and scales grad (``grad_scale``: the stable fast path); qfrc_constraint is
  recovered after the loop (``_qfrc_constraint_from_grad``). All are the same Newton step as a
  full rebuild, up to float32 rounding.
* **Line search**: the iterative variant (the only one in ``_linesearch``), ``ls_iterations``
  static: gtol = max(tolerance·ls_tolerance·|search| / inertia_scale, 1e-6); the Newton point
  -p0'/p0'' is accepted when |slope| < gtol_accept and the cost fell; else a bracket of (lo, hi)
  tries each iteration three candidates (a Newton step from lo and from hi, the midpoint);
  the ``LS_ITERATIONS`` overflow bit when it did not converge. Then qacc += α·search, efc.Ma +=
  α·mv, Jaref += α·jv.
* **Convergence** (``_solve_done``): niter += 1; done if α = 0, or 0 < scale·improvement < tol,
  or scale·|grad| < tol, or scale·newton_decrement/2 < tol; at niter = iterations done, with the
  ``ITERATIONS`` overflow bit when none of these held.
* **Data** read: qacc_warmstart (qacc_smooth only with run_qacc_smooth), qfrc_smooth, M,
  nefc, ne, nf, efc.J*, efc.D, efc.aref, efc.frictionloss; written: qacc, qfrc_constraint,
  efc.force, efc.state, efc.Ma, solver_niter, overflow (bits OR-ed).
* **Launches**: 13 for the init, 12 per iteration, 1 after the loop: 38 per solve at 2
  iterations (38 of the training step's 80).

This module does all of that in **one launch** per solve (:func:`newton_solve`): one block of
:data:`BLOCK_DIM` threads per world, the stages separated by block barriers, registers capped
(``launch_bounds``) so that 8 blocks fit an SM. H (lower triangle, packed, with the gradient as
an extra row) lives in shared memory (:mod:`fightlab.kernels.newton_hessian`): M scattered in
from its CSR entries, Jᵀ·D·J added with shared atomics (each thread's row pairs started at a
different pair, so that a warp's lanes do not all add to the root DOFs' entries at once),
factored as LDLᵀ in place, the forward solve riding along as the extra row: leaf first, without
fill, where every constraint row lies on one root-to-body chain (:mod:`fightlab.kernels.newton_tree`:
the DOFs of one height eliminated together from a host-built table, the back solve one barrier
per tree depth), else densely with one barrier per column (the
trailing triangle's elements dealt to the threads in turn, the back solve one barrier per column). Jᵀ·force is added with atomics (as MuJoCo Warp does). M·x is computed in chunks of M's
rows dealt to the threads (:mod:`fightlab.kernels.newton_matvec`). The per-world vectors
(grad, search, mv) and rows (Jaref, jv) sit in a global scratch the block owns
(:mod:`fightlab.kernels.newton_rows`). The line search is MuJoCo Warp's pyramidal
``_linesearch_iterative_kernel`` as functions of the block (:mod:`fightlab.kernels.linesearch`,
its row evaluations imported). After a step, H is rebuilt and refactored whenever a row changed
state (or the step was below the line search's noise floor), in place of MuJoCo Warp's ±D·JᵀJ
update (with the switch "update", after a real step with a few flipped rows, the factor is
changed by one rank-1 update per row instead: :mod:`fightlab.kernels.newton_rank1`); otherwise
the stable fast path as MuJoCo Warp's: search kept, grad scaled by σ - α, no factorization,
qfrc_constraint recovered as Ma - qfrc_smooth - σ·grad at the end. Equal to MuJoCo Warp's up to float32 rounding (``tests/test_newton.py`` says how close). An instrumented
build (``stage_clock``, :mod:`fightlab.kernels.stage_clock`) records the cycles of each stage.

Not taken (:func:`newton_support` names the first reason; the caller falls back to MuJoCo
Warp's solver with that line): CG, elliptic cones, several trees, a dense Jacobian, the
discrete integrator, sleep, noslip, equality constraints, frictionloss, flex, an H over
:data:`SHARED_MAX` floats. No ``from __future__ import annotations``: tiles are sized by
closure values (see :mod:`fightlab.kernels._smem`).
"""

import functools
import sys
import weakref
from typing import Any

import numpy as np
import warp as wp

from mujoco_warp._src import smooth
from mujoco_warp._src import solver as mjw_solver
from mujoco_warp._src import types as mjw_types

from fightlab.kernels import newton_rows as R
from fightlab.kernels import stage_clock as C
from fightlab.kernels.linesearch import block_sum2, linesearch_func
from fightlab.kernels.newton_matvec import matvec_funcs, mulm_chunks
from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES, prepare_func, refactor_func
from fightlab.kernels.newton_rank1 import (FORWARD_SLOT, MAX_FLIPS, RTOL, count_funcs, extra_floats, list_update_func,
                                           path_func)
from fightlab.kernels.newton_tree import depth_schedule, level_schedule, rows_are_chains

__all__ = ["BLOCK_DIM", "SHARED_MAX", "built_fixes", "newton_support", "newton_solve", "shared_floats", "solve_kernel",
           "stock_solve", "use_newton", "disable_newton", "is_newton_enabled"]

#: threads per world (one block per world)
BLOCK_DIM = 64
#: the most shared floats the kernel may use (48 KiB, CUDA's default per-block limit)
SHARED_MAX = 12288
SHARED_ROUND = 256
#: threads per SM the kernel's registers are capped for (``launch_bounds``): 8 blocks of 64
_MIN_THREADS = 512
_FIRST_THREADS = 320

vec5 = mjw_types.vec5
_S_INIT, _S_UPDATE, _S_MVJV, _S_BRACKET, _S_STEP, _S_END = (C.STAGES.index(s) for s in (
    "init", "constraint update", "M.s J.s", "ls bracket", "step", "end"))


_sync_threads = R.sync_threads


# ----------------------------------------------------------------------------------------------
# the Hessian in shared memory (fightlab.kernels.newton_hessian): lower triangle packed by rows,
# tri(i, j) = i(i+1)/2 + j, rows 0..nv-1 the matrix, row nv the right-hand side (the gradient)


def shared_floats(nv: int, update: bool = False, scratch: int = 0) -> int:
    """Shared floats the kernel needs for ``nv`` DOF: the packed triangle with its extra row (and
    with ``update`` the rank-1 path's vector and flip list, :mod:`fightlab.kernels.newton_rank1`,
    then ``scratch`` floats past them: M·x's chunk sums when the factor must be kept), rounded up to
    :data:`SHARED_ROUND`; compare with :data:`SHARED_MAX`."""
    need = (nv + 1) * (nv + 2) // 2 + ((extra_floats(nv) + scratch) if update else 0)
    return -(-need // SHARED_ROUND) * SHARED_ROUND


@functools.cache
def _update_func(capacity: int, profile: bool, fixes: tuple[str, ...], rank1: tuple = (RTOL, MAX_FLIPS)):
    """``update(...) -> (|grad|², |search|², newton_decrement, σ, fresh)``: the constraint update
    after a step α with noise floor ``floor``; when a row changed state or the step was noise
    (``fresh`` 1) qfrc_constraint and the gradient (:func:`newton_hessian.prepare_func`), then with
    "update" and ≤ ``rank1[1]`` flipped rows after a real step the rank-1 path
    (:mod:`fightlab.kernels.newton_rank1`, refusal bound ``rank1[0]``), else (or when it refuses) H
    rebuilt and refactored (:func:`newton_hessian.refactor_func`); else the fast path (``newton_rows.stale``)."""
    upd = "update" in fixes
    prepare, refactor = prepare_func(profile), refactor_func(capacity, profile, fixes)
    list_update, path = list_update_func(capacity), path_func(capacity, profile, "depth" in fixes, rank1[0])
    max_flips, (read_count, clear_count) = int(rank1[1]), count_funcs(capacity, upd)
    _start, mark, _count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def update(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, ne: int, nf: int, nefc: int,
               alpha: float, floor: float, sums: wp.vec3, sigma: float, M_rownnz: wp.array[int], M_rowadr: wp.array[int],
               M_hinit_i: wp.array[int], M_colind: wp.array[int], plan: wp.array[int], M_elemid: wp.array2d[int],
               M_in: wp.array2d[float], qfrc_smooth_in: wp.array2d[float],
               efc_Ma_in: wp.array2d[float], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
               J_colind: wp.array3d[int], J: wp.array3d[float], efc_D_in: wp.array2d[float],
               efc_frictionloss_in: wp.array2d[float], Jaref_in: wp.array2d[float], grad: wp.array2d[float],
               search: wp.array2d[float], efc_force_out: wp.array2d[float], efc_state_out: wp.array2d[int],
               qfrc_constraint_out: wp.array2d[float], prof: wp.array2d[wp.int64]) -> vec5:
        if wp.static(upd):
            local = list_update(sh, worldid, tid, nthread, nv, ne, nf, nefc, efc_D_in, efc_frictionloss_in,
                                Jaref_in, efc_force_out, efc_state_out, qfrc_constraint_out)
        else:
            local = R.update_constraint(worldid, tid, nthread, nv, ne, nf, nefc, efc_D_in, efc_frictionloss_in,
                                        Jaref_in, efc_force_out, efc_state_out, qfrc_constraint_out)
        changed = block_sum2(wp.vec2(local, 0.0))[0]  # a reduction: also the barrier
        mark(prof, worldid, tid, _S_UPDATE)
        if changed > 0.0 or wp.abs(alpha) < floor:
            nflip = read_count(sh, nv)  # every thread reads it before prepare's barriers
            grad_dot = prepare(worldid, tid, nthread, nv, nefc, qfrc_smooth_in, efc_Ma_in, J_rownnz, J_rowadr,
                               J_colind, J, efc_force_out, grad, qfrc_constraint_out, prof)
            clear_count(sh, tid, nv)  # for the next update's list
            p = wp.vec3(0.0)
            if wp.static(upd):
                if nflip <= max_flips and wp.abs(alpha) >= floor:
                    p = path(sh, worldid, tid, nthread, nv, nflip, M_rownnz, M_rowadr, M_colind, plan, J_rownnz,
                             J_rowadr, J_colind, J, efc_D_in, grad, search, prof)
            if p[0] == 0.0:
                q = refactor(sh, worldid, tid, nthread, nv, nefc, M_rownnz, M_rowadr, M_hinit_i, M_colind, plan,
                             M_elemid, M_in, J_rownnz, J_rowadr, J_colind, J, efc_D_in, efc_state_out, grad, search,
                             prof)
                p = wp.vec3(1.0, q[0], q[1])
            return vec5(grad_dot, p[1], p[2], 1.0, 1.0)
        f = R.stale(sums, sigma, alpha)
        return vec5(f[0], f[1], f[2], f[3], 0.0)

    return update


@functools.cache
def _iteration_func(capacity: int, profile: bool, fixes: tuple[str, ...], rank1: tuple = (RTOL, MAX_FLIPS)):
    """``iteration(...) -> (ls, u)``: one Newton iteration (``_solver_iteration``): M·search and
    J·search for a new direction, the line search, the step, the update (:func:`_update_func`)."""
    update, linesearch = _update_func(capacity, profile, fixes, rank1), linesearch_func(profile)
    _scale, _start_solve, mv_jv = matvec_funcs(capacity, "matvec" in fixes, "update" in fixes)
    _start, mark, _count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def iteration(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, ne: int, nf: int, nefc: int,
                  ls_iterations: int, tolerance: float, ls_tolerance: float, scale: float, u: vec5,
                  M_rownnz: wp.array[int], M_rowadr: wp.array[int], M_hinit_i: wp.array[int],
                  M_colind: wp.array[int], plan: wp.array[int], M_elemid: wp.array2d[int],
                  M_mulm_rowadr: wp.array[int],
                  M_mulm_col: wp.array[int], M_mulm_madr: wp.array[int], qfrc_smooth_in: wp.array2d[float],
                  M_in: wp.array2d[float], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
                  J_colind: wp.array3d[int], J: wp.array3d[float], efc_D_in: wp.array2d[float],
                  efc_frictionloss_in: wp.array2d[float], grad: wp.array2d[float], search: wp.array2d[float],
                  mv: wp.array2d[float], jv: wp.array2d[float], Jaref: wp.array2d[float], no_rows: wp.array2d[float],
                  qacc_out: wp.array2d[float], qfrc_constraint_out: wp.array2d[float],
                  efc_force_out: wp.array2d[float], efc_state_out: wp.array2d[int], efc_Ma_out: wp.array2d[float],
                  prof: wp.array2d[wp.int64]):
        _sync_threads()
        if u[4] > 0.0:  # a new search direction: mv = M·search, jv = J·search
            mv_jv(sh, worldid, tid, nthread, nv, nefc, plan, M_mulm_rowadr, M_mulm_col, M_mulm_madr, M_in,
                  J_rownnz, J_rowadr, J_colind, J, search, mv, jv, no_rows)
            _sync_threads()
        mark(prof, worldid, tid, _S_MVJV)
        ls = linesearch(worldid, tid, nthread, nv, ne, nf, nefc, ls_iterations, tolerance, ls_tolerance,
                        scale, u[1], search, efc_Ma_out, qfrc_smooth_in, mv, jv, Jaref, efc_D_in,
                        efc_frictionloss_in, prof)
        _sync_threads()
        mark(prof, worldid, tid, _S_BRACKET)
        R.step(worldid, tid, nthread, nv, nefc, ls[0], search, mv, jv, qacc_out, efc_Ma_out, Jaref)
        mark(prof, worldid, tid, _S_STEP)
        u_next = update(sh, worldid, tid, nthread, nv, ne, nf, nefc, ls[0], ls[3], wp.vec3(u[0], u[1], u[2]), u[3],
                        M_rownnz, M_rowadr, M_hinit_i, M_colind, plan, M_elemid, M_in, qfrc_smooth_in, efc_Ma_out,
                        J_rownnz, J_rowadr, J_colind, J,
                        efc_D_in, efc_frictionloss_in, Jaref, grad, search, efc_force_out, efc_state_out,
                        qfrc_constraint_out, prof)
        return ls, u_next

    return iteration


@functools.cache
def _kernel(capacity: int, block_dim: int = BLOCK_DIM, profile: bool = False, fixes: tuple[str, ...] = FIXES,
            rank1: tuple = (RTOL, MAX_FLIPS)):
    """The solve for ``capacity`` shared floats, ``block_dim`` threads per world, the stage clock, ``fixes``
    and the rank-1 path's (rtol, max_flips) ``rank1``, one kernel each; registers capped for 8 blocks of 64 per SM."""
    update, iteration = _update_func(capacity, profile, fixes, rank1), _iteration_func(capacity, profile, fixes, rank1)
    (start, mark, _count), clear_count = C.marker(profile), count_funcs(capacity, "update" in fixes)[1]
    (inertia_scale, start_solve, _mv_jv), bounds = matvec_funcs(capacity, "matvec" in fixes, "update" in fixes), (
        block_dim, max(1, (_MIN_THREADS if "bounds" in fixes else _FIRST_THREADS) // block_dim))

    @wp.kernel(module="unique", enable_backward=False, launch_bounds=bounds)
    def _newton(
        # Model:
        nv: int, M_rownnz: wp.array[int], M_rowadr: wp.array[int], M_hinit_i: wp.array[int], M_colind: wp.array[int],
        plan: wp.array[int], M_elemid: wp.array2d[int], M_mulm_rowadr: wp.array[int], M_mulm_col: wp.array[int],
        M_mulm_madr: wp.array[int], opt_tolerance: wp.array[float], opt_ls_tolerance: wp.array[float],
        # In:
        iterations: int, ls_iterations: int, qacc_mode: int, njmax: int,
        # Data in:
        ne_in: wp.array[int], nf_in: wp.array[int], nefc_in: wp.array[int], qacc_warmstart_in: wp.array2d[float],
        qacc_smooth_in: wp.array2d[float], qfrc_smooth_in: wp.array2d[float], M_in: wp.array2d[float],
        J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
        efc_D_in: wp.array2d[float], efc_aref_in: wp.array2d[float], efc_frictionloss_in: wp.array2d[float],
        # Scratch (nworld, nv) x 3, (nworld, njmax) x 2, (nworld, 0):
        grad: wp.array2d[float], search: wp.array2d[float], mv: wp.array2d[float],
        Jaref: wp.array2d[float], jv: wp.array2d[float], no_rows: wp.array2d[float],
        # Data out:
        qacc_out: wp.array2d[float], qfrc_constraint_out: wp.array2d[float], efc_force_out: wp.array2d[float], efc_state_out: wp.array2d[int],
        efc_Ma_out: wp.array2d[float], solver_niter_out: wp.array[int], overflow_out: wp.array[int], prof: wp.array2d[wp.int64],
    ):
        worldid, tid = wp.tid()
        nthread = wp.block_dim()
        start(prof, worldid, tid)
        sh = wp.tile_empty(shape=capacity, dtype=float, storage="shared")
        clear_count(sh, tid, nv)  # the flip count, before the first update's list (barriers come first)
        nefc, ne, nf = wp.min(njmax, nefc_in[worldid]), ne_in[worldid], nf_in[worldid]
        tolerance, ls_tolerance = R.per_world(opt_tolerance, worldid), R.per_world(opt_ls_tolerance, worldid)
        scale = inertia_scale(sh, worldid, tid, nthread, nv, M_rownnz, M_rowadr, M_in)
        start_solve(sh, worldid, tid, nthread, nv, nefc, qacc_mode, plan, M_mulm_rowadr, M_mulm_col, M_mulm_madr,
                    M_in, J_rownnz, J_rowadr, J_colind, J, qacc_warmstart_in, qacc_smooth_in, efc_aref_in, qacc_out,
                    efc_Ma_out, Jaref, solver_niter_out)
        mark(prof, worldid, tid, _S_INIT)
        u = update(sh, worldid, tid, nthread, nv, ne, nf, nefc, 0.0, 1.0, wp.vec3(0.0), 1.0, M_rownnz, M_rowadr,
                   M_hinit_i, M_colind, plan, M_elemid, M_in, qfrc_smooth_in, efc_Ma_out, J_rownnz, J_rowadr,
                   J_colind, J, efc_D_in, efc_frictionloss_in, Jaref, grad, search, efc_force_out, efc_state_out,
                   qfrc_constraint_out, prof)  # α 0: rebuild
        for it in range(iterations):
            ls, u = iteration(sh, worldid, tid, nthread, nv, ne, nf, nefc, ls_iterations, tolerance, ls_tolerance,
                              scale, u, M_rownnz, M_rowadr, M_hinit_i, M_colind, plan, M_elemid, M_mulm_rowadr,
                              M_mulm_col, M_mulm_madr, qfrc_smooth_in, M_in, J_rownnz, J_rowadr, J_colind, J, efc_D_in,
                              efc_frictionloss_in, grad, search, mv, jv, Jaref, no_rows, qacc_out, qfrc_constraint_out,
                              efc_force_out, efc_state_out, efc_Ma_out, prof)
            if R.done(tid, worldid, it, iterations, tolerance, scale, ls, wp.vec3(u[0], u[1], u[2]),
                      solver_niter_out, overflow_out):
                break
        _sync_threads()
        R.qfrc_from_grad(worldid, tid, nthread, nv, u[3], efc_Ma_out, qfrc_smooth_in, grad, qfrc_constraint_out)
        mark(prof, worldid, tid, _S_END)

    return _newton


# ----------------------------------------------------------------------------------------------
# what it takes, and the launch


def newton_support(m: Any, opt: Any = None) -> str | None:
    """None when :func:`newton_solve` takes the MuJoCo Warp model ``m`` with options ``opt``
    (default ``m.opt``), else the reason in one line (the caller falls back to MuJoCo Warp's
    solver and prints it). Reads a few model arrays on the host: call it once, at setup."""
    o = m.opt if opt is None else opt
    if int(o.solver) != int(mjw_types.SolverType.NEWTON):
        return f"solver {mjw_types.SolverType(int(o.solver)).name}: the single-launch solve does Newton only"
    if int(o.cone) != int(mjw_types.ConeType.PYRAMIDAL):
        return "elliptic friction cones: the single-launch solve takes pyramidal cones only"
    if int(m.ntree) != 1:
        return f"{int(m.ntree)} kinematic trees: the single-launch solve takes single-tree bodies only"
    if not m.is_sparse:
        return (f"dense constraint Jacobian (nv={m.nv}; jacobian 'auto' is dense up to 32 DOF): "
                "the single-launch solve reads the sparse one")
    if int(o.integrator) == int(mjw_types.IntegratorType.DISCRETE):
        return "the discrete integrator (effective-metric solve) is not taken"
    if int(o.enableflags) & int(mjw_types.EnableBit.SLEEP):
        return "sleep (island compaction) is not taken"
    if int(o.noslip_iterations) > 0:
        return f"noslip_iterations={int(o.noslip_iterations)}: the noslip pass is not taken"
    if int(m.neq) > 0 or int(m.nflex) > 0:
        return "equality constraints or flexes are not taken (untested rows)"
    if _has_frictionloss(m):
        return "frictionloss rows are not taken (untested rows)"
    if shared_floats(m.nv) > SHARED_MAX:
        return (f"nv={m.nv} needs {shared_floats(m.nv)} floats of shared memory, more than "
                f"SHARED_MAX={SHARED_MAX}")
    return None


_PLAN: dict[int, tuple[Any, bool, int, Any]] = {}  # id(m) -> (weakref to m, chains, M's chunks, plan)


def _plan(m: Any) -> tuple[bool, int, Any]:
    """(:func:`newton_tree.rows_are_chains` of ``m``, the number of M·x's chunks,
    the kernel's ``plan``: one int32 array on m's device, ``[o_levels, o_chunks, o_depth,
    o_forward]`` then :func:`newton_tree.level_schedule`'s table (3 zeros where the rows are not
    chains), :func:`newton_matvec.mulm_chunks`', :func:`newton_tree.depth_schedule`'s and the
    forward solve's (``level_schedule(..., rhs_only=True)``, 3 zeros where the rows are not
    chains), computed once (host reads: at setup, by :func:`use_newton`, or at the first
    :func:`newton_solve`)."""
    entry = _PLAN.get(id(m))
    if entry is None or entry[0]() is not m:
        ok = rows_are_chains(m)
        csr = (m.M_rownnz.numpy(), m.M_rowadr.numpy(), m.M_colind.numpy())
        levels = level_schedule(*csr) if ok else np.zeros(3, dtype=np.int32)
        forward = level_schedule(*csr, rhs_only=True) if ok else np.zeros(3, dtype=np.int32)
        chunks = mulm_chunks(m.M_mulm_rowadr.numpy())
        depths = depth_schedule(m.M_rownnz.numpy())
        parts = [levels, chunks, depths, forward]
        head = np.cumsum([len(parts)] + [len(t) for t in parts[:-1]]).astype(np.int32)
        assert len(head) == FORWARD_SLOT + 1
        table = np.concatenate([head, *parts])
        entry = _PLAN[id(m)] = (weakref.ref(m), ok, int(chunks[0]), wp.array(table, dtype=int, device=m.M_rownnz.device))
    return entry[1], entry[2], entry[3]


def _has_frictionloss(m: Any) -> bool:
    arrays = [m.dof_frictionloss] + ([m.tendon_frictionloss] if int(m.ntendon) > 0 else [])
    return any(a.size and bool(np.any(a.numpy() > 0.0)) for a in arrays)


def _qacc_mode(m: Any, d: Any) -> int:
    """0: qacc_smooth skipped (start from the warm start), 1: warm start when rows are present,
    2: qacc_smooth (warmstart disabled): ``_solve_init_dof``."""
    if smooth.skip_qacc_smooth(m, d):
        return 0
    return 2 if int(m.opt.disableflags) & int(mjw_types.DisableBit.WARMSTART) else 1


def _check_fixes(fixes: Any) -> None:
    """ValueError unless ``fixes`` is a tuple (or list) of names in :data:`newton_hessian.FIXES`."""
    if not isinstance(fixes, (tuple, list)) or not set(fixes) <= set(FIXES):
        raise ValueError(f"fixes must be a tuple, a subset of {FIXES}, got {fixes!r}")


def built_fixes(m: Any, fixes: tuple[str, ...] = DEFAULT_FIXES) -> tuple[str, ...]:
    """The subset of ``fixes`` the kernel for the model ``m`` builds in, in
    :data:`newton_hessian.FIXES` order: the tree's ("tree", then "levels", "depth", "lean", which
    need it) only where m's rows are chains, "depth" and "lean" only where M's CSR arrays are
    contiguous (they read them raw) and "lean" not with "levels" (which replaces its factor),
    "matvec" only where M's chunks fit the tile, "update" with the tree only and only where its
    extra shared floats (with "matvec" also the chunks' sums, kept off the factor) fit
    :data:`SHARED_MAX`. Raises ValueError for unknown fixes."""
    _check_fixes(fixes)
    chains, nchunk, _ = _plan(m)
    tree = chains and "tree" in fixes
    raw = tree and all(a.is_contiguous for a in (m.M_colind, m.M_rowadr, m.M_rownnz))
    fit = nchunk <= shared_floats(m.nv)
    matvec = fit and "matvec" in fixes
    taken = {"tree": tree, "levels": tree, "depth": raw, "lean": raw and "levels" not in fixes, "matvec": fit,
             "update": tree and shared_floats(m.nv, True, nchunk if matvec else 0) <= SHARED_MAX}
    return tuple(f for f in FIXES if f in fixes and taken.get(f, True))


def solve_kernel(m: Any, block_dim: int = BLOCK_DIM, profile: bool = False,
                 fixes: tuple[str, ...] = DEFAULT_FIXES, rtol: float = RTOL, max_flips: int = MAX_FLIPS) -> Any:
    """The warp kernel :func:`newton_solve` launches for the model ``m``: the one of
    :func:`built_fixes` (``rtol``: the rank-1 path's refusal bound, :data:`newton_rank1.RTOL`;
    ``max_flips``: the most flipped rows it takes, 0 … :data:`newton_rank1.MAX_FLIPS`). Raises
    ValueError for unknown fixes, an ``rtol`` outside [0, 1) or a ``max_flips`` out of range."""
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.floating)) or not 0.0 <= rtol < 1.0:
        raise ValueError(f"rtol must be a number in [0, 1), got {rtol!r}")
    if isinstance(max_flips, bool) or not isinstance(max_flips, (int, np.integer)) or not 0 <= max_flips <= MAX_FLIPS:
        raise ValueError(f"max_flips must be an int in [0, {MAX_FLIPS}], got {max_flips!r}")
    built = built_fixes(m, fixes)
    scratch = _plan(m)[1] if "matvec" in built else 0
    return _kernel(shared_floats(m.nv, "update" in built, scratch), block_dim, profile, built,
                   (float(rtol), int(max_flips)))


def newton_solve(m: Any, d: Any, block_dim: int = BLOCK_DIM, stage_clock: Any = None,
                 fixes: tuple[str, ...] = DEFAULT_FIXES, rtol: float = RTOL, max_flips: int = MAX_FLIPS) -> None:
    """MuJoCo Warp's ``solver.solve`` for a model :func:`newton_support` takes, in one launch
    (none, a copy, without constraint slots). Writes qacc, qfrc_constraint, efc.force, efc.state,
    efc.Ma, solver_niter and the overflow bits, as ``solve`` does. ``block_dim``: threads per
    world (1 on a CPU without ``wp.config.enable_cpu_blocks``). ``stage_clock``: None, or an int64
    array ``(nworld, stage_clock.NCOLS)`` that the instrumented build adds each stage's cycles
    and the counts to (:mod:`fightlab.kernels.stage_clock`). ``fixes``: the subset of
    :data:`newton_hessian.FIXES` built in (:data:`newton_hessian.DEFAULT_FIXES` by default, the
    fastest measured; others to measure what each saves); ``rtol``, ``max_flips``: the rank-1
    path's refusal bound and most flipped rows (with "update"). Host values only: graph-capturable.
    """
    if d.njmax == 0 or m.nv == 0:
        wp.copy(d.qacc, d.qacc_smooth)
        d.solver_niter.fill_(0)
        return
    nworld, nv, njmax = d.nworld, m.nv, d.njmax
    dev = d.qacc.device
    grad, search, mv = (wp.empty((nworld, nv), dtype=float, device=dev) for _ in range(3))
    Jaref, jv = (wp.empty((nworld, njmax), dtype=float, device=dev) for _ in range(2))
    no_rows = wp.empty((nworld, 0), dtype=float, device=dev)
    profile = stage_clock is not None
    kernel = solve_kernel(m, block_dim, profile, fixes, rtol, max_flips)  # raises for unknown fixes
    if profile and tuple(stage_clock.shape) != (nworld, C.NCOLS):
        raise ValueError(f"stage_clock must have shape ({nworld}, {C.NCOLS}), got {tuple(stage_clock.shape)}")
    prof = stage_clock if profile else wp.empty((nworld, 0), dtype=wp.int64, device=dev)
    table = _plan(m)[2]
    wp.launch_tiled(
        kernel,
        dim=(nworld,),
        inputs=[nv, m.M_rownnz, m.M_rowadr, m.M_hinit_i, m.M_colind, table, m.M_elemid, m.M_mulm_rowadr, m.M_mulm_col, m.M_mulm_madr,
                m.opt.tolerance, m.opt.ls_tolerance, int(m.opt.iterations), int(m.opt.ls_iterations),
                _qacc_mode(m, d), njmax, d.ne, d.nf, d.nefc, d.qacc_warmstart, d.qacc_smooth, d.qfrc_smooth,
                d.M, d.efc.J_rownnz, d.efc.J_rowadr, d.efc.J_colind, d.efc.J, d.efc.D, d.efc.aref,
                d.efc.frictionloss, grad, search, mv, Jaref, jv, no_rows],
        outputs=[d.qacc, d.qfrc_constraint, d.efc.force, d.efc.state, d.efc.Ma, d.solver_niter, d.overflow,
                 prof],
        block_dim=block_dim,
    )


# ----------------------------------------------------------------------------------------------
# the switch: MuJoCo Warp's ``solver.solve`` (called by ``forward``) dispatched per model


#: the stock function, captured at import (before any patching)
stock_solve = mjw_solver.solve

_REGISTRY: dict[int, tuple[Any, int, dict]] = {}  # id(m) -> (weakref to m, block_dim, newton_solve's options)


def _entry(m: Any) -> tuple[Any, int, dict] | None:
    entry = _REGISTRY.get(id(m))
    return entry if entry is not None and entry[0]() is m else None


def _dispatch(m: Any, d: Any) -> None:
    """Replacement of ``solver.solve`` while a model is registered."""
    entry = _entry(m)
    if entry is None:
        stock_solve(m, d)
        return
    cpu_single = d.qacc.device.is_cpu and not wp.config.enable_cpu_blocks
    newton_solve(m, d, block_dim=1 if cpu_single else entry[1], **entry[2])


def _uninstall_if_unused() -> None:
    for key in [k for k, (ref, _, _) in _REGISTRY.items() if ref() is None]:
        del _REGISTRY[key]
    if not _REGISTRY and mjw_solver.solve is _dispatch:
        mjw_solver.solve = stock_solve


def use_newton(m: Any, *, block_dim: int = BLOCK_DIM, stage_clock: Any = None,
               fixes: tuple[str, ...] | None = None) -> str | None:
    """Switch the single-launch solve on for the MuJoCo Warp model ``m`` (after ``put_model``,
    before the first step or capture; others keep the stock solver). Returns None when on, else
    :func:`newton_support`'s reason, printed as one line on stderr: ``m`` keeps MuJoCo Warp's
    solver. A graph captured with the switch on keeps the kernel after it is turned off.
    ``stage_clock``, ``fixes``: the instrumented build, fewer fixes (:func:`newton_solve`)."""
    if not isinstance(block_dim, int) or block_dim < 1:
        raise ValueError(f"block_dim must be an int >= 1, got {block_dim!r}")
    if fixes is not None:
        _check_fixes(fixes)  # now, not at the first step
    reason = newton_support(m)
    if reason is not None:
        print(f"fightlab: MuJoCo Warp's solver runs, not the single-launch Newton solve: {reason}",
              file=sys.stderr, flush=True)
        return reason
    _plan(m)
    if mjw_solver.solve is stock_solve:
        mjw_solver.solve = _dispatch
    elif mjw_solver.solve is not _dispatch:
        raise RuntimeError(f"mujoco_warp._src.solver.solve was replaced by someone else ({mjw_solver.solve!r}); "
                           "refusing to patch over it")
    opts = ({} if stage_clock is None else {"stage_clock": stage_clock}) | ({} if fixes is None else {"fixes": fixes})
    _REGISTRY[id(m)] = (weakref.ref(m, lambda _r: _uninstall_if_unused()), block_dim, opts)
    return None


def disable_newton(m: Any) -> None:
    """Switch the single-launch solve off for ``m`` (no-op if it was not on)."""
    if _entry(m) is not None:
        del _REGISTRY[id(m)]
    _uninstall_if_unused()


def is_newton_enabled(m: Any) -> bool:
    """True while the single-launch solve is on for ``m``."""
    return _entry(m) is not None and mjw_solver.solve is _dispatch
