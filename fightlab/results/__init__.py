"""The one schema for result rows: ``data/results/<experiment>.csv``, one row per run.

A row is a flat dict: the metadata columns :data:`META_COLUMNS` first, in that order, then the
experiment's metric columns :data:`EXPERIMENTS[experiment]`, each named with its unit
(``time_to_solve_s``, ``env_steps_per_s``); counts and flags are unitless (``iterations``,
``solved``). ``params`` holds the run's parameters as a JSON string (sorted keys).

    meta = run_metadata(body="simple", nworld=1024, seed=0, params=cfg, device="cuda:0")
    append_row("train", {**meta, **metrics}, root)      # -> root/data/results/train.csv
    df = read_rows("train", root)                       # figures read only these files

Per-iteration curves of a run: ``data/curves/<run_id>.csv.gz`` (:func:`write_curve`, `curves`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
import shutil
import types
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from fightlab import meta
from fightlab.errors import ConfigError
from fightlab.meta import PACKING_ENV, _count, _flag, packing_from_env  # noqa: F401  (re-exported)
from fightlab.paths import REPO_ROOT
from fightlab.results.curves import (CURVE_LEGACY_SUFFIX, CURVE_SUFFIX, TRAIN_CURVE_COLUMNS, curve_path,
                                     read_curve, write_curve)
from fightlab.results.files import (MalformedRowError, _header, _in_repo_data, _records, check_committed,
                                    publish_lock, read_text)
from fightlab.results.schema import (_META_INT, _META_STR, _SAFE_ID, EXPERIMENTS, META_COLUMNS, REFERENCE_COLUMNS,
                                     columns, register_experiment, results_path)
from fightlab.rundir import atomic_write

__all__ = ["META_COLUMNS", "EXPERIMENTS", "REFERENCE_COLUMNS", "columns", "register_experiment", "run_metadata",
           "params_json", "PARAMS_SECTIONS", "validate_row", "append_row", "publish_row", "publish_lock", "MalformedRowError",
           "read_rows", "read_text", "read_file", "results_path", "write_curve", "read_curve", "curve_path",
           "CURVE_SUFFIX", "CURVE_LEGACY_SUFFIX", "TRAIN_CURVE_COLUMNS", "packing_of", "scratch_root"]


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
    """``params`` (a dict or a dataclass instance) as a JSON object string with sorted keys: paths
    as strings, numpy/torch scalars as numbers, nested dataclasses as dicts.

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
    if (pack := packing_from_env()) is None:
        return params
    return json.dumps({**pack, **json.loads(params)}, sort_keys=True, allow_nan=True)


def run_metadata(*, body: str, nworld: int, seed: int, params: Mapping[str, Any] | Any, device: Any,
                 backend: str = "gpu", cores: int | None = None) -> dict:
    """The metadata columns of a result row, in :data:`META_COLUMNS` order: ``run_id`` (12 hex
    chars of a UUID4), ``time`` (UTC, ISO 8601), ``commit`` (short ``HEAD`` of fightlab's source
    tree, ``-dirty`` when tracked files changed, ``"unknown"`` outside git), ``host``, ``gpu``
    (the hardware the physics ran on: the CUDA device's name; ``"cpu"`` for MuJoCo Warp on
    warp's CPU device; ``"CPU <model> (<n> cores)"`` for the CPU MuJoCo backend,
    `fightlab.meta.cpu_label`), ``driver`` (NVIDIA's, ``""`` on the CPU backend and CPU-only
    machines), the ``warp``/``mujoco_warp``/``torch`` versions, and ``params`` as JSON (with the
    launcher's packing added, :func:`_with_packing`). Never fails because git, nvidia-smi or CUDA
    are missing (:mod:`fightlab.meta`).

    Args:
        params: dict or dataclass of the run's parameters; device: the run's (``"cpu"``,
            ``"cuda:0"``, torch/warp device); backend: ``"gpu"`` (MuJoCo Warp on ``device``) or
            ``"cpu"`` (MuJoCo's C engine); cores: the CPU backend's (default: this process's).

    Raises:
        ValueError: bad ``body``/``nworld``/``seed``; TypeError: params not JSON serialisable.
    """
    cpu = backend == "cpu"
    row = dict(run_id=meta.new_run_id(), time=meta.utc_now(), commit=meta.git_commit(), host=meta.host_name(),
               gpu=meta.cpu_label(cores) if cpu else meta.gpu_name(device), driver="" if cpu else meta.driver_version(),
               **meta.package_versions(), body=body, nworld=nworld, seed=seed,
               params=_with_packing(params_json(params)))
    row = {c: row[c] for c in META_COLUMNS}
    _check_meta(row)
    return row


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
    """Check that ``row`` has exactly the columns of ``experiment``: text metadata ``str``
    (``run_id``, ``time``, ``body`` non-empty; ``time`` ISO 8601; ``params`` a JSON object),
    ``nworld`` an int > 0, ``seed`` an int; each metric a number or ``None``/NaN for "not
    measured", never text or inf. Raises ValueError naming the column (or the experiment).
    """
    cols = columns(experiment)
    if not isinstance(row, Mapping):
        raise ValueError(f"row must be a dict, got {type(row).__name__}")
    if missing := [c for c in cols if c not in row]:
        raise ValueError(f"{experiment!r} row is missing column(s) {missing}")
    if extra := [c for c in row if c not in cols]:
        raise ValueError(f"{experiment!r} row has unexpected column(s) {extra}; columns are {list(cols)}")
    _check_meta(row)
    for col in EXPERIMENTS[experiment]:
        v = row[col]
        if v is None:
            continue
        if not (isinstance(v, numbers.Number) or _is_bool(v)) or isinstance(v, complex):
            raise ValueError(f"column {col!r} must be a number or None, got {v!r} ({type(v).__name__})")
        if not _is_bool(v) and math.isinf(float(v)):
            raise ValueError(f"column {col!r} must be finite (use None/NaN for 'not measured'), got {v!r}")


def scratch_root(path: Path | str) -> Path:
    """A fresh local results root for one unpublished run: ``path/data`` removed so rows of an
    earlier run (possibly an older schema) do not mix in. Returns ``Path(path)``; raises
    ValueError for a path outside a ``runs`` folder, so the committed ``data/`` is never removed.
    """
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


def _check_committed(experiment: str, row: Mapping[str, Any], root: Path | str) -> None:
    """Rows for the repository's own data/ (wherever ``root`` points, links followed) pass the
    publish rule (`files.check_committed`) with the row's own record: its ``gpu`` (a CPU-backend
    row's names the CPU and cores, `fightlab.meta.cpu_label`), params' size, and for a train
    row the training (its nworld and params' max_iterations and curriculum)."""
    path = results_path(experiment, root)
    if not _in_repo_data(path, REPO_ROOT):
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
        from fightlab.config import TrainConfig

        dflt = TrainConfig()
        training = types.SimpleNamespace(**{k: params.get(k, getattr(dflt, k)) for k in (
            "nworld", "max_iterations", "curriculum_stages", "curriculum_wait", "stop_after_stage")})
        training.nworld = int(row.get("nworld", training.nworld))
    check_committed(path, f"{experiment} rows", device, backend, size if isinstance(size, str) else None,
                    training, repo=REPO_ROOT)


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
    if added := _older_schema(path, experiment):
        lines, _, _ = _records(path, len(_header(path)))
        pad = "," * len(added)
        atomic_write(path, ",".join(columns(experiment)) + "\n" + "".join(ln + pad + "\n" for ln in lines[1:]))


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


def append_row(experiment: str, row: Mapping[str, Any], root: Path | str) -> Path:
    """Validate ``row`` (:func:`validate_row`) and write it to
    ``root/data/results/<experiment>.csv`` under :func:`publish_lock`: one row per run_id, so a
    row whose run_id is already in the file replaces that row in place (a resumed run's later
    segment), any other is appended; columns in schema order, ``None`` as an empty field (read
    back as NaN). Creates the file with the header on first use; a file of an older version of
    the schema (its header the schema's first columns) is first rewritten under the current
    header, its rows' new columns empty. A last line without its newline is repaired when it is a
    whole row. Rows for the repository's own data/ pass the publish rule (:func:`_check_committed`).

    Returns:
        Path of the CSV file.

    Raises:
        ValueError: an invalid row, or a header other than the schema's (missing/extra columns
            named; rows are never written under a wrong header); MalformedRowError: a torn or
            malformed line (file and line named); fightlab.config.ConfigError: a row the publish
            rule refuses for the repository's data/.
    """
    validate_row(experiment, row)
    _check_committed(experiment, row, root)
    path = results_path(experiment, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with publish_lock(root):
        return _write_locked(experiment, row, path)


def _write_locked(experiment: str, row: Mapping[str, Any], path: Path) -> Path:
    cols = columns(experiment)
    line = pd.DataFrame([{c: row[c] for c in cols}], columns=list(cols)).to_csv(
        index=False, header=False, lineterminator="\n")
    if not (path.exists() and path.stat().st_size > 0):
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


PARAMS_SECTIONS = {"env": dict, "ppo": dict, "physics_engine": dict, "physics": dict, "reference_eval": dict,
                   "nworld_auto": dict, "stage_cycles": dict, "curriculum_stages": list, "segments": list,
                   "sets": list, "fixes": list, "learner": (str, type(None)), "study": (str, type(None)),
                   "setting": (str, type(None))}
"""The params keys whose JSON type is fixed wherever a row has them (a section: an object; a list;
a name: a text or null): a row read with another type there is refused by :func:`read_file`, so readers
may index, hash or compare them. ``segments`` holds objects (one per training segment)."""


def read_rows(experiment: str, root: Path | str) -> pd.DataFrame:
    """All rows of ``root/data/results/<experiment>.csv`` as a DataFrame, schema column order:
    text metadata as ``str`` (``""`` stays ``""``; a commit of digits stays text), ``nworld`` /
    ``seed`` as int, metrics as numbers with NaN for "not measured". A missing file gives an
    empty DataFrame with the schema's columns; a file of an older schema version reads with the
    newer columns NaN.

    Raises:
        ValueError: unknown experiment, or a header other than the schema's;
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
    try:
        df = pd.read_csv(path, dtype={c: str for c in (*_META_STR, *_META_INT)}, keep_default_na=False,
                         na_values={c: ["", "nan", "NaN"] for c in EXPERIMENTS[experiment]})
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
            params = json.loads(v)
        except (TypeError, ValueError):
            params = None
        if not isinstance(params, dict):
            raise MalformedRowError(f"{path}:{i + 2}: column 'params' is not a JSON object "
                                    f"({str(v)[:40]!r}); fix or remove that line by hand")
        for key, kind in PARAMS_SECTIONS.items():
            if key not in params:
                continue
            value = params[key]
            objects = key == "segments"  # a list of one object per training segment
            if not isinstance(value, kind) or objects and not all(isinstance(x, dict) for x in value):
                what = {dict: "object", list: "array"}.get(kind, "string or null") + (" of objects" if objects else "")
                raise MalformedRowError(f"{path}:{i + 2}: params[{key!r}] is {str(value)[:40]!r}, not a JSON "
                                        f"{what}; fix or remove that line by hand")
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


def publish_row(experiment: str, row: Mapping[str, Any], publish: bool, local_root: Path | str,
                device: str, root: Path | str = REPO_ROOT) -> None:
    """Write ``row`` under ``local_root`` (a runs/ folder) always and, with ``publish``, under
    ``root`` (the repository's data/). A row the publish rule refuses there is refused before
    anything is written (:func:`_check_committed`, which reads the measurement's ``device`` from
    the row's ``gpu`` column: the command refused it before its work already)."""
    if publish:
        validate_row(experiment, row)
        _check_committed(experiment, row, root)
    append_row(experiment, row, local_root)
    if publish:
        append_row(experiment, row, root)
