"""An opt-in stage clock for one-block-per-world kernels (the single-launch Newton solve).

Thread 0 of each block reads the SM cycle counter (``clock64()`` on CUDA; the CPU's cycle counter,
``__builtin_readcyclecounter``, on warp's CPU device) at each stage boundary, after a block barrier,
and adds the cycles since the previous boundary to its stage's column of an int64 array
``(nworld, NCOLS)``: :data:`STAGES` (cycles, summed over a solve's iterations), then
:data:`COUNTS` (events), then one scratch column (the last reading). :func:`marker` builds the
functions; with ``on`` False they are empty, so the default build has no extra instruction.
Warp 1.19 has no ``wp.clock``: a native one-liner.
"""

import functools

import warp as wp

from fightlab.kernels.newton_rows import sync_threads

__all__ = ["STAGES", "COUNTS", "NCOLS", "clock64", "marker"]

#: the Newton solve's stages, in kernel order (columns 0 … len - 1 of the stage clock)
STAGES = ("init", "constraint update", "qfrc + grad", "assemble M", "assemble JtDJ", "LDLt",
          "rank-1 update", "back solve", "M.s J.s", "ls p0", "ls newton point", "ls bracket", "step", "end")
#: events counted per world (the columns after STAGES): factorizations of H, line-search brackets,
#: rank-1 updates of the factor in place of one (:mod:`fightlab.kernels.newton_rank1`) and those
#: refused midway (a downdated pivot fell: a factorization follows)
COUNTS = ("rebuilds", "brackets", "updates", "refusals")
#: columns of a stage-clock array: stages, counts, the last reading
NCOLS = len(STAGES) + len(COUNTS) + 1
_LAST = NCOLS - 1

_CLOCK = """
#if defined(__CUDA_ARCH__)
    return (wp::int64)clock64();
#else
    return (wp::int64)__builtin_readcyclecounter();
#endif
"""


@wp.func_native(snippet=_CLOCK)
def clock64() -> wp.int64:
    """The calling thread's cycle counter (SM cycles on CUDA)."""
    ...


@wp.func
def _start_on(prof: wp.array2d[wp.int64], worldid: int, tid: int):
    if tid == 0:
        prof[worldid, _LAST] = clock64()


@wp.func
def _mark_on(prof: wp.array2d[wp.int64], worldid: int, tid: int, stage: int):
    sync_threads()
    if tid == 0:
        t = clock64()
        prof[worldid, stage] = prof[worldid, stage] + (t - prof[worldid, _LAST])
        prof[worldid, _LAST] = t


@wp.func
def _count_on(prof: wp.array2d[wp.int64], worldid: int, tid: int, column: int):
    if tid == 0:
        prof[worldid, column] = prof[worldid, column] + wp.int64(1)


@wp.func
def _start_off(prof: wp.array2d[wp.int64], worldid: int, tid: int):
    pass


@wp.func
def _mark_off(prof: wp.array2d[wp.int64], worldid: int, tid: int, stage: int):
    pass


@wp.func
def _count_off(prof: wp.array2d[wp.int64], worldid: int, tid: int, column: int):
    pass


@functools.cache
def marker(on: bool):
    """``(start, mark, count)``: ``start(prof, worldid, tid)`` at the kernel's start;
    ``mark(prof, worldid, tid, stage)`` at a block-uniform point (every thread calls it: a
    barrier, then thread 0 adds the cycles since the last reading to ``stage``);
    ``count(prof, worldid, tid, column)`` adds 1 (thread 0). Empty functions when ``on`` is
    False."""
    return (_start_on, _mark_on, _count_on) if on else (_start_off, _mark_off, _count_off)
