"""The three configs, every default beside its field's rule: `EnvConfig` (the stance task and
its reward weights), `PPOConfig` (the learner), `TrainConfig` (a run); `BODY_PPO`, each body's
default learner (`body_ppo`, `with_body`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fightlab.config.rules import (
    CRITIC_OBS, KL_ESTIMATORS, SYMMETRIES, MATMUL_PRECISIONS, MAX_HIDDEN_LAYERS, MAX_HIDDEN_TOTAL, MAX_HIDDEN_WIDTH,
    MAX_ITERATIONS, MAX_N_PHASE, MAX_NETWORK_PARAMS, MAX_NWORLD, MAX_OBS_HISTORY, MAX_SOLVER_ITERATIONS, MAX_UPDATE_EPOCHS,
    LEARNERS, LOGGERS, SOLVER_LOOPS, _custom, _int, _number, _rule, _upto, at_least_0, cross, flag, in_range, integer, nested,
    network_params, one_of, pair, positive, short_repr, text, validate_backend, validate_body,
    validate_nworld)
from fightlab.devices import validate_device
from fightlab.errors import ConfigError
from fightlab.bodies import max_nu
from fightlab.paths import RUNS


def _hidden(label, h):
    """PPOConfig.hidden: positive widths, bounded depth, width, sum and parameters."""
    if not isinstance(h, (tuple, list)) or not h or not all(_int(x) and x > 0 for x in h):
        raise ConfigError(f"{label} must be positive integers, got {h!r}")
    if len(h) > MAX_HIDDEN_LAYERS:
        raise ConfigError(f"{label} may have at most {MAX_HIDDEN_LAYERS} layers, got {len(h)}")
    if max(h) > MAX_HIDDEN_WIDTH:
        raise ConfigError(f"{label}'s layers must be at most {MAX_HIDDEN_WIDTH} wide (the update's "
                          f"activations grow with minibatch × width), got {max(h)} in {list(h)}")
    if sum(h) > MAX_HIDDEN_TOTAL:
        raise ConfigError(f"{label}'s widths may add up to at most {MAX_HIDDEN_TOTAL} (the "
                          f"update's activations grow with their sum), got {sum(h)}")
    if (n := network_params(h)) > MAX_NETWORK_PARAMS:
        raise ConfigError(f"{label} {list(h)} gives {n:,} network parameters (actor and critic, "
                          f"{max_nu()} actions); at most {MAX_NETWORK_PARAMS:,}")
    return h


def _stages(label, v):
    stages = tuple(v) if isinstance(v, (tuple, list)) else ()
    if not stages or not all(_number(a) for a in stages) \
            or any(b <= a for a, b in zip(stages, stages[1:])) or not 0 < stages[-1] <= 1:
        raise ConfigError(f"{label} must rise within (0, 1], got {stages!r}")
    return v


def _stage_lr_scale(label, v):
    """PPOConfig.stage_lr_scale: None or positive finite factors (their count: `check_cross`)."""
    if v is not None and not (isinstance(v, (tuple, list)) and v and all(_number(x) and x > 0 for x in v)):
        raise ConfigError(f"{label} must be null or positive numbers, one per curriculum stage, got {short_repr(v)}")
    return v


#: the rule of the fields of EnvConfig and of TrainConfig (own body, nworld, device, backend)
#: whose check is a validate_* function of its own (called directly elsewhere too)
_BODY = _custom("text", lambda label, v: validate_body(v))
_NWORLD = _custom("int", lambda label, v: validate_nworld(v))
_DEVICE = _custom("text", lambda label, v: validate_device(v))
_BACKEND = _custom("text", lambda label, v: validate_backend(v))


@dataclass(frozen=True)
class EnvConfig:
    """The stance task: hold a fighting stance, keep a 2 Hz bounce, survive pushes.

    Times in seconds, forces in N, impulses in N·s, angles in rad, lengths in m.

    Attributes:
      control_dt: env (policy) step, 0.02 s = 50 Hz control.
      timestep: physics timestep, `substeps = control_dt / timestep` (5).
      episode_s: episode length (500 env steps).
      rhythm_hz: bounce frequency (a boxer's bounce).
      bounce_m: pelvis bounce amplitude at amplitude a = 1. More would lift the feet off the floor
        at 2 Hz: (2π·2 Hz)²·0.03 m = 4.7 m/s² downward is already half of g.
      arm_sway_rad: guard sway of shoulders/elbows at a = 1.
      n_phase: rows of the stacked reference table (one period sampled at n_phase points).
      amplitude_ramp_s: a widening ramps the reference amplitude over this time in all worlds.
      push_interval_s, push_impulse_ns: (min, max) time between pushes and impulse, uniform;
        push_duration_s: one push, a constant horizontal force on the torso (impulse / duration).
      tilt_fall_deg: a fall when the torso's z axis tilts more than this from vertical.
      action_scale_rad: action in [-1, 1] → position target offset ± this around the reference.
      init_noise_rad: joint-angle noise at reset (uniform ±).
      w_alive, w_pose, w_bounce, w_upright, w_action_rate: reward term weights (their
        `fightlab.envs.rewards.REWARD_TERMS` entries name these fields); fall_penalty: per fall.
      solver_iterations, solver_ls_iterations, solver_tolerance, solver_ls_tolerance: the
        training physics' Newton solver (MuJoCo's `opt.iterations`, `opt.ls_iterations`,
        `opt.tolerance`, `opt.ls_tolerance`), the learner's choice: every solve's final policy is
        checked in the reference physics (:data:`REFERENCE_SOLVER`, `fightlab.run.reference`).
      solver_qacc_smooth: MuJoCo Warp's `opt.run_qacc_smooth`: False starts Newton from the warm
        start and skips qacc_smooth and its factorisation (mujoco_warp `smooth.skip_qacc_smooth`,
        "experimental" there); the CPU backend's C engine always computes it (rows record the
        physics it ran, `physics_engine`).
      solver_eulerdamp: MuJoCo's `eulerdamp`: True integrates joint damping implicitly, factorising
        M + h·D every physics step; False (`mjDSBL_EULERDAMP`) applies it explicitly, stable here:
        h·damping / M_ii ≤ 0.75 at the keyframe for every DOF of both bodies (explicit needs < 2).
    """

    control_dt: float = field(default=0.02, metadata=positive())
    timestep: float = field(default=0.004, metadata=positive())
    episode_s: float = field(default=10.0, metadata=positive())
    rhythm_hz: float = field(default=2.0, metadata=positive())
    bounce_m: float = field(default=0.03, metadata=at_least_0())
    arm_sway_rad: float = field(default=0.08, metadata=at_least_0())
    n_phase: int = field(default=100, metadata=integer(4, MAX_N_PHASE, show=short_repr))
    amplitude_ramp_s: float = field(default=1.0, metadata=positive())
    push_interval_s: tuple[float, float] = field(
        default=(1.0, 3.0), metadata=pair("must be (min, max) with 0 < min <= max", lo_open=True))
    push_duration_s: float = field(default=0.1, metadata=positive())
    push_impulse_ns: tuple[float, float] = field(
        default=(15.0, 30.0), metadata=pair("must be (min, max) with 0 <= min <= max", lo_open=False))
    tilt_fall_deg: float = field(default=60.0, metadata=_rule("number", "must be in (0, 180]",
                                                              lambda v: _number(v) and 0 < v <= 180))
    action_scale_rad: float = field(default=0.3, metadata=positive())
    init_noise_rad: float = field(default=0.02, metadata=at_least_0())
    w_alive: float = field(default=1.0, metadata=at_least_0())
    w_pose: float = field(default=1.0, metadata=at_least_0())
    w_bounce: float = field(default=1.0, metadata=at_least_0())
    w_upright: float = field(default=0.5, metadata=at_least_0())
    w_action_rate: float = field(default=0.1, metadata=at_least_0())
    fall_penalty: float = field(default=10.0, metadata=at_least_0())
    solver_iterations: int = field(default=2, metadata=integer(1, MAX_SOLVER_ITERATIONS))
    solver_ls_iterations: int = field(default=4, metadata=integer(1, MAX_SOLVER_ITERATIONS))
    solver_tolerance: float = field(default=1e-8, metadata=in_range(0, 1, cross=True))
    solver_ls_tolerance: float = field(default=0.01, metadata=in_range(0, 1))
    solver_qacc_smooth: bool = field(default=False, metadata=flag())
    solver_eulerdamp: bool = field(default=False, metadata=flag())

    @property
    def substeps(self) -> int:
        """Physics steps per env step (5 with the defaults)."""
        return int(round(self.control_dt / self.timestep))

    @property
    def episode_steps(self) -> int:
        """Env steps per episode (500 with the defaults)."""
        return int(round(self.episode_s / self.control_dt))


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (CleanRL's ppo_continuous_action names; rsl_rl's adaptive lr). A
    TrainConfig's default learner is its body's (:func:`body_ppo`: these with :data:`BODY_PPO`).

    Attributes:
      num_steps: env steps per world per iteration (rollout length).
      num_minibatches, update_epochs: the batch of num_steps × nworld samples is split into
        num_minibatches per epoch.
      learning_rate: Adam step size; with `adaptive_lr` it is scaled ×1.5 / ÷1.5 to keep the
        policy KL near the KL target (rsl_rl, Rudin et al. 2022, "Learning to walk in minutes").
      desired_kl: the KL target, or None: `desired_kl_per_action` × the action count nu
        (`kl_target`), so bodies with more actions move each action's mean alike (the KL of a
        diagonal Gaussian is a sum over actions).
      gamma, gae_lambda: discount and GAE λ (Schulman et al. 2016).
      clip_coef: PPO ratio clip (Schulman et al. 2017).
      vf_coef, ent_coef: loss weights.
      max_grad_norm: global gradient-norm clip.
      hidden: actor and critic MLP hidden sizes; init_std: initial action std.
      critic_obs: what the value function sees, one of `CRITIC_OBS`: "policy" (the policy's
        observation) or "privileged" (an asymmetric critic, Pinto et al. 2018: the policy's
        observation and the env's privileged one: the push acting now and the time to the next,
        the time into the episode, every DOF's velocity; `envs.stance` lists it). The policy's
        observation is the same either way.
      critic_learning_rate: None: one Adam group, the critic at the actor's rate, which the KL
        rule moves; a number in (0, 1]: the critic's parameters in an Adam group of their own at
        this fixed rate (the KL rule then moves the actor's and log-std's rate only): the KL
        rule is about the policy's step, and slows the value function with it.
      matmul_precision: torch's float32 matrix-product precision for the policy and the update,
        one of `MATMUL_PRECISIONS` (`torch.set_float32_matmul_precision`): "highest" (full
        float32) or "high" (TensorFloat-32 on NVIDIA GPUs since Ampere: 10-bit mantissa
        products, float32 sums; a CPU computes in full float32 either way). A learner field.
      kl_estimator: the KL the adaptive rate reads (and the rows' `approx_kl`), one of
        `KL_ESTIMATORS`: "k3" (Schulman's sampled estimator from the log-ratio of the taken
        actions, as CleanRL's approx_kl; heavy-tailed with many actions) or "analytic" (the
        closed-form KL(old ‖ new) of the two diagonal Gaussians, summed over actions: rsl_rl's;
        the rollout then keeps each step's action mean).
      symmetry: the task's left–right mirror in the update (the door's `mirror_maps`), one of
        `SYMMETRIES`, after rsl_rl's `extensions/symmetry.py` (Mittal et al. 2024, "Symmetry
        considerations for learning task symmetric robot policies"): "none"; "augment" (each
        minibatch doubled with its mirrored samples: observations, actions, the same advantages
        and returns, and the original sample's old log-probability, as rsl_rl's: recomputed for
        the mirrored action under an asymmetric policy it overflowed the ratio); "loss" (adds `symmetry_coef` × the mean
        squared difference of π(mirror(o)) and mirror(π(o)), the action means, the second held
        fixed).
      symmetry_coef: the mirror loss's weight (≥ 0; read by "loss" only).
      stage_lr_scale: None, or one positive factor per curriculum stage (as many as
        `TrainConfig.curriculum_stages`): the rate starts at learning_rate × the first, and when
        the curriculum widens into stage k it is reset to learning_rate × factor k (the KL rule
        then adapts from there). A reset, not a multiply: each stage's rate is read off the
        config, the factors never compound, and the adaptive rate restarts at a known place on
        a task that has just changed. The critic's own rate (`critic_learning_rate`) is kept.
      obs_history: H in [1, `MAX_OBS_HISTORY`], the policy observations the actor and the critic
        see: the last H stacked, newest first, [nworld, H × obs_dim] float32 (`rl.history`); 1:
        the current one alone. A world's reset fills its history with its new first observation;
        the normaliser's statistics are per observation (obs_dim), applied to each block. H > 1
        only in a stage study (`stop_after_stage`): its policy is not yet evaluated or exported.
    """

    num_steps: int = field(default=32, metadata=integer(1, says="must be a positive integer"))
    num_minibatches: int = field(default=4, metadata=integer(1, says="must be a positive integer"))
    update_epochs: int = field(default=5, metadata=_custom("int", _upto(
        "must be a positive integer", MAX_UPDATE_EPOCHS, f"must be at most {MAX_UPDATE_EPOCHS}")))
    learning_rate: float = field(default=1e-3, metadata=in_range(0, 1))
    adaptive_lr: bool = field(default=True, metadata=flag())
    desired_kl: float | None = field(default=None, metadata=in_range(0, 1, optional=True))
    desired_kl_per_action: float = field(default=0.002, metadata=in_range(0, 1, cross=True))
    gamma: float = field(default=0.99, metadata=in_range(0, 1))
    gae_lambda: float = field(default=0.95, metadata=in_range(0, 1))
    clip_coef: float = field(default=0.3, metadata=in_range(0, 1))
    vf_coef: float = field(default=1.0, metadata=at_least_0())
    ent_coef: float = field(default=0.0, metadata=at_least_0())
    max_grad_norm: float = field(default=1.0, metadata=in_range(0, 1e6))
    hidden: tuple[int, ...] = field(default=(256, 128, 64), metadata=_custom("numbers", _hidden))
    init_std: float = field(default=0.3, metadata=in_range(0, 10))
    critic_obs: str = field(default="policy", metadata=one_of(CRITIC_OBS))
    critic_learning_rate: float | None = field(default=None, metadata=in_range(0, 1, optional=True))
    matmul_precision: str = field(default="highest", metadata=one_of(MATMUL_PRECISIONS))
    kl_estimator: str = field(default="k3", metadata=one_of(KL_ESTIMATORS))
    symmetry: str = field(default="none", metadata=one_of(SYMMETRIES))
    symmetry_coef: float = field(default=1.0, metadata=at_least_0())
    stage_lr_scale: tuple[float, ...] | None = field(default=None, metadata=_custom(
        "numbers", _stage_lr_scale, optional=True, cross=True))
    obs_history: int = field(default=1, metadata=integer(1, MAX_OBS_HISTORY))

    def kl_target(self, nu: int) -> float:
        """The adaptive rate's KL target for a policy of `nu` actions: `desired_kl` if set, else
        `desired_kl_per_action` × nu (dimensionless, nats)."""
        return float(self.desired_kl) if self.desired_kl is not None else self.desired_kl_per_action * nu


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Attributes:
      body: one of `BODY_NAMES`; nworld: parallel worlds; device: "cpu", "cuda" or "cuda:N".
      seed: RNG seed for torch and the env.
      max_iterations: stop after this many iterations even if unsolved.
      curriculum_stages: the amplitude stages, 0.1 … 1.0.
      curriculum_wait: W, iterations to wait after each widening (and at the start) before the
        next check; the check looks at episodes finished in the last W iterations.
      max_fall_rate, min_tracking, min_episode_s: the widening / solve thresholds.
      checkpoint_every: iterations between checkpoints (0: only at the end).
      run_dir: where rows, checkpoints and logs go (runs/ is git-ignored; a relative path is
        relative to the current directory).
      resume: checkpoint path to continue from (same curriculum state).
      stop_when_solved: end the run at the solving iteration.
      stop_after_stage: None, or end the run when the curriculum widens past this stage (0 = a
        0.1; at most the stage before the last): a study of the first stages. Such a run cannot
        solve: its row says solved False, and the reports count its stages
        (`measure.report.stage_table`), never it as an unsolved training.
      graph: capture the env step as a graph (CUDA graph, or warp's CPU graph).
      policy_graph, update_graph: capture the rollout's torch work between env steps and the PPO
        update as torch CUDA graphs (fightlab.rl.graphs; CUDA only, eager elsewhere).
      tree_factor: factor M of trees over 64 DOF (muscular-fast) with fightlab's single-launch
        kernel (fightlab.kernels.factor) instead of MuJoCo Warp's per-level sparse path.
      time_limit_s: None, or end the run unsolved once its training time (`elapsed_s`, every
        segment's iterations, not compiling) reaches this many seconds: a budget within which a
        run counts as unsolved (its row says solved False), as `max_iterations` in seconds.
      study: None, or a name tagging the run as part of a study (e.g. "side_by_side", the
        learners side by side: `measure.sidebyside`); kept in the row's params, it changes no id.
      segment_s: optional wall-clock budget for this segment (a checkpoint is written and the run
        stops when it is exceeded; continue with `resume`).
      backend: the env's physics, one of `BACKENDS`: "gpu" = MuJoCo Warp on `device` (a GPU, or
        warp's CPU device for smoke checks); "cpu" = MuJoCo's C engine on a thread pool
        (fightlab.sim.cpu; `device` must be "cpu"). `train --backend` also takes warp (= gpu) and
        mujoco (= cpu).
      workers, worlds_per_worker: the CPU backend's layout, W threads × K worlds (None: W = every
        core; K = nworld / W, or None where W does not divide nworld: the workers' shares then
        differ by one, and rows record worlds_per_worker_max = ceil(nworld / W); given both,
        nworld must be W × K). Unused by "gpu".
      policy_device: where torch's policy, rollout buffer and PPO update run on the "cpu"
        backend (None: on `device`; "cuda:N": a GPU beside the CPU physics, the env's
        observation, reward and done copied to it and the action back at every env step,
        `fightlab.rl.env_io.PolicyIO`, a counted host read). Only with backend "cpu".
      solver_loop: how the training physics' Newton solve runs, one of `SOLVER_LOOPS`:
        "single_launch" (fightlab's one-launch Newton solve, `fightlab.kernels.newton`, equal to
        MuJoCo Warp's to float32 rounding; a body it does not take runs MuJoCo Warp's after one
        line naming why), MuJoCo Warp's "conditional" (a conditional graph node that stops when
        every world has converged) or "unrolled" (the capped iterations launched in a row;
        converged worlds skip them: the same physics), "auto" (the single launch on a CUDA
        device of the "gpu" backend, `sim.physics.training_solver_loop`; else MuJoCo Warp's
        loop, unrolled up to 4 iterations). Evaluation and the reference check keep MuJoCo
        Warp's solve. Not the learner's: the single launch's rows are a group of their own
        (`measure.summary.config_id`), the learner id is the same.
      learner: who learns the task, one of `LEARNERS`: "fightlab" (fightlab's PPO, `ppo`) or
        "rsl_rl" (rsl_rl's OnPolicyRunner, `fightlab.run.rsl`; its `ppo` defaults are
        :data:`RSL_RL_PPO`, mapped to rsl_rl's settings; the fields rsl_rl cannot take are refused).
      logger: run tracking, one of `LOGGERS` (`fightlab.run.tracking`): every row's numbers as
        TensorBoard scalars in the run folder (event files, "tensorboard"; "auto", the default: that
        where the tensorboard package is installed), to Weights & Biases, or none; rows.csv is
        written either way. How a run is launched: a resume may change it.
      reference_nworld: worlds of the reference check a solved run ends with
        (`fightlab.run.reference`; a published training needs `publish.MIN_PUBLISH_NWORLD`).
    """

    body: str = field(default="simple", metadata=_BODY)
    nworld: int = field(default=1024, metadata=_NWORLD)
    device: str = field(default="cpu", metadata=_DEVICE)
    seed: int = field(default=0, metadata=integer(0, says="must be an integer in [0, 2**31)",
                                                 hi=2**31 - 1))
    max_iterations: int = field(default=1500, metadata=_custom("int", _upto(
        "must be a positive integer", MAX_ITERATIONS,
        f"must be at most {MAX_ITERATIONS} (a solve takes a few hundred)")))
    curriculum_stages: tuple[float, ...] = field(default=tuple(round(0.1 * i, 1) for i in range(1, 11)),
                                                 metadata=_custom("numbers", _stages))
    curriculum_wait: int = field(default=32, metadata=integer(1, MAX_ITERATIONS, show=short_repr))
    max_fall_rate: float = field(default=0.05, metadata=_rule(
        "number", "must be a number in [0, 1]", lambda v: _number(v) and 0 <= v <= 1))
    min_tracking: float = field(default=0.75, metadata=_rule(
        "number", "must be a number in >= 0, finite", lambda v: _number(v) and v >= 0))
    min_episode_s: float = field(default=9.5, metadata=cross("number"))
    checkpoint_every: int = field(default=50, metadata=integer(0, says="must be an integer >= 0"))
    run_dir: str = field(default=str(RUNS / "train"), metadata=text("must name a folder"))
    resume: str | None = field(default=None, metadata=text("must name a checkpoint file", optional=True))
    stop_when_solved: bool = field(default=True, metadata=flag())
    stop_after_stage: int | None = field(default=None, metadata=cross("int", optional=True))
    graph: bool = field(default=True, metadata=flag())
    policy_graph: bool = field(default=True, metadata=flag())
    update_graph: bool = field(default=True, metadata=flag())
    tree_factor: bool = field(default=True, metadata=flag())
    solver_loop: str = field(default="auto", metadata=one_of(SOLVER_LOOPS))
    learner: str = field(default="fightlab", metadata=one_of(LEARNERS))
    logger: str = field(default="auto", metadata=one_of(LOGGERS))
    reference_nworld: int = field(default=256, metadata=integer(1, MAX_NWORLD))
    time_limit_s: float | None = field(default=None, metadata=_rule(
        "number", "must be a positive number of seconds or null",
        lambda v: _number(v) and v > 0, optional=True))
    study: str | None = field(default=None, metadata=text("must be a study's name or null", optional=True))
    segment_s: float | None = field(default=None, metadata=_rule(
        "number", "must be a positive number of seconds",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0, optional=True))
    backend: str = field(default="gpu", metadata=_BACKEND)
    workers: int | None = field(default=None, metadata=integer(1, says="must be a positive integer",
                                                               optional=True))
    worlds_per_worker: int | None = field(default=None, metadata=integer(
        1, says="must be a positive integer", optional=True))
    policy_device: str | None = field(default=None, metadata=cross("text", optional=True))
    env: EnvConfig = field(default_factory=EnvConfig, metadata=nested())
    ppo: PPOConfig = field(default=None, metadata=nested())  # type: ignore[assignment]  # None: the body's defaults, body_ppo(body)

    def __post_init__(self):
        if self.ppo is None:  # the learner's defaults are the body's and the learner's (body_ppo)
            object.__setattr__(self, "ppo", body_ppo(self.body, self.learner))


#: the PPOConfig fields whose default differs per body, over PPOConfig's own: each body's entry
#: is the learner of its solo headline (the learner studies of bench/NOTES.md, "stage 0")
BODY_PPO: dict[str, dict] = {
    "simple": {"clip_coef": 0.6, "desired_kl_per_action": 0.006, "gae_lambda": 0.9},
    "muscular-fast": {"hidden": (1024, 512, 256), "clip_coef": 0.5, "desired_kl_per_action": 0.004,
                      "matmul_precision": "high"},
}


#: the PPOConfig of ``--learner rsl_rl`` (its own defaults, for every body): mjlab's Unitree G1
#: velocity PPO (mjlab, ``src/mjlab/tasks/velocity/config/g1/rl_cfg.py``,
#: ``unitree_g1_ppo_runner_cfg``) in PPOConfig's names; `fightlab.run.rsl.train_cfg` maps them to
#: rsl_rl's. The rollout length stays the task's (`num_steps` 32; mjlab's 24): the curriculum
#: checks every 32 env steps. rsl_rl's KL is the analytic one.
RSL_RL_PPO: dict = {"hidden": (512, 256, 128), "init_std": 1.0, "learning_rate": 1e-3, "adaptive_lr": True,
                    "desired_kl": 0.01, "kl_estimator": "analytic", "clip_coef": 0.2, "ent_coef": 0.01,
                    "vf_coef": 1.0, "update_epochs": 5, "num_minibatches": 4, "gamma": 0.99,
                    "gae_lambda": 0.95, "max_grad_norm": 1.0}


#: rsl_rl's per-body settings over :data:`RSL_RL_PPO`, from its tuning study (bench/NOTES.md,
#: "rsl_rl's tuning study"; rows in data/results/train.csv): simple's initial std 0.3 ended stage 0
#: in 341.5 iterations (mean of 2 seeds, packed) against mjlab's 1.0's 459
RSL_RL_BODY_PPO: dict[str, dict] = {"simple": {"init_std": 0.3}}


def body_ppo(body, learner: str = "fightlab") -> PPOConfig:
    """The default learner settings of `body` (a name of `BODY_NAMES`) for `learner` (one of
    `LEARNERS`): fightlab's, PPOConfig's defaults with the body's :data:`BODY_PPO` entries
    (PPOConfig's own for a name without one: an unknown body is refused later, by
    `validate_train`, in one line); rsl_rl's, :data:`RSL_RL_PPO` and the body's
    :data:`RSL_RL_BODY_PPO` over PPOConfig's."""
    if learner == "rsl_rl":
        own = RSL_RL_BODY_PPO.get(body, {}) if isinstance(body, str) else {}
        return dataclasses.replace(PPOConfig(), **{**RSL_RL_PPO, **own})
    entry = BODY_PPO.get(body) if isinstance(body, str) else None
    return dataclasses.replace(PPOConfig(), **entry) if entry else PPOConfig()


def with_body(cfg: "TrainConfig", body: str) -> "TrainConfig":
    """`cfg` for another body: its PPO fields that differ from its own body's defaults
    (:func:`body_ppo`: what a template or ``--set`` changed) kept over `body`'s defaults, every
    other field as it is. Use it, not ``dataclasses.replace(cfg, body=...)``, which would carry
    the first body's default learner to the second."""
    old, new = body_ppo(cfg.body, cfg.learner), body_ppo(body, cfg.learner)
    changed = {f.name: getattr(cfg.ppo, f.name) for f in dataclasses.fields(PPOConfig)
               if getattr(cfg.ppo, f.name) != getattr(old, f.name)}
    return dataclasses.replace(cfg, body=body, ppo=dataclasses.replace(new, **changed))

