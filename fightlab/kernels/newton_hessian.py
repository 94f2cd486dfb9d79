"""The single-launch Newton solve's Hessian in shared memory: assembly, LDLᵀ, search direction.

H = M + Σ_quadratic D·JᵀJ, lower triangle packed by rows, ``tri(i, j) = i(i+1)/2 + j``, rows 0 …
nv-1 the matrix, row nv the right-hand side (the gradient), in one block's shared tile; used by
:mod:`fightlab.kernels.newton` (one thread block per world). Each builder takes the tile's
``capacity`` (floats) and ``profile`` (the stage clock of :mod:`fightlab.kernels.stage_clock`).
Sources: ``mujoco_warp/_src/solver.py`` (``_update_gradient_init_h_sparse`` (M densified by
``M_hinit_i`` / ``M_colind``), ``_JTDACJ_sparse``, ``_cholesky_factorize_solve``), mujoco-warp 4.0.
No ``from __future__ import annotations``: tiles are sized by closure values.
"""

import functools

import warp as wp

from mujoco_warp._src import types as mjw_types

from fightlab.kernels import newton_rows as R
from fightlab.kernels import stage_clock as C
from fightlab.kernels._smem import shared_accessors, shared_atomic_add
from fightlab.kernels.linesearch import block_sum2
from fightlab.kernels.newton_tree import tree_solve_func

__all__ = ["DEFAULT_FIXES", "FIXES", "prepare_func", "refactor_func", "search_sums_func"]

#: the kernel's fixes of its first CUDA build, each switchable for an A/B in one call: "bounds"
#: registers capped for 8 blocks of 64 per SM (:mod:`fightlab.kernels.newton`), "scatter" M
#: from its CSR entries (else row by row through ``M_elemid``), "pairs" JᵀDJ pairs started
#: apart (else every lane from pair 0), "ldlt" the factor's elements dealt evenly (else row i to
#: thread i mod nthread), "tree" the tree-sparse LDLᵀ (:mod:`fightlab.kernels.newton_tree`; taken
#: only where :func:`newton_tree.rows_are_chains`, else the dense one), "levels" its factor one
#: height per barrier from a host-built table (with "tree" only), "matvec" M·x in chunks of M's rows
#: dealt to the threads and the trace's diagonal gathered in parallel
#: (:mod:`fightlab.kernels.newton_matvec`; else a row, and the whole trace, per thread), "depth"
#: the tree's back substitution by a host-built table of the DOFs per depth, M's indices read raw
#: (with "tree" only, M's CSR arrays contiguous; else the deepest row found by a block reduction
#: and every DOF scanned per depth), "lean" the serial tree factor's items two at a time in one
#: straight block, decoded with an approximate root and M's indices read raw (with "tree" only,
#: not with "levels"; M's CSR arrays contiguous), "update" after a step that flipped at most
#: newton_rank1.MAX_FLIPS rows, the tree factor updated by one rank-1 change per flipped row instead of
#: a rebuild (:mod:`fightlab.kernels.newton_rank1`; with "tree" only; with "matvec" its chunk sums
#: move past the factor); which a model's kernel has: newton.built_fixes
FIXES = ("bounds", "scatter", "pairs", "ldlt", "tree", "levels", "matvec", "depth", "lean", "update")
#: the build :func:`fightlab.kernels.newton.newton_solve` uses unless told: the fastest measured
#: (data/results/newton.csv, an H100's stage clock at 1,024 worlds, k cycles per solve,
#: muscular-fast / simple: "tree" 784 / 228, + "depth" and "lean" 612 / 194; "levels" and
#: "matvec" made it slower, 994 with them)
DEFAULT_FIXES = ("bounds", "scatter", "pairs", "ldlt", "tree", "depth", "lean")

_QUADRATIC = int(mjw_types.ConstraintState.QUADRATIC.value)
_S_GRAD, _S_M, _S_JTDJ, _S_LDLT, _S_BACK = (C.STAGES.index(s) for s in (
    "qfrc + grad", "assemble M", "assemble JtDJ", "LDLt", "back solve"))
_N_REBUILD = len(C.STAGES) + C.COUNTS.index("rebuilds")
_sync_threads = R.sync_threads


@functools.cache
def _jtdj_func(capacity: int):
    """``jtdj``: H += D·JᵀJ of the quadratic rows (shared atomics), one row per thread."""
    _add = shared_atomic_add(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def jtdj(sh: Tile, worldid: int, tid: int, nthread: int, nefc: int, efc_D_in: wp.array2d[float],
             efc_state_in: wp.array2d[int], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
             J_colind: wp.array3d[int], J: wp.array3d[float]):
        """Each thread walks its row's pairs (a, b), b <= a, from pair ``tid mod npair`` on,
        cyclically: every contact row holds the root DOFs, so in step the lanes of a warp would
        all add to the same entries (a shared float atomic is a compare-and-swap loop on CUDA,
        one lane per round); started apart they hit different entries."""
        for efcid in range(tid, nefc, nthread):
            if efc_state_in[worldid, efcid] == _QUADRATIC:
                D = efc_D_in[worldid, efcid]
                adr = J_rowadr[worldid, efcid]
                n = J_rownnz[worldid, efcid]
                npair = n * (n + 1) // 2
                p0 = tid % wp.max(npair, 1)
                a = int((wp.sqrt(8.0 * float(p0) + 1.0) - 1.0) * 0.5)
                a = wp.where(a * (a + 1) // 2 > p0, a - 1, a)
                a = wp.where((a + 1) * (a + 2) // 2 <= p0, a + 1, a)
                b = p0 - a * (a + 1) // 2
                for _q in range(npair):
                    ca = J_colind[worldid, 0, adr + a]
                    cb = J_colind[worldid, 0, adr + b]
                    hi, lo = wp.max(ca, cb), wp.min(ca, cb)
                    _add(sh, hi * (hi + 1) // 2 + lo, D * J[worldid, 0, adr + a] * J[worldid, 0, adr + b])
                    b += 1
                    if b > a:
                        b = 0
                        a = wp.where(a + 1 == n, 0, a + 1)

    return jtdj


@functools.cache
def _jtdj_rows_func(capacity: int):
    """``jtdj`` as first built: every thread walks its row's pairs from (0, 0)."""
    _add = shared_atomic_add(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def jtdj(sh: Tile, worldid: int, tid: int, nthread: int, nefc: int, efc_D_in: wp.array2d[float],
             efc_state_in: wp.array2d[int], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
             J_colind: wp.array3d[int], J: wp.array3d[float]):
        for efcid in range(tid, nefc, nthread):
            if efc_state_in[worldid, efcid] == _QUADRATIC:
                D = efc_D_in[worldid, efcid]
                adr = J_rowadr[worldid, efcid]
                for a in range(J_rownnz[worldid, efcid]):
                    ca = J_colind[worldid, 0, adr + a]
                    va = D * J[worldid, 0, adr + a]
                    for b in range(a + 1):
                        cb = J_colind[worldid, 0, adr + b]
                        hi, lo = wp.max(ca, cb), wp.min(ca, cb)
                        _add(sh, hi * (hi + 1) // 2 + lo, va * J[worldid, 0, adr + b])

    return jtdj


@functools.cache
def _m_func(capacity: int, scatter: bool):
    """``put_m``: the triangle's M part (zeros where M has none), the CSR entries scattered
    (coalesced) or, as first built, each thread a row through ``M_elemid``."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def put_scatter(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_hinit_i: wp.array[int],
                    M_colind: wp.array[int], M_elemid: wp.array2d[int], M_in: wp.array2d[float]):
        for p in range(tid, nv * (nv + 1) // 2, nthread):
            _st(sh, p, 0.0)
        _sync_threads()
        for e in range(tid, M_colind.shape[0], nthread):
            i = M_hinit_i[e]
            _st(sh, i * (i + 1) // 2 + M_colind[e], M_in[worldid, e])

    @wp.func
    def put_rows(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_hinit_i: wp.array[int],
                 M_colind: wp.array[int], M_elemid: wp.array2d[int], M_in: wp.array2d[float]):
        for i in range(tid, nv, nthread):
            row = i * (i + 1) // 2
            for j in range(i + 1):
                e = M_elemid[i, j]
                _st(sh, row + j, wp.where(e >= 0, M_in[worldid, wp.max(e, 0)], 0.0))

    return put_scatter if scatter else put_rows


@functools.cache
def _assemble_func(capacity: int, profile: bool, fixes: tuple[str, ...]):
    """``assemble``: H = M + Σ_quadratic D·JᵀJ (lower), the gradient as row nv."""
    _ld, _st = shared_accessors(capacity)
    jtdj = _jtdj_func(capacity) if "pairs" in fixes else _jtdj_rows_func(capacity)
    put_m = _m_func(capacity, "scatter" in fixes)
    _start, mark, _count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def assemble(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nefc: int, M_hinit_i: wp.array[int],
                 M_colind: wp.array[int], M_elemid: wp.array2d[int], M_in: wp.array2d[float], grad_in: wp.array2d[float],
                 efc_D_in: wp.array2d[float], efc_state_in: wp.array2d[int], J_rownnz: wp.array2d[int],
                 J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
                 prof: wp.array2d[wp.int64]):
        """M (:func:`_m_func`), the gradient entries the ones this thread computed
        (:func:`newton_rows.grad`'s stride: no barrier needed before), then JᵀDJ."""
        for i in range(tid, nv, nthread):
            _st(sh, nv * (nv + 1) // 2 + i, grad_in[worldid, i])
        put_m(sh, worldid, tid, nthread, nv, M_hinit_i, M_colind, M_elemid, M_in)
        _sync_threads()
        mark(prof, worldid, tid, _S_M)
        jtdj(sh, worldid, tid, nthread, nefc, efc_D_in, efc_state_in, J_rownnz, J_rowadr, J_colind, J)
        _sync_threads()
        mark(prof, worldid, tid, _S_JTDJ)

    return assemble


@functools.cache
def _ldlt_func(capacity: int):
    """``ldlt``: H = LDLᵀ in place with the gradient row eliminated alongside."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def ldlt(sh: Tile, tid: int, nthread: int, nv: int):
        """Column k (one barrier each): the trailing rows i = k+1 … nv, columns k+1 … min(i,
        nv-1), ``H[i,j] -= H[i,k]/H[k,k]·H[j,k]``, as one flat list of elements walked row by row,
        element f to thread f mod nthread (balanced; the same arithmetic per element as a
        row-owned loop)."""
        for k in range(nv):
            _sync_threads()
            inv = 1.0 / _ld(sh, ((k * (k + 1)) >> 1) + k)
            i = k + 1
            row = (i * (i + 1)) >> 1  # tri(i, 0), kept as i moves on
            length = wp.min(i, nv - 1) - k
            m = nv - 1 - k
            count = ((m * (m + 1)) >> 1) + m  # the trailing elements
            off = tid
            e = tid
            while e < count:
                while off >= length:
                    off -= length
                    row += i + 1
                    i += 1
                    length = wp.min(i, nv - 1) - k
                j = k + 1 + off
                a = _ld(sh, row + k) * inv
                _st(sh, row + j, _ld(sh, row + j) - a * _ld(sh, ((j * (j + 1)) >> 1) + k))
                off += nthread
                e += nthread
        _sync_threads()

    return ldlt


@functools.cache
def _ldlt_rows_func(capacity: int):
    """``ldlt`` as first built: row i (and its whole update) to thread i mod nthread."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def ldlt(sh: Tile, tid: int, nthread: int, nv: int):
        for k in range(nv):
            _sync_threads()
            inv = 1.0 / _ld(sh, k * (k + 1) // 2 + k)
            first = k + 1 + ((tid - k - 1) % nthread + nthread) % nthread
            for i in range(first, nv + 1, nthread):
                row = i * (i + 1) // 2
                a = _ld(sh, row + k) * inv
                for j in range(k + 1, wp.min(i, nv - 1) + 1):
                    _st(sh, row + j, _ld(sh, row + j) - a * _ld(sh, j * (j + 1) // 2 + k))
        _sync_threads()

    return ldlt


@functools.cache
def _dense_solve_func(capacity: int, profile: bool, fixes: tuple[str, ...]):
    """``solve``: the dense LDLᵀ (:func:`_ldlt_func` or the row-owned first build), then back
    substitution (one barrier per column); x in the gradient row."""
    _ld, _st = shared_accessors(capacity)
    ldlt = _ldlt_func(capacity) if "ldlt" in fixes else _ldlt_rows_func(capacity)
    _start, mark, _count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def solve(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
              M_rowadr: wp.array[int], M_colind: wp.array[int], plan: wp.array[int], prof: wp.array2d[wp.int64]):
        rhs = nv * (nv + 1) // 2
        ldlt(sh, tid, nthread, nv)
        mark(prof, worldid, tid, _S_LDLT)
        for jj in range(nv):
            j = nv - 1 - jj
            if j % nthread == tid:
                _st(sh, rhs + j, _ld(sh, rhs + j) / _ld(sh, j * (j + 1) // 2 + j))
            _sync_threads()
            xj = _ld(sh, rhs + j)
            for k in range(tid, j, nthread):
                _st(sh, rhs + k, _ld(sh, rhs + k) - _ld(sh, j * (j + 1) // 2 + k) * xj)
        _sync_threads()

    return solve


@functools.cache
def _tree_solve_func(capacity: int, profile: bool, levels: bool, host_depth: bool, lean: bool):
    """``solve``: the tree-sparse LDLᵀ (``levels``: one height per barrier; ``lean``: two items at
    a time) and its back substitution (``host_depth``: by the host's depth table;
    :mod:`fightlab.kernels.newton_tree`); the stage clock puts both under "LDLt"."""
    tree_solve = tree_solve_func(capacity, levels, host_depth, lean)
    _start, mark, _count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def solve(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
              M_rowadr: wp.array[int], M_colind: wp.array[int], plan: wp.array[int], prof: wp.array2d[wp.int64]):
        tree_solve(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)
        mark(prof, worldid, tid, _S_LDLT)

    return solve


@functools.cache
def _factor_func(capacity: int, profile: bool, fixes: tuple[str, ...]):
    """``factor_solve`` for a shared tile of ``capacity`` floats."""
    _ld, _st = shared_accessors(capacity)
    solve = (_tree_solve_func(capacity, profile, "levels" in fixes, "depth" in fixes, "lean" in fixes) if "tree" in fixes
             else _dense_solve_func(capacity, profile, fixes))
    search_sums = search_sums_func(capacity)
    _start, mark, _count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def factor_solve(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
                     M_rowadr: wp.array[int], M_colind: wp.array[int], plan: wp.array[int],
                     grad_in: wp.array2d[float], search_out: wp.array2d[float],
                     prof: wp.array2d[wp.int64]) -> wp.vec2:
        """search = -H⁻¹·grad (the gradient row solved in place), returns (|search|²,
        gradᵀH⁻¹grad) over the block."""
        solve(sh, worldid, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan, prof)
        s = search_sums(sh, worldid, tid, nthread, nv, grad_in, search_out)
        mark(prof, worldid, tid, _S_BACK)
        return s

    return factor_solve


@functools.cache
def search_sums_func(capacity: int):
    """``search_sums(sh, worldid, tid, nthread, nv, grad_in, search_out) -> (|search|²,
    gradᵀH⁻¹grad)``: search = -x from the solved gradient row, the sums over the block."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def search_sums(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, grad_in: wp.array2d[float],
                    search_out: wp.array2d[float]) -> wp.vec2:
        rhs = nv * (nv + 1) // 2
        local = wp.vec2(0.0)
        for i in range(tid, nv, nthread):
            x = _ld(sh, rhs + i)
            search_out[worldid, i] = -x
            local += wp.vec2(x * x, grad_in[worldid, i] * x)
        return block_sum2(local)

    return search_sums


@functools.cache
def prepare_func(profile: bool = False):
    """``prepare(...) -> |grad|²``: after the constraint update and a barrier, qfrc_constraint =
    Jᵀ·force and the gradient (``_update_constraint``'s last stage, ``_update_gradient``'s first)."""
    _start, mark, _count = C.marker(profile)

    @wp.func
    def prepare(worldid: int, tid: int, nthread: int, nv: int, nefc: int, qfrc_smooth_in: wp.array2d[float],
                efc_Ma_in: wp.array2d[float], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
                J_colind: wp.array3d[int], J: wp.array3d[float], efc_force_in: wp.array2d[float],
                grad: wp.array2d[float], qfrc_constraint_out: wp.array2d[float], prof: wp.array2d[wp.int64]) -> float:
        R.qfrc_constraint(worldid, tid, nthread, nefc, J_rownnz, J_rowadr, J_colind, J, efc_force_in,
                          qfrc_constraint_out)
        _sync_threads()
        grad_dot = block_sum2(wp.vec2(R.grad(worldid, tid, nthread, nv, efc_Ma_in, qfrc_smooth_in,
                                             qfrc_constraint_out, grad), 0.0))[0]
        mark(prof, worldid, tid, _S_GRAD)
        return grad_dot

    return prepare


@functools.cache
def refactor_func(capacity: int, profile: bool = False, fixes: tuple[str, ...] = FIXES):
    """``refactor(...) -> (|search|², newton_decrement)``: after :func:`prepare_func`, the
    Hessian assembled from scratch, factored, and the search direction (``_update_gradient``'s
    rest) for a shared tile of ``capacity`` floats; counted as a rebuild by the stage clock."""
    assemble, factor_solve = _assemble_func(capacity, profile, fixes), _factor_func(capacity, profile, fixes)
    _start, mark, count = C.marker(profile)
    Tile = wp.tile[float, capacity]

    @wp.func
    def refactor(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nefc: int, M_rownnz: wp.array[int],
                 M_rowadr: wp.array[int], M_hinit_i: wp.array[int], M_colind: wp.array[int], plan: wp.array[int],
                 M_elemid: wp.array2d[int], M_in: wp.array2d[float], J_rownnz: wp.array2d[int],
                 J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
                 efc_D_in: wp.array2d[float], efc_state_in: wp.array2d[int], grad: wp.array2d[float],
                 search: wp.array2d[float], prof: wp.array2d[wp.int64]) -> wp.vec2:
        count(prof, worldid, tid, _N_REBUILD)
        assemble(sh, worldid, tid, nthread, nv, nefc, M_hinit_i, M_colind, M_elemid, M_in, grad, efc_D_in, efc_state_in,
                 J_rownnz, J_rowadr, J_colind, J, prof)
        return factor_solve(sh, worldid, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan, grad, search, prof)

    return refactor
