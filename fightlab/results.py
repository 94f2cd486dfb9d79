"""The one schema for result rows: ``data/results/<experiment>.csv``, one row per run.

A row is a flat dict: the metadata columns :data:`META_COLUMNS` first, in that order, then the
experiment's metric columns :data:`EXPERIMENTS[experiment]`, each named with its unit
(``time_to_solve_s``, ``env_steps_per_s``); counts and flags are unitless (``iterations``,
``solved``). ``params`` holds the run's parameters as a JSON string (sorted keys).

    meta = run_metadata(body="simple", nworld=1024, seed=0, params=cfg, device="cuda:0")
    append_row("train", {**meta, **metrics}, root)      # -> root/data/results/train.csv
    df = read_rows("train", root)                       # figures read only these files

Per-iteration curves of a run live in ``data/curves/<run_id>.csv.gz`` (:func:`write_curve`):
gzip-compressed CSV (``pd.read_csv`` and ``zcat`` read it), a third of the plain text's size, so
the committed measurements stay small; a plain ``<run_id>.csv`` (older clones) is read as well.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import fcntl
import gzip
import io
import json
import math
import numbers
import os
import re
import threading
import zlib
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from fightlab import meta
from fightlab.meta import PACKING_ENV, _count, _flag, packing_from_env  # noqa: F401  (re-exported)
from fightlab.paths import REPO_ROOT
from fightlab.rundir import atomic_write

__all__ = [
    "META_COLUMNS",
    "EXPERIMENTS",
    "REFERENCE_COLUMNS",
    "columns",
    "register_experiment",
    "run_metadata",
    "params_json",
    "validate_row",
    "append_row",
    "publish_row",
    "publish_lock",
    "MalformedRowError",
    "read_rows",
    "read_text",
    "read_file",
    "results_path",
    "write_curve",
    "read_curve",
    "curve_path",
]

#: metadata columns, first in every result file, in this order
META_COLUMNS: tuple[str, ...] = (
    "run_id", "time", "commit", "host", "gpu", "driver", "warp", "mujoco_warp", "torch",
    "body", "nworld", "seed", "params",
)

#: metadata columns holding text (read back as str, "" stays "")
_META_INT = ("nworld", "seed")
_META_STR = tuple(c for c in META_COLUMNS if c not in _META_INT)

#: metric columns per experiment (after the metadata columns, in this order)
#: a train row's reference check (`fightlab.run.reference`; empty for a run that did not solve):
#: passed (bool), its seconds (apart from the time to solve), each run's fall rate and tracking
REFERENCE_COLUMNS = ("reference_passed", "reference_eval_s", "reference_fall_rate_dt", "reference_tracking_dt",
                     "reference_fall_rate_half_dt", "reference_tracking_half_dt")

EXPERIMENTS: dict[str, tuple[str, ...]] = {
    "train": (
        "time_to_solve_s", "iterations", "compile_s", "env_steps_per_s", "physics_steps_per_s",
        "rollout_s_per_iter", "update_s_per_iter", "solved", "final_amplitude", "fall_rate",
        "mean_episode_s", "overflow_count", "nan_resets", "host_reads_per_iter", "graph_fallbacks",
        "tracking", "tracking_survived", *REFERENCE_COLUMNS,
    ),
    # seconds per training iteration with and without each graph, and the parts of a rollout
    # step timed apart (fightlab.measure.graphs; notebook 05); flags 1/0, shares in [0, 1]. Rows
    # of commit ce380b3 timed physics and env step from a settled zero-action state (their
    # params lack split_state) and have no env_extra/policy/measured columns
    "graphs": (
        "env_graph", "policy_graph", "update_graph", "iterations", "s_per_iter",
        "rollout_s_per_iter", "update_s_per_iter", "host_reads_per_iter", "graph_fallbacks",
        "physics_ms_per_step", "env_step_ms_per_step", "rollout_ms_per_step", "non_physics_share",
        "env_non_physics_share", "env_extra_ms_per_step", "policy_ms_per_step",
        "measured_non_physics_share",
    ),
    # K trainings packed on one GPU (fightlab.measure.packing, from a batch folder): the median
    # over its trainings of each one's median seconds per iteration, and K / that median
    "packing": (
        "concurrent", "mps", "runs", "s_per_iter", "it_per_s_aggregate", "s_per_iter_min",
        "s_per_iter_max",
    ),
    # the world-count sweep (fightlab.measure.sweep; notebook 04, Figure 2): one short solo
    # training per (body, nworld); medians over its timed iterations of the host wall clock
    # (s_per_iter; its min / max) and of the rollout / update split; env steps/s = nworld ×
    # num_steps / s_per_iter; compile_s = warm-up and capture
    "sweep": (
        "iterations", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "env_steps_per_s",
        "host_reads_per_iter", "graph_fallbacks", "compile_s", "s_per_iter_min", "s_per_iter_max",
    ),
    # the CPU baseline vs MuJoCo Warp (fightlab.measure.backends, python -m fightlab
    # compare-backends): one short solo training per (body, backend), medians as in "sweep";
    # physics steps/s = env steps/s × substeps; the ratios are this row's over the CPU backend's
    # row of the same body and comparison (1 on that row); same_state_*_err: max abs difference
    # after one env step from the same state, CPU backend vs MuJoCo Warp, in the quantity's own
    # units (qpos: m / rad / quaternion, qvel: m/s / rad/s, obs, reward per env step), and
    # ulp_*_sensitivity MuJoCo Warp's own change under a 1-ulp change of the state (the scale)
    "backends": (
        "iterations", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "env_steps_per_s",
        "physics_steps_per_s", "host_reads_per_iter", "graph_fallbacks", "compile_s",
        "s_per_iter_min", "s_per_iter_max", "env_steps_ratio_vs_cpu_backend",
        "s_per_iter_ratio_vs_cpu_backend", "same_state_qpos_err", "same_state_qvel_err",
        "same_state_obs_err", "same_state_reward_err", "ulp_qpos_sensitivity",
        "ulp_qvel_sensitivity",
    ),
    # python -m fightlab bench (fightlab.measure.bench): one row per body on the
    # machine it ran on; ok 1/0 (the checks passed and the training ran; params.reason says why
    # not); set-up phases apart (install_s from the launcher, compile_s, first_iter_s); the speed
    # test's medians (as "sweep"); expected_env_steps_per_s from earlier rows of the same GPU
    # (empty: no reference); the timed training; estimated_time_to_solve_s = committed iterations
    # to solve (this learner and nworld, else the headline's) × train_s_per_iter (an estimate;
    # params.estimate.basis says which);
    # CUDA versions as 12.8; bandwidth_mb_per_s in 10^6 bytes/s (empty: not measured)
    "bench": (
        "ok", "install_s", "compile_s", "first_iter_s", "speed_iterations", "s_per_iter",
        "rollout_s_per_iter", "update_s_per_iter", "env_steps_per_s", "expected_env_steps_per_s",
        "speed_ratio_vs_expected", "train_budget_s", "train_iterations", "train_wall_s",
        "train_s_per_iter", "iterations_to_solve_reference", "estimated_time_to_solve_s",
        "cuda_driver_version", "cuda_toolkit_version", "cpu_cores", "bandwidth_mb_per_s",
        "time_limit_s", "job_wall_s",
    ),
    # the main job (fightlab.reproduce): one row per notebook run; params.notebook / size /
    # job (an id shared by the job's notebooks); wall_s of the notebook
    # under papermill, kernel start included; ok 1/0; gpu_mem_peak_mib the device memory in use
    # (every process, nvidia-smi every 0.5 s; empty on a CPU); figures_drawn the PNG figures it
    # wrote, figures_differ those not byte-identical to the committed figure of the same name
    "reproduce": (
        "wall_s", "ok", "gpu_mem_peak_mib", "figures_drawn", "figures_differ",
    ),
    # contacts / constraint rows per world of bodies pushed over (fightlab.bodies.describe)
    "slots": (
        "seconds", "ncon_max", "ncon_p99", "nefc_max", "nefc_p99", "nconmax", "njmax",
    ),
    # a policy (or the zero-action policy) re-run on fresh worlds (fightlab.run.evaluate.evaluate);
    # params holds the checkpoint and its training run_id
    "evaluate": (
        "zero_action", "timestep_s", "amplitude", "episodes", "fall_rate", "tracking",
        "mean_episode_s", "overflow_count", "nan_resets", "tracking_survived",
    ),
    # per-kernel GPU timing of uncaptured physics steps grouped by stage (fightlab.measure.profile;
    # must equal fightlab.measure.profile.row_metrics()): per physics step; *_share of kernel time;
    # graph_ms_per_step the captured step; launch_overhead = graph - summed kernels
    "profile": (
        "nstep", "launches_per_step", "kernel_ms_per_step", "graph_ms_per_step",
        "uncaptured_ms_per_step", "launch_overhead_ms_per_step", "physics_steps_per_s",
        "kinematics_ms_per_step", "inertia_ms_per_step", "mass_matrix_factor_ms_per_step",
        "forces_ms_per_step", "broadphase_ms_per_step", "narrowphase_ms_per_step",
        "constraint_build_ms_per_step", "constraint_solve_ms_per_step", "integration_ms_per_step",
        "env_ms_per_step", "other_ms_per_step", "kinematics_launches_per_step",
        "inertia_launches_per_step", "mass_matrix_factor_launches_per_step",
        "forces_launches_per_step", "broadphase_launches_per_step", "narrowphase_launches_per_step",
        "constraint_build_launches_per_step", "constraint_solve_launches_per_step",
        "integration_launches_per_step", "env_launches_per_step", "other_launches_per_step",
        "mass_matrix_factor_share", "other_share",
    ),
    # the GPU primer (notebooks/00_gpu_primer, fightlab.measure.primer): bandwidth at the largest vector
    # size, launch floor, Mandelbrot compile / first / steady apart, CNN step; *_gpu empty on a
    # CPU-only run; body "none", nworld 1
    "primer": (
        "vector_n", "copy_gb_per_s_cpu", "vec_add_gb_per_s_cpu", "saxpy_gb_per_s_cpu",
        "numpy_saxpy_gb_per_s", "copy_gb_per_s_gpu", "vec_add_gb_per_s_gpu", "saxpy_gb_per_s_gpu",
        "empty_launch_us_cpu", "empty_launch_us_gpu", "mandelbrot_pixels", "mandelbrot_numpy_s",
        "mandelbrot_compile_s_cpu", "mandelbrot_first_s_cpu", "mandelbrot_steady_s_cpu",
        "mandelbrot_compile_s_gpu", "mandelbrot_first_s_gpu", "mandelbrot_steady_s_gpu",
        "mandelbrot_unsynced_s_gpu", "mandelbrot_image_match_gpu", "cnn_batch", "cnn_image_px",
        "cnn_step_s_cpu", "cnn_step_s_gpu", "cnn_unsynced_step_s_gpu", "cnn_test_accuracy_cpu",
        "cnn_test_accuracy_gpu",
    ),
    # single-launch tree LDL vs the stock per-level sparse factor (fightlab.kernels.factor):
    # times for all nworld worlds together; *_rel_err normwise relative errors (unitless);
    # *_f64 / *_ulp: the float32 rounding scale (stock vs float64, stock vs a 1-ulp state)
    "factor": (
        "nv", "levels", "factor_calls_per_step", "inner_calls", "stock_us_per_call",
        "tree_us_per_call", "tree_global_us_per_call", "dense_us_per_call", "stock_factor_ms_per_step",
        "tree_factor_ms_per_step", "dense_factor_ms_per_step", "speedup_vs_stock",
        "step_stock_us", "step_tree_us", "graph", "qld_rel_err", "qldiaginv_rel_err",
        "qld_rel_err_stock_f64", "qacc_rel_err", "qacc_rel_err_ulp", "traj_steps",
        "traj_dev_tree_rad", "traj_dev_ulp_rad", "traj_nan", "traj_overflow_worlds",
        "traj_pushes", "traj_quiet_dev_tree_rad", "traj_quiet_dev_ulp_rad",
    ),
    # Nsight Compute profile of one factor path (params.path: stock / global / shared) in
    # bench/factor_probe.py (fightlab.measure.ncu): medians over the path's launches; *_pct in %,
    # duration in µs (ncu replay, clocks unlocked), cycles in SM cycles
    "ncu": (
        "launches", "block_size", "grid_size", "duration_us_per_factorization", "duration_us",
        "elapsed_cycles", "sm_active_cycles", "warp_cycles_per_issued_instruction",
        "active_threads_per_warp", "achieved_occupancy_pct", "theoretical_occupancy_pct",
        "achieved_warps_per_sm", "compute_throughput_pct", "memory_throughput_pct",
        "dram_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
    ),
}

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _experiment(experiment: str) -> tuple[str, ...]:
    try:
        return EXPERIMENTS[experiment]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown experiment {experiment!r}; choices: {sorted(EXPERIMENTS)} "
            "(add one with fightlab.results.register_experiment)"
        ) from None


def columns(experiment: str) -> tuple[str, ...]:
    """All columns of ``experiment``'s file: :data:`META_COLUMNS` + its metric columns.

    Raises:
        ValueError: unknown experiment (names the choices).
    """
    return META_COLUMNS + _experiment(experiment)


def register_experiment(name: str, metrics: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Add an experiment's metric columns to :data:`EXPERIMENTS` (idempotent for equal columns).

    Args:
        name: experiment / file name, ``[a-z][a-z0-9_]*``.
        metrics: metric column names, ``[a-z][a-z0-9_]*``, each with its unit where it has one.

    Raises:
        ValueError: bad name, duplicate or metadata column names, or ``name`` already registered
            with different columns.
    """
    metrics = tuple(metrics)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"experiment name must match [a-z][a-z0-9_]*, got {name!r}")
    if not metrics:
        raise ValueError(f"experiment {name!r} needs at least one metric column")
    for col in metrics:
        if not isinstance(col, str) or not _NAME.match(col):
            raise ValueError(f"metric column of {name!r} must match [a-z][a-z0-9_]*, got {col!r}")
        if col in META_COLUMNS:
            raise ValueError(f"metric column {col!r} of {name!r} clashes with a metadata column")
    dup = sorted({c for c in metrics if metrics.count(c) > 1})
    if dup:
        raise ValueError(f"experiment {name!r}: duplicate metric columns {dup}")
    old = EXPERIMENTS.get(name)
    if old is not None and old != metrics:
        raise ValueError(f"experiment {name!r} is already registered with columns {old}, not {metrics}")
    EXPERIMENTS[name] = metrics
    return metrics


# ----------------------------------------------------------------------------------------------
# metadata


def _json_default(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    item = getattr(obj, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    tolist = getattr(obj, "tolist", None)  # numpy arrays
    if callable(tolist):
        return tolist()
    raise TypeError(f"params value {obj!r} of type {type(obj).__name__} is not JSON serialisable")


def params_json(params: Mapping[str, Any] | Any) -> str:
    """``params`` (a dict or a dataclass instance) as a JSON object string with sorted keys.

    Paths become strings, numpy/torch scalars numbers, nested dataclasses dicts.

    Raises:
        TypeError: ``params`` is not a mapping/dataclass, or holds a value JSON can not store.
    """
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        params = dataclasses.asdict(params)
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict or a dataclass instance, got {type(params).__name__}")
    return json.dumps(dict(params), sort_keys=True, default=_json_default, allow_nan=True)


#: a row's or segment's older packing keys, read as the new ones (mps unknown there: False)
_OLD_PACKING = dict(concurrent="shared_gpu", gpu_jobs="host_jobs")


def packing_of(params: Mapping[str, Any], default_concurrent: Any = 1) -> dict:
    """A row's (or a training segment's) packing from its params, old rows included:
    ``concurrent`` (params.concurrent, else the older shared_gpu, else ``default_concurrent``),
    ``mps`` (params.mps, False where not recorded), ``gpu_jobs`` (params.gpu_jobs, else the older
    host_jobs, else 1: rows from before it was recorded ran one job per host)."""
    def get(key):
        v = _count(params.get(key))
        return v if v is not None else _count(params.get(_OLD_PACKING[key]))

    c = get("concurrent")
    return dict(concurrent=c if c is not None else default_concurrent,
                mps=_flag(params.get("mps", False)), gpu_jobs=get("gpu_jobs") or 1)


def _with_packing(params: str) -> str:
    """Add the launcher's packing (:func:`packing_from_env`: concurrent, mps, gpu_jobs) to a
    params JSON string when a packing variable is set, keeping any the params say already:
    CPU-side numbers (launch overhead, numpy baselines) depend on it."""
    pack = packing_from_env()
    if pack is None:
        return params
    d = json.loads(params)
    for k, v in pack.items():
        d.setdefault(k, v)
    return json.dumps(d, sort_keys=True, allow_nan=True)


def run_metadata(*, body: str, nworld: int, seed: int, params: Mapping[str, Any] | Any, device: Any,
                 backend: str = "gpu", cores: int | None = None) -> dict:
    """The metadata columns of a result row, in :data:`META_COLUMNS` order.

    Fills ``run_id`` (12 hex chars of a UUID4), ``time`` (UTC, ISO 8601), ``commit`` (short
    ``HEAD`` of fightlab's source tree, ``-dirty`` when tracked files changed, ``"unknown"``
    outside git), ``host``, ``gpu`` (the hardware the physics ran on: the CUDA device's name;
    ``"cpu"`` for MuJoCo Warp on warp's CPU device; for the CPU MuJoCo backend
    (``backend="cpu"``) the CPU model and cores, ``"CPU <model> (<n> cores)"``,
    `fightlab.meta.cpu_label`), ``driver`` (NVIDIA driver version, or ``""`` on the CPU backend
    and CPU-only machines), the ``warp``/``mujoco_warp``/``torch`` versions, and ``params`` as
    JSON (with the launcher's packing added, :func:`_with_packing`).
    Never fails because git, nvidia-smi or CUDA are missing (see :mod:`fightlab.meta`).

    Args:
        body: body name (e.g. ``"simple"``).
        nworld: number of parallel worlds (int > 0).
        seed: random seed (int).
        params: dict or dataclass of the run's parameters (stored as a JSON string).
        device: device of the run (``"cpu"``, ``"cuda:0"``, torch/warp device).
        backend: the run's physics backend, ``"gpu"`` (MuJoCo Warp on ``device``) or ``"cpu"``
            (MuJoCo's C engine); cores: the CPU backend's cores (default: this process's).

    Raises:
        ValueError: bad ``body``/``nworld``/``seed``; TypeError: params not JSON serialisable.
    """
    row = {
        "run_id": meta.new_run_id(),
        "time": meta.utc_now(),
        "commit": meta.git_commit(),
        "host": meta.host_name(),
        "gpu": meta.cpu_label(cores) if backend == "cpu" else meta.gpu_name(device),
        "driver": "" if backend == "cpu" else meta.driver_version(),
        **meta.package_versions(),
        "body": body,
        "nworld": nworld,
        "seed": seed,
        "params": _with_packing(params_json(params)),
    }
    row = {c: row[c] for c in META_COLUMNS}
    _check_meta(row)
    return row


# ----------------------------------------------------------------------------------------------
# validation


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and not _is_bool(v)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"  # numpy.bool_


def _check_meta(row: Mapping[str, Any]) -> None:
    for col in _META_STR:
        if not isinstance(row[col], str):
            raise ValueError(f"column {col!r} must be a str, got {row[col]!r} ({type(row[col]).__name__})")
    for col in ("run_id", "time", "body"):
        if not row[col]:
            raise ValueError(f"column {col!r} must not be empty")
    if not _SAFE_ID.match(row["run_id"]):
        raise ValueError(f"column 'run_id' must be letters, digits, '_', '.', '-', got {row['run_id']!r}")
    try:
        datetime.fromisoformat(row["time"])
    except ValueError:
        raise ValueError(f"column 'time' must be an ISO 8601 time, got {row['time']!r}") from None
    if not _is_int(row["nworld"]) or row["nworld"] <= 0:
        raise ValueError(f"column 'nworld' must be an int > 0, got {row['nworld']!r}")
    if not _is_int(row["seed"]):
        raise ValueError(f"column 'seed' must be an int, got {row['seed']!r}")
    try:
        params = json.loads(row["params"])
    except (TypeError, ValueError):
        raise ValueError(f"column 'params' must be a JSON object string, got {row['params']!r}") from None
    if not isinstance(params, dict):
        raise ValueError(f"column 'params' must be a JSON object (dict), got {row['params']!r}")


def validate_row(experiment: str, row: Mapping[str, Any]) -> None:
    """Check that ``row`` has exactly the columns of ``experiment`` with sensible types.

    Metadata: text columns are ``str`` (``run_id``, ``time``, ``body`` non-empty; ``time`` ISO
    8601; ``params`` a JSON object); ``nworld`` an int > 0; ``seed`` an int. Metrics: a number
    (int, float, bool, numpy scalar) or ``None``/NaN for "not measured"; never text or inf.

    Raises:
        ValueError: unknown experiment, missing or unexpected column, or a bad value -- the
            message names the column.
    """
    cols = columns(experiment)
    if not isinstance(row, Mapping):
        raise ValueError(f"row must be a dict, got {type(row).__name__}")
    missing = [c for c in cols if c not in row]
    if missing:
        raise ValueError(f"{experiment!r} row is missing column(s) {missing}")
    extra = [c for c in row if c not in cols]
    if extra:
        raise ValueError(
            f"{experiment!r} row has unexpected column(s) {extra}; columns are {list(cols)}"
        )
    _check_meta(row)
    for col in EXPERIMENTS[experiment]:
        v = row[col]
        if v is None:
            continue
        if not (isinstance(v, numbers.Number) or _is_bool(v)) or isinstance(v, complex):
            raise ValueError(f"column {col!r} must be a number or None, got {v!r} ({type(v).__name__})")
        if not _is_bool(v) and math.isinf(float(v)):
            raise ValueError(f"column {col!r} must be finite (use None/NaN for 'not measured'), got {v!r}")


# ----------------------------------------------------------------------------------------------
# files


def scratch_root(path: Path | str) -> Path:
    """A fresh local results root for one unpublished run: ``path/data`` is removed so rows of an
    earlier run (possibly with an older schema) do not mix in. Refuses any path that is not
    inside a ``runs`` folder, so the committed ``data/`` can never be removed this way.

    Returns:
        ``Path(path)``. Raises ValueError for a path outside ``runs/``.
    """
    import shutil

    p = Path(path)
    r, repo = p.resolve(), REPO_ROOT.resolve()
    in_repo = r == repo or repo in r.parents
    runs = (repo / "runs").resolve()
    ok = (runs in r.parents) if in_repo else ("runs" in r.parts and not (r / ".git").exists()
                                              and r not in repo.parents)
    if not ok or (r / "data").is_symlink():
        raise ValueError(f"scratch_root only clears folders inside runs/ (the repository's, or a "
                         f"runs/ folder elsewhere), got {str(path)!r}")
    shutil.rmtree(p / "data", ignore_errors=True)
    return p


def results_path(experiment: str, root: Path | str) -> Path:
    """``root/data/results/<experiment>.csv`` (``experiment`` must be registered)."""
    _experiment(experiment)
    return Path(root) / "data" / "results" / f"{experiment}.csv"


class MalformedRowError(ValueError):
    """A results file with a torn or malformed line (the message names the file and line)."""


def read_text(path: Path | str) -> str:
    """The UTF-8 text of a data file (results, curves, tables under data/; a name ending in
    ``.gz`` is decompressed). Raises MalformedRowError naming the file, the line and the byte of
    the first one that is not UTF-8 (a hand edit in another encoding, a damaged copy), or naming a
    ``.gz`` file that is not whole gzip, never UnicodeDecodeError or a gzip error."""
    path = Path(path)
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError; a cut file: EOFError
            if not data.startswith(b"\x1f\x8b"):  # no gzip at all: plain text under a .gz name, say
                raise MalformedRowError(f"{path}: not gzip (plain text under a .gz name?): compress it with "
                                        f"`gzip -n` or rename it to {path.name[:-3]}") from None
            raise MalformedRowError(f"{path}: not a whole gzip file ({type(e).__name__}: {e}); a torn "
                                    "copy? Restore it from git") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise MalformedRowError(f"{path}:{line}: byte {data[e.start]:#04x} at offset {e.start} is not "
                                "UTF-8; fix or remove that line by hand (fightlab writes its data files as UTF-8)") from None


def _header(path: Path) -> list[str]:
    text = read_text(path)
    return next(csv.reader(io.StringIO(text, newline="")), [])


_LOCKS: dict[str, list] = {}  # resolved data/ folder -> [fd, depth]: the lock is reentrant
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def publish_lock(root: Path | str):
    """Hold the one cross-process lock of ``root/data`` (``fcntl.flock`` on the folder) while
    writing its results and curves: processes publishing side by side (jobs on several GPUs,
    packed trainings) write one at a time, and a row replacement reads and rewrites its file
    without another writer in between. Reentrant within a process. Creates ``root/data``."""
    d = Path(root) / "data"
    d.mkdir(parents=True, exist_ok=True)
    key = str(d.resolve())
    with _LOCKS_GUARD:
        entry = _LOCKS.get(key)
        if entry is None:
            fd = os.open(d, os.O_RDONLY)
            entry = _LOCKS[key] = [fd, 0]
            take = True
        else:
            take = False
        entry[1] += 1
    try:
        if take:
            fcntl.flock(entry[0], fcntl.LOCK_EX)
        yield d
    finally:
        with _LOCKS_GUARD:
            entry[1] -= 1
            if entry[1] == 0:
                os.close(entry[0])  # releases the flock
                del _LOCKS[key]


def _in_repo_data(path: Path) -> bool:
    """True when ``path`` (resolved, symbolic links followed) lies in the repository's own data/,
    or is a hard link of the repository file at the same place below data/."""
    data = (REPO_ROOT / "data").resolve()
    p = path.resolve()
    if p == data or data in p.parents:
        return True
    twin = data / path.parent.name / path.name  # data/results/<x>.csv, data/curves/<id>.csv.gz
    try:
        return p.exists() and twin.exists() and os.path.samefile(p, twin)
    except OSError:
        return False


def _check_committed(experiment: str, row: Mapping[str, Any], root: Path | str) -> None:
    """Rows written into the repository's own data/ (wherever ``root`` points, links followed)
    obey the one publish rule (:func:`fightlab.publish.check_publish`): a measurement on a CUDA
    device (the row's ``gpu`` is a GPU's name, never ``"cpu"``) or on the CPU MuJoCo backend
    (params ``backend: "cpu"``, its ``gpu`` column naming the CPU and cores,
    `fightlab.meta.cpu_label`), at full size where the row records a size; a train row at a
    training's full size (its nworld and params' max_iterations and curriculum)."""
    from fightlab.config import ConfigError
    from fightlab.publish import check_publish

    if not _in_repo_data(results_path(experiment, root)):
        return
    gpu = str(row.get("gpu") or "")
    params = json.loads(row["params"])
    backend = "cpu" if params.get("backend") == "cpu" else "gpu"
    if backend == "cpu" and not meta.is_cpu_label(gpu):
        raise ConfigError(f"--publish writes {experiment} rows under data/: a CPU-backend row must name "
                          f"its CPU and cores in the gpu column ('CPU <model> (<n> cores)'), got {gpu!r}")
    device = "cpu" if gpu in ("", "cpu", "unknown") or backend == "cpu" else "cuda"
    size = params.get("size")
    training = None
    if experiment == "train":  # a training publishes at full size (publish.training_size_problem)
        import types

        from fightlab.config import TrainConfig

        dflt = TrainConfig()
        training = types.SimpleNamespace(**{k: params.get(k, getattr(dflt, k)) for k in (
            "nworld", "max_iterations", "curriculum_stages", "curriculum_wait", "stop_after_stage")})
        training.nworld = int(row.get("nworld", training.nworld))
    check_publish(True, device, f"{experiment} rows", size=size if isinstance(size, str) else None,
                  backend=backend, training=training)


def _older_schema(path: Path, experiment: str) -> list[str] | None:
    """The columns the schema gained since ``path`` was written, when its header is an older
    version of the schema (the schema's first columns, in order: columns are only ever added at
    the end), else None."""
    cols, header = columns(experiment), _header(path)
    if 0 < len(header) < len(cols) and tuple(header) == cols[:len(header)]:
        return list(cols[len(header):])
    return None


def _migrate_older(path: Path, experiment: str) -> None:
    """Rewrite a file of an older schema version under the current header, its rows' new
    columns empty (not measured), atomically. Leaves any other file alone."""
    added = _older_schema(path, experiment)
    if not added:
        return
    lines, _, _ = _records(path, len(_header(path)))
    pad = "," * len(added)
    text = ",".join(columns(experiment)) + "\n" + "".join(ln + pad + "\n" for ln in lines[1:])
    atomic_write(path, text)


def _check_header(path: Path, experiment: str) -> None:
    """Refuse a results file whose header is not ``experiment``'s schema (rows are never read or
    written under a wrong header). Raises MalformedRowError naming what is missing or extra."""
    cols, header = columns(experiment), _header(path)
    if tuple(header) != cols:
        missing = [c for c in cols if c not in header]
        extra = [c for c in header if c not in cols]
        detail = f"missing {missing}, extra {extra}" if (missing or extra) else "same columns, different order"
        raise MalformedRowError(
            f"{path}:1: header does not match the {experiment!r} schema ({detail}); move the old "
            "file aside or use a new experiment name")


def _records(path: Path, ncols: int, need_id: bool = True,
             text: str | None = None) -> tuple[list[str], list[str], bool]:
    """The lines of ``path`` (header first; ``text``: its text when already read), each checked
    to be one CSV record of ``ncols`` fields with a non-empty ``run_id``; the rows' first fields
    (run_ids); and whether the file ends with a newline.

    Raises:
      MalformedRowError: naming the file and the first bad line (a torn or hand-broken row).
    """
    text = read_text(path) if text is None else text
    lines = text.splitlines()
    ids = []
    for n, line in enumerate(lines[1:], start=2):
        rec = next(csv.reader([line]), [])
        if len(rec) != ncols or (need_id and not rec[0]):
            what = "is empty" if not line.strip() else f"has {len(rec)} fields, not {ncols}"
            if len(rec) == ncols:
                what = "has an empty run_id"
            raise MalformedRowError(f"{path}:{n}: malformed row ({what}); a torn write? Fix or "
                                    "remove that line by hand (nothing is read or appended past it)")
        ids.append(rec[0])
    return lines, ids, text.endswith("\n") or not text


def append_row(experiment: str, row: Mapping[str, Any], root: Path | str) -> Path:
    """Validate ``row`` and write it to ``root/data/results/<experiment>.csv``: one row per
    run_id, so a row whose run_id is already in the file replaces that row in place (a resumed
    run's later segment), any other is appended.

    Creates the file (and folders) with the header on first use. Columns are written in schema
    order whatever the dict order. ``None`` is written as an empty field (read back as NaN).
    Runs under :func:`publish_lock`. A file whose last line lacks its newline is repaired when
    that line is a whole row, refused when it is torn. Rows for the repository's own data/ must
    pass the publish rule (:func:`fightlab.publish.check_publish`).

    Returns:
        Path of the CSV file.

    Raises:
        ValueError: the row is invalid (see :func:`validate_row`), or the existing file's header
            differs from the schema (message lists missing/extra columns; move the old file aside
            or register a new experiment name -- rows are never written under a wrong header). A
            file of an older version of the schema (its header the schema's first columns) is
            first rewritten under the current header, its rows' new columns empty;
            MalformedRowError: the file has a torn or malformed line (file and line named);
            fightlab.config.ConfigError: a CPU row for the repository's data/.
    """
    validate_row(experiment, row)
    _check_committed(experiment, row, root)
    path = results_path(experiment, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with publish_lock(root):
        return _write_locked(experiment, row, path)


def _write_locked(experiment: str, row: Mapping[str, Any], path: Path) -> Path:
    cols = columns(experiment)
    exists = path.exists() and path.stat().st_size > 0
    line = pd.DataFrame([{c: row[c] for c in cols}], columns=list(cols)).to_csv(
        index=False, header=False, lineterminator="\n")
    if not exists:
        atomic_write(path, ",".join(cols) + "\n" + line)
        return path
    _migrate_older(path, experiment)  # a file of an older schema gains the new columns, empty
    _check_header(path, experiment)
    lines, ids, newline = _records(path, len(cols))
    same = [i for i, run_id in enumerate(ids, start=1) if run_id == row["run_id"]]
    if same:  # one row per run: replace it where it stands (atomically)
        keep = [ln for i, ln in enumerate(lines) if i not in same[1:]]
        keep[same[0]] = line.rstrip("\n")
        atomic_write(path, "\n".join(keep) + "\n")
        return path
    # appended by rewriting the file under a temporary name (a kill leaves the old file or the
    # new one); the last line, a whole row (checked above), gains its newline first
    atomic_write(path, read_text(path) + ("" if newline else "\n") + line)
    return path


def read_rows(experiment: str, root: Path | str) -> pd.DataFrame:
    """All rows of ``root/data/results/<experiment>.csv`` as a DataFrame, schema column order.

    Text metadata columns come back as ``str`` (``""`` stays ``""``; a commit of digits stays
    text); ``nworld``/``seed`` as int; metrics as numbers with NaN for "not measured". A missing
    file gives an empty DataFrame with the schema's columns; a file of an older version of the
    schema (its header the schema's first columns) reads with the newer columns NaN.

    Raises:
        ValueError: unknown experiment, or the file's header differs from the schema;
            MalformedRowError: a torn or malformed line (file and line named), never NaNs.
    """
    return read_file(experiment, results_path(experiment, root))


def read_file(experiment: str, path: Path | str) -> pd.DataFrame:
    """:func:`read_rows` of a results file at any ``path`` (e.g. the ``bench.csv`` a survey
    collected into data/survey/bench/<survey id>/<try>/), checked against ``experiment``'s
    schema the same way. Raises as :func:`read_rows`."""
    cols = columns(experiment)
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c in _META_STR else float) for c in cols})
    added = _older_schema(path, experiment) or []  # an older schema: its new columns read empty
    if not added:
        _check_header(path, experiment)
    _records(path, len(cols) - len(added))
    na = ["", "nan", "NaN"]
    try:
        df = pd.read_csv(
            path,
            dtype={c: str for c in (*_META_STR, *_META_INT)},
            keep_default_na=False,
            na_values={c: na for c in EXPERIMENTS[experiment]},
        )
    except ValueError as e:
        raise MalformedRowError(f"{path}: malformed rows ({e})") from None
    for c in _META_INT:  # integer cells, checked one by one so that a bad one is named with its line
        for i, v in enumerate(df[c]):
            if not re.fullmatch(r"[+-]?[0-9]{1,18}", v.strip()):
                raise MalformedRowError(f"{path}:{i + 2}: column {c!r} holds {v!r}, not an integer; "
                                        "fix or remove that line by hand")
        df[c] = df[c].astype("int64")
    for c in added:
        df[c] = np.nan
    for i, v in enumerate(df["params"]):  # params is a JSON object, as append_row wrote it
        try:
            ok = isinstance(json.loads(v), dict)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise MalformedRowError(f"{path}:{i + 2}: column 'params' is not a JSON object "
                                    f"({str(v)[:40]!r}); fix or remove that line by hand")
    for col in EXPERIMENTS[experiment]:  # metrics are finite numbers (or empty): never text
        if pd.api.types.is_float_dtype(df[col]):
            bad = np.flatnonzero(np.isinf(df[col].to_numpy()))
            if bad.size:
                raise MalformedRowError(f"{path}:{int(bad[0]) + 2}: column {col!r} is infinite; "
                                        "rows hold finite numbers or empty fields")
        if not (pd.api.types.is_numeric_dtype(df[col]) or pd.api.types.is_bool_dtype(df[col])):
            for i, v in enumerate(df[col]):
                if isinstance(v, str) and v.strip().lower() not in ("true", "false"):
                    try:
                        float(v)
                    except ValueError:
                        raise MalformedRowError(f"{path}:{i + 2}: column {col!r} holds {v!r}, not a "
                                                "number; fix or remove that line by hand") from None
    return df[list(cols)]


#: a run's curve file name: ``<run_id>`` + this (gzip-compressed CSV); :data:`CURVE_LEGACY_SUFFIX`
#: is the plain CSV written before, still read
CURVE_SUFFIX = ".csv.gz"
CURVE_LEGACY_SUFFIX = ".csv"


def _curve_files(run_id: str, root: Path | str) -> tuple[Path, Path]:
    """(``<run_id>.csv.gz``, the legacy ``<run_id>.csv``) under ``root/data/curves``.

    Raises:
        ValueError: ``run_id`` is not a safe file name.
    """
    if not isinstance(run_id, str) or not _SAFE_ID.match(run_id):
        raise ValueError(f"run_id must be letters, digits, '_', '.', '-', got {run_id!r}")
    d = Path(root) / "data" / "curves"
    return d / f"{run_id}{CURVE_SUFFIX}", d / f"{run_id}{CURVE_LEGACY_SUFFIX}"


def curve_path(run_id: str, root: Path | str) -> Path:
    """The curve file of ``run_id``: ``root/data/curves/<run_id>.csv.gz``, or the plain
    ``<run_id>.csv`` when only that one exists (an older clone's).

    Raises:
        ValueError: ``run_id`` is not a safe file name.
    """
    path, legacy = _curve_files(run_id, root)
    return legacy if legacy.exists() and not path.exists() else path


def write_curve(run_id: str, df: pd.DataFrame, root: Path | str, device: str | None = None,
                backend: str = "gpu") -> Path:
    """Write a run's per-iteration rows to ``root/data/curves/<run_id>.csv.gz`` (gzip at level 9,
    no time stamp in its header, so the same rows give the same bytes; atomic, under
    :func:`publish_lock`). Replaces the run's earlier curve, a plain ``<run_id>.csv`` included
    when that was its curve (no ``.csv.gz`` beside it); a plain copy beside a ``.csv.gz`` is kept.

    Column names should carry units (``wall_time_s``, ``mean_reward``, ``iteration``). ``device``
    and ``backend``: the measurement's device and physics backend, required for a curve of the
    repository's own data/ (publish rule).

    Returns:
        the path written.

    Raises:
        ValueError: bad ``run_id`` or ``df`` has no columns; TypeError: ``df`` not a DataFrame.
    """
    path, legacy = _curve_files(run_id, root)
    if _in_repo_data(path):  # the repository's data/: the publish rule, with the run's device
        from fightlab.config import ConfigError
        from fightlab.publish import check_publish

        if device is None:
            raise ConfigError(f"write_curve({run_id!r}) into the repository's data/ needs the device "
                              "of its measurement (device=...): only GPU measurements publish")
        check_publish(True, device, "a curve", backend=backend)
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"write_curve: df must be a pandas DataFrame, got {type(df).__name__}")
    if len(df.columns) == 0:
        raise ValueError(f"write_curve({run_id!r}): the DataFrame has no columns")
    data = gzip.compress(df.to_csv(index=False, lineterminator="\n").encode("utf-8"), compresslevel=9, mtime=0)
    with publish_lock(root):
        path.parent.mkdir(parents=True, exist_ok=True)
        # the plain file is the run's earlier curve only when it was the one curve_path read
        # (no .csv.gz beside it); one beside a .csv.gz is someone's copy, and stays
        was_curve = not path.exists() and legacy.is_file() and not legacy.is_symlink()
        atomic_write(path, data)  # a reader never sees half a curve
        if was_curve:
            legacy.unlink()  # replaced by this one
    return path


#: the columns of a training's curve (its rows.csv) that the training figures draw
TRAIN_CURVE_COLUMNS = ("iteration", "elapsed_s", "reward", "amplitude", "window_fall_rate",
                       "window_episode_s")


def read_curve(run_id: str, root: Path | str, need: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read the curve of ``run_id`` (:func:`curve_path`), which must hold the columns ``need`` and at least
    one row when ``need`` is given. Raises FileNotFoundError if absent and MalformedRowError for
    a torn or malformed line (file and line named), a missing column or row (file named), or a
    text cell in a column of numbers (a repeated header, a hand edit: file, line and column
    named)."""
    path = curve_path(run_id, root)
    text = read_text(path)  # FileNotFoundError if absent
    if not text:
        raise MalformedRowError(f"{path}: empty curve file (no header); a torn write?")
    header = next(csv.reader(io.StringIO(text, newline="")), [])
    _records(path, len(header), need_id=False, text=text)
    missing = [c for c in need if c not in header]
    if missing:
        raise MalformedRowError(f"{path}: the curve lacks column(s) {', '.join(missing)} "
                                f"(it has {', '.join(map(repr, header[:8]))}{', …' if len(header) > 8 else ''})")
    try:
        df = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:  # e.g. a quote left open: one line, the file named
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise MalformedRowError(f"{path}: not a readable curve ({type(e).__name__}: {first})") from None
    if need and df.empty:
        raise MalformedRowError(f"{path}: the curve has a header and no rows")
    from fightlab.config import short_repr

    for col in [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]:  # numbers with a stray text cell
        v = df[col].dropna()
        num = pd.to_numeric(v, errors="coerce")
        if num.notna().sum() > len(v) / 2 and num.isna().any():
            i = int(num.isna().to_numpy().argmax())
            raise MalformedRowError(f"{path}:{int(v.index[i]) + 2}: column {col!r} holds {short_repr(v.iloc[i])}, "
                                    "not a number like the rest of that column; fix or remove that line by hand")
    return df


def publish_row(experiment: str, row: Mapping[str, Any], publish: bool, local_root: Path | str,
                device: str, root: Path | str = REPO_ROOT) -> None:
    """Write ``row`` under ``local_root`` (a runs/ folder) always and, with ``publish``, under
    ``root`` (the repository's data/). Raises ConfigError before writing anything when the run
    may not publish (:func:`fightlab.publish.check_publish`: a CUDA device, full size)."""
    from fightlab.publish import check_publish

    params = json.loads(row["params"]) if isinstance(row.get("params"), str) else {}
    check_publish(publish, device, f"{experiment} rows",
                  backend="cpu" if params.get("backend") == "cpu" else "gpu")
    append_row(experiment, row, local_root)
    if publish:
        append_row(experiment, row, root)
