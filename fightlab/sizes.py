"""Notebook and main-job sizes: "smoke" (a check of the code path) or "full" (the measurement),
and "auto", the main job's rule (full on a GPU, smoke on a CPU)."""

from __future__ import annotations

from fightlab.errors import ConfigError


#: notebook / reproduce sizes: "smoke" (CPU-sized check of the code path), "full" (the measurement)
SIZES = ("smoke", "full")
#: what a notebook's `size` parameter accepts: "auto" (the default) or one of :data:`SIZES`
SIZE_CHOICES = ("auto",) + SIZES


def validate_size(size, choices: tuple = SIZES) -> str:
    """Return `size` if it is one of ``choices``, else raise ConfigError naming them."""
    if not isinstance(size, str) or size not in choices:
        raise ConfigError(f"size must be one of {', '.join(map(repr, choices))}, got {size!r}")
    return size


def resolve_size(size, device) -> str:
    """The one size rule, the main job's: "auto" is "full" on a GPU (a "cuda..." device, see
    `fightlab.devices.resolve_device`) and "smoke" on a CPU; "smoke" and "full" stay as given.
    Raises ConfigError naming the value and :data:`SIZE_CHOICES`."""
    if validate_size(size, SIZE_CHOICES) == "auto":
        return "full" if str(device).startswith("cuda") else "smoke"
    return size


def size_note(size, device, needs_gpu: bool = True) -> str:
    """One line saying which size :func:`resolve_size` picks for `size` on `device`, and why:
    what a notebook prints first, e.g. ``size = smoke (auto: no GPU, device cpu): a check of the
    code path, not a measurement``. `needs_gpu`: False for a notebook whose full size means
    nothing slow on a CPU (a rendering, tables). Raises ConfigError as :func:`resolve_size`."""
    resolved = resolve_size(size, device)
    gpu = str(device).startswith("cuda")
    why = f"{'auto' if size == 'auto' else 'as set'}: {'GPU' if gpu else 'no GPU'}, device {device}"
    if resolved == "smoke":
        what = "a check of the code path, not a measurement"
    elif gpu or not needs_gpu:
        what = "the measurement" if needs_gpu else "the full-size result"
    else:
        what = ("the GPU measurement's sizes on a CPU: slow, and not a measurement "
                "(size 'smoke' or 'auto' checks the code path)")
    return f"size = {resolved} ({why}): {what}"
