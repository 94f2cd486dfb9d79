"""The original study's survey table, the formula that prices every survey row, and the prices
fightlab assumes for its own rows (`fightlab.survey.cost` builds on it and re-exports it).

The formula (data/reference/original-study.md, "Survey"):

    cost per solve [$] = (time to solve [s] + paid set-up [s]) × price [$/h] / 3600

and, for K trainings packed on one GPU (fightlab.measure.report.packed_throughput):

    cost per solve [$] = price [$/h] / solves per GPU-hour [1/h] + set-up × price / 3600 / K

The set-up groups (:data:`GROUPS`): ``provider`` × GPU or CPU ``machine``, one constant each
(:func:`fit_setup`; a set-up back-solved per row would reproduce the column and check nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from fightlab.bodies import BODY_NAMES
from fightlab.config import ConfigError
from fightlab.hosts import same_gpu
from fightlab.paths import REPO_ROOT

__all__ = ["REFERENCE_PATH", "REFERENCE_COLUMNS", "SOURCE_TABLES", "PROVIDERS", "GPU_TYPES", "GROUPS",
           "TOLERANCE", "ASSUMED_PRICE_PER_HOUR", "ASSUMED_PRICE_SOURCE", "SURVEY_COLUMNS", "Reproduction",
           "gpu_type", "read_reference", "reference_path", "cost_per_solve", "packed_cost_per_solve",
           "backsolve_setup", "rounding_s", "fit_setup", "reproduce", "ec2_cpu_inconsistency",
           "inconsistency_lines", "reference_rows", "validate_price", "assumed_cpu_price_per_hour"]

#: reference.csv's columns, in order
REFERENCE_COLUMNS: tuple[str, ...] = ("machine", "provider", "usd_per_h", "body", "time_to_solve_s",
                                      "time_estimated", "cost_per_solve_usd", "source_table")

#: the study's two tables the rows come from
SOURCE_TABLES: dict[str, str] = {
    "gpu_vs_ec2": "the GPU survey against EC2 (original-study.md, Survey: its Figure 3 and table)",
    "cpu_baseline": "the CPU baseline table (the 96-vCPU EC2 spot machine, 72 workers x 6 worlds)",
}

#: providers of the reference rows -> the short name the set-up groups use
PROVIDERS: dict[str, str] = {"vast.ai": "vast.ai", "EC2 spot": "EC2"}

#: the GPU types fightlab knows: the reference table's (original-study.md, Survey: "9 GPU types";
#: the RTX PRO 6000 has no row, its host never answered), the primer's cloud prices (V100, H100,
#: data/reference/cloud_prices.csv) and the one fightlab measures on (H200)
GPU_TYPES: dict[str, str] = {
    "T4": "datacenter", "L4": "datacenter", "A100": "datacenter", "L40S": "datacenter",
    "V100": "datacenter", "H100": "datacenter", "H200": "datacenter",
    "RTX 3090": "consumer", "RTX 4090": "consumer", "RTX 5080": "consumer", "RTX 5090": "consumer",
    "RTX PRO 6000": "workstation",
}

#: the set-up groups, one constant each: (provider short name, "GPU" / "CPU")
GROUPS: tuple[str, ...] = ("vast.ai GPU", "EC2 GPU", "EC2 CPU")

#: the relative tolerance of the reproduction (|reproduced − table| / table). Why 5 %: the table's
#: costs are rounded (3 decimals: up to 1.7 % of its smallest cost, $0.030) and set-up varied from
#: host to host (the study: "setup on a good host ≈ 1.5 min"; the vast.ai rows back-solve to
#: 74–97 s, ±12 s around one constant, which is up to 4.3 % of the shortest solve + set-up, the
#: RTX 5090 simple row's 185 + 86 s). Notebook 07 recomputes these from the table.
TOLERANCE = 0.05

#: the H200 and H100 were not rented for this study: their prices are assumptions [$/h], a
#: notebook parameter
ASSUMED_PRICE_PER_HOUR: dict[str, float] = {"H200": 3.00, "H100": 2.25}
ASSUMED_PRICE_SOURCE = ("assumed $3.00/h for one H200 and $2.25/h for one H100: inside the on-demand ranges "
                        "of 'long-tail' providers, $2.50–3.50/h for the H200 SXM5 and $1.99–2.50/h for the "
                        "H100 SXM5, in mercatus-ai.com/blog/cloud-gpu-pricing (May 2026); spheron.network "
                        "quotes $4.54/h for an H200 on-demand (17 March 2026)")


def assumed_cpu_price_per_hour(ref: pd.DataFrame, cores: int) -> tuple[float, str]:
    """($/h, its source) for a CPU machine of ``cores`` vCPUs: ``cores`` × the lowest price per
    vCPU of the reference's EC2 CPU rows (the original's spot prices). An assumption for
    fightlab's CPU-backend rows, which ran on a GPU host's cores that nobody priced; a logical CPU
    counts as one vCPU. Raises ConfigError: ``cores`` not a positive integer, or no row names its vCPUs."""
    if isinstance(cores, bool) or not isinstance(cores, (int, np.integer)) or cores <= 0:
        raise ConfigError(f"cores must be a positive integer, got {cores!r}")
    hits = [(float(p) / int(h.group(1)), str(m), float(p)) for m, p in zip(ref["machine"], ref["usd_per_h"])
            if (h := re.search(r"(\d+)\s*vCPU", str(m))) and float(p) > 0]
    if not hits:
        raise ConfigError("no reference row names its vCPUs (e.g. 'c8a.24xlarge, 96 vCPU'): give cpu_price_per_hour")
    per, m, p = min(hits, key=lambda h: h[0])
    price = round(per * int(cores), 4)
    return price, (f"assumed ${price:.2f}/h: {int(cores)} vCPU at the reference's lowest EC2 spot price per "
                   f"vCPU ({m}: ${p:.2f}/h)")


#: the columns of a survey table (reference rows and fightlab's), :func:`survey_table`. Its
#: ``time_source``: "measured solve" (timed to the solve criterion), "study estimate" (the original's
#: own), "packing estimate" / "backends estimate" / "bench estimate" (a packing row's aggregate it/s,
#: a CPU-backend row's s/iteration, a bench row's estimate, each × the headline's iterations to solve);
#: ``time_estimated`` is true for all but "measured solve"
SURVEY_COLUMNS: tuple[str, ...] = ("origin", "machine", "provider", "kind", "gpu", "group", "body", "mode",
                                   "usd_per_h", "time_to_solve_s", "time_estimated", "time_source", "setup_s",
                                   "cost_per_solve_usd", "solves_per_hour", "note")


def gpu_type(name: str) -> str:
    """The :data:`GPU_TYPES` key of a GPU name (``"RTX5080"``, ``"NVIDIA H100 SXM5 80GB"``), by
    `fightlab.hosts.same_gpu`.

    Raises:
      ConfigError: an unknown GPU name (names it and the known types).
    """
    for known in sorted(GPU_TYPES, key=len, reverse=True):
        if same_gpu(known, name):
            return known
    raise ConfigError(f"unknown GPU {name!r}; known GPU types: {', '.join(GPU_TYPES)} "
                      "(add one to fightlab.survey.reference.GPU_TYPES)")


_CPU = re.compile(r"^\s*(?P<instance>[^,()]+?)\s*,\s*(?P<vcpus>\d+)\s*vCPU\s*$", re.I)
_IN_BRACKETS = re.compile(r"^\s*(?P<instance>[^()]+?)\s*\((?P<gpu>[^()]+)\)\s*$")


def _hardware(machine: str) -> tuple[str, str | None, int | None]:
    """(kind, GPU type, vCPUs) a reference row's ``machine`` names: ``("gpu", "L4", None)`` for
    ``"L4"`` or ``"g6.xlarge (L4)"``, ``("cpu", None, 96)`` for ``"c8a.24xlarge, 96 vCPU"``.
    Raises ConfigError: an unknown GPU (:func:`gpu_type`)."""
    m = _CPU.match(str(machine))
    if m:
        return "cpu", None, int(m["vcpus"])
    m = _IN_BRACKETS.match(str(machine))
    return "gpu", gpu_type(m["gpu"] if m else machine), None


def parse_bool(v) -> bool | None:
    s = str(v).strip().lower()
    return {"true": True, "false": False, "1": True, "0": False}.get(s)


def read_reference(path: Path | str | None = None) -> pd.DataFrame:
    """The original's survey table (default :data:`REFERENCE_PATH`), checked, with derived
    columns: ``kind`` ("gpu"/"cpu"), ``gpu`` (a :data:`GPU_TYPES` key, None for CPU rows),
    ``vcpus``, ``group`` (:data:`GROUPS`: "<provider> GPU/CPU") and ``cost_decimals`` (the decimals
    of its cost: the column's rounding). Units: usd_per_h [$/h], time_to_solve_s [s], cost_per_solve_usd [$].

    Raises:
      FileNotFoundError: no such file. ConfigError: missing or unexpected columns, no rows, or a
        bad value, naming its row and column: an unknown GPU, body or source table, a price, time
        or cost that is not a positive number, a time_estimated that is not true/false.
    """
    path = Path(path) if path is not None else REFERENCE_PATH
    if not path.exists():
        raise FileNotFoundError(f"survey reference table {path} is absent (data/survey/README.md)")
    import io

    from fightlab import results

    # results.read_text: a byte that is not UTF-8 is one line naming the file and line
    raw = pd.read_csv(io.StringIO(results.read_text(path)), dtype=str, keep_default_na=False)
    missing = [c for c in REFERENCE_COLUMNS if c not in raw.columns]
    odd = [c for c in raw.columns if c not in REFERENCE_COLUMNS]
    if missing or odd:
        raise ConfigError(f"{path}: " + "; ".join(
            ([f"missing column(s) {', '.join(missing)}"] if missing else [])
            + ([f"unexpected column(s) {', '.join(odd)}"] if odd else []))
            + f"; expected columns: {', '.join(REFERENCE_COLUMNS)}")
    if raw.empty:
        raise ConfigError(f"{path}: the survey table has no rows")
    df = raw[list(REFERENCE_COLUMNS)].copy()
    where = lambda i, col: f"{path}: row {i + 2} ({raw['machine'][i]!r}, {raw['body'][i]!r}) {col}"  # noqa: E731
    for col in ("usd_per_h", "time_to_solve_s", "cost_per_solve_usd"):
        v = pd.to_numeric(df[col], errors="coerce")
        for i in np.flatnonzero(~(np.isfinite(v.to_numpy(dtype=float)) & (v.to_numpy(dtype=float) > 0))):
            raise ConfigError(f"{where(i, col)} = {raw[col][i]!r}: must be a positive number")
        df[col] = v.astype(float)
    flags = [parse_bool(v) for v in df["time_estimated"]]
    for i, f in enumerate(flags):
        if f is None:
            raise ConfigError(f"{where(i, 'time_estimated')} = {raw['time_estimated'][i]!r}: must be true or false")
    df["time_estimated"] = flags
    for col, valid in (("body", BODY_NAMES), ("source_table", tuple(SOURCE_TABLES)),
                       ("provider", tuple(PROVIDERS))):
        for i, v in enumerate(df[col]):
            if v not in valid:
                raise ConfigError(f"{where(i, col)} = {v!r}: valid: {', '.join(valid)}")
    hw = []
    for i, m in enumerate(df["machine"]):
        try:
            hw.append(_hardware(m))
        except ConfigError as e:
            raise ConfigError(f"{where(i, 'machine')}: {e}") from None
    df["kind"], df["gpu"], vcpus = zip(*hw)
    df["vcpus"] = pd.array(vcpus, dtype="Int64")
    df["group"] = [f"{PROVIDERS[p]} {k.upper()}" for p, k in zip(df["provider"], df["kind"])]
    df["cost_decimals"] = [len(s.partition(".")[2]) for s in raw["cost_per_solve_usd"].str.strip()]
    return df


def _check_numbers(name: str, values, positive: bool) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    bad = ~np.isfinite(a) | ((a <= 0) if positive else (a < 0))
    if bad.any():
        first = float(a.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]] if a.ndim else a)
        rule = "a positive number" if positive else "a number >= 0"
        raise ConfigError(f"{name} must be {rule}, got {first!r}")
    return a


def cost_per_solve(time_to_solve_s, setup_s, price_per_hour):
    """Cost of one solve [$] = (time to solve [s] + paid set-up [s]) × price [$/h] / 3600 (module
    docstring). Vectorised (numbers, arrays or Series broadcast; a Series in gives a Series out).
    Raises ConfigError: a time or price that is not positive, a negative set-up (the first named)."""
    t = _check_numbers("time_to_solve_s", time_to_solve_s, positive=True)
    s = _check_numbers("setup_s", setup_s, positive=False)
    p = _check_numbers("price_per_hour", price_per_hour, positive=True)
    out = (t + s) * p / 3600.0
    for x in (time_to_solve_s, setup_s, price_per_hour):
        if isinstance(x, pd.Series):
            return pd.Series(np.broadcast_to(out, x.shape) if out.ndim else out, index=x.index,
                             name="cost_per_solve_usd")
    return float(out) if out.ndim == 0 else out


def packed_cost_per_solve(solves_per_gpu_hour, price_per_hour, setup_s=0.0, solves_per_setup=1):
    """Cost of one solve [$] when K trainings share a GPU (module docstring): the paid set-up [s]
    is shared by the ``solves_per_setup`` solves one set-up serves.
    Raises ConfigError: a rate or price that is not positive, a negative set-up, solves_per_setup < 1."""
    r = _check_numbers("solves_per_gpu_hour", solves_per_gpu_hour, positive=True)
    p = _check_numbers("price_per_hour", price_per_hour, positive=True)
    s = _check_numbers("setup_s", setup_s, positive=False)
    k = _check_numbers("solves_per_setup", solves_per_setup, positive=True)
    if (k < 1).any():
        raise ConfigError(f"solves_per_setup must be >= 1, got {solves_per_setup!r}")
    out = p / r + s * p / 3600.0 / k
    return float(out) if out.ndim == 0 else out


def backsolve_setup(ref: pd.DataFrame) -> pd.Series:
    """Each row's paid set-up [s] that its own cost implies: cost × 3600 / price − time to solve.
    Shown as a check, never used to reproduce the row it came from."""
    return (ref["cost_per_solve_usd"] * 3600.0 / ref["usd_per_h"] - ref["time_to_solve_s"]).rename("setup_backsolved_s")


def rounding_s(ref: pd.DataFrame) -> pd.Series:
    """The set-up uncertainty [s] from the table's rounding of each cost (half a unit of its last
    decimal, ``cost_decimals``): 0.5 × 10^-d × 3600 / price."""
    return (0.5 * 10.0 ** (-ref["cost_decimals"].astype(float)) * 3600.0 / ref["usd_per_h"]).rename("rounding_s")


def fit_setup(ref: pd.DataFrame, groups: Sequence[str] = GROUPS) -> pd.DataFrame:
    """One paid set-up [s] per group of reference rows (:data:`GROUPS`): the median of the group's
    back-solved set-ups (:func:`backsolve_setup`), not a least-squares fit, so that a minority of
    rows that disagree (the EC2 CPU group's ``cpu_baseline`` rows) stay misses instead of pulling
    the constant. Returns a DataFrame indexed by group: setup_s, n_rows, backsolved_min_s,
    backsolved_max_s. Raises ConfigError: a group with no rows in ``ref``."""
    present = list(dict.fromkeys(ref["group"]))
    for g in groups:
        if g not in present:
            raise ConfigError(f"set-up group {g!r} has no rows in the reference table; groups "
                              f"present: {', '.join(present) or 'none'}")
    fit = backsolve_setup(ref).groupby(ref["group"]).agg(
        setup_s="median", n_rows="size", backsolved_min_s="min", backsolved_max_s="max")
    return fit.loc[list(groups)]


@dataclass(frozen=True)
class Reproduction:
    """:func:`reproduce`'s answer: ``table`` (every reference row with setup_s, the reproduced
    cost, rel_error and within_tol), ``misses`` (the rows outside ``tol``), ``tol`` and ``setup``
    (the constants used, :func:`fit_setup`)."""
    table: pd.DataFrame
    misses: pd.DataFrame
    tol: float
    setup: pd.DataFrame


def setup_of(groups: pd.Series, setup) -> pd.Series:
    consts = setup["setup_s"] if isinstance(setup, pd.DataFrame) else pd.Series(setup, dtype=float)
    unknown = sorted(set(groups) - set(consts.index))
    if unknown:
        raise ConfigError(f"no set-up constant for group(s) {', '.join(map(repr, unknown))}; "
                          f"constants given: {', '.join(consts.index) or 'none'}")
    return groups.map(consts).astype(float)


def reproduce(ref: pd.DataFrame, setup: pd.DataFrame | dict, tol: float = TOLERANCE) -> Reproduction:
    """The cost-per-solve column [$] again from time to solve, price and ONE set-up constant per
    group (``setup``: :func:`fit_setup`, or ``{group: seconds}``), with each row's relative error
    |reproduced − table| / table and the rows outside ``tol`` (:data:`TOLERANCE`).
    Raises ConfigError: ``tol`` not in (0, 1), a group without a constant (named)."""
    if not (isinstance(tol, (int, float)) and not isinstance(tol, bool) and 0 < tol < 1):
        raise ConfigError(f"tol must be a relative tolerance in (0, 1), got {tol!r}")
    t = ref.copy()
    t["setup_s"] = setup_of(t["group"], setup)
    t["cost_reproduced_usd"] = cost_per_solve(t["time_to_solve_s"], t["setup_s"], t["usd_per_h"])
    t["rel_error"] = (t["cost_reproduced_usd"] - t["cost_per_solve_usd"]).abs() / t["cost_per_solve_usd"]
    t["within_tol"] = t["rel_error"] <= tol
    t["setup_backsolved_s"] = backsolve_setup(t)
    t["rounding_s"] = rounding_s(t)
    consts = setup if isinstance(setup, pd.DataFrame) else pd.DataFrame(
        {"setup_s": pd.Series(setup, dtype=float)}).rename_axis("group")
    return Reproduction(table=t, misses=t[~t["within_tol"]], tol=float(tol), setup=consts)


def ec2_cpu_inconsistency(ref: pd.DataFrame) -> pd.DataFrame:
    """The CPU machines the reference table lists with the same vCPU count at more than one price
    or in more than one source table (the 96-vCPU EC2 spot machine: c8a.24xlarge in
    ``gpu_vs_ec2``, c8i.24xlarge and c8a.24xlarge in ``cpu_baseline``), each row with its price
    [$/h], time to solve [s], cost [$], back-solved set-up [s] and the set-up uncertainty from the
    cost's rounding [s]. Empty when the table is consistent."""
    cpu = ref[ref["kind"] == "cpu"].copy()
    cpu["setup_backsolved_s"] = backsolve_setup(cpu)
    cpu["rounding_s"] = rounding_s(cpu)
    keep = cpu.groupby(["provider", "vcpus"])[["usd_per_h", "source_table"]].transform("nunique")
    out = cpu[(keep["usd_per_h"] > 1) | (keep["source_table"] > 1)]
    return out[["machine", "vcpus", "source_table", "usd_per_h", "body", "time_to_solve_s",
                "cost_per_solve_usd", "setup_backsolved_s", "rounding_s"]]


def inconsistency_lines(ref: pd.DataFrame) -> list[str]:
    """One line per inconsistent CPU machine (:func:`ec2_cpu_inconsistency`): its prices and the
    back-solved set-up in each source table, every number computed from the table."""
    t = ec2_cpu_inconsistency(ref)
    lines = []
    for vcpus, g in t.groupby("vcpus", sort=True):
        prices = "; ".join(f"${p:.2f}/h ({', '.join(dict.fromkeys(h['machine'].str.split(',').str[0]))} "
                           f"in {', '.join(dict.fromkeys(h['source_table']))})"
                           for p, h in g.groupby("usd_per_h", sort=True))
        def span(x: pd.Series) -> str:
            lo, hi = f"{x.min():.0f}", f"{x.max():.0f}"
            return f"{lo} s" if lo == hi else f"{lo}–{hi} s"

        setups = "; ".join(f"{span(h['setup_backsolved_s'])} in {src} (± {h['rounding_s'].max():.0f} s "
                           "from the cost's rounding)"
                           for src, h in g.groupby("source_table", sort=False))
        times = ", ".join(f"{b} {s:.0f} s" for b, s in g.groupby("body")["time_to_solve_s"].agg(
            lambda s: s.iloc[0] if s.nunique() == 1 else float("nan")).items())
        lines.append(f"INCONSISTENT: the 'same' {vcpus}-vCPU EC2 machine has {g['usd_per_h'].nunique()} "
                     f"prices, {prices}, for the same times to solve ({times}); the back-solved "
                     f"set-up is {setups}. One set-up constant cannot fit both tables: the "
                     f"rows that miss are listed, not fitted away.")
    return lines


def reference_rows(ref: pd.DataFrame, setup: pd.DataFrame | dict) -> pd.DataFrame:
    """The reference rows as survey rows (:data:`SURVEY_COLUMNS`): the table's own cost per solve
    [$] and time to solve [s], the group's set-up constant [s] (the fit's), mode "solo"."""
    t = pd.DataFrame(dict(
        origin="reference", machine=ref["machine"], provider=ref["provider"], kind=ref["kind"],
        gpu=ref["gpu"], group=ref["group"], body=ref["body"], mode="solo", usd_per_h=ref["usd_per_h"],
        time_to_solve_s=ref["time_to_solve_s"], time_estimated=ref["time_estimated"],
        time_source=np.where(ref["time_estimated"].astype(bool), "study estimate", "measured solve"),
        setup_s=setup_of(ref["group"], setup), cost_per_solve_usd=ref["cost_per_solve_usd"]))
    t["solves_per_hour"] = 3600.0 / (t["time_to_solve_s"] + t["setup_s"])
    t["note"] = [f"original study, table {s}" for s in ref["source_table"]]
    return t[list(SURVEY_COLUMNS)].reset_index(drop=True)


def priced_rows(out: list[dict]) -> pd.DataFrame:
    """Survey rows (:data:`SURVEY_COLUMNS`) from row dicts, cost per solve [$] and solves per hour
    by the formula (packed rows: from their solves per GPU-hour)."""
    cols = list(SURVEY_COLUMNS)
    if not out:
        return pd.DataFrame(columns=cols)
    t = pd.DataFrame(out)
    solo = t["mode"] == "solo"
    t["cost_per_solve_usd"] = np.nan
    t.loc[solo, "cost_per_solve_usd"] = cost_per_solve(t.loc[solo, "time_to_solve_s"],
                                                       t.loc[solo, "setup_s"], t.loc[solo, "usd_per_h"])
    if (~solo).any():
        t.loc[~solo, "cost_per_solve_usd"] = packed_cost_per_solve(
            t.loc[~solo, "solves_per_hour"].to_numpy(float), t.loc[~solo, "usd_per_h"].to_numpy(float),
            t.loc[~solo, "setup_s"].to_numpy(float), t.loc[~solo, "solves_per_setup"].to_numpy(float))
    if "solves_per_hour" not in t:
        t["solves_per_hour"] = np.nan
    t.loc[solo, "solves_per_hour"] = 3600.0 / (t.loc[solo, "time_to_solve_s"] + t.loc[solo, "setup_s"])
    return t[cols].reset_index(drop=True)


def validate_price(value, name: str = "price_per_hour", allow_none: bool = True) -> float | None:
    """A price [$/h] as a float (None passes when ``allow_none``: "use the assumed price").
    Raises ConfigError: not a positive number (names the parameter and the value)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"{name} must be a positive number [$/h]{' or None' if allow_none else ''}, got {value!r}")
    return float(_check_numbers(name, value, positive=True))


def host_setup(who: str, setup, host_setup_s) -> float:
    """The paid host set-up [s] of fightlab's rows: ``host_setup_s``, else the fitted "vast.ai GPU"
    constant of ``setup``. Raises ConfigError: neither, or a negative or non-number set-up."""
    if host_setup_s is None:
        if setup is None:
            raise ConfigError(f"{who} needs the fitted set-up (setup=fit_setup(ref)) or host_setup_s [s]")
        host_setup_s = float(setup_of(pd.Series(["vast.ai GPU"]), setup).iloc[0])
    return float(_check_numbers("host_setup_s", host_setup_s, positive=False))


def gpu_price(gpu: str, price_per_hour: float | None) -> tuple[float, str]:
    """($/h, what it rests on) of a fightlab GPU row without a price of its own: ``price_per_hour``
    when given, else :data:`ASSUMED_PRICE_PER_HOUR` of its type; else ConfigError."""
    if price_per_hour is not None:
        return price_per_hour, f"price ${price_per_hour:.2f}/h given"
    if gpu not in ASSUMED_PRICE_PER_HOUR:
        raise ConfigError(f"no price for GPU {gpu!r}: give price_per_hour [$/h] (assumed prices "
                          f"exist for {', '.join(ASSUMED_PRICE_PER_HOUR)})")
    return ASSUMED_PRICE_PER_HOUR[gpu], f"assumed ${ASSUMED_PRICE_PER_HOUR[gpu]:.2f}/h for one {gpu}"


def reference_path(root: Path | str | None = None) -> Path:
    """``root/data/survey/reference.csv`` (default root: the repository)."""
    return (Path(root) if root is not None else REPO_ROOT) / "data" / "survey" / "reference.csv"


#: the original's survey table, committed (data/survey/README.md says its source and columns)
REFERENCE_PATH = reference_path()
