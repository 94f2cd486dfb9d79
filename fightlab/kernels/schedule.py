"""The tree factor's schedule: per model, once, on the host, the work lists that
:mod:`fightlab.kernels.factor`'s kernels walk level by level (phase-A items, updates, reductions),
built from MuJoCo Warp's stock per-level updates and checked so that every address lies in ``L``.
"""

import dataclasses
from typing import Any

import numpy as np
import warp as wp

__all__ = ["CHUNK", "TreeSchedule", "build_schedule", "vec4i"]

#: descendants summed by one thread before the partial sums are combined
CHUNK = 8
#: a phase-A item ``(adr of L[i,j], column j, first update, n updates)``
vec4i = wp.types.vector(length=4, dtype=wp.int32)


@dataclasses.dataclass
class TreeSchedule:
    """Work lists of ``factor.factor_tree`` for one model, on the model's device.

    Levels are in processing order (deepest first). ``*_off`` arrays hold ``nlevel + 1`` offsets.

    Attributes:
        nv, nC: DOF count and length of the sparse LDL region (``m.nC``).
        nlevel: number of tree levels holding updates.
        a_item, a_slot: phase-A items ``(adr of L[i,j], column j, first update, n updates)``
            (vec4i) and each one's partial-sum slot (``-1``: it subtracts in place).
        upd: updates ``(rowadr_k, diag adr of k, adr of L[k,i])`` (vec3i), grouped by level and row.
        red: phase-B reductions ``(adr of L[i,j], first slot, n slots)`` (vec3i).
        a_off, upd_off, red_off: level offsets into ``a_item``, ``upd``, ``red``.
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
    """The :class:`TreeSchedule` of a MuJoCo Warp model (arrays on the device of ``m.M_rowadr``)
    from ``m.qLD_updates`` (the stock per-level updates ``(i, k, adr of L[k,i])``: only DOFs of
    sparse blocks are factored, as in the stock path), ``m.M_rowadr`` and ``m.M_rownnz``;
    ``chunk``: descendants per partial sum (ValueError unless an int >= 1).
    """
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be an int >= 1, got {chunk!r}")
    rowadr = m.M_rowadr.numpy().astype(np.int64)
    rownnz = m.M_rownnz.numpy().astype(np.int64)
    levels = [u.numpy().reshape(-1, 3) for u in reversed(m.qLD_updates)]  # deepest first
    a_item, a_slot, a_off = [], [], [0]
    upd, upd_off = [], [0]
    red, red_off = [], [0]
    np_max = 0
    for lev in levels:
        nslot = _schedule_level(lev, rowadr, rownnz, chunk, a_item, a_slot, upd, red)
        np_max = max(np_max, nslot)
        a_off.append(len(a_item))
        upd_off.append(len(upd))
        red_off.append(len(red))
    nC = int(m.nC)
    _check_schedule(a_item, a_slot, upd, red, nC, np_max)
    device = m.M_rowadr.device
    return TreeSchedule(
        nv=int(m.nv), nC=nC, nlevel=len(levels),
        a_item=_int_array(a_item, vec4i, 4, device), a_slot=_int_array(a_slot, wp.int32, 1, device),
        a_off=_int_array(a_off, wp.int32, 1, device),
        upd=_int_array(upd, wp.vec3i, 3, device), upd_off=_int_array(upd_off, wp.int32, 1, device),
        red=_int_array(red, wp.vec3i, 3, device), red_off=_int_array(red_off, wp.int32, 1, device),
        np_max=max(np_max, 1), nupdate=len(upd),
        nu_max=max([1] + [b - a for a, b in zip(upd_off, upd_off[1:])]),
    )


def _schedule_level(lev, rowadr, rownnz, chunk: int, a_item: list, a_slot: list, upd: list,
                    red: list) -> int:
    """Append one level's phase-A items, updates and reductions to the lists (stock updates
    ``lev``: rows of ``(i, k, adr of L[k,i])``); returns the level's partial-sum slots."""
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
    return nslot


def _int_array(x, dtype, width: int, device) -> wp.array:
    """``x`` (a list of ints or of ``width``-tuples) as a warp array of ``dtype`` on ``device``."""
    x = np.asarray(x, dtype=np.int32).reshape(-1, width) if width > 1 else np.asarray(x, np.int32)
    if len(x) == 0:  # warp kernels need a non-empty array; offsets keep it unread
        x = np.zeros((1, width) if width > 1 else 1, np.int32)
    return wp.array(x, dtype=dtype, device=device)


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
