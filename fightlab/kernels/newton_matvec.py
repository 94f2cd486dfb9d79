"""The single-launch Newton solve's matrix-vector products without long serial chains.

Two of its stages were a few threads' serial gathers (stage clock, H100, 1,024 worlds): M·x with
a row per thread, where the root's rows (six of muscular-fast's 89) hold every DOF, so the
threads holding them walk ≈ 90 dependent loads each; and 1 / trace M, every thread summing the
nv diagonal entries one after another (``newton_rows.inertia_scale``). ``matvec`` (a switch of
:data:`fightlab.kernels.newton_hessian.FIXES`) splits M's symmetric CSR rows (``M_mulm_*``,
MuJoCo Warp's ``support.mul_m`` gather) into chunks of at most :data:`CHUNK` entries dealt to the
threads, each chunk's loads independent (unrolled), partial sums in the shared tile, then a
row's chunks summed in order; the diagonal is gathered in parallel into the shared tile and
summed there in DOF order (the same sum, bit for bit). The shared tile is free at these points:
H is rebuilt from scratch after them (with the rank-1 path, which keeps the factor, the partial
sums go past its region: ``newton_rank1.scratch_offset``). Sums of M·x come in another order than MuJoCo Warp's
(within float32 rounding, tests/test_newton.py).
"""

import functools

import numpy as np
import warp as wp

from mujoco_warp._src import types as mjw_types

from fightlab.kernels import newton_rows as R
from fightlab.kernels._smem import shared_accessors
from fightlab.kernels.newton_rank1 import scratch_offset

__all__ = ["CHUNK", "mulm_chunks", "matvec_funcs"]

#: entries of M's CSR a chunk holds at most (its loads unrolled, independent)
CHUNK = 8

_MINVAL = float(mjw_types.MJ_MINVAL)
_sync_threads = R.sync_threads


def mulm_chunks(mulm_rowadr: np.ndarray) -> np.ndarray:
    """The chunk table of M's symmetric CSR rows (host ``M_mulm_rowadr``, nv + 1 entries), one
    int32 array: ``[nchunk, CHUNK]``, then ``row_chunk`` (nv + 1: row r's chunks are
    ``row_chunk[r] … row_chunk[r+1] - 1``), ``k0`` and ``k1`` (nchunk each: a chunk's CSR range).
    A row of n entries has ceil(n / CHUNK) chunks (an empty row none)."""
    adr = np.asarray(mulm_rowadr, dtype=np.int64)
    row_chunk, k0, k1 = [0], [], []
    for r in range(len(adr) - 1):
        for a in range(int(adr[r]), int(adr[r + 1]), CHUNK):
            k0.append(a)
            k1.append(min(a + CHUNK, int(adr[r + 1])))
        row_chunk.append(len(k0))
    return np.asarray([len(k0), CHUNK] + row_chunk + k0 + k1, dtype=np.int32)


@functools.cache
def _mv_jv_func(capacity: int, chunks: bool, after_update: bool = False):
    """``mv_jv(sh, worldid, tid, nthread, nv, nefc, plan, M_mulm_*, M_in, J_*, x_in, mx_out, jx_out,
    jx_minus)``: M·x in chunks (``chunks``) or a row per thread, then J·x - jx_minus;
    ``after_update``: the chunks' partial sums past the rank-1 path's region
    (``newton_rank1.scratch_offset``), where they leave the factor it keeps."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def mul_m_chunks(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, plan: wp.array[int],
                     M_mulm_col: wp.array[int], M_mulm_madr: wp.array[int], M_in: wp.array2d[float],
                     x_in: wp.array2d[float], mx_out: wp.array2d[float]):
        """mx = M·x: chunks' partial sums in the tile, a barrier, a row's chunks summed in order."""
        b = plan[1]
        nchunk = plan[b]
        o_rc = b + 2
        o_k0 = o_rc + nv + 1
        o_k1 = o_k0 + nchunk
        o = int(0)
        if wp.static(after_update):
            o = scratch_offset(nv)
        for c in range(tid, nchunk, nthread):
            k0, k1 = plan[o_k0 + c], plan[o_k1 + c]
            acc = float(0.0)
            for j in range(CHUNK):
                k = k0 + j
                if k < k1:
                    acc += M_in[worldid, M_mulm_madr[k]] * x_in[worldid, M_mulm_col[k]]
            _st(sh, o + c, acc)
        _sync_threads()
        for r in range(tid, nv, nthread):
            acc = float(0.0)
            for c in range(plan[o_rc + r], plan[o_rc + r + 1]):
                acc += _ld(sh, o + c)
            mx_out[worldid, r] = acc

    @wp.func
    def mv_jv_chunks(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nefc: int, plan: wp.array[int],
                     M_mulm_rowadr: wp.array[int], M_mulm_col: wp.array[int], M_mulm_madr: wp.array[int],
                     M_in: wp.array2d[float], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
                     J_colind: wp.array3d[int], J: wp.array3d[float], x_in: wp.array2d[float],
                     mx_out: wp.array2d[float], jx_out: wp.array2d[float], jx_minus: wp.array2d[float]):
        mul_m_chunks(sh, worldid, tid, nthread, nv, plan, M_mulm_col, M_mulm_madr, M_in, x_in, mx_out)
        R.jx(worldid, tid, nthread, nefc, J_rownnz, J_rowadr, J_colind, J, x_in, jx_out, jx_minus)

    @wp.func
    def mv_jv_rows(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nefc: int, plan: wp.array[int],
                   M_mulm_rowadr: wp.array[int], M_mulm_col: wp.array[int], M_mulm_madr: wp.array[int],
                   M_in: wp.array2d[float], J_rownnz: wp.array2d[int], J_rowadr: wp.array2d[int],
                   J_colind: wp.array3d[int], J: wp.array3d[float], x_in: wp.array2d[float],
                   mx_out: wp.array2d[float], jx_out: wp.array2d[float], jx_minus: wp.array2d[float]):
        R.mv_jv(worldid, tid, nthread, nv, nefc, M_mulm_rowadr, M_mulm_col, M_mulm_madr, M_in, J_rownnz, J_rowadr,
                J_colind, J, x_in, mx_out, jx_out, jx_minus)

    return mv_jv_chunks if chunks else mv_jv_rows


@functools.cache
def _scale_func(capacity: int, shared: bool):
    """``scale(sh, worldid, tid, nthread, nv, M_rownnz, M_rowadr, M_in) -> 1 / trace M``."""
    _ld, _st = shared_accessors(capacity)
    Tile = wp.tile[float, capacity]

    @wp.func
    def scale_shared(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
                     M_rowadr: wp.array[int], M_in: wp.array2d[float]) -> float:
        """1 / trace M: the diagonal gathered in parallel, summed in DOF order from the tile."""
        for i in range(tid, nv, nthread):
            _st(sh, i, M_in[worldid, M_rowadr[i] + M_rownnz[i] - 1])
        _sync_threads()
        trace = float(0.0)
        for i in range(nv):
            trace += _ld(sh, i)
        _sync_threads()
        return 1.0 / wp.max(_MINVAL, trace)

    @wp.func
    def scale_serial(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, M_rownnz: wp.array[int],
                     M_rowadr: wp.array[int], M_in: wp.array2d[float]) -> float:
        return R.inertia_scale(worldid, nv, M_rownnz, M_rowadr, M_in)

    return scale_shared if shared else scale_serial


@functools.cache
def matvec_funcs(capacity: int, chunks: bool, after_update: bool = False):
    """``(scale, start, mv_jv)`` for a shared tile of ``capacity`` floats: 1 / trace M, the
    solve's start (qacc, efc.Ma = M·qacc, Jaref = J·qacc - aref) and mx = M·x, jx = J·x - jx_minus
    (``newton_rows.mv_jv``), each taking the tile and the kernel's ``plan`` (the chunk table at
    ``plan[plan[1]]``); ``chunks`` False: ``newton_rows``' row-per-thread forms (the tile and
    the plan unused); ``after_update``: the chunks' scratch past the rank-1 path's region."""
    mv_jv = _mv_jv_func(capacity, chunks, after_update)
    Tile = wp.tile[float, capacity]

    @wp.func
    def start(sh: Tile, worldid: int, tid: int, nthread: int, nv: int, nefc: int, qacc_mode: int,
              plan: wp.array[int], M_mulm_rowadr: wp.array[int], M_mulm_col: wp.array[int],
              M_mulm_madr: wp.array[int], M_in: wp.array2d[float], J_rownnz: wp.array2d[int],
              J_rowadr: wp.array2d[int], J_colind: wp.array3d[int], J: wp.array3d[float],
              qacc_warmstart_in: wp.array2d[float], qacc_smooth_in: wp.array2d[float],
              efc_aref_in: wp.array2d[float], qacc_out: wp.array2d[float], efc_Ma_out: wp.array2d[float],
              Jaref_out: wp.array2d[float], solver_niter_out: wp.array[int]):
        """The start of a solve: qacc (``newton_rows.init_qacc``), then efc.Ma = M·qacc and Jaref = J·qacc -
        aref, a barrier after each."""
        R.init_qacc(worldid, tid, nthread, nv, qacc_mode, nefc, qacc_warmstart_in, qacc_smooth_in, qacc_out,
                    solver_niter_out)
        _sync_threads()
        mv_jv(sh, worldid, tid, nthread, nv, nefc, plan, M_mulm_rowadr, M_mulm_col, M_mulm_madr, M_in, J_rownnz,
              J_rowadr, J_colind, J, qacc_out, efc_Ma_out, Jaref_out, efc_aref_in)
        _sync_threads()

    return _scale_func(capacity, chunks), start, mv_jv
