"""Training loop: rollouts on the StanceEnv, PPO updates, the amplitude curriculum, the solve
criterion, per-iteration rows, checkpoints and `--resume`.

Curriculum (see `Curriculum`): the rhythm amplitude a rises through `curriculum_stages`
(0.1 … 1.0), starting at 0.1; each widening ramps the reference over 1 s in all worlds. After the
start and after each widening the runner waits W = `curriculum_wait` iterations (≈ 2 episodes per
world at 32 steps per iteration); from then on every iteration checks the episodes that finished in
the last W iterations and widens when their fall rate ≤ 5 % and their bounce tracking ≥ 0.75.
Solved: at the last stage the same check passes, the mean episode length is ≥ 9.5 s and every
episode ended by a fall or the 10 s limit. Time to solve = the summed training wall clock of the
iterations up to and including the solving one, over all `--resume` segments; compilation and
graph capture (`compile_s`) are excluded and reported apart.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from fightlab.config import TrainConfig, from_dict, to_dict, validate_train
from fightlab.rl.models import ActorCritic
from fightlab.rl.ppo import ppo_update
from fightlab.rl.storage import RolloutStorage, compute_gae
from fightlab.sim.nvtx import nvtx_range

WINDOW_KEYS = ("episodes", "falls", "timeouts", "episode_s_sum", "track_num", "track_den")


@dataclass
class Curriculum:
    """Amplitude curriculum and solve criterion over per-iteration episode summaries.

    `update(summary)` takes one iteration's summary (a dict with at least WINDOW_KEYS: counts of
    episodes finished, falls, timeouts, the sum of their lengths in s, and the lock-in tracking
    numerator/denominator summed over them) and returns the event: "wait" (inside the W
    iterations after a widening), "hold" (checked, not good enough), "widen" or "solved".
    """

    stages: tuple[float, ...]
    wait: int = 32
    max_fall_rate: float = 0.05
    min_tracking: float = 0.75
    min_episode_s: float = 9.5
    stage: int = 0
    since_widen: int = 0
    solved: bool = False
    window: deque = field(default_factory=deque)

    @property
    def amplitude(self) -> float:
        return float(self.stages[self.stage])

    def window_stats(self) -> dict:
        """Fall rate, tracking, mean episode length and counts over the window (NaN if empty)."""
        tot = {k: sum(w[k] for w in self.window) for k in WINDOW_KEYS}
        n = tot["episodes"]
        return dict(
            episodes=n,
            fall_rate=tot["falls"] / n if n else math.nan,
            tracking=tot["track_num"] / tot["track_den"] if tot["track_den"] > 0 else math.nan,
            mean_episode_s=tot["episode_s_sum"] / n if n else math.nan,
            other_endings=n - tot["falls"] - tot["timeouts"],
        )

    def passes(self, final: bool) -> bool:
        s = self.window_stats()
        if not s["episodes"]:
            return False
        ok = s["fall_rate"] <= self.max_fall_rate and s["tracking"] >= self.min_tracking
        if final:
            ok = ok and s["mean_episode_s"] >= self.min_episode_s and s["other_endings"] == 0
        return bool(ok)

    def update(self, summary: dict) -> str:
        if self.solved:
            return "solved"
        self.window.append({k: summary[k] for k in WINDOW_KEYS})
        while len(self.window) > self.wait:
            self.window.popleft()
        self.since_widen += 1
        if self.since_widen < self.wait:
            return "wait"
        final = self.stage == len(self.stages) - 1
        if not self.passes(final):
            return "hold"
        if final:
            self.solved = True
            return "solved"
        self.stage += 1
        self.since_widen = 0
        self.window.clear()
        return "widen"

    def state_dict(self) -> dict:
        return dict(stage=self.stage, since_widen=self.since_widen, solved=self.solved,
                    window=list(self.window))

    def load_state_dict(self, s: dict) -> None:
        self.stage, self.since_widen, self.solved = s["stage"], s["since_widen"], s["solved"]
        self.window = deque(s["window"])


def _sync(device: str):
    """Wait for the device (warp and torch), through fightlab.timing's one definition of a sync:
    the training wall clock is read only after the GPU work of the timed region has finished."""
    from fightlab.timing import default_sync

    default_sync(device)()


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable, truncated or not a fightlab checkpoint."""


def _check_checkpoint(p: Path, ck: dict) -> None:
    """Types of what a checkpoint holds, checked before anything is built from it."""
    import numpy as np

    from fightlab.config import ConfigError

    def bad(what):
        return CheckpointError(f"checkpoint {str(p)!r} is damaged or hand-edited: {what}")

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if not isinstance(ck["config"], dict):
        raise bad(f"config must be a dict, got {type(ck['config']).__name__}")
    try:
        validate_train(dataclasses.replace(from_dict(ck["config"]), device="cpu"))
    except ConfigError as e:
        raise bad(f"config: {e}") from None
    it = ck["iteration"]
    if isinstance(it, bool) or not isinstance(it, int) or it < 0:
        raise bad(f"iteration must be an integer >= 0, got {it!r}")
    if not number(ck["elapsed_s"]) or ck["elapsed_s"] < 0:
        raise bad(f"elapsed_s must be a number >= 0, got {ck['elapsed_s']!r}")
    for k in ("agent", "optimizer"):
        if not isinstance(ck[k], dict):
            raise bad(f"{k} must be a state dict, got {type(ck[k]).__name__}")
    cur = ck["curriculum"]
    if not isinstance(cur, dict):
        raise bad(f"curriculum must be a dict, got {type(cur).__name__}")
    for k, typ in (("stage", int), ("since_widen", int), ("solved", bool), ("window", list)):
        v = cur.get(k)
        if not isinstance(v, typ) or (typ is int and (isinstance(v, bool) or v < 0)):
            raise bad(f"curriculum[{k!r}] must be {'an integer >= 0' if typ is int else typ.__name__}, "
                      f"got {v!r}")
    n_stages = len(ck["config"].get("curriculum_stages") or ())
    if not cur["stage"] < n_stages:
        raise bad(f"curriculum stage {cur['stage']} is beyond the config's {n_stages} stages")
    if not all(isinstance(w, dict) and set(WINDOW_KEYS) <= set(w) for w in cur["window"]):
        raise bad(f"curriculum window entries must be dicts with {list(WINDOW_KEYS)}")
    if "env_state" not in ck or not isinstance(ck["env_state"], dict) or not all(
            isinstance(v, np.ndarray) for v in ck["env_state"].values()):
        raise bad("env_state must be a dict of numpy arrays (the simulation state)")
    for k in ("obs", "torch_rng", "gen_state"):
        if not isinstance(ck.get(k), torch.Tensor):
            raise bad(f"{k} must be a tensor, got {type(ck.get(k)).__name__}")
    if not number(ck.get("amp_target")):
        raise bad(f"amp_target must be a number, got {ck.get('amp_target')!r}")
    for k in ("time_to_solve_s", "compile_s"):
        if ck.get(k) is not None and not number(ck[k]):
            raise bad(f"{k} must be a number or None, got {ck[k]!r}")
    if ck.get("solve_iteration") is not None and (isinstance(ck["solve_iteration"], bool)
                                                  or not isinstance(ck["solve_iteration"], int)):
        raise bad(f"solve_iteration must be an integer or None, got {ck['solve_iteration']!r}")
    if ck.get("run_id") is not None and not (isinstance(ck["run_id"], str) and ck["run_id"].isalnum()):
        raise bad(f"run_id must be letters and digits, got {ck['run_id']!r}")
    segs = ck.get("segments")
    if segs is not None and not (isinstance(segs, list) and all(isinstance(x, dict) for x in segs)):
        raise bad(f"segments must be a list of dicts, got {segs!r}")


def load_checkpoint(path) -> dict:
    """Load a fightlab checkpoint (torch.save dict) and check the type of everything it holds.

    Raises:
      CheckpointError: naming the path: missing, unreadable, truncated, not a fightlab
        checkpoint, or damaged / hand-edited (a field of the wrong type or out of range).
    """
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {str(p)!r} does not exist or is not a file")
    try:
        ck = torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:  # truncated zip, pickle garbage, …
        raise CheckpointError(f"checkpoint {str(p)!r} is unreadable or truncated ({type(e).__name__}: {e})") from None
    need = {"format", "config", "agent", "optimizer", "curriculum", "iteration", "elapsed_s"}
    if not isinstance(ck, dict) or ck.get("format") != "fightlab-ckpt-1" or not need <= set(ck):
        raise CheckpointError(f"checkpoint {str(p)!r} is not a fightlab checkpoint "
                              f"(missing {sorted(need - set(ck)) if isinstance(ck, dict) else 'everything'})")
    _check_checkpoint(p, ck)
    return ck


#: TrainConfig fields a resumed segment may change (each is recorded in the segment's entry);
#: every other field of a resumed run is its checkpoint's. The run folder is the checkpoint's.
SEGMENT_FIELDS = ("device", "max_iterations", "segment_s")


def resume_conflicts(saved: TrainConfig, given: dict) -> list[tuple[str, object, object]]:
    """The settings in ``given`` ({TrainConfig field: value}, only what the user set) that
    differ from the checkpoint's config ``saved`` and are not :data:`SEGMENT_FIELDS`: a
    resumed run keeps them, so each is a conflict, returned as (field, given, checkpoint's)."""
    return [(k, v, getattr(saved, k)) for k, v in given.items()
            if k not in SEGMENT_FIELDS and k != "resume" and str(v) != str(getattr(saved, k))]


def resume_config(saved: TrainConfig, cfg: TrainConfig) -> TrainConfig:
    """The config of a resumed segment: the checkpoint's ``saved`` config with only
    :data:`SEGMENT_FIELDS` taken from ``cfg``, ``resume`` = cfg.resume and ``run_dir`` = the
    checkpoint's folder (a run stays in its folder, wherever that has been moved)."""
    return dataclasses.replace(saved, resume=cfg.resume,
                               run_dir=str(Path(cfg.resume).resolve().parent),
                               **{k: getattr(cfg, k) for k in SEGMENT_FIELDS})


def _load_policy(agent: ActorCritic, ck: dict, body: str, env, optimizer=None) -> None:
    """Load a checkpoint's policy (and optimizer) state; a policy of another body or config is a
    CheckpointError with a one-line reason, not torch's size-mismatch listing."""
    try:
        agent.load_state_dict(ck["agent"])
        if optimizer is not None:
            optimizer.load_state_dict(ck["optimizer"])
    except (RuntimeError, KeyError, ValueError) as e:
        first = str(e).strip().splitlines()[0][:200]
        raise CheckpointError(f"checkpoint's policy does not fit body {body!r} (obs {env.obs_dim}, "
                              f"actions {env.nu}): {first}") from None


class Trainer:
    """Owns the env, agent, optimizer, curriculum and the iteration loop of one training run.

    Args:
      cfg: TrainConfig (validated here; bad values raise ValueError naming them).
      progress: show a tqdm bar.
    """

    def __init__(self, cfg: TrainConfig, progress: bool = True):
        from fightlab.envs.stance import StanceEnv
        from fightlab.rundir import RunDir

        resume_ck = None
        if cfg.resume:
            resume_ck = load_checkpoint(cfg.resume)
            saved = from_dict(resume_ck["config"])
            # the run continues with every setting of its checkpoint; only SEGMENT_FIELDS change
            cfg = resume_config(saved, cfg)
            done = resume_ck["curriculum"].get("solved") and saved.stop_when_solved
            if done or resume_ck["iteration"] >= cfg.max_iterations:
                from fightlab.config import ConfigError

                raise ConfigError(f"run in {cfg.resume!r} already finished at iteration "
                                  f"{resume_ck['iteration']} ({'solved' if done else 'max_iterations reached'}); "
                                  "raise --max-iterations to train an unsolved run further")
        self.cfg = cfg = validate_train(cfg)
        # one writer per run folder; a fresh run deletes only the files an earlier run wrote
        self.rundir = RunDir(cfg.run_dir, fresh=resume_ck is None)
        if self.rundir.removed:
            print(f"fresh run in {self.rundir.path}: removed {len(self.rundir.removed)} files of an "
                  "earlier run", flush=True)
        try:
            self._build(cfg, progress, resume_ck, StanceEnv)
        except BaseException:
            self.rundir.release()
            raise

    def _build(self, cfg, progress, resume_ck, StanceEnv):
        self.device = cfg.device
        self.progress = progress
        torch.manual_seed(cfg.seed)
        self.env = StanceEnv(cfg.body, cfg.nworld, cfg.device, seed=cfg.seed, cfg=cfg.env,
                             graph=cfg.graph, tree_factor=cfg.tree_factor)
        dev = torch.device(self.device)
        self.agent = ActorCritic(self.env.obs_dim, self.env.nu, cfg.ppo.hidden, cfg.ppo.init_std,
                                 obs_min_std=self.env.obs_min_std).to(dev)
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5)
        self.buf = RolloutStorage(cfg.ppo.num_steps, cfg.nworld, self.env.obs_dim, self.env.nu, dev)
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(cfg.seed + 12345)
        self.curriculum = Curriculum(cfg.curriculum_stages, cfg.curriculum_wait, cfg.max_fall_rate,
                                     cfg.min_tracking, cfg.min_episode_s)
        self.iteration = 0
        self.elapsed_s = 0.0         # summed training wall clock over segments
        self.time_to_solve_s = None
        self.solve_iteration = None
        self.rows: list[dict] = []
        from fightlab.meta import new_run_id

        self.run_id = new_run_id()   # kept in every checkpoint: all segments share one run_id
        # what this segment ran with; resumed runs carry the earlier segments' entries too, so a
        # row whose segments ran different code, kernels or devices says so (report.train_row)
        from fightlab.meta import git_commit, gpu_name

        self.segments = [dict(commit=git_commit(), tree_factor_variant=self.env.tree_factor_variant,
                              shared_gpu=int(os.environ.get("FIGHTLAB_SHARED_GPU", "1")),
                              host_jobs=int(os.environ.get("FIGHTLAB_HOST_JOBS", "1")),
                              device=cfg.device, gpu=gpu_name(cfg.device),
                              max_iterations=cfg.max_iterations, segment_s=cfg.segment_s,
                              start_iteration=int(resume_ck["iteration"]) if resume_ck else 0)]
        self.run_dir = self.rundir.path
        self.compile_s = 0.0
        self._resume_ck = resume_ck

    def close(self) -> None:
        """Release the run folder (its lock); the Trainer can not train after this."""
        self.rundir.release()

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------
    def _start(self):
        from fightlab.sim.physics import shared_stream

        with shared_stream(self.device):
            t0 = time.perf_counter()
            self.env.warmup()
            self.obs = self.env.reset(stagger=True)
            self.env.set_amplitude(self.curriculum.amplitude, immediate=True)
            # warm up torch (cuBLAS handles, allocator) outside the timed loop
            with torch.no_grad():
                self.agent.get_action_and_value(self.obs)
            _sync(self.device)
            self.compile_s = time.perf_counter() - t0
        rows_csv = self.run_dir / "rows.csv"
        if self._resume_ck is not None:
            self._load(self._resume_ck)
            if rows_csv.exists():  # drop rows written after the checkpoint (a crashed segment)
                _truncate_rows(rows_csv, self.iteration)

    def _rollout(self) -> dict:
        cfg, env, buf, agent = self.cfg, self.env, self.buf, self.agent
        gamma = cfg.ppo.gamma
        obs = self.obs
        for step in range(cfg.ppo.num_steps):
            with torch.no_grad(), nvtx_range("policy"):
                action, logp, _, value, _, _ = agent.get_action_and_value(obs)
            buf.obs[step].copy_(obs)
            buf.actions[step].copy_(action)
            buf.logprobs[step].copy_(logp)
            buf.values[step].copy_(value)
            obs, reward, done, info = env.step(action)
            # bootstrap the value at time-outs (the episode was cut, not ended): rsl_rl
            buf.rewards[step].copy_(reward + gamma * value * info["timeout"])
            buf.dones[step].copy_(done)
        with torch.no_grad(), nvtx_range("policy"):
            next_value = agent.get_value(obs)
        with nvtx_range("update"):
            adv, ret = compute_gae(buf.rewards, buf.values, buf.dones, next_value, gamma, cfg.ppo.gae_lambda)
        buf.advantages.copy_(adv)
        buf.returns.copy_(ret)
        self.obs = obs
        return dict(reward=buf.rewards.mean())

    def iterate(self) -> dict:
        """Run one iteration (rollout + update + curriculum) and return its row."""
        from fightlab.sim.physics import shared_stream

        cfg, env = self.cfg, self.env
        with shared_stream(self.device):
            t0 = time.perf_counter()
            r = self._rollout()
            _sync(self.device)
            t1 = time.perf_counter()
            with nvtx_range("update"):
                losses = ppo_update(self.agent, self.optimizer, self.buf, cfg.ppo, self.gen)
                # the normaliser moves only between iterations, so the rollout's log-probs and
                # the update see the same normalisation
                self.agent.obs_norm.update(self.buf.obs.reshape(-1, env.obs_dim))
            _sync(self.device)
            t2 = time.perf_counter()
            summary = env.read_summary()
            reward = float(r["reward"])
            event = self.curriculum.update(summary)
            if event == "widen":
                env.set_amplitude(self.curriculum.amplitude)
            t3 = time.perf_counter()
        self.iteration += 1
        wall = t3 - t0
        self.elapsed_s += wall
        n_env = cfg.nworld * cfg.ppo.num_steps
        ws = self.curriculum.window_stats()
        n = summary["episodes"]
        row = dict(
            iteration=self.iteration, wall_s=wall, elapsed_s=self.elapsed_s,
            env_steps=self.iteration * n_env, env_steps_per_s=n_env / wall,
            physics_steps_per_s=n_env * env.substeps / wall,
            amplitude=self.curriculum.amplitude if event != "widen" else cfg.curriculum_stages[self.curriculum.stage - 1],
            stage=self.curriculum.stage, event=event,
            episodes=n, fall_rate=summary["falls"] / n if n else math.nan,
            mean_episode_s=summary["episode_s_sum"] / n if n else math.nan,
            tracking=summary["track_num"] / summary["track_den"] if summary["track_den"] > 0 else math.nan,
            window_fall_rate=ws["fall_rate"], window_tracking=ws["tracking"],
            window_episode_s=ws["mean_episode_s"],
            reward=reward, episode_return=summary["return_sum"] / n if n else math.nan,
            **losses,
            overflow_count=summary["overflow_worlds"], nefc_overflow=summary["nefc_overflow"],
            contact_overflow=summary["contact_overflow"], nan_resets=summary["nan_resets"],
            solver_iter_hits=summary["solver_iter_hits"], solver_ls_hits=summary["solver_ls_hits"],
            contact_falls=summary["contact_falls"], tilt_falls=summary["tilt_falls"],
            rollout_s=t1 - t0, update_s=t2 - t1,
        )
        if summary["overflow_worlds"]:
            print(f"OVERFLOW iteration {self.iteration}: {summary['overflow_worlds']} slot resets in "
                  f"{summary['overflow_distinct_worlds']} of {cfg.nworld} worlds (a world that runs "
                  f"out of slots is reset, counted as a fall, and may run out again; resets by "
                  f"constraint rows: {summary['nefc_overflow']}, by contacts: "
                  f"{summary['contact_overflow']}; nconmax={env.slots.nconmax}, "
                  f"njmax={env.slots.njmax})", flush=True)
        if summary["nan_resets"]:
            print(f"NAN iteration {self.iteration}: {summary['nan_resets']} worlds had non-finite "
                  "qpos/qvel; reset and counted as falls", flush=True)
        if event == "solved" and self.time_to_solve_s is None:
            self.time_to_solve_s = self.elapsed_s
            self.solve_iteration = self.iteration
        self.rows.append(row)
        return row

    # ------------------------------------------------------------------------------------------
    def save(self, path=None) -> Path:
        """Write a checkpoint (agent, optimizer, curriculum, env state, RNG, counters)."""
        path = Path(path) if path else self.run_dir / f"ckpt_{self.iteration:06d}.pt"
        ck = dict(format="fightlab-ckpt-1", config=to_dict(self.cfg), agent=self.agent.state_dict(),
                  optimizer=self.optimizer.state_dict(), curriculum=self.curriculum.state_dict(),
                  iteration=self.iteration, elapsed_s=self.elapsed_s, compile_s=self.compile_s,
                  time_to_solve_s=self.time_to_solve_s, solve_iteration=self.solve_iteration,
                  env_state=self.env.state_dict(), amp_target=self.env.amplitude_target,
                  obs=self.obs.detach().cpu(), torch_rng=torch.get_rng_state(),
                  gen_state=self.gen.get_state().cpu(), run_id=self.run_id,
                  segments=self.segments,
                  cuda_rng=torch.cuda.get_rng_state(torch.device(self.device)) if self.device.startswith("cuda") else None)
        tmp = path.with_suffix(".tmp")
        inside = path.resolve().parent == self.run_dir
        if inside:  # recorded first, so that a kill -9 mid-write leaves nothing unlisted
            self.rundir.add(path.name, tmp.name, "latest.pt", "latest.pt.tmp")
        torch.save(ck, tmp)
        tmp.replace(path)
        if not inside:
            return path  # a copy elsewhere: not part of the run folder
        link = self.run_dir / "latest.pt.tmp"
        link.unlink(missing_ok=True)
        try:
            link.symlink_to(path.name)
            link.replace(self.run_dir / "latest.pt")  # atomic: latest.pt is never missing
        except OSError:
            pass
        return path

    def _load(self, ck: dict):
        _load_policy(self.agent, ck, self.cfg.body, self.env, self.optimizer)
        self.curriculum.load_state_dict(ck["curriculum"])
        self.iteration = int(ck["iteration"])
        self.elapsed_s = float(ck["elapsed_s"])
        self.time_to_solve_s = ck.get("time_to_solve_s")
        self.solve_iteration = ck.get("solve_iteration")
        self.run_id = ck.get("run_id") or self.run_id
        # the earlier segments' setups, then this one's (kept last)
        self.segments = list(ck.get("segments") or [{"commit": "unknown"}]) + self.segments[-1:]
        try:
            self.env.load_state_dict({"amp_target": ck["amp_target"], **ck["env_state"]})
        except ValueError as e:
            raise CheckpointError(f"checkpoint's {e}") from None
        self.obs.copy_(ck["obs"].to(self.obs.device))
        torch.set_rng_state(ck["torch_rng"])
        self.gen.set_state(ck["gen_state"].to(self.gen.device) if self.device == "cpu" else ck["gen_state"])
        if ck.get("cuda_rng") is not None and self.device.startswith("cuda"):
            torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(self.device))

    # ------------------------------------------------------------------------------------------
    def train(self) -> dict:
        """Train until solved (if `stop_when_solved`), `max_iterations` or `segment_s`.

        Returns a result dict: solved, time_to_solve_s (None if unsolved), iterations,
        compile_s, env_steps_per_s, physics_steps_per_s, rollout_s_per_iter, update_s_per_iter,
        final_amplitude, fall_rate, mean_episode_s, overflow_count, nan_resets, rows (list).
        """
        if not self.rundir.locked:
            from fightlab.config import ConfigError

            raise ConfigError(f"this Trainer of {self.run_dir} is closed (it trained already or "
                              "was closed); make a new Trainer, or resume from its checkpoint")
        try:
            return self._train()
        except BaseException:
            self.close()  # a failed or interrupted segment leaves the folder free for --resume
            raise

    def _train(self) -> dict:
        from tqdm import tqdm  # plain text bar: works in terminals and notebooks without ipywidgets

        cfg = self.cfg
        self.segment_end = False
        self._start()
        rows_path = self.run_dir / "rows.csv"
        self.rundir.add("rows.csv")
        seg_t0 = time.perf_counter()
        bar = tqdm(total=cfg.max_iterations, initial=self.iteration, disable=not self.progress,
                   desc=f"{cfg.body} ×{cfg.nworld}", unit="it")
        while self.iteration < cfg.max_iterations:
            row = self.iterate()
            _append_csv(rows_path, row)
            bar.update(1)
            if not self.progress and (self.iteration % 25 == 0 or row["event"] in ("widen", "solved")):
                print(f"it {self.iteration} t={self.elapsed_s:.1f}s a={row['amplitude']:.1f} "
                      f"{row['event']} fall={row['window_fall_rate']:.3f} trk={row['window_tracking']:.2f} "
                      f"ep={row['window_episode_s']:.2f}s r={row['reward']:.3f} "
                      f"sps={row['env_steps_per_s']:.0f} roll={row['rollout_s']:.3f}s "
                      f"upd={row['update_s']:.3f}s lr={row['learning_rate']:.1e}", flush=True)
            bar.set_postfix(a=row["amplitude"], fall=f"{row['window_fall_rate']:.3f}",
                            trk=f"{row['window_tracking']:.2f}", sps=f"{row['env_steps_per_s']:.0f}")
            if cfg.checkpoint_every and self.iteration % cfg.checkpoint_every == 0:
                self.save()
            if self.curriculum.solved and cfg.stop_when_solved:
                break
            if cfg.segment_s is not None and time.perf_counter() - seg_t0 > cfg.segment_s:
                self.segment_end = True
                break
        bar.close()
        self.save()
        return self.result()

    def result(self) -> dict:
        rows = self.rows
        steady = rows[1:] if len(rows) > 1 else rows
        med = lambda k: float(np.median([r[k] for r in steady])) if steady else math.nan  # noqa: E731
        last = rows[-1] if rows else {}
        ws = self.curriculum.window_stats()
        return dict(solved=self.curriculum.solved, time_to_solve_s=self.time_to_solve_s,
                    iterations=self.solve_iteration or self.iteration, compile_s=self.compile_s,
                    env_steps_per_s=med("env_steps_per_s"), physics_steps_per_s=med("physics_steps_per_s"),
                    rollout_s_per_iter=med("rollout_s"), update_s_per_iter=med("update_s"),
                    final_amplitude=self.curriculum.amplitude, fall_rate=ws["fall_rate"],
                    mean_episode_s=ws["mean_episode_s"], tracking=ws["tracking"],
                    overflow_count=int(sum(r["overflow_count"] for r in rows)),
                    nan_resets=int(sum(r["nan_resets"] for r in rows)),
                    elapsed_s=self.elapsed_s, last_row=last, rows=rows,
                    segment_end=bool(getattr(self, "segment_end", False)) and not self.curriculum.solved)


def _truncate_rows(path: Path, n: int) -> None:
    """Keep the header and rows 1..n of a run's rows.csv (atomically): whole rows only, in
    iteration order, so rows of a killed segment past its checkpoint and a torn last line go."""
    import csv

    with open(path, newline="") as f:
        recs = list(csv.reader(f))
    if not recs:
        return
    header, keep = recs[0], [recs[0]]
    col = header.index("iteration") if "iteration" in header else 0
    for rec in recs[1:]:
        if len(keep) > n or len(rec) != len(header) or rec[col] != str(len(keep)):
            break
        keep.append(rec)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(keep)
    tmp.replace(path)


def _append_csv(path: Path, row: dict):
    import csv

    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)


def train(cfg: TrainConfig, progress: bool = True) -> dict:
    """Train one run (see `Trainer.train`; the run folder is released at the end); returns its
    result dict."""
    with Trainer(cfg, progress=progress) as trainer:
        return trainer.train()


def evaluate(checkpoint, nworld: int = 256, device: str = "cpu", episodes_per_world: float = 1.0,
             timestep: float | None = None, zero_action: bool = False, amplitude: float = 1.0,
             seed: int = 1, graph: bool = True, progress: bool = True) -> dict:
    """Re-run a saved policy (its deterministic mean action) or the zero-action policy (the servos
    holding the reference alone) on fresh worlds and report the solve statistics.

    Args:
      checkpoint: path of a fightlab checkpoint (its body, task config and policy are used;
        for the zero-action policy without a checkpoint see `evaluate_zero_action`).
      nworld: worlds; episodes_per_world: how long to run, in episodes (10 s each);
      timestep: physics timestep override in s (e.g. 0.002 for the convergence check; the env
        then takes control_dt / timestep substeps); zero_action: ignore the policy;
      amplitude: rhythm amplitude, fixed (no ramp); progress: a tqdm bar over the env steps.

    Returns:
      dict: body, zero_action, timestep (s), nworld, amplitude, episodes_per_world, seconds_per_world
      (simulated s each world ran: episodes_per_world episode lengths; a world that falls starts
      a new episode), run_id (of the training run), episodes (ended, all worlds together), falls,
      fall_rate, tracking, mean_episode_s (s), overflow_count (slot resets), nan_resets,
      contact_falls, tilt_falls.

    Raises:
      CheckpointError: unreadable checkpoint or a policy that does not fit the body.
    """
    ck = load_checkpoint(checkpoint)
    cfg = from_dict(ck["config"])
    env_cfg = cfg.env if timestep is None else dataclasses.replace(cfg.env, timestep=timestep)
    return _evaluate(cfg.body, ck, env_cfg, nworld, device, episodes_per_world, zero_action,
                     amplitude, seed, graph, cfg.tree_factor, progress)


def evaluate_zero_action(body: str, nworld: int = 256, device: str = "cpu",
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
              graph, tree_factor, progress=True):
    from tqdm import tqdm

    from fightlab.config import validate_device
    from fightlab.envs.stance import StanceEnv
    from fightlab.sim.physics import shared_stream

    device = validate_device(device)
    nsteps = int(round(episodes_per_world * env_cfg.episode_steps))
    # the bar opens before the env is built: building it compiles and captures (slow on a CPU)
    bar = tqdm(total=nsteps, desc=f"evaluate {body} ×{nworld}", unit="step", disable=not progress)
    env = StanceEnv(body, nworld, device, seed=seed, cfg=env_cfg, graph=graph, tree_factor=tree_factor)
    agent = None
    if ck is not None and not zero_action:
        c = from_dict(ck["config"])
        agent = ActorCritic(env.obs_dim, env.nu, c.ppo.hidden, c.ppo.init_std,
                            obs_min_std=env.obs_min_std).to(torch.device(device))
        _load_policy(agent, ck, body, env)
        agent.eval()
    with shared_stream(device):
        env.set_amplitude(amplitude, immediate=True)
        obs = env.reset(stagger=False)
        zero = torch.zeros(nworld, env.nu, device=torch.device(device))
        for _ in range(nsteps):
            with torch.no_grad():
                a = zero if agent is None else agent.act_mean(obs)
            obs, _, _, _ = env.step(a)
            bar.update(1)
        s = env.read_summary()
    bar.close()
    n = s["episodes"]
    return dict(body=body, zero_action=agent is None, timestep=env.mjm.opt.timestep, nworld=nworld,
                amplitude=amplitude, episodes_per_world=episodes_per_world,
                seconds_per_world=nsteps * env_cfg.control_dt,
                run_id=ck.get("run_id") if ck is not None else None,
                # which policy: a checkpoint of a solved run, or one saved before the solve
                ckpt_iteration=ck.get("iteration") if ck is not None else None,
                ckpt_solved=bool(ck["curriculum"].get("solved")) if ck is not None else None,
                episodes=n, falls=s["falls"], fall_rate=s["falls"] / n if n else math.nan,
                tracking=s["track_num"] / s["track_den"] if s["track_den"] > 0 else math.nan,
                mean_episode_s=s["episode_s_sum"] / n if n else math.nan,
                overflow_count=s["overflow_worlds"], nan_resets=s["nan_resets"],
                contact_falls=s["contact_falls"], tilt_falls=s["tilt_falls"])
