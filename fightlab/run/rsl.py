"""rsl_rl's learner on the task: `python -m fightlab train --learner rsl_rl`.

rsl_rl's `OnPolicyRunner` (rsl-rl-lib, :data:`RSL_RL_VERSION`) drives the task through the door
(`fightlab.envs.vecenv.VecEnv`'s ``step``; `RslDoor` wraps its observation groups in the
``TensorDict`` rsl_rl ≥ 3 expects). Each iteration is one ``runner.learn(1)``: rsl_rl's own
rollout, GAE and update, nothing of fightlab's learner. The run around it is the `Trainer`'s: the
same gate, run folder, ``rows.csv`` (the task's columns and rsl_rl's losses), checkpoints,
solve criterion and reference check; its rows record the learner (``learner: rsl_rl``, the
version and the settings, :func:`train_cfg`).

Its settings are the run's PPOConfig (`config.RSL_RL_PPO` by default: mjlab's Unitree G1 velocity
PPO) in rsl_rl's names (:func:`train_cfg`); actor and critic MLPs with ELU and observation
normalisation and a Gaussian with one scalar std, as mjlab's. The PPOConfig fields rsl_rl has no
setting for are refused at the gate (:func:`check_rsl`).
"""

from __future__ import annotations

import contextlib
import copy
import io
import time

import torch

from fightlab.errors import ConfigError
from fightlab.rl.loop import TrainLoop
from fightlab.rl.models import matmul_precision
from fightlab.rl.rows import learner_row
from fightlab.timing import HostReads, default_sync

#: the rsl-rl-lib this module is written against (pyproject.toml's ``rsl`` extra pins it)
RSL_RL_VERSION = "5.5.1"

#: rsl_rl 5's runner settings that PPOConfig has no field for: mjlab's Unitree G1 velocity PPO's
#: (mjlab, ``src/mjlab/tasks/velocity/config/g1/rl_cfg.py``); :func:`train_cfg` adds the rest
RSL_RL_FIXED = {
    "actor": {"class_name": "MLPModel", "activation": "elu", "obs_normalization": True,
              "distribution_cfg": {"class_name": "GaussianDistribution", "std_type": "scalar"}},
    "critic": {"class_name": "MLPModel", "activation": "elu", "obs_normalization": True},
    "algorithm": {"class_name": "PPO", "use_clipped_value_loss": True},
    "save_interval": 50, "check_for_nan": True,
}

#: PPOConfig field -> rsl_rl's PPO argument (rsl_rl.algorithms.PPO)
RSL_RL_NAMES = {"learning_rate": "learning_rate", "clip_coef": "clip_param", "ent_coef": "entropy_coef",
                "vf_coef": "value_loss_coef", "update_epochs": "num_learning_epochs",
                "num_minibatches": "num_mini_batches", "gamma": "gamma", "gae_lambda": "lam",
                "max_grad_norm": "max_grad_norm"}


def require_rsl_rl() -> str:
    """Import rsl_rl's runner; its version, or ConfigError in one line naming what failed to
    import and how to install it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import tensordict  # noqa: F401
        import rsl_rl.runners  # noqa: F401

        return version("rsl-rl-lib")
    except (ImportError, PackageNotFoundError) as e:
        what = getattr(e, "name", None) or "rsl-rl-lib"
        raise ConfigError(f"--learner rsl_rl needs rsl-rl-lib, which could not be imported ({what!r}): "
                          f"pip install 'rsl-rl-lib=={RSL_RL_VERSION}' (or: pip install -e '.[rsl]')") from None


#: PPOConfig fields rsl_rl has no setting for, with the one value it runs (anything else is refused)
RSL_RL_CANNOT = {"critic_learning_rate": (None, "rsl_rl's critic shares the actor's Adam rate"),
                 "kl_estimator": ("analytic", "rsl_rl's adaptive rate reads the analytic KL"),
                 "symmetry": ("none", "the task's mirror maps reach fightlab's learner only"),
                 "stage_lr_scale": (None, "the curriculum's stage reaches fightlab's learner only"),
                 "obs_history": (1, "fightlab's learner stacks the observations; rsl_rl's sees the current one")}


def check_rsl(cfg) -> str:
    """The gate's check of a ``learner: rsl_rl`` run (a TrainConfig): rsl_rl importable
    (`require_rsl_rl`; its version is returned), no --policy-device, and every PPOConfig field in
    :data:`RSL_RL_CANNOT` at the value rsl_rl runs. Raises ConfigError, one line."""
    version = require_rsl_rl()
    if cfg.policy_device:
        raise ConfigError("--learner rsl_rl runs its policy on --device: --policy-device is fightlab's "
                          "learner's only")
    for name, (value, why) in RSL_RL_CANNOT.items():
        if getattr(cfg.ppo, name) != value:
            raise ConfigError(f"ppo.{name}={getattr(cfg.ppo, name)!r} is not an rsl_rl setting ({why}): "
                              f"with --learner rsl_rl leave it at {value!r}")
    return version


def train_cfg(cfg) -> dict:
    """rsl_rl's runner settings (a dict of rsl_rl 5's ``train_cfg``) for the run `cfg` (a
    TrainConfig): :data:`RSL_RL_FIXED` with the run's PPOConfig (:data:`RSL_RL_NAMES`; hidden
    for both MLPs; init_std; adaptive_lr as schedule "adaptive" or "fixed" at the KL target
    ``ppo.kl_target(nu)``), its rollout length and observation groups ("critic" from the
    privileged observation when the run asks for it, else the policy's)."""
    from fightlab.bodies import build

    p = cfg.ppo
    out = copy.deepcopy(RSL_RL_FIXED)
    for part in ("actor", "critic"):
        out[part]["hidden_dims"] = [int(h) for h in p.hidden]
    out["actor"]["distribution_cfg"]["init_std"] = float(p.init_std)
    out["algorithm"].update({rsl: getattr(p, name) for name, rsl in RSL_RL_NAMES.items()},
                            schedule="adaptive" if p.adaptive_lr else "fixed",
                            desired_kl=float(p.kl_target(build(cfg.body).nu)))
    out["num_steps_per_env"] = int(p.num_steps)
    critic = ["critic"] if p.critic_obs == "privileged" else ["policy"]
    out["obs_groups"] = {"actor": ["policy"], "critic": critic}
    return out


def rsl_actor(ck: dict, obs_dim: int, nu: int, device: str = "cpu") -> torch.nn.Module:
    """A ``learner: rsl_rl`` checkpoint's policy rebuilt with rsl_rl's own classes: an
    ``rsl_rl.models.MLPModel`` of :func:`train_cfg`'s actor settings (the checkpoint's config),
    loaded from its ``actor.*`` tensors (strict), returned as rsl_rl's ONNX export copy
    (``MLPModel.as_onnx``: observation normaliser, MLP, mean action): ``obs [n, obs_dim] float32
    -> action [n, nu]`` on ``device``, in eval mode. Raises ConfigError (rsl_rl missing),
    CheckpointError (tensors that do not fit the body's sizes or the settings), one line."""
    require_rsl_rl()
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    from fightlab.config import from_dict
    from fightlab.run.checkpoint import CheckpointError

    rsl = train_cfg(from_dict(ck["config"]))
    settings = copy.deepcopy(rsl["actor"])
    if settings.pop("class_name") != "MLPModel":  # RSL_RL_FIXED's; another model is not rebuilt here
        raise ConfigError(f"rsl_rl's actor {rsl['actor']['class_name']!r} is not an MLPModel")
    obs = TensorDict({"policy": torch.zeros(1, obs_dim)}, batch_size=[1])
    model = MLPModel(obs, rsl["obs_groups"], "actor", nu, **settings)
    actor = {k[len("actor."):]: v for k, v in ck["agent"].items() if k.startswith("actor.")}
    try:
        model.load_state_dict(actor)
    except (RuntimeError, KeyError, ValueError) as e:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip().startswith(
            ("size mismatch", "Missing key", "Unexpected key"))), str(e).splitlines()[0] if str(e) else "")
        raise CheckpointError(f"checkpoint's rsl_rl actor does not fit body {from_dict(ck['config']).body!r} "
                              f"(obs {obs_dim}, actions {nu}): {first[:200]}") from None
    return model.as_onnx(verbose=False).to(torch.device(device)).eval()


class RslDoor:
    """rsl_rl's ``VecEnv`` over a task behind fightlab's door: the same members, observations as a
    ``TensorDict`` ("policy" [num_envs, obs_dim], "critic" when the task has one); `last_check` is
    the extras of the latest step that ended the task's iteration (None before the first)."""

    def __init__(self, task):
        from tensordict import TensorDict

        self._td, self.task, self.last_check = TensorDict, task, None
        self.num_envs, self.num_actions = task.num_envs, task.num_actions
        self.max_episode_length, self.device, self.cfg = task.max_episode_length, task.device, task.cfg

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.task.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.task.episode_length_buf.copy_(value)

    def _wrap(self, groups: dict):
        """The groups as a TensorDict of copies: the task's buffers are overwritten by its next
        step, and rsl_rl keeps the observation of a step until after the next (its storage)."""
        return self._td({k: v.clone() for k, v in groups.items()}, batch_size=[self.num_envs],
                        device=self.device)

    def get_observations(self):
        return self._wrap(self.task.get_observations())

    def step(self, actions: torch.Tensor):
        obs, rewards, dones, extras = self.task.step(actions)
        if "episode" in extras:
            self.last_check = extras
            extras = {"time_outs": extras["time_outs"]}  # rsl_rl's logger would average the text
        return self._wrap(obs), rewards, dones, extras


class RslAgent:
    """The checkpoint's view of rsl_rl's models: `state_dict` holds the actor's and the critic's
    tensors ("actor.<name>", "critic.<name>")."""

    def __init__(self, alg):
        self.alg = alg

    def state_dict(self) -> dict:
        saved = self.alg.save()
        return {**{f"actor.{k}": v for k, v in saved["actor_state_dict"].items()},
                **{f"critic.{k}": v for k, v in saved["critic_state_dict"].items()}}


class RslLearner(TrainLoop):
    """fightlab's learner loop (`fightlab.rl.loop.TrainLoop`) with rsl_rl's `OnPolicyRunner` in its
    place: the same attributes (iteration, elapsed_s, compile_s, time_to_solve_s, solve_iteration,
    rows, extras, graph_fallbacks; agent, optimizer, obs and gen for the checkpoint), so that
    `RslTrainer` is the `Trainer` with this learner. No graphs: rsl_rl's loop runs eagerly.

    Raises:
      ConfigError: rsl_rl is not installed, or a setting it cannot take (--policy-device).
    """

    def __init__(self, cfg, env):  # noqa: D107 (not TrainLoop's: no fightlab agent is built)
        self.rsl_rl_version = check_rsl(cfg)  # the gate's (a Trainer built from a checked plan asks again)
        from rsl_rl.runners import OnPolicyRunner

        self.cfg, self.env = cfg, env
        self.device = self.policy_device = cfg.device
        self.io = env  # the policy reads the task's own buffers (no PolicyIO)
        torch.manual_seed(cfg.seed)
        t0 = time.perf_counter()
        self.door, self.rsl_cfg = RslDoor(env), train_cfg(cfg)
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the models' structure
            self.runner = OnPolicyRunner(self.door, copy.deepcopy(self.rsl_cfg), log_dir=None,
                                         device=str(cfg.device))
        self.compile_s = time.perf_counter() - t0  # the task's start (kernels) and the models
        alg = self.runner.alg
        self.agent, self.optimizer = RslAgent(alg), alg.optimizer
        self.gen = torch.Generator(device=torch.device(cfg.device))
        self.iteration, self.elapsed_s, self.graph_fallbacks = 0, 0.0, 0
        self.time_to_solve_s = self.solve_iteration = None
        self.rows, self.extras, self._split = [], {}, {}
        self._reads = HostReads(cfg.device)
        update = alg.update

        def timed_update():  # the rollout / update split of `iterate`
            default_sync(self.device)()
            self._split["t"] = time.perf_counter()
            self._split["losses"] = update()
            return self._split["losses"]

        alg.update = timed_update

    @property
    def obs(self) -> torch.Tensor:
        """The policy observation [num_envs, obs_dim] (the checkpoint's)."""
        return self.env.obs

    def warm_up(self) -> None:
        """Nothing more: building the runner started the task (compile_s)."""

    def capture(self) -> None:
        """No graphs to capture."""

    def iterate(self) -> dict:
        """One ``runner.learn(1)`` (rsl_rl's rollout, returns and update), then the task's check
        from the extras of its last step, as a row (`fightlab.rl.rows.learner_row`: rsl_rl's
        losses as ``rsl_<name>``, its learning rate and action std)."""
        with self._reads:
            t0 = time.perf_counter()
            with matmul_precision(self.cfg.ppo.matmul_precision):
                self.runner.learn(1)
            default_sync(self.device)()
            host_reads = self._reads.take()
        wall = time.perf_counter() - t0
        extras, self.door.last_check = self.door.last_check, None
        if extras is None:
            raise RuntimeError("rsl_rl's rollout ended without the task's check: its num_steps_per_env "
                               "differs from the task's iteration_steps")
        split = self._split.pop("t", t0 + wall)
        alg = self.runner.alg
        values = {**{f"rsl_{k}": float(v) for k, v in self._split.pop("losses", {}).items()},
                  "learning_rate": float(alg.learning_rate),
                  "action_std": float(alg.get_policy().output_std.detach().mean())}
        self.iteration += 1
        self.elapsed_s += wall
        row = learner_row(self, extras["episode"], float(alg.storage.rewards.mean()), values, wall,
                          split - t0, t0 + wall - split, host_reads)
        if extras.get("solved") and self.time_to_solve_s is None:
            self.time_to_solve_s, self.solve_iteration = self.elapsed_s, self.iteration
        self.extras = extras
        self.rows.append(row)
        return row

    def make_policy(self, env):
        """``obs [n, obs_dim] -> action [n, nu]``: a copy of the actor's deterministic (mean) action
        (rsl_rl's own export copy: normaliser, MLP, mean), for `fightlab.envs.task.evaluate_policy`."""
        return self.runner.alg.get_policy().as_jit().eval()


class RslRun:
    """What a run with rsl_rl's learner does otherwise than `fightlab.run.runner.Trainer`: the
    Trainer with this mixin first and `RslLearner` as its loop is the Trainer `Trainer(cfg)`
    builds when ``cfg.learner`` is "rsl_rl" (`fightlab.run.runner.rsl_trainer`).

    Raises:
      ConfigError: as `RslLearner`; CheckpointError: a resumed checkpoint that does not fit.
    """

    def _build(self, cfg, progress, resume_ck) -> None:
        super()._build(cfg, progress, resume_ck)
        self.segments[-1].update(learner="rsl_rl", rsl_rl_version=self.rsl_rl_version,
                                 rsl_rl_settings=self.rsl_cfg)

    def restore_learner(self, ck: dict) -> None:
        """A resumed checkpoint's rsl_rl state: actor, critic (their normalisers), optimizer and its
        KL-adapted learning rate. Raises CheckpointError, one line, when it does not fit."""
        from fightlab.run.checkpoint import CheckpointError

        alg, sd = self.runner.alg, ck["agent"]
        try:
            for name, model in (("actor", alg._raw_actor), ("critic", alg._raw_critic)):
                model.load_state_dict({k[len(name) + 1:]: v for k, v in sd.items() if k.startswith(name + ".")})
            alg.optimizer.load_state_dict(ck["optimizer"])
        except (RuntimeError, ValueError, KeyError) as e:
            raise CheckpointError(f"checkpoint {self.cfg.resume!r}: its rsl_rl state does not fit this run "
                                  f"({str(e).splitlines()[0][:200]})") from None
        alg.learning_rate = float(alg.optimizer.param_groups[0]["lr"])

    def _reference_eval(self, checkpoint) -> dict:
        """The reference check (`fightlab.envs.task.reference_check`) of the actor in memory."""
        from fightlab.envs.task import reference_check

        cfg = self.cfg
        return reference_check(self.make_policy, cfg, cfg.device, cfg.reference_nworld, seed=cfg.seed + 1,
                               progress=self.progress)
