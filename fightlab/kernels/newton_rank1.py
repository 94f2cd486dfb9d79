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
on one root-to-body chain, so its update visits that chain's DOFs, leaf to root. Rows are applied
in a fixed order (updates, then downdates, each by row index), all at once as a wavefront: at
step t, row f is at depth dmax - (t - f) of its chain, one DOF behind row f - 1 wherever their
chains share DOFs (a DOF's row of L and its pivot change only when it is a step DOF), so every
DOF sees the rows in the listed order, the same arithmetic as one row after another, in dmax +
nflip steps of two barriers instead of one barrier per DOF of every row's chain; a step's (row,
ancestor) items are dealt to the threads. A downdated pivot that falls to :data:`RTOL` of its
old value or below refuses the path: H is then rebuilt and refactored as without the switch.
Then the new gradient is solved: forward by heights (:func:`newton_tree.forward_func`, the
table at ``plan[plan[FORWARD_SLOT]]``), back by depths, as the refactor's solve does.

Shared tile past the packed triangle and its gradient row ((nv + 1)(nv + 2) / 2 floats), per
listed row (:data:`MAX_FLIPS` slots each): ``w`` (nv floats, its vector), its chain by depth (nv),
its running sign and leaf depth; then the refusal flag, the flip count and the flip list (each
±(row + 1), the sign σ). No ``from __future__ import annotations``: tiles are sized by
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

__all__ = ["FORWARD_SLOT", "MAX_FLIPS", "RTOL", "chain_offset", "count_funcs", "count_offset", "extra_floats",
           "flag_offset", "list_update_func", "path_func", "scratch_offset", "sign_offset", "sort_func", "w_offset"]

#: flipped rows the path takes at most (more: a rebuild). The rows' updates take depth + rows
#: steps (≤ 33 on muscular-fast); a refactorization 89 barriers with up to 324 items each
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
    """Shared floats the path needs past the triangle: each listed row's ``w`` and chain (by
    depth), its running sign and leaf depth, the refusal flag, the count and the list."""
    return 2 * MAX_FLIPS * nv + 2 * MAX_FLIPS + 2 + 1 + MAX_FLIPS


@wp.func
def w_offset(nv: int) -> int:
    """First tile float of the rows' ``w`` (row f's at + f·nv): past the packed triangle and its
    gradient row."""
    return ((nv + 1) * (nv + 2)) >> 1


@wp.func
def chain_offset(nv: int) -> int:
    """Row f's chain at + f·nv: the DOF of its chain at each depth (-1 past its leaf)."""
    return w_offset(nv) + MAX_FLIPS * nv


@wp.func
def sign_offset(nv: int) -> int:
    """Row f's running sign (GGMS's σ, scaled as it goes) at + f, its leaf's depth at + MAX_FLIPS + f."""
    return chain_offset(nv) + MAX_FLIPS * nv


@wp.func
def flag_offset(nv: int) -> int:
    """The refusal flags of even and odd steps (two floats)."""
    return sign_offset(nv) + 2 * MAX_FLIPS


@wp.func
def count_offset(nv: int) -> int:
    """The flip count's tile float (the list follows it)."""
    return flag_offset(nv) + 2


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
def _step_funcs(capacity: int, rtol: float):
    """``(at, pivots)``: ``at(sh, nv, f, t, dmax) -> (k, depth)``, row f's DOF at step t (k -1
    when the row is idle, before or past its chain); ``pivots(sh, tid, nthread, nv, nflip, t,
    dmax)``: each active row's new pivot and sign (one thread a row) or the refusal flag."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def at(sh: Tile, nv: int, f: int, t: int, dmax: int) -> wp.vec2i:
        dd = dmax - (t - f)
        k = int(-1)
        if dd >= 0 and dd <= dmax:
            k = int(_ld(sh, chain_offset(nv) + f * nv + dd))
        return wp.vec2i(k, dd)

    @wp.func
    def pivots(sh: Tile, tid: int, nthread: int, nv: int, nflip: int, t: int, dmax: int):
        o_w, o_s = w_offset(nv), sign_offset(nv)
        for f in range(tid, nflip, nthread):
            k = at(sh, nv, f, t, dmax)[0]
            if k >= 0:
                p = _ld(sh, o_w + f * nv + k)
                if p != 0.0:
                    rowk = (k * (k + 1)) >> 1
                    d = _ld(sh, rowk + k)
                    s = _ld(sh, o_s + f)
                    d_new = d + s * p * p
                    if d_new > rtol * d:
                        _st(sh, rowk + k, d_new)
                        _st(sh, o_s + f, s * d / d_new)
                    else:
                        _st(sh, flag_offset(nv) + t % 2, 1.0)
        if tid == 0:  # the next step's flag: every thread read it (step t - 1's) before barrier 1
            _st(sh, flag_offset(nv) + (t + 1) % 2, 0.0)

    return at, pivots


@functools.cache
def _wave_func(capacity: int, rtol: float):
    """``wave(sh, tid, nthread, nv, nflip, dmax, M_*) -> ok``: every listed row's update at once, as
    a wavefront (step t: row f at depth dmax - (t - f)), two barriers a step."""
    _ld, _st = shared_accessors(capacity)
    at, pivots = _step_funcs(capacity, rtol)
    Tile = wp.tile[float, capacity]

    @wp.func
    def wave(sh: Tile, tid: int, nthread: int, nv: int, nflip: int, dmax: int, M_rowadr: wp.array[int],
             M_colind: wp.array[int]) -> bool:
        """GGMS C1 per row, leaf to root along its chain. A DOF's row of L and its pivot change only
        when the DOF is the step DOF, and row f reaches a DOF one step after row f - 1: each DOF
        sees the rows in the listed order, the same arithmetic as one row after another. False,
        after a barrier, when a downdated pivot falls to rtol of its old value or below."""
        o_w, o_s = w_offset(nv), sign_offset(nv)
        # a flag per step parity: step t's items may set theirs while a slower thread still reads
        # step t - 1's (cleared by flips(), then each by the step before its own)
        o_flag = flag_offset(nv)
        span = wp.max(dmax, 1)
        for t in range(dmax + nflip):
            # the step DOF's ancestors of every active row, one (row, ancestor) item a thread
            for j in range(tid, nflip * span, nthread):
                f = j // span
                i = j - f * span
                kd = at(sh, nv, f, t, dmax)
                k = kd[0]
                if k >= 0 and i < kd[1]:
                    p = _ld(sh, o_w + f * nv + k)
                    rowk = (k * (k + 1)) >> 1
                    d = _ld(sh, rowk + k)
                    s = _ld(sh, o_s + f)
                    d_new = d + s * p * p
                    if p != 0.0 and d_new > rtol * d:
                        beta = s * p / d_new
                        a = M_colind[M_rowadr[k] + i]
                        l_ka = _ld(sh, rowk + a) / d
                        wa = _ld(sh, o_w + f * nv + a) - p * l_ka
                        _st(sh, o_w + f * nv + a, wa)
                        _st(sh, rowk + a, (l_ka + beta * wa) * d_new)
                    if p != 0.0 and not (d_new > rtol * d):  # refused here: so the path is, whatever
                        _st(sh, o_flag + t % 2, 1.0)  # pivots' own d_new (CUDA's FMA may round it apart)
            _sync_threads()
            pivots(sh, tid, nthread, nv, nflip, t, dmax)  # read above, written now
            _sync_threads()
            if _ld(sh, o_flag + t % 2) != 0.0:
                return False
        return True

    return wave


@functools.cache
def _flips_func(capacity: int, rtol: float):
    """``flips(sh, worldid, tid, nthread, nv, nflip, M_*, J_*, efc_D_in) -> ok``: the listed rows'
    rank-1 changes applied to the factor in the tile; False when a downdate was refused (the
    factor is then half-changed: the caller refactors). First the list sorted, each listed row's
    w = √D_r·J_r, chain by depth, sign and leaf depth written and the refusal flags cleared (two
    barriers), then the wavefront (:func:`_wave_func`) up to the deepest leaf's depth."""
    _ld, _st = shared_accessors(capacity)
    sort, wave = sort_func(capacity), _wave_func(capacity, rtol)
    Tile = wp.tile[float, capacity]

    @wp.func
    def flips(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nflip: int, M_rownnz: wp.array[int],
              M_rowadr: wp.array[int], M_colind: wp.array[int], J_rownnz: wp.array2d[int],
              J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
              efc_D_in: wp.array2d[float]) -> bool:
        o_w, o_ch, o_s, o_list = w_offset(nv), chain_offset(nv), sign_offset(nv), count_offset(nv) + 1
        if tid == 0:  # the list in its order; the refusal flags clear before any step may set them
            sort(sh, o_list, nflip)
            _st(sh, flag_offset(nv), 0.0)
            _st(sh, flag_offset(nv) + 1, 0.0)
        for i in range(tid, nflip * nv, nthread):
            _st(sh, o_w + i, 0.0)
            _st(sh, o_ch + i, -1.0)
        _sync_threads()
        for f in range(tid, nflip, nthread):  # one thread a row: its chain, leaf to root
            v = _ld(sh, o_list + f)
            r = int(wp.abs(v)) - 1
            adr = J_rowadr[worldid, r]
            kd = int(-1)  # the row's deepest DOF: its chain is kd's path to the root
            for i in range(J_rownnz[worldid, r]):
                kd = wp.max(kd, J_colind[worldid, 0, adr + i])
            _st(sh, o_s + f, wp.where(v > 0.0, 1.0, -1.0))
            _st(sh, o_s + MAX_FLIPS + f, float(wp.where(kd >= 0, M_rownnz[wp.max(kd, 0)] - 1, -1)))
            k = kd
            while k >= 0:
                na = M_rownnz[k] - 1  # k's ancestors: its depth
                _st(sh, o_ch + f * nv + na, float(k))
                k = wp.where(na > 0, M_colind[M_rowadr[k] + wp.max(na - 1, 0)], -1)
        for f in range(nflip):
            r = int(wp.abs(_ld(sh, o_list + f))) - 1
            sd = wp.sqrt(efc_D_in[worldid, r])
            adr = J_rowadr[worldid, r]
            for i in range(tid, J_rownnz[worldid, r], nthread):
                _st(sh, o_w + f * nv + J_colind[worldid, 0, adr + i], sd * J[worldid, 0, adr + i])
        _sync_threads()
        dmax = int(-1)  # the deepest leaf (-1: no row has a DOF)
        for f in range(nflip):
            dmax = wp.max(dmax, int(_ld(sh, o_s + MAX_FLIPS + f)))
        return wave(sh, tid, nthread, nv, nflip, dmax, M_rowadr, M_colind)

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
