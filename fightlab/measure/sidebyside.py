"""The learners side by side (notebook 08, bench/side_by_side.sh): fightlab's PPO beside rsl_rl's
OnPolicyRunner on the task, solo on one card, from train rows tagged ``study: side_by_side``
(`TrainConfig.study`). Per body × learner × learner id × nworld: runs, solves, the median time to
solve (unsolved runs count as not solved within their budget, `TrainConfig.time_limit_s`),
iterations, seconds per iteration and its rollout / update split, host reads, peak GPU memory
and the reference checks (`side_by_side_table`); per body the ratio rsl_rl / fightlab of median
times to solve split into its seconds-per-iteration and iterations factors (`differences`). Before the study's rows exist, `speed_table` and
`speed_ratios` read data/results/learner_speed.csv (seconds per iteration only); `door_demo`
trains both learners a few iterations through the same door (the notebook's smoke check)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from fightlab import results
from fightlab.config import DEFAULT_TASK, ConfigError, PPOConfig
from fightlab.measure.learners import learner_id
from fightlab.measure.summary import SOLVE_VERDICTS, physics_backend, reference_verdict, task_of

#: the `study` tag (`--set study=side_by_side`) of the trainings this table reads
STUDY = "side_by_side"

#: the goal: fightlab's median time to solve at least this many times shorter than rsl_rl's best
GOAL_RATIO = 2.0

#: seeds a group needs before it can be a learner's best (the study's ≥ 3 seeds a point)
MIN_SEEDS = 3

TABLE_COLUMNS = ("body", "learner", "learner_id", "nworld", "runs", "solved", "unsolved", "reference_failed",
                 "budget_s", "time_to_solve_s", "time_text", "iterations_to_solve", "iterations_run",
                 "s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "host_reads_per_iter",
                 "peak_gpu_mem_mib", "reference_passed", "seeds")


def study_runs(rows: pd.DataFrame, study: str = STUDY) -> pd.DataFrame:
    """The rows of ``rows`` (data/results/train.csv as `results.read_rows` gives it) of ``study``:
    solo (one job on the GPU), MuJoCo Warp, the task. Adds ``learner`` (params "learner",
    default "fightlab"), ``learner_id``, ``budget_s`` (params time_limit_s; NaN: none),
    ``run_solved`` (a curriculum solve whose reference verdict counts, `summary.SOLVE_VERDICTS`),
    ``checked`` (a curriculum solve: its reference check ran) and ``s_per_iter`` (the median
    iteration's wall time: nworld × num_steps / env_steps_per_s). Raises ConfigError: rows of
    more than one card (compare within a card only)."""
    params = [json.loads(p) if isinstance(p, str) and p else {} for p in rows["params"]]
    keep = [p.get("study") == study and results.packing_of(p, default_concurrent=1)["concurrent"] == 1
            and physics_backend(p) == "gpu" and task_of(p) == DEFAULT_TASK for p in params]
    out = rows.loc[keep].copy()
    params = [p for p, k in zip(params, keep) if k]
    if out["gpu"].nunique() > 1:
        raise ConfigError(f"side_by_side: rows of one card only, got {sorted(out['gpu'].unique())}; "
                          "pass rows[rows.gpu == <card>]")
    verdict = [reference_verdict(x, p) for x, p in zip(out["reference_passed"], params)]
    curriculum = (out["solved"] == True).to_numpy() | np.array([v in ("passed", "failed") for v in verdict],  # noqa: E712
                                                              dtype=bool)
    steps = [int((p.get("ppo") or {}).get("num_steps", PPOConfig().num_steps)) for p in params]
    return out.assign(
        learner=[str(p.get("learner") or "fightlab") for p in params], learner_id=[learner_id(p) for p in params],
        budget_s=[float(p["time_limit_s"]) if p.get("time_limit_s") else math.nan for p in params],
        run_solved=curriculum & np.isin(verdict, SOLVE_VERDICTS), checked=np.isin(verdict, ("passed", "failed")),
        s_per_iter=out["nworld"].to_numpy(float) * steps / pd.to_numeric(out["env_steps_per_s"]).to_numpy(float))


def median_within_budget(values, solved) -> float:
    """The median of ``values`` with every unsolved run counted as not solved (+inf): finite only
    when more than half the runs solved, else NaN ("> budget")."""
    v = np.where(np.asarray(solved, dtype=bool), np.asarray(values, dtype=float), np.inf)
    m = float(np.median(v)) if len(v) else math.inf
    return m if math.isfinite(m) else math.nan


def side_by_side_table(rows: pd.DataFrame, study: str = STUDY) -> pd.DataFrame:
    """One row per body × learner × learner id × nworld of :func:`study_runs` (one card):
    ``runs``, ``solved``, ``unsolved`` (within the budget, or its reference check failed),
    ``reference_failed``, ``budget_s`` (the largest time_limit_s; NaN without one),
    ``time_to_solve_s`` and ``iterations_to_solve`` (:func:`median_within_budget`; NaN where at
    most half solved, ``time_text`` then says "> budget"), ``iterations_run`` (median over all
    runs), medians of ``s_per_iter`` and its ``rollout`` / ``update`` split and of
    ``host_reads_per_iter``, the largest ``peak_gpu_mem_mib`` (NaN: unrecorded),
    ``reference_passed`` ("k/m" of the solves' checks) and ``seeds``. Sorted by body, learner,
    nworld; empty (these columns) without rows of the study."""
    runs = study_runs(rows, study)
    out = []
    for (body, learner, lid, nworld), g in runs.groupby(["body", "learner", "learner_id", "nworld"], sort=True):
        solved = g["run_solved"].to_numpy(bool)
        tts = median_within_budget(pd.to_numeric(g["time_to_solve_s"]), solved)
        budget = float(g["budget_s"].max()) if g["budget_s"].notna().any() else math.nan
        med = lambda c: float(pd.to_numeric(g[c]).median())  # noqa: E731
        out.append(dict(
            body=body, learner=learner, learner_id=lid, nworld=int(nworld), runs=len(g), solved=int(solved.sum()),
            unsolved=int((~solved).sum()), reference_failed=int((g["checked"] & ~g["run_solved"]).sum()),
            budget_s=budget, time_to_solve_s=tts,
            time_text=f"{tts:.1f} s" if math.isfinite(tts) else (f"> {budget:.0f} s" if math.isfinite(budget)
                                                                 else "> budget"),
            iterations_to_solve=median_within_budget(pd.to_numeric(g["iterations"]), solved),
            iterations_run=med("iterations"), s_per_iter=med("s_per_iter"),
            rollout_s_per_iter=med("rollout_s_per_iter"), update_s_per_iter=med("update_s_per_iter"),
            host_reads_per_iter=med("host_reads_per_iter"),
            peak_gpu_mem_mib=float(pd.to_numeric(g["peak_gpu_mem_mib"]).max()),
            reference_passed=f"{int((g['checked'] & g['run_solved']).sum())}/{int(g['checked'].sum())}",
            seeds=", ".join(str(s) for s in sorted(g["seed"]))))
    return pd.DataFrame(out, columns=list(TABLE_COLUMNS))


def _best(g: pd.DataFrame) -> pd.Series:
    """The group of ``g`` with the shortest median time to solve among those of at least
    :data:`MIN_SEEDS` runs (fewer only when no group has them); groups with at most half solved
    after every group that solved, the longest budget last."""
    return g.assign(_few=g["runs"] < MIN_SEEDS, _k=g["time_to_solve_s"].fillna(np.inf),
                    _b=-g["budget_s"].fillna(np.inf)).sort_values(["_few", "_k", "_b", "nworld"]).iloc[0]


def differences(table: pd.DataFrame) -> pd.DataFrame:
    """Per body of a :func:`side_by_side_table` holding both learners: fightlab's best group and
    rsl_rl's best (their nworld), ``time_ratio`` = rsl_rl / fightlab median time to solve,
    ``s_per_iter_ratio`` × ``iterations_ratio`` (medians; their product approximates the time
    ratio), ``dominant`` (the factor farther from 1: "seconds per iteration" or "iterations"),
    ``lower_bound`` (rsl_rl did not solve in more than half its runs: its budget and iterations
    run stand in, so both ratios are at least these), each side's ``runs`` (a best of fewer than
    :data:`MIN_SEEDS` is preliminary) and ``goal_met`` (time ratio ≥
    :data:`GOAL_RATIO`; None where fightlab has no median). A body without both learners is left
    out."""
    cols = ["body", "fightlab_nworld", "rsl_rl_nworld", "fightlab_runs", "rsl_rl_runs", "fightlab_time_s",
            "rsl_rl_time_s", "time_ratio",
            "s_per_iter_ratio", "iterations_ratio", "dominant", "lower_bound", "goal_met"]
    out = []
    for body, g in table.groupby("body", sort=True):
        if not {"fightlab", "rsl_rl"} <= set(g["learner"]):
            continue
        f, r = _best(g[g["learner"] == "fightlab"]), _best(g[g["learner"] == "rsl_rl"])
        bound = not math.isfinite(r["time_to_solve_s"])
        r_time = r["budget_s"] if bound else r["time_to_solve_s"]
        r_its = r["iterations_run"] if bound else r["iterations_to_solve"]
        time_ratio = r_time / f["time_to_solve_s"]
        sit, its = r["s_per_iter"] / f["s_per_iter"], r_its / f["iterations_to_solve"]
        dominant = (None if not (math.isfinite(sit) and math.isfinite(its)) else
                    "seconds per iteration" if abs(math.log(sit)) >= abs(math.log(its)) else "iterations")
        out.append(dict(body=body, fightlab_nworld=int(f["nworld"]), rsl_rl_nworld=int(r["nworld"]),
                        fightlab_runs=int(f["runs"]), rsl_rl_runs=int(r["runs"]),
                        fightlab_time_s=f["time_to_solve_s"], rsl_rl_time_s=r_time, time_ratio=time_ratio,
                        s_per_iter_ratio=sit, iterations_ratio=its, dominant=dominant, lower_bound=bound,
                        goal_met=bool(time_ratio >= GOAL_RATIO) if math.isfinite(time_ratio) else None))
    return pd.DataFrame(out, columns=cols)


def missing_lines(table: pd.DataFrame, speed: pd.DataFrame | None = None, gpu: str | None = None) -> list[str]:
    """A line per body of a :func:`side_by_side_table` that has one learner's trainings only
    (which learner has none yet, and the command that makes them), and, with ``speed`` (the
    learner_speed rows) and ``gpu`` (the table's card), per body whose rsl_rl runs lack the best
    world count of its sweep (:func:`best_nworld`) or have fewer than :data:`MIN_SEEDS` runs there."""
    out = []
    for body, g in table.groupby("body", sort=True):
        for who in sorted({"fightlab", "rsl_rl"} - set(g["learner"])):
            out.append(f"{body}: no {who} side-by-side training on this card yet, so no ratio "
                       f"(bash bench/side_by_side.sh study {body} {who})")
        best = best_nworld(speed, body, gpu) if speed is not None and gpu else None
        r = g[(g["learner"] == "rsl_rl") & (g["nworld"] == best)]
        if best is not None and "rsl_rl" in set(g["learner"]) and int(r["runs"].sum()) < MIN_SEEDS:
            out.append(f"{body}: rsl_rl has {int(r['runs'].sum())} of {MIN_SEEDS} runs at its best world count "
                       f"({best}, from its sweep) so far (RSL_NWORLD=best bash bench/side_by_side.sh study "
                       f"{body} rsl_rl)")
    return out


def difference_text(d: pd.Series) -> str:
    """One line for a :func:`differences` row: the ratio, its two factors, which dominates, the goal."""
    if not math.isfinite(d["fightlab_time_s"]):
        return f"{d['body']}: fightlab solved at most half its runs: no median time, no ratio"
    ge = "≥ " if d["lower_bound"] else ""
    rsl = (f"rsl_rl unsolved within {d['rsl_rl_time_s']:.0f} s in most runs" if d["lower_bound"]
           else f"rsl_rl {d['rsl_rl_time_s']:.1f} s")
    if not math.isfinite(d["time_ratio"]):
        return f"{d['body']}: fightlab {d['fightlab_time_s']:.1f} s, {rsl} (no budget recorded): no ratio"
    goal = "meets" if d["goal_met"] else "misses"
    few = [f"{who} {int(d[who + '_runs'])} run{'s' if int(d[who + '_runs']) > 1 else ''}"
           for who in ("fightlab", "rsl_rl") if int(d[who + "_runs"]) < MIN_SEEDS]
    pre = f" (preliminary: {', '.join(few)}, fewer than {MIN_SEEDS})" if few else ""
    return (f"{d['body']}: fightlab {d['fightlab_time_s']:.1f} s at {d['fightlab_nworld']} worlds, {rsl} at "
            f"{d['rsl_rl_nworld']}{pre}: ratio {ge}{d['time_ratio']:.2f} = seconds per iteration "
            f"{d['s_per_iter_ratio']:.2f} × iterations {ge}{d['iterations_ratio']:.2f}; "
            f"the larger factor: {d['dominant']}; it {goal} the goal "
            f"(≥ {GOAL_RATIO:g}×)")


def study_cards(rows: pd.DataFrame, study: str = STUDY) -> list[str]:
    """The GPUs of ``rows`` holding trainings of ``study``, most rows first (ties: name order)."""
    tagged = rows[np.array([json.loads(p or "{}").get("study") == study for p in rows["params"]], dtype=bool)]
    counts = tagged.groupby("gpu").size()
    return sorted(counts.index, key=lambda g: (-int(counts[g]), str(g)))


def speed_table(speed: pd.DataFrame) -> pd.DataFrame:
    """Medians per gpu × body × learner × nworld of the `learner_speed` rows of that study
    (params study "learner_speed": short solo trainings of fixed length, bench/learner_speed.sh):
    ``s_per_iter``, ``rollout_s_per_iter``, ``update_s_per_iter``, ``host_reads_per_iter``."""
    cols = ["s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "host_reads_per_iter"]
    keys = ["gpu", "body", "learner", "nworld"]
    if speed.empty:
        return pd.DataFrame(columns=keys + cols)
    s = speed.loc[np.array([json.loads(p or "{}").get("study") == "learner_speed" for p in speed["params"]], dtype=bool)]
    s = s.assign(learner=["rsl_rl" if x == True else "fightlab" for x in s["rsl_rl"]])  # noqa: E712
    return s.groupby(keys, sort=True)[cols].median().reset_index()


def speed_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Per gpu × body × nworld of a :func:`speed_table` holding both learners: rsl_rl / fightlab
    of seconds per iteration, rollout and update seconds, and host reads per iteration."""
    out = []
    for (gpu, body, nworld), g in table.groupby(["gpu", "body", "nworld"], sort=True):
        by = g.set_index("learner")
        if not {"fightlab", "rsl_rl"} <= set(by.index):
            continue
        f, r = by.loc["fightlab"], by.loc["rsl_rl"]
        out.append(dict(gpu=gpu, body=body, nworld=int(nworld), **{
            f"{c}_ratio": float(r[c] / f[c]) for c in ("s_per_iter", "rollout_s_per_iter", "update_s_per_iter",
                                                       "host_reads_per_iter")}))
    return pd.DataFrame(out, columns=["gpu", "body", "nworld", "s_per_iter_ratio", "rollout_s_per_iter_ratio",
                                      "update_s_per_iter_ratio", "host_reads_per_iter_ratio"])


def door_demo(body: str, device: str, nworld: int, iterations: int, run_root) -> pd.DataFrame:
    """Train each learner (`config.LEARNERS`: fightlab's PPO, rsl_rl's runner) ``iterations``
    iterations on ``nworld`` worlds through the same door (`run.runner.Trainer` →
    `envs.task.StanceTask`), each into ``run_root/<learner>`` (never data/). Returns one row per
    learner: iterations, medians of s_per_iter (wall), rollout / update seconds, host reads per
    iteration, the stage reached and the run folder. A check of the code path, not a measurement."""
    from pathlib import Path

    from fightlab.config import LEARNERS, TrainConfig
    from fightlab.measure.report import finish_run
    from fightlab.run.launch import plan_run
    from fightlab.run.runner import Trainer

    out = []
    for learner in LEARNERS:
        cfg = TrainConfig(body=body, nworld=nworld, device=device, max_iterations=iterations, learner=learner,
                          logger="none", checkpoint_every=0, run_dir=str(Path(run_root) / learner))
        with Trainer(plan_run(cfg), progress=False) as trainer:
            res = trainer.train()
            finish_run(trainer, res)
        rows = pd.DataFrame(res["rows"])
        out.append(dict(learner=learner, iterations=len(rows), s_per_iter=float(rows["wall_s"].median()),
                        rollout_s_per_iter=float(rows["rollout_s"].median()),
                        update_s_per_iter=float(rows["update_s"].median()),
                        host_reads_per_iter=float(rows["host_reads"].median()), stage=int(rows["stage"].max()),
                        run_dir=str(trainer.run_dir)))
    return pd.DataFrame(out)


#: rsl_rl's budget as a multiple of fightlab's median time to solve (bench/side_by_side.sh)
BUDGET_FACTOR = 10.0


def fightlab_budget_s(rows: pd.DataFrame, body: str, nworld: int, gpu: str,
                      factor: float = BUDGET_FACTOR) -> float:
    """``factor`` × fightlab's median time to solve of ``body`` at ``nworld`` worlds on ``gpu``
    (:func:`side_by_side_table` of ``rows``: the study's solo trainings), the time limit of
    rsl_rl's runs; NaN where fightlab solved at most half its runs or has none there."""
    table = side_by_side_table(rows[rows["gpu"] == gpu])
    mine = table[(table["body"] == body) & (table["learner"] == "fightlab") & (table["nworld"] == nworld)]
    if mine.empty:
        return math.nan
    return float(factor * mine["time_to_solve_s"].min())


#: the `learner_speed` rows of rsl_rl's world-count sweep (bench/side_by_side.sh sweep)
SWEEP_STUDY = "rsl_rl_nworld_sweep"


def best_nworld(speed: pd.DataFrame, body: str, gpu: str) -> int | None:
    """rsl_rl's own best world count for ``body`` on ``gpu`` from its sweep (:data:`SWEEP_STUDY`
    rows of data/results/learner_speed.csv): the most samples per second, nworld / s_per_iter
    (each iteration is nworld × the task's policy steps; the newest row per nworld). None where
    the sweep has no row there. The sweep is short (stage 0): throughput, not time to solve,
    decides, as mjlab trains at the world count its GPU runs fastest per sample."""
    if speed.empty:
        return None
    s = speed[(speed["body"] == body) & (speed["gpu"] == gpu)]
    s = s[np.array([json.loads(p or "{}").get("study") == SWEEP_STUDY for p in s["params"]], dtype=bool)]
    s = s[s["s_per_iter"] > 0].sort_values("time").groupby("nworld").tail(1)
    return None if s.empty else int(s.loc[(s["nworld"] / s["s_per_iter"]).idxmax(), "nworld"])


def speed_metrics(rows: list[dict], steady: list[dict]) -> dict:
    """A ``learner_speed`` row's measurements from a training's rows.csv records (`rows`, every
    iteration, as csv.DictReader gives them; `steady`, those past the warm-up): iterations, the
    median wall / rollout / update seconds and host reads per iteration of `steady`; the stage
    reached, overflow and NaN resets over `rows`. Raises statistics.StatisticsError: `steady` empty."""
    import statistics

    med = lambda k: statistics.median(float(r[k]) for r in steady)  # noqa: E731
    return dict(iterations=len(steady), s_per_iter=med("wall_s"), rollout_s_per_iter=med("rollout_s"),
                update_s_per_iter=med("update_s"), host_reads_per_iter=med("host_reads"),
                stage_reached=max(int(r["stage"]) for r in rows),
                overflow_count=sum(int(float(r["overflow_count"])) for r in rows),
                nan_resets=sum(int(float(r["nan_resets"])) for r in rows))
