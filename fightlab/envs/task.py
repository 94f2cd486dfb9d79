"""The stance task as one unit behind the door (`fightlab.envs.vecenv.VecEnv`): the batched env
(`fightlab.envs.stance.StanceEnv`), the amplitude curriculum and the solve criterion
(`fightlab.envs.curriculum`), checked every ``iteration_steps`` env steps (`PPOConfig.num_steps`:
the curriculum's wait is counted in these iterations). A policy is judged here too, given any
``make_policy(env) -> (obs -> action)``: `evaluate_policy` (fresh worlds, a fixed amplitude) and
`reference_check` (the reference physics at dt and dt/2, the task's own thresholds).
"""

from __future__ import annotations

import dataclasses
import math
import time

import torch

from fightlab.config import REFERENCE_CHECKS, REFERENCE_SOLVER, TrainConfig, check_cross, check_fields
from fightlab.envs.curriculum import Curriculum, ratio
from fightlab.envs.mirror import mirror_maps
from fightlab.envs.stance import StanceEnv
from fightlab.envs.vecenv import VecEnv
from fightlab.sim.physics import training_solver_loop

__all__ = ["SUMMARY_INPUTS", "StanceTask", "episode_row", "episode_stats", "evaluate_policy",
           "reference_check"]

#: summary counters the rows show only through a derived column (or not at all)
SUMMARY_INPUTS = frozenset({"falls", "timeouts", "overflow_worlds", "overflow_distinct_worlds",
                             "episode_s_sum", "return_sum", "track_num", "track_den",
                             "track_num_survived", "track_den_survived"})


def episode_stats(summary: dict) -> dict:
    """The task's statistics of one iteration from `StanceEnv.read_summary`'s counters: episodes,
    fall_rate, mean_episode_s (s), tracking, tracking_survived (NaN without episodes),
    episode_return, the slot, NaN and solver counters, the fall kinds, and every further summary
    field (the per-term reward sums ``reward_<name>``) as it is."""
    n = summary["episodes"]
    per_episode = lambda k: summary[k] / n if n else math.nan  # noqa: E731
    out = dict(
        episodes=n, fall_rate=per_episode("falls"), mean_episode_s=per_episode("episode_s_sum"),
        tracking=ratio(summary["track_num"], summary["track_den"]),
        tracking_survived=ratio(summary["track_num_survived"], summary["track_den_survived"]),
        episode_return=per_episode("return_sum"),
        overflow_count=summary["overflow_worlds"], nefc_overflow=summary["nefc_overflow"],
        contact_overflow=summary["contact_overflow"], nan_resets=summary["nan_resets"],
        solver_iter_hits=summary["solver_iter_hits"], solver_ls_hits=summary["solver_ls_hits"],
        contact_falls=summary["contact_falls"], tilt_falls=summary["tilt_falls"])
    out.update((k, v) for k, v in summary.items() if k not in out and k not in SUMMARY_INPUTS)
    return out


def episode_row(cur: Curriculum, event: str, summary: dict) -> dict:
    """The task's row of an iteration: the curriculum's amplitude, stage and ``event`` (what
    `Curriculum.update` returned for ``summary``), `episode_stats`, and the window's fall rate,
    tracking, tracking_survived and episode length (``window_*``). A widening's row reports
    the window that passed and the amplitude it passed at (the window is cleared then)."""
    ws = cur.widened_on if event == "widen" and cur.widened_on is not None else cur.window_stats()
    return dict(amplitude=cur.amplitude if event != "widen" else cur.stages[cur.stage - 1],
                stage=cur.stage, event=event, **episode_stats(summary),
                window_fall_rate=ws["fall_rate"], window_tracking=ws["tracking"],
                window_tracking_survived=ws["tracking_survived"], window_episode_s=ws["mean_episode_s"])


class StanceTask(VecEnv):
    """The stance task of `cfg` (a `TrainConfig`). Besides the door's attributes: unwrapped (the
    `StanceEnv`), curriculum (its `Curriculum`, with `state_dict` / `load_state_dict`), nu (=
    num_actions), privileged_dim (the privileged observation's width when built with it).

    ``checked``: the config already passed the run's gate (`fightlab.run.launch.plan_run`);
    otherwise each field's rule and the rules across fields are checked here
    (`config.check_fields`, `config.check_cross`), so a library user gets
    the command line's one-line refusals (ConfigError, a ValueError).
    """

    def __init__(self, cfg: TrainConfig, checked: bool = False):
        if not checked:
            cfg = dataclasses.replace(cfg, **check_fields(cfg))
            cfg = dataclasses.replace(cfg, **check_cross(cfg))  # the canonical policy device
        self.cfg = cfg
        self.unwrapped = StanceEnv(cfg.body, cfg.nworld, cfg.device, seed=cfg.seed, cfg=cfg.env,
                                   graph=cfg.graph, tree_factor=cfg.tree_factor, backend=cfg.backend,
                                   threads=cfg.workers, privileged=cfg.ppo.critic_obs == "privileged",
                                   solver_loop=training_solver_loop(cfg.solver_loop, cfg.device, cfg.backend))
        self.curriculum = Curriculum(cfg.curriculum_stages, cfg.curriculum_wait, cfg.max_fall_rate,
                                     cfg.min_tracking, cfg.min_episode_s)
        e = self.unwrapped
        self.num_envs, self.num_actions, self.nu = e.nworld, e.nu, e.nu
        self.max_episode_length = cfg.env.episode_steps
        self.device = e.device
        self.iteration_steps = cfg.ppo.num_steps
        self.obs_dim, self.priv_dim, self.privileged_dim = e.obs_dim, e.priv_dim, e.privileged_dim
        self.obs_min_std, self.substeps = e.obs_min_std, e.substeps
        self.obs, self.priv_obs, self.action = e.obs, e.priv_obs, e.action
        self.reward, self.done, self.timeout = e.reward, e.done, e.timeout
        self.episode_length_buf = e.episode_length
        self._started = False
        self._steps_since_end = 0

    @property
    def graph_fallbacks(self) -> int:
        """Times the env step's graph fell back to eager (0 or 1)."""
        return self.unwrapped.graph_fallbacks

    @property
    def amplitude_target(self) -> float:
        """The rhythm amplitude the worlds ramp to (the curriculum's, once started)."""
        return self.unwrapped.amplitude_target

    def get_observations(self) -> dict[str, torch.Tensor]:
        if not self._started:
            self.reset()
        return self._groups()

    def _groups(self) -> dict[str, torch.Tensor]:
        return {"policy": self.obs, **({"critic": self.priv_obs} if self.priv_dim else {})}

    def mirror_maps(self) -> dict:
        """The door's mirror maps (`fightlab.envs.mirror`: the body's, about the stance reference)."""
        return {k: (m.perm, m.sign) for k, m in mirror_maps(self.unwrapped).items()}

    def reset(self) -> dict[str, torch.Tensor]:
        """Warm up, reset every world (staggered) at the curriculum's amplitude; the groups."""
        self.unwrapped.warmup()
        self.unwrapped.reset(stagger=True)
        self.unwrapped.set_amplitude(self.curriculum.amplitude, immediate=True)
        self._started, self._steps_since_end = True, 0
        return self._groups()

    def advance(self) -> None:
        self.unwrapped.step()

    def end_iteration(self, learner: torch.Tensor | None = None) -> dict:
        """The one host read of the iteration, then the curriculum's check. ``extras`` as
        `VecEnv.end_iteration` says, with "summary" (`StanceEnv.read_summary`'s counters),
        "episode" (`episode_row`; event "wait", "hold", "widen" or "solved"), "curriculum"
        (event, stage, amplitude, solved) and "log" ("/task/<name>" → the episode's numbers).
        """
        s = self.unwrapped.read_summary(extra=learner)
        values = s.pop("extra", None)
        cur = self.curriculum
        event = cur.update(s)
        if event == "widen":
            self.unwrapped.set_amplitude(cur.amplitude)
        self._steps_since_end = 0
        episode = episode_row(cur, event, s)
        extras = dict(summary=s, episode=episode, solved=cur.solved,
                      curriculum=dict(event=event, stage=cur.stage, amplitude=cur.amplitude, solved=cur.solved),
                      log={f"/task/{k}": v for k, v in episode.items() if k != "event"})
        if values is not None:
            extras["learner"] = values
        return extras

    def state_dict(self) -> dict:
        """The env's state (`StanceEnv.state_dict`); the curriculum's is `curriculum.state_dict()`."""
        return self.unwrapped.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict` output (ValueError naming a missing or misshapen array); the task
        counts as started (no reset before the next step)."""
        self.unwrapped.load_state_dict(state)
        self._started, self._steps_since_end = True, 0

    def close(self) -> None:
        self.unwrapped.close()


def evaluate_policy(make_policy, body: str, env_cfg, nworld: int, device: str, episodes_per_world: float = 1.0,
                    amplitude: float = 1.0, seed: int = 1, graph: bool = True, tree_factor: bool = True,
                    progress: bool = True, backend: str = "gpu", threads: int | None = None) -> dict:
    """Run a policy on ``nworld`` fresh worlds of ``body`` (unstaggered, the rhythm amplitude fixed
    at ``amplitude``) for ``episodes_per_world`` episode lengths and return the task's statistics.

    Args:
      make_policy: ``env -> policy`` (the `StanceEnv`, for its obs_dim / nu), policy: ``obs
        [nworld, obs_dim] -> action [nworld, nu]``, torch float32 on ``device``; None: the
        zero-action policy (the servos hold the moving reference alone).
      env_cfg: the `EnvConfig` (its solver and timestep are the physics judged in).
    Returns:
      dict: physics_engine (`sim.physics.engine_solver`), timestep (s), seconds_per_world
      (simulated s each world ran), episodes, falls, fall_rate, tracking (over every ended
      episode), tracking_survived (over those that reached the time limit; NaN when none did),
      mean_episode_s (s), overflow_count (slot resets), nan_resets, contact_falls, tilt_falls.
    Raises:
      ValueError: a bad body, nworld, device or env config (one line naming it).
    """
    from tqdm import tqdm

    from fightlab.config import validate_body, validate_env, validate_nworld
    from fightlab.devices import announce_compile, validate_device
    from fightlab.sim.physics import shared_stream

    device = validate_device(device)
    validate_body(body), validate_env(env_cfg)  # before the bar opens
    nworld = validate_nworld(nworld)  # an int, whatever a checkpoint's config held
    nsteps = int(round(episodes_per_world * env_cfg.episode_steps))
    announce_compile(body, device, backend)  # building the env compiles warp's kernels
    # the bar opens before the env is built: building it compiles and captures (slow on a CPU)
    bar = tqdm(total=nsteps, desc=f"evaluate {body} ×{nworld}", unit="step", disable=not progress)
    env = StanceEnv(body, nworld, device, seed=seed, cfg=env_cfg, graph=graph, tree_factor=tree_factor,
                    backend=backend, threads=threads)
    policy = make_policy(env) if make_policy is not None else None
    with shared_stream(device):
        env.set_amplitude(amplitude, immediate=True)
        obs = env.reset(stagger=False)
        zero = torch.zeros(nworld, env.nu, device=torch.device(device))
        for _ in range(nsteps):
            with torch.no_grad():
                a = zero if policy is None else policy(obs)
            obs, _, _, _ = env.step(a)
            bar.update(1)
        s = env.read_summary()
    bar.close()
    stats = episode_stats(s)
    return dict(physics_engine=env.engine_solver, timestep=env.mjm.opt.timestep,
                seconds_per_world=nsteps * env_cfg.control_dt, episodes=stats["episodes"], falls=s["falls"],
                **{k: stats[k] for k in ("fall_rate", "tracking", "tracking_survived",
                                         "mean_episode_s", "overflow_count", "nan_resets",
                                         "contact_falls", "tilt_falls")})


#: what each run of the reference check keeps of `evaluate_policy`'s result
_REFERENCE_KEEP = ("timestep", "episodes", "falls", "fall_rate", "tracking", "mean_episode_s",
                   "overflow_count", "nan_resets")


def reference_check(make_policy, cfg: TrainConfig, device: str, nworld: int, seed: int = 1,
                    progress: bool = True) -> dict:
    """A solve's policy (``make_policy`` as `evaluate_policy`'s) re-run in the reference physics
    (`config.REFERENCE_SOLVER`) at the task's timestep dt and at dt/2 (`config.REFERENCE_CHECKS`):
    on ``nworld`` fresh worlds of ``seed`` (a training's: its seed + 1), one episode each at
    amplitude 1 with the pushes on, its falls at most ``cfg.max_fall_rate`` of the episodes and
    its tracking at least ``cfg.min_tracking`` at both (docs/task.md).

    Returns a dict: passed (bool), reason (None, or why: "dt/2: fall rate 0.083 > 0.05"), nworld,
    seed, seconds (wall time, s), solver (`REFERENCE_SOLVER`), solver_engine (as the engine ran
    it), thresholds (max_fall_rate, min_tracking), and per label ("dt", "dt/2") `_REFERENCE_KEEP`.
    """
    from fightlab.config import reference_env

    t0 = time.perf_counter()
    out = dict(nworld=int(nworld), seed=int(seed), solver=dict(REFERENCE_SOLVER),
               thresholds=dict(max_fall_rate=cfg.max_fall_rate, min_tracking=cfg.min_tracking))
    reasons = []
    for label, frac in REFERENCE_CHECKS:
        env_cfg = dataclasses.replace(reference_env(cfg.env), timestep=cfg.env.timestep * frac)
        r = evaluate_policy(make_policy, cfg.body, env_cfg, nworld, device, amplitude=1.0, seed=seed,
                            graph=cfg.graph, tree_factor=cfg.tree_factor, progress=progress,
                            backend=cfg.backend, threads=cfg.workers)
        out[label] = {k: r[k] for k in _REFERENCE_KEEP}
        out.setdefault("solver_engine", r["physics_engine"])
        fall, trk = r["fall_rate"], r["tracking"]
        if not (math.isfinite(fall) and fall <= cfg.max_fall_rate):
            reasons.append(f"{label}: fall rate {fall:.3f} > {cfg.max_fall_rate:g}")
        if not (math.isfinite(trk) and trk >= cfg.min_tracking):
            reasons.append(f"{label}: tracking {trk:.3f} < {cfg.min_tracking:g}")
    out["passed"] = not reasons
    out["reason"] = "; ".join(reasons) or None
    out["seconds"] = time.perf_counter() - t0
    return out
