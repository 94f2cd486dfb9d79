"""Single-launch tiled LDLᵀ of the mass matrix for kinematic trees over 64 DOF.

MuJoCo Warp 4.0.0 factors each kinematic tree's block of the joint-space inertia ``M`` by size
(``mujoco_warp/_src/io.py: m_block_layout``): scalar Cholesky up to 6 DOF, a dense tile Cholesky
up to ``types.M_BLOCK_DENSE_MAX`` (64) DOF, and beyond that the sparse ``L'DL`` of MuJoCo's
``mj_factorI`` (``smooth._factor_i_sparse``): one ``wp.copy`` of ``M``, then **one kernel launch
per tree level** (``_qLD_acc``, atomics onto shared rows), then ``_qLDiag_div``. For the 89-DOF
humanoid that is 24 levels, i.e. 26 launches per factorization, each with little work.

This module does the same arithmetic in **one launch**: one block of ``block_dim`` (64) threads
per world, ``M`` copied into the output ``L``, the levels walked deepest first with a block
barrier after each phase, and the output written in the stock layout (``qLD``'s ``nC`` LDL region and
``qLDiagInv`` for every DOF), so every consumer (``solve_LD``, the fused sparse solve, the Newton
solver, sensors) works unchanged.

Algorithm (per world). The stock level ``l`` holds the updates ``(i, k)`` whose *updated* row
``i`` has depth ``l`` (``k`` a descendant of ``i``); they read only deeper rows and write rows of
depth ``l``. Per level:

* phase A: for each row ``i`` of the level and each of its columns ``j`` (the ancestors of ``i``
  and ``i``), the sum ``Σ_k L[k,j]·(L[k,i]/L[k,k])`` over the descendants ``k`` of ``i`` is split
  into chunks of 8 (:data:`CHUNK`) descendants; one thread per (row, column, chunk). A row with a
  single chunk subtracts in place (the stock order of subtractions); otherwise each chunk writes a
  partial sum to a per-world scratch row.  -- barrier --
* phase B: one thread per (row, column) with several chunks subtracts its partials in chunk
  order; one thread per update scales ``L[k,i] /= L[k,k]``.  -- barrier --

No atomics: the result is deterministic (bitwise the same for any ``block_dim``), and agrees with
the stock path to float32 rounding (the stock sum order is set by its atomics; see tests).

Memory: two variants with the same operations in the same order (bitwise equal results).
"global" (the first design, :func:`_factor_tree`): ``L`` and the partial sums in global memory
(L1/L2-resident, 6 KiB per world for the humanoid); ``__syncthreads`` orders global writes
within a block. On the H200 it was 2.3x faster than stock, not the 5x aimed for: the sums are
chains of dependent global loads (latency-bound). "shared" (:func:`_shared_kernel`, the default
when it fits): ``L``, the partial sums and one scale factor per update of the level staged in a
shared-memory tile (7 KiB for the humanoid), with a phase S per level computing each update's
``L[k,i] / L[k,k]`` once. Warp's own tile element assignment (``t[i] = x``) ends with a block
barrier (``tile_element_assign`` -> ``WP_TILE_SYNC``), undefined inside per-thread branches,
so elements go through two native one-liners (``fightlab.kernels._shared``).

Switching it on (the mechanism, and why it is the least invasive one)
---------------------------------------------------------------------
Every factorization of an inertia-like matrix with an oversized tree goes through the one
module-level function ``mujoco_warp._src.smooth._factor_i_sparse(m, d, M, L, D)``: ``factor_m``
and ``factor_solve_i`` call it by its global name inside ``smooth``; ``derivative.eff_actuation``
calls it as ``smooth._factor_i_sparse``. :func:`use_tree_factor` registers a model and, while at
least one model is registered, replaces that one attribute with a dispatcher that runs
:func:`factor_tree` for registered models and the original function for every other model (so
other models in the process, and the stock reference in tests, are untouched).
:func:`disable_tree_factor` unregisters; when no model is left the original function object is put
back, so ``smooth._factor_i_sparse is`` the original again. :func:`tree_factor` is the context
manager form (restores the previous state on exit, also on error). Nothing is switched on at
import, site-packages is never edited, and no model field is changed (changing
``qLD_updates``/``M_tiles`` would alter the layout every consumer relies on).

Call sites covered (MuJoCo Warp 4.0.0), with the number of factorizations per ``mjw.step``:

* ``forward.fwd_acceleration(factorize=True)`` (from ``forward._forward``) ->
  ``smooth.factor_solve_i(d.M -> d.qLD, d.qLDiagInv)``: 1, unless ``smooth.skip_qacc_smooth``
  (``opt.run_qacc_smooth`` False with Newton, warm start, no noslip) skips it.
  (``fwd_position`` runs with ``factorize=False`` inside ``step``; ``step1`` factors there
  instead, through ``factor_m``: covered.)
* ``forward.euler`` with eulerdamp and damper enabled ->
  ``smooth.factor_solve_i(M + h·diag(∂damping/∂v) -> scratch qLD)``: 1. MuJoCo Warp adds the
  damping term whatever its value (it does not test for damping > 0).
* ``forward.implicit`` (implicitfast) -> ``factor_solve_i(qDeriv)``: 1; RK4 runs ``forward`` 4
  times; the discrete integrator factors ``qH`` in ``derivative.eff_actuation``: all covered.
* The Newton solver factors its own constraint Hessian (dense blocked Cholesky in ``solver.py``),
  not ``M``: not a use of this path; it reads ``d.qLD`` through ``solve_m``.

fightlab's settings (Euler, eulerdamp on, joint damping > 0, Newton, ``run_qacc_smooth`` True, the
mujoco_warp default) therefore factor **2 times per physics step** (:func:`count_factor_calls`
measures it; the tests assert it).

Notes: a CUDA graph captured while the switch was on keeps the custom kernel after the switch is
turned off (and vice versa): re-capture after switching. On the CPU, warp runs a block of more
than one thread only with ``wp.config.enable_cpu_blocks = True`` (cooperative fibers, barriers
real); otherwise the launch resolves to one thread per world, which walks the same schedule alone
(still correct). The tests run both.

Sources: ``mujoco_warp/_src/smooth.py`` (``_factor_i_sparse``, ``factor_m``, ``factor_solve_i``,
``_solve_LD_sparse_fused``), ``io.py`` (``m_block_layout``, ``qLD_updates``), ``forward.py``
(``fwd_acceleration``, ``euler``, ``implicit``), ``derivative.py`` (``eff_actuation``);
``warp/_src/context.py`` (``launch_tiled``, ``enable_cpu_blocks``), ``warp/native/tile.h``
(``WP_TILE_SYNC``), all as installed (mujoco-warp 4.0.0, warp-lang 1.19.0). MuJoCo ``mj_factorI``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import weakref
from typing import Any, Callable, Iterator

import mujoco
import numpy as np
import warp as wp

import mujoco_warp as mjw
from mujoco_warp._src import smooth
from mujoco_warp._src import types as mjw_types

__all__ = [
    "CHUNK",
    "BLOCK_DIM",
    "TreeSchedule",
    "build_schedule",
    "factor_tree",
    "stock_factor",
    "use_tree_factor",
    "disable_tree_factor",
    "is_tree_factor_enabled",
    "active_variant",
    "resolve_variant",
    "shared_capacity",
    "VARIANTS",
    "tree_factor",
    "dense_max",
    "count_factor_calls",
    "reference_factor",
    "relative_error",
    "factor_errors",
    "step_qacc_error",
    "chain_model",
    "random_tree_model",
    "trajectory_deviation",
    "benchmark",
    "run_experiment",
]

#: descendants summed by one thread before the partial sums are combined
CHUNK = 8
#: threads per world (one block per world)
BLOCK_DIM = 64

_vec4i = wp.types.vector(length=4, dtype=wp.int32)


# ----------------------------------------------------------------------------------------------
# schedule (host side, once per model)


@dataclasses.dataclass
class TreeSchedule:
    """Work lists of :func:`factor_tree` for one model, on the model's device.

    Levels are in processing order (deepest first). ``*_off`` arrays hold ``nlevel + 1`` offsets.

    Attributes:
        nv, nC: DOF count and length of the sparse LDL region (``m.nC``).
        nlevel: number of tree levels holding updates.
        a_item: phase-A items ``(adr of L[i,j], column j, first update, n updates)`` (vec4i).
        a_slot: partial-sum slot of each phase-A item, ``-1`` when the item subtracts in place.
        a_off: level offsets into ``a_item``.
        upd: updates ``(rowadr_k, diag adr of k, adr of L[k,i])`` (vec3i), grouped by level and row.
        upd_off: level offsets into ``upd`` (phase B scales each update of the level).
        red: phase-B reductions ``(adr of L[i,j], first slot, n slots)`` (vec3i).
        red_off: level offsets into ``red``.
        np_max: partial sums per world (the largest level).
        nupdate: number of stock updates (for reports).
        nu_max: updates in the largest level (the "shared" variant's scale-factor slots).
        scratch: partial-sum buffers ``(nworld, np_max)`` by ``(nworld, device)``, made on first
            use (run the first factorization before a graph capture).
    """

    nv: int
    nC: int
    nlevel: int
    a_item: wp.array
    a_slot: wp.array
    a_off: wp.array
    upd: wp.array
    upd_off: wp.array
    red: wp.array
    red_off: wp.array
    np_max: int
    nupdate: int
    nu_max: int = 1
    scratch: dict = dataclasses.field(default_factory=dict, repr=False)


def build_schedule(m: Any, chunk: int = CHUNK) -> TreeSchedule:
    """Build the level schedule of :func:`factor_tree` from a MuJoCo Warp model.

    Reads ``m.qLD_updates`` (the stock per-level updates ``(i, k, adr of L[k,i])``, so only DOFs of
    sparse blocks are factored, exactly as in the stock path), ``m.M_rowadr`` and ``m.M_rownnz``.

    Args:
        m: ``mujoco_warp`` Model.
        chunk: descendants per partial sum (int >= 1).

    Returns:
        :class:`TreeSchedule` with arrays on the device of ``m.M_rowadr``.

    Raises:
        ValueError: ``chunk < 1``.
    """
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be an int >= 1, got {chunk!r}")
    rowadr = m.M_rowadr.numpy().astype(np.int64)
    rownnz = m.M_rownnz.numpy().astype(np.int64)
    nv, nC = int(m.nv), int(m.nC)
    levels = [u.numpy().reshape(-1, 3) for u in reversed(m.qLD_updates)]  # deepest first
    a_item, a_slot, a_off = [], [], [0]
    upd, upd_off = [], [0]
    red, red_off = [], [0]
    np_max = 0
    for lev in levels:
        nslot = 0
        # group by updated row i, keep the stock order of descendants k within a row
        rows: dict[int, list[tuple[int, int]]] = {}
        for i, k, madr_ki in lev:
            rows.setdefault(int(i), []).append((int(k), int(madr_ki)))
        for i, ks in rows.items():
            first = len(upd)
            for k, madr_ki in ks:
                upd.append((rowadr[k], rowadr[k] + rownnz[k] - 1, madr_ki))
            nchunk = -(-len(ks) // chunk)
            for j in range(rownnz[i]):
                adr_ij = rowadr[i] + j
                if nchunk == 1:
                    a_item.append((adr_ij, j, first, len(ks)))
                    a_slot.append(-1)
                    continue
                red.append((adr_ij, nslot, nchunk))
                for c in range(nchunk):
                    start = c * chunk
                    a_item.append((adr_ij, j, first + start, min(chunk, len(ks) - start)))
                    a_slot.append(nslot)
                    nslot += 1
        np_max = max(np_max, nslot)
        a_off.append(len(a_item))
        upd_off.append(len(upd))
        red_off.append(len(red))
    _check_schedule(a_item, a_slot, upd, red, nC, np_max)
    device = m.M_rowadr.device

    def arr(x, dtype, width):
        x = np.asarray(x, dtype=np.int32).reshape(-1, width) if width > 1 else np.asarray(x, np.int32)
        if len(x) == 0:  # warp kernels need a non-empty array; offsets keep it unread
            x = np.zeros((1, width) if width > 1 else 1, np.int32)
        return wp.array(x, dtype=dtype, device=device)

    return TreeSchedule(
        nv=nv, nC=nC, nlevel=len(levels),
        a_item=arr(a_item, _vec4i, 4), a_slot=arr(a_slot, wp.int32, 1),
        a_off=arr(a_off, wp.int32, 1),
        upd=arr(upd, wp.vec3i, 3), upd_off=arr(upd_off, wp.int32, 1),
        red=arr(red, wp.vec3i, 3), red_off=arr(red_off, wp.int32, 1),
        np_max=max(np_max, 1), nupdate=len(upd),
        nu_max=max([1] + [b - a for a, b in zip(upd_off, upd_off[1:])]),
    )


def _check_schedule(a_item, a_slot, upd, red, nC: int, np_max: int) -> None:
    """Every address the kernels touch lies inside ``L`` (``[0, nC)``) and every partial-sum slot
    inside ``[0, np_max)``: the shared variant has no bounds checks, so the schedule is checked
    once on the host. Raises AssertionError naming the first bad entry."""
    a = np.asarray(a_item, np.int64).reshape(-1, 4)
    u = np.asarray(upd, np.int64).reshape(-1, 3)
    r = np.asarray(red, np.int64).reshape(-1, 3)
    sl = np.asarray(a_slot, np.int64)
    checks = (("phase-A address", a[:, 0] if len(a) else a), ("update row/diag/L[k,i] address", u),
              ("reduction address", r[:, 0] if len(r) else r))
    for what, x in checks:
        if x.size and (x.min() < 0 or x.max() >= nC):
            raise AssertionError(f"tree factor schedule: a {what} is outside [0, nC={nC})")
    if len(a) and ((a[:, 0] - a[:, 1] < 0).any() or (u[a[:, 2] + a[:, 3] - 1, 0] + a[:, 1] >= nC).any()):
        raise AssertionError(f"tree factor schedule: a column offset leaves L (nC={nC})")
    used = np.concatenate([sl[sl >= 0], (r[:, 1] + r[:, 2] - 1) if len(r) else []])
    if used.size and used.max() >= np_max:
        raise AssertionError(f"tree factor schedule: a partial-sum slot is outside [0, {np_max})")


# ----------------------------------------------------------------------------------------------
# kernel


@wp.func_native(snippet="WP_TILE_SYNC();")
def _sync_threads():
    """Block-wide barrier (``__syncthreads`` on CUDA, a fiber yield on CPU blocks)."""
    ...


@wp.kernel(module="unique", enable_backward=False)
def _factor_tree(
    # Model:
    nv: int,
    nC: int,
    M_rownnz: wp.array[int],
    M_rowadr: wp.array[int],
    # In:
    nlevel: int,
    a_item_in: wp.array[_vec4i],
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
            item = a_item_in[w]
            adr_ij, j, first, n = item[0], item[1], item[2], item[3]
            slot = a_slot_in[w]
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
        _sync_threads()

        # phase B: subtract the partials in chunk order; scale L[k,i] /= L[k,k]
        for w in range(red_off_in[lev] + tid, red_off_in[lev + 1], nthread):
            r = red_in[w]
            value = L_out[worldid, r[0]]
            for slot in range(r[1], r[1] + r[2]):
                value -= partial_out[worldid, slot]
            L_out[worldid, r[0]] = value
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
def _shared_kernel(capacity: int):
    """The "shared" variant for a staging buffer of ``capacity`` floats (one kernel per size).

    Differences from :func:`_factor_tree` (the "global" variant), none of which changes a
    single operation or its order (results are bitwise equal, tested):

    * the world's ``L``, the partial sums and the level's scale factors live in shared memory
      (a Warp shared tile; elements read and written through native one-liners because Warp's
      own ``t[i] = x`` ends with a block barrier, which must not run inside per-thread
      branches); ``M`` is copied in once and ``L`` out once, coalesced;
    * phase S (new, one barrier): each update ``(i, k)`` of the level computes its scale factor
      ``L[k,i] / L[k,k]`` once (both final: row ``k`` is deeper) instead of once per column
      ``j`` of row ``i``; phase A then reads it, and phase B writes it to ``L[k,i]``, so the
      inner loop's dependent chain is an index load, an ``L`` load and a multiply-add.
    """

    from fightlab.kernels._shared import shared_accessors

    _sh_load, _sh_store = shared_accessors(capacity)

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
        a_item_in: wp.array[_vec4i],
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
        # L at [0, nC), partial sums at nC + slot, the level's scale factors at tmp0 + update
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
                item = a_item_in[w]
                adr_ij, j, first, n = item[0], item[1], item[2], item[3]
                slot = a_slot_in[w]
                if slot < 0:
                    value = _sh_load(sh, adr_ij)
                    for u in range(first, first + n):
                        value -= _sh_load(sh, upd_in[u][0] + j) * _sh_load(sh, tmp0 + u - u0)
                    _sh_store(sh, adr_ij, value)
                else:
                    partial = float(0.0)
                    for u in range(first, first + n):
                        partial += _sh_load(sh, upd_in[u][0] + j) * _sh_load(sh, tmp0 + u - u0)
                    _sh_store(sh, nC + slot, partial)
            _sync_threads()

            # phase B: subtract the partials in chunk order; scale L[k,i] /= L[k,k]
            for w in range(red_off_in[lev] + tid, red_off_in[lev + 1], nthread):
                r = red_in[w]
                value = _sh_load(sh, r[0])
                for slot in range(r[1], r[1] + r[2]):
                    value -= _sh_load(sh, nC + slot)
                _sh_store(sh, r[0], value)
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
        m: ``mujoco_warp`` Model.
        d: ``mujoco_warp`` Data (``d.nworld`` worlds).
        M: inertia-like matrix in MuJoCo's CSR layout, float32 ``(nworld, nC)``.
        L: output LDL region, float32 ``(nworld, nC)`` (a view such as
            ``d.qLD[:, m.qLD_block_total:]``): ``M`` with the sparse blocks' DOFs factored
            (strict lower part of ``L`` and the diagonal of ``D``, MuJoCo's ``qLD`` layout).
        D: output ``1 / diag`` for every DOF, float32 ``(nworld, nv)`` (``qLDiagInv``).
        schedule: from :func:`build_schedule` (built, not cached, when ``None``).
        block_dim: threads per world (resolves to 1 on a CPU without
            ``wp.config.enable_cpu_blocks``).
        variant: "auto" (default), "shared" or "global" (:data:`VARIANTS`,
            :func:`resolve_variant`).

    Raises:
        ValueError: see :func:`build_schedule` and :func:`resolve_variant`.
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


def _dispatch(m, d, M, L, D):
    """Replacement of ``smooth._factor_i_sparse`` while at least one model is registered."""
    entry = _REGISTRY.get(id(m))
    if entry is not None and entry.ref() is m:
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
    """Switch the single-launch tree factor on for the MuJoCo Warp model ``m``.

    Only ``m`` is affected (other models keep the stock path). The function the env or trainer
    calls after ``put_model`` and before the first step / graph capture.

    Args:
        m: ``mujoco_warp`` Model.
        block_dim: threads per world (int >= 1; 64 is the design point).
        variant: kernel variant, one of :data:`VARIANTS` ("auto": shared memory when it fits).

    Returns:
        True when ``m`` has a sparse block (a tree over ``types.M_BLOCK_DENSE_MAX`` DOF at
        ``put_model`` time) and the kernel is now used for it; False when there is nothing to
        replace (the model is left on the stock path, nothing is registered).

    Raises:
        ValueError: bad ``block_dim`` or ``variant`` (see :func:`resolve_variant`).
    """
    if not isinstance(block_dim, int) or block_dim < 1:
        raise ValueError(f"block_dim must be an int >= 1, got {block_dim!r}")
    if variant not in VARIANTS:
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
    """Switch the tree factor off for ``m`` (no-op if it was not on).

    When no model is left, ``smooth._factor_i_sparse`` is the original function object again.
    """
    entry = _REGISTRY.get(id(m))
    if entry is not None and entry.ref() is m:
        del _REGISTRY[id(m)]
    _uninstall_if_unused()


def is_tree_factor_enabled(m: Any) -> bool:
    """True while the tree factor is switched on for ``m``."""
    entry = _REGISTRY.get(id(m))
    return entry is not None and entry.ref() is m and smooth._factor_i_sparse is _dispatch


def active_variant(m: Any) -> str | None:
    """The kernel variant ("shared" / "global") factoring ``m`` now, None when the tree factor
    is off for ``m`` (recorded in result rows, so a row says which kernel produced it)."""
    if not is_tree_factor_enabled(m):
        return None
    entry = _REGISTRY[id(m)]
    return resolve_variant(entry.schedule, entry.variant)


@contextlib.contextmanager
def tree_factor(m: Any, *, block_dim: int = BLOCK_DIM, variant: str = "auto") -> Iterator[bool]:
    """``with tree_factor(m) as on:`` -- :func:`use_tree_factor` for the block, then the state
    before it (on or off) is restored, also on error. ``on`` is :func:`use_tree_factor`'s result."""
    before = _REGISTRY.get(id(m)) if is_tree_factor_enabled(m) else None
    try:
        yield use_tree_factor(m, block_dim=block_dim, variant=variant)
    finally:
        disable_tree_factor(m)
        if before is not None:
            _install()
            _REGISTRY[id(m)] = before


@contextlib.contextmanager
def dense_max(value: int) -> Iterator[None]:
    """Temporarily set ``mujoco_warp`` ``types.M_BLOCK_DENSE_MAX`` (read by ``put_model``).

    Lower it to push small trees onto the sparse path, raise it to get the dense tile reference.
    """
    old = mjw_types.M_BLOCK_DENSE_MAX
    mjw_types.M_BLOCK_DENSE_MAX = int(value)
    try:
        yield
    finally:
        mjw_types.M_BLOCK_DENSE_MAX = old


def count_factor_calls(m: Any, d: Any, fn: Callable[[], Any] | None = None) -> dict[str, int]:
    """Run ``fn`` (default ``mjw.step(m, d)``) once and count sparse factorizations of ``m``.

    Returns:
        ``{"tree": n, "stock": n}``: calls that went to :func:`factor_tree` / the stock function
        for model ``m`` (the sum is the number of factorizations per step).
    """
    counts = {"tree": 0, "stock": 0}
    current = smooth._factor_i_sparse

    entry = _REGISTRY.get(id(m))
    tree_on = current is _dispatch and entry is not None and entry.ref() is m

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


# ----------------------------------------------------------------------------------------------
# correctness helpers


def reference_factor(m: Any, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's ``mj_factorI`` of the sparse blocks in float64 (numpy), same layout as the stock.

    Args:
        m: ``mujoco_warp`` Model; M: ``(nworld, nC)`` array (cast to float64).

    Returns:
        ``(L, D)``: ``(nworld, nC)`` and ``(nworld, nv)`` float64.
    """
    L = np.array(M, dtype=np.float64, copy=True)
    rowadr, rownnz = m.M_rowadr.numpy(), m.M_rownnz.numpy()
    for lev in reversed(m.qLD_updates):
        for i, k, madr_ki in lev.numpy().reshape(-1, 3):
            diag_k = rowadr[k] + rownnz[k] - 1
            tmp = L[:, madr_ki] / L[:, diag_k]
            n = rownnz[i]
            L[:, rowadr[i]:rowadr[i] + n] -= L[:, rowadr[k]:rowadr[k] + n] * tmp[:, None]
            L[:, madr_ki] = tmp
    D = 1.0 / L[:, rowadr + rownnz - 1]
    return L, D


def relative_error(x: np.ndarray, ref: np.ndarray) -> float:
    """Normwise relative error ``max|x - ref| / max|ref|`` (0 when both are 0)."""
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    diff = float(np.max(np.abs(x - ref))) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


_HINGE, _SLIDE = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
_BALL, _FREE = int(mujoco.mjtJoint.mjJNT_BALL), int(mujoco.mjtJoint.mjJNT_FREE)


def _random_state(mjm: mujoco.MjModel, nworld: int, rng: np.random.Generator):
    """Random configurations: qpos0 (or the first keyframe) plus noise, random qvel."""
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    qpos = np.tile(base, (nworld, 1)).astype(np.float64)
    for j in range(mjm.njnt):
        adr, t = mjm.jnt_qposadr[j], int(mjm.jnt_type[j])
        if t in (_HINGE, _SLIDE):
            qpos[:, adr] += rng.uniform(-0.5, 0.5, nworld)
        elif t == _BALL:
            q = qpos[:, adr:adr + 4] + rng.normal(0, 0.3, (nworld, 4))
            qpos[:, adr:adr + 4] = q / np.linalg.norm(q, axis=1, keepdims=True)
        elif t == _FREE:
            q = qpos[:, adr + 3:adr + 7] + rng.normal(0, 0.3, (nworld, 4))
            qpos[:, adr + 3:adr + 7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    qvel = rng.normal(0, 0.5, (nworld, mjm.nv))
    return qpos.astype(np.float32), qvel.astype(np.float32)


def _put(mjm: mujoco.MjModel, nworld: int, device: str, nconmax: int | None = None,
         njmax: int | None = None):
    with wp.ScopedDevice(device):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow = 0
        kw = {}
        if nconmax is not None:
            kw["nconmax"] = nconmax
        if njmax is not None:
            kw["njmax"] = njmax
        d = mjw.make_data(mjm, nworld=nworld, **kw)
    return m, d


def _set_state(d, qpos: np.ndarray, qvel: np.ndarray, ctrl: np.ndarray | None = None):
    d.qpos.assign(qpos)
    d.qvel.assign(qvel)
    if ctrl is not None:
        d.ctrl.assign(ctrl)


def factor_errors(mjm: mujoco.MjModel, nworld: int = 4, seed: int = 0, device: str = "cpu",
                  block_dim: int = BLOCK_DIM, variant: str = "auto") -> dict[str, float]:
    """Factor ``M`` at random configurations with the stock path and with :func:`factor_tree`.

    The model is put on ``device`` with the current ``types.M_BLOCK_DENSE_MAX`` (lower it with
    :func:`dense_max` to send small trees to the sparse path). ``M`` comes from
    ``fwd_position`` (``crb`` + tendon armature) at ``nworld`` random states.

    Returns:
        dict (floats, unitless): ``qld_rel_err`` and ``qldiaginv_rel_err`` (custom vs stock,
        :func:`relative_error`), ``qld_rel_err_stock_f64`` / ``qld_rel_err_tree_f64`` (each vs the
        float64 reference :func:`reference_factor`; the float32 rounding scale), the same for
        ``qLDiagInv``, and ``nlevel``, ``nupdate``. ``block_dim`` / ``variant``: see
        :func:`factor_tree`.

    Raises:
        ValueError: the model has no tree over ``types.M_BLOCK_DENSE_MAX`` DOF; a bad variant.
    """
    m, d = _put(mjm, nworld, device)
    if not m.qLD_updates:
        raise ValueError(f"model with nv={mjm.nv} has no sparse block (trees <= "
                         f"M_BLOCK_DENSE_MAX={mjw_types.M_BLOCK_DENSE_MAX} DOF)")
    qpos, qvel = _random_state(mjm, nworld, np.random.default_rng(seed))
    _set_state(d, qpos, qvel)
    with wp.ScopedDevice(device):
        mjw.fwd_position(m, d, factorize=False)
        off = m.qLD_block_total
        L_s, D_s = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
        L_t, D_t = wp.zeros((nworld, m.nC), float), wp.zeros((nworld, m.nv), float)
        stock_factor(m, d, d.M, L_s, D_s)
        s = build_schedule(m)
        factor_tree(m, d, d.M, L_t, D_t, schedule=s, block_dim=block_dim, variant=variant)
        # and through a qLD-shaped view at offset qLD_block_total (the real call pattern)
        qLD = wp.zeros((nworld, off + m.nC), float)
        factor_tree(m, d, d.M, qLD[:, off:], D_t, schedule=s, block_dim=block_dim, variant=variant)
    Ls, Ds, Lt, Dt = L_s.numpy(), D_s.numpy(), L_t.numpy(), D_t.numpy()
    if not np.array_equal(qLD.numpy()[:, off:], Lt):
        raise AssertionError("factor_tree writes differently into a qLD view")
    Lr, Dr = reference_factor(m, d.M.numpy())
    return {
        "qld_rel_err": relative_error(Lt, Ls),
        "qldiaginv_rel_err": relative_error(Dt, Ds),
        "qld_rel_err_stock_f64": relative_error(Ls, Lr),
        "qld_rel_err_tree_f64": relative_error(Lt, Lr),
        "qldiaginv_rel_err_stock_f64": relative_error(Ds, Dr),
        "qldiaginv_rel_err_tree_f64": relative_error(Dt, Dr),
        "nlevel": float(s.nlevel),
        "nupdate": float(s.nupdate),
    }


def step_qacc_error(mjm: mujoco.MjModel, nworld: int = 2, seed: int = 0, device: str = "cpu",
                    nconmax: int | None = None, njmax: int | None = None,
                    block_dim: int = BLOCK_DIM, variant: str = "auto") -> dict[str, float]:
    """One ``mjw.step`` from the same random state, stock vs tree factor.

    Returns:
        ``{"qacc_rel_err", "qvel_rel_err", "qacc_rel_err_ulp"}``: custom vs stock after one step
        (:func:`relative_error`), and stock vs stock from a state whose ``qvel`` was moved by one
        float32 ulp (the scale of float32 rounding through a step); plus
        ``{"tree_calls", "stock_calls"}``, the factorizations the custom step made.
        ``block_dim`` / ``variant``: the tree kernel's (:func:`factor_tree`).
    """
    qpos, qvel = _random_state(mjm, nworld, np.random.default_rng(seed))
    ctrl = np.random.default_rng(seed + 1).uniform(-1, 1, (nworld, mjm.nu)).astype(np.float32)
    qvel_ulp = np.nextafter(qvel, np.float32(np.inf)).astype(np.float32)
    out = {}
    with wp.ScopedDevice(device):
        m_s, d_s = _put(mjm, nworld, device, nconmax, njmax)
        m_t, d_t = _put(mjm, nworld, device, nconmax, njmax)
        _, d_u = _put(mjm, nworld, device, nconmax, njmax)
        _set_state(d_s, qpos, qvel, ctrl)
        _set_state(d_t, qpos, qvel, ctrl)
        _set_state(d_u, qpos, qvel_ulp, ctrl)
        mjw.step(m_s, d_s)
        mjw.step(m_s, d_u)
        with tree_factor(m_t, block_dim=block_dim, variant=variant) as on:
            _require(on, mjm)
            calls = count_factor_calls(m_t, d_t)
    qa_s, qa_t, qa_u = d_s.qacc.numpy(), d_t.qacc.numpy(), d_u.qacc.numpy()
    out["qacc_rel_err"] = relative_error(qa_t, qa_s)
    out["qvel_rel_err"] = relative_error(d_t.qvel.numpy(), d_s.qvel.numpy())
    out["qacc_rel_err_ulp"] = relative_error(qa_u, qa_s)
    out["tree_calls"], out["stock_calls"] = calls["tree"], calls["stock"]
    return out


# ----------------------------------------------------------------------------------------------
# test models (mujoco.MjSpec)


def _add_link(parent, name: str, length: float, rng: np.random.Generator, joint: str = "hinge"):
    body = parent.add_body(name=name, pos=[0, 0, -length])
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    if joint == "ball":
        body.add_joint(name=f"{name}_j", type=mujoco.mjtJoint.mjJNT_BALL, damping=0.5)
    else:
        body.add_joint(name=f"{name}_j", type=mujoco.mjtJoint.mjJNT_HINGE, axis=axis, damping=0.5,
                       armature=0.05)
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[0.03, 0, 0],
                  fromto=[0, 0, 0, 0, 0, -length], mass=float(rng.uniform(0.2, 1.0)),
                  contype=0, conaffinity=0)
    return body


def _tree_spec(parents: list[int], joints: list[str], seed: int, free: bool,
               extra_chains: tuple[int, ...] = ()) -> mujoco.MjSpec:
    rng = np.random.default_rng(seed)
    spec = mujoco.MjSpec()
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    root = spec.worldbody.add_body(name="root", pos=[0, 0, 2])
    if free:
        root.add_freejoint()
    root.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.1, 0, 0], mass=2.0,
                  contype=0, conaffinity=0)
    bodies = [root]
    for n, (p, jt) in enumerate(zip(parents, joints)):
        bodies.append(_add_link(bodies[p], f"b{n}", float(rng.uniform(0.05, 0.2)), rng, jt))
    for c, length in enumerate(extra_chains):  # separate small trees (dense / scalar paths)
        body = spec.worldbody.add_body(name=f"extra{c}", pos=[1.0 + c, 0, 2])
        for n in range(length):
            body = _add_link(body, f"x{c}_{n}", 0.1, rng)
    for n in range(0, len(joints), 3):  # a few motors so steps have control input
        if joints[n] == "hinge":
            spec.add_actuator(target=f"b{n}_j", trntype=mujoco.mjtTrn.mjTRN_JOINT,
                              gear=[1, 0, 0, 0, 0, 0], ctrlrange=[-1, 1], ctrllimited=True)
    return spec


def chain_model(ndof: int, seed: int = 0, free: bool = False,
                extra_chains: tuple[int, ...] = ()) -> mujoco.MjModel:
    """A hinge chain of ``ndof`` DOF (plus 6 with ``free``), random axes and masses, damping 0.5,
    armature 0.05, no contacts, Euler integrator, built with ``mujoco.MjSpec``; ``extra_chains``
    adds separate hinge chains of those lengths (further trees: small ones take the scalar or
    dense block paths)."""
    if ndof < 1:
        raise ValueError(f"ndof must be >= 1, got {ndof!r}")
    return _tree_spec(list(range(ndof)), ["hinge"] * ndof, seed, free, extra_chains).compile()


def random_tree_model(ndof: int, nbranch: int = 4, seed: int = 0, free: bool = True,
                      ball_fraction: float = 0.1) -> mujoco.MjModel:
    """A random tree of about ``ndof`` DOF: ``nbranch`` branches of different depths grown from a
    short trunk, some branches forking again; hinges plus a fraction of ball joints (3 DOF), a
    free root by default. Built with ``mujoco.MjSpec``; no contacts; Euler integrator.

    Raises:
        ValueError: ``ndof < nbranch`` or ``nbranch < 1``.
    """
    if nbranch < 1 or ndof < nbranch:
        raise ValueError(f"need ndof >= nbranch >= 1, got ndof={ndof!r}, nbranch={nbranch!r}")
    rng = np.random.default_rng(seed)
    parents, joints = [], []
    dof = 6 if free else 0
    trunk = 2
    for _ in range(trunk):
        parents.append(len(parents))  # body index: 0 is root, body n+1 is link n
        joints.append("hinge")
        dof += 1
    tips = []
    weights = rng.dirichlet(np.ones(nbranch) * 0.7)  # uneven branch lengths
    budget = max(ndof - dof, nbranch)
    for b in range(nbranch):
        length = max(1, int(round(weights[b] * budget)))
        parent = int(rng.integers(0, trunk + 1)) if not tips or rng.random() < 0.6 \
            else int(rng.choice(tips))
        for _ in range(length):
            jt = "ball" if rng.random() < ball_fraction else "hinge"
            parents.append(parent)
            joints.append(jt)
            parent = len(parents)
            dof += 3 if jt == "ball" else 1
        tips.append(parent - max(1, length // 2))  # a later branch may fork mid-branch
    return _tree_spec(parents, joints, seed, free).compile()


# ----------------------------------------------------------------------------------------------
# trajectory and speed (for the GPU session; tiny on the CPU)


def _hinge_qposadr(mjm: mujoco.MjModel) -> np.ndarray:
    h = [mjm.jnt_qposadr[j] for j in range(mjm.njnt)
         if int(mjm.jnt_type[j]) in (_HINGE, _SLIDE)]
    return np.asarray(h, dtype=np.int64)


def _require(on: bool, mjm: mujoco.MjModel) -> None:
    """A tree-vs-stock comparison needs the tree factor switched on (else it compares stock with
    itself and reports a perfect, meaningless agreement)."""
    if not on:
        raise ValueError(f"model with nv={mjm.nv} has no tree over M_BLOCK_DENSE_MAX="
                         f"{mjw_types.M_BLOCK_DENSE_MAX} DOF: the tree factor has nothing to replace, "
                         "so there is no tree-vs-stock comparison to make")


def _push_schedule(mjm: mujoco.MjModel, nworld: int, nsteps: int, rng: np.random.Generator,
                   interval_s: tuple[float, float] = (1.0, 3.0), duration_s: float = 0.1,
                   impulse_ns: tuple[float, float] = (15.0, 30.0)) -> np.ndarray:
    """Horizontal pushes like :class:`fightlab.envs.stance.StanceEnv`'s defaults
    (``EnvConfig.push_*``): push starts uniform(1, 3) s apart (start to start, as the env
    counts), each a constant force of impulse / duration newtons (impulse uniform(15, 30) N·s,
    random horizontal direction) for 0.1 s. Returns float32 ``(nsteps, nworld, 3)``: the force
    at each physics step (applied to :func:`_push_body`)."""
    dt = float(mjm.opt.timestep)
    force = np.zeros((nsteps, nworld, 3), np.float32)
    dur = max(1, int(round(duration_s / dt)))
    for w in range(nworld):
        t = rng.uniform(*interval_s)
        while True:
            n0 = int(round(t / dt))
            if n0 >= nsteps:
                break
            ang = rng.uniform(0.0, 2.0 * np.pi)
            f = rng.uniform(*impulse_ns) / duration_s
            force[n0:n0 + dur, w, :2] = f * np.cos(ang), f * np.sin(ang)
            t += rng.uniform(*interval_s)
    return force


def _push_body(mjm: mujoco.MjModel) -> int:
    """The body pushed in the trajectory comparison: the one named "torso" (fightlab's bodies,
    as the env pushes it), else body 1 (the root of the first tree)."""
    torso = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, "torso")
    return torso if torso >= 0 else 1


def trajectory_deviation(mjm: mujoco.MjModel, nworld: int = 4, nsteps: int = 10, seed: int = 0,
                         device: str = "cpu", hold: int = 5, nconmax: int | None = None,
                         njmax: int | None = None, quiet: bool = False,
                         block_dim: int = BLOCK_DIM, variant: str = "auto") -> dict[str, Any]:
    """Run identical actions for ``nsteps`` physics steps: tree factor vs stock, and stock vs
    stock from a state perturbed by one float32 ulp.

    Default ("pushed") episode: the first keyframe (or ``qpos0``) with small seeded noise, same
    for all runs; controls uniform in the control range, drawn per world every ``hold`` steps;
    horizontal pushes on the root body as in the env (:func:`_push_schedule`); all seeded and
    identical for every run. ``quiet=True``: the keyframe exactly, controls held at the
    keyframe's ``ctrl`` (zero without one), no pushes: a standing episode. In both, the ulp run
    moves every hinge/slide ``qpos`` up by one float32 ulp. ``block_dim`` / ``variant``: the
    tree kernel's (:func:`factor_tree`).

    Returns:
        dict: ``max_dev_tree_rad`` / ``max_dev_ulp_rad`` (max over steps, worlds and hinge joints
        of ``|q - q_stock|``, rad for hinges), ``curve`` (DataFrame-ready dict: ``step``,
        ``time_s``, ``dev_tree_rad``, ``dev_ulp_rad`` per step), ``nsteps``, ``nan`` (True if
        any run produced a NaN; the maxima are then NaN too), ``overflow_worlds`` (worlds, summed
        over the three runs, whose contact/constraint slots overflowed: d.overflow slot bits),
        ``pushes`` (pushes applied, summed over worlds; 0 when ``quiet``).
    """
    rng = np.random.default_rng(seed)
    base = mjm.key_qpos[0] if mjm.nkey else mjm.qpos0
    hadr = _hinge_qposadr(mjm)
    qpos = np.tile(base, (nworld, 1)).astype(np.float32)
    nctrl = -(-nsteps // hold)
    if quiet:
        key_ctrl = mjm.key_ctrl[0] if mjm.nkey and mjm.nu else np.zeros(mjm.nu)
        ctrls = np.broadcast_to(key_ctrl.astype(np.float32), (nctrl, nworld, mjm.nu))
        push = None
    else:
        qpos[:, hadr] += rng.normal(0, 0.01, (nworld, len(hadr))).astype(np.float32)
        lo, hi = mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1]
        ctrls = rng.uniform(lo, hi, (nctrl, nworld, mjm.nu)).astype(np.float32)
        push = _push_schedule(mjm, nworld, nsteps, rng)
    qvel = np.zeros((nworld, mjm.nv), np.float32)
    qpos_ulp = qpos.copy()
    qpos_ulp[:, hadr] = np.nextafter(qpos[:, hadr], np.float32(np.inf))
    xfrc = np.zeros((nworld, mjm.nbody, 6), np.float32)
    pbody = _push_body(mjm)
    kw = dict(nconmax=nconmax, njmax=njmax)
    with wp.ScopedDevice(device):
        m_s, d_s = _put(mjm, nworld, device, **kw)
        m_t, d_t = _put(mjm, nworld, device, **kw)
        _, d_u = _put(mjm, nworld, device, **kw)
        _set_state(d_s, qpos, qvel)
        _set_state(d_t, qpos, qvel)
        _set_state(d_u, qpos_ulp, qvel)
        dev_t, dev_u = np.zeros(nsteps), np.zeros(nsteps)
        with tree_factor(m_t, block_dim=block_dim, variant=variant) as on:
            _require(on, mjm)
            for n in range(nsteps):
                if n % hold == 0:
                    for dd in (d_s, d_t, d_u):
                        dd.ctrl.assign(ctrls[n // hold])
                if push is not None and (n == 0 or not np.array_equal(push[n], push[n - 1])):
                    xfrc[:, pbody, :3] = push[n]
                    for dd in (d_s, d_t, d_u):
                        dd.xfrc_applied.assign(xfrc)
                mjw.step(m_s, d_s)
                mjw.step(m_t, d_t)
                mjw.step(m_s, d_u)
                qs = d_s.qpos.numpy()[:, hadr]
                dev_t[n] = np.max(np.abs(d_t.qpos.numpy()[:, hadr] - qs))
                dev_u[n] = np.max(np.abs(d_u.qpos.numpy()[:, hadr] - qs))
        # slots that ran out drop contacts/rows: such a comparison is not of the same physics
        from fightlab.sim.physics import SLOT_BITS

        overflow = int(sum(int(np.count_nonzero(dd.overflow.numpy() & SLOT_BITS)) for dd in (d_s, d_t, d_u)))
    nan = bool(np.isnan(dev_t).any() or np.isnan(dev_u).any())
    dt = float(mjm.opt.timestep)
    return {
        # np.max, not nanmax: a NaN anywhere must show in the result
        "max_dev_tree_rad": float(np.max(dev_t)),
        "max_dev_ulp_rad": float(np.max(dev_u)),
        "overflow_worlds": overflow,
        "curve": {"step": np.arange(1, nsteps + 1), "time_s": dt * np.arange(1, nsteps + 1),
                  "dev_tree_rad": dev_t, "dev_ulp_rad": dev_u},
        "nsteps": nsteps,
        "nan": nan,
        "pushes": 0 if push is None else int(np.count_nonzero(np.diff(
            (np.abs(push[:, :, 0]) + np.abs(push[:, :, 1]) > 0).astype(np.int8), axis=0, prepend=0) == 1)),
    }


def benchmark(mjm: mujoco.MjModel, nworld: int, device: str = "cpu", inner: int = 10,
              warmup: int = 3, repeats: int = 10, graph: bool | None = None, seed: int = 0,
              with_dense: bool = True, with_step: bool = True, nconmax: int | None = None,
              njmax: int | None = None, block_dim: int = BLOCK_DIM,
              variant: str = "auto") -> dict[str, float]:
    """Factorization time per call and per physics step: stock sparse, tree kernel, dense tile.

    ``M`` is filled by ``fwd_position`` at random states; each timed region runs ``inner``
    factorizations of ``d.M`` into ``d.qLD``/``d.qLDiagInv`` (replayed from a CUDA graph when
    ``graph``, default: on CUDA), timed with :func:`fightlab.timing.measure` (synchronised, median
    of ``repeats`` after ``warmup``). The dense reference is the same model put with
    ``types.M_BLOCK_DENSE_MAX`` raised to ``nv`` (tile Cholesky, ``smooth._factor_blocks``).
    Per step = per call x the factorizations one ``mjw.step`` makes (:func:`count_factor_calls`).
    The tree kernel runs as ``variant`` with ``block_dim`` threads per world (:func:`factor_tree`);
    the "global" variant is timed too, as the first design's reference.

    Returns:
        dict of floats (and one str, ``variant``): ``nv``, ``levels``, ``factor_calls_per_step``, ``inner_calls``,
        ``stock_us_per_call``, ``tree_us_per_call`` (the chosen variant),
        ``tree_global_us_per_call`` (the "global" variant), ``dense_us_per_call`` (NaN without
        ``with_dense``), ``stock_factor_ms_per_step``, ``tree_factor_ms_per_step``,
        ``dense_factor_ms_per_step``, ``speedup_vs_stock`` (stock / tree), ``step_stock_us``,
        ``step_tree_us`` (one whole ``mjw.step`` of all worlds; NaN without ``with_step``),
        ``graph`` (1.0/0.0); and ``variant``, the variant timed (str, "auto" resolved). Times
        are for all ``nworld`` worlds together.
    """
    from fightlab import timing

    if graph is None:
        graph = timing.is_cuda_device(device)
    kw = dict(nconmax=nconmax, njmax=njmax)
    qpos, qvel = _random_state(mjm, nworld, np.random.default_rng(seed))
    with wp.ScopedDevice(device):
        m, d = _put(mjm, nworld, device, **kw)
        _set_state(d, qpos, qvel)
        mjw.fwd_position(m, d, factorize=False)
        s = build_schedule(m)
        off = m.qLD_block_total
        L = d.qLD[:, off:]

        def timed(call: Callable[[], None], name: str) -> float:
            def work():
                for _ in range(inner):
                    call()
            fn = work
            if graph:
                work()  # compile and load outside the capture
                with wp.ScopedCapture(device=device) as cap:
                    work()
                fn = lambda: wp.capture_launch(cap.graph)  # noqa: E731
            t = timing.measure(fn, device=device, warmup=warmup, repeats=repeats, name=name)
            return t.median_s / inner

        stock_s = timed(lambda: stock_factor(m, d, d.M, L, d.qLDiagInv), "stock sparse LDL")
        chosen = resolve_variant(s, variant)
        tree_s = timed(lambda: factor_tree(m, d, d.M, L, d.qLDiagInv, schedule=s, block_dim=block_dim,
                                           variant=chosen), f"tree LDL ({chosen})")
        global_s = tree_s if chosen == "global" else timed(
            lambda: factor_tree(m, d, d.M, L, d.qLDiagInv, schedule=s, block_dim=block_dim,
                                variant="global"), "tree LDL (global)")
        dense_s = float("nan")
        if with_dense:
            with dense_max(max(mjm.nv, mjw_types.M_BLOCK_DENSE_MAX)):
                m_dn, d_dn = _put(mjm, nworld, device, **kw)
            _set_state(d_dn, qpos, qvel)
            mjw.fwd_position(m_dn, d_dn, factorize=False)
            dense_s = timed(lambda: smooth._factor_blocks(m_dn, d_dn, d_dn.M, d_dn.qLD,
                                                          d_dn.qLDiagInv), "dense tile Cholesky")
        calls = sum(count_factor_calls(m, d).values())
        step_s = step_t = float("nan")
        if with_step:
            # stock and tree each step from the same random state (reset before every repeat,
            # outside the timed region) and, on CUDA, as a captured graph like training does
            m2, d2 = _put(mjm, nworld, device, **kw)

            def step_time(name: str) -> float:
                _set_state(d2, qpos, qvel)
                mjw.step(m2, d2)  # compile / allocate outside the timed region and the capture
                run = lambda: mjw.step(m2, d2)  # noqa: E731
                if graph:
                    with wp.ScopedCapture(device=device) as cap:
                        mjw.step(m2, d2)
                    run = lambda: wp.capture_launch(cap.graph)  # noqa: E731
                times = []
                for _ in range(max(1, repeats // 2)):
                    _set_state(d2, qpos, qvel)
                    times.append(timing.measure(run, device=device, warmup=0, repeats=1,
                                                name=name).median_s)
                return float(np.median(times))

            step_s = step_time("step stock")
            with tree_factor(m2, block_dim=block_dim, variant=chosen) as on:
                _require(on, mjm)
                step_t = step_time("step tree")
    return {
        "nv": float(mjm.nv),
        "levels": float(s.nlevel),
        "factor_calls_per_step": float(calls),
        "inner_calls": float(inner),
        "stock_us_per_call": stock_s * 1e6,
        "tree_us_per_call": tree_s * 1e6,
        "tree_global_us_per_call": global_s * 1e6,
        "dense_us_per_call": dense_s * 1e6,
        "stock_factor_ms_per_step": stock_s * calls * 1e3,
        "tree_factor_ms_per_step": tree_s * calls * 1e3,
        "dense_factor_ms_per_step": dense_s * calls * 1e3,
        "speedup_vs_stock": stock_s / tree_s if tree_s > 0 else float("nan"),
        "step_stock_us": step_s * 1e6,
        "step_tree_us": step_t * 1e6,
        "graph": float(bool(graph)),
        "variant": chosen,
    }


def _model_for(body: str) -> tuple[mujoco.MjModel, dict]:
    """``body``: a fightlab body name, ``chain-N`` or ``tree-N`` (random tree, 4 branches)."""
    if body.startswith("chain-"):
        return chain_model(int(body.split("-", 1)[1])), {}
    if body.startswith("tree-"):
        return random_tree_model(int(body.split("-", 1)[1])), {}
    from fightlab import bodies
    from fightlab.sim import physics

    mjm = bodies.build(body)
    slots = physics.slots_for(body)
    return mjm, {"nconmax": slots.nconmax, "njmax": slots.njmax}


def run_experiment(body: str, nworld: int, root: Any, device: str = "cpu", seed: int = 0,
                   traj_steps: int = 10, traj_nworld: int = 4, inner: int = 10,
                   repeats: int = 10, with_dense: bool = True, with_step: bool = True,
                   check_nworld: int = 4, block_dim: int = BLOCK_DIM,
                   variant: str = "auto") -> dict:
    """One ``factor`` result row: errors, trajectory deviation and speed for ``body``.

    Appends the row to ``root/data/results/factor.csv`` (:mod:`fightlab.results`) and writes the
    trajectory curve to ``root/data/curves/<run_id>.csv``.

    Args:
        body: fightlab body (``"muscular-fast"``), ``"chain-N"`` or ``"tree-N"``.
        nworld: worlds for the speed measurement; root: folder holding ``data/``;
        device: ``"cpu"`` or ``"cuda:N"``; seed: random seed; traj_steps / traj_nworld: length
        (physics steps; 0 skips both trajectory comparisons, leaving their columns empty and
        writing no curve) and width of the pushed and the quiet trajectory comparisons
        (:func:`trajectory_deviation`); inner / repeats: see :func:`benchmark`;
        with_dense / with_step: include the dense reference / whole-step timing;
        check_nworld: worlds for the error checks; block_dim / variant: the tree kernel's
        threads per world and variant (:func:`factor_tree`; recorded in ``params``, with
        ``variant`` resolved). The trajectories use the same kernel.

    Returns:
        the row (dict), with ``curve`` added (the trajectory curves as a DataFrame: pushed
        ``dev_tree_rad``/``dev_ulp_rad``, quiet ``dev_quiet_tree_rad``/``dev_quiet_ulp_rad``;
        None when ``traj_steps`` is 0).

    Raises:
        RuntimeError: the tree factor disagrees with stock beyond float32 rounding (nothing is
        timed or written).
    """
    import pandas as pd

    from fightlab import results

    mjm, kw = _model_for(body)
    errs = factor_errors(mjm, nworld=check_nworld, seed=seed, device=device, block_dim=block_dim,
                         variant=variant)
    # correctness before speed: a kernel that disagrees with stock beyond float32 rounding (the
    # same rule as tests/test_factor.py) is not timed and no row is written
    for key in ("qld", "qldiaginv"):
        bound = 3.0 * errs[f"{key}_rel_err_stock_f64"] + 1e-6
        if not errs[f"{key}_rel_err"] <= bound:
            raise RuntimeError(f"tree factor disagrees with stock on {body} ({device}): {key} relative "
                               f"error {errs[key + '_rel_err']:.3e} > {bound:.3e} (3 × stock's own "
                               "float32 error + 1e-6); nothing timed or written")
    kv = dict(block_dim=block_dim, variant=variant)
    qacc = step_qacc_error(mjm, nworld=min(check_nworld, 4), seed=seed, device=device, **kv, **kw)
    nan_t = {"max_dev_tree_rad": math.nan, "max_dev_ulp_rad": math.nan, "nan": None,
             "overflow_worlds": None, "pushes": None, "curve": None}
    traj = quiet = nan_t
    if traj_steps > 0:  # 0: skip (the notebook runs the trajectories once per body)
        traj = trajectory_deviation(mjm, nworld=traj_nworld, nsteps=traj_steps, seed=seed,
                                    device=device, **kv, **kw)
        quiet = trajectory_deviation(mjm, nworld=traj_nworld, nsteps=traj_steps, seed=seed,
                                     device=device, quiet=True, **kv, **kw)
    bench = benchmark(mjm, nworld, device=device, inner=inner, repeats=repeats, seed=seed,
                      with_dense=with_dense, with_step=with_step, block_dim=block_dim,
                      variant=variant, **kw)
    params = dict(traj_steps=traj_steps, traj_nworld=traj_nworld, inner=inner, repeats=repeats,
                  check_nworld=check_nworld, chunk=CHUNK, block_dim=block_dim, variant=bench["variant"],
                  dense_max=mjw_types.M_BLOCK_DENSE_MAX, timestep_s=float(mjm.opt.timestep))
    meta = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
    metrics = {
        **bench,
        "qld_rel_err": errs["qld_rel_err"],
        "qldiaginv_rel_err": errs["qldiaginv_rel_err"],
        "qld_rel_err_stock_f64": errs["qld_rel_err_stock_f64"],
        "qacc_rel_err": qacc["qacc_rel_err"],
        "qacc_rel_err_ulp": qacc["qacc_rel_err_ulp"],
        "traj_steps": float(traj_steps),
        "traj_dev_tree_rad": traj["max_dev_tree_rad"],
        "traj_dev_ulp_rad": traj["max_dev_ulp_rad"],
        # no trajectory run (traj_steps == 0): empty fields, not measured zeros
        "traj_nan": None if traj["nan"] is None else bool(traj["nan"] or quiet["nan"]),
        "traj_overflow_worlds": None if traj["overflow_worlds"] is None
        else int(traj["overflow_worlds"] + quiet["overflow_worlds"]),
        "traj_pushes": None if traj["pushes"] is None else int(traj["pushes"]),
        "traj_quiet_dev_tree_rad": quiet["max_dev_tree_rad"],
        "traj_quiet_dev_ulp_rad": quiet["max_dev_ulp_rad"],
    }
    if metrics["traj_nan"] or metrics["traj_overflow_worlds"]:
        print(f"factor experiment {body}: trajectory comparison had NaN={metrics['traj_nan']} and "
              f"{metrics['traj_overflow_worlds']} overflowing worlds; recorded in the row", flush=True)
    metrics = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}
    row = {**meta, **{c: metrics[c] for c in results.columns("factor")[len(meta):]}}
    curve = None
    if traj["curve"] is not None:
        curve = pd.DataFrame(traj["curve"]).assign(dev_quiet_tree_rad=quiet["curve"]["dev_tree_rad"],
                                                   dev_quiet_ulp_rad=quiet["curve"]["dev_ulp_rad"])
    with results.publish_lock(root):  # the row and its curve land together
        results.append_row("factor", row, root)
        if curve is not None:
            results.write_curve(row["run_id"], curve, root)
    return {**row, "curve": curve}


def amdahl_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """Whole-step gain of the tree factor against the Amdahl bound its factor speedup allows.

    Per row of ``data/results/factor.csv``: ``f`` = stock factor time per step / stock step time
    (the stock factor share), ``s`` = ``speedup_vs_stock``; bound = 1 / (1 − f + f / s)
    (Amdahl, 1967: only the factor share gets faster); gain = ``step_stock_us`` /
    ``step_tree_us`` (graph-captured whole steps from the same state); ``of_bound`` =
    (gain − 1) / (bound − 1), the share of the possible gain obtained (issue 6's goal: ≥ 0.8).
    Physics steps/s = nworld / step time.

    Args:
        rows: DataFrame with columns ``body``, ``nworld``, ``stock_factor_ms_per_step``,
            ``speedup_vs_stock``, ``step_stock_us``, ``step_tree_us``.

    Returns:
        DataFrame: ``body``, ``nworld``, ``factor_share``, ``factor_speedup``, ``amdahl_bound``,
        ``step_gain``, ``of_bound``, ``steps_per_s_stock``, ``steps_per_s_tree`` (NaN where a
        column is missing or a time is not positive).

    Raises:
        KeyError: a required column is missing.
    """
    import pandas as pd

    need = ["body", "nworld", "stock_factor_ms_per_step", "speedup_vs_stock", "step_stock_us",
            "step_tree_us"]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise KeyError(f"amdahl_table needs columns {missing}; got {list(rows.columns)}")
    r = rows[need].apply(pd.to_numeric, errors="coerce").assign(body=rows["body"])
    pos = lambda c: r[c].where(r[c] > 0)  # noqa: E731
    f = pos("stock_factor_ms_per_step") * 1e3 / pos("step_stock_us")
    s = pos("speedup_vs_stock")
    bound = 1.0 / (1.0 - f + f / s)
    gain = pos("step_stock_us") / pos("step_tree_us")
    return pd.DataFrame({
        "body": rows["body"], "nworld": rows["nworld"], "factor_share": f, "factor_speedup": s,
        "amdahl_bound": bound, "step_gain": gain, "of_bound": (gain - 1.0) / (bound - 1.0),
        "steps_per_s_stock": r["nworld"] / (pos("step_stock_us") * 1e-6),
        "steps_per_s_tree": r["nworld"] / (pos("step_tree_us") * 1e-6),
    })
