"""Which device a run uses: warp's view of the machine and the one device rule.

`resolve_device` is the rule for notebooks and commands ("auto": "cuda:0" when warp sees a GPU,
else "cpu"); `validate_device` checks a named device against this machine.
"""

from __future__ import annotations

import re
from pathlib import Path

from fightlab.errors import ConfigError


def init_warp():
    """Import and initialise warp quietly (no banner, no per-module load lines); returns it."""
    import warp as wp

    wp.config.quiet = True
    wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)
    wp.init()
    return wp


def default_device() -> str:
    """The device rule: "cuda:0" when warp sees a GPU, else "cpu"."""
    try:
        return "cuda:0" if init_warp().get_cuda_device_count() > 0 else "cpu"
    except Exception:  # noqa: BLE001 - no usable warp/CUDA: the CPU
        return "cpu"


def pick_device(device) -> str:
    """A command's device: None (the flag not given) is :func:`default_device`, anything else
    goes through :func:`validate_device` (ConfigError naming the value)."""
    return default_device() if device is None else validate_device(device)


def resolve_device(device, *, has_cuda=None) -> str:
    """The one device rule for notebooks and commands: "auto" (or None) gives "cuda:0" when warp
    sees a GPU, else "cpu"; anything else goes through :func:`validate_device`.

    Args:
      device: "auto", "cpu", "cuda", "cuda:N" (or a torch/warp device's name).
      has_cuda: optional callable telling whether a GPU is present, instead of asking warp (tests
        pass a fake); then "cuda:N" is checked for its form only.
    Raises:
      ConfigError: naming the value and the choices, or a GPU asked for on a machine without one.
    """
    if device is None or (isinstance(device, str) and device.strip().lower() == "auto"):
        if has_cuda is None:
            return default_device()
        return "cuda:0" if has_cuda() else "cpu"
    if has_cuda is None:
        return validate_device(device)
    d = _canonical(str(device), device, "'auto', ")
    if d != "cpu" and not has_cuda():
        raise ConfigError(f"device {device!r} asks for a GPU but this machine has none (warp sees "
                          "no CUDA device); use device 'cpu' or 'auto'")
    return d


def _canonical(text: str, device, auto: str = "") -> str:
    """"cpu" or "cuda:N" for a device's text ("cuda" is "cuda:0"), else the one-line ConfigError."""
    d = text.strip().lower()
    if not (d in ("cpu", "cuda") or (d.startswith("cuda:") and re.fullmatch(r"[0-9]+", d[5:]))):
        raise ConfigError(f"device must be {auto}'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return "cuda:0" if d == "cuda" else d


def validate_device(device, hint: str = "; use device 'cpu' (--device cpu on the command line)") -> str:
    """Return a canonical device string ("cpu" or "cuda:N").

    Raises ConfigError if `device` is not "cpu", "cuda" or "cuda:N", or names a CUDA device that
    this machine does not have (the message says which devices exist; on a machine without a
    GPU it ends with ``hint``, by default the way to the CPU through ``--device``: callers whose
    setting has another flag pass their own, or "").
    """
    d = _canonical(device if isinstance(device, str) else "?", device)
    if d == "cpu":
        return "cpu"
    cuda = [str(x) for x in init_warp().get_cuda_devices()]
    if not cuda:
        raise ConfigError(f"device {device!r} asked for, but this machine has no CUDA GPU "
                          f"(warp sees none){hint}")
    if d not in cuda:
        raise ConfigError(f"device {device!r} not found; CUDA devices here: {', '.join(cuda)}")
    return d


#: (body, device, backend) builds this process has announced (`announce_compile`)
_ANNOUNCED: set = set()


def announce_compile(body: str, device: str, backend: str = "gpu") -> str | None:
    """Say once per process and (body, device, backend), on stderr, before the env is built, that
    warp may now compile its kernels: a cold compile is silent for about a minute otherwise. When
    warp's kernel cache folder holds no module at all the compile is certain and said so; else it
    may still miss (another device, or kernels that changed). Returns the line, or None when this
    build was announced already."""
    import sys

    key = (body, device, backend)
    if key in _ANNOUNCED:
        return None
    _ANNOUNCED.add(key)
    cache = Path(init_warp().config.kernel_cache_dir or "")
    empty = not cache.is_dir() or not any(cache.iterdir())  # no cache folder yet, or nothing in it
    what = "MuJoCo Warp kernels" if backend == "gpu" else "the env's warp kernels"
    when = ("about a minute the first time (warp's kernel cache is empty)" if empty
            else "may take about a minute the first time")
    line = f"compiling {what} for {body} on {device}: {when}; cache {cache}"
    print(line, file=sys.stderr, flush=True)
    return line
