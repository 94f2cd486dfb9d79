"""Bench rows as survey rows: fightlab's own (``data/results/bench.csv``) and each rented host's
(``data/survey/bench/<survey id>/``), read (:func:`read_bench`) and priced (:func:`bench_rows`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from fightlab.config import ConfigError
from fightlab.paths import REPO_ROOT
from fightlab.survey.reference import gpu_price, gpu_type, host_setup, parse_bool, priced_rows, validate_price

__all__ = ["BENCH_SOURCE", "survey_bench_path", "read_bench", "bench_rows"]

#: the source of fightlab's own bench rows (data/results/bench.csv: ``python -m fightlab bench
#: --publish`` on the GPU machine); a rented survey's rows are ``"survey <survey id>"``
BENCH_SOURCE = "fightlab bench"

#: survey.json's ``infra`` (the launcher's SkyPilot cloud) -> the provider name, spelled as the
#: reference table spells it where it has it
_INFRA_PROVIDERS = {"vast": "vast.ai"}


def survey_bench_path(root: Path | str | None = None) -> Path:
    """``root/data/survey/bench`` (default root: the repository): where ``survey launch`` collects
    each rented host's ``<survey id>/<gpu>-<try>/bench.{csv,json}``, beside ``<survey id>/survey.json``."""
    return (Path(root) if root is not None else REPO_ROOT) / "data" / "survey" / "bench"


def _offer_prices(state: dict) -> dict[str, float]:
    """{a try's file, relative to its survey folder ("rtx4090-1/bench.csv"): its offer's
    ``dph_total`` [$/h]} from a survey.json state (``--picker vastai`` only: SkyPilot's says none)."""
    out: dict[str, float] = {}
    for tries in (state.get("results") or {}).values():
        for t in tries if isinstance(tries, list) else []:
            offer = t.get("offer") if isinstance(t, dict) else None
            price = offer.get("dph_total") if isinstance(offer, dict) else None
            if isinstance(price, (int, float)) and not isinstance(price, bool) and math.isfinite(price) and price > 0:
                out.update({str(f): float(price) for f in t.get("files") or []})
    return out


def read_bench(root: Path | str | None = None, log=print) -> pd.DataFrame:
    """Every bench row under ``root/data`` (default: the repository), one table: fightlab's own
    (source :data:`BENCH_SOURCE`, provider "fightlab") and each rented host's (source "survey <survey
    id>", provider from its survey.json's ``infra``, "vast" -> "vast.ai").

    Returns:
      DataFrame: the bench schema's columns + ``source``, ``provider``, ``offer_usd_per_h``
      (`_offer_prices`; NaN where none is recorded) and ``path`` (relative to ``root``).
    Raises:
      ValueError / fightlab.results.MalformedRowError: a bench.csv torn or of another schema
        (file and line named). A survey.json that is absent or not JSON is said through ``log``
        (its rows keep no offer price), never fatal.
    """
    from fightlab import results

    root = Path(root) if root is not None else REPO_ROOT
    parts = []
    own = results.read_rows("bench", root)
    if not own.empty:
        parts.append(own.assign(source=BENCH_SOURCE, provider="fightlab", offer_usd_per_h=np.nan,
                                path=results.results_path("bench", root).relative_to(root).as_posix()))
    base = survey_bench_path(root)
    for folder in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
        files = sorted(folder.glob("*/bench.csv"))
        if not files:
            continue
        try:
            state = json.loads((folder / "survey.json").read_text())
        except (OSError, ValueError) as e:
            log(f"survey: {folder / 'survey.json'} unreadable ({type(e).__name__}): its rows get no offer price")
            state = {}
        state = state if isinstance(state, dict) else {}
        prices = _offer_prices(state)
        infra = str(state.get("infra") or "").split("/")[0]
        for f in files:
            rel = f.relative_to(folder).as_posix()
            df = results.read_file("bench", f)
            if not df.empty:
                parts.append(df.assign(source=f"survey {folder.name}", provider=_INFRA_PROVIDERS.get(infra, infra or "unknown"),
                                       offer_usd_per_h=prices.get(rel, np.nan), path=f.relative_to(root).as_posix()))
    cols = [*results.columns("bench"), "source", "provider", "offer_usd_per_h", "path"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def _true(v) -> bool:
    """A bench row's ``ok`` read back (True, "True", 1, 1.0) as a bool; empty or other: False."""
    if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
        return bool(v == 1)
    return parse_bool(v) is True


def _finite(v, positive: bool) -> bool:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and (x > 0 if positive else x >= 0)


def _bench_problem(r) -> str | None:
    """Why a bench row cannot be a survey row (a few words), or None when it can: ok false
    (params.reason), a size other than full, an unknown GPU, an estimate that is not a positive
    number (NaN: no headline), a compile / first-iteration / install time that is negative or not
    a number (install may be empty)."""
    try:
        params = json.loads(r["params"]) if isinstance(r["params"], str) and r["params"] else {}
    except ValueError:
        params = {}
    if not _true(r["ok"]):
        return f"ok false ({params.get('reason') or 'no reason recorded'})"
    if params.get("size", "full") != "full":
        return f"size {params.get('size')!r}, not full"
    try:
        gpu_type(r["gpu"])
    except ConfigError:
        return f"unknown GPU {r['gpu']!r}"
    if not _finite(r["estimated_time_to_solve_s"], positive=True):
        note = (params.get("estimate") or {}).get("note", "") if isinstance(params.get("estimate"), dict) else ""
        return f"estimated_time_to_solve_s = {r['estimated_time_to_solve_s']!r}, not a positive number" + (
            f" ({note})" if note else "")
    for col in ("compile_s", "first_iter_s"):
        if not _finite(r[col], positive=False):
            return f"{col} = {r[col]!r}, not a number >= 0"
    if pd.notna(r["install_s"]) and not _finite(r["install_s"], positive=False):
        return f"install_s = {r['install_s']!r}, not a number >= 0"
    return None


def bench_rows(bench: pd.DataFrame | None, price_per_hour: float | None = None,
               setup: pd.DataFrame | dict | None = None, host_setup_s: float | None = None,
               log=print) -> pd.DataFrame:
    """Bench rows (:func:`read_bench`) as survey rows (:data:`SURVEY_COLUMNS`): one per (GPU
    type, body, source), from the newest usable row (older ones are counted through ``log``).

    - time to solve [s] = the row's ``estimated_time_to_solve_s`` (`fightlab.measure.bench.estimate`):
      ``time_source`` "bench estimate", mode "solo".
    - paid set-up [s] = install + ``compile_s`` + ``first_iter_s``; install = ``install_s`` where
      the launcher measured it, else the host set-up of fightlab's GPU rows (``host_setup_s``, else
      the fitted "vast.ai GPU" constant of ``setup``). Renting, the SSH wait and the upload are not
      measured: a rented row's set-up is a lower bound.
    - price [$/h] = the rented offer's (``offer_usd_per_h``), else ``price_per_hour``, else
      :data:`ASSUMED_PRICE_PER_HOUR` of the type.

    Left out and counted through ``log`` per source, never an error (rows arrive from hosts): the
    rows `_bench_problem` refuses, and a row without a price.

    Raises:
      ConfigError: a bad ``price_per_hour`` or set-up, neither ``setup`` nor ``host_setup_s``.
    """
    host_setup_s = host_setup("bench_rows", setup, host_setup_s)
    price_per_hour = validate_price(price_per_hour, "price_per_hour")
    if bench is None or bench.empty:
        return priced_rows([])
    left: dict[str, list[str]] = {}
    usable = []
    for _, r in bench.iterrows():
        why = _bench_problem(r)
        price, said = None, ""
        if why is None:
            if _finite(r["offer_usd_per_h"], positive=True):
                price, said = float(r["offer_usd_per_h"]), f"the rented offer's ${float(r['offer_usd_per_h']):.2f}/h (survey.json)"
            else:
                try:
                    price, said = gpu_price(gpu_type(r["gpu"]), price_per_hour)
                except ConfigError as e:
                    why = f"no offer price recorded; {e}"
        if why is not None:
            left.setdefault(r["source"], []).append(f"{r['run_id']} ({why})")
            continue
        usable.append(dict(r, _gpu=gpu_type(r["gpu"]), _price=price, _said=said))
    for source, why in left.items():
        log(f"survey: {source}: {len(why)} bench row(s) left out: {'; '.join(why)}")
    if not usable:
        return priced_rows([])
    u = pd.DataFrame(usable).sort_values("time", kind="stable")
    newest = u.drop_duplicates(["_gpu", "body", "source"], keep="last")
    old = u.loc[~u.index.isin(newest.index)]
    for source, g in old.groupby("source"):
        log(f"survey: {source}: {len(g)} older bench row(s) superseded by a newer one of the same GPU type "
            f"and body: {', '.join(g['run_id'])}")
    out = []
    for _, r in newest.iterrows():
        measured = pd.notna(r["install_s"])
        install = float(r["install_s"]) if measured else host_setup_s
        t = float(r["estimated_time_to_solve_s"])
        iters = float(r["iterations_to_solve_reference"])
        how = (f"{iters:.0f} iterations to solve × {t / iters:.3g} s/iteration" if _finite(iters, positive=True)
               else "the row's estimate")
        out.append(dict(origin="fightlab", machine=r["_gpu"], provider=r["provider"], kind="gpu", gpu=r["_gpu"],
                        group="fightlab GPU", body=r["body"], mode="solo", usd_per_h=r["_price"],
                        time_to_solve_s=t, time_estimated=True, time_source="bench estimate",
                        setup_s=install + float(r["compile_s"]) + float(r["first_iter_s"]),
                        note=f"bench estimate: {r['source']} row {r['run_id']} (commit {r['commit']}, "
                        f"{r['nworld']} worlds): {how}; set-up = "
                        f"{'install' if measured else 'host set-up (install not measured)'} {install:.0f} s "
                        f"+ compile {float(r['compile_s']):.0f} s + first iteration {float(r['first_iter_s']):.1f} s; "
                        f"{r['_said']}"))
    return priced_rows(out)
