"""Summaries of the published train rows (`published_runs`): the solve summary that never pools
across `SUMMARY_KEYS`, the headline per body, the original study beside it, the factor
comparison and the throughput of packed runs."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from fightlab import bodies, meta, results
from fightlab.config import (DEFAULT_TASK, REFERENCE_SOLVER, TASK_FIELDS, ConfigError, EnvConfig, PPOConfig,
                             TrainConfig, canonical_params, task_id)
from fightlab.measure.learners import MUJOCO_WARP, digest, learner_changes, learner_id, solve_of
from fightlab.paths import REPO_ROOT


#: the original study's times to solve [s] (its own bodies and task details):
#: {body: {machine: seconds}} (rtx5090: one RTX 5090; ec2_96vcpu: a 96-vCPU EC2 spot machine);
#: a comparison of orders of magnitude, not a race
ORIGINAL_STUDY_S: dict[str, dict[str, float]] = {
    "simple": {"rtx5090": 185.0, "ec2_96vcpu": 404.0},
    "muscular-fast": {"rtx5090": 377.0, "ec2_96vcpu": 714.0},
}


@functools.lru_cache(maxsize=None)
def _sparse_tree(body: str) -> bool | None:
    """True when ``body`` has a tree over ``types.M_BLOCK_DENSE_MAX`` (64 DOF): its mass matrix takes
    the sparse path (training's tree factor replaces it). None for an unknown body."""
    from mujoco_warp._src.types import M_BLOCK_DENSE_MAX

    if body not in bodies.BODIES:
        return None
    m = bodies.build(body)
    return bool(m.nv) and int(np.bincount(m.dof_treeid).max()) > M_BLOCK_DENSE_MAX


def factor_setup(body: str, params: dict) -> str:
    """How a training run factored the mass matrix: for bodies with a tree over 64 DOF "tree
    factor, <params tree_factor_variant, absent: global>" when params ``tree_factor`` is true,
    else "stock factor"; "dense" for the others; "unknown body"; "cpu backend" (params
    ``backend`` "cpu"); " (mixed segments)" appended for ``params.mixed_segments``."""
    sparse = _sparse_tree(body)
    if sparse is None:
        return "unknown body"
    mixed = " (mixed segments)" if params.get("mixed_segments") else ""
    if params.get("backend") == "cpu" or not sparse:
        return ("cpu backend" if params.get("backend") == "cpu" else "dense") + mixed
    if params.get("tree_factor") is not True:
        return "stock factor" + mixed
    return f"tree factor, {params.get('tree_factor_variant') or 'global'}" + mixed


def published_runs(root: Path | None = None, stage_studies: bool = False) -> pd.DataFrame:
    """data/results/train.csv with columns from params: `concurrent` (jobs at once on the run's
    GPU; NaN where unrecorded), `mps` (bool), `gpu_jobs` (jobs at once on the host; 1 where
    unrecorded) (:func:`fightlab.results.packing_of`), `shared_gpu` / `host_jobs` (their older
    names), `setup` (:func:`factor_setup`), `code` (:func:`code_of`), `config` (:func:`config_id`),
    `task` (:func:`task_of`), `learner` (:func:`learner_id`), `backend` (:func:`physics_backend`),
    `reference` (:func:`reference_verdict`) and `curriculum_solved` (the row's own `solved`).
    `solved` is True only for a curriculum solve whose verdict is in :data:`SOLVE_VERDICTS`:
    every summary, the headline, Figure 2, `--nworld auto` and the survey read solves from here.

    Runs stopped after a curriculum stage (`stage_study`: `TrainConfig.stop_after_stage`) cannot
    solve; they are left out unless ``stage_studies`` (the learner-study tables ask for them)."""
    df = results.read_rows("train", Path(root) if root else REPO_ROOT)
    params = [json.loads(p) if p else {} for p in df["params"]]
    packs = [results.packing_of(p, default_concurrent=float("nan")) for p in params]
    for k in ("concurrent", "mps", "gpu_jobs"):
        df[k] = [x[k] for x in packs]
    df["shared_gpu"] = df["concurrent"]
    df["host_jobs"] = df["gpu_jobs"]
    df["setup"] = [factor_setup(b, p) for b, p in zip(df["body"], params)]
    df["config"] = [config_id(p) for p in params]
    df["task"] = [task_of(p) for p in params]
    df["learner"] = [learner_id(p) for p in params]
    df["code"] = [code_of(c) for c in df["commit"]]
    df["backend"] = [physics_backend(p) for p in params]
    df["reference"] = [reference_verdict(x, p) for x, p in zip(df["reference_passed"], params)]
    df["curriculum_solved"] = df["solved"] == True  # noqa: E712
    df["solved"] = df["curriculum_solved"] & df["reference"].isin(SOLVE_VERDICTS)
    df["stage_study"] = pd.Series([p.get("stop_after_stage") is not None for p in params], index=df.index, dtype=bool)
    return df if stage_studies else df.loc[~df["stage_study"]].reset_index(drop=True)


#: `published_runs`' `reference` column (`fightlab.run.reference`): the check passed / failed;
#: no check, trained in the reference physics itself; no check in other physics (never a solve)
REFERENCE_VERDICTS = ("passed", "failed", "trained in reference", "unchecked")

#: the verdicts whose solves count (`published_runs` keeps `solved` True only for these)
SOLVE_VERDICTS = ("passed", "trained in reference")


def reference_verdict(passed, params: dict) -> str:
    """A train row's :data:`REFERENCE_VERDICTS` entry from its `reference_passed` cell (as
    written or read back: True, "True", 1.0; empty or NaN: no check) and its params' env solver."""
    if isinstance(passed, str):
        passed = {"true": True, "false": False}.get(passed.strip().lower())
    elif isinstance(passed, (int, float, np.bool_)) and not (isinstance(passed, float) and math.isnan(passed)):
        passed = bool(passed)
    else:
        passed = passed if isinstance(passed, bool) else None
    if passed is not None:
        return "passed" if passed else "failed"
    env = params.get("env") or {}
    same = all(env.get(k, v) == v for k, v in REFERENCE_SOLVER.items())
    return "trained in reference" if same else "unchecked"


def physics_backend(params: dict) -> str:
    """A row's physics backend: "gpu" (MuJoCo Warp, any device; the default) or "cpu" (MuJoCo's
    C engine), from its last segment's record, else params.backend."""
    seg = (params.get("segments") or [{}])[-1]
    return str(seg.get("backend") or params.get("backend") or "gpu")


def cpu_baseline_runs(runs: pd.DataFrame, log=None) -> pd.DataFrame:
    """The CPU baseline's train rows: CPU-backend rows whose policy ran on the CPU too (as on the
    original's GPU-less machine); those with the policy on a GPU are left out, counted through
    ``log`` (a callable taking one line) when given."""
    cpu = runs[runs["backend"] == "cpu"]
    on_gpu = pd.Series([str(json.loads(p).get("policy_device") or "").startswith("cuda") if p else False
                        for p in cpu["params"]], index=cpu.index, dtype=bool)
    if on_gpu.any() and log is not None:
        log(f"{int(on_gpu.sum())} CPU-backend train row(s) with the policy on a GPU left out "
            "(a CPU + GPU machine: not the CPU baseline, and not priced)")
    return cpu[~on_gpu]


def cpu_headline(runs: pd.DataFrame, log=None) -> pd.DataFrame:
    """The CPU baseline's headline per body: :func:`headline` with ``backend="cpu"`` over
    :func:`cpu_baseline_runs` (its index: SUMMARY_KEYS). Empty without a CPU-baseline run."""
    base = cpu_baseline_runs(runs, log)
    return headline(solve_summary(base), backend="cpu") if not base.empty else pd.DataFrame()


def task_of(params: dict) -> str:
    """A train row's task id (:func:`fightlab.config.task_id`): params.task, else from the Fixed
    fields its params store (the others at their defaults), or ``"unknown"`` when a stored value
    does not fit its field (never a solve of the task)."""
    if params.get("task"):
        return str(params["task"])
    parts = {"": {}, "env": {}, "ppo": {}}
    for name in TASK_FIELDS:
        part, key = name.split(".", 1) if "." in name else ("", name)
        src = params.get(part) or {} if part else params
        if isinstance(src, dict) and key in src:
            v = src[key]
            parts[part][key] = tuple(v) if isinstance(v, list) else v
    try:
        cfg = TrainConfig(**parts[""], env=dataclasses.replace(EnvConfig(), **parts["env"]),
                          ppo=dataclasses.replace(PPOConfig(), **parts["ppo"]))
    except (TypeError, ValueError):
        return "unknown"
    return task_id(cfg)


#: params that do not change what a run measures (where it ran, its seed, how it was launched)
#: and so do not split groups; the factor path is the separate `setup` key
VOLATILE_PARAMS = ("seed", "run_dir", "device", "resume", "segment_s", "checkpoint_every",
                   "max_iterations", "time_limit_s", "study", "shared_gpu", "shared_gpu_note", "host_jobs", "host_jobs_note",
                   "concurrent", "mps", "gpu_jobs", "tree_factor", "tree_factor_variant", "segments",
                   "task", "nworld_auto", "reference_nworld", "reference_eval", "physics_engine",
                   "solver_loop", "stop_after_stage")


def config_id(params: dict) -> str:
    """8 hex characters identifying a run's configuration: a hash of its params without
    :data:`VOLATILE_PARAMS` (seeds pool; a changed reward weight, learning rate or nworld does
    not; the factor path and code are :data:`SUMMARY_KEYS` of their own). The Newton solve's
    code counts where it is not MuJoCo Warp's (`learners.solve_of`: its loops pool, the single
    launch is a group of its own; ids from before the single launch keep their values)."""
    kept = {k: v for k, v in canonical_params(params).items() if k not in VOLATILE_PARAMS}
    if solve_of(params) != MUJOCO_WARP:
        kept["solve"] = solve_of(params)
    return digest(kept)


#: solve_summary's grouping: rows of different bodies, factor paths, training code (``code``:
#: `fightlab.meta.training_code_id` of the row's commit, else the commit itself), GPUs, world
#: counts, configurations or tasks are never pooled
SUMMARY_KEYS = ("body", "setup", "code", "gpu", "nworld", "config", "task")


def code_of(commit) -> str:
    """A train row's ``code`` key: `fightlab.meta.training_code_id` of its commit, else
    ``"commit <commit>"`` (never pooled: no git history, a dirty or unknown commit)."""
    return meta.training_code_id(str(commit)) or f"commit {commit}"


def with_code(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``code`` column (:func:`code_of` of each row's commit) where it has none."""
    return df if "code" in df.columns else df.assign(code=[code_of(c) for c in df["commit"]])


def commits_by_time(g: pd.DataFrame) -> pd.Series:
    """The commits of rows ``g``, oldest run first (row order without a ``time`` column)."""
    if "time" in g:
        g = g.assign(_w=pd.to_datetime(g["time"], utc=True, format="ISO8601", errors="coerce")).sort_values(
            "_w", kind="stable")
    return g["commit"].astype(str)


def commits_in(g: pd.DataFrame, sep: str = " ") -> str:
    """The commits of rows ``g``, oldest run first, once each, joined by ``sep``."""
    return sep.join(dict.fromkeys(commits_by_time(g)))


def _solve_times(runs: pd.DataFrame) -> dict:
    """Median / min / max time to solve (s) and median iterations of ``runs`` (NaN when empty):
    the columns :func:`solve_summary` and :func:`factor_comparison` share."""
    t = runs["time_to_solve_s"]
    return dict(time_to_solve_median_s=t.median(), time_to_solve_min_s=t.min(),
                time_to_solve_max_s=t.max(), iterations_median=runs["iterations"].median())


def solve_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per :data:`SUMMARY_KEYS` group of :func:`published_runs` (never pooled into one median),
    over the solved runs that had the GPU to themselves (concurrent == 1): n_solo, ``commits``
    (oldest first), ``commit`` (the newest solo run's, else the newest run's), median / min / max
    time to solve (s) and iterations, median compile seconds, env steps/s, rollout and update
    seconds per iteration, gpu_jobs (the most on the host; also as host_jobs), latest (the newest
    solo run's time, else any run's) and ``learner_changes`` of the group's first row. Packed or
    unsolved runs are only counted (n_shared, n_unsolved): see :func:`packed_throughput`.

    Returns a DataFrame indexed by :data:`SUMMARY_KEYS`, sorted by body and newest run last.
    """
    df = with_code(df)
    rows = []
    for keys, g in df.groupby(list(SUMMARY_KEYS), sort=False):
        solved = g["solved"] == True  # noqa: E712
        alone = g["concurrent"] == 1
        solo = g[solved & alone]
        rows.append(dict(zip(SUMMARY_KEYS, keys), commits=commits_in(g),
                         commit=commits_by_time(solo if len(solo) else g).iloc[-1], n_solo=len(solo),
                         n_shared=int((~alone).sum()), n_unsolved=int((~solved & alone).sum()), **_solve_times(solo),
                         iterations_min=solo["iterations"].min(), iterations_max=solo["iterations"].max(),
                         compile_s_median=solo["compile_s"].median(),
                         env_steps_per_s_median=solo["env_steps_per_s"].median(),
                         rollout_s_per_iter=solo["rollout_s_per_iter"].median(),
                         update_s_per_iter=solo["update_s_per_iter"].median(),
                         gpu_jobs=solo["gpu_jobs"].max() if len(solo) else float("nan"),
                         latest=solo["time"].max() if len(solo) else g["time"].max(),
                         learner_changes=learner_changes(json.loads(g["params"].iloc[0] or "{}"), keys[0])))
    if not rows:
        return pd.DataFrame(columns=[*SUMMARY_KEYS, "n_solo"]).set_index(list(SUMMARY_KEYS))
    out = pd.DataFrame(rows).sort_values(["body", "latest"], kind="stable")
    out["gpu_jobs"] = out["gpu_jobs"].astype("Int64")
    out["host_jobs"] = out["gpu_jobs"]  # the older name
    return out.set_index(list(SUMMARY_KEYS))


def headline(summary: pd.DataFrame, backend: str = "gpu") -> pd.DataFrame:
    """The headline group per body of :func:`solve_summary`: the most solo solved seeds, then the
    newest run; only groups of :data:`DEFAULT_TASK`. ``backend="gpu"``: MuJoCo Warp groups of
    today's learner and training physics (``learner_changes`` "defaults"); ``"cpu"``: the
    CPU-backend groups (`gpu` naming a CPU, `fightlab.meta.is_cpu_label`). Returns the chosen
    rows (same index); ConfigError for another backend."""
    if backend not in ("gpu", "cpu"):
        raise ConfigError(f"headline backend must be 'gpu' or 'cpu', got {backend!r}")
    s = summary[summary["n_solo"] > 0]
    s = s[s.index.get_level_values("task") == DEFAULT_TASK]
    s = s[[meta.is_cpu_label(g) == (backend == "cpu") for g in s.index.get_level_values("gpu")]]
    if backend == "gpu" and "learner_changes" in s:
        s = s[s["learner_changes"] == "defaults"]
    if s.empty:
        return s
    order = s.reset_index().sort_values(["body", "n_solo", "latest"], ascending=[True, False, False],
                                        kind="stable")
    return order.groupby("body", sort=False).head(1).set_index(list(SUMMARY_KEYS))


def no_headline_note(body: str, train_rows: pd.DataFrame) -> str:
    """Why ``body`` has no headline in ``train_rows`` (:func:`published_runs`)."""
    r = train_rows
    if not r.empty:
        keep = (r["body"] == body) & (r["solved"] == True) & (r["concurrent"] == 1)  # noqa: E712
        for col, want in (("task", DEFAULT_TASK), ("backend", "gpu")):  # where the table has them
            if col in r:
                keep &= r[col] == want
        r = r[keep]
    if r.empty:
        return f"no committed solo solved run of {body} in data/results/train.csv"
    other = sum(learner_changes(json.loads(p or "{}"), body) != "defaults" for p in r["params"])
    return (f"no committed solo solved run of {body}'s default learner in data/results/train.csv "
            f"({other} solo solves of other learners or Newton solves than today's defaults)")


def original_comparison(summary: pd.DataFrame) -> pd.DataFrame:
    """Headline median time to solve per body (:func:`headline`) beside :data:`ORIGINAL_STUDY_S`
    (``original_<machine>_s``) and original / ours (``<machine>_over_ours``; above 1: ours faster)."""
    rows = []
    for keys, r in headline(summary).iterrows():
        row = dict(zip(SUMMARY_KEYS, keys), n_solo=int(r["n_solo"]),
                   time_to_solve_median_s=r["time_to_solve_median_s"])
        for machine, s in ORIGINAL_STUDY_S.get(row["body"], {}).items():
            row[f"original_{machine}_s"] = s
            row[f"{machine}_over_ours"] = s / r["time_to_solve_median_s"]
        rows.append(row)
    return pd.DataFrame(rows)


#: the sparse-tree setups compared by :func:`factor_comparison`, the reference first
FACTOR_SETUPS = ("stock factor", "tree factor, global", "tree factor, shared")


def factor_comparison(df: pd.DataFrame, body: str = "muscular-fast") -> pd.DataFrame:
    """Time to solve ``body`` (one whose tree takes the sparse path) per setup of
    :data:`FACTOR_SETUPS` over :func:`published_runs`' solo solved runs of the task: the stock
    factor vs fightlab's tree factor. Unlike :func:`solve_summary` it pools commits (listed in
    ``commits``: kernel-off and kernel-on seeds rarely share one), never GPUs, world counts or
    configs, and takes the newest run per (setup, seed). The (gpu, nworld, config) group compared
    has a stock and a tree-factor run, else a stock run, else the most setups, then runs (ties:
    the first in the file).

    Returns a DataFrame indexed by ``setup``: n, seeds, commits, gpu, nworld, config, host_jobs,
    median / min / max time to solve (s), median iterations, median rollout / update / total
    seconds per iteration, ``stock_over_this`` and ``stock_over_this_per_iter`` (stock's / this
    setup's; above 1: faster than stock); empty without a solo solved run.
    Raises ValueError: ``body`` is not a fightlab body or has no tree over 64 DOF.
    """
    sparse = _sparse_tree(body)
    if sparse is None:
        raise ValueError(f"factor_comparison: unknown body {body!r}; bodies: {sorted(bodies.BODIES)}")
    if not sparse:
        have = [b for b in bodies.BODIES if _sparse_tree(b)]
        raise ValueError(f"factor_comparison: body {body!r} has no tree over 64 DOF, so no factor "
                         f"to compare; bodies that have one: {have}")
    key = ["gpu", "nworld", "config"]
    runs = df[(df["body"] == body) & (df["solved"] == True) & (df["concurrent"] == 1)  # noqa: E712
              & df["setup"].isin(FACTOR_SETUPS) & (df["task"] == DEFAULT_TASK)]
    if runs.empty:
        return pd.DataFrame(columns=["n"]).rename_axis("setup")
    when = pd.to_datetime(runs["time"], utc=True, format="ISO8601")
    runs = runs.assign(_when=when).sort_values("_when", kind="stable").drop_duplicates(
        ["setup", "seed", *key], keep="last").drop(columns="_when").sort_index()
    rank = runs.groupby(key, sort=False)["setup"].agg(
        has_stock=lambda s: bool((s == FACTOR_SETUPS[0]).any()), n_setups="nunique", n="size")
    rank["comparable"] = rank["has_stock"] & (rank["n_setups"] >= 2)
    group = rank.sort_values(["comparable", "has_stock", "n_setups", "n"], ascending=False,
                             kind="stable").index[0]
    runs = runs[(runs[key] == pd.Series(group, index=key)).all(axis=1)]
    rows = []
    for setup in FACTOR_SETUPS:
        g = runs[runs["setup"] == setup].sort_values("seed")
        if g.empty:
            continue
        per_it = g["rollout_s_per_iter"] + g["update_s_per_iter"]
        host_jobs = pd.to_numeric(g["host_jobs"], errors="coerce").max()
        rows.append(dict(setup=setup, n=len(g), seeds=" ".join(str(s) for s in g["seed"]),
                         commits=" ".join(dict.fromkeys(g["commit"])), gpu=group[0],
                         nworld=int(group[1]), config=group[2],
                         host_jobs=int(host_jobs) if pd.notna(host_jobs) else pd.NA,
                         **_solve_times(g), rollout_s_per_iter=g["rollout_s_per_iter"].median(),
                         update_s_per_iter=g["update_s_per_iter"].median(),
                         s_per_iter=per_it.median()))
    out = pd.DataFrame(rows).set_index("setup")
    if FACTOR_SETUPS[0] in out.index:
        ref = out.loc[FACTOR_SETUPS[0]]
        out["stock_over_this"] = ref["time_to_solve_median_s"] / out["time_to_solve_median_s"]
        out["stock_over_this_per_iter"] = ref["s_per_iter"] / out["s_per_iter"]
    return out


#: packed_throughput's grouping: what a run measured (SUMMARY_KEYS) and how it was packed
PACKING_KEYS = (*SUMMARY_KEYS, "concurrent", "mps")


def run_wall_s(df: pd.DataFrame) -> pd.Series:
    """Seconds each train row's run held its GPU slot: ``time_to_solve_s`` if solved, else iterations
    × (rollout + update s per iteration), plus ``compile_s``; NaN where a column is missing."""
    per_iter = df["iterations"] * (df["rollout_s_per_iter"] + df["update_s_per_iter"])
    solved = df["solved"] == True  # noqa: E712
    return df["time_to_solve_s"].where(solved, per_iter) + df["compile_s"].fillna(0.0)


def packed_throughput(df: pd.DataFrame, price_per_gpu_hour: float | None = None) -> pd.DataFrame:
    """Solves per GPU-hour and cost per solve of every packing (:data:`PACKING_KEYS`) of
    :func:`published_runs`. K runs packed on one GPU share its wall clock, so a run of wall time
    ``w`` (:func:`run_wall_s`) costs ``w / K`` GPU-seconds (``K = concurrent``). Per group:

        gpu_hours            = Σ_runs run_wall_s / concurrent / 3600           [GPU-h]
        solves_per_gpu_hour  = n_solved / gpu_hours                            [1 / GPU-h]
        cost_per_solve       = price_per_gpu_hour / solves_per_gpu_hour        [price unit]

    Unsolved runs count in ``gpu_hours`` but not in ``n_solved``. This assumes the K slots
    stayed full (a batch's tail is not charged): compare packings of one batch size.

    Returns a DataFrame indexed by :data:`PACKING_KEYS`: n_runs, n_solved, gpu_hours,
    solves_per_gpu_hour, time_to_solve_median_s, and with ``price_per_gpu_hour`` (any currency;
    None: no cost column) ``cost_per_solve`` (inf where nothing solved). Rows of unknown packing
    or without a wall time are left out, the latter with a printed count.
    Raises ValueError: ``price_per_gpu_hour`` is not a positive finite number.
    """
    if price_per_gpu_hour is not None and not (
            isinstance(price_per_gpu_hour, (int, float)) and not isinstance(price_per_gpu_hour, bool)
            and math.isfinite(price_per_gpu_hour) and price_per_gpu_hour > 0):
        raise ValueError(f"price_per_gpu_hour must be a positive number (price of one GPU-hour), "
                         f"got {price_per_gpu_hour!r}")
    runs = with_code(df)
    runs = runs[pd.to_numeric(runs["concurrent"], errors="coerce").notna()]
    mps = runs["mps"].map(lambda v: v.strip().lower() == "true" if isinstance(v, str) else bool(v))
    runs = runs.assign(concurrent=runs["concurrent"].astype(int), mps=mps,
                       _gpu_s=run_wall_s(runs) / runs["concurrent"].astype(float))
    unknown = ~np.isfinite(runs["_gpu_s"].to_numpy(dtype=float))
    if unknown.any():  # no wall time: neither its GPU time nor its solve can be charged
        print(f"packed_throughput: {int(unknown.sum())} run(s) without a wall time (time to solve or "
              "seconds per iteration missing) left out", flush=True)
        runs = runs[~unknown]
    rows = []
    for keys, g in runs.groupby(list(PACKING_KEYS), sort=False):
        solved = g["solved"] == True  # noqa: E712
        hours = g["_gpu_s"].sum() / 3600.0
        n = int(solved.sum())
        rate = n / hours if hours > 0 else float("nan")
        row = dict(zip(PACKING_KEYS, keys), commits=commits_in(g), n_runs=len(g), n_solved=n, gpu_hours=hours,
                   solves_per_gpu_hour=rate, time_to_solve_median_s=g.loc[solved, "time_to_solve_s"].median())
        if price_per_gpu_hour is not None:
            row["cost_per_solve"] = price_per_gpu_hour / rate if rate > 0 else float("inf")
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=[*PACKING_KEYS, "n_runs"]).set_index(list(PACKING_KEYS))
    return pd.DataFrame(rows).set_index(list(PACKING_KEYS))
