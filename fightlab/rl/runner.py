"""Training loop: rollouts on the StanceEnv, PPO updates, the curriculum
(:mod:`fightlab.rl.curriculum`), per-iteration rows (``rows.csv``), checkpoints
(:mod:`fightlab.rl.checkpoint`) and ``--resume``, in a run folder (:mod:`fightlab.rundir`).

Time to solve = the summed training wall clock of the
iterations up to and including the solving one, over all `--resume` segments; compilation and
graph capture (`compile_s`) are excluded and reported apart.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from fightlab.config import TrainConfig, from_dict, to_dict, validate_train
from fightlab.rl.checkpoint import CheckpointError, load_checkpoint, load_policy, resume_config
from fightlab.rl.curriculum import Curriculum
from fightlab.rl.models import ActorCritic
from fightlab.rl.ppo import ppo_update
from fightlab.rl.storage import RolloutStorage, compute_gae
from fightlab.sim.nvtx import nvtx_range


def _sync(device: str):
    """Wait for the device (warp and torch), through fightlab.timing's one definition of a sync:
    the training wall clock is read only after the GPU work of the timed region has finished."""
    from fightlab.timing import default_sync

    default_sync(device)()


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
        self.rundir = RunDir(cfg.run_dir, fresh=resume_ck is None, resume=cfg.resume)
        if self.rundir.removed:
            print(f"fresh run in {self.rundir.path}: removed {len(self.rundir.removed)} files of an "
                  "earlier run", flush=True)
        try:
            from fightlab import results

            results.read_rows("train", self.rundir.path)  # a torn row file: said now, not at the end
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
        self.rows: list[dict] = []     # this segment's rows
        self.history: list[dict] = []  # every row of the run, all segments (kept in checkpoints)
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
            if self.history:  # rows.csv is the checkpoint's history (a copy's, a branch's too)
                _write_rows(rows_csv, self.history)
            elif rows_csv.exists():  # older checkpoints: drop rows past the checkpoint
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
        self.history.append(row)
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
                  segments=self.segments, history=self.history,
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
        try:
            self._restore(ck)
        except CheckpointError:
            raise
        except (RuntimeError, TypeError, ValueError, KeyError, IndexError) as e:
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise CheckpointError(f"checkpoint {self.cfg.resume!r} could not be restored "
                                  f"({type(e).__name__}: {first})") from None

    def _restore(self, ck: dict):
        load_policy(self.agent, ck, self.cfg.body, self.env, self.optimizer)
        self.curriculum.load_state_dict(ck["curriculum"])
        self.iteration = int(ck["iteration"])
        self.elapsed_s = float(ck["elapsed_s"])
        self.time_to_solve_s = ck.get("time_to_solve_s")
        self.solve_iteration = ck.get("solve_iteration")
        self.run_id = ck["run_id"]
        self.history = list(ck.get("history") or [])
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
        self.rundir.add("rows.csv", "rows.csv.tmp")
        self._start()
        rows_path = self.run_dir / "rows.csv"
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


def _write_rows(path: Path, rows: list[dict]) -> None:
    """Write a run's rows.csv from its rows (atomically)."""
    import csv

    tmp = path.with_name(path.name + ".tmp")
    fields = list(dict.fromkeys(k for r in rows for k in r))  # rows of another version too
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


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
        w = csv.DictWriter(f, fieldnames=list(row), lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow(row)


def train(cfg: TrainConfig, progress: bool = True) -> dict:
    """Train one run (see `Trainer.train`; the run folder is released at the end); returns its
    result dict."""
    with Trainer(cfg, progress=progress) as trainer:
        return trainer.train()
