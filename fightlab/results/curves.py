"""A run's per-iteration curve: ``data/curves/<run_id>.csv.gz`` (gzip CSV, the same rows give the
same bytes), written atomically under the publish lock and read back checked."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pandas as pd

from fightlab.errors import ConfigError
from fightlab.results.files import (MalformedRowError, _in_repo_data, _records, check_committed, publish_lock,
                                    read_text)
from fightlab.results.schema import _SAFE_ID
from fightlab.rundir import atomic_write


#: a run's curve file name: ``<run_id>`` + this (gzip-compressed CSV); :data:`CURVE_LEGACY_SUFFIX`
#: is the plain CSV written before, still read
CURVE_SUFFIX = ".csv.gz"
CURVE_LEGACY_SUFFIX = ".csv"


def _curve_files(run_id: str, root: Path | str) -> tuple[Path, Path]:
    """(``<run_id>.csv.gz``, the legacy ``<run_id>.csv``) under ``root/data/curves``; ValueError:
    ``run_id`` is not a safe file name."""
    if not isinstance(run_id, str) or not _SAFE_ID.match(run_id):
        raise ValueError(f"run_id must be letters, digits, '_', '.', '-', got {run_id!r}")
    d = Path(root) / "data" / "curves"
    return d / f"{run_id}{CURVE_SUFFIX}", d / f"{run_id}{CURVE_LEGACY_SUFFIX}"


def curve_path(run_id: str, root: Path | str) -> Path:
    """The curve file of ``run_id``: ``root/data/curves/<run_id>.csv.gz``, or the plain
    ``<run_id>.csv`` when only that one exists (an older clone's). ValueError: a bad ``run_id``."""
    path, legacy = _curve_files(run_id, root)
    return legacy if legacy.exists() and not path.exists() else path


def write_curve(run_id: str, df: pd.DataFrame, root: Path | str, device: str | None = None,
                backend: str = "gpu") -> Path:
    """Write a run's per-iteration rows to ``root/data/curves/<run_id>.csv.gz`` (gzip at level 9,
    no time stamp, so the same rows give the same bytes; atomic, under :func:`publish_lock`),
    replacing the run's earlier curve, a plain ``<run_id>.csv`` included when that was its curve
    (a plain copy beside a ``.csv.gz`` is kept). Column names carry units (``wall_time_s``).
    ``device`` and ``backend``: the measurement's, required for the repository's own data/
    (the publish rule). Returns the path written.

    Raises:
        ValueError: bad ``run_id`` or ``df`` has no columns; TypeError: ``df`` not a DataFrame;
        ConfigError: a curve the publish rule refuses.
    """
    path, legacy = _curve_files(run_id, root)
    if device is None and _in_repo_data(path):
        raise ConfigError(f"write_curve({run_id!r}) into the repository's data/ needs the device "
                          "of its measurement (device=...): only GPU measurements publish")
    check_committed(path, "a curve", device, backend)
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
