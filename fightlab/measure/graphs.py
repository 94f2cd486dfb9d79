"""Notebook 05: what the graphs buy. Seconds per training iteration (rollout and update, from
the trainer's CUDA events) with and without each graph (env step, policy steps, PPO update:
`fightlab.rl.graphs`), one ``graphs`` row per setting (`run_setting`: a short training, medians
of iterations 4–12), and the non-physics share of a rollout step (rollout s / num_steps) from
`step_split` after that training, in its state. Two views of that share: measured directly,
(policy + env's own kernels) / rollout step (`measured_non_physics_share`), and by subtraction,
1 − physics / rollout step (`non_physics_share`; `env_non_physics_share`: of the env step). The
subtraction also charges what the physics-only replay does not reproduce (launch gaps, another
contact load) to "non-physics".
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from fightlab import results
from fightlab.config import ConfigError, TrainConfig
from fightlab.paths import RUNS

#: graph settings: name → (env step graph, policy step graphs, update graph)
SETTINGS: dict[str, tuple[bool, bool, bool]] = {
    "none": (False, False, False),
    "env": (True, False, False),
    "env+policy": (True, True, False),
    "env+update": (True, False, True),
    "all": (True, True, True),
}


def validate_settings(settings) -> list[str]:
    """The setting names, checked against `SETTINGS` (ConfigError naming a bad one)."""
    if isinstance(settings, str) or not settings:
        raise ConfigError(f"settings must be a non-empty list of names, got {settings!r}; "
                          f"valid: {', '.join(SETTINGS)}")
    for s in settings:
        if s not in SETTINGS:
            raise ConfigError(f"unknown graph setting {s!r}; valid: {', '.join(SETTINGS)}")
    dup = sorted({s for s in settings if list(settings).count(s) > 1})
    if dup:
        raise ConfigError(f"graph settings {dup} are listed twice; each setting is one training and one row")
    return list(settings)


def validate_run(bodies, iterations, skip) -> list[str]:
    """The notebook's bodies (a non-empty list) and integers iterations > skip >= 0, checked
    before any work; returns the bodies. Raises ConfigError naming the bad value."""
    from fightlab.config import validate_body

    if isinstance(bodies, str) or not bodies:
        raise ConfigError(f"bodies must be a non-empty list of body names, got {bodies!r}")
    out = [validate_body(b) for b in bodies]
    for name, v in (("iterations", iterations), ("skip", skip)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{name} must be an integer, got {v!r}")
    if not 0 <= skip < iterations:
        raise ConfigError(f"iterations must exceed skip >= 0, got iterations={iterations!r}, skip={skip!r}")
    return out


def step_split(trainer, nstep: int = 32, repeats: int = 10) -> dict:
    """Milliseconds per env step (all worlds) of each part of a rollout step, timed apart in a
    trained `Trainer`'s state: ``physics_ms_per_step`` (`substeps` × `mujoco_warp.step`),
    ``env_extra_ms_per_step`` (the env's own kernels), ``env_step_ms_per_step`` and
    ``policy_ms_per_step`` (as the trainer runs it); ``env_graph``: the env parts were captured
    as warp graphs. Each region reloads the same `state_dict`, runs ``nstep`` calls between
    synchronisations; the median of ``repeats`` regions after one warm-up; the state is restored.
    """
    import warp as wp

    from fightlab.sim.physics import StepGraph, shared_stream
    from fightlab.timing import default_sync

    env, device = trainer.env.unwrapped, trainer.device
    start = env.state_dict()
    sync = default_sync(device)
    parts = {}
    with wp.ScopedDevice(device):
        for name, kw in (("physics", dict(task=False)), ("env_extra", dict(physics=False))):
            g = StepGraph(lambda kw=kw: env.launch_step(**kw), device, enabled=env.graph_captured,
                          name=f"{name} part")
            g.fn()  # compiled, loaded (and its state moved: every region reloads `start`)
            g.capture()
            parts[name] = g
    parts.update(env_step=env.step, policy=trainer.policy_graphs[0])

    def timed(call) -> float:
        times = []
        for r in range(repeats + 1):
            env.load_state_dict(start)
            sync()
            t0 = time.perf_counter()
            with shared_stream(device), wp.ScopedDevice(device):
                for _ in range(nstep):
                    call()
            sync()
            if r:  # region 0 is the warm-up
                times.append(time.perf_counter() - t0)
        return 1e3 * float(np.median(times)) / nstep

    out = {f"{k}_ms_per_step": timed(v) for k, v in parts.items()}
    env.load_state_dict(start)
    out["env_graph"] = env.graph_captured
    return out


def run_setting(body: str, nworld: int, device: str, setting: str, iterations: int = 12,
                skip: int = 3, seed: int = 0, run_root: Path | str | None = None,
                progress: bool = False, nstep: int = 32, repeats: int = 10,
                **train_kw: Any) -> dict:
    """A short training with one `SETTINGS` name; medians over iterations skip+1 … iterations
    (skip: capture and warm-up), then `step_split` (``nstep``, ``repeats``) in its final state.
    ``run_root``: parent of the run folder (default runs/graphs); ``train_kw``: TrainConfig fields.

    Returns s_per_iter, rollout_s_per_iter, update_s_per_iter, host_reads_per_iter (medians),
    graph_fallbacks, iterations, num_steps, physics_engine (`StanceEnv.engine_solver`: the
    Newton solve that ran) and `step_split`'s entries.
    Raises ConfigError: unknown setting, iterations <= skip.
    """
    from fightlab.run.runner import Trainer

    validate_settings([setting])
    validate_run([body], iterations, skip)
    g, p, u = SETTINGS[setting]
    run_dir = Path(run_root or RUNS / "graphs") / f"{body}-{nworld}-{setting}"
    cfg = TrainConfig(body=body, nworld=nworld, device=device, seed=seed, max_iterations=iterations,
                      checkpoint_every=0, run_dir=str(run_dir), graph=g, policy_graph=p,
                      update_graph=u, stop_when_solved=False, **train_kw)
    with Trainer(cfg, progress=progress) as tr:
        tr.train()
        rows = tr.rows[skip:]
        split = step_split(tr, nstep=nstep, repeats=repeats)
        engine = dict(tr.env.unwrapped.engine_solver)
    med = lambda k: float(np.median([r[k] for r in rows]))  # noqa: E731
    return dict(s_per_iter=med("wall_s"), rollout_s_per_iter=med("rollout_s"),
                update_s_per_iter=med("update_s"), host_reads_per_iter=med("host_reads"),
                graph_fallbacks=int(max(r["graph_fallbacks"] for r in tr.rows)),
                iterations=len(rows), num_steps=cfg.ppo.num_steps, physics_engine=engine, **split)


def run_experiment(body: str, nworld: int, root: Path | str, device: str = "cpu",
                   settings=tuple(SETTINGS), iterations: int = 12, skip: int = 3, seed: int = 0,
                   nstep: int = 32, repeats: int = 10, run_root: Path | str | None = None,
                   progress: bool = False, **train_kw: Any) -> list[dict]:
    """One ``graphs`` row per setting (`run_setting`) for `body` at `nworld`, appended to
    ``root/data/results/graphs.csv`` (the publish rule: `results.append_row`); returns the rows."""
    from fightlab.config import EnvConfig, training_physics

    settings = validate_settings(settings)
    physics = training_physics(train_kw.get("env") or EnvConfig())  # the solver the rows ran
    out = []
    for name in settings:
        r = run_setting(body, nworld, device, name, iterations=iterations, skip=skip, seed=seed,
                        run_root=run_root, progress=progress, nstep=nstep, repeats=repeats, **train_kw)
        g, p, u = SETTINGS[name]
        rollout_ms = 1e3 * r["rollout_s_per_iter"] / r["num_steps"]
        extra = r["policy_ms_per_step"] + r["env_extra_ms_per_step"]
        params = dict(setting=name, iterations=iterations, skip=skip, nstep=nstep, repeats=repeats,
                      num_steps=r["num_steps"], split_env_graph=r["env_graph"], split_state="training",
                      physics=physics, physics_engine=r["physics_engine"],
                      **{k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v)
                         for k, v in train_kw.items()})
        meta = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
        metrics = dict(
            env_graph=g, policy_graph=p, update_graph=u, iterations=r["iterations"],
            s_per_iter=r["s_per_iter"], rollout_s_per_iter=r["rollout_s_per_iter"],
            update_s_per_iter=r["update_s_per_iter"], host_reads_per_iter=r["host_reads_per_iter"],
            graph_fallbacks=r["graph_fallbacks"], physics_ms_per_step=r["physics_ms_per_step"],
            env_step_ms_per_step=r["env_step_ms_per_step"], rollout_ms_per_step=rollout_ms,
            non_physics_share=1.0 - r["physics_ms_per_step"] / rollout_ms if rollout_ms > 0 else math.nan,
            env_non_physics_share=1.0 - r["physics_ms_per_step"] / r["env_step_ms_per_step"],
            env_extra_ms_per_step=r["env_extra_ms_per_step"], policy_ms_per_step=r["policy_ms_per_step"],
            measured_non_physics_share=extra / rollout_ms if rollout_ms > 0 else math.nan,
        )
        row = {**meta, **{c: metrics[c] for c in results.columns("graphs")[len(meta):]}}
        results.append_row("graphs", row, root)
        out.append(row)
    return out


def graphs_physics(params: dict) -> tuple:
    """(solver iterations, line-search iterations, qacc_smooth, eulerdamp) of a ``graphs`` row
    (params.physics; a row without it ran `config.REFERENCE_SOLVER`): `profile.physics_key`."""
    from fightlab.config import REFERENCE_SOLVER
    from fightlab.measure.profile import physics_key

    p = {**REFERENCE_SOLVER, **(params.get("physics") or {})}
    return physics_key(p["solver_iterations"], p["solver_ls_iterations"], p["solver_qacc_smooth"],
                       p["solver_eulerdamp"])


def time_budget(graph_row, profile_row=None) -> "pd.DataFrame":
    """Where one iteration's wall time goes, from a ``graphs`` row and (to split the physics by
    stage, in the proportions of its kernel time) a matching ``profile`` row (`budget_rows`).

    Lines (ms per iteration) summing to the row's s_per_iter: physics (`physics_ms_per_step` ×
    num_steps; per stage, or one line without a timed profile row); env kernels; policy
    (× num_steps + 1: the bootstrap); rollout gaps (the rollout's CUDA-event time minus those
    parts; negative when they overlap); PPO update; host (wall clock outside the two events).

    Returns a DataFrame: part, ms_per_iter, share (of s_per_iter).
    Raises ConfigError: a graphs row without a step split (physics or policy time missing).
    """
    import json

    import pandas as pd

    g = dict(graph_row)
    params = json.loads(g["params"]) if isinstance(g.get("params"), str) else (g.get("params") or {})
    n = int(params.get("num_steps") or 32)
    need = ("s_per_iter", "rollout_s_per_iter", "update_s_per_iter", "physics_ms_per_step",
            "env_extra_ms_per_step", "policy_ms_per_step")
    missing = [k for k in need if not (isinstance(g.get(k), (int, float)) and math.isfinite(g[k]))]
    if missing:
        raise ConfigError(f"graphs row {g.get('run_id')} has no {', '.join(missing)}: no time budget "
                          "(rows before the step split measured the policy and the env's kernels apart)")
    physics = g["physics_ms_per_step"] * n
    lines, stage_ms = [], {}
    if profile_row is not None:
        from fightlab.measure.profile import STAGES, stage_slug

        # the physics stages: the profile's, less the env's own kernels (timed apart above)
        stage_ms = {st: float(profile_row.get(f"{stage_slug(st)}_ms_per_step") or 0.0)
                    for st in STAGES if st != "env"}
        stage_ms = {k: v for k, v in stage_ms.items() if math.isfinite(v) and v > 0}
    total = sum(stage_ms.values())
    if total > 0:
        lines += [(f"physics: {st}", physics * ms / total) for st, ms in stage_ms.items()]
    else:
        lines.append(("physics", physics))
    env_ms, policy_ms = g["env_extra_ms_per_step"] * n, g["policy_ms_per_step"] * (n + 1)
    rollout, update, wall = (1e3 * g[k] for k in ("rollout_s_per_iter", "update_s_per_iter", "s_per_iter"))
    lines += [("env kernels", env_ms), ("policy", policy_ms),
              ("rollout gaps (rollout − the parts above)", rollout - physics - env_ms - policy_ms),
              ("PPO update", update), ("host (wall − rollout − update)", wall - rollout - update)]
    df = pd.DataFrame(lines, columns=["part", "ms_per_iter"])
    return df.assign(share=df["ms_per_iter"] / wall)


def budget_rows(graphs_df, profile_df, body: str, nworld: int, setting: str = "all",
                solver_loop: str = "auto"):
    """(graph_row, profile_row or None, note) for `time_budget`: the newest ``graphs`` row of
    (body, nworld, setting, `solver_loop`: "auto" for rows that do not say) and the newest timed
    ``profile`` row of the same body, nworld, GPU, physics (`graphs_physics` =
    `profile_physics`) and Newton solve (`learners.solve_of`: rows that do not record it ran
    MuJoCo Warp's), of training's factor path (params ``tree_factor``) when there is one;
    the note says which profile row splits the physics, or why none does.
    Raises ConfigError: no graphs row of that body, world count and setting."""
    import json

    import pandas as pd

    from fightlab.measure.learners import solve_of
    from fightlab.measure.profile import profile_physics

    g = graphs_df[(graphs_df["body"] == body) & (graphs_df["nworld"] == nworld)]
    asked = [json.loads(p) for p in g["params"]]
    g = g[np.array([p.get("setting") == setting and p.get("solver_loop", "auto") == solver_loop for p in asked],
                   dtype=bool)]
    if g.empty:
        raise ConfigError(f"no graphs row of {body} at {nworld} worlds with setting {setting!r} "
                          f"and solver_loop {solver_loop!r}")
    row = g.sort_values("time").iloc[-1]
    row_params = json.loads(row["params"])
    key, solve = graphs_physics(row_params), solve_of(row_params)
    prof, other_path = None, False
    if profile_df is not None and not profile_df.empty:
        p = profile_df[(profile_df["body"] == body) & (profile_df["nworld"] == nworld)
                       & (profile_df["gpu"] == row["gpu"])]
        p = p[np.array([profile_physics(q := json.loads(x)) == key and solve_of(q) == solve for x in p["params"]],
                       dtype=bool)]
        p = p[np.isfinite(pd.to_numeric(p["kernel_ms_per_step"], errors="coerce"))]
        # training's mass-matrix factor path (the graphs row's tree_factor, TrainConfig's default
        # when unrecorded) first: notebook 02 profiles the stock path, training runs the tree kernel
        tf = bool(row_params.get("tree_factor", True))
        same = p[np.array([bool(json.loads(x).get("tree_factor", False)) == tf for x in p["params"]], dtype=bool)]
        other_path = same.empty and not p.empty
        p = p if same.empty else same
        if not p.empty:
            prof = p.sort_values("time").iloc[-1]
    from fightlab.measure.report import physics_label

    fields = ("solver_iterations", "solver_ls_iterations", "solver_qacc_smooth", "solver_eulerdamp")
    words = physics_label({"env": dict(zip(fields, key))})
    note = (f"physics split by stage in the proportions of profile row {prof['run_id']} ({prof['commit']})"
            + (" (its mass-matrix factor path is not training's)" if other_path else "")
            if prof is not None else
            f"no profile row of {body} at {nworld} worlds on {row['gpu']} in {words}, {solve} solve, with kernel times: "
            "the physics is one line")
    return row, prof, note


def budget_tables(graphs_df, profile_df, bodies, nworld: int, setting: str = "all"):
    """`time_budget` per body of `budget_rows` (notebook 05): (DataFrame body, part,
    ms_per_iter, share; one note line per body). Raises ConfigError as `budget_rows`."""
    import pandas as pd

    tables, notes = [], []
    for body in bodies:
        row, prof, note = budget_rows(graphs_df, profile_df, body, nworld, setting)
        t = time_budget(row, prof)
        notes.append(f"{body} ×{nworld}, setting {setting}: {1e3 * row['s_per_iter']:.1f} ms per iteration "
                     f"(the lines sum to it: {t['ms_per_iter'].sum():.1f}); {note}")
        tables.append(t.assign(body=body))
    out = pd.concat(tables, ignore_index=True)
    return out[["body", "part", "ms_per_iter", "share"]], notes
