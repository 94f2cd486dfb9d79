"""Re-run a saved policy (or the zero-action policy) on fresh worlds and report the solve
statistics: fall rate, tracking, mean episode length (``python -m fightlab evaluate``)."""

from __future__ import annotations

import dataclasses
from fightlab.config import from_dict
from fightlab.run.checkpoint import load_checkpoint

__all__ = ["DEFAULT_NWORLD", "PHYSICS", "evaluate", "evaluate_zero_action", "evaluate_exported", "exported_request"]


#: worlds of an evaluation that has no checkpoint to take its count from (the zero-action policy)
DEFAULT_NWORLD = 256


#: `evaluate`'s physics: the checkpoint's training physics, or the reference physics
#: (`config.REFERENCE_SOLVER`)
PHYSICS = ("training", "reference")


def evaluate(checkpoint, nworld: int | None = None, device: str = "cpu", episodes_per_world: float = 1.0,
             timestep: float | None = None, zero_action: bool = False, amplitude: float = 1.0,
             seed: int = 1, graph: bool = True, progress: bool = True, physics: str = "training") -> dict:
    """Re-run a saved policy (its deterministic mean action) or the zero-action policy (the servos
    holding the reference alone) on fresh worlds and report the solve statistics.

    Args:
      checkpoint: path of a fightlab checkpoint of either learner (its body, task config and
        policy are used; an rsl_rl run's actor rebuilt by `run.export.checkpoint_policy`).
      nworld: worlds (None: the checkpoint's); episodes_per_world: how long to run, in episodes.
      timestep: physics timestep override in s (the env takes control_dt / timestep substeps).
      zero_action: ignore the policy; amplitude: rhythm amplitude, fixed (no ramp).
      physics: one of :data:`PHYSICS`: "training" (the checkpoint's solver settings) or
        "reference" (`config.reference_env`: the reference solver, at `timestep` or the task's).

    Returns:
      dict: body, zero_action, physics (the solver fields asked for), physics_engine (as the
      engine ran them), timestep (s), nworld, amplitude, episodes_per_world, run_id and
      ckpt_iteration / ckpt_solved (of the checkpoint), and the statistics of
      `fightlab.envs.task.evaluate_policy` (seconds_per_world, episodes, falls, fall_rate,
      tracking, tracking_survived, mean_episode_s, overflow_count, nan_resets, ...).

    Raises:
      CheckpointError: unreadable checkpoint or a policy that does not fit the body;
      ConfigError: an rsl_rl run's checkpoint without rsl_rl installed.
    """
    ck = load_checkpoint(checkpoint, any_learner=True)
    cfg = from_dict(ck["config"])
    if cfg.learner == "rsl_rl":  # its actor is rebuilt with rsl_rl's classes: refused before the env
        from fightlab.run.rsl import require_rsl_rl

        require_rsl_rl()
    env_cfg = _env_cfg(cfg, physics, timestep)
    nworld = cfg.nworld if nworld is None else nworld
    return _evaluate(cfg.body, ck, env_cfg, nworld, device, episodes_per_world, zero_action,
                     amplitude, seed, graph, cfg.tree_factor, progress, backend=cfg.backend, threads=cfg.workers)


def _env_cfg(cfg, physics: str, timestep: float | None):
    """The EnvConfig a run's policy is judged in: its own or the reference physics (one of
    :data:`PHYSICS`, else ConfigError), at ``timestep`` (s) when given."""
    from fightlab.config import ConfigError, reference_env

    if physics not in PHYSICS:
        raise ConfigError(f"physics must be one of {', '.join(PHYSICS)}, got {physics!r}")
    env_cfg = reference_env(cfg.env) if physics == "reference" else cfg.env
    return env_cfg if timestep is None else dataclasses.replace(env_cfg, timestep=timestep)


def evaluate_exported(policy, nworld: int | None = None, device: str = "cpu", episodes_per_world: float = 1.0,
                      timestep: float | None = None, amplitude: float = 1.0, seed: int = 1, progress: bool = True,
                      physics: str = "training", backend: str | None = None, body: str | None = None) -> dict:
    """`evaluate` of an exported policy file (`python -m fightlab export`), run by onnxruntime on
    the CPU, in its run's task on ``backend`` (one of `config.BACKENDS`; None: its run's; "cpu":
    MuJoCo's C engine, `sim.cpu`, with ``device`` "cpu"). ``body``: None, or the file's body.
    Returns evaluate's dict plus backend, policy (the file's absolute path) and policy_sha256
    (hex). Raises ConfigError, one line, before the env is built: a file that is not a fightlab
    policy (`load_exported`), onnxruntime missing, a bad backend, a ``body`` not the file's."""
    from fightlab.config import ConfigError, validate_backend
    from fightlab.run.export import load_exported

    pol = load_exported(policy)
    cfg = pol.config
    if body is not None and body != cfg.body:
        raise ConfigError(f"--body {body} conflicts with the policy's body ({cfg.body}): give --body {cfg.body} "
                          "or leave --body out")
    backend = cfg.backend if backend is None else validate_backend(backend)
    if backend == "cpu" and device != "cpu":
        raise ConfigError(f"--backend cpu steps MuJoCo's C engine on the CPU: --device must be cpu, got {device!r}")
    res = _evaluate(cfg.body, None, _env_cfg(cfg, physics, timestep), cfg.nworld if nworld is None else nworld,
                    device, episodes_per_world, False, amplitude, seed, cfg.graph, cfg.tree_factor, progress,
                    backend=backend, threads=cfg.workers, make_policy=pol.make_policy)
    it = pol.meta.get("iteration")
    return dict(res, run_id=pol.meta.get("run_id"), ckpt_iteration=int(it) if it and it.isdigit() else None,
                ckpt_solved=pol.meta.get("solved") == "True", backend=backend, policy=str(pol.path),
                policy_sha256=pol.sha256)


def exported_request(req, nworld: int | None, device: str, physics: str, progress: bool = True) -> dict:
    """`evaluate --policy FILE [--backend B] [--body B]` (a checked `run.launch.EvalRequest`, its
    nworld, device and physics): `evaluate_exported`'s dict. Raises ConfigError: --backend
    without --policy, --policy with a CHECKPOINT or --zero-action, --body not the file's."""
    from fightlab.config import ConfigError

    if req.policy is None or req.checkpoint is not None or req.zero_action:
        raise ConfigError("--policy FILE replaces CHECKPOINT and --zero-action; --backend goes with --policy")
    return evaluate_exported(req.policy, nworld, device, req.episodes, req.timestep, req.amplitude, req.seed,
                             progress, physics, req.backend, req.body)


def evaluate_zero_action(body: str, nworld: int = DEFAULT_NWORLD, device: str = "cpu",
                         episodes_per_world: float = 1.0, amplitude: float = 1.0, seed: int = 1,
                         env_cfg=None, graph: bool = True, timestep: float | None = None,
                         progress: bool = True) -> dict:
    """The zero-action policy (servos hold the moving reference alone) on `body`; same output as
    `evaluate`."""
    from fightlab.config import EnvConfig

    env_cfg = env_cfg or EnvConfig()
    if timestep is not None:
        env_cfg = dataclasses.replace(env_cfg, timestep=timestep)
    return _evaluate(body, None, env_cfg, nworld, device, episodes_per_world, True,
                     amplitude, seed, graph, True, progress)


def _evaluate(body, ck, env_cfg, nworld, device, episodes_per_world, zero_action, amplitude, seed,
              graph, tree_factor, progress=True, backend: str = "gpu", threads=None, make_policy=None):
    from fightlab.config import training_physics
    from fightlab.envs.task import evaluate_policy
    from fightlab.run.export import checkpoint_policy

    # the checkpoint's actor on the env's sizes, its mean action (or the given policy); None: the zero action
    if ck is not None and not zero_action:
        make_policy = lambda env: checkpoint_policy(ck, env, device)  # noqa: E731
    r = evaluate_policy(make_policy, body, env_cfg, nworld, device, episodes_per_world, amplitude, seed,
                        graph, tree_factor, progress, backend=backend, threads=threads)
    return dict(body=body, zero_action=make_policy is None, physics=training_physics(env_cfg),
                physics_engine=r.pop("physics_engine"), timestep=r.pop("timestep"), nworld=int(nworld),
                amplitude=amplitude, episodes_per_world=episodes_per_world,
                seconds_per_world=r.pop("seconds_per_world"),
                run_id=ck.get("run_id") if ck is not None else None,
                # which policy: a checkpoint of a solved run, or one saved before the solve
                ckpt_iteration=ck.get("iteration") if ck is not None else None,
                ckpt_solved=bool(ck["curriculum"].get("solved")) if ck is not None else None, **r)


def publish_size(policy: str | None, nworld: int | None) -> None:
    """A published evaluation runs at least `publish.MIN_PUBLISH_NWORLD` worlds: ``nworld`` (None:
    the exported ``policy``'s run's, else :data:`DEFAULT_NWORLD`). Fewer is a smoke check, not a
    row of data/: ConfigError, one line, before any work."""
    from fightlab.config import ConfigError
    from fightlab.publish import MIN_PUBLISH_NWORLD

    if nworld is None and policy is not None:
        from fightlab.run.export import load_exported

        nworld = load_exported(policy).config.nworld
    n = DEFAULT_NWORLD if nworld is None else nworld
    if n < MIN_PUBLISH_NWORLD:
        raise ConfigError(f"--publish: an evaluation of {n} worlds is below {MIN_PUBLISH_NWORLD}, the smallest "
                          f"world count of a published row: give --nworld {MIN_PUBLISH_NWORLD} or more, or "
                          "leave --publish out")
