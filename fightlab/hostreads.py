"""Counting device→host reads: `HostReads`, the guard that keeps a training iteration to its one
read (`fightlab.rl.loop`), and `set_sync_debug_mode`, torch's sync check without its note.

Re-exported by :mod:`fightlab.timing`, the module every measurement imports.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any

__all__ = ["HostReadError", "HostReads", "SYNC_WARNING", "SYNC_DEBUG_NOTE", "set_sync_debug_mode"]


class HostReadError(RuntimeError):
    """A device→host read happened where `HostReads(strict=True)` forbids one."""


#: the text of torch's sync-debug warning (torch.cuda.set_sync_debug_mode("warn")), which HostReads counts
SYNC_WARNING = "called a synchronizing CUDA operation"
_WARP_READS = ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event")
#: torch's one-time note on first setting a sync-debug mode ("... is a prototype feature and does
#: not yet detect all synchronizing operations"): about torch, not the run, so never shown
SYNC_DEBUG_NOTE = "Synchronization debug mode is a prototype feature"


def set_sync_debug_mode(mode: str | int) -> None:
    """``torch.cuda.set_sync_debug_mode(mode)`` ("default", "warn", "error" or 0-2), the check kept,
    without torch's one-time `SYNC_DEBUG_NOTE` warning; every other warning passes."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SYNC_DEBUG_NOTE)
        torch.cuda.set_sync_debug_mode(mode)


class HostReads:
    """Count — or, with `strict`, forbid — device→host reads while active (a context manager).

    Watched: torch's synchronising CUDA operations (``torch.cuda.set_sync_debug_mode``: "warn" to
    count, "error" to forbid; `.item()`, `.cpu()`, `.tolist()`, `bool()` of a CUDA tensor, …)
    and warp's reads and waits on any device (``wp.array.numpy``, ``wp.synchronize*``; on warp's
    CPU device these are host memory, counted all the same so the CPU suite can test the guard).
    Reads inside ``expected()`` are the sanctioned ones: counted, never refused.

    Counting is process-wide (a read by another thread while active counts too); reads through
    a function bound before entering (``from warp import synchronize``) are not seen. Re-entrant:
    a nested ``with`` of the same instance is a no-op. Other warnings raised while active are
    re-issued when it exits.

    Attributes:
      count: reads seen since the last ``reset()`` (int); unexpected: those outside ``expected()``;
      sites: where the first 64 of them were made.

    Raises:
      HostReadError (strict): at the first read outside ``expected()``, naming it.
    """

    def __init__(self, device: Any = "cpu", strict: bool = False):
        self.cuda = str(getattr(device, "alias", device)).startswith("cuda")  # `timing.is_cuda_device`
        self.strict = strict
        self.reset()
        self._inside = 0   # nesting of warp's read functions (one outer call counts once)
        self._sanctioned = 0
        self._saved: dict = {}
        self._depth = 0      # re-entrant: only the outermost `with` patches and restores
        self._others: list = []  # other warnings seen while recording: re-issued at exit

    def reset(self) -> None:
        self.count, self.unexpected, self.sites = 0, 0, []  # sites: the first 64 reads, where

    def _seen(self, what: str) -> None:
        self.count += 1
        if len(self.sites) < 64:
            self.sites.append(what)
        if not self._sanctioned:
            self.unexpected += 1
            if self.strict:
                raise HostReadError(f"a device→host read outside the iteration's summary: {what}")

    def _wrap(self, fn, what):
        def wrapped(*a, **k):
            if self._inside:
                return fn(*a, **k)
            f = sys._getframe(1)
            self._seen(f"{what} at {f.f_code.co_filename}:{f.f_lineno}")
            self._inside += 1
            try:
                return fn(*a, **k)
            finally:
                self._inside -= 1
        return wrapped

    def _torch_mode(self):
        set_sync_debug_mode("error" if self.strict and not self._sanctioned else "warn")

    def __enter__(self) -> "HostReads":
        import warp as wp

        self._depth += 1
        if self._depth > 1:
            return self
        self._saved = {"numpy": wp.array.numpy, **{n: getattr(wp, n) for n in _WARP_READS}}
        wp.array.numpy = self._wrap(self._saved["numpy"], "wp.array.numpy()")
        for n in _WARP_READS:
            setattr(wp, n, self._wrap(self._saved[n], f"wp.{n}()"))
        if self.cuda:
            import torch

            self._torch_saved = torch.cuda.get_sync_debug_mode()
            self._warn = warnings.catch_warnings(record=True)
            self._log = self._warn.__enter__()
            warnings.simplefilter("always")
            self._torch_mode()
        return self

    def _drain(self) -> None:
        """Count torch's sync warnings recorded so far (and drop the other warnings' records,
        re-issued so nothing is swallowed)."""
        if not self.cuda or self._depth == 0:  # not recording: nothing to count
            return
        log, self._log[:] = list(self._log), []
        for w in log:
            if SYNC_WARNING in str(w.message):
                self._seen(f"torch sync at {w.filename}:{w.lineno}")
            else:
                self._others.append(w)

    def __exit__(self, *exc) -> None:
        import warp as wp

        if self._depth > 1:  # an inner `with`: the outermost one restores
            self._depth -= 1
            return
        try:
            if self.cuda:
                set_sync_debug_mode(self._torch_saved)
                self._drain()  # still recording: the reads and warnings since the last drain
        finally:
            self._depth = 0
            if self.cuda:
                self._warn.__exit__(*exc)
            wp.array.numpy = self._saved["numpy"]
            for n in _WARP_READS:
                setattr(wp, n, self._saved[n])
            others, self._others = self._others, []
            for w in others:  # the caller's warnings, re-issued once recording has stopped
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

    @contextlib.contextmanager
    def expected(self):
        """The sanctioned read(s): counted in `count`, not in `unexpected`, never refused (an
        exception inside still counts them). Outside the `with` (nothing is recorded there, e.g.
        the runner's start) it changes nothing."""
        if self._depth == 0:
            yield
            return
        self._drain()
        self._sanctioned += 1
        if self.cuda:
            self._torch_mode()
        try:
            yield
        finally:
            self._drain()  # a no-op when the guard closed inside: its exit drained
            self._sanctioned -= 1
            if self.cuda and self._depth:  # torch's mode is the guard's to set while it is open
                self._torch_mode()

    def take(self) -> int:
        """The reads counted since the last `take()` (torch's recorded so far included)."""
        self._drain()
        n = self.count
        self.reset()
        return n
