"""Time to solve against nworld: the world-count sweep's rows joined with the trainings'
(notebook 04, Figure 2, ``sweep --summary``, `measure.sweep`'s `--nworld auto`).

`time_to_solve_table`: per (GPU, body, learner, nworld), the median iterations to solve of the
MuJoCo Warp train rows (`warp_runs`) of the same body, learner and nworld × the solo seconds per
iteration of the newest sweep row of that GPU. Iterations pool any packing, commit and GPU: they
are the learner's and the curriculum's (as for `--nworld auto`). Figure 2 draws it; `findings`
and `summary_lines` say it; `packing_check`, `stage0_by_nworld`, `auto_vs_sweep` and
`auto_runs` check it.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pandas as pd

from fightlab import results
from fightlab.config import DEFAULT_TASK, ConfigError
from fightlab.run.nworld import AUTO_TOLERANCE, pick_nworld

#: the original study's best world count and card (its Figure 2), drawn for reference
ORIGINAL_NWORLD = 1024
ORIGINAL_GPU = "RTX 5090"
#: the original study's iterations to solve, "about 350–500 on any machine" at any world count
#: (data/reference/original-study.md, "Task and solve criterion")
ORIGINAL_ITERATIONS = (350, 500)
#: columns of the printed summary (`summary_lines`), a terminal's width
SUMMARY_WIDTH = 100


def _params(df: pd.DataFrame) -> list[dict]:
    return [json.loads(p) if isinstance(p, str) and p else {} for p in df["params"]]


def warp_runs(runs: pd.DataFrame, learner: bool = False) -> pd.DataFrame:
    """The train rows of MuJoCo Warp trainings (CPU-backend rows left out:
    `report.physics_backend`), either Newton solve (`learners.solve_of`: the single launch is
    MuJoCo Warp's solve to float32 rounding, tests/test_newton*.py, so iterations to solve, the
    learner's and the curriculum's, pool; a solve's speed is its sweep rows'); with ``learner``,
    a ``learner`` column (`report.learner_id`)."""
    from fightlab.measure.report import learner_id, physics_backend

    if runs.empty:
        return runs
    runs = runs[[physics_backend(p) == "gpu" for p in _params(runs)]]
    return runs.assign(learner=[learner_id(p) for p in _params(runs)]) if learner else runs


def iterations_to_solve(runs: pd.DataFrame) -> pd.DataFrame:
    """Iterations to solve per (body, learner, nworld) of the `warp_runs` of the task (pooled as
    the module docstring says): body, learner, nworld, n_runs, n_solved, seeds and commits (of
    the solved runs, text), iterations_median / _min / _max (NaN when none solved), packed (the
    packings seen, text such as "1,4")."""
    from fightlab.measure.report import commits_in

    cols = ["body", "learner", "nworld", "n_runs", "n_solved", "seeds", "commits", "iterations_median",
            "iterations_min", "iterations_max", "packed"]
    runs = warp_runs(runs, learner=True)
    if runs.empty:
        return pd.DataFrame(columns=cols)
    if "task" in runs:
        runs = runs[runs["task"] == DEFAULT_TASK]
    out = []
    for (body, learner, nworld), g in runs.groupby(["body", "learner", "nworld"], sort=True):
        s = g[g["solved"] == True]  # noqa: E712
        its = s["iterations"] if len(s) else pd.Series([math.nan])
        conc = pd.to_numeric(g.get("concurrent", pd.Series(1, index=g.index)), errors="coerce")
        out.append(dict(body=body, learner=learner, nworld=int(nworld), n_runs=len(g),
                        n_solved=len(s), seeds=",".join(str(x) for x in sorted(s["seed"])),
                        commits=commits_in(s, sep=","), iterations_median=its.median(),
                        iterations_min=its.min(), iterations_max=its.max(),
                        packed=",".join(str(int(c)) if c == c else "?" for c in sorted(set(conc)))))
    return pd.DataFrame(out, columns=cols)


def known_iterations(runs: pd.DataFrame, body: str, learner: str) -> dict[int, float]:
    """{nworld: median iterations to solve} of ``body`` and ``learner`` (`iterations_to_solve`)."""
    its = iterations_to_solve(runs)
    its = its[(its["body"] == body) & (its["learner"] == learner) & (its["n_solved"] > 0)]
    return {int(n): float(m) for n, m in zip(its["nworld"], its["iterations_median"])}


def latest_sweep_rows(sweep: pd.DataFrame) -> pd.DataFrame:
    """The newest ``sweep`` row per (gpu, learner, solve, body, nworld), with a ``learner`` column
    (from params; "" for rows without one) and a ``solve`` one (`learners.solve_of`: rows from
    before sweeps recorded their physics ran MuJoCo Warp's)."""
    from fightlab.measure.learners import solve_of

    if sweep.empty:
        return sweep.assign(learner=pd.Series(dtype=object), solve=pd.Series(dtype=object))
    params = _params(sweep)
    sweep = sweep.assign(learner=[p.get("learner", "") for p in params], solve=[solve_of(p) for p in params])
    return (sweep.sort_values("time", kind="stable")
            .drop_duplicates(["gpu", "learner", "solve", "body", "nworld"], keep="last")
            .sort_values(["gpu", "body", "nworld"], kind="stable").reset_index(drop=True))


def time_to_solve_table(sweep: pd.DataFrame, runs: pd.DataFrame, learner: str | None = "newest") -> pd.DataFrame:
    """Predicted time to solve per sweep point (`latest_sweep_rows` of ``sweep``) from train rows
    ``runs`` (`report.published_runs`; `iterations_to_solve`). ``learner="newest"`` keeps the
    points of the newest sweep row's learner and Newton solve per (gpu, body), so a curve never
    mixes learners or solves; a learner id keeps that learner's (each solve its own points);
    None keeps all.

        time_to_solve_s     = iterations_median × s_per_iter                      [s]
        time_to_solve_min_s = iterations_min × s_per_iter; _max_s likewise         [s]

    Returns one row per point: gpu, commit (the sweep row's), learner, solve, body, nworld,
    s_per_iter, rollout_s_per_iter, update_s_per_iter, env_steps_per_s, `iterations_to_solve`'s
    columns and time_to_solve_s / _min_s / _max_s (NaN where nothing solved).
    """
    pts = latest_sweep_rows(sweep)
    if not pts.empty and learner == "newest":
        pair = list(zip(pts["learner"], pts["solve"]))
        newest = pts.assign(pair=pair).sort_values("time", kind="stable").groupby(["gpu", "body"])["pair"].last()
        pts = pts[[newest[(g, b)] == p for g, b, p in zip(pts["gpu"], pts["body"], pair)]]
    elif not pts.empty and learner is not None:
        pts = pts[pts["learner"] == learner]
    keep = ["gpu", "commit", "learner", "solve", "body", "nworld", "s_per_iter", "rollout_s_per_iter",
            "update_s_per_iter", "env_steps_per_s"]
    pts = pts[keep].reset_index(drop=True) if not pts.empty else pd.DataFrame(columns=keep)
    its = iterations_to_solve(runs)
    out = pts.merge(its, on=["body", "learner", "nworld"], how="left")
    for c in ("n_runs", "n_solved"):
        out[c] = out[c].fillna(0).astype(int)
    for suffix, col in (("", "iterations_median"), ("_min", "iterations_min"), ("_max", "iterations_max")):
        out[f"time_to_solve{suffix}_s"] = pd.to_numeric(out[col], errors="coerce") * out["s_per_iter"].astype(float)
    return out


def summary_lines(table: pd.DataFrame, width: int = SUMMARY_WIDTH) -> list[str]:
    """`time_to_solve_table` as lines of at most ``width`` columns (``sweep --summary``): per
    (gpu, body) a heading, one line per world count, and the train rows' commits."""
    def num(x, fmt):
        return "-" if pd.isna(x) else format(float(x), fmt)

    def span(med, lo, hi, fmt):
        return "-" if pd.isna(med) else f"{num(med, fmt)} ({num(lo, fmt)}–{num(hi, fmt)})"

    lines = []
    for (gpu, body), rows in table.groupby(["gpu", "body"], sort=False):
        heads = ", ".join(dict.fromkeys(f"sweep commit {c}, learner {lrn}, {sv} solve"
                                        for c, lrn, sv in zip(rows["commit"], rows["learner"], rows["solve"])))
        lines += textwrap.wrap(f"{body} on {gpu} ({heads})", width)
        lines.append(f"{'nworld':>7} {'s/iter':>7} {'env steps/s':>11} {'solved':>7}  "
                     f"{'iterations (min–max)':<22} {'est. solve s (min–max)':<26} packed")
        for r in rows.itertuples():
            line = (f"{int(r.nworld):>7} {num(r.s_per_iter, '.4f'):>7} {num(r.env_steps_per_s, ',.0f'):>11} "
                    f"{f'{r.n_solved}/{r.n_runs}':>7}  "
                    f"{span(r.iterations_median, r.iterations_min, r.iterations_max, 'g'):<22} "
                    f"{span(r.time_to_solve_s, r.time_to_solve_min_s, r.time_to_solve_max_s, '.1f'):<26} "
                    f"{'-' if pd.isna(r.packed) else r.packed}")
            lines.append(line.rstrip()[:width])
        commits = ", ".join(dict.fromkeys(c for cs in rows["commits"].dropna() for c in str(cs).split(",") if c))
        lines += textwrap.wrap(f"train rows of commits: {commits or '-'}", width, subsequent_indent="  ")
        lines.append("")
    return lines


def packing_check(runs: pd.DataFrame) -> pd.DataFrame:
    """Points solved both solo and packed (`warp_runs` of the same body, nworld, seed, commit,
    learner): body, nworld, seed, commit, iterations_solo, iterations_packed, concurrent (the
    packed run's K), iterations_diff (packed − solo; packing should change wall time only)."""
    cols = ["body", "nworld", "seed", "commit", "iterations_solo", "iterations_packed", "concurrent",
            "iterations_diff"]
    runs = warp_runs(runs, learner=True)
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = runs[runs["solved"] == True]  # noqa: E712
    out = []
    for (body, nworld, seed, commit, _), g in runs.groupby(["body", "nworld", "seed", "commit", "learner"]):
        solo, packed = g[g["concurrent"] == 1], g[g["concurrent"] > 1]
        if len(solo) and len(packed):
            a, b = int(solo["iterations"].iloc[-1]), int(packed["iterations"].iloc[-1])
            out.append(dict(body=body, nworld=int(nworld), seed=int(seed), commit=commit,
                            iterations_solo=a, iterations_packed=b,
                            concurrent=int(packed["concurrent"].iloc[-1]), iterations_diff=b - a))
    return pd.DataFrame(out, columns=cols)


def stage0_by_nworld(runs: pd.DataFrame, root: Path | str | None = None) -> pd.DataFrame:
    """Where the iterations go at each world count: per (body, learner, nworld) of the
    `report.run_stages` of `warp_runs`: body, learner, nworld, n, seeds, stage0_median / _min /
    _max (the first stage, a = 0.1), later_median (stages 1 …), iterations_median (total),
    stage0_world_iterations_median (nworld × stage 0's iterations: samples / num_steps).
    """
    from fightlab.measure.report import run_stages

    cols = ["body", "learner", "nworld", "n", "seeds", "stage0_median", "stage0_min", "stage0_max",
            "later_median", "iterations_median", "stage0_world_iterations_median"]
    per_run = run_stages(warp_runs(runs), Path(root) if root else None)
    if per_run.empty:
        return pd.DataFrame(columns=cols)
    per_run["later"] = per_run["iterations"] - per_run["stage0"]
    out = per_run.groupby(["body", "learner", "nworld"], sort=True).agg(
        n=("seed", "size"), seeds=("seed", lambda x: ",".join(map(str, sorted(x)))),
        stage0_median=("stage0", "median"), stage0_min=("stage0", "min"), stage0_max=("stage0", "max"),
        later_median=("later", "median"), iterations_median=("iterations", "median")).reset_index()
    out["nworld"] = out["nworld"].astype(int)
    out["stage0_world_iterations_median"] = out["nworld"].astype(float) * out["stage0_median"]
    return out[cols]


def findings(table: pd.DataFrame, tolerance: float = AUTO_TOLERANCE) -> list[str]:
    """Lines about the curve (`time_to_solve_table`) per (gpu, body): the fastest point against
    the original's (1024 worlds); iterations to solve from the fewest to the most worlds, each
    against the original's 350–500; the world counts within ``tolerance`` of the fastest (the set
    `--nworld auto` chooses the fewest of). Empty without solved points."""
    def its(x) -> str:  # a median of an even count may end in .5: said as it is, not rounded
        return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"

    lines = []
    t = table.dropna(subset=["time_to_solve_s"])
    for (gpu, body), g in t.groupby(["gpu", "body"], sort=True):
        g = g.sort_values("nworld")
        best = g.loc[g["time_to_solve_s"].idxmin()]
        at = g[g["nworld"] == ORIGINAL_NWORLD]
        ref = (f"; at {ORIGINAL_NWORLD} worlds (the original's best, {ORIGINAL_GPU}) "
               f"{at['time_to_solve_s'].iloc[0]:.1f} s" if len(at) else "")
        where = (f"fastest solve at {int(best['nworld'])} worlds" if len(g) > 1 else
                 f"solved at {int(best['nworld'])} worlds only (no other world count to compare)")
        lines.append(f"{body} on {gpu}: {where}, "
                     f"{best['time_to_solve_s']:.1f} s = {its(best['iterations_median'])} iterations (median) × "
                     f"{best['s_per_iter']:.3f} s (the sweep's solo s/iteration){ref}")
        lo, hi = g.iloc[0], g.iloc[-1]
        if len(g) > 1:
            lines.append(f"{body} on {gpu}: iterations to solve {its(lo['iterations_median'])} at "
                         f"{int(lo['nworld'])} worlds, {its(hi['iterations_median'])} at {int(hi['nworld'])} "
                         f"({hi['iterations_median'] / lo['iterations_median']:.2f}×); seconds per "
                         f"iteration {lo['s_per_iter']:.3f} → {hi['s_per_iter']:.3f} s "
                         f"({hi['s_per_iter'] / lo['s_per_iter']:.2f}×)")
            a, b = ORIGINAL_ITERATIONS
            per = ", ".join(f"{int(r.nworld)}: {its(r.iterations_median)}" for r in g.itertuples())
            outside = [int(r.nworld) for r in g.itertuples() if not a <= r.iterations_median <= b]
            lines.append(f"{body} on {gpu}: median iterations to solve by nworld {per} (the original: "
                         f"{a}–{b} at any world count; outside that here: "
                         f"{', '.join(map(str, outside)) or 'none'})")
            within = g["time_to_solve_s"] <= best["time_to_solve_s"] * (1.0 + tolerance)
            flat = g[within]
            others = ", ".join(f"{int(r.nworld)}: +{r.time_to_solve_s / best['time_to_solve_s'] - 1:.1%}"
                               for r in g[~within].itertuples())
            lines.append(f"{body} on {gpu}: within {tolerance:.0%} of the fastest: "
                         f"{', '.join(str(int(n)) for n in flat['nworld'])} worlds; the others "
                         f"{others or 'none'}")
    return lines


def auto_vs_sweep(table: pd.DataFrame, tolerance: float = AUTO_TOLERANCE) -> pd.DataFrame:
    """The auto rule applied to the sweep itself per (gpu, body) (s_per_iter as the ramp, the
    solved points' iterations as known) against the measured best: gpu, body, auto_nworld,
    auto_predicted_s, best_nworld, best_time_to_solve_s, note (why the rule cannot choose)."""
    out = []
    for (gpu, body), g in table.groupby(["gpu", "body"], sort=True):
        known = dict(zip(g["nworld"], g["iterations_median"]))
        ramp = dict(zip(g["nworld"], g["s_per_iter"]))
        solved = g.dropna(subset=["time_to_solve_s"])
        best = solved.loc[solved["time_to_solve_s"].idxmin()] if len(solved) else None
        row = dict(gpu=gpu, body=body, auto_nworld=pd.NA, auto_predicted_s=math.nan,
                   best_nworld=int(best["nworld"]) if best is not None else pd.NA,
                   best_time_to_solve_s=float(best["time_to_solve_s"]) if best is not None else math.nan,
                   note="")
        try:
            n, t = pick_nworld(ramp, known, tolerance)
            row.update(auto_nworld=n, auto_predicted_s=float(t.loc[t["chosen"], "predicted_s"].iloc[0]))
        except ConfigError as e:
            row["note"] = str(e)
        out.append(row)
    return pd.DataFrame(out, columns=["gpu", "body", "auto_nworld", "auto_predicted_s", "best_nworld",
                                      "best_time_to_solve_s", "note"])


def auto_runs(sweep_rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The acceptance of `--nworld auto`: each `warp_runs` row with params.nworld_auto against
    the best point of its GPU, body, learner and Newton solve (`learners.solve_of`) in
    `time_to_solve_table` of ``sweep_rows`` and
    the other train rows (an auto run never judges itself). It passes (``ok``) when it solved the
    default task, solo, in at most the best point's slowest seed's time (min … max of its solved
    seeds' iterations × the sweep's s/iteration).

    Returns one row per auto run: run_id, gpu, body, commit, seed, auto_nworld, predicted_s,
    iterations, time_to_solve_s, concurrent, best_nworld, best_time_to_solve_s, best_min_s,
    best_max_s [s], verdict (text), ok (bool).
    """
    from fightlab.measure.learners import solve_of
    from fightlab.measure.report import task_of

    cols = ["run_id", "gpu", "body", "commit", "seed", "auto_nworld", "predicted_s", "iterations",
            "time_to_solve_s", "concurrent", "best_nworld", "best_time_to_solve_s", "best_min_s",
            "best_max_s", "verdict", "ok"]
    runs = warp_runs(runs, learner=True)
    if runs.empty:
        return pd.DataFrame(columns=cols)
    params = _params(runs)
    is_auto = pd.Series([isinstance(p.get("nworld_auto"), dict) for p in params], index=runs.index)
    table = time_to_solve_table(sweep_rows, runs[~is_auto], learner=None)
    out = []
    for (_, r), p in zip(runs.iterrows(), params):
        rec = p.get("nworld_auto")
        if not isinstance(rec, dict):
            continue
        chosen = [x for x in rec.get("ramp") or [] if isinstance(x, dict) and x.get("nworld") == rec.get("chosen")]
        conc = pd.to_numeric(pd.Series([r["concurrent"] if "concurrent" in r
                                        else results.packing_of(p, default_concurrent=math.nan)["concurrent"]]),
                             errors="coerce").iloc[0]
        t = pd.to_numeric(pd.Series([r.get("time_to_solve_s")]), errors="coerce").iloc[0]
        row = dict(run_id=r["run_id"], gpu=r["gpu"], body=r["body"], commit=r["commit"], seed=r["seed"],
                   auto_nworld=int(r["nworld"]),
                   predicted_s=float(chosen[0].get("predicted_s", math.nan)) if chosen else math.nan,
                   iterations=r["iterations"], time_to_solve_s=float(t), concurrent=conc,
                   best_nworld=pd.NA, best_time_to_solve_s=math.nan, best_min_s=math.nan,
                   best_max_s=math.nan, verdict="", ok=False)
        g = table[(table["gpu"] == r["gpu"]) & (table["body"] == r["body"]) & (table["learner"] == r["learner"])
                  & (table["solve"] == solve_of(p))].dropna(subset=["time_to_solve_s"])
        if g.empty:
            row["verdict"] = "no solved sweep point of this GPU, body, learner and Newton solve"
            out.append(row)
            continue
        b = g.loc[g["time_to_solve_s"].idxmin()]
        lo, hi = float(b["time_to_solve_min_s"]), float(b["time_to_solve_max_s"])
        row.update(best_nworld=int(b["nworld"]), best_time_to_solve_s=float(b["time_to_solve_s"]),
                   best_min_s=lo, best_max_s=hi)
        if task_of(p) != DEFAULT_TASK:
            row["verdict"] = f"another task ({task_of(p)}): not a solve of the task"
        elif r["solved"] != True:  # noqa: E712
            row["verdict"] = "not solved"
        elif t != t:
            row["verdict"] = "solved, but no time to solve recorded"
        elif conc != conc:
            row["verdict"] = "packing not recorded: not known to be a solo time to solve"
        elif conc != 1:
            row["verdict"] = f"packed (concurrent {conc:g}): not a solo time to solve"
        elif t < lo:
            row.update(verdict=f"faster than the best point's fastest seed ({lo:.1f} s)", ok=True)
        elif t <= hi:
            row.update(verdict=f"within the best point's spread ({lo:.1f}–{hi:.1f} s)", ok=True)
        else:
            row["verdict"] = f"slower than the best point's slowest seed ({hi:.1f} s): +{t / hi - 1:.1%}"
        out.append(row)
    return pd.DataFrame(out, columns=cols)

