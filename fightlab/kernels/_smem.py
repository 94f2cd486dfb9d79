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
