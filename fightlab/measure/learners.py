"""Learner studies over published train rows: which learner a run trained (`learner_id`, what it
changed from its body's defaults: `learner_diff`, `learner_changes`, `physics_label`), iterations
per curriculum stage (`stage_table`, `run_stages`, `variant_table`) and the decision rule
(`pick_variant`: the best mean adopted past a 5 % margin)."""

from __future__ import annotations

import hashlib
import json
import numbers
from pathlib import Path

import numpy as np
import pandas as pd

from fightlab import results
from fightlab.config import (DEFAULT_TASK, IMPLIED_FIELDS, TASK_FIELDS, ConfigError, EnvConfig, TrainConfig,
                             canonical_params, idle_ppo_fields, to_dict)
from fightlab.paths import REPO_ROOT


def stage_iterations(curve: pd.DataFrame) -> pd.Series:
    """Iterations (int) per curriculum stage (index; 0 = a 0.1) of a run's per-iteration curve
    (columns ``stage``, ``event``); a widening's row belongs to the stage it left."""
    stage = pd.to_numeric(curve["stage"]).astype(int) - (curve["event"] == "widen").astype(int)
    return stage.value_counts().sort_index().rename("iterations").rename_axis("stage")


def _effective_ppo(ppo: dict) -> dict:
    """A row's PPO fields less those that do not act (`config.idle_ppo_fields`)."""
    idle = idle_ppo_fields(ppo)
    return {k: v for k, v in ppo.items() if k not in idle}


def learner_id(params: dict) -> str:
    """8 hex characters naming a run's learner: a hash of its PPOConfig, its EnvConfig fields
    outside ``config.TASK_FIELDS`` (reward weights, action scale) and params ``reward_terms``.
    How a run was launched (graphs, factor path, seed, nworld) and its code do not change it."""
    params = canonical_params(params)
    env = {k: v for k, v in (params.get("env") or {}).items() if f"env.{k}" not in TASK_FIELDS}
    key = dict(ppo=_effective_ppo(params.get("ppo") or {}), env=env)
    if params.get("reward_terms"):  # terms weighted in code (envs.rewards.code_weights)
        key["reward_terms"] = params["reward_terms"]
    if params.get("learner"):  # another learner than fightlab's (TrainConfig.learner; canonical drops it)
        key["learner"] = params["learner"]
    return digest(key)


def digest(obj) -> str:
    """8 hex characters: the SHA-1 of ``obj`` as JSON with sorted keys (`learner_id`, `config_id`)."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:8]


def learner_diff(params: dict, body: str | None = None) -> list[tuple[str, object]]:
    """The learner fields of a run's params (as in :func:`learner_id`) that differ from today's
    defaults for its body and learner (``body``, else params ``body``, else TrainConfig's), as sorted
    ``("ppo.init_std", 0.2)`` pairs, values as stored. A field a row does not store reads as its
    default, or as `config.IMPLIED_FIELDS` says; lists compare as tuples."""
    def norm(x):
        return tuple(x) if isinstance(x, (list, tuple)) else x

    body = body if isinstance(body, str) else params.get("body")
    learner = params.get("learner") if isinstance(params.get("learner"), str) else TrainConfig.learner
    ref = to_dict(TrainConfig(body=body if isinstance(body, str) else TrainConfig.body, learner=learner))
    out = []
    for part in ("ppo", "env"):
        have = params.get(part) or {}
        have = _effective_ppo(have) if part == "ppo" else have
        for k, d in sorted(ref[part].items()):
            name = f"{part}.{k}"
            if name in TASK_FIELDS or (k not in have and name not in IMPLIED_FIELDS):
                continue
            v = have[k] if k in have else IMPLIED_FIELDS[name]  # a field older rows lack
            if norm(v) != norm(d):
                out.append((name, v))
    return out


def learner_changes(params: dict, body: str | None = None, solve: bool = True) -> str:
    """:func:`learner_diff` as text, ``"ppo.init_std=0.2, env.w_pose=2"``; the training physics,
    when any of its solver fields differs, as one :func:`physics_label` at the end, then, with
    ``solve``, the Newton solve where it is not the defaults' (:func:`default_solve`,
    ``"MuJoCo Warp solve"``); ``"defaults"`` when nothing differs from today's defaults; another
    learner than fightlab's is named first, ``"rsl_rl: defaults"`` (its defaults are its own,
    `config.body_ppo`). Learner studies pass ``solve=False``: iterations pool both solves (the
    same physics to float32 rounding), as the learner id does."""
    diff = learner_diff(params, body)
    out = [f"{k}={v}" for k, v in diff if not k.startswith("env.solver_")]
    if len(out) < len(diff):
        out.append(physics_label(params))
    if solve and solve_of(params) != default_solve(params):
        out.append(f"{solve_of(params)} solve")
    text, learner = ", ".join(out) or "defaults", params.get("learner")
    return f"{learner}: {text}" if isinstance(learner, str) and learner != TrainConfig.learner else text


#: the names of a training's Newton solve (:func:`solve_of`): fightlab's one launch
#: (`fightlab.kernels.newton`) and MuJoCo Warp's loop (its launches one after another or in a graph
#: conditional; also the name of what MuJoCo's C engine rows ran)
SINGLE_LAUNCH, MUJOCO_WARP = "single-launch", "MuJoCo Warp"
SOLVES = (MUJOCO_WARP, SINGLE_LAUNCH)


def solve_of(params: dict) -> str:
    """Which code ran a row's training Newton solve, one of :data:`SOLVES`. Read from what the
    engine ran (params ``physics_engine.solver_loop``: a single launch that fell back records
    MuJoCo Warp's loop), else what was asked (``solver_loop``: rows from before the engine said
    so, when "auto" was MuJoCo Warp's loop). Another value (a hand-made row) is named as it is,
    ``"solver_loop 'X'"``: never pooled with either."""
    engine = params.get("physics_engine")
    loop = engine.get("solver_loop") if isinstance(engine, dict) and "solver_loop" in engine else \
        params.get("solver_loop", "auto")
    if loop == "single_launch":
        return SINGLE_LAUNCH
    return MUJOCO_WARP if loop in ("auto", "conditional", "unrolled") else f"solver_loop {loop!r}"


def default_solve(params: dict) -> str:
    """The solve today's defaults take where a row ran (params ``device``, ``backend``;
    `sim.physics.training_solver_loop`): :data:`SINGLE_LAUNCH` on a CUDA device of the MuJoCo
    Warp backend, else :data:`MUJOCO_WARP`. A row whose :func:`solve_of` differs is not the
    defaults' (:func:`learner_changes` names its solve)."""
    from fightlab.sim.physics import training_solver_loop

    device, backend = params.get("device", "cpu"), params.get("backend", "gpu")
    loop = training_solver_loop("auto", device if isinstance(device, str) else "cpu", backend)
    return solve_of({"solver_loop": loop})


def physics_label(params: dict) -> str:
    """A row's training physics in a few words, ``"Newton 10/20 with qacc_smooth"`` (tolerances
    when not the defaults', ", explicit damping" without eulerdamp); fields read as in
    :func:`learner_diff`."""
    env, dflt = params.get("env") or {}, EnvConfig()

    def get(k):
        return env[k] if k in env else IMPLIED_FIELDS.get(f"env.{k}", getattr(dflt, k))

    text = (f"Newton {get('solver_iterations')}/{get('solver_ls_iterations')} "
            f"{'with' if get('solver_qacc_smooth') else 'without'} qacc_smooth")
    tol = (get("solver_tolerance"), get("solver_ls_tolerance"))
    if tol != (dflt.solver_tolerance, dflt.solver_ls_tolerance):
        text += f" tol {tol[0]:g}/{tol[1]:g}"
    if not get("solver_eulerdamp"):
        text += ", explicit damping"
    return text


def pick_variant(runs: pd.DataFrame, margin: float = 0.05, metric: str = "iterations") -> pd.DataFrame:
    """A learner study's decision rule (bench/NOTES.md), per body of ``runs`` (MuJoCo Warp rows
    of the task from :func:`published_runs`, packed or not, either Newton solve): among the learners whose every run
    solved with a known iteration count over ≥ 2 distinct seeds, the lowest mean iterations wins
    (a tie keeps the defaults) and is adopted only if it beats the defaults' mean by more than
    ``margin`` (5 %: about the seed spread of the committed solves). ``metric="stage0"``: the
    same over the first stage's iterations (:func:`with_stage0`; eligible: every run ended it).

    Each learner (params ``learner``: fightlab's, rsl_rl's) is judged against its own defaults.
    Returns one row per body and learner: ``learner``, ``defaults_mean``, ``best_mean``, ``best`` (its
    :func:`learner_changes`), ``adopt``, ``sets`` (``key=value`` JSON values for ``--set``; []
    when the defaults stay) and ``variants`` (changes → mean, over the eligible learners).
    Raises ConfigError: a bad ``margin`` or ``metric``; ``runs`` without published_runs' columns
    or a run of the task; a body without an eligible learner of today's defaults.
    """
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < 1:
        raise ConfigError(f"margin must be a fraction in [0, 1), got {margin!r}")
    if metric not in ("iterations", "stage0"):
        raise ConfigError(f"metric must be 'iterations' or 'stage0', got {metric!r}")
    need = {"run_id", "body", "seed", "solved", "iterations", "params", "task", "backend"} | (
        {"stage0"} if metric == "stage0" else set())
    if not need <= set(runs.columns):
        raise ConfigError(f"pick_variant needs published_runs rows (columns {sorted(need)}), "
                          f"missing {sorted(need - set(runs.columns))}")
    tasks = sorted(set(map(str, runs["task"])))
    runs = runs[(runs["task"] == DEFAULT_TASK) & (runs["backend"] == "gpu")]  # MuJoCo Warp trainings
    if runs.empty:
        raise ConfigError(f"pick_variant: no runs of task {DEFAULT_TASK!r} (tasks seen: {tasks or 'none'})")
    out = []
    runs = runs.assign(_learner=[json.loads(p or "{}").get("learner") or TrainConfig.learner for p in runs["params"]])
    for (body, who), g in runs.groupby(["body", "_learner"], sort=True):
        params = {r.run_id: json.loads(r.params or "{}") for r in g.itertuples()}
        g = g.assign(changes=[learner_changes(params[i], body, solve=False) for i in g["run_id"]])
        dflt = learner_changes(to_dict(TrainConfig(body=body, learner=who)), body, solve=False)  # or "rsl_rl: defaults"
        means, sets = {}, {}
        for changes, v in g.groupby("changes", sort=False):
            # eligible: every run solved (or ended stage 0) with a known count, over >= 2 distinct seeds
            counts = pd.to_numeric(v[metric], errors="coerce")
            done = (counts > 0).all() if metric == "stage0" else (v["solved"] == True).all()  # noqa: E712
            if v["seed"].nunique() >= 2 and done and np.isfinite(counts.to_numpy(dtype=float)).all():
                means[changes] = float(counts.mean())
                sets[changes] = [f"{k}={json.dumps(x)}" for k, x in learner_diff(params[v["run_id"].iloc[0]], body)]
        if dflt not in means:
            what = "seeds that ended stage 0" if metric == "stage0" else "solved seeds"
            raise ConfigError(f"pick_variant: body {body!r} has no learner of today's defaults with >= 2 "
                              f"{what} ({dflt!r}; have {sorted(means) or 'none'})")
        best = min(means, key=lambda k: (means[k], k != dflt))  # a tie keeps the defaults
        adopt = best != dflt and means[best] < (1 - margin) * means[dflt]
        out.append(dict(body=body, learner=who, defaults_mean=means[dflt], best=best, best_mean=means[best],
                        adopt=adopt, sets=sets[best] if adopt else [], variants=means))
    return pd.DataFrame(out, columns=["body", "learner", "defaults_mean", "best", "best_mean", "adopt", "sets",
                                      "variants"])


def with_stage0(runs: pd.DataFrame, root: Path | None = None) -> pd.DataFrame:
    """``runs`` (:func:`published_runs`) with a ``stage0`` column: the first stage's iterations
    (:func:`run_stages`), 0 for a run without an ended stage 0 or its curve."""
    if "run_id" not in runs:
        raise ConfigError(f"with_stage0 needs published_runs rows (a run_id column), got columns {list(runs.columns)}")
    per_run = run_stages(runs, root) if not runs.empty else pd.DataFrame(columns=["stage0"])
    s0 = per_run["stage0"] if len(per_run) else pd.Series(dtype=float)
    return runs.assign(stage0=[float(s0.get(i, 0)) for i in runs["run_id"]])


def learner_labels(runs: pd.DataFrame) -> dict:
    """(body, learner id) → :func:`learner_changes` of its first row in ``runs`` (without the
    solve: a learner id pools both): a legend (one learner reads differently on bodies whose
    defaults differ, `config.BODY_PPO`)."""
    first = runs.drop_duplicates(["body", "learner"]).itertuples()
    return {(r.body, r.learner): learner_changes(json.loads(r.params or "{}"), r.body, solve=False) for r in first}


def variant_table(runs: pd.DataFrame, root: Path | None = None) -> pd.DataFrame:
    """A learner study's table per (body, learner) over :func:`run_stages` with an ended stage
    0: ``changes``, ``n``, ``n_solved``, ``seeds``, median / min / max ``stage0`` (over all n)
    and ``iterations`` (over the solved runs; NaN without one); sorted by body, median
    iterations, median stage 0."""
    cols = ["body", "learner", "changes", "n", "n_solved", "seeds", "stage0_median", "stage0_min", "stage0_max",
            "iterations_median", "iterations_min", "iterations_max"]
    per_run = run_stages(runs, root)
    per_run = per_run[per_run["stage0"] > 0] if not per_run.empty else per_run
    if per_run.empty:
        return pd.DataFrame(columns=cols)
    changes = {r.run_id: learner_changes(json.loads(r.params or "{}"), r.body, solve=False) for r in runs.itertuples()}
    per_run = per_run.assign(changes=[changes.get(i, "") for i in per_run.index])
    out = per_run.groupby(["body", "learner"], sort=False).agg(
        changes=("changes", "first"), n=("seed", "size"), n_solved=("iterations", "count"),
        seeds=("seed", lambda x: ", ".join(map(str, sorted(x)))), stage0_median=("stage0", "median"),
        stage0_min=("stage0", "min"), stage0_max=("stage0", "max"),
        iterations_median=("iterations", "median"), iterations_min=("iterations", "min"),
        iterations_max=("iterations", "max")).reset_index()
    return out[cols].sort_values(["body", "iterations_median", "stage0_median"]).reset_index(drop=True)


def run_stages(runs: pd.DataFrame, root: Path | None = None) -> pd.DataFrame:
    """Per run of :func:`stage_table` (``packed=True``), indexed by run_id: body, learner, nworld,
    seed, solved, iterations (summed over the stages; NaN unsolved), stage0 (0 without one)."""
    t = stage_table(runs, root, packed=True) if not runs.empty else pd.DataFrame()
    if t.empty:
        return pd.DataFrame(columns=["body", "learner", "nworld", "seed", "solved", "iterations", "stage0"])
    per_run = t.groupby("run_id").agg(body=("body", "first"), learner=("learner", "first"),
                                      nworld=("nworld", "first"), seed=("seed", "first"),
                                      solved=("solved", "first"), iterations=("iterations", "sum"))
    per_run["iterations"] = per_run["iterations"].where(per_run["solved"].astype(bool)).astype(float)
    per_run["stage0"] = t[t["stage"] == 0].set_index("run_id")["iterations"].reindex(per_run.index).fillna(0)
    return per_run


def stage_table(runs: pd.DataFrame, root: Path | None = None, packed: bool = False) -> pd.DataFrame:
    """Iterations per curriculum stage, one row per (run, stage): run_id, body, learner, commit,
    nworld, seed, concurrent, solved, stage, amplitude, iterations; over the solo (``packed``:
    any) MuJoCo Warp runs of the task in ``runs`` (:func:`published_runs`) that solved or are a
    ``stage_study`` (only the stages it ended), whose curve (with ``stage`` and ``event``
    columns) is under ``root`` (default: the repository)."""
    root = Path(root) if root else REPO_ROOT
    solo = (runs["concurrent"] == 1) if not packed else pd.Series(True, index=runs.index)
    study = runs["stage_study"] == True if "stage_study" in runs else pd.Series(False, index=runs.index)  # noqa: E712
    keep = runs[((runs["solved"] == True) | study) & solo  # noqa: E712
                & (runs["task"] == DEFAULT_TASK) & (runs["backend"] == "gpu")]
    amps = TrainConfig().curriculum_stages
    rows = []
    for r in keep.itertuples():
        if not results.curve_path(r.run_id, root).exists():
            continue
        curve = results.read_curve(r.run_id, root)
        if not {"stage", "event"} <= set(curve.columns):
            continue  # a curve without the curriculum columns (not a training's rows.csv)
        if curve.empty:
            raise results.MalformedRowError(f"{results.curve_path(r.run_id, root)}: the curve has a header and "
                                            "no rows (its run's row says it trained)")
        solved = r.solved == True  # noqa: E712
        ended = len(amps) if solved else int((curve["event"] == "widen").sum())  # stages it finished
        for stage, n in stage_iterations(curve).items():
            if stage >= ended:
                continue  # the stage a stopped run was in: not ended, not a measurement
            rows.append(dict(run_id=r.run_id, body=r.body, learner=r.learner, commit=r.commit,
                             nworld=int(r.nworld), seed=r.seed,
                             concurrent=int(r.concurrent) if r.concurrent == r.concurrent else None,  # NaN: unrecorded
                             solved=bool(solved), stage=int(stage),
                             amplitude=amps[stage] if 0 <= stage < len(amps) else float("nan"),
                             iterations=int(n)))
    return pd.DataFrame(rows, columns=["run_id", "body", "learner", "commit", "nworld", "seed", "concurrent",
                                       "solved", "stage", "amplitude", "iterations"])
