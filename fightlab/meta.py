"""Run metadata: git commit, host, GPU name, driver, CPU model and cores, package versions.

Every function here is robust: a missing ``git``, ``nvidia-smi``, CUDA or package gives a
fallback string (``"unknown"``, ``"cpu"``, ``""``) and never an exception, so recording a result
row can not fail because of the environment.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from fightlab.paths import REPO_ROOT  # the source tree (kept importable from here)

#: result-row column -> distribution name on PyPI
PACKAGES = {"warp": "warp-lang", "mujoco_warp": "mujoco-warp", "torch": "torch"}


def _run(cmd: list[str], cwd: Path | str | None = None, timeout: float = 10.0) -> str | None:
    """stdout of ``cmd`` stripped, or None if it is missing, fails or times out."""
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=True)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return out.stdout.strip()


def new_run_id() -> str:
    """12 hex characters from a random UUID4 (unique per run, safe as a file name)."""
    return uuid.uuid4().hex[:12]


def utc_now() -> str:
    """Current UTC time, ISO 8601 with seconds, e.g. ``2026-11-30T04:43:00+00:00``."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit(root: Path | str | None = None) -> str:
    """Short commit of ``HEAD`` in ``root`` (default: fightlab's source tree).

    ``"<sha>-dirty"`` when tracked files differ from ``HEAD`` (untracked files ignored, as in
    ``git describe --dirty``); ``"unknown"`` outside a git work tree, without git, or before the
    first commit. ``FIGHTLAB_COMMIT`` overrides it (a copy of the tree without ``.git``, e.g. the
    GPU machine); a full 40-hex sha there is cut to 7 characters, so rows from both group together.
    """
    override = os.environ.get("FIGHTLAB_COMMIT", "").strip()
    if override and root is None:
        sha, dirty = (override[:-6], "-dirty") if override.endswith("-dirty") else (override, "")
        if len(sha) == 40 and all(c in "0123456789abcdefABCDEF" for c in sha):
            return sha[:7].lower() + dirty
        return override
    cwd = Path(root) if root is not None else REPO_ROOT
    if not cwd.is_dir():
        return "unknown"
    sha = _run(["git", "rev-parse", "HEAD"], cwd=cwd)
    if not sha:
        return "unknown"
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd)
    return sha[:7] + ("-dirty" if status else "")  # always 7 characters (--short grows when ambiguous)


#: the code a training runs and times itself with: the bodies, the physics and its kernels, the
#: env, the trainer and the clock. Two commits whose files here are identical ran the same
#: experiment for the same params (the config's values are in every row's params; see
#: `fightlab.measure.report.config_id`), so their seeds pool (`training_code_id`).
TRAINING_CODE = ("fightlab/bodies", "fightlab/sim", "fightlab/kernels", "fightlab/envs", "fightlab/rl",
                 "fightlab/run", "fightlab/timing.py", "fightlab/hostreads.py")


@functools.lru_cache(maxsize=512)
def training_code_id(commit: str, root: str | None = None) -> str | None:
    """8 hex characters naming the :data:`TRAINING_CODE` of ``commit`` (a row's commit, e.g.
    ``"55b4d46"``): a sha1 over the git blob ids and paths of its ``.py`` files there
    (``git ls-tree -r``), so commits that changed only docs, figures, the survey or defaults
    (recorded in params) share it. None where it cannot be known: no git, ``root`` (default:
    fightlab's source tree) not a repository, a commit it does not hold (a shallow clone, a
    synthetic row), a ``-dirty`` or ``unknown`` commit."""
    import hashlib

    if not commit or not all(c in "0123456789abcdef" for c in commit.lower()):  # "unknown", "-dirty"
        return None
    cwd = Path(root) if root is not None else REPO_ROOT
    if not (cwd / ".git").exists():
        return None
    out = _run(["git", "ls-tree", "-r", "--full-tree", f"{commit}^{{commit}}", "--", *TRAINING_CODE], cwd=cwd)
    if not out:
        return None
    lines = sorted(ln for ln in out.splitlines() if ln.endswith(".py"))
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:8] if lines else None


def host_name() -> str:
    """The host as a row's `host` column says it: ``socket.gethostname()`` (or ``"unknown"``) and
    its CPU, ``"<name>; <cpu_label()>"``, e.g. ``"vm; CPU AMD EPYC 9654 96-Core Processor (16
    cores)"``: rented machines share names, and an eager learner's seconds per iteration
    follow the host's CPU (rsl_rl's host-side work), so rows say which CPU drove the GPU."""
    try:
        name = socket.gethostname() or "unknown"
    except OSError:
        name = "unknown"
    return f"{name}; {cpu_label()}"


def gpu_name(device: Any = "cpu") -> str:
    """Name of the CUDA device ``device`` (a name, a torch or warp device; e.g. ``"NVIDIA H200"``),
    or ``"cpu"`` for the CPU. Tries torch, then warp; ``"unknown"`` if both fail."""
    alias = getattr(device, "alias", None)  # warp.Device
    dev = "cpu" if device is None else alias if isinstance(alias, str) else str(device)
    if not dev.startswith("cuda"):
        return "cpu"
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(torch.device(dev))
    except Exception:  # noqa: BLE001 - metadata must never fail
        pass
    try:
        import warp as wp

        return wp.get_device(dev).name
    except Exception:  # noqa: BLE001
        return "unknown"


def driver_version() -> str:
    """NVIDIA driver version from ``nvidia-smi`` (e.g. ``"570.86.15"``), else warp's CUDA driver
    API version (``"cuda-12.8"``), else ``""`` (CPU-only machine)."""
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    if out:
        return out.splitlines()[0].strip()
    try:
        import warp as wp

        if wp.is_cuda_available():
            v = int(wp.get_cuda_driver_version())
            return f"cuda-{v // 1000}.{(v % 1000) // 10}"
    except Exception:  # noqa: BLE001
        pass
    return ""


def package_version(dist: str) -> str:
    """Installed version of distribution ``dist`` (``""`` if not installed)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def package_versions() -> dict[str, str]:
    """``{"warp": ..., "mujoco_warp": ..., "torch": ...}`` from the installed distributions."""
    return {col: package_version(dist) for col, dist in PACKAGES.items()}


def cpu_count() -> int:
    """The cores this process may run on (its affinity set; `os.cpu_count()` elsewhere; >= 1)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string, or "cpu"."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() or "cpu"
    import platform

    return platform.processor() or "cpu"


#: how the `gpu` column of a result row names the hardware of a CPU-backend measurement
CPU_LABEL_PREFIX = "CPU "


def cpu_label(cores: int | None = None) -> str:
    """The hardware of a CPU-backend measurement, as the `gpu` column of its row says it:
    ``"CPU <model> (<cores> cores)"``, e.g. ``"CPU AMD EPYC 9654 96-Core Processor (16 cores)"``
    (cores: default `cpu_count()`). Rows of another CPU model or core count never group together."""
    return f"{CPU_LABEL_PREFIX}{cpu_model()} ({cpu_count() if cores is None else int(cores)} cores)"


def is_cpu_label(gpu: str) -> bool:
    """Whether a row's `gpu` column is a `cpu_label` (a CPU-backend measurement naming its CPU)."""
    return isinstance(gpu, str) and gpu.startswith(CPU_LABEL_PREFIX) and gpu.endswith(" cores)")


#: the packing environment a launcher (``python -m fightlab batch``) sets for each job (the older
#: names second, still read): FIGHTLAB_CONCURRENT (jobs at once on this job's GPU), FIGHTLAB_MPS
#: (1: under CUDA MPS), FIGHTLAB_GPU_JOBS (jobs at once on the host over all its GPUs)
PACKING_ENV = dict(concurrent=("FIGHTLAB_CONCURRENT", "FIGHTLAB_SHARED_GPU"), mps=("FIGHTLAB_MPS",),
                   gpu_jobs=("FIGHTLAB_GPU_JOBS", "FIGHTLAB_HOST_JOBS"))


def _count(v: Any) -> int | None:
    """A job count (int >= 1) from an environment string or a params value; None when absent,
    null, NaN, not a number or < 1."""
    try:
        n = float(v)
    except (TypeError, ValueError):
        return None
    return int(n) if n == n and n >= 1 else None


def _flag(v: Any) -> bool:
    """A params / environment boolean: True for true, 1, "1", "true", "yes" (any case)."""
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes")
    return bool(v) and v == v  # NaN is not true


def packing_from_env(environ: Mapping[str, str] | None = None) -> dict | None:
    """The packing a launcher set (:data:`PACKING_ENV`): ``{"concurrent": int, "mps": bool,
    "gpu_jobs": int}`` (counts default 1, mps False), or None when no packing variable is set
    (a job started by hand: solo)."""
    env = os.environ if environ is None else environ
    if not any(env.get(n) for names in PACKING_ENV.values() for n in names):
        return None
    first = {k: next((env[n] for n in names if env.get(n)), None) for k, names in PACKING_ENV.items()}
    return dict(concurrent=_count(first["concurrent"]) or 1, mps=_flag(first["mps"]),
                gpu_jobs=_count(first["gpu_jobs"]) or 1)
