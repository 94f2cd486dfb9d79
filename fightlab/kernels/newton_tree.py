"""The Newton Hessian's tree-sparse LDLᵀ: H = M + Σ D·JᵀJ factored leaf first, without fill.

When every constraint row of a single-tree body is supported on one root-to-body chain (contacts
with the world or along one branch, joint limits; no contact between two branches, no tendon,
no equality row), JᵀDJ adds only (DOF, ancestor) entries: H has M's sparsity, and eliminating
the DOFs from the last (leaves) to the first (root) creates no fill (MuJoCo's ``mj_factorI``
order). Step k (one barrier each) updates ``H[a, b] -= H[k, a]·H[k, b] / H[k, k]`` for the
ancestors a >= b of k (row k of M's CSR pattern, ``M_colind``), and the gradient row alongside;
the back substitution ``x_k = (g'_k - Σ_a H[k, a]·x_a) / H[k, k]`` runs by depth (all DOFs of a
depth at once, one barrier per depth). Works on the packed shared triangle of
:mod:`fightlab.kernels.newton_hessian`; :func:`rows_are_chains` is the host check.

The level-scheduled factor (``levels``): DOFs of equal height (the longest path down to a leaf)
have no ancestor relation, so they are eliminated together, one barrier per height (muscular-fast
25 instead of 89, simple 19 instead of 43). Every entry an elimination changes belongs to a
strict ancestor, so no entry read at a height is written at it; an entry several DOFs of one
height change is owned by one thread, which subtracts their terms in a fixed order (deterministic,
no atomics). What to update comes from a host-built table (:func:`level_schedule`), read in
order: no pair decoding, no CSR gathers in the loop.
"""

import functools
from typing import Any

import numpy as np
import warp as wp

from fightlab.kernels import newton_rows as R
from fightlab.kernels._smem import shared_accessors

__all__ = ["depth_schedule", "factor_critical_path", "forward_func", "level_parts", "level_schedule",
           "rows_are_chains", "tree_solve_func", "back_func"]

_sync_threads = R.sync_threads


def rows_are_chains(m: Any) -> bool:
    """True when every constraint row MuJoCo Warp can build for the single-tree model ``m`` lies
    on one root-to-body chain: no predefined geom pair, no tendon, and no two geoms of bodies on
    different branches (neither an ancestor of the other, the world excluded) that may collide by
    contype/conaffinity. Reads model arrays on the host: call it at setup."""
    if int(m.npair) > 0 or int(m.ntendon) > 0 or int(m.neq) > 0:
        return False
    parent = m.body_parentid.numpy()
    body, ctype, caff = m.geom_bodyid.numpy(), m.geom_contype.numpy(), m.geom_conaffinity.numpy()

    def chain(b: int) -> set:
        out = set()
        while b > 0:
            out.add(b)
            b = int(parent[b])
        return out

    chains = {int(b): chain(int(b)) for b in np.unique(body)}
    for g1 in range(len(body)):
        for g2 in range(g1 + 1, len(body)):
            b1, b2 = int(body[g1]), int(body[g2])
            if b1 == 0 or b2 == 0 or not ((ctype[g1] & caff[g2]) or (ctype[g2] & caff[g1])):
                continue
            if b1 not in chains[b2] and b2 not in chains[b1]:
                return False
    return True


def level_schedule(rownnz: np.ndarray, rowadr: np.ndarray, colind: np.ndarray, rhs_only: bool = False) -> np.ndarray:
    """The level-scheduled factor's table for M's CSR pattern (host arrays of a single-tree model,
    ``M_rownnz`` / ``M_rowadr`` / ``M_colind``, row k = k's ancestors ascending, then k), one int32
    array: ``[L, T, C]``, then ``lvl`` (L+1: each height's first target), ``tgt_e`` (T: the packed
    triangle index a target entry has), ``tgt_adr`` (T+1: its first term), ``con_ab`` (C:
    ``ia | ib << 16``, the two factor entries of a term) and ``con_kk`` (C: the pivot's diagonal
    index; ``-(kk + 1)`` for a gradient term, which scales the gradient entry first, as
    :func:`tree_solve_func`'s serial factor does). Targets of a height are sorted by term count
    (most first: a warp's lanes get similar work), a target's terms by pivot, highest DOF first.
    ``rhs_only``: the gradient's terms only, a forward solve y = L⁻¹·g on a factor already made
    (the rank-1 update's, :mod:`fightlab.kernels.newton_rank1`). Raises ValueError when an index
    does not fit 16 bits."""
    nv = len(rownnz)
    rhs = nv * (nv + 1) // 2
    if rhs + nv >= 1 << 16:
        raise ValueError(f"nv={nv}: the triangle's indices do not fit the table's 16 bits")
    anc = [[int(c) for c in colind[rowadr[k]:rowadr[k] + rownnz[k] - 1]] for k in range(nv)]
    height = np.zeros(nv, dtype=np.int64)
    for k in range(nv - 1, -1, -1):
        if anc[k]:
            p = anc[k][-1]
            height[p] = max(height[p], height[k] + 1)
    nlevel = int(height.max()) + 1 if nv else 0
    terms: list[dict[int, list[tuple[int, int, int]]]] = [{} for _ in range(nlevel)]
    for k in range(nv - 1, -1, -1):  # pivot order within a target: highest DOF first
        rowk, t = (k * (k + 1)) >> 1, terms[height[k]]
        for i, ca in enumerate(anc[k]):
            for cb in ([] if rhs_only else anc[k][:i + 1]):
                t.setdefault(((ca * (ca + 1)) >> 1) + cb, []).append((rowk + ca, rowk + cb, rowk + k))
            t.setdefault(rhs + ca, []).append((rowk + ca, rhs + k, -(rowk + k + 1)))
    lvl, tgt_e, tgt_adr, ab, kk = [0], [], [0], [], []
    for t in terms:
        for e, cs in sorted(t.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            tgt_e.append(e)
            for ia, ib, pivot in cs:
                ab.append(ia | (ib << 16))
                kk.append(pivot)
            tgt_adr.append(len(ab))
        lvl.append(len(tgt_e))
    head = [nlevel, len(tgt_e), len(ab)]
    return np.asarray(head + lvl + tgt_e + tgt_adr + ab + kk, dtype=np.int32)


def depth_schedule(rownnz: np.ndarray) -> np.ndarray:
    """The back substitution's table for M's CSR row counts (host ``M_rownnz`` of a single-tree
    model; a DOF's depth is its row count, itself and its ancestors): one int32 array ``[D]``,
    ``start`` (D+1: each depth's first entry) and ``dofs`` (nv: the DOFs by depth, root first,
    ascending within a depth). Raises ValueError for a row count < 1."""
    n = np.asarray(rownnz, dtype=np.int64)
    if n.size and int(n.min()) < 1:
        raise ValueError(f"M_rownnz must be >= 1 (a DOF's row holds itself), got {int(n.min())}")
    depth = int(n.max()) if n.size else 0
    start = np.searchsorted(np.sort(n), np.arange(1, depth + 2))
    dofs = np.argsort(n, kind="stable")
    return np.concatenate([[depth], start, dofs]).astype(np.int32)


def level_parts(table: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`level_schedule`'s table cut into its arrays (views): ``lvl`` (L+1), ``tgt_e`` (T),
    ``tgt_adr`` (T+1), ``ab`` (C), ``kk`` (C), as the kernel's ``factor_levels`` reads them."""
    nlevel, ntgt, ncon = (int(x) for x in table[:3])
    o_lv = 3
    o_te = o_lv + nlevel + 1
    o_ta = o_te + ntgt
    o_ab = o_ta + ntgt + 1
    o_kk = o_ab + ncon
    return dict(lvl=table[o_lv:o_te], tgt_e=table[o_te:o_ta], tgt_adr=table[o_ta:o_ab], ab=table[o_ab:o_kk],
                kk=table[o_kk:o_kk + ncon])


def factor_critical_path(rownnz: np.ndarray, rowadr: np.ndarray, colind: np.ndarray,
                         nthread: int = 64) -> dict[str, int]:
    """The tree factor's work on its busiest thread, as the two kernels deal it to ``nthread``
    threads (host arrays as :func:`level_schedule`'s): ``serial`` = Σ over the nv steps of
    ⌈items / nthread⌉ (a step's pairs and gradient entries dealt in turn), ``levels`` = Σ over the
    heights of the largest per-thread term count (targets dealt in turn, each with all its
    terms), with ``steps`` (nv barriers) and ``heights`` (barriers of ``levels``). The two
    differ in barriers, not in the terms one thread walks. Raises ValueError for ``nthread`` < 1."""
    if isinstance(nthread, bool) or not isinstance(nthread, int) or nthread < 1:
        raise ValueError(f"nthread must be an int >= 1, got {nthread!r}")
    nv = len(rownnz)
    n = np.asarray(rownnz, dtype=np.int64) - 1  # ancestors per DOF
    serial = int(sum(-(-int(a * (a + 1) // 2 + a) // nthread) for a in n))
    parts = level_parts(level_schedule(rownnz, rowadr, colind))
    lvl, terms = parts["lvl"], np.diff(parts["tgt_adr"].astype(np.int64))
    nlevel = len(lvl) - 1
    levels = 0
    for lv in range(nlevel):
        t = terms[lvl[lv]:lvl[lv + 1]]
        levels += int(np.bincount(np.arange(len(t)) % nthread, weights=t, minlength=1).max()) if len(t) else 0
    return dict(serial=serial, levels=levels, steps=nv, heights=nlevel)


@wp.func
def _block_max(v: float) -> float:
    """Largest ``v`` over the block's threads (every thread gets it)."""
    return wp.tile_reduce(wp.max, wp.tile(v))[0]


@functools.cache
def _serial_factor_func(capacity: int):
    """``factor(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind)``: one DOF per barrier."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def factor(sh: Tile, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int], M_rowadr: wp.array[int],
               M_colind: wp.array[int]):
        """Leaf first: step k's (pair, gradient entry) items dealt to the threads in turn."""
        rhs = (nv * (nv + 1)) >> 1
        for kk in range(nv):
            k = nv - 1 - kk
            _sync_threads()
            rowk = (k * (k + 1)) >> 1
            inv = 1.0 / _ld(sh, rowk + k)
            n = M_rownnz[k] - 1  # ancestors: M_colind[adr … adr + n - 1], k itself last
            adr = M_rowadr[k]
            npair = (n * (n + 1)) >> 1
            gk = _ld(sh, rhs + k) * inv
            for p in range(tid, npair + n, nthread):
                if p < npair:
                    a = int((wp.sqrt(8.0 * float(p) + 1.0) - 1.0) * 0.5)
                    a = wp.where(((a * (a + 1)) >> 1) > p, a - 1, a)
                    a = wp.where((((a + 1) * (a + 2)) >> 1) <= p, a + 1, a)
                    ca = M_colind[adr + a]
                    cb = M_colind[adr + p - ((a * (a + 1)) >> 1)]
                    hi, lo = wp.max(ca, cb), wp.min(ca, cb)
                    e = ((hi * (hi + 1)) >> 1) + lo
                    _st(sh, e, _ld(sh, e) - _ld(sh, rowk + ca) * inv * _ld(sh, rowk + cb))
                else:
                    ca = M_colind[adr + p - npair]
                    _st(sh, rhs + ca, _ld(sh, rhs + ca) - _ld(sh, rowk + ca) * gk)
        _sync_threads()

    return factor


@wp.func_native(snippet="return arr.data[i];")
def _load_int(arr: wp.array[int], i: int) -> int:
    """``arr[i]`` of a contiguous 1-D int array, without Warp's negative-index wrap and stride
    multiply (the host checks contiguity: ``solve_kernel`` takes "lean" and "depth" only then)."""
    ...


_ROOT = """
#if defined(__CUDA_ARCH__)
    return x * rsqrtf(x);
#else
    return sqrtf(x);
#endif
"""


@wp.func_native(snippet=_ROOT)
def _root(x: float) -> float:
    """√x for x >= 1 to a few ulp (one MUFU.RSQ on CUDA): the pair decode corrects ±1 after it."""
    ...


@functools.cache
def _lean_factor_func(capacity: int):
    """``factor(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind)``: the serial factor's steps
    and sums, each thread's items two at a time in one straight block (the two dependency chains
    overlap), decoded with an approximate root and read with :func:`_load_int`."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def item(sh: Tile, p: int, npair: int, adr: int, rowk: int, rhs: int, inv: float, gk: float,
             M_colind: wp.array[int]):
        """Item p of a step: (the entry it updates, its new value); pairs (a, b) then gradient
        entries, as the serial factor's, without a branch between the two kinds."""
        pair = p < npair
        q = wp.where(pair, p, 0)
        a = int((_root(8.0 * float(q) + 1.0) - 1.0) * 0.5)
        a = wp.where(((a * (a + 1)) >> 1) > q, a - 1, a)
        a = wp.where((((a + 1) * (a + 2)) >> 1) <= q, a + 1, a)
        ia = wp.where(pair, adr + a, adr + p - npair)
        ca = _load_int(M_colind, ia)
        cb = _load_int(M_colind, wp.where(pair, adr + q - ((a * (a + 1)) >> 1), ia))
        hi, lo = wp.max(ca, cb), wp.min(ca, cb)
        e = wp.where(pair, ((hi * (hi + 1)) >> 1) + lo, rhs + ca)
        x, la, lb = _ld(sh, e), _ld(sh, rowk + ca), _ld(sh, rowk + cb)
        return e, wp.where(pair, x - la * inv * lb, x - la * gk)

    @wp.func
    def factor(sh: Tile, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int], M_rowadr: wp.array[int],
               M_colind: wp.array[int]):
        """Leaf first, one barrier per DOF; a step's items are distinct entries of rows above k,
        so a thread's two are read before either is written."""
        rhs = (nv * (nv + 1)) >> 1
        for kk in range(nv):
            k = nv - 1 - kk
            _sync_threads()
            rowk = (k * (k + 1)) >> 1
            inv = 1.0 / _ld(sh, rowk + k)
            n = _load_int(M_rownnz, k) - 1
            adr = _load_int(M_rowadr, k)
            npair = (n * (n + 1)) >> 1
            total = npair + n
            gk = _ld(sh, rhs + k) * inv
            p = tid
            while p < total:
                q = p + nthread
                e1, v1 = item(sh, p, npair, adr, rowk, rhs, inv, gk, M_colind)
                e2, v2 = item(sh, wp.min(q, total - 1), npair, adr, rowk, rhs, inv, gk, M_colind)
                _st(sh, e1, v1)
                if q < total:
                    _st(sh, e2, v2)
                p = q + nthread
        _sync_threads()

    return factor


@functools.cache
def _levels_factor_func(capacity: int, slot: int = 0):
    """``factor_levels(sh, tid, nthread, plan)``: one height per barrier (:func:`level_schedule`'s
    table at ``plan[plan[slot]]``)."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def factor_levels(sh: Tile, tid: int, nthread: int, plan: wp.array[int]):
        """One height per barrier: each target entry to one thread, its terms in table order."""
        b = plan[slot]
        nlevel, ntgt, ncon = plan[b], plan[b + 1], plan[b + 2]
        o_lv = b + 3
        o_te = o_lv + nlevel + 1
        o_ta = o_te + ntgt
        o_ab = o_ta + ntgt + 1
        o_kk = o_ab + ncon
        for lv in range(nlevel):
            _sync_threads()
            for t in range(plan[o_lv + lv] + tid, plan[o_lv + lv + 1], nthread):
                e = plan[o_te + t]
                acc = _ld(sh, e)
                for c in range(plan[o_ta + t], plan[o_ta + t + 1]):
                    w = plan[o_ab + c]
                    ia, ib, kk = w & 0xFFFF, (w >> 16) & 0xFFFF, plan[o_kk + c]
                    if kk >= 0:
                        acc -= _ld(sh, ia) * (1.0 / _ld(sh, kk)) * _ld(sh, ib)
                    else:
                        acc -= _ld(sh, ia) * (_ld(sh, ib) * (1.0 / _ld(sh, -kk - 1)))
                _st(sh, e, acc)
        _sync_threads()

    return factor_levels


@wp.func
def _load_indexed(arr: wp.array[int], i: int) -> int:
    """``arr[i]`` through Warp's own indexing (any strides)."""
    return arr[i]


@functools.cache
def _row_func(capacity: int, raw: bool):
    """``row(sh, rhs, k, n, adr, M_colind)``: x_k = (g'_k - Σ_a H[k, a]·x_a) / H[k, k] over k's
    n - 1 ancestors, in CSR order; ``raw``: M's column indices read with :func:`_load_int`."""
    _ld, _st = shared_accessors(capacity)
    load = _load_int if raw else _load_indexed
    Tile = wp.tile[float, capacity]

    @wp.func
    def row(sh: Tile, rhs: int, k: int, n: int, adr: int, M_colind: wp.array[int]):
        rowk = (k * (k + 1)) >> 1
        acc = _ld(sh, rhs + k)
        for a in range(n - 1):
            ca = load(M_colind, adr + a)
            acc -= _ld(sh, rowk + ca) * _ld(sh, rhs + ca)
        _st(sh, rhs + k, acc / _ld(sh, rowk + k))

    return row


@functools.cache
def _back_scan_func(capacity: int):
    """``back(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)``: the back substitution,
    its depths found in the kernel (a block reduction for the deepest row, then a scan of every DOF
    per depth)."""
    row = _row_func(capacity, raw=False)
    Tile = wp.tile[float, capacity]

    @wp.func
    def back(sh: Tile, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int], M_rowadr: wp.array[int],
             M_colind: wp.array[int], plan: wp.array[int]):
        """x = (LDᵀ)⁻¹·g' by depth: all DOFs of a depth at once, one barrier per depth."""
        rhs = (nv * (nv + 1)) >> 1
        depth = float(0.0)
        for k in range(tid, nv, nthread):
            depth = wp.max(depth, float(M_rownnz[k]))
        levels = int(_block_max(depth))
        for level in range(1, levels + 1):
            for k in range(tid, nv, nthread):
                if M_rownnz[k] == level:
                    row(sh, rhs, k, level, M_rowadr[k], M_colind)
            _sync_threads()

    return back


@functools.cache
def _back_depth_func(capacity: int):
    """The same by :func:`depth_schedule`'s table at ``plan[plan[2]]`` (``back_depth``)."""
    row = _row_func(capacity, raw=True)
    Tile = wp.tile[float, capacity]

    @wp.func
    def back_depth(sh: Tile, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int], M_rowadr: wp.array[int],
                   M_colind: wp.array[int], plan: wp.array[int]):
        """The same by the host's table: each depth's DOFs dealt to the threads, no search; the
        table and M's indices read raw (contiguous: the host checks)."""
        rhs = (nv * (nv + 1)) >> 1
        b = _load_int(plan, 2)
        levels = _load_int(plan, b)
        o_dof = b + levels + 2
        for level in range(levels):
            i = _load_int(plan, b + 1 + level) + tid
            end = _load_int(plan, b + 2 + level)
            while i < end:
                k = _load_int(plan, o_dof + i)
                row(sh, rhs, k, level + 1, _load_int(M_rowadr, k), M_colind)
                i += nthread
            _sync_threads()

    return back_depth


def back_func(capacity: int, host_depth: bool = False):
    """``back(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)``: the back substitution;
    ``host_depth``: by the host's table (:func:`_back_depth_func`), else :func:`_back_scan_func`."""
    return _back_depth_func(capacity) if host_depth else _back_scan_func(capacity)


@functools.cache
def tree_solve_func(capacity: int, levels: bool = False, host_depth: bool = False, lean: bool = False):
    """``tree_solve(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)``: the factor
    (leaf first, one DOF per barrier; ``lean``: two items at a time, :func:`_lean_factor_func`;
    ``levels``: one height per barrier from :func:`level_schedule`'s table, which starts at
    ``plan[plan[0]]``), then x = H⁻¹·g left in the gradient row (row nv) of the shared triangle
    (``host_depth``: the back substitution by :func:`depth_schedule`'s table at ``plan[plan[2]]``)."""
    factor = (_lean_factor_func if lean else _serial_factor_func)(capacity)
    factor_levels = _levels_factor_func(capacity)
    back = back_func(capacity, host_depth)
    Tile = wp.tile[float, capacity]

    @wp.func
    def tree_solve_serial(sh: Tile, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
                          M_rowadr: wp.array[int], M_colind: wp.array[int], plan: wp.array[int]):
        factor(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind)
        back(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)

    @wp.func
    def tree_solve_levels(sh: Tile, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
                          M_rowadr: wp.array[int], M_colind: wp.array[int], plan: wp.array[int]):
        factor_levels(sh, tid, nthread, plan)
        back(sh, tid, nthread, nv, M_rownnz, M_rowadr, M_colind, plan)

    return tree_solve_levels if levels else tree_solve_serial


def forward_func(capacity: int, slot: int):
    """``forward(sh, tid, nthread, plan)``: y = L⁻¹·g in the gradient row of a factor already in
    the tile, one height per barrier, from :func:`level_schedule`'s ``rhs_only`` table at
    ``plan[plan[slot]]`` (the terms and their arithmetic of the factor's riding gradient row)."""
    return _levels_factor_func(capacity, slot)
