"""Configuration: the one place where fightlab's parameters live and are validated.

`EnvConfig` (the stance task), `PPOConfig` (the learner) and `TrainConfig` (a training run) hold
every default (`schema`); the headline time to solve always uses these defaults. Notebook
parameter cells mirror these fields. Each field's rule (type, range, choices) sits beside it
(``field(metadata=...)``, a :class:`Rule`, `rules`); :func:`check_fields` walks them,
:func:`check_cross` holds the rules across fields, and :func:`validate_train` is both. The task's
identity and reference physics: `task`. A refusal is a ConfigError naming the bad value and the
valid choices, so bad input never reaches warp as a traceback. Every public name of the package's
modules is importable from here.
"""

from __future__ import annotations

import dataclasses

from fightlab.bodies import BODY_NAMES, max_nu  # noqa: F401  (BODY_NAMES re-exported)
from fightlab.config.rules import (  # noqa: F401  (re-exported)
    BACKENDS, CRITIC_OBS, KL_ESTIMATORS, SYMMETRIES, MATMUL_PRECISIONS, MAX_BATCH_SAMPLES, MAX_EPISODE_STEPS,
    MAX_HIDDEN_LAYERS, MAX_HIDDEN_TOTAL, MAX_HIDDEN_WIDTH, MAX_ITERATIONS, MAX_KL_PER_ACTION,
    MAX_N_PHASE, MAX_NETWORK_PARAMS, MAX_NWORLD, MAX_OBS_HISTORY, MAX_SOLVER_ITERATIONS, MAX_SUBSTEPS,
    LEARNERS, LOGGERS, MAX_UPDATE_EPOCHS, SOLVER_LOOPS, Rule, _finite, _int, _number, at_least_0, cross, flag,
    idle_ppo_fields, in_range, int_text, integer, nested, network_params, one_of, pair, positive,
    short_repr, text, validate_backend, validate_body, validate_layout, validate_nworld,
    validate_policy_device)
from fightlab.config.schema import (BODY_PPO, RSL_RL_BODY_PPO, RSL_RL_PPO, EnvConfig,  # noqa: F401
                                    PPOConfig, TrainConfig, body_ppo, with_body)
from fightlab.config.task import (  # noqa: F401  (re-exported)
    DEFAULT_TASK, IMPLIED_FIELDS, MUJOCO_WARP_MIN_TOLERANCE, REFERENCE_CHECKS, REFERENCE_SOLVER,
    TASK_FIELDS, canonical_params, reference_env, task_changes, task_id, task_warning,
    training_physics)
from fightlab.errors import ConfigError


def check_fields(cfg) -> dict:
    """Walk a config's fields (EnvConfig, PPOConfig, TrainConfig; nested ones in turn) through
    each field's :class:`Rule`; returns ``{name: canonical value}`` of the fields whose rule
    changes it (nworld "8" → 8, device "cuda" → "cuda:0"). Raises ConfigError: the first field
    refused, one line naming it, the value and what it must be."""
    if not isinstance(cfg, (TrainConfig, EnvConfig, PPOConfig)):
        raise ConfigError(f"a config must be a TrainConfig, EnvConfig or PPOConfig, got {short_repr(cfg)}")
    prefix = "" if isinstance(cfg, TrainConfig) else f"{type(cfg).__name__}."
    out = {}
    for f in dataclasses.fields(cfg):
        r, v = f.metadata["rule"], getattr(cfg, f.name)
        if r.kind == "config":
            want = next(c for c in (EnvConfig, PPOConfig) if f.type in (c, c.__name__))  # its annotation
            if not isinstance(v, want):
                raise ConfigError(f"{prefix}{f.name} must be of type {want.__name__}, got {short_repr(v)}")
            check_fields(v)
        elif r.check is not None and (v2 := r.check(prefix + f.name, v)) is not v:
            out[f.name] = v2
    return out


def _check_env_cross(env: EnvConfig) -> None:
    """The EnvConfig rules across its fields: whole substeps, bounded, an episode's steps."""
    ratio = env.control_dt / env.timestep
    if round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-6:
        raise ConfigError(f"EnvConfig.control_dt ({env.control_dt}) must be a whole multiple of "
                          f"timestep ({env.timestep}), at least 1 physics substep per control step; "
                          f"got {ratio:g} substeps")
    if round(ratio) > MAX_SUBSTEPS:
        raise ConfigError(f"EnvConfig.timestep ({env.timestep!r}) gives {ratio:.3g} physics substeps "
                          f"per control step; at most {MAX_SUBSTEPS} (timestep >= control_dt / "
                          f"{MAX_SUBSTEPS} = {env.control_dt / MAX_SUBSTEPS:g} s)")
    if env.episode_s / env.control_dt > MAX_EPISODE_STEPS:
        raise ConfigError(f"EnvConfig.episode_s ({env.episode_s!r}) gives more than {MAX_EPISODE_STEPS} "
                          f"env steps per episode (control_dt = {env.control_dt!r} s; the env counts "
                          "steps in int32)")
    if env.episode_steps < 1 or env.episode_s < env.control_dt * (1 - 1e-9):
        raise ConfigError(f"EnvConfig.episode_s ({env.episode_s!r}) must be at least one control "
                          f"step (control_dt = {env.control_dt!r} s)")


def validate_env(cfg: EnvConfig) -> EnvConfig:
    """Check an EnvConfig (each field's rule, then the rules across fields); returns it.
    Raises ConfigError naming the field and its bad value."""
    check_fields(cfg)
    _check_env_cross(cfg)
    return cfg


def check_cross(cfg: TrainConfig) -> dict:
    """Every rule across a TrainConfig's fields, together (each field's own rule passed:
    :func:`check_fields`): the reference check's physics, MuJoCo Warp's tolerance, the CPU
    backend's layout and options, the samples an iteration holds, the KL per action, the
    curriculum's thresholds and stop stage, a learning-rate factor per stage. Returns the canonical policy device as a field dict.
    Raises ConfigError, one line."""
    env, p, nworld = cfg.env, cfg.ppo, cfg.nworld
    _check_env_cross(env)
    for label, frac in REFERENCE_CHECKS:  # a solve ends with these: checked before it trains
        t = env.timestep * frac
        try:
            validate_env(reference_env(env, t))
        except ConfigError as e:
            raise ConfigError(f"EnvConfig.timestep {env.timestep!r}: a solve's reference check also runs "
                              f"at {label} = {t:g} s, which fails: {e}") from None
    tol = env.solver_tolerance
    ref_tol = reference_env(env).solver_tolerance
    if cfg.backend == "gpu" and isinstance(tol, float) and tol < MUJOCO_WARP_MIN_TOLERANCE and tol != ref_tol:
        raise ConfigError(f"EnvConfig.solver_tolerance {tol:g} is below MuJoCo Warp's smallest, "
                          f"{MUJOCO_WARP_MIN_TOLERANCE:g} (its put_model raises it for float32): give "
                          f">= {MUJOCO_WARP_MIN_TOLERANCE:g}, or the reference's {ref_tol:g} (run as "
                          f"{MUJOCO_WARP_MIN_TOLERANCE:g})")
    validate_layout(cfg.backend, cfg.workers, cfg.worlds_per_worker, nworld, cfg.device)
    if nworld * p.num_steps > MAX_BATCH_SAMPLES:
        raise ConfigError(f"nworld × num_steps ({nworld} × {short_repr(p.num_steps)}) is more than "
                          f"{MAX_BATCH_SAMPLES:,} samples an iteration (the rollout keeps each on the "
                          "device): fewer worlds or steps")
    if (nworld * p.num_steps) % p.num_minibatches:
        raise ConfigError(f"nworld × num_steps ({nworld} × {p.num_steps}) must divide into "
                          f"num_minibatches={p.num_minibatches} equal minibatches")
    if not idle_ppo_fields(dataclasses.asdict(p)) and p.desired_kl_per_action > MAX_KL_PER_ACTION:
        raise ConfigError(f"PPOConfig.desired_kl_per_action must be a number in (0, {MAX_KL_PER_ACTION:g}] "
                          f"(× nu, up to {max_nu()} actions, a KL target ≤ 1 as desired_kl's), "
                          f"got {p.desired_kl_per_action!r}")
    if cfg.backend == "cpu" and cfg.solver_loop != "auto":
        raise ConfigError(f"solver_loop {cfg.solver_loop!r} is MuJoCo Warp's (backend gpu); the CPU backend's "
                          "C engine runs its own loop: leave solver_loop at auto there")
    v = cfg.min_episode_s
    if not (_number(v) and 0 <= v <= env.episode_s):
        raise ConfigError(f"min_episode_s must be a number in [0, {env.episode_s:g}] (episode_s: an "
                          f"episode never lasts longer), got {v!r}")
    n, st = len(cfg.curriculum_stages), cfg.stop_after_stage
    if st is not None and not (_int(st) and 0 <= st <= n - 2):
        raise ConfigError(f"stop_after_stage must be null or an integer in [0, {n - 2}] (a stage before "
                          f"the last of the {n}, which ends in the solve), got {st!r}"
                          if n > 1 else f"stop_after_stage must be null with a curriculum of one "
                          f"stage (it ends in the solve), got {st!r}")
    if p.stage_lr_scale is not None and len(p.stage_lr_scale) != n:
        raise ConfigError(f"ppo.stage_lr_scale must hold one factor per curriculum stage ({n}), got "
                          f"{len(p.stage_lr_scale)}: {short_repr(p.stage_lr_scale)}")
    if p.obs_history != 1 and cfg.stop_after_stage is None:
        raise ConfigError(f"ppo.obs_history={p.obs_history} needs stop_after_stage (a stage study): a policy of "
                          "stacked observations is not yet evaluated, which a solve ends with; or obs_history=1")
    return dict(policy_device=validate_policy_device(cfg.policy_device, cfg.backend))


def validate_train(cfg: TrainConfig) -> TrainConfig:
    """Check a TrainConfig: each field's rule (:func:`check_fields`), then the rules across
    fields (:func:`check_cross`); returns it with its canonical nworld, device and policy device.
    The one caller is the run's gate, `fightlab.run.launch.plan_run`. Raises ConfigError."""
    cfg = dataclasses.replace(cfg, **check_fields(cfg))
    return dataclasses.replace(cfg, **check_cross(cfg))


def stage_done(cfg: TrainConfig, stage: int) -> bool:
    """Whether a run at curriculum stage `stage` (int, 0 = the first) has passed
    `cfg.stop_after_stage` and so ends (False when that is None)."""
    st = cfg.stop_after_stage
    return isinstance(st, int) and not isinstance(st, bool) and stage > st


def coerce_field(cls, name: str, raw):
    """Parse `raw` (a string from the command line, or a JSON-decoded value) into the type of
    dataclass field `cls.name`, judged from its default and its :class:`Rule` (kind, optional).
    Raises ConfigError naming the field, the value and the expected type."""
    import json

    fields = {f.name: f for f in dataclasses.fields(cls)}
    if name not in fields:
        raise ConfigError(f"unknown field {name!r}; {cls.__name__} fields: {', '.join(fields)}")
    f = fields[name]
    rule = f.metadata["rule"]
    default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    val = raw
    if isinstance(raw, str):
        try:
            val = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON; or past Python's int-digit limit or nesting
            val = raw
    null = rule.optional and (val is None or (isinstance(val, str) and val.strip().lower() == "none"))

    def bad(expect):
        return ConfigError(f"{cls.__name__}.{name} must be {expect}, got {short_repr(raw)}")

    scalar = {"bool": (lambda v: isinstance(v, bool), bool, "true or false", ""),
              "int": (_int, int, "an integer", " or null"),
              "number": (_number, float, "a finite number", " or null (the rule in its docstring)")}
    if rule.kind in scalar:
        ok, conv, expect, or_null = scalar[rule.kind]
        if null or ok(val):
            return None if null else conv(val)
        raise bad(expect + (or_null if rule.optional else ""))
    if rule.kind in ("numbers", "pair"):
        if null:
            return None
        if not isinstance(val, (list, tuple)) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                         for x in val):
            raise bad("a list of numbers, e.g. [1, 2]")
        if rule.kind == "pair" and len(val) != 2:
            raise bad("a pair [min, max]")
        if default is not None and all(isinstance(x, int) for x in default):
            if not all(isinstance(x, int) for x in val):
                raise bad("a list of integers")
            return tuple(val)
        if not all(_finite(x) for x in val):
            raise bad("a list of finite numbers")
        return tuple(float(x) for x in val)  # [5, 10] is the same pair as [5.0, 10.0]
    if isinstance(val, str) or val is None:
        return val
    if isinstance(raw, str):
        return raw  # typed 1 or [1]: the string as given, so the field's own check names its choices
    raise bad("a string")


def apply_overrides(cfg: TrainConfig, items: list[str], own_flags: dict | None = None) -> TrainConfig:
    """Apply ``KEY=VALUE`` overrides (``--set``) to a TrainConfig: ``field``, ``env.field`` or
    ``ppo.field``, each value parsed into its field's type (:func:`coerce_field`); a key given
    twice, and both KL fields set with `desired_kl` not None, warn on stderr. `own_flags`: the
    TrainConfig fields that have a flag of their own, to the flag (refused here, the message
    naming the flag). Raises ConfigError naming a bad item, key or value.
    """
    import sys

    own_flags = own_flags or {}
    seen: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        if key in seen and seen[key] != raw:  # the last wins (a base list overridden), said once
            print(f"fightlab: warning: --set {key} given twice ({short_repr(seen[key])}, then "
                  f"{short_repr(raw)}): the last, {short_repr(raw)}, is used", file=sys.stderr, flush=True)
        seen[key] = raw
        parts = key.split(".")
        if len(parts) == 2 and parts[0] in ("env", "ppo"):
            cls = EnvConfig if parts[0] == "env" else PPOConfig
            other = {"env": PPOConfig, "ppo": EnvConfig}[parts[0]]
            if parts[1] not in {f.name for f in dataclasses.fields(cls)}:
                for owner, prefix in ((TrainConfig, ""), (other, "ppo." if other is PPOConfig else "env.")):
                    if parts[1] in {f.name for f in dataclasses.fields(owner)} - {"env", "ppo"}:
                        fix = (f"give {own_flags[parts[1]]}" if owner is TrainConfig and parts[1] in own_flags
                               else f"give --set {prefix}{parts[1]}={raw}")
                        raise ConfigError(f"unknown field {key!r}: {parts[1]!r} is a field of {owner.__name__}; {fix}")
            val = coerce_field(cls, parts[1], raw)
            sub = getattr(cfg, parts[0])
            cfg = dataclasses.replace(cfg, **{parts[0]: dataclasses.replace(sub, **{parts[1]: val})})
        elif len(parts) == 1 and key in own_flags:
            raise ConfigError(f"--set {key}=… is refused: {key!r} has its own flag ({own_flags[key]}); "
                              f"fields with their own flag: {', '.join(own_flags)}")
        elif len(parts) == 1 and parts[0] not in ("env", "ppo"):
            cfg = dataclasses.replace(cfg, **{key: coerce_field(TrainConfig, key, raw)})
        else:
            raise ConfigError(f"unknown field {key!r}; use a TrainConfig field, env.<field> or ppo.<field>")
    keys = {item.split("=", 1)[0] for item in items}
    if {"ppo.desired_kl", "ppo.desired_kl_per_action"} <= keys \
            and "desired_kl_per_action" in idle_ppo_fields(dataclasses.asdict(cfg.ppo)):
        print(f"fightlab: warning: ppo.desired_kl_per_action is ignored: ppo.desired_kl={cfg.ppo.desired_kl:g} "
              "sets the KL target (ppo.desired_kl=null uses the per-action rule)", file=sys.stderr, flush=True)
    return cfg


def to_dict(cfg) -> dict:
    """A JSON-ready dict of a (nested) config dataclass."""
    return dataclasses.asdict(cfg)


def from_dict(d: dict) -> TrainConfig:
    """Rebuild a TrainConfig from `to_dict` output (as stored in checkpoints).

    Raises ConfigError when a field is unknown (a checkpoint from another fightlab version)."""
    d = dict(d)

    def build(cls, items):
        names = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(items) - names)
        if extra:
            raise ConfigError(f"stored config has fields {extra} that this fightlab's {cls.__name__} "
                              "does not know (a checkpoint from another version?)")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in items.items()})

    missing = [k for k in ("body", "nworld", "seed", "env", "ppo") if k not in d]
    if missing:
        raise ConfigError(f"stored config lacks {missing} (a damaged or hand-edited checkpoint?)")
    try:
        env = build(EnvConfig, d.pop("env"))
        ppo = build(PPOConfig, d.pop("ppo"))
        d["curriculum_stages"] = tuple(d["curriculum_stages"])
        return build(TrainConfig, {**d, "env": env, "ppo": ppo})
    except (KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"stored config is incomplete or malformed ({type(e).__name__}: {e})") from None
