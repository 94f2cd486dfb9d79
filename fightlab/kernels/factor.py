"""Single-launch tiled LDLᵀ of the mass matrix for kinematic trees over 64 DOF.

MuJoCo Warp 4.0.0 factors a tree over ``types.M_BLOCK_DENSE_MAX`` (64) DOF with the sparse
``L'DL`` of MuJoCo's ``mj_factorI`` (``smooth._factor_i_sparse``): one launch per tree level, 26
launches per factorization for the 89-DOF humanoid. This module does the same arithmetic in one
launch: one block of :data:`BLOCK_DIM` (64) threads per world walks the levels deepest first
with a block barrier after each phase (A: each row and column sums its descendants' updates in
chunks of :data:`CHUNK`; B: the partial sums are subtracted in chunk order and ``L[k,i] /=
L[k,k]``). No atomics: deterministic, equal to the stock path to float32 rounding, written in the
stock ``qLD`` / ``qLDiagInv`` layout so that every consumer works unchanged. Two bitwise-equal
variants (:data:`VARIANTS`): "shared" (``L``, partial sums and scale factors staged in shared
memory; the default when they fit in :data:`SHARED_MAX`) and "global" (the first design).

The switch: :func:`use_tree_factor` (or the :func:`tree_factor` context) registers a model and
replaces ``smooth._factor_i_sparse`` by a dispatcher that runs :func:`factor_tree` for registered
models only; :func:`disable_tree_factor` puts the original back when no model is left. fightlab's
settings factor twice per physics step (:func:`count_factor_calls`). A graph captured with the
switch on keeps the kernel after it is turned off: re-capture after switching. On the CPU, blocks
of more than one thread need ``wp.config.enable_cpu_blocks = True``. The work lists the kernels
walk: :mod:`fightlab.kernels.schedule`. No ``from __future__ import annotations`` here: the
"shared" steps annotate a tile whose size is a closure value (see :mod:`fightlab.kernels._smem`).

Call sites, the variants' history and their measurements: bench/NOTES.md ("Tree factor: design
notes"). Sources: ``mujoco_warp/_src/smooth.py``, ``io.py``, ``forward.py``, ``derivative.py``;
``warp/native/tile.h`` (mujoco-warp 4.0.0, warp-lang 1.19.0); MuJoCo ``mj_factorI``.
"""

import contextlib
import dataclasses
import functools
import weakref
from typing import Any, Callable, Iterator

import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src import smooth
from mujoco_warp._src import types as mjw_types

from fightlab.kernels.schedule import CHUNK, TreeSchedule, build_schedule, vec4i

__all__ = ["CHUNK", "BLOCK_DIM", "TreeSchedule", "build_schedule", "factor_tree", "stock_factor",
           "use_tree_factor", "disable_tree_factor", "is_tree_factor_enabled", "active_variant",
           "resolve_variant", "shared_capacity", "variant_kernels", "VARIANTS", "tree_factor",
           "dense_max", "count_factor_calls"]

#: threads per world (one block per world)
BLOCK_DIM = 64


@wp.func_native(snippet="WP_TILE_SYNC();")
def _sync_threads():
    """Block-wide barrier (``__syncthreads`` on CUDA, a fiber yield on CPU blocks)."""
    ...


@wp.func
def _sum_item(
    # In:
    worldid: int,
    item: vec4i,
    slot: int,
    upd_in: wp.array[wp.vec3i],
    # Out:
    L_out: wp.array2d[float],
    partial_out: wp.array2d[float],
):
    """Phase A of one item ``(adr of L[i,j], j, first update, n)``: ``L[i,j] -= L[k,j]·L[k,i] /
    L[k,k]`` over its updates in place (``slot < 0``), or their sum into partial ``slot``."""
    adr_ij, j, first, n = item[0], item[1], item[2], item[3]
    if slot < 0:
        value = L_out[worldid, adr_ij]
        for u in range(first, first + n):
            up = upd_in[u]
            tmp = L_out[worldid, up[2]] / L_out[worldid, up[1]]
            value -= L_out[worldid, up[0] + j] * tmp
        L_out[worldid, adr_ij] = value
    else:
        partial = float(0.0)
        for u in range(first, first + n):
            up = upd_in[u]
            tmp = L_out[worldid, up[2]] / L_out[worldid, up[1]]
            partial += L_out[worldid, up[0] + j] * tmp
        partial_out[worldid, slot] = partial


@wp.func
def _reduce_item(worldid: int, r: wp.vec3i, partial_in: wp.array2d[float], L_out: wp.array2d[float]):
    """Phase B of one reduction ``(adr of L[i,j], first slot, n)``: subtract its partial sums in
    chunk order."""
    value = L_out[worldid, r[0]]
    for slot in range(r[1], r[1] + r[2]):
        value -= partial_in[worldid, slot]
    L_out[worldid, r[0]] = value


@wp.kernel(module="unique", enable_backward=False)
def _factor_tree(
    # Model:
    nv: int,
    nC: int,
    M_rownnz: wp.array[int],
    M_rowadr: wp.array[int],
    # In:
    nlevel: int,
    a_item_in: wp.array[vec4i],
    a_slot_in: wp.array[int],
    a_off_in: wp.array[int],
    upd_in: wp.array[wp.vec3i],
    upd_off_in: wp.array[int],
    red_in: wp.array[wp.vec3i],
    red_off_in: wp.array[int],
    M_in: wp.array2d[float],
    # Out:
    L_out: wp.array2d[float],
    D_out: wp.array2d[float],
    partial_out: wp.array2d[float],
):
    worldid, tid = wp.tid()
    nthread = wp.block_dim()

    for adr in range(tid, nC, nthread):
        L_out[worldid, adr] = M_in[worldid, adr]
    _sync_threads()

    for lev in range(nlevel):
        # phase A: chunked sums over the descendants k of row i, column j
        for w in range(a_off_in[lev] + tid, a_off_in[lev + 1], nthread):
            _sum_item(worldid, a_item_in[w], a_slot_in[w], upd_in, L_out, partial_out)
        _sync_threads()

        # phase B: subtract the partials in chunk order; scale L[k,i] /= L[k,k]
        for w in range(red_off_in[lev] + tid, red_off_in[lev + 1], nthread):
            _reduce_item(worldid, red_in[w], partial_out, L_out)
        for u in range(upd_off_in[lev] + tid, upd_off_in[lev + 1], nthread):
            up = upd_in[u]
            L_out[worldid, up[2]] = L_out[worldid, up[2]] / L_out[worldid, up[1]]
        _sync_threads()

    for dofid in range(tid, nv, nthread):
        D_out[worldid, dofid] = 1.0 / L_out[worldid, M_rowadr[dofid] + M_rownnz[dofid] - 1]


#: staging granularity and limit of the shared-memory variant (floats): ``nC`` + partial sums,
#: rounded up to a multiple of 256, at most 12288 floats (48 KiB, the default per-block limit
#: for shared memory without opting in on CUDA)
SHARED_ROUND = 256
SHARED_MAX = 12288
#: the kernel variants: "shared" stages the world's L and partial sums in shared memory (one
#: copy in, one copy out); "global" works on L in global memory (the first design, kept as the
#: reference); "auto": "shared" when the staging fits in :data:`SHARED_MAX`, else "global"
VARIANTS = ("auto", "shared", "global")


def shared_capacity(schedule: TreeSchedule) -> int:
    """Floats of shared memory the "shared" variant needs for ``schedule``: ``nC`` (L) + the
    partial sums + one scale factor per update of the largest level, rounded up to
    :data:`SHARED_ROUND`; compare with :data:`SHARED_MAX`."""
    need = schedule.nC + schedule.np_max + schedule.nu_max
    return -(-need // SHARED_ROUND) * SHARED_ROUND


@functools.cache
def _shared_steps(capacity: int):
    """The "shared" variant's phase A and B steps (``wp.func``) for a staging tile of ``capacity``
    floats: ``L`` at ``[0, nC)``, partial sums at ``nC + slot``, the level's scale factors at
    ``tmp0 + update``.

    Differences from the "global" variant, none of which changes a single operation or its order
    (results are bitwise equal, tested):

    * the world's ``L``, the partial sums and the level's scale factors live in shared memory
      (a Warp shared tile; elements read and written through native one-liners because Warp's
      own ``t[i] = x`` ends with a block barrier, which must not run inside per-thread
      branches); ``M`` is copied in once and ``L`` out once, coalesced;
    * phase S (new, one barrier): each update ``(i, k)`` of the level computes its scale factor
      ``L[k,i] / L[k,k]`` once (both final: row ``k`` is deeper) instead of once per column
      ``j`` of row ``i``; phase A then reads it, and phase B writes it to ``L[k,i]``, so the
      inner loop's dependent chain is an index load, an ``L`` load and a multiply-add.
    """
    from fightlab.kernels._smem import shared_accessors

    _sh_load, _sh_store = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def sum_item(sh: Tile, item: vec4i, slot: int, upd_in: wp.array[wp.vec3i], nC: int, tmp: int):
        """Phase A of one item; ``tmp``: where the level's scale factors start, less its first
        update."""
        adr_ij, j, first, n = item[0], item[1], item[2], item[3]
        if slot < 0:
            value = _sh_load(sh, adr_ij)
            for u in range(first, first + n):
                value -= _sh_load(sh, upd_in[u][0] + j) * _sh_load(sh, tmp + u)
            _sh_store(sh, adr_ij, value)
        else:
            partial = float(0.0)
            for u in range(first, first + n):
                partial += _sh_load(sh, upd_in[u][0] + j) * _sh_load(sh, tmp + u)
            _sh_store(sh, nC + slot, partial)

    @wp.func
    def reduce_item(sh: Tile, r: wp.vec3i, nC: int):
        """Phase B of one reduction: subtract its partial sums in chunk order."""
        value = _sh_load(sh, r[0])
        for slot in range(r[1], r[1] + r[2]):
            value -= _sh_load(sh, nC + slot)
        _sh_store(sh, r[0], value)

    return _sh_load, _sh_store, sum_item, reduce_item


@functools.cache
def _shared_kernel(capacity: int):
    """The "shared" variant for a staging tile of ``capacity`` floats (one kernel per size; its
    steps and how it differs from :func:`_factor_tree`: :func:`_shared_steps`)."""
    _sh_load, _sh_store, _sum_item_sh, _reduce_item_sh = _shared_steps(capacity)

    @wp.kernel(module="unique", enable_backward=False)
    def _factor_tree_shared(
        # Model:
        nv: int,
        nC: int,
        M_rownnz: wp.array[int],
        M_rowadr: wp.array[int],
        # In:
        nlevel: int,
        np_max: int,
        a_item_in: wp.array[vec4i],
        a_slot_in: wp.array[int],
        a_off_in: wp.array[int],
        upd_in: wp.array[wp.vec3i],
        upd_off_in: wp.array[int],
        red_in: wp.array[wp.vec3i],
        red_off_in: wp.array[int],
        M_in: wp.array2d[float],
        # Out:
        L_out: wp.array2d[float],
        D_out: wp.array2d[float],
    ):
        worldid, tid = wp.tid()
        nthread = wp.block_dim()
        sh = wp.tile_empty(shape=capacity, dtype=float, storage="shared")
        tmp0 = nC + np_max
        for adr in range(tid, nC, nthread):
            _sh_store(sh, adr, M_in[worldid, adr])
        _sync_threads()

        for lev in range(nlevel):
            u0 = upd_off_in[lev]
            # phase S: scale factor L[k,i] / L[k,k] of each update of the level
            for u in range(u0 + tid, upd_off_in[lev + 1], nthread):
                up = upd_in[u]
                _sh_store(sh, tmp0 + u - u0, _sh_load(sh, up[2]) / _sh_load(sh, up[1]))
            _sync_threads()
            # phase A: chunked sums over the descendants k of row i, column j
            for w in range(a_off_in[lev] + tid, a_off_in[lev + 1], nthread):
                _sum_item_sh(sh, a_item_in[w], a_slot_in[w], upd_in, nC, tmp0 - u0)
            _sync_threads()
            # phase B: subtract the partials in chunk order; write the scale factors to L[k,i]
            for w in range(red_off_in[lev] + tid, red_off_in[lev + 1], nthread):
                _reduce_item_sh(sh, red_in[w], nC)
            for u in range(u0 + tid, upd_off_in[lev + 1], nthread):
                _sh_store(sh, upd_in[u][2], _sh_load(sh, tmp0 + u - u0))
            _sync_threads()

        for adr in range(tid, nC, nthread):
            L_out[worldid, adr] = _sh_load(sh, adr)
        for dofid in range(tid, nv, nthread):
            D_out[worldid, dofid] = 1.0 / _sh_load(sh, M_rowadr[dofid] + M_rownnz[dofid] - 1)

    return _factor_tree_shared


def resolve_variant(schedule: TreeSchedule, variant: str = "auto") -> str:
    """The kernel variant :func:`factor_tree` runs: ``variant``, with "auto" resolved.

    Raises:
        ValueError: ``variant`` not in :data:`VARIANTS`, or "shared" for a tree whose staging
            (:func:`shared_capacity`) exceeds :data:`SHARED_MAX`.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    fits = shared_capacity(schedule) <= SHARED_MAX
    if variant == "auto":
        return "shared" if fits else "global"
    if variant == "shared" and not fits:
        raise ValueError(f"variant 'shared' needs {shared_capacity(schedule)} floats of shared memory "
                         f"for this tree (nC={schedule.nC}), more than SHARED_MAX={SHARED_MAX}; "
                         "use 'global' or 'auto'")
    return variant


def factor_tree(m: Any, d: Any, M: wp.array2d, L: wp.array2d, D: wp.array2d,
                schedule: TreeSchedule | None = None, block_dim: int = BLOCK_DIM,
                variant: str = "auto") -> None:
    """Sparse ``L'DL`` of ``M`` in one launch: drop-in for ``smooth._factor_i_sparse``.

    Args:
        m, d: ``mujoco_warp`` Model and Data (``d.nworld`` worlds).
        M: inertia-like matrix in MuJoCo's CSR layout, float32 ``(nworld, nC)``.
        L: output LDL region, float32 ``(nworld, nC)`` (a view such as
            ``d.qLD[:, m.qLD_block_total:]``) in MuJoCo's ``qLD`` layout.
        D: output ``1 / diag`` for every DOF, float32 ``(nworld, nv)`` (``qLDiagInv``).
        schedule: from :func:`build_schedule` (built, not cached, when ``None``).
        block_dim: threads per world (1 on a CPU without ``wp.config.enable_cpu_blocks``).
        variant: one of :data:`VARIANTS` (:func:`resolve_variant`, whose ValueError it raises).
    """
    s = schedule if schedule is not None else build_schedule(m)
    if resolve_variant(s, variant) == "shared":
        cap = shared_capacity(s)
        # the kernel's largest shared index: the last scale factor of the largest level
        assert s.nC + s.np_max + s.nu_max <= cap, (s.nC, s.np_max, s.nu_max, cap)
        kernel, extra_in, extra_out = _shared_kernel(cap), [s.np_max], []
    else:
        key = (d.nworld, str(M.device))
        partial = s.scratch.get(key)
        if partial is None:
            partial = s.scratch[key] = wp.zeros((d.nworld, s.np_max), dtype=float, device=M.device)
        kernel, extra_in, extra_out = _factor_tree, [], [partial]
    # host values only from here on: this runs inside captured graphs (no device reads)
    wp.launch_tiled(
        kernel,
        dim=(d.nworld,),
        inputs=[s.nv, s.nC, m.M_rownnz, m.M_rowadr, s.nlevel, *extra_in, s.a_item, s.a_slot,
                s.a_off, s.upd, s.upd_off, s.red, s.red_off, M],
        outputs=[L, D, *extra_out],
        block_dim=block_dim,
    )


# ----------------------------------------------------------------------------------------------
# the switch


#: the stock function, captured at import (before any patching)
stock_factor: Callable[..., None] = smooth._factor_i_sparse


@dataclasses.dataclass
class _Entry:
    ref: Any  # weakref to the Model
    schedule: TreeSchedule
    block_dim: int
    variant: str


_REGISTRY: dict[int, _Entry] = {}


def _entry(m: Any) -> _Entry | None:
    """``m``'s registry entry, None when ``m`` is not registered (an id reused by a new model
    does not count)."""
    entry = _REGISTRY.get(id(m))
    return entry if entry is not None and entry.ref() is m else None


def _dispatch(m, d, M, L, D):
    """Replacement of ``smooth._factor_i_sparse`` while at least one model is registered."""
    entry = _entry(m)
    if entry is not None:
        factor_tree(m, d, M, L, D, schedule=entry.schedule, block_dim=entry.block_dim,
                    variant=entry.variant)
    else:
        stock_factor(m, d, M, L, D)


def _install() -> None:
    if smooth._factor_i_sparse is stock_factor:
        smooth._factor_i_sparse = _dispatch
    elif smooth._factor_i_sparse is not _dispatch:
        raise RuntimeError(
            "mujoco_warp._src.smooth._factor_i_sparse was replaced by someone else "
            f"({smooth._factor_i_sparse!r}); refusing to patch over it"
        )


def _uninstall_if_unused() -> None:
    for key in [k for k, e in _REGISTRY.items() if e.ref() is None]:
        del _REGISTRY[key]
    if not _REGISTRY and smooth._factor_i_sparse is _dispatch:
        smooth._factor_i_sparse = stock_factor


def use_tree_factor(m: Any, *, block_dim: int = BLOCK_DIM, variant: str = "auto") -> bool:
    """Switch the single-launch tree factor on for the MuJoCo Warp model ``m`` only (others keep
    the stock path), after ``put_model`` and before the first step / graph capture, with
    ``block_dim`` threads per world (int >= 1; 64 the design point) and a ``variant`` of
    :data:`VARIANTS`. Returns True when ``m`` has a sparse block (a tree over
    ``types.M_BLOCK_DENSE_MAX`` DOF) and the kernel now factors it, False when there is nothing
    to replace (nothing registered). Raises ValueError for a bad ``block_dim`` or ``variant``
    (:func:`resolve_variant`).
    """
    if not isinstance(block_dim, int) or block_dim < 1:
        raise ValueError(f"block_dim must be an int >= 1, got {block_dim!r}")
    if variant not in VARIANTS:  # before the early return: a bad variant is refused on any tree
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not m.qLD_updates:
        return False
    schedule = build_schedule(m)
    resolve_variant(schedule, variant)  # refuse "shared" for a tree too large, before switching
    _install()
    # the entry dies with the model: when the last registered model is garbage collected,
    # the stock function is put back
    _REGISTRY[id(m)] = _Entry(weakref.ref(m, lambda _r: _uninstall_if_unused()), schedule, block_dim,
                              variant)
    return True


def disable_tree_factor(m: Any) -> None:
    """Switch the tree factor off for ``m`` (no-op if it was not on); with no model left,
    ``smooth._factor_i_sparse`` is the original function object again."""
    if _entry(m) is not None:
        del _REGISTRY[id(m)]
    _uninstall_if_unused()


def is_tree_factor_enabled(m: Any) -> bool:
    """True while the tree factor is switched on for ``m``."""
    return _entry(m) is not None and smooth._factor_i_sparse is _dispatch


def active_variant(m: Any) -> str | None:
    """The kernel variant ("shared" / "global") factoring ``m`` now, None when the tree factor
    is off for ``m`` (recorded in result rows, so a row says which kernel produced it)."""
    entry = _entry(m) if is_tree_factor_enabled(m) else None
    return None if entry is None else resolve_variant(entry.schedule, entry.variant)


@contextlib.contextmanager
def tree_factor(m: Any, *, block_dim: int = BLOCK_DIM, variant: str = "auto") -> Iterator[bool]:
    """``with tree_factor(m) as on:`` -- :func:`use_tree_factor` for the block, then the state
    before it (on or off) is restored, also on error. ``on`` is :func:`use_tree_factor`'s result."""
    before = _entry(m) if is_tree_factor_enabled(m) else None
    try:
        yield use_tree_factor(m, block_dim=block_dim, variant=variant)
    finally:
        disable_tree_factor(m)
        if before is not None:
            _install()
            _REGISTRY[id(m)] = before


@contextlib.contextmanager
def dense_max(value: int) -> Iterator[None]:
    """Temporarily set ``mujoco_warp`` ``types.M_BLOCK_DENSE_MAX`` (read by ``put_model``): lower
    it to push small trees onto the sparse path, raise it to get the dense tile reference."""
    old = mjw_types.M_BLOCK_DENSE_MAX
    mjw_types.M_BLOCK_DENSE_MAX = int(value)
    try:
        yield
    finally:
        mjw_types.M_BLOCK_DENSE_MAX = old


def count_factor_calls(m: Any, d: Any, fn: Callable[[], Any] | None = None) -> dict[str, int]:
    """Run ``fn`` (default ``mjw.step(m, d)``) once; ``{"tree": n, "stock": n}``: the sparse
    factorizations of ``m`` that went to :func:`factor_tree` / the stock function."""
    counts = {"tree": 0, "stock": 0}
    current = smooth._factor_i_sparse
    tree_on = is_tree_factor_enabled(m)

    def counting(mm, dd, M, L, D):
        if mm is m:
            counts["tree" if tree_on else "stock"] += 1
        current(mm, dd, M, L, D)

    smooth._factor_i_sparse = counting
    try:
        (fn or (lambda: mjw.step(m, d)))()
    finally:
        smooth._factor_i_sparse = current
    return counts


def variant_kernels(capacity: int) -> dict[str, Any]:
    """The warp kernels of both variants, ``{"shared": …, "global": …}``, for a shared tile of
    ``capacity`` floats (:func:`shared_capacity`): e.g. to compile them ahead of time."""
    return {"shared": _shared_kernel(capacity), "global": _factor_tree}
