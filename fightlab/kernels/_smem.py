"""Element access to a Warp shared tile without Warp's implied block barrier.

Warp 1.19 ends ``t[i] = x`` on a tile with a block barrier (``tile_element_assign`` ->
``WP_TILE_SYNC``), which must not run inside per-thread branches. These native one-liners read
and write ``sh.data.ptr[i]`` directly; the caller places the barriers (see
``fightlab.kernels.factor``). Kept in a module without ``from __future__ import annotations``:
the tile's size is a closure value, and Warp evaluates string annotations in module globals.
"""

import functools

import warp as wp


@functools.cache
def shared_accessors(capacity: int):
    """``(load, store)`` Warp functions for a 1-D shared float32 tile of ``capacity`` elements:
    ``load(sh, i) -> float`` and ``store(sh, i, x)``; no bounds check, no barrier."""

    @wp.func_native(snippet="return sh.data.ptr[i];")
    def sh_load(sh: wp.tile[float, capacity], i: int) -> float: ...

    @wp.func_native(snippet="sh.data.ptr[i] = x;")
    def sh_store(sh: wp.tile[float, capacity], i: int, x: float): ...

    return sh_load, sh_store


_ATOMIC_ADD = """
#if defined(__CUDA_ARCH__)
    atomicAdd(sh.data.ptr + i, x);
#else
    sh.data.ptr[i] += x;
#endif
"""


@functools.cache
def shared_atomic_add(capacity: int):
    """``add(sh, i, x)``: ``sh[i] += x`` on a 1-D shared float32 tile of ``capacity`` elements,
    atomic on CUDA (``atomicAdd``); on the CPU a block's threads are cooperative fibers that
    switch only at barriers, so a plain add is atomic there. No bounds check, no barrier."""

    @wp.func_native(snippet=_ATOMIC_ADD)
    def sh_add(sh: wp.tile[float, capacity], i: int, x: float): ...

    return sh_add
