"""Configuration dataclasses: the one place where fightlab's parameters live and are validated.

`EnvConfig` (the stance task), `PPOConfig` (the learner) and `TrainConfig` (a training run) hold
every default; the headline time to solve always uses these defaults. Notebook parameter cells
mirror these fields. Each field's rule (type, range, choices) sits beside it
(``field(metadata=...)``, a :class:`Rule`); :func:`check_fields` walks them, :func:`check_cross`
holds the rules across fields, and :func:`validate_train` is both. A refusal is a ConfigError
naming the bad value and the valid choices, so bad input never reaches warp as a traceback.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Callable

from fightlab.bodies import BODY_NAMES, max_nu
from fightlab.devices import validate_device
from fightlab.errors import ConfigError
from fightlab.paths import RUNS

#: how MuJoCo Warp runs the Newton loop (`TrainConfig.solver_loop`; `fightlab.sim.physics`
#: resolves "auto" and sets the model's `opt.graph_conditional`)
SOLVER_LOOPS = ("auto", "conditional", "unrolled")

#: what the value function may see (`PPOConfig.critic_obs`)
CRITIC_OBS = ("policy", "privileged")

#: torch's float32 matmul precisions a learner may use (`PPOConfig.matmul_precision`); "medium"
#: (bfloat16 products) is left out: untested here
MATMUL_PRECISIONS = ("highest", "high")

#: the KLs the adaptive rate may read (`PPOConfig.kl_estimator`)
KL_ESTIMATORS = ("k3", "analytic")


#: physics backends of the env: "gpu" = MuJoCo Warp on the run's device (a GPU, or warp's CPU
#: device for smoke checks), "cpu" = MuJoCo's C engine on a thread pool (fightlab.sim.cpu), the
#: env's kernels on warp's CPU device
BACKENDS = ("gpu", "cpu")


def validate_backend(backend) -> str:
    """Return `backend` if it is one of :data:`BACKENDS`, else raise ConfigError naming the choices."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    return backend


def validate_body(body) -> str:
    """Return `body` if it names a known body, else raise ValueError listing the bodies."""
    if not isinstance(body, str) or body not in BODY_NAMES:
        raise ConfigError(f"unknown body {body!r}; valid bodies: {', '.join(BODY_NAMES)}")
    return body


def int_text(s) -> int | None:
    """``s`` as an int when it is ASCII decimal text (optional sign, spaces around), else None
    (str.isdigit also accepts digits such as "²" that int() rejects)."""
    if isinstance(s, str) and re.fullmatch(r"[+-]?[0-9]+", s.strip()):
        return int(s.strip())
    return None


#: largest world count accepted (2**22): larger asks warp for more memory than any card has
MAX_NWORLD = 1 << 22


def validate_nworld(nworld) -> int:
    """Return `nworld` as int if it is a positive integer, else raise ValueError naming it."""
    if isinstance(nworld, bool) or not isinstance(nworld, int):
        if isinstance(nworld, float) and nworld.is_integer():
            nworld = int(nworld)
        elif int_text(nworld) is not None:
            nworld = int_text(nworld)
        else:
            raise ConfigError(f"nworld must be a positive integer, got {nworld!r}")
    if nworld <= 0:
        raise ConfigError(f"nworld must be a positive integer, got {nworld!r}")
    if nworld > MAX_NWORLD:
        raise ConfigError(f"nworld must be at most {MAX_NWORLD} (far beyond any GPU's memory for "
                          f"these bodies), got {nworld!r}")
    return nworld


#: the widest hidden layer PPOConfig.hidden may ask for: 16 × the default's widest (256). The
#: update holds minibatch × width float32 activations per layer: at 16384 worlds (the sweep's
#: largest), 32 steps and 4 minibatches, 131072 × 4096 × 4 B = 2 GiB each
MAX_HIDDEN_WIDTH = 4096
#: at most this many hidden layers (the default has 3): the update holds each layer's
#: activations and launches kernels per layer, so depth costs memory and time as width does
MAX_HIDDEN_LAYERS = 16
#: the hidden layers' widths may add up to at most 4 of the widest (8 GiB of activations in the
#: example above): a deep narrow network holds as much as a few wide layers
MAX_HIDDEN_TOTAL = 4 * MAX_HIDDEN_WIDTH
#: the most weights and biases the actor and critic may hold together (for the body of the most
#: actions, `bodies.max_nu`): 40 million, ~180 × the default network's (two 4096-wide layers fit);
#: Adam keeps four float32 copies (weights, gradients, two moments), 640 MB, a checkpoint three
MAX_NETWORK_PARAMS = 40_000_000


def network_params(hidden, nu: int | None = None) -> int:
    """Weights and biases of the actor [obs, *hidden, nu] and critic [obs, *hidden, 1] MLPs plus the
    action log-std (fightlab.rl.models.ActorCritic), for a body of `nu` actions whose observation
    has 13 + 3·nu features (fightlab.envs.stance's layout); `nu` None: the body of the most
    actions (`fightlab.bodies.max_nu`)."""
    nu = max_nu() if nu is None else nu
    obs = 13 + 3 * nu

    def mlp(sizes):
        return sum(a * b + b for a, b in zip(sizes, sizes[1:]))

    return mlp([obs, *hidden, nu]) + mlp([obs, *hidden, 1]) + nu


#: most solver or line-search iterations a config may ask for (MuJoCo's default is 100, the
#: reference physics 10 / 20): more only costs time
MAX_SOLVER_ITERATIONS = 1000

#: most samples one iteration may collect, nworld × num_steps (2**24): the rollout keeps every
#: sample's observation and value in float32 on the device, ~1 KiB a sample with the
#: muscular-fast observation and the privileged critic, so 16 GiB here; the sweep's largest is
#: 16384 × 32 = 2**19
MAX_BATCH_SAMPLES = 1 << 24

#: most iterations a training (or a curriculum wait) may ask for: a solve takes a few hundred, and
#: 10**7 at the fastest 0.1 s an iteration is 12 days
MAX_ITERATIONS = 10_000_000

#: most update epochs (each a pass over every sample): 5 by default, more than 1000 only spins
MAX_UPDATE_EPOCHS = 1000

#: most env steps in one episode: the env's step counters are int32 (2**31 - 1)
MAX_EPISODE_STEPS = (1 << 31) - 1

def short_repr(v, limit: int = 80) -> str:
    """``repr(v)``, cut to its first 60 characters with its length said when longer than
    ``limit`` (a 5000-digit value stays a one-line error)."""
    r = repr(v)
    return r if len(r) <= limit else f"{r[:60]}… ({len(r)} characters)"


#: most phase bins of the rhythm observation (EnvConfig.n_phase): a one-hot per world
MAX_N_PHASE = 4096

#: most physics substeps per control step a config may ask for (a tiny timestep would otherwise
#: run for hours without a word); the task's default is 5
MAX_SUBSTEPS = 1000


#: the per-action KL target whose total over the body of the most actions stays ≤ 1, desired_kl's
#: own bound (0.012 × 83 actions of muscular-fast ≈ 1)
MAX_KL_PER_ACTION = 0.012


# --- rules: each field's, declared beside it; one walker (`check_fields`), one cross check ----

@dataclass(frozen=True)
class Rule:
    """A config field's rule, declared beside the field (``field(metadata=...)``).

    Attributes:
      kind: the value's type as `coerce_field` reads text: "number", "int", "bool", "text",
        "numbers" (a list), "pair" ([min, max]), "config" (a nested config, walked in turn).
      check: ``(label, value) -> value`` (canonical) or a ConfigError naming `label`, the value
        and what it must be; None: only the cross rules (:func:`check_cross`) judge it.
      optional: None is a value (not given, or the rule in the field's docstring).
      cross: its range is set by other fields, checked in :func:`check_cross`.
    """

    kind: str
    check: Callable | None = None
    optional: bool = False
    cross: bool = False


def _finite(x) -> bool:
    try:
        return math.isfinite(x)
    except (OverflowError, TypeError):  # an int too large for a float; not a number
        return False


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rule(kind: str, says: str, ok: Callable, optional: bool = False, show: Callable = repr,
          cross: bool = False) -> dict:
    """A field's metadata: a :class:`Rule` refusing a value `ok` rejects with ``"{label} {says},
    got {show(value)}"`` (None passes when `optional`)."""
    def check(label, v):
        if not (optional and v is None) and not ok(v):
            raise ConfigError(f"{label} {says}, got {show(v)}")
        return v
    return {"rule": Rule(kind, check, optional, cross)}


def _custom(kind: str, check: Callable, optional: bool = False, cross: bool = False) -> dict:
    """A field's metadata: a :class:`Rule` with its own ``check(label, value)``."""
    return {"rule": Rule(kind, check, optional, cross)}


def positive(says: str = "must be a positive number") -> dict:
    return _rule("number", says, lambda v: _number(v) and v > 0)


def at_least_0() -> dict:
    return _rule("number", "must be a number >= 0", lambda v: _number(v) and v >= 0)


def in_range(lo: float, hi: float, optional: bool = False, cross: bool = False) -> dict:
    """A number in (lo, hi]."""
    return _rule("number", f"must be a number in ({lo:g}, {hi:g}]", lambda v: _number(v) and lo < v <= hi,
                 optional, cross=cross)


def integer(lo: int, hi: int | None = None, says: str | None = None, optional: bool = False,
            show: Callable = repr) -> dict:
    """An int (not a bool) in [lo, hi]; `says` by default "an integer in [lo, hi]"."""
    says = says or f"must be an integer in [{lo}, {hi}]"
    return _rule("int", says, lambda v: _int(v) and lo <= v and (hi is None or v <= hi), optional, show)


def flag() -> dict:
    return _rule("bool", "must be true or false", lambda v: isinstance(v, bool))


def one_of(choices: tuple[str, ...]) -> dict:
    return _rule("text", f"must be one of {', '.join(choices)}", lambda v: v in choices)


def text(says: str, optional: bool = False) -> dict:
    return _rule("text", says, lambda v: isinstance(v, str) and bool(v.strip()), optional)


def pair(says: str, lo_open: bool) -> dict:
    """(min, max) numbers with 0 < min (or 0 <= min with ``lo_open`` False) <= max."""
    def ok(v):
        return (isinstance(v, (tuple, list)) and len(v) == 2 and all(_number(x) for x in v)
                and (0 < v[0] if lo_open else 0 <= v[0]) and v[0] <= v[1])
    return _rule("pair", says, ok)


def nested() -> dict:
    return {"rule": Rule("config")}


def cross(kind: str, optional: bool = False) -> dict:
    """A field whose whole rule depends on other fields: :func:`check_cross` holds it."""
    return {"rule": Rule(kind, None, optional, cross=True)}


def _upto(lo_says: str, hi: int, hi_says: str, show: Callable = short_repr) -> Callable:
    """A positive int at most `hi`, two messages (:func:`_custom`)."""
    def check(label, v):
        if not (_int(v) and v > 0):
            raise ConfigError(f"{label} {lo_says}, got {show(v)}")
        if v > hi:
            raise ConfigError(f"{label} {hi_says}, got {show(v)}")
        return v
    return check


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


def _segment_s(label, v):
    if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0):
        raise ConfigError(f"{label} must be a positive number of seconds, got {v!r}")
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
      timestep: physics timestep, 0.004 s, so `substeps = control_dt / timestep = 5`.
        Changed only with a measured reason; the convergence check re-runs a trained policy at
        half this timestep (`fightlab.run.evaluate.evaluate(..., timestep=0.002)`).
      episode_s: episode length, 10 s = 500 env steps.
      rhythm_hz: bounce frequency (a boxer's bounce), 2 Hz.
      bounce_m: pelvis bounce amplitude at amplitude a = 1: ±0.03 m. More would lift the feet off
        the floor at 2 Hz: the downward acceleration of the bounce, (2π·2 Hz)²·0.03 m = 4.7 m/s²,
        is already half of g.
      arm_sway_rad: guard sway of shoulders/elbows at a = 1.
      n_phase: rows of the stacked reference table (one period sampled at n_phase points).
      amplitude_ramp_s: a widening ramps the reference amplitude over this time in all worlds.
      push_interval_s: (min, max) time between pushes, uniform.
      push_duration_s: duration of one push (a constant horizontal force on the torso).
      push_impulse_ns: (min, max) push impulse, uniform; force = impulse / duration.
      tilt_fall_deg: a fall when the torso's z axis tilts more than this from vertical.
      action_scale_rad: action in [-1, 1] → position target offset ± this around the reference.
      init_noise_rad: joint-angle noise at reset (uniform ±).
      w_alive, w_pose, w_bounce, w_upright, w_action_rate: reward term weights (their
        `fightlab.envs.rewards.REWARD_TERMS` entries name these fields); fall_penalty: per fall.
      solver_iterations, solver_ls_iterations, solver_tolerance, solver_ls_tolerance: the
        training physics' Newton solver (MuJoCo's `opt.iterations`, `opt.ls_iterations`,
        `opt.tolerance`, `opt.ls_tolerance`): the learner's choice. Every solve's final policy is
        checked in the reference physics, :data:`REFERENCE_SOLVER` at the task's timestep
        (`fightlab.run.reference`). The defaults, Newton 2 / 4 without qacc_smooth and with
        explicit damping, are the headline's training physics (bench/NOTES.md: −44 % / −45 %
        time to solve against 10 / 20, every seed passing the reference check).
      solver_qacc_smooth: MuJoCo Warp's `opt.run_qacc_smooth` (training physics): False starts
        Newton from the warm start and skips the unconstrained acceleration qacc_smooth and its
        mass-matrix factorisation (mujoco_warp `smooth.skip_qacc_smooth`; "experimental" there).
        The CPU backend's C engine has no such option and always computes it (its rows record
        the physics it ran, `physics_engine`); the reference runs True.
      solver_eulerdamp: MuJoCo's `eulerdamp` (training physics): True integrates the joints'
        damping implicitly in the Euler step, which factorises M + h·D every physics step; False
        (`mjDSBL_EULERDAMP`) applies it explicitly and skips that factorisation. Stable here:
        h·damping / M_ii ≤ 0.75 at the keyframe for every DOF of both bodies (explicit damping
        needs < 2). The reference runs True. False, the default: −12 % rollout time per
        iteration on the H200 (bench/NOTES.md), every seed passing the reference check.
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
    """PPO hyper-parameters (CleanRL's ppo_continuous_action names; rsl_rl's adaptive lr).

    The defaults below are the base; a TrainConfig's default learner is its body's
    (:func:`body_ppo`: these with the body's :data:`BODY_PPO` entries: simple clip 0.6 with KL
    0.006 per action and GAE λ 0.9, muscular-fast hidden 1024-512-256 with clip 0.5, KL 0.004
    and TF32 products).

    Attributes:
      num_steps: env steps per world per iteration (rollout length), 32.
      num_minibatches, update_epochs: the batch of num_steps × nworld samples is split into
        num_minibatches per epoch.
      learning_rate: Adam step size; with `adaptive_lr` it is scaled ×1.5 / ÷1.5 to keep the
        policy KL near the KL target (rsl_rl, Rudin et al. 2022, "Learning to walk in minutes").
      desired_kl: the KL target, or None (the default): `desired_kl_per_action` × the action
        count nu (`kl_target`), so bodies with more actions move each action's mean alike (the
        KL of a diagonal Gaussian is a sum over actions). 0.002 per action: a learner study
        (bench/NOTES.md), simple's best 0.08 (nu 37) and muscular-fast's 0.16 (nu 83)
        at init_std 0.3, against 0.01 for both before.
      gamma, gae_lambda: discount and GAE λ (Schulman et al. 2016).
      clip_coef: PPO ratio clip (Schulman et al. 2017; 0.2 there). 0.3: a clip study
        (bench/NOTES.md), at the KL targets above the 0.2 clip
        bound half of the samples; muscular-fast −6 % iterations, simple −2 % (within seeds).
      vf_coef, ent_coef: loss weights.
      max_grad_norm: global gradient-norm clip.
      hidden: actor and critic MLP hidden sizes; init_std: initial action std (0.3: the learner
        study in bench/NOTES.md).
      critic_obs: what the value function sees, one of `CRITIC_OBS`: "policy" (the policy's
        observation) or "privileged" (an asymmetric critic, Pinto et al. 2018: the policy's
        observation and the env's privileged one: the push acting now and the time to the next,
        the time into the episode, every DOF's velocity; `envs.stance` lists it). The policy's
        observation is the same either way.
      critic_learning_rate: None (the default): one Adam group, the critic at the actor's rate,
        which the KL rule moves; a number in (0, 1]: the critic's parameters in an Adam group of
        their own at this fixed rate, apart from the KL rule (which then moves the actor's and
        log-std's rate only). The KL rule is about the policy's step; it slows the value
        function with it (muscular-fast's rate sits near 3e-4 through stage 0).
      matmul_precision: torch's float32 matrix-product precision for the policy and the update,
        one of `MATMUL_PRECISIONS` (`torch.set_float32_matmul_precision`): "highest" (full
        float32, the default) or "high" (TensorFloat-32 tensor cores on NVIDIA GPUs since Ampere:
        10-bit mantissa products, float32 sums; a CPU computes in full float32 either way). A
        learner field: it changes the numbers the learner computes.
      kl_estimator: the KL the adaptive rate reads (and the rows' `approx_kl`), one of
        `KL_ESTIMATORS`: "k3" (the default: Schulman's sampled estimator from the log-ratio of the
        taken actions, as CleanRL's approx_kl; heavy-tailed with many actions) or "analytic" (the
        closed-form KL(old ‖ new) of the two diagonal Gaussians, summed over actions: rsl_rl's
        adaptive schedule, Rudin et al. 2022; the rollout then keeps each step's action mean).
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

    def kl_target(self, nu: int) -> float:
        """The adaptive rate's KL target for a policy of `nu` actions: `desired_kl` if set, else
        `desired_kl_per_action` × nu (dimensionless, nats)."""
        return float(self.desired_kl) if self.desired_kl is not None else self.desired_kl_per_action * nu


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Attributes:
      body: one of `BODY_NAMES`.
      nworld: parallel worlds (int > 0).
      device: warp/torch device string: "cpu", "cuda" or "cuda:N".
      seed: RNG seed for torch and the env.
      max_iterations: stop after this many iterations even if unsolved.
      curriculum_stages: the amplitude stages, 0.1 … 1.0 (10 stages).
      curriculum_wait: W, iterations to wait after each widening (and at the start) before the
        next check; the check looks at episodes finished in the last W iterations.
      max_fall_rate, min_tracking, min_episode_s: the widening / solve thresholds.
      checkpoint_every: iterations between checkpoints (0: only at the end).
      run_dir: where rows, checkpoints and logs go (default the repository's runs/train; runs/ is
        git-ignored; a relative path is relative to the current directory).
      resume: checkpoint path to continue from (same curriculum state).
      stop_when_solved: end the run at the solving iteration.
      stop_after_stage: None (the default), or end the run when the curriculum widens past this
        stage (0 = a 0.1; at most the stage before the last): a learner study of the first
        stages at a fraction of a solve's cost. Such a run cannot solve: its row says solved
        False, and the reports count its stages (`measure.report.stage_table`), never it as an
        unsolved training. A resume keeps it, as it keeps the config.
      graph: capture the env step as a graph (CUDA graph, or warp's CPU graph).
      policy_graph, update_graph: capture the rollout's torch work between env steps and the PPO
        update as torch CUDA graphs (fightlab.rl.graphs; CUDA only, eager elsewhere).
      tree_factor: factor M of trees over 64 DOF (muscular-fast) with fightlab's single-launch
        kernel (fightlab.kernels.factor) instead of MuJoCo Warp's per-level sparse path.
      segment_s: optional wall-clock budget for this segment (a checkpoint is written and the run
        stops when it is exceeded; continue with `resume`).
      backend: the env's physics, one of `BACKENDS`: "gpu" = MuJoCo Warp on `device` (a GPU, or
        warp's CPU device for smoke checks: the default also on a machine without a GPU, where a
        row then says backend gpu, device cpu); "cpu" = MuJoCo's C engine on a thread pool
        (fightlab.sim.cpu; `device` must be "cpu"). The names say where MuJoCo Warp is meant to
        run, not the device: `train --backend` also takes warp (= gpu) and mujoco (= cpu).
      workers, worlds_per_worker: the CPU backend's layout, W threads × K worlds (None: W = every
        core; K = nworld / W, or None where W does not divide nworld: the workers' shares then
        differ by one, and rows record worlds_per_worker_max = ceil(nworld / W); given both,
        nworld must be W × K). Unused by "gpu".
      policy_device: where torch's policy, rollout buffer and PPO update run on the "cpu"
        backend (None: on `device`, the CPU, as on the original's GPU-less CPU machine; "cuda:N":
        a GPU beside the CPU physics, the env's observation, reward and done copied to it and the
        action back at every env step, `fightlab.run.runner.PolicyIO`; the action's copy is a
        counted host read). Only with backend "cpu": MuJoCo Warp's policy runs on its `device`.
      solver_loop: how MuJoCo Warp runs the training physics' Newton loop, one of
        `SOLVER_LOOPS`: "conditional" (a conditional graph node that stops when every world has
        converged), "unrolled" (the capped iterations launched in a row; converged worlds skip
        them: the same physics), "auto" (unrolled up to 4 iterations; `sim.physics`). How a run
        is launched, not the learner: it leaves the config id as it is.
      reference_nworld: worlds of the reference check a solved run ends with
        (`fightlab.run.reference`; a published training needs at least
        `publish.MIN_PUBLISH_NWORLD`).
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
    reference_nworld: int = field(default=256, metadata=integer(1, MAX_NWORLD))
    segment_s: float | None = field(default=None, metadata=_custom("number", _segment_s, optional=True))
    backend: str = field(default="gpu", metadata=_BACKEND)
    workers: int | None = field(default=None, metadata=integer(1, says="must be a positive integer",
                                                               optional=True))
    worlds_per_worker: int | None = field(default=None, metadata=integer(
        1, says="must be a positive integer", optional=True))
    policy_device: str | None = field(default=None, metadata=cross("text", optional=True))
    env: EnvConfig = field(default_factory=EnvConfig, metadata=nested())
    ppo: PPOConfig = field(default=None, metadata=nested())  # type: ignore[assignment]  # None: the body's defaults, body_ppo(body)

    def __post_init__(self):
        if self.ppo is None:  # the learner's defaults are the body's (BODY_PPO)
            object.__setattr__(self, "ppo", body_ppo(self.body))


#: the PPOConfig fields whose default differs per body, over PPOConfig's own defaults: the
#: learner studies of bench/NOTES.md ("stage 0") found body-specific levers of stage 0 (stage
#: 0 only, 2 seeds, packed, against each body's control in the same batch): simple gains from a
#: larger step (clip 0.5 with KL 0.004 per action: −17 %; clip 0.6 with KL 0.006: a further
#: −10 %; a wider network: +12 %), muscular-fast (83 actions) from capacity first (hidden
#: 512-256-128: −13 %; the larger step alone: −4 %), then the larger step on the wide network
#: (clip 0.5 with KL 0.004: a further −21 %), then more capacity (hidden 1024-512-256: a further
#: −17 %), whose doubled update runs in TensorFloat-32 (matmul_precision "high": the update
#: 0.052 → 0.026 s per iteration, the solve's iterations unchanged within the seeds' spread).
#: Simple's GAE λ 0.9 (the advantage's shorter horizon: stage 0 −18 %, 84.7 against 102.7 over
#: three seeds; solo stage 0 78 / 74 / 83 against 92 / 109 / 92). Each body's entry is the learner of its solo headline (3 seeds, every one passing the
#: reference check).
BODY_PPO: dict[str, dict] = {
    "simple": {"clip_coef": 0.6, "desired_kl_per_action": 0.006, "gae_lambda": 0.9},
    "muscular-fast": {"hidden": (1024, 512, 256), "clip_coef": 0.5, "desired_kl_per_action": 0.004,
                      "matmul_precision": "high"},
}


def body_ppo(body) -> PPOConfig:
    """The default learner of `body` (a name of `BODY_NAMES`): PPOConfig's defaults with the
    body's :data:`BODY_PPO` entries; PPOConfig's own for a name without one (an unknown body is
    refused later, by `validate_train`, in one line)."""
    entry = BODY_PPO.get(body) if isinstance(body, str) else None
    return dataclasses.replace(PPOConfig(), **entry) if entry else PPOConfig()


def with_body(cfg: "TrainConfig", body: str) -> "TrainConfig":
    """`cfg` for another body: its PPO fields that differ from its own body's defaults
    (:func:`body_ppo`: what a template or ``--set`` changed) kept over `body`'s defaults, every
    other field as it is. Use it, not ``dataclasses.replace(cfg, body=...)``, which would carry
    the first body's default learner to the second."""
    old, new = body_ppo(cfg.body), body_ppo(body)
    changed = {f.name: getattr(cfg.ppo, f.name) for f in dataclasses.fields(PPOConfig)
               if getattr(cfg.ppo, f.name) != getattr(old, f.name)}
    return dataclasses.replace(cfg, body=body, ppo=dataclasses.replace(new, **changed))


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
                  "ppo.kl_estimator": "k3"}

def canonical_params(params: dict) -> dict:
    """A row's params (or `to_dict` of a TrainConfig) without the :data:`IMPLIED_FIELDS` that
    hold their implied value: what ids are hashed from. A copy; `params` is not changed."""
    out = dict(params)
    for name, implied in IMPLIED_FIELDS.items():
        part, key = name.split(".", 1)
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
    out = {}
    for name in TASK_FIELDS:
        v, d = _field_value(cfg, name), _field_value(ref, name)
        if v != d:
            out[name] = (v, d)
    return out


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


def validate_layout(backend, workers, worlds_per_worker, nworld: int, device: str) -> None:
    """Check the CPU backend's layout (W workers × K worlds) against the backend, nworld and
    device (W and K themselves: their field rules).

    Raises ConfigError: W and K given on the "gpu" backend, W × K ≠ nworld, or the "cpu" backend
    on a non-CPU device.
    """
    if backend == "gpu":
        if workers is not None or worlds_per_worker is not None:
            raise ConfigError("workers / worlds_per_worker are the CPU backend's layout: "
                              "they need backend 'cpu'")
        return
    if device != "cpu":
        raise ConfigError(f"backend cpu needs device cpu (MuJoCo's C engine; the env's kernels and "
                          f"the policy run on the CPU), got {device!r}")
    if workers is not None and worlds_per_worker is not None and workers * worlds_per_worker != nworld:
        raise ConfigError(f"nworld ({nworld}) must be workers × worlds_per_worker "
                          f"({workers} × {worlds_per_worker} = {workers * worlds_per_worker})")


def check_fields(cfg) -> dict:
    """Walk a config's fields (EnvConfig, PPOConfig, TrainConfig; nested ones in turn) through
    each field's :class:`Rule`; returns ``{name: canonical value}`` of the fields whose rule
    changes it (nworld "8" → 8, device "cuda" → "cuda:0"). Raises ConfigError: the first field
    refused, one line naming it, the value and what it must be."""
    prefix = "" if isinstance(cfg, TrainConfig) else f"{type(cfg).__name__}."
    out = {}
    for f in dataclasses.fields(cfg):
        r, v = f.metadata["rule"], getattr(cfg, f.name)
        if r.kind == "config":
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
    curriculum's thresholds and stop stage. Returns the canonical policy device as a field dict.
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
    return dict(policy_device=validate_policy_device(cfg.policy_device, cfg.backend))


def validate_train(cfg: TrainConfig) -> TrainConfig:
    """Check a TrainConfig: each field's rule (:func:`check_fields`), then the rules across
    fields (:func:`check_cross`); returns it with its canonical nworld, device and policy device.
    The one caller is the run's gate, `fightlab.run.launch.plan_run`.

    Raises ConfigError naming the bad value and the valid choices.
    """
    cfg = dataclasses.replace(cfg, **check_fields(cfg))
    return dataclasses.replace(cfg, **check_cross(cfg))


def stage_done(cfg: TrainConfig, stage: int) -> bool:
    """Whether a run at curriculum stage `stage` (int, 0 = the first) has passed
    `cfg.stop_after_stage` and so ends (False when that is None)."""
    st = cfg.stop_after_stage
    return isinstance(st, int) and not isinstance(st, bool) and stage > st


def idle_ppo_fields(ppo: dict) -> tuple[str, ...]:
    """The PPO fields of `ppo` (a PPOConfig's fields as a dict, e.g. a row's params) that do not
    act: `desired_kl_per_action` when `desired_kl` is set (`PPOConfig.kl_target`), else none."""
    return ("desired_kl_per_action",) if ppo.get("desired_kl") is not None else ()


def validate_policy_device(policy_device, backend) -> str | None:
    """Return the canonical `TrainConfig.policy_device` ("cpu", "cuda:N" or None).

    Raises ConfigError: a device `validate_device` refuses, or a policy device on the "gpu"
    backend (MuJoCo Warp's policy runs on its own device), naming the value and the choices."""
    if policy_device is None:
        return None
    if backend != "cpu":
        raise ConfigError(f"policy_device {policy_device!r} is the CPU backend's option (the env on the "
                          "CPU, the policy on a GPU); with backend gpu the policy runs on --device: "
                          "drop it, or use backend cpu")
    try:
        return validate_device(policy_device, hint="")
    except ConfigError as e:
        raise ConfigError(f"policy_device: {e} (choices: cpu, cuda, cuda:N of this machine)") from None


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

    if rule.kind == "bool":
        if isinstance(val, bool):
            return val
        raise bad("true or false")
    if rule.kind == "int":
        if _int(val) or null:
            return None if null else val
        raise bad("an integer or null" if rule.optional else "an integer")
    if rule.kind == "number":
        if _number(val) or null:
            return None if null else float(val)
        raise bad("a finite number" + (" or null (the rule in its docstring)" if rule.optional else ""))
    if rule.kind in ("numbers", "pair"):
        if not isinstance(val, (list, tuple)) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                         for x in val):
            raise bad("a list of numbers, e.g. [1, 2]")
        if rule.kind == "pair" and len(val) != 2:
            raise bad("a pair [min, max]")
        if all(isinstance(x, int) for x in default):
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
    ``ppo.field``, each value parsed into its field's type (:func:`coerce_field`). Setting both
    KL fields with `desired_kl` not None warns (on stderr) that the per-action one is idle
    (:func:`idle_ppo_fields`).

    Args:
      own_flags: TrainConfig fields that have a command-line flag of their own, to the flag
        (refused here, the message names the flag); None: none.
    Raises:
      ConfigError: naming a bad item, key or value.
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
