"""The task's identity and its reference physics: `TASK_FIELDS` (the Fixed fields, docs/task.md),
`task_id` / `task_changes` / `task_warning`, `REFERENCE_SOLVER` / `reference_env` (where every
solve's policy is checked), `IMPLIED_FIELDS` / `canonical_params` (fields older rows lack)."""

from __future__ import annotations

import dataclasses

from fightlab.config.schema import EnvConfig, TrainConfig


#: The task's Fixed fields (docs/task.md): what a run must keep to count as a
#: solve of this task. Everything else in EnvConfig (reward weights, action scale), PPOConfig and
#: TrainConfig (nworld, seeds, graphs, the factor path, budgets) belongs to the learner or to how a
#: run is launched and is Free. The bodies and their servo gains are fixed in code (fightlab/bodies).
TASK_FIELDS = (
    "env.control_dt", "env.timestep", "env.episode_s", "env.rhythm_hz", "env.bounce_m",
    "env.arm_sway_rad", "env.n_phase", "env.amplitude_ramp_s", "env.push_interval_s",
    "env.push_duration_s", "env.push_impulse_ns", "env.tilt_fall_deg", "env.init_noise_rad",
    "curriculum_stages", "curriculum_wait", "max_fall_rate", "min_tracking", "min_episode_s",
    "ppo.num_steps",
)

#: `task_id` of a run that keeps every Fixed field at its default
DEFAULT_TASK = "default"

#: the reference physics' solver: MuJoCo Warp's Newton solver at 10 iterations and 20 line-search
#: iterations, MuJoCo's default tolerances (1e-8, 0.01); with the task's timestep, where every
#: solve's final policy is checked (`fightlab.run.reference`)
REFERENCE_SOLVER = dict(solver_iterations=10, solver_ls_iterations=20, solver_tolerance=1e-8,
                        solver_ls_tolerance=0.01, solver_qacc_smooth=True, solver_eulerdamp=True)

#: the reference check's runs: (label, timestep as a fraction of the task's)
REFERENCE_CHECKS = (("dt", 1.0), ("dt/2", 0.5))

#: the smallest Newton tolerance MuJoCo Warp runs: its `put_model` raises `opt.tolerance` to at
#: least this for float32 (mujoco_warp io.put_model); MuJoCo's C engine runs what it is given.
#: The reference tolerance 1e-8 therefore runs as 1e-6 on MuJoCo Warp (rows record the engine's
#: value, `sim.physics.engine_solver`); any other tolerance below it is refused there
MUJOCO_WARP_MIN_TOLERANCE = 1e-6

#: fields added to the configs after rows were first written, with the value a row that does not
#: store them ran with: ids (`measure.report.config_id`, `learner_id`) leave a field out where it
#: has that value, so the rows from before it keep their ids
IMPLIED_FIELDS = {**{f"env.{k}": v for k, v in REFERENCE_SOLVER.items()}, "ppo.critic_obs": "policy",
                  "ppo.critic_learning_rate": None, "ppo.matmul_precision": "highest",
                  "ppo.kl_estimator": "k3", "ppo.symmetry": "none", "ppo.symmetry_coef": 1.0,
                  "ppo.stage_lr_scale": None, "ppo.obs_history": 1, "learner": "fightlab",
                  "logger": "auto", "time_limit_s": None, "study": None}

def canonical_params(params: dict) -> dict:
    """A row's params (or `to_dict` of a TrainConfig) without the :data:`IMPLIED_FIELDS` that
    hold their implied value: what ids are hashed from. A copy; `params` is not changed."""
    out = dict(params)
    for name, implied in IMPLIED_FIELDS.items():
        part, _, key = name.rpartition(".")
        if not part:  # a TrainConfig field
            if key in out and out[key] == implied:
                del out[key]
            continue
        sub = out.get(part)
        if isinstance(sub, dict) and key in sub and sub[key] == implied:
            out[part] = {k: v for k, v in sub.items() if k != key}
    return out


def reference_env(env: "EnvConfig", timestep: float | None = None) -> "EnvConfig":
    """`env` in the reference physics: :data:`REFERENCE_SOLVER`, at `timestep` (None: the env's,
    which for the task is the task's)."""
    ref = dataclasses.replace(env, **REFERENCE_SOLVER)
    return ref if timestep is None else dataclasses.replace(ref, timestep=timestep)


def training_physics(env: "EnvConfig") -> dict:
    """The solver fields of `env` (:data:`REFERENCE_SOLVER`'s keys) as a dict."""
    return {k: getattr(env, k) for k in REFERENCE_SOLVER}


def _field_value(cfg, name: str):
    """A field's value for comparison: lists as tuples, numbers as floats (so 5 == 5.0 names the
    same task however it was typed or stored)."""
    obj = cfg
    for part in name.split("."):
        obj = getattr(obj, part)

    def norm(v):
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    return tuple(norm(x) for x in obj) if isinstance(obj, (list, tuple)) else norm(obj)


def task_changes(cfg: "TrainConfig") -> dict:
    """The Fixed fields (:data:`TASK_FIELDS`) of `cfg` that differ from the defaults:
    ``{name: (value, default)}``; empty for a run of the task itself."""
    ref = TrainConfig()
    both = {name: (_field_value(cfg, name), _field_value(ref, name)) for name in TASK_FIELDS}
    return {name: (v, d) for name, (v, d) in both.items() if v != d}


def task_id(cfg: "TrainConfig") -> str:
    """:data:`DEFAULT_TASK` when `cfg` keeps every Fixed field (:data:`TASK_FIELDS`) at its
    default, else ``"custom-"`` + 8 hex characters of a SHA-1 of the changed fields and values:
    another task, whose solves never count as solves of this one (``measure.report.headline``)."""
    ch = task_changes(cfg)
    if not ch:
        return DEFAULT_TASK
    import hashlib
    import json

    key = json.dumps({k: v for k, (v, _) in sorted(ch.items())}, sort_keys=True, default=list)
    return "custom-" + hashlib.sha1(key.encode()).hexdigest()[:8]


def task_warning(cfg: "TrainConfig") -> str | None:
    """One line for a run that changes the task (None for the task itself): which Fixed fields
    differ and what that means for its rows."""
    ch = task_changes(cfg)
    if not ch:
        return None
    def show(x):  # 32.0 as 32, a pair as [1, 3]: the values as a person types them
        if isinstance(x, tuple):
            return "[" + ", ".join(show(e) for e in x) + "]"
        return f"{x:g}" if isinstance(x, float) else repr(x)

    fields = ", ".join(f"{k}={show(v)} (task: {show(d)})" for k, (v, d) in ch.items())
    return (f"this run changes the fixed task ({fields}): its rows are marked task={task_id(cfg)} "
            "and its solves never count as solves of the task (README \"The task\")")
