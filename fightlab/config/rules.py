"""The rules' vocabulary: a config field's :class:`Rule` and its constructors, the limits they
enforce (``MAX_*``), and the checks of single values that other modules call directly
(`validate_body`, `validate_nworld`, `validate_backend`, `validate_layout`,
`validate_policy_device`). A refusal is a ConfigError, one line naming the value and what it
must be."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from fightlab.bodies import BODY_NAMES, max_nu
from fightlab.devices import validate_device
from fightlab.errors import ConfigError

#: how the Newton solve runs (`TrainConfig.solver_loop`; `fightlab.sim.physics` resolves "auto",
#: for a training the single launch on CUDA, and sets the model's `opt.graph_conditional`);
#: "single_launch": fightlab's one-launch solve (`fightlab.kernels.newton`, switched on by the
#: env), MuJoCo Warp's loop where it is not taken
SOLVER_LOOPS = ("auto", "conditional", "unrolled", "single_launch")
#: the learners `train` runs on the task (`TrainConfig.learner`): fightlab's PPO, rsl_rl's
#: OnPolicyRunner (`fightlab.run.rsl`)
LEARNERS = ("fightlab", "rsl_rl")
#: run tracking (`TrainConfig.logger`, `fightlab.run.tracking`): auto (TensorBoard where its
#: package is installed, as pyproject.toml's dependencies have it; else none, said in one line),
#: TensorBoard event files in the run folder, Weights & Biases, or none
LOGGERS = ("auto", "tensorboard", "wandb", "none")

#: what the value function may see (`PPOConfig.critic_obs`)
CRITIC_OBS = ("policy", "privileged")

#: torch's float32 matmul precisions a learner may use (`PPOConfig.matmul_precision`); "medium"
#: (bfloat16 products) is left out: untested here
MATMUL_PRECISIONS = ("highest", "high")

#: the KLs the adaptive rate may read (`PPOConfig.kl_estimator`)
KL_ESTIMATORS = ("k3", "analytic")

#: a learner's use of the task's left–right mirror (`PPOConfig.symmetry`)
SYMMETRIES = ("none", "augment", "loss")


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

#: most policy observations a learner's input may stack (`PPOConfig.obs_history`): the rollout
#: keeps the stacked input, H × the observation, for every sample
MAX_OBS_HISTORY = 8

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


def validate_layout(backend, workers, worlds_per_worker, nworld: int, device: str) -> None:
    """Check the CPU backend's layout (W workers × K worlds; W and K themselves: their field
    rules). Raises ConfigError: W or K on the "gpu" backend, W × K ≠ nworld, or the "cpu"
    backend on a non-CPU device."""
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

