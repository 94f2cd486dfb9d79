"""The single-launch Newton solve's rank-1 path: the tree LDLᵀ of H updated, not rebuilt.

After a Newton step, H = M + Σ_quadratic D·JᵀJ changes by σ·D_r·J_rᵀJ_r for each row r whose
state flipped (σ = +1 into the quadratic state, -1 out of it). MuJoCo Warp (``solver.py``,
``_update_gradient_h_incremental_sparse``) adds and subtracts those terms and refactors H; the
single launch's default rebuilds H from scratch and refactors it. With the switch "update"
(:data:`fightlab.kernels.newton_hessian.FIXES`) and at most :data:`MAX_FLIPS` flipped rows, the
factor still in the shared tile is changed by one rank-1 up/downdate per row instead (Gill,
Golub, Murray and Saunders 1974, "Methods for modifying matrix factorizations", Math. Comp. 28,
method C1, on the leaf-first storage of :mod:`fightlab.kernels.newton_tree`; the float64 numpy
reference is :func:`fightlab.measure.newton_update.rank1_update`): a row's vector √D_r·J_r lies
on one root-to-body chain, so its update visits that chain's DOFs, leaf to root, one barrier per
DOF, the step DOF's ancestors dealt to the threads. Rows are applied in a fixed order (updates,
then downdates, each by row index). A downdated pivot that falls to :data:`RTOL` of its old
value or below refuses the path midway: H is then rebuilt and refactored as without the switch.
Then the new gradient is solved: forward by heights (:func:`newton_tree.forward_func`, the
table at ``plan[plan[FORWARD_SLOT]]``), back by depths, as the refactor's solve does.

Shared tile past the packed triangle and its gradient row ((nv + 1)(nv + 2) / 2 floats):
``w`` (nv floats, the update's vector), the flip count (1), the flip list (:data:`MAX_FLIPS`,
each ±(row + 1), the sign σ). No ``from __future__ import annotations``: tiles are sized by
closure values (see :mod:`fightlab.kernels._smem`).
"""

import functools

import warp as wp

from mujoco_warp._src import types as mjw_types

from fightlab.kernels import newton_rows as R
from fightlab.kernels import stage_clock as C
from fightlab.kernels._smem import shared_accessors
from fightlab.kernels.newton_hessian import search_sums_func
from fightlab.kernels.newton_tree import back_func, forward_func

__all__ = ["FORWARD_SLOT", "MAX_FLIPS", "RTOL", "count_funcs", "count_offset", "extra_floats", "list_update_func",
           "path_func", "scratch_offset", "sort_func", "w_offset"]

#: flipped rows the path takes at most (more: a rebuild). A row's update is one barrier per DOF
#: of its chain (≤ 25 on muscular-fast); a refactorization 89 barriers with up to 324 items each
MAX_FLIPS = 8
#: a downdated pivot at or below RTOL × its old value refuses the path (the factor would lose
#: the digits the downdate cancels; GGMS's method C1 is stable for updates, not for downdates)
RTOL = 1e-3
#: the kernel's ``plan[FORWARD_SLOT]`` is the offset of the forward table (``level_schedule(...,
#: rhs_only=True)``)
FORWARD_SLOT = 3

_QUADRATIC = int(mjw_types.ConstraintState.QUADRATIC.value)
_S_RANK1, _S_BACK = C.STAGES.index("rank-1 update"), C.STAGES.index("back solve")
_N_UPDATE = len(C.STAGES) + C.COUNTS.index("updates")
_N_REFUSE = len(C.STAGES) + C.COUNTS.index("refusals")
_sync_threads = R.sync_threads


def extra_floats(nv: int) -> int:
    """Shared floats the path needs past the triangle: ``w``, the count and the list."""
    return nv + 1 + MAX_FLIPS


@wp.func
def w_offset(nv: int) -> int:
    """First tile float of ``w``: past the packed triangle and its gradient row."""
    return ((nv + 1) * (nv + 2)) >> 1


@wp.func
def count_offset(nv: int) -> int:
    """The flip count's tile float (the list follows it)."""
    return w_offset(nv) + nv


@wp.func
def scratch_offset(nv: int) -> int:
    """First tile float past the rank-1 region (:func:`extra_floats` of them), where other stages'
    scratch leaves the factor and the list alone."""
    return count_offset(nv) + 1 + MAX_FLIPS


_INC = """
#if defined(__CUDA_ARCH__)
    return atomicAdd(sh.data.ptr + i, 1.0f);
#else
    float old = sh.data.ptr[i];
    sh.data.ptr[i] = old + 1.0f;
    return old;
#endif
"""


@functools.cache
def _increment_func(capacity: int):
    """``inc(sh, i) -> old``: ``sh[i] += 1`` returning the old value, atomic on CUDA; on the CPU a
    block's threads are fibers that switch only at barriers, so a plain add is atomic there."""

    @wp.func_native(snippet=_INC)
    def inc(sh: wp.tile[float, capacity], i: int) -> float: ...

    return inc


@functools.cache
def count_funcs(capacity: int, on: bool = True):
    """``(read, clear)``: ``read(sh, nv) -> int`` the flip count, ``clear(sh, tid, nv)`` thread 0
    zeroes it (the caller places the barriers); with ``on`` False, 0 and nothing (no rank-1 path)."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def read(sh: Tile, nv: int) -> int:
        if wp.static(on):
            return int(_ld(sh, count_offset(nv)))
        return 0

    @wp.func
    def clear(sh: Tile, tid: int, nv: int):
        if wp.static(on):
            if tid == 0:
                _st(sh, count_offset(nv), 0.0)

    return read, clear


@functools.cache
def list_update_func(capacity: int):
    """``update(sh, worldid, tid, nthread, nv, ne, nf, nefc, ...) -> changed``: the constraint
    update of ``newton_rows.update_constraint`` that also lists the rows whose quadratic state
    flipped (count and list past the triangle; the count must be 0 on entry). Returns this
    thread's count of rows that changed state."""
    _ld, _st = shared_accessors(capacity)
    inc = _increment_func(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def update(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, ne: int, nf: int, nefc: int,
               efc_D_in: wp.array2d[float], efc_frictionloss_in: wp.array2d[float], Jaref_in: wp.array2d[float],
               efc_force_out: wp.array2d[float], efc_state_out: wp.array2d[int],
               qfrc_constraint_out: wp.array2d[float]) -> float:
        o_cnt = count_offset(nv)
        for dofid in range(tid, nv, nthread):
            qfrc_constraint_out[worldid, dofid] = 0.0
        changed = float(0.0)
        for efcid in range(tid, nefc, nthread):
            s = R.update_row(worldid, efcid, ne, nf, efc_D_in, efc_frictionloss_in, Jaref_in, efc_force_out,
                             efc_state_out)
            if s[0] != s[1]:
                changed += 1.0
                if s[0] == _QUADRATIC or s[1] == _QUADRATIC:
                    slot = int(inc(sh, o_cnt))
                    if slot < MAX_FLIPS:
                        _st(sh, o_cnt + 1 + slot, wp.where(s[1] == _QUADRATIC, 1.0, -1.0) * float(efcid + 1))
        return changed

    return update


@functools.cache
def sort_func(capacity: int):
    """``sort(sh, o_list, n)``: the n entries from ``o_list`` on in their fixed order (updates, then
    downdates, each by row: the same rank-1 changes in the same order whatever order the atomics
    listed them in); one thread."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def after(u: float, v: float) -> bool:
        """Entry u goes after v: a downdate after an update, else the higher row (exact: no
        arithmetic on the entries, which are ±(row + 1))."""
        if (u > 0.0) != (v > 0.0):
            return u < 0.0
        return wp.abs(u) > wp.abs(v)

    @wp.func
    def sort(sh: Tile, o_list: int, n: int):
        for i in range(1, n):
            v = _ld(sh, o_list + i)
            j = i - 1
            while j >= 0:
                u = _ld(sh, o_list + j)
                if not after(u, v):
                    break
                _st(sh, o_list + j + 1, u)
                j -= 1
            _st(sh, o_list + j + 1, v)

    return sort


@functools.cache
def _load_w_func(capacity: int):
    """``load_w(sh, worldid, tid, nthread, o_w, r, kd, M_*, J_*, efc_D_in)``."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def load_w(sh: Tile, worldid: int, tid: int, nthread: int, o_w: int, r: int, kd: int, M_rownnz: wp.array[int],
               M_rowadr: wp.array[int], M_colind: wp.array[int], J_rownnz: wp.array2d[int],
               J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
               efc_D_in: wp.array2d[float]):
        """w = √D_r·J_r on the chain of DOF kd (zero elsewhere on it), two barriers."""
        n = M_rownnz[kd] - 1
        madr = M_rowadr[kd]
        for i in range(tid, n + 1, nthread):
            _st(sh, o_w + wp.where(i < n, M_colind[madr + wp.min(i, n - 1)], kd), 0.0)
        _sync_threads()
        sd = wp.sqrt(efc_D_in[worldid, r])
        adr = J_rowadr[worldid, r]
        for i in range(tid, J_rownnz[worldid, r], nthread):
            _st(sh, o_w + J_colind[worldid, 0, adr + i], sd * J[worldid, 0, adr + i])
        _sync_threads()

    return load_w


@functools.cache
def _chain_func(capacity: int, rtol: float):
    """``chain(sh, tid, nthread, o_w, kd, sigma, M_*) -> ok``."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def chain(sh: Tile, tid: int, nthread: int, o_w: int, kd: int, sigma: float, M_rownnz: wp.array[int],
              M_rowadr: wp.array[int], M_colind: wp.array[int]) -> bool:
        """One row's update, DOF kd to the root (GGMS C1; one barrier per step with p ≠ 0);
        False, after a barrier, when a downdated pivot falls to rtol of its old value or below."""
        s = sigma
        k = kd
        while k >= 0:
            rowk = (k * (k + 1)) >> 1
            na = M_rownnz[k] - 1
            aadr = M_rowadr[k]
            p = _ld(sh, o_w + k)
            if p != 0.0:
                d = _ld(sh, rowk + k)
                d_new = d + s * p * p
                if not (d_new > rtol * d):
                    _sync_threads()  # every thread has read d and p before the caller overwrites the tile
                    return False
                beta = s * p / d_new
                s = s * d / d_new
                for i in range(tid, na, nthread):  # k's ancestors: distinct entries, one thread each
                    a = M_colind[aadr + i]
                    l_ka = _ld(sh, rowk + a) / d
                    wa = _ld(sh, o_w + a) - p * l_ka
                    _st(sh, o_w + a, wa)
                    _st(sh, rowk + a, (l_ka + beta * wa) * d_new)
                _sync_threads()
                if tid == 0:  # after the barrier: every thread has read d
                    _st(sh, rowk + k, d_new)
            k = wp.where(na > 0, M_colind[aadr + wp.max(na - 1, 0)], -1)
        return True

    return chain


@functools.cache
def _flips_func(capacity: int, rtol: float):
    """``flips(sh, worldid, tid, nthread, nv, nflip, M_*, J_*, efc_D_in) -> ok``: the listed rows'
    rank-1 changes applied to the factor in the tile; False when a downdate was refused (the
    factor is then half-changed: the caller refactors)."""
    _ld, _st = shared_accessors(capacity)
    sort, load_w, chain = sort_func(capacity), _load_w_func(capacity), _chain_func(capacity, rtol)
    Tile = wp.tile[float, capacity]

    @wp.func
    def flips(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nflip: int, M_rownnz: wp.array[int],
              M_rowadr: wp.array[int], M_colind: wp.array[int], J_rownnz: wp.array2d[int],
              J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
              efc_D_in: wp.array2d[float]) -> bool:
        o_w, o_list = w_offset(nv), count_offset(nv) + 1
        if tid == 0:
            sort(sh, o_list, nflip)
        for f in range(nflip):
            _sync_threads()  # the sort, or the last flip's reads of w, done
            v = _ld(sh, o_list + f)
            r = int(wp.abs(v)) - 1
            adr = J_rowadr[worldid, r]
            kd = int(-1)  # the row's deepest DOF: its chain is kd's path to the root
            for i in range(J_rownnz[worldid, r]):
                kd = wp.max(kd, J_colind[worldid, 0, adr + i])
            if kd >= 0:
                load_w(sh, worldid, tid, nthread, o_w, r, kd, M_rownnz, M_rowadr, M_colind, J_rownnz, J_rowadr,
                       J_colind, J, efc_D_in)
            if not chain(sh, tid, nthread, o_w, kd, wp.where(v > 0.0, 1.0, -1.0), M_rownnz, M_rowadr, M_colind):
                return False
        _sync_threads()
        return True

    return flips


@functools.cache
def path_func(capacity: int, profile: bool, host_depth: bool, rtol: float = RTOL):
    """``path(sh, worldid, tid, nthread, nv, nflip, M_*, plan, J_*, efc_D_in, grad, search, prof)
    -> (ok, |search|², gradᵀH⁻¹grad)``: after :func:`newton_hessian.prepare_func` (grad
    written), the listed flips applied to the factor, the gradient solved, search = -H⁻¹·grad;
    ok 0 when a downdate was refused (nothing else written but the tile: refactor).
    ``host_depth``: the back substitution by the depth table (the "depth" switch)."""
    _ld, _st = shared_accessors(capacity)
    flips = _flips_func(capacity, rtol)
    forward, back = forward_func(capacity, FORWARD_SLOT), back_func(capacity, host_depth)
    search_sums = search_sums_func(capacity)
    _start, mark, count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def path(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nflip: int, M_rownnz: wp.array[int],
             M_rowadr: wp.array[int], M_colind: wp.array[int], plan: wp.array[int], J_rownnz: wp.array2d[int],
             J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
             efc_D_in: wp.array2d[float], grad: wp.array2d[float], search: wp.array2d[float],
             prof: wp.array2d[wp.int64]) -> wp.vec3:
        if not flips(sh, worldid, tid, nthread, nv, nflip, M_rownnz, M_rowadr, M_colind, J_rownnz, J_rowadr,
                     J_colind, J, efc_D_in):
            count(prof, worldid, tid, _N_REFUSE)
            return wp.vec3(0.0)
        rhs = (nv * (nv + 1)) >> 1
        for i in range(tid, nv, nthread):
            _st(sh, rhs + i, grad[worldid, i])
        forward(sh, tid, nthread, plan)  # a barrier first
        back(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)
        mark(prof, worldid, tid, _S_RANK1)
        s = search_sums(sh, worldid, tid, nthread, nv, grad, search)
        mark(prof, worldid, tid, _S_BACK)
        count(prof, worldid, tid, _N_UPDATE)
        return wp.vec3(1.0, s[0], s[1])

    return path
