"""Notebook and main-job sizes: "smoke" (a check of the code path) or "full" (the measurement),
and "auto", the main job's rule (full on a GPU, smoke on a CPU)."""

from __future__ import annotations

from fightlab.errors import ConfigError


#: notebook / reproduce sizes: "smoke" (CPU-sized check of the code path), "full" (the measurement)
SIZES = ("smoke", "full")


def validate_size(size) -> str:
    """Return `size` if it is one of :data:`SIZES`, else raise ConfigError naming the choices."""
    if not isinstance(size, str) or size not in SIZES:
        raise ConfigError(f"size must be one of {', '.join(map(repr, SIZES))}, got {size!r}")
    return size


#: what a notebook's `size` parameter accepts: "auto" (the default) or one of :data:`SIZES`
SIZE_CHOICES = ("auto",) + SIZES


def resolve_size(size, device) -> str:
    """The one size rule, the main job's: "auto" is "full" on a GPU (a "cuda..." device) and
    "smoke" on a CPU; "smoke" and "full" stay as given.

    Args:
      size: "auto", "smoke" or "full".
      device: the resolved device ("cpu", "cuda:N"; see :func:`resolve_device`).
    Returns:
      "smoke" or "full".
    Raises:
      ConfigError: naming the value and :data:`SIZE_CHOICES`.
    """
    if not isinstance(size, str) or size not in SIZE_CHOICES:
        raise ConfigError(f"size must be one of {', '.join(map(repr, SIZE_CHOICES))}, got {size!r}")
    if size == "auto":
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
