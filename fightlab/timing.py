"""One helper for every measurement: warm-up, synchronise, median of repeats, compile time apart.

Every number fightlab reports about speed comes from :func:`measure` (host clock around a
synchronised region), :func:`device_timer` (CUDA events on the device's Warp stream) or
:func:`compile_time` (cold compile + load of Warp kernels in an empty kernel cache);
:func:`measure_cold` gives compile, first call and steady state of one piece of work as three
numbers. :func:`resolve_device` turns a notebook's ``device="auto"`` into ``"cuda:0"`` or
``"cpu"``, and :func:`require_synchronized` refuses a number taken without synchronising before
it is reported. Counting device→host reads (`HostReads`) lives in :mod:`fightlab.hostreads`,
re-exported here.

GPU work is asynchronous: a kernel launch returns to the host long before the kernel finishes.
A timer that does not wait for the device measures the launch, not the work. :func:`measure`
therefore calls ``sync()`` before starting the clock and again after each call, before reading
the clock. ``measure(..., sync=False)`` exists only to show the wrong number beside the right
one in a teaching notebook; it records ``synchronized=False`` and warns.

Sources: NVIDIA, "How to Implement Performance Metrics in CUDA C/C++" (events vs host timers);
Warp docs, "Concurrency" (``wp.Event``, ``wp.get_event_elapsed_time``) and "Runtime"
(``wp.load_module``, ``wp.config.kernel_cache_dir``); checked against warp-lang 1.19.0.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import time
import types
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from fightlab.hostreads import (SYNC_DEBUG_NOTE, SYNC_WARNING, HostReadError, HostReads,  # noqa: F401
                                set_sync_debug_mode)

__all__ = ["Timing", "UnsynchronizedTimingWarning", "measure", "compare_sync", "default_sync",
           "device_name", "is_cuda_device", "DeviceTimer", "device_timer", "compile_time",
           "measure_cold", "require_synchronized", "resolve_device", "cuda_available",
           # device→host reads, from fightlab.hostreads
           "HostReads", "HostReadError", "SYNC_WARNING", "SYNC_DEBUG_NOTE", "set_sync_debug_mode"]


class UnsynchronizedTimingWarning(RuntimeWarning):
    """A measurement was taken without waiting for the device: only for teaching."""


@dataclass
class Timing:
    """Result of :func:`measure`; every time is in seconds (host wall clock unless noted).

    Attributes:
        name, device: the label and device string (``"cpu"``, ``"cuda:0"``) given to :func:`measure`.
        compile_s: time of the ``compile`` callable (cold compile/load), or ``None`` if none given.
        first_s: the first call of ``fn`` (after ``compile``), apart from the steady state: it may
            include lazy loading, allocation or graph capture.
        times_s: the ``repeats`` steady-state times (after ``warmup`` untimed calls), in order;
            ``median_s``, ``min_s`` and ``iqr_s`` (75th - 25th percentile, linear interpolation;
            0.0 for a single repeat) summarise them.
        repeats, warmup: counts actually used.
        synchronized: ``False`` when taken with ``sync=False``: such numbers time only the
            host-side launch on a GPU and are shown only to teach why they are wrong.
    """

    name: str
    device: str
    compile_s: float | None
    first_s: float
    times_s: list[float] = field(repr=False)
    median_s: float
    min_s: float
    iqr_s: float
    repeats: int
    warmup: int
    synchronized: bool

    def per(self, n: float) -> float:
        """Median seconds per unit of work: ``median_s / n`` (e.g. ``n`` = steps x worlds).
        Raises ValueError if ``n`` is not > 0."""
        _check_positive("per", n)
        return self.median_s / n

    def rate(self, n: float) -> float:
        """Units of work per second at the median: ``n / median_s`` (inf if ``median_s`` is 0)."""
        _check_positive("rate", n)
        return n / self.median_s if self.median_s > 0 else float("inf")

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for a DataFrame row or JSON)."""
        return asdict(self)

    def __str__(self) -> str:
        sync = "" if self.synchronized else "  [NOT SYNCHRONISED: teaching only]"
        comp = "" if self.compile_s is None else f"compile {_fmt(self.compile_s)}, "
        return (f"{self.name or 'timing'} on {self.device}: {comp}first {_fmt(self.first_s)}, "
                f"median {_fmt(self.median_s)} (min {_fmt(self.min_s)}, IQR {_fmt(self.iqr_s)}) "
                f"over {self.repeats} repeats after {self.warmup} warm-up{sync}")


def _check_positive(method: str, n: float) -> None:
    if not n > 0:
        raise ValueError(f"Timing.{method}: n must be > 0, got {n!r}")


def _fmt(s: float) -> str:
    if s >= 1.0:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def device_name(device: Any) -> str:
    """Normalise a device given as ``str``, ``torch.device`` or ``warp.Device`` to a string:
    ``torch.device("cuda")`` -> ``"cuda"``, a warp device -> its alias (``"cuda:0"``), None -> "cpu"."""
    if device is None:
        return "cpu"
    alias = getattr(device, "alias", None)  # warp.Device
    return alias if isinstance(alias, str) else str(device)


def is_cuda_device(device: Any) -> bool:
    """True when ``device`` names a CUDA device (``"cuda"``, ``"cuda:N"``, torch/warp CUDA device)."""
    return device_name(device).startswith("cuda")


def default_sync(device: Any) -> Callable[[], None]:
    """The callable :func:`measure` uses to wait for ``device`` when ``sync=None``.

    - CPU: a no-op (work is done when the call returns).
    - CUDA: ``wp.synchronize_device(device)``, then ``torch.cuda.synchronize(device)`` when torch
      has CUDA (torch may run work on a stream Warp does not know about).
    """
    name = device_name(device)
    if not is_cuda_device(name):
        return lambda: None
    import torch
    import warp as wp

    tdev = torch.device(name) if torch.cuda.is_available() else None

    def sync() -> None:
        wp.synchronize_device(name)
        if tdev is not None:
            torch.cuda.synchronize(tdev)

    return sync


def cuda_available() -> bool:
    """True when Warp sees at least one CUDA device (False on a CPU-only machine, never raises)."""
    try:
        import warp as wp

        wp.init()
        return wp.get_cuda_device_count() > 0
    except Exception:  # noqa: BLE001 - no driver, no toolkit: a CPU machine
        return False


def resolve_device(device: Any = "auto", *, has_cuda: Callable[[], bool] | None = None) -> str:
    """:func:`fightlab.devices.resolve_device` (the one device rule) for a device name or a
    torch/warp device object; ``has_cuda`` defaults to :func:`cuda_available`. Raises
    ConfigError (a ValueError) naming the value and the choices."""
    from fightlab.devices import resolve_device as rule

    name = None if device is None else device_name(device)
    return rule(name, has_cuda=cuda_available if has_cuda is None else has_cuda)


def _check_count(what: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"measure: {what} must be an int >= {minimum}, got {value!r}")
    return value


def _iqr(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[2] - q[0]


def measure(fn: Callable[[], Any], *, device: Any = "cpu", warmup: int = 3, repeats: int = 10,
            sync: Callable[[], Any] | bool | None = None, clock: Callable[[], float] = time.perf_counter,
            compile: Callable[[], Any] | None = None, name: str = "") -> Timing:
    """Time ``fn()`` on ``device``: compile apart, first call apart, median of ``repeats``.

    Order of calls: ``compile()`` once (if given, timed as ``compile_s``); ``fn()`` once (timed as
    ``first_s``); ``warmup`` untimed calls of ``fn()``; ``repeats`` timed calls of ``fn()``. So
    ``fn`` is called ``1 + warmup + repeats`` times. Every timed region is
    ``sync(); t0 = clock(); work(); sync(); t1 = clock()``; warm-up calls are followed by
    ``sync()`` too, so queued work never leaks into the first timed repeat.

    Args:
        fn: zero-argument callable doing the work once (e.g. ``lambda: env.step(a)``).
        device: ``"cpu"``, ``"cuda:0"``, a ``torch.device`` or a ``warp.Device``; picks the
            default ``sync`` and is recorded in the result.
        warmup: untimed calls after the first call (int >= 0).
        repeats: timed calls (int >= 1).
        sync: ``None`` -> :func:`default_sync` for ``device``; a callable -> used as is;
            ``False`` -> never synchronise (wrong on a GPU: records ``synchronized=False`` and
            emits :class:`UnsynchronizedTimingWarning`; for teaching notebooks only).
        clock: seconds as float (``time.perf_counter``; tests pass a fake clock).
        compile: optional zero-argument callable run first and timed apart as ``compile_s``,
            e.g. ``lambda: wp.load_module(mod, device=device)``. For a *cold* compile (empty
            kernel cache) use :func:`compile_time` instead, or inside this callable.
        name: label stored in the result.

    Returns :class:`Timing` (seconds).

    Raises:
        ValueError: ``repeats < 1``, ``warmup < 0`` or non-int counts (message names the value);
            ``sync`` neither ``None``, ``False`` nor callable.
        Whatever ``fn``, ``compile`` or ``sync`` raise.
    """
    repeats = _check_count("repeats", repeats, 1)
    warmup = _check_count("warmup", warmup, 0)
    dev = device_name(device)

    synchronized = sync is not False
    if sync is None or sync is True:
        sync_fn = default_sync(dev)
    elif sync is False:
        sync_fn = lambda: None  # noqa: E731
        warnings.warn(f"measure({name or fn!r}): sync=False on {dev}: the numbers time the host-side "
                      "launch, not the device work; show them only to teach why synchronising matters",
                      UnsynchronizedTimingWarning, stacklevel=2)
    elif callable(sync):
        sync_fn = sync
    else:
        raise ValueError(f"measure: sync must be None, False or a callable, got {sync!r}")

    def timed(work: Callable[[], Any]) -> float:
        sync_fn()
        t0 = clock()
        work()
        sync_fn()
        return clock() - t0

    compile_s = timed(compile) if compile is not None else None
    first_s = timed(fn)
    for _ in range(warmup):
        fn()
        sync_fn()
    times = [timed(fn) for _ in range(repeats)]
    return Timing(name=name, device=dev, compile_s=compile_s, first_s=first_s, times_s=times,
                  median_s=statistics.median(times), min_s=min(times), iqr_s=_iqr(times),
                  repeats=repeats, warmup=warmup, synchronized=synchronized)


def compare_sync(fn: Callable[[], Any], **kwargs: Any) -> tuple[Timing, Timing]:
    """Measure ``fn`` twice, synchronised and not, for a side-by-side teaching table.

    Returns ``(right, wrong)``; ``wrong.synchronized`` is False. Keyword arguments go to
    :func:`measure` (``sync`` must not be given). The unsynchronised warning is suppressed here
    because the caller asked for the wrong number on purpose.
    """
    if "sync" in kwargs:
        raise ValueError("compare_sync: do not pass sync; it measures with and without it")
    right = measure(fn, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsynchronizedTimingWarning)
        wrong = measure(fn, sync=False, **kwargs)
    return right, wrong


def require_synchronized(*timings: Timing) -> None:
    """Refuse timings taken without synchronising: call before a number is reported or stored.

    Raises:
        ValueError: naming the first :class:`Timing` with ``synchronized=False`` (its ``name`` and
            device) -- such a number times the launch, not the work.
    """
    for t in timings:
        if not isinstance(t, Timing):
            raise TypeError(f"require_synchronized: expected Timing objects, got {type(t).__name__}")
        if not t.synchronized:
            raise ValueError(f"timing {t.name or '<unnamed>'!r} on {t.device} was taken without "
                             "synchronising (sync=False): it times the host-side launch only and "
                             "must not be reported as a result")


class DeviceTimer:
    """Times a region of device work; use through :func:`device_timer`.

    On a CUDA device: two ``wp.Event(device, enable_timing=True)`` recorded on
    ``wp.get_stream(device)`` (the device's current Warp stream) around the region, read with
    ``wp.get_event_elapsed_time`` (which waits for the end event). This measures GPU time of work
    queued on that stream only (torch work must run on the same stream, e.g. via
    ``wp.stream_from_torch``/``torch.cuda.ExternalStream``); resolution ~0.5 us; ``method`` is
    ``"cuda-event"``.

    On the CPU (or any non-CUDA device): the host clock between two calls of the device's
    ``sync`` (a no-op on the CPU); ``method`` is ``"host-clock"``.

    Attributes: ``elapsed_s``, seconds, after the ``with`` block (``None`` before); ``method``.
    """

    def __init__(self, device: Any = "cpu", *, sync: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.device = device_name(device)
        self.method = "cuda-event" if is_cuda_device(self.device) else "host-clock"
        self._sync = sync if sync is not None else default_sync(self.device)
        self._clock = clock
        self.elapsed_s: float | None = None

    def __enter__(self) -> "DeviceTimer":
        self.elapsed_s = None
        if self.method == "cuda-event":
            import warp as wp

            self._stream = wp.get_stream(self.device)
            self._start, self._end = (wp.Event(self.device, enable_timing=True) for _ in range(2))
            self._stream.record_event(self._start)
        else:
            self._sync()
            self._t0 = self._clock()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        if self.method == "cuda-event":
            import warp as wp

            self._stream.record_event(self._end)
            self.elapsed_s = wp.get_event_elapsed_time(self._start, self._end, synchronize=True) / 1e3
        else:
            self._sync()
            self.elapsed_s = self._clock() - self._t0


def device_timer(device: Any = "cpu", **kwargs: Any) -> DeviceTimer:
    """Context manager timing device work: CUDA events on a GPU, synchronised host clock on CPU.

    Example::

        with device_timer("cuda:0") as t:
            wp.launch(kernel, dim=n, inputs=[...], device="cuda:0")
        print(t.elapsed_s, t.method)   # seconds, "cuda-event"

    See :class:`DeviceTimer` for what each method measures.
    """
    return DeviceTimer(device, **kwargs)


def _warp_modules(target: Any) -> list:
    """Warp ``Module`` objects for a Warp Module / Kernel / Python module / module name (a str)."""
    import warp as wp
    from warp._src import context as wpc  # registry of imported user modules (no public API)

    if isinstance(target, wp.Module):
        return [target]
    if isinstance(target, wp.Kernel):
        return [target.module]
    name = target.__name__ if isinstance(target, types.ModuleType) else target  # else a module name
    mods = [m for n, m in wpc.user_modules.items() if n == name or n.startswith(name + ".")]
    if not mods:
        raise ValueError(f"compile_time: no Warp module named {name!r} is imported (import it "
                         "first; it must define a @wp.kernel, @wp.func or @wp.struct)")
    return mods


def compile_time(module_or_fn: Any, *, device: Any = "cpu", kernel_cache_dir: str | os.PathLike | None = None,
                 clock: Callable[[], float] = time.perf_counter, keep_artifacts: bool = True) -> float:
    """Seconds to compile and load Warp code cold: empty kernel cache, nothing loaded in memory.

    Points ``wp.config.kernel_cache_dir`` at a fresh directory (``kernel_cache_dir`` if given,
    else a new temporary one), unloads the target modules from memory, then times (with the
    device synchronised before and after):

    - a Warp ``Module``, ``Kernel``, Python module or module name (its submodules too):
      ``module.load(device)`` of each Warp module -- code generation, compiling (LLVM on the
      CPU, NVRTC on a GPU) and loading -- for the block size ``wp.launch`` uses by default
      (1 on the CPU, the module's ``block_dim`` on a GPU), so the first launch afterwards only
      loads what was built;
    - any other callable (e.g. ``lambda: wp.launch(k, ...)``): one call, after unloading *every*
      imported Warp user module, so whatever it launches compiles from scratch.

    In a ``finally`` block the cache directory setting is restored; when ``keep_artifacts``
    (default) the freshly built module folders are copied into the real cache (they are
    content-addressed by hash, so this is what a warm run would have built) and the measured
    modules are unloaded, so later launches load from the real cache instead of compiling twice.
    Unloading invalidates CUDA graphs captured with those modules: measure compile time before
    capturing graphs.

    Args:
        module_or_fn: what to compile (see above); device: where to load, as in :func:`measure`.
        kernel_cache_dir: an empty directory to use as the cold cache (not deleted); default a
            temporary directory that is deleted afterwards.
        clock: seconds as float; keep_artifacts: copy the new artifacts into the real cache.

    Returns seconds (float).

    Raises:
        ValueError: no imported Warp module of that name; ``kernel_cache_dir`` not empty.
        TypeError: ``module_or_fn`` is neither a module-like object nor callable.
    """
    import warp as wp
    from warp._src import context as wpc

    wp.init()  # init() resets kernel_cache_dir, so it must run before we swap the directory
    dev = device_name(device)
    sync = default_sync(dev)

    is_module_like = isinstance(module_or_fn, (wp.Module, wp.Kernel, types.ModuleType, str))
    if is_module_like:
        modules = _warp_modules(module_or_fn)
    elif callable(module_or_fn):
        modules = list(wpc.user_modules.values())
    else:
        raise TypeError(f"compile_time: expected a Warp module, kernel, module name or callable, got {module_or_fn!r}")

    saved_dir = wp.config.kernel_cache_dir
    own_tmp = kernel_cache_dir is None
    cold_dir = tempfile.mkdtemp(prefix="fightlab-warp-cache-") if own_tmp else os.fspath(kernel_cache_dir)
    os.makedirs(cold_dir, exist_ok=True)
    if not own_tmp and any(e.startswith("wp_") for e in os.listdir(cold_dir)):
        raise ValueError(f"compile_time: kernel_cache_dir {cold_dir!r} already holds Warp modules; a cold cache must be empty")
    try:
        wp.config.kernel_cache_dir = cold_dir
        for m in modules:
            m.unload()
        sync()
        t0 = clock()
        if is_module_like:
            wdev = wp.get_device(dev)
            # build the variant wp.launch uses: block_dim 1 on the CPU (Warp's CPU launch default),
            # the module's block_dim on a GPU; else the first launch would compile a second time
            block_dim = 1 if wdev.is_cpu else None
            for m in modules:
                m.load(wdev, block_dim=block_dim)
        else:
            module_or_fn()
        sync()
        return clock() - t0
    finally:
        wp.config.kernel_cache_dir = saved_dir
        if keep_artifacts and saved_dir:
            with contextlib.suppress(OSError):
                for entry in os.listdir(cold_dir):
                    src, dst = os.path.join(cold_dir, entry), os.path.join(saved_dir, entry)
                    if os.path.isdir(src) and not os.path.exists(dst):
                        shutil.copytree(src, dst)
        # loaded executables refer to files in cold_dir: reload from the real cache when next used
        for m in modules:
            m.unload()
        if own_tmp:
            shutil.rmtree(cold_dir, ignore_errors=True)


def measure_cold(fn: Callable[[], Any], module: Any, *, device: Any = "cpu",
                 kernel_cache_dir: str | os.PathLike | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 compile_timer: Callable[..., float] | None = None, **kwargs: Any) -> Timing:
    """A cold start in three separate numbers: compile, first launch, steady state.

    First :func:`compile_time` of ``module`` (a Warp kernel, module or module name) in an empty
    kernel cache gives ``compile_s``; then :func:`measure` of ``fn`` gives ``first_s`` (the first
    call: loading the compiled module from the cache, allocations) and the median of the
    ``repeats`` steady-state calls. A JIT run timed as one block adds all three together, which is
    how compile time ends up inside a "kernel time".

    ``fn``, ``device`` and ``clock`` (used for both parts) are :func:`measure`'s, ``**kwargs`` go
    to it (``warmup``, ``repeats``, ``sync``, ``name``); ``module`` and ``kernel_cache_dir`` are
    :func:`compile_time`'s, which ``compile_timer`` replaces (same signature; for tests).
    Returns :class:`Timing` with ``compile_s`` set.
    """
    if "compile" in kwargs:
        raise ValueError("measure_cold: do not pass compile; the cold compile of `module` is timed apart")
    timer = compile_time if compile_timer is None else compile_timer
    compile_s = timer(module, device=device, kernel_cache_dir=kernel_cache_dir, clock=clock)
    t = measure(fn, device=device, clock=clock, **kwargs)
    t.compile_s = float(compile_s)
    return t
