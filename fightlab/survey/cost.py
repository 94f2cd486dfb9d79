"""Cost per solve: the original study's survey table reproduced, fightlab's rows priced, and a
buying guide per budget (notebook 07, Figure 3). Pure pandas: it reads tables. The table, the
formula and the set-up groups live in `fightlab.survey.reference`, bench rows in
`fightlab.survey.bench_rows`; both are re-exported here, so ``cost`` is the one name to use.

    ref = read_reference()                         # data/survey/reference.csv, schema checked
    setup = fit_setup(ref)                         # ONE paid set-up [s] per group of rows
    rep = reproduce(ref, setup)                    # the cost column again, errors, the misses
    ours = our_rows(published_runs(), price_per_hour=3.0, setup=setup, packing=rows)
    est = bench_rows(read_bench(), setup=setup)    # bench rows, ours and rented: estimates
    guide = buying_guide(survey_table(ref, pd.concat([ours, est]), setup), bands=[0, 1, 2, 4])
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from fightlab.config import DEFAULT_TASK, ConfigError
from fightlab.paths import REPO_ROOT
from fightlab.survey import bench_rows as _bench_rows, reference as _reference
from fightlab.survey.bench_rows import *  # noqa: F403 - re-exported: cost is the survey's one name
from fightlab.survey.reference import *  # noqa: F403
from fightlab.survey.reference import gpu_price, host_setup, parse_bool, priced_rows

__all__ = [*_reference.__all__, *_bench_rows.__all__, "DEFAULT_BANDS", "our_rows", "survey_table",
           "setup_breakdown", "validate_bands", "buying_guide", "Survey", "load_survey", "cpu_machine_name",
           "superseded"]

#: budget bands of the buying guide: edges [$/h], [0, 1), [1, 2), [2, 4), [4, inf)
DEFAULT_BANDS: tuple[float, ...] = (0.0, 1.0, 2.0, 4.0)


def _backend_and_cores(p: dict) -> tuple[str, int | None]:
    """(physics backend, cores) of a row's params: a train row's last segment (sim.cpu's
    backend_record), else the params themselves (backends rows); "gpu" for rows from before the
    CPU backend."""
    from fightlab.measure.report import physics_backend

    seg = (p.get("segments") or [{}])[-1]
    return physics_backend(p), seg.get("cores") or p.get("cores")


def our_rows(runs: pd.DataFrame, price_per_hour: float | None = None, setup: pd.DataFrame | dict | None = None,
             host_setup_s: float | None = None, packing: pd.DataFrame | None = None,
             cpu_price_per_hour: float | None = None, backends: pd.DataFrame | None = None,
             log=print, cpu_price_note: str | None = None) -> pd.DataFrame:
    """fightlab's measured rows as survey rows (:data:`SURVEY_COLUMNS`), priced; each helper below
    says its rows' rule, and every row left out is said through ``log``:

    - solo: the headline per body (`report.headline` of `report.solve_summary`; GPU backend);
    - packed, measured: train rows that shared a GPU (concurrent K > 1), of their body's headline
      learner (`report.learner_id`), through `report.packed_throughput`;
    - packed, estimated (``packing``: data/results/packing.csv rows of the headline's training
      code, `report.code_of`): aggregate iterations/s × the headline's iterations to solve;
    - CPU backend (train rows whose segments say backend "cpu"): their headline, else an
      estimate from ``backends`` rows (`fightlab.measure.backends.estimated_time_to_solve`).

    Args:
      runs: `report.published_runs`. backends: ``backends`` rows; None: no estimated CPU rows.
      cpu_price_per_hour: the CPU backend's machine price [$/h]; None: CPU rows left out (no
        priced source exists for the 16-core host the committed rows ran on); cpu_price_note:
        its source for the rows' notes (:func:`assumed_cpu_price_per_hour`; None: "given").
      price_per_hour: the GPU's price [$/h]; None: :data:`ASSUMED_PRICE_PER_HOUR` of its type.
      setup / host_setup_s: the paid host set-up [s]: ``host_setup_s``, else the fitted
        "vast.ai GPU" constant of ``setup`` (:func:`fit_setup`); a run's ``compile_s`` is added.
    Raises:
      ConfigError: an unknown GPU name in the rows, a bad price or set-up, neither a set-up nor
        a host_setup_s.
    """
    from fightlab.measure.report import with_code

    host_setup_s = host_setup("our_rows", setup, host_setup_s)
    price_per_hour = validate_price(price_per_hour, "price_per_hour")
    cpu_price_per_hour = validate_price(cpu_price_per_hour, "cpu_price_per_hour")
    if runs is None or runs.empty:
        return pd.DataFrame(columns=list(SURVEY_COLUMNS))
    runs = with_code(runs)
    backend = runs["params"].map(lambda p: _backend_and_cores(json.loads(p) if p else {})[0])
    gpu_runs = runs[backend == "gpu"]
    heads = _gpu_headlines(gpu_runs, log)
    learners = _head_learners(gpu_runs, heads)
    return priced_rows(_solo_rows(heads, host_setup_s, price_per_hour)
                       + _packed_rows(gpu_runs, learners, host_setup_s, price_per_hour, log)
                       + _packing_estimates(packing, heads, host_setup_s, price_per_hour, log)
                       + _cpu_rows(runs.assign(backend=backend), gpu_runs, learners, backends, host_setup_s,
                                   cpu_price_per_hour, cpu_price_note, log))


def _gpu_row(gpu: str, body: str, price_per_hour: float | None, note: str, **row) -> dict:
    """A fightlab GPU survey row, priced by `gpu_price` (its source ends ``note``)."""
    gpu = gpu_type(gpu)
    price, said = gpu_price(gpu, price_per_hour)
    return dict(origin="fightlab", machine=gpu, provider="fightlab", kind="gpu", gpu=gpu, group="fightlab GPU",
                body=body, usd_per_h=price, note=f"{note}; {said}", **row)


def _cpu_row(machine: str, body: str, price: float, **row) -> dict:
    """A fightlab CPU-backend survey row (solo) at ``price`` [$/h]."""
    return dict(origin="fightlab", machine=machine, provider="fightlab", kind="cpu", gpu=None,
                group="fightlab CPU", body=body, mode="solo", usd_per_h=price, **row)


def _matching(runs: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """The rows of ``runs`` whose columns equal ``keys`` ({column: value})."""
    return runs[np.logical_and.reduce([runs[c] == v for c, v in keys.items()])]


def _gpu_headlines(gpu_runs: pd.DataFrame, log) -> pd.DataFrame:
    """The headline per body of the GPU runs (`report.headline`); a body without one is said."""
    from fightlab.measure.report import headline, no_headline_note, solve_summary

    heads = headline(solve_summary(gpu_runs)) if not gpu_runs.empty else pd.DataFrame()
    headed = set(heads.index.get_level_values("body")) if not heads.empty else set()
    for body in sorted(set(gpu_runs["body"]) - headed):  # never dropped silently
        log(f"survey: {body} has no solo row: {no_headline_note(body, gpu_runs)}")
    return heads


def _head_learners(gpu_runs: pd.DataFrame, heads: pd.DataFrame) -> dict[str, set]:
    """{body: the learner ids of its headline's runs}."""
    from fightlab.measure.report import SUMMARY_KEYS

    out: dict[str, set] = {}
    for keys in heads.index:
        k = dict(zip(SUMMARY_KEYS, keys))
        out.setdefault(k["body"], set()).update(_matching(gpu_runs, k)["learner"])
    return out


def _solo_rows(heads: pd.DataFrame, host_setup_s: float, price_per_hour) -> list[dict]:
    """Solo: the headline per body, time to solve = its median [s], set-up + its compile_s."""
    from fightlab.measure.report import SUMMARY_KEYS

    out = []
    for keys, h in heads.iterrows():
        k = dict(zip(SUMMARY_KEYS, keys))
        out.append(_gpu_row(k["gpu"], k["body"], price_per_hour, mode="solo",
                            time_to_solve_s=float(h["time_to_solve_median_s"]), time_estimated=False,
                            time_source="measured solve",
                            setup_s=host_setup_s + float(np.nan_to_num(h["compile_s_median"])),
                            note=f"headline, {int(h['n_solo'])} solo seeds, commit {h['commits']}, "
                            f"{k['setup']}, {k['nworld']} worlds"))
    return out


def _packed_rows(gpu_runs: pd.DataFrame, learners: dict, host_setup_s: float, price_per_hour, log) -> list[dict]:
    """Packed, measured: train rows that shared the GPU, of their body's headline learner only (a
    learner study packs its variants, another init_std or KL target: not a buying choice)."""
    from fightlab.measure.report import SUMMARY_KEYS, packed_throughput

    shared = gpu_runs[pd.to_numeric(gpu_runs["concurrent"], errors="coerce") > 1]
    shared = shared[shared["task"] == DEFAULT_TASK]
    if shared.empty:
        return []
    same = [lrn in learners.get(b, set()) for b, lrn in zip(shared["body"], shared["learner"])]
    if not all(same):
        log(f"survey: {len(same) - sum(same)} packed train row(s) of another learner than their "
            "body's headline left out (learner-study variants)")
    shared = shared[same]
    if shared.empty:
        return []
    out = []
    for keys, r in packed_throughput(shared).iterrows():
        k = dict(zip((*SUMMARY_KEYS, "concurrent", "mps"), keys))
        if r["n_solved"]:
            K = int(k["concurrent"])
            out.append(_gpu_row(k["gpu"], k["body"], price_per_hour,
                                mode=f"packed x{K}{' MPS' if k['mps'] else ''}, {int(k['nworld'])} worlds",
                                time_to_solve_s=float(r["time_to_solve_median_s"]), time_estimated=False,
                                time_source="measured solve", setup_s=host_setup_s,
                                solves_per_hour=float(r["solves_per_gpu_hour"]), solves_per_setup=K,
                                note=f"{int(r['n_solved'])} packed solves (train rows), commit {r['commits']}"))
    return out


def _packing_estimates(packing: pd.DataFrame | None, heads: pd.DataFrame, host_setup_s: float, price_per_hour,
                       log) -> list[dict]:
    """Packed, estimated: the newest packing row per body, GPU, GPU count, nworld, K and MPS of
    the body's headline code, its aggregate rate × the headline's iterations to solve; a row of N
    GPUs is a rental of N GPUs (N × the GPU's price per hour, its aggregate over all N)."""
    from fightlab.measure.report import SUMMARY_KEYS, code_of

    if packing is None or packing.empty:
        return []
    body_at, code_at = SUMMARY_KEYS.index("body"), SUMMARY_KEYS.index("code")
    iters = {kb[body_at]: float(h["iterations_median"]) for kb, h in heads.iterrows()}
    codes = {kb[body_at]: kb[code_at] for kb in heads.index}
    pk = packing[pd.to_numeric(packing["concurrent"], errors="coerce") > 1]
    # the newest row per body, GPU, nworld, K and MPS: a later commit's rate supersedes
    gpus = pd.to_numeric(pk["gpus"], errors="coerce").fillna(1).astype(int) if "gpus" in pk else 1
    pk = (pk.assign(_mps=pk["mps"].map(lambda v: parse_bool(v) or False), _gpus=gpus).sort_values("time", kind="stable")
          .drop_duplicates(["body", "gpu", "_gpus", "nworld", "concurrent", "_mps"], keep="last"))
    out, stale = [], []
    for _, p in pk.iterrows():
        if p["body"] not in iters:
            log(f"survey: packing row {p['run_id']} ({p['body']}): no solo headline of that body "
                "for its iterations to solve, left out")
        elif code_of(p["commit"]) != codes[p["body"]]:  # another physics or learner: not the headline's s/it
            stale.append(f"{p['run_id']} ({p['body']}, commit {p['commit']})")
        else:
            K, n_it, n = int(p["concurrent"]), iters[p["body"]], int(p["_gpus"])
            on = f" on {n} GPUs" if n > 1 else ""
            row = _gpu_row(p["gpu"], p["body"], price_per_hour,
                           mode=f"packed x{K}{' MPS' if p['_mps'] else ''}{on}, {int(p['nworld'])} worlds",
                           time_to_solve_s=n_it * float(p["s_per_iter"]), time_estimated=True,
                           time_source="packing estimate", setup_s=host_setup_s,
                           solves_per_hour=float(p["it_per_s_aggregate"]) * 3600.0 / n_it,
                           solves_per_setup=K * n,
                           note=f"estimated: packing row {p['run_id']} (commit {p['commit']}) "
                           f"aggregate it/s{' of all ' + str(n) + ' GPUs' if n > 1 else ''} × headline "
                           f"{n_it:.0f} iterations to solve")
            if n > 1 and row["usd_per_h"] is not None:
                row.update(usd_per_h=n * row["usd_per_h"], note=row["note"] + f"; × {n} GPUs")
            out.append(row)
    if stale:
        log(f"survey: {len(stale)} packing row(s) left out: another training code than their body's "
            f"headline (other physics or learner: their seconds per iteration are not the headline's): "
            f"{', '.join(stale)}; a packing row of today's code: `python -m fightlab.measure.packing "
            "BATCH_DIR --publish`")
    return out


def _cpu_rows(runs: pd.DataFrame, gpu_runs: pd.DataFrame, learners: dict, backends: pd.DataFrame | None,
              host_setup_s: float, price: float | None, price_note: str | None, log) -> list[dict]:
    """The CPU backend: measured solves first (their headline), an estimate (`backends` rows) only
    for a body without one; none without a ``price``. ``runs`` has a ``backend`` column; a run with
    its policy on a GPU ran on a machine no survey row prices (`report.cpu_baseline_runs`)."""
    from fightlab.measure.backends import estimated_time_to_solve
    from fightlab.measure.report import SUMMARY_KEYS, cpu_baseline_runs, headline, solve_summary

    say = lambda line: log(f"survey: {line}")  # noqa: E731
    cpu_runs = cpu_baseline_runs(runs, log=say)
    cpu_heads = headline(solve_summary(cpu_runs), backend="cpu") if not cpu_runs.empty else pd.DataFrame()
    measured = {dict(zip(SUMMARY_KEYS, keys))["body"] for keys in cpu_heads.index}
    est = estimated_time_to_solve(backends, gpu_runs, log=say)
    for body, rid in zip(est["body"], est["run_id"]):
        if body in measured:
            say(f"CPU backend {body}: a measured solve (train rows) wins over the estimate from backends row {rid}")
    est = est[~est["body"].isin(measured)]
    if price is None:
        if not cpu_runs.empty:
            say(f"{len(cpu_runs)} CPU-backend train row(s) left out: no cpu_price_per_hour given")
        if not est.empty:
            say(f"{len(est)} estimated CPU-backend row(s) ({', '.join(est['body'])}) left out: "
                "no cpu_price_per_hour given")
        return []
    given = price_note or f"price ${price:.2f}/h given"
    out = []
    for keys, h in cpu_heads.iterrows():
        k = dict(zip(SUMMARY_KEYS, keys))
        # the CPU solve's own learner and physics against the GPU headline's of its body
        mine = set(_matching(cpu_runs, k)["learner"]) if "learner" in cpu_runs else set()
        theirs = learners.get(k["body"], set())
        other = bool(mine and theirs and not mine & theirs)
        out.append(_cpu_row(cpu_machine_name(k["gpu"], earlier_learner=other), k["body"], price,
                            time_to_solve_s=float(h["time_to_solve_median_s"]), time_estimated=False,
                            time_source="measured solve",
                            setup_s=host_setup_s + float(np.nan_to_num(h["compile_s_median"])),
                            note=f"CPU backend headline, commit {h['commits']}"
                            + (f"; learner {'/'.join(sorted(mine))} (PPO settings and training physics of "
                               f"that commit), not the GPU headline's {'/'.join(sorted(theirs))}" if other else "")
                            + f"; {given}"))
    for _, e in est.iterrows():
        whose = ("headline" if e["iterations_of"] == "headline" else
                 f"its learner {e['learner']}'s {e['headline_n_solo']} solo solve(s); the headline's learner "
                 f"is {e['headline_learner']}")
        out.append(_cpu_row(cpu_machine_name(e["cpu"], e["iterations_of"] != "headline"), e["body"], price,
                            time_to_solve_s=float(e["time_to_solve_s"]), time_estimated=True,
                            time_source="backends estimate",
                            setup_s=host_setup_s + float(np.nan_to_num(e["compile_s"])),
                            note=f"estimated: backends row {e['run_id']} (commit {e['commit']}) s/iteration × "
                            f"{e['iterations_to_solve']:.0f} iterations to solve ({whose}; GPU runs, commit "
                            f"{e['headline_commit']}), {e['nworld']} worlds; {given}"))
    return out


def superseded(table: pd.DataFrame) -> pd.Series:
    """Per survey row (same index): True for a bench estimate (``time_source`` "bench estimate")
    of a GPU type and body that fightlab also solved (a solo "measured solve" row of origin
    "fightlab", same ``gpu`` and ``body``). Measured beats estimate: :func:`buying_guide` and
    Figure 3 (`fightlab.figures.survey.plot_survey`) take the measured solve and leave such an
    estimate out, so one GPU type is not counted twice; the table keeps both. The original's
    measured rows supersede nothing: they time another trainer."""
    fl = table[(table["origin"] == "fightlab") & (table["time_source"] == "measured solve")
               & (table["mode"] == "solo")]
    solved = set(zip(fl["gpu"], fl["body"]))
    return pd.Series([s == "bench estimate" and (g, b) in solved
                      for s, g, b in zip(table["time_source"], table["gpu"], table["body"])],
                     index=table.index, dtype=bool, name="superseded")


def survey_table(ref: pd.DataFrame, ours: pd.DataFrame | None, setup: pd.DataFrame | dict) -> pd.DataFrame:
    """Every survey row: the reference's (:func:`reference_rows`) and ours (:func:`our_rows`)."""
    parts = [reference_rows(ref, setup)] + ([ours] if ours is not None and not ours.empty else [])
    return pd.concat(parts, ignore_index=True)[list(SURVEY_COLUMNS)]


def setup_breakdown(table: pd.DataFrame) -> pd.DataFrame:
    """Per solo survey row (packed rows share one set-up over K solves): the paid set-up [s] and
    its cost [$], the training's cost [$] and the set-up's share of the cost per solve [-]."""
    t = table[table["mode"] == "solo"].copy()
    t["setup_usd"] = t["setup_s"] * t["usd_per_h"] / 3600.0
    t["train_usd"] = t["time_to_solve_s"] * t["usd_per_h"] / 3600.0
    t["setup_share"] = t["setup_usd"] / (t["setup_usd"] + t["train_usd"])
    return t[["origin", "machine", "group", "body", "usd_per_h", "time_to_solve_s", "setup_s",
              "train_usd", "setup_usd", "setup_share"]].reset_index(drop=True)


def validate_bands(bands: Iterable[float]) -> list[tuple[float, float]]:
    """Budget bands [$/h] from their edges: ``[0, 1, 2, 4]`` -> [0, 1), [1, 2), [2, 4), [4, inf).
    Raises ConfigError: not a list of at least one number, a negative edge, edges not increasing."""
    if isinstance(bands, (str, bytes)) or not isinstance(bands, Iterable):
        raise ConfigError(f"bands must be a list of increasing prices [$/h] such as [0, 1, 2, 4], got {bands!r}")
    edges = list(bands)
    if not edges or not all(isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e)
                            for e in edges):
        raise ConfigError(f"bands must be a non-empty list of numbers [$/h] such as [0, 1, 2, 4], got {bands!r}")
    if edges[0] < 0:
        raise ConfigError(f"bands: a price cannot be negative, got {edges[0]!r}")
    for a, b in zip(edges, edges[1:]):
        if b <= a:
            raise ConfigError(f"bands must increase: {b!r} follows {a!r}")
    return list(zip(map(float, edges), [*map(float, edges[1:]), math.inf]))


def _band_label(lo: float, hi: float) -> str:
    return f"${lo:g}–{hi:g}/h" if math.isfinite(hi) else f"≥ ${lo:g}/h"


def _guide_label(r) -> str:
    """A buying-guide machine label: "RTX 3090 (vast.ai)", "H200 (fightlab, packed x8 MPS)",
    "RTX 4090 (fightlab on vast.ai) (bench estimate)"."""
    who = (r["provider"] if r["origin"] == "reference" else
           r["origin"] if r["provider"] in ("fightlab", r["origin"]) else f"{r['origin']} on {r['provider']}")
    mode = "" if r["mode"] == "solo" else f", {r['mode']}"
    est = (" (bench estimate)" if r["time_source"] == "bench estimate" else
           " (time estimated)" if bool(r["time_estimated"]) else "")
    return f"{r['machine']} ({who}{mode}){est}"


def buying_guide(table: pd.DataFrame, bands: Iterable[float] = DEFAULT_BANDS) -> pd.DataFrame:
    """For each budget band of price [$/h], body and mode (solo, packed) of ``table``
    (:func:`survey_table`): the cheapest per solve (its cost [$] and price) and the fastest (its
    time to solve [s] and cost), labelled by `_guide_label`; a band without rows reads "none". A
    bench estimate :func:`superseded` by a measured solve is left out, counted in ``n_superseded``.

    Raises:
      ConfigError: bad bands (:func:`validate_bands`); a table without the survey columns.
    """
    spans = validate_bands(bands)
    missing = [c for c in SURVEY_COLUMNS if c not in table.columns]
    if missing:
        raise ConfigError(f"buying_guide needs a survey table (survey_table); missing column(s) {', '.join(missing)}")
    t = table.copy()
    t["packing"] = np.where(t["mode"] == "solo", "solo", "packed")
    t["label"] = [_guide_label(r) for _, r in t.iterrows()]
    t["superseded"] = superseded(t)
    rows = []
    for (lo, hi), body, packing in itertools.product(spans, sorted(set(t["body"])), ("solo", "packed")):
        mine = t[t["usd_per_h"].between(lo, hi, inclusive="left") & (t["body"] == body)
                 & (t["packing"] == packing)]
        g = mine[~mine["superseded"]]
        row = dict(band=_band_label(lo, hi), body=body, packing=packing, n_rows=len(g),
                   n_superseded=int(mine["superseded"].sum()), cheapest="none", fastest="none")
        if not g.empty:
            c, f = g.loc[g["cost_per_solve_usd"].idxmin()], g.loc[g["time_to_solve_s"].idxmin()]
            row.update(cheapest=c["label"], cheapest_usd_per_solve=c["cost_per_solve_usd"],
                       cheapest_usd_per_h=c["usd_per_h"], fastest=f["label"],
                       fastest_time_to_solve_s=f["time_to_solve_s"],
                       fastest_usd_per_solve=f["cost_per_solve_usd"])
        rows.append(row)
    cols = ["band", "body", "packing", "n_rows", "n_superseded", "cheapest", "cheapest_usd_per_solve",
            "cheapest_usd_per_h", "fastest", "fastest_time_to_solve_s", "fastest_usd_per_solve"]
    return pd.DataFrame(rows).reindex(columns=cols)


@dataclass(frozen=True)
class Survey:
    """:func:`load_survey`'s answer: the reference table, the set-up constants, our rows, all rows
    (:func:`survey_table`), what the prices rest on, and the ``backends`` and ``bench`` rows read
    (data/results/backends.csv, :func:`read_bench`; usable or not; empty without them)."""
    reference: pd.DataFrame
    setup: pd.DataFrame
    ours: pd.DataFrame
    table: pd.DataFrame
    price_note: str
    backends: pd.DataFrame
    bench: pd.DataFrame


def load_survey(root: Path | str | None = None, price_per_hour: float | None = None,
                host_setup_s: float | None = None, cpu_price_per_hour: float | None = None,
                log=print) -> Survey:
    """The survey from ``root/data`` alone (default: the repository): the reference table, the
    set-up fit, our rows from data/results/{train,packing,backends}.csv where they exist
    (:func:`our_rows`), and the bench rows (:func:`read_bench`, :func:`bench_rows`).

    Raises:
      FileNotFoundError: no reference table; ConfigError: as :func:`read_reference`,
        :func:`our_rows`, :func:`bench_rows`; ValueError: a torn bench.csv (:func:`read_bench`).
    """
    from fightlab import results
    from fightlab.measure.report import published_runs

    root = Path(root) if root is not None else REPO_ROOT
    ref = read_reference(reference_path(root))
    setup = fit_setup(ref)
    have = lambda e: results.results_path(e, root).exists() and len(  # noqa: E731
        results.results_path(e, root).read_bytes().splitlines()) > 1
    runs = published_runs(root) if have("train") else None
    packing = results.read_rows("packing", root) if have("packing") else None
    backends = results.read_rows("backends", root)  # empty with the schema's columns when absent
    price_per_hour = validate_price(price_per_hour, "price_per_hour")
    cpu_price_per_hour = validate_price(cpu_price_per_hour, "cpu_price_per_hour")
    cpu_note = None
    if cpu_price_per_hour is None and (cores := _cpu_cores(runs, backends)):
        # an assumption from the reference, for the cores the CPU rows ran on
        cpu_price_per_hour, cpu_note = assumed_cpu_price_per_hour(ref, cores)
    ours = our_rows(runs, price_per_hour=price_per_hour, setup=setup, host_setup_s=host_setup_s,
                    packing=packing, cpu_price_per_hour=cpu_price_per_hour, backends=backends, log=log,
                    cpu_price_note=cpu_note)
    bench = read_bench(root, log=log)
    benched = bench_rows(bench, price_per_hour=price_per_hour, setup=setup, host_setup_s=host_setup_s, log=log)
    if not benched.empty:
        ours = pd.concat([x for x in (ours, benched) if not x.empty], ignore_index=True)
    note = (f"fightlab's GPU rows priced at ${price_per_hour:.2f}/h (given)" if price_per_hour is not None
            else "fightlab's GPU rows: " + ASSUMED_PRICE_SOURCE)
    if cpu_price_per_hour is not None:
        note += f"; fightlab's CPU-backend rows: {cpu_note or f'${cpu_price_per_hour:.2f}/h given'}"
    if (benched["provider"] != "fightlab").any():
        note += "; rented bench rows: the offer's $/h where the launcher recorded it, else as fightlab's GPU rows"
    return Survey(reference=ref, setup=setup, ours=ours, table=survey_table(ref, ours, setup),
                  price_note=note, backends=backends, bench=bench)


def cpu_machine_name(label: str, earlier_learner: bool = False) -> str:
    """A survey row's machine for a CPU-backend row of CPU ``label`` ("CPU Intel(R) Xeon(R)
    Processor (16 cores)" → "CPU backend, Intel Xeon Processor (16 cores)"); with
    ``earlier_learner`` (the row ran another learner than the GPU headline's) "CPU backend
    (earlier learner), …"."""
    name = re.sub(r"\((R|TM)\)", "", str(label)).strip()
    return f"CPU backend{' (earlier learner)' if earlier_learner else ''}, " + re.sub(r"^CPU\s+", "", name)


def _cpu_cores(runs: pd.DataFrame | None, backends: pd.DataFrame) -> int | None:
    """The most cores any CPU-backend row (train or backends) ran on (``_backend_and_cores``), or None."""
    found = [0]
    for df in (runs, backends):
        for raw in df["params"] if df is not None and "params" in df else []:
            try:
                backend, cores = _backend_and_cores(json.loads(raw) if isinstance(raw, str) and raw else {})
            except ValueError:
                continue
            if backend == "cpu" and isinstance(cores, int):
                found.append(cores)
    return max(found) or None
