"""The errors a user sees as one line: a bad value (naming it and the choices), a diverged
training, a termination."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad user-facing value (body, nworld, device, config field); the message names the value
    and the valid choices. The CLI prints it as one line and exits with code 2; IPython (a
    notebook's cell) shows it as that one line too (`_render_traceback_`, IPython's hook for an
    exception's own display), not a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"ConfigError: {self}"]


class Diverged(ArithmeticError):
    """A training whose learner produced non-finite numbers (the update's losses, its rate, or
    the weights a checkpoint would hold): the run stops there and writes no checkpoint of them,
    so its last checkpoint is its last finite state. The CLI prints it as one line, exit code 1."""

    def _render_traceback_(self) -> list[str]:
        return [f"Diverged: {self}"]


class Terminated(KeyboardInterrupt):
    """SIGTERM (or a second SIGINT / SIGTERM during a training's stop) raised as an interrupt, so
    what cleans up after Ctrl-C (run-folder locks, batch state) runs for it too; the CLI exits
    128 + ``signum``. Attributes: signum (int)."""

    def __init__(self, signum: int):
        import signal

        self.signum = int(signum)
        super().__init__(signal.Signals(signum).name)
