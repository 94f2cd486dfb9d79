"""Notebook 05: what the graphs buy. Seconds per training iteration, split into rollout and
update, with and without each graph (the env step's warp graph, the policy steps' and the PPO
update's torch graphs: `fightlab.rl.graphs`), and the non-physics share of an env step.

Two measurements per body and world count, in one ``graphs`` row per graph setting
(`results.EXPERIMENTS["graphs"]`):

- `run_setting`: a short training (default 12 iterations, medians of iterations 4–12) with the
  setting; rollout and update come from the trainer's CUDA events, host reads per iteration
  from `fightlab.timing.HostReads`.
- `physics_split`: the physics alone (`substeps` × `mujoco_warp.step`, captured as one graph)
  against the whole env step (its graph: pre-step, physics, contact checks, reward, masked
  reset, observation), both replayed from the same state. The non-physics share of a rollout
  step is 1 − physics / (rollout seconds / num_steps), that of the env step alone
  1 − physics / env step.
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
    return list(settings)


def physics_split(body: str, nworld: int, device: str, nstep: int = 32, repeats: int = 10,
                  seed: int = 0, settle: int = 16) -> dict:
    """Milliseconds per env step of the physics alone and of the whole env step, both captured.

    Args:
      body, nworld, device, seed: the env; nstep: env steps per timed region; repeats: timed
      regions (median after one warm-up region, synchronised; `fightlab.timing.default_sync`); settle: zero-action steps before timing
      (the state both timings start from, restored before each region).

    Returns:
      dict: physics_ms_per_step, env_step_ms_per_step (floats, all worlds together),
      env_graph (whether the env step was a captured graph; False where the device could not).
    """
    import mujoco_warp as mjw
    import warp as wp

    from fightlab.envs.stance import StanceEnv
    from fightlab.sim.physics import StepGraph
    from fightlab.timing import default_sync

    env = StanceEnv(body, nworld, device, seed=seed)
    try:
        env.reset(stagger=True)
        for _ in range(settle):
            env.step()
        start = env.state_dict()

        def physics():
            for _ in range(env.substeps):
                mjw.step(env.m, env.d)

        with wp.ScopedDevice(device):
            physics()  # compiled and loaded before capture
        phys = StepGraph(physics, device, name="physics-only")
        phys.capture()

        sync = default_sync(device)

        def timed(call) -> float:
            """Median seconds of `nstep` calls, each region from `start` (loaded before the
            clock starts), after one warm-up region; synchronised before and after."""
            times = []
            for r in range(repeats + 1):
                env.load_state_dict(start)
                sync()
                t0 = time.perf_counter()
                with wp.ScopedDevice(device):
                    for _ in range(nstep):
                        call()
                sync()
                if r:  # region 0 is the warm-up
                    times.append(time.perf_counter() - t0)
            return float(np.median(times))

        t_phys, t_env = timed(phys), timed(env.step)
        captured = env.graph_captured
    finally:
        env.close()
    return dict(physics_ms_per_step=1e3 * t_phys / nstep, env_step_ms_per_step=1e3 * t_env / nstep,
                env_graph=captured)


def run_setting(body: str, nworld: int, device: str, setting: str, iterations: int = 12,
                skip: int = 3, seed: int = 0, run_root: Path | str | None = None,
                progress: bool = False, **train_kw: Any) -> dict:
    """A short training with one graph setting; medians over iterations skip+1 … iterations.

    Args:
      body, nworld, device, seed: the run; setting: a `SETTINGS` name; iterations (> skip),
      skip: iterations left out of the medians (capture, allocator and curriculum warm-up);
      run_root: parent of the run folder (default the repository's runs/graphs); train_kw:
      further TrainConfig fields (e.g. ppo=PPOConfig(num_steps=4) for a smoke run).

    Returns:
      dict: s_per_iter, rollout_s_per_iter, update_s_per_iter, host_reads_per_iter (medians),
      graph_fallbacks (int), iterations (int), num_steps (int).

    Raises:
      ConfigError: unknown setting, iterations <= skip.
    """
    from fightlab.rl.runner import Trainer

    validate_settings([setting])
    if not (isinstance(iterations, int) and isinstance(skip, int) and 0 <= skip < iterations):
        raise ConfigError(f"iterations must exceed skip >= 0, got iterations={iterations!r}, skip={skip!r}")
    g, p, u = SETTINGS[setting]
    run_dir = Path(run_root or RUNS / "graphs") / f"{body}-{nworld}-{setting}"
    cfg = TrainConfig(body=body, nworld=nworld, device=device, seed=seed, max_iterations=iterations,
                      checkpoint_every=0, run_dir=str(run_dir), graph=g, policy_graph=p,
                      update_graph=u, stop_when_solved=False, **train_kw)
    with Trainer(cfg, progress=progress) as tr:
        tr.train()
        rows = tr.rows[skip:]
    med = lambda k: float(np.median([r[k] for r in rows]))  # noqa: E731
    return dict(s_per_iter=med("wall_s"), rollout_s_per_iter=med("rollout_s"),
                update_s_per_iter=med("update_s"), host_reads_per_iter=med("host_reads"),
                graph_fallbacks=int(max(r["graph_fallbacks"] for r in tr.rows)),
                iterations=len(rows), num_steps=cfg.ppo.num_steps)


def run_experiment(body: str, nworld: int, root: Path | str, device: str = "cpu",
                   settings=tuple(SETTINGS), iterations: int = 12, skip: int = 3, seed: int = 0,
                   nstep: int = 32, repeats: int = 10, run_root: Path | str | None = None,
                   progress: bool = False, **train_kw: Any) -> list[dict]:
    """One ``graphs`` row per setting for `body` at `nworld`, appended to
    ``root/data/results/graphs.csv`` (`results.append_row`, which applies the publish rule to
    the repository's data/). The physics split is measured once and carried by every row.

    Returns the rows (dicts). Raises ConfigError for an unknown setting.
    """
    settings = validate_settings(settings)
    split = physics_split(body, nworld, device, nstep=nstep, repeats=repeats, seed=seed)
    out = []
    for name in settings:
        r = run_setting(body, nworld, device, name, iterations=iterations, skip=skip, seed=seed,
                        run_root=run_root, progress=progress, **train_kw)
        g, p, u = SETTINGS[name]
        rollout_ms = 1e3 * r["rollout_s_per_iter"] / r["num_steps"]
        params = dict(setting=name, iterations=iterations, skip=skip, nstep=nstep, repeats=repeats,
                      num_steps=r["num_steps"], physics_env_graph=split["env_graph"],
                      **{k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v)
                         for k, v in train_kw.items()})
        meta = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
        metrics = dict(
            env_graph=g, policy_graph=p, update_graph=u, iterations=r["iterations"],
            s_per_iter=r["s_per_iter"], rollout_s_per_iter=r["rollout_s_per_iter"],
            update_s_per_iter=r["update_s_per_iter"], host_reads_per_iter=r["host_reads_per_iter"],
            graph_fallbacks=r["graph_fallbacks"], physics_ms_per_step=split["physics_ms_per_step"],
            env_step_ms_per_step=split["env_step_ms_per_step"], rollout_ms_per_step=rollout_ms,
            non_physics_share=1.0 - split["physics_ms_per_step"] / rollout_ms if rollout_ms > 0 else math.nan,
            env_non_physics_share=1.0 - split["physics_ms_per_step"] / split["env_step_ms_per_step"],
        )
        row = {**meta, **{c: metrics[c] for c in results.columns("graphs")[len(meta):]}}
        results.append_row("graphs", row, root)
        out.append(row)
    return out
