"""Training loop: rollouts on the StanceEnv, PPO updates, the curriculum
(:mod:`fightlab.rl.curriculum`), per-iteration rows (``rows.csv``), checkpoints
(:mod:`fightlab.rl.checkpoint`) and ``--resume``, in a run folder (:mod:`fightlab.rundir`).

Time to solve = the summed training wall clock of the
iterations up to and including the solving one, over all `--resume` segments; compilation and
graph capture (`compile_s`) are excluded and reported apart.
"""

from __future__ import annotations

import math
import time
import weakref
from pathlib import Path

import numpy as np
import torch

from fightlab.config import TrainConfig, from_dict, task_warning, to_dict, validate_train
from fightlab.rl.checkpoint import CheckpointError, load_checkpoint, load_policy, resume_config
from fightlab.rl.curriculum import Curriculum, ratio
from fightlab.rl.graphs import TorchGraph
from fightlab.rl.models import ActorCritic
from fightlab.rl.ppo import STATS, PPOUpdate, adopt_optimizer_state, make_optimizer
from fightlab.rl.storage import RolloutStorage, compute_gae
from fightlab.sim.nvtx import nvtx_range
from fightlab.timing import HostReads


#: (body, device, backend) builds this process has announced (`announce_compile`)
_ANNOUNCED: set = set()


def announce_compile(body: str, device: str, backend: str = "gpu") -> str | None:
    """Say once per process and (body, device, backend), on stderr, before the env is built, that
    warp may now compile its kernels: a cold compile is silent for about a minute otherwise. When
    warp's kernel cache folder holds no module at all the compile is certain and said so; else it
    may still miss (another device, or kernels that changed). Returns the line, or None when this
    build was announced already."""
    import sys

    from fightlab.config import init_warp

    key = (body, device, backend)
    if key in _ANNOUNCED:
        return None
    _ANNOUNCED.add(key)
    cache = Path(init_warp().config.kernel_cache_dir or "")
    try:
        empty = not any(cache.iterdir())
    except OSError:  # no cache folder yet
        empty = True
    what = "MuJoCo Warp kernels" if backend == "gpu" else "the env's warp kernels"
    when = ("about a minute the first time (warp's kernel cache is empty)" if empty
            else "may take about a minute the first time")
    line = f"compiling {what} for {body} on {device}: {when}; cache {cache}"
    print(line, file=sys.stderr, flush=True)
    return line


def _sync(device: str):
    """Wait for the device (warp and torch), through fightlab.timing's one definition of a sync:
    the training wall clock is read only after the GPU work of the timed region has finished."""
    from fightlab.timing import default_sync

    default_sync(device)()


class PolicyIO:
    """The env's step tensors on the policy's device, for a CPU-backend env whose policy runs on
    another device (`TrainConfig.policy_device`): obs [nworld, obs_dim], reward, done, timeout
    [nworld] (float32 views of one buffer on that device, copied from the env's) and action
    [nworld, nu] (copied to the env's).

    Args:
      env: a `StanceEnv` (its obs / reward / done / timeout / action views, float32, on the
        CPU); device: the policy's torch device ("cpu", "cuda:N").

    `pull()` (after a reset, a load or a step) packs the env's outputs into one host buffer
    (pinned on CUDA) and copies it to the device without waiting: the buffer is written again
    only at the next pull, after a `push()` has waited for the device. `push()` (before a step)
    copies the action to the env and waits for it: on CUDA one host read per env step.
    """

    def __init__(self, env, device: str):
        dev = torch.device(device)
        n, k = int(env.obs.shape[0]), int(env.obs.shape[1])
        self.env = env
        self._host = torch.zeros((n, k + 3), dtype=torch.float32, pin_memory=dev.type == "cuda")
        self._dev = torch.zeros((n, k + 3), dtype=torch.float32, device=dev)
        self.obs = self._dev[:, :k]
        self.reward, self.done, self.timeout = (self._dev[:, k + i] for i in range(3))
        self.action = torch.zeros(tuple(env.action.shape), dtype=env.action.dtype, device=dev)

    def pull(self) -> None:
        """The env's obs, reward, done and timeout to the device (one copy, not waited for)."""
        e = self.env
        torch.cat([e.obs, e.reward[:, None], e.done[:, None], e.timeout[:, None]], dim=1, out=self._host)
        self._dev.copy_(self._host, non_blocking=True)

    def push(self) -> None:
        """The action to the env (waits for the device: the env reads it on the host next)."""
        self.env.action.copy_(self.action)


class Trainer:
    """Owns the env, agent, optimizer, curriculum and the iteration loop of one training run.

    Args:
      cfg: TrainConfig (validated here; bad values raise ValueError naming them).
      progress: show a tqdm bar.

    Attributes (besides env, agent, optimizer, lr, buf, update, curriculum): policy_graphs (the
    num_steps + 1 torch graphs of the rollout, `fightlab.rl.graphs.TorchGraph`), ppo_graph (the
    update's), graph_fallbacks (torch graphs asked for that run eager); policy_device (where
    torch runs: `cfg.policy_device`, else `cfg.device`) and io (what the policy reads and writes:
    the env itself, or a `PolicyIO` when `cfg.policy_device` is set: then an iteration reads the
    host num_steps + 1 times on CUDA, each action out and the summary).
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
        # a run that changes a Fixed field of the task says so once; its rows carry the task id
        if (warn := task_warning(cfg)) is not None:
            print(f"fightlab: warning: {warn}", flush=True)
        # one writer per run folder; a fresh run deletes only the files an earlier run wrote
        self.rundir = RunDir(cfg.run_dir, fresh=resume_ck is None, resume=cfg.resume)
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
        self.policy_device = cfg.policy_device or cfg.device
        self.progress = progress
        torch.manual_seed(cfg.seed)
        announce_compile(cfg.body, cfg.device, cfg.backend)  # building the env compiles warp's kernels
        self.env = StanceEnv(cfg.body, cfg.nworld, cfg.device, seed=cfg.seed, cfg=cfg.env,
                             graph=cfg.graph, tree_factor=cfg.tree_factor,
                             backend=cfg.backend, threads=cfg.workers)
        # the policy's view of the env: the env's own tensors, or copies on cfg.policy_device
        self.io = PolicyIO(self.env, cfg.policy_device) if cfg.policy_device else self.env
        dev = torch.device(self.policy_device)
        self.agent = ActorCritic(self.env.obs_dim, self.env.nu, cfg.ppo.hidden, cfg.ppo.init_std,
                                 obs_min_std=self.env.obs_min_std).to(dev)
        self.optimizer, self.lr = make_optimizer(self.agent, cfg.ppo.learning_rate, dev)
        self.buf = RolloutStorage(cfg.ppo.num_steps, cfg.nworld, self.env.obs_dim, self.env.nu, dev)
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(cfg.seed + 12345)
        self.update = PPOUpdate(self.agent, self.optimizer, self.lr, self.buf, cfg.ppo, self.gen)
        self._reward_mean = torch.zeros(1, device=dev)
        # the torch graphs (fightlab.rl.graphs): policy[s] for s = 0..num_steps, then the update
        T = cfg.ppo.num_steps
        me = weakref.ref(self)  # no reference cycle: a dropped Trainer frees its run folder at once
        self.policy_graphs = [TorchGraph(lambda s=s: me()._policy_step(s), dev, enabled=cfg.policy_graph,
                                   name="policy step") for s in range(T + 1)]
        self.ppo_graph = TorchGraph(lambda: me()._update_step(), dev, enabled=cfg.update_graph,
                                        name="PPO update", warmup=2)
        self._torch_ptrs: tuple = ()
        self.graph_fallbacks = 0   # graphs asked for that run eager (each said with a warning)
        self.graph_recaptures = 0
        self._reads = HostReads(self.policy_device)
        self._events = ([torch.cuda.Event(enable_timing=True) for _ in range(3)]
                        if dev.type == "cuda" else None)
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
        from fightlab.sim.cpu import backend_record
        from fightlab.meta import packing_from_env

        self.segments = [dict(commit=git_commit(), tree_factor_variant=self.env.tree_factor_variant,
                              **(packing_from_env() or dict(concurrent=1, mps=False, gpu_jobs=1)),
                              device=cfg.device, gpu=gpu_name(cfg.device),
                              **backend_record(self.env),
                              **({"policy_device": cfg.policy_device, "policy_gpu": gpu_name(cfg.policy_device)}
                                 if cfg.policy_device else {}),
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
            self._pull()
            # warm up torch (cuBLAS handles, allocator) outside the timed loop
            with torch.no_grad():
                self.agent.get_action_and_value(self.io.obs)
            self._sync()
            self.compile_s = time.perf_counter() - t0
        rows_csv = self.run_dir / "rows.csv"
        if self._resume_ck is not None:
            self._load(self._resume_ck)
            if self.history:  # rows.csv is the checkpoint's history (a copy's, a branch's too)
                _write_rows(rows_csv, self.history)
            elif rows_csv.exists():  # older checkpoints: drop rows past the checkpoint
                _truncate_rows(rows_csv, self.iteration)
            self._pull()  # the loaded observation
        with shared_stream(self.device):
            t0 = time.perf_counter()
            self._capture_torch()  # after a resume's load: the graphs see the loaded tensors
            self._sync()
            self.compile_s += time.perf_counter() - t0

    def _sync(self) -> None:
        """Wait for the env's device and, when it differs, the policy's."""
        _sync(self.device)
        if self.policy_device != self.device:
            _sync(self.policy_device)

    def _pull(self) -> None:
        """The env's outputs to the policy's device (a `PolicyIO`; nothing when the policy reads
        the env's own tensors); a read the iteration expects."""
        if self.io is not self.env:
            with self._reads.expected():
                self.io.pull()

    def _push(self) -> None:
        """The policy's action to the env (a `PolicyIO`; nothing otherwise); an expected read."""
        if self.io is not self.env:
            with self._reads.expected():
                self.io.push()

    # ------------------------------------------------------------------------------------------
    def _policy_step(self, s: int) -> None:
        """Torch work between env steps s−1 and s (no host reads; captured as policy[s]): store
        step s−1's reward (the value bootstrapped at time-outs: the episode was cut, not ended,
        as in rsl_rl) and done; then, for s < num_steps, sample step s's action from the env's
        observation into the buffer and the env's action; for s = num_steps, the bootstrap value,
        GAE and the mean reward."""
        cfg, env, buf, agent = self.cfg, self.io, self.buf, self.agent
        gamma, T = cfg.ppo.gamma, cfg.ppo.num_steps
        if s > 0:
            buf.rewards[s - 1].copy_(env.reward + gamma * buf.values[s - 1] * env.timeout)
            buf.dones[s - 1].copy_(env.done)
        with torch.no_grad():
            if s < T:  # buf.actions[s] holds this step's standard-normal noise (iterate draws it)
                action, logp, _, value, _, _ = agent.get_action_and_value(env.obs, noise=buf.actions[s])
                buf.obs[s].copy_(env.obs)
                buf.actions[s].copy_(action)
                buf.logprobs[s].copy_(logp)
                buf.values[s].copy_(value)
                env.action.copy_(action)
            else:
                next_value = agent.get_value(env.obs)
                adv, ret = compute_gae(buf.rewards, buf.values, buf.dones, next_value, gamma,
                                       cfg.ppo.gae_lambda)
                buf.advantages.copy_(adv)
                buf.returns.copy_(ret)
                self._reward_mean.copy_(buf.rewards.mean().reshape(1))

    def _update_step(self) -> None:
        """The PPO update over the buffer (permutations drawn before it), then the normaliser
        (it moves only between iterations, so the rollout's log-probs and the update see the
        same normalisation). No host reads; captured as the update graph."""
        self.update.run()
        self.agent.obs_norm.update(self.buf.obs.reshape(-1, self.env.obs_dim))

    def _torch_inputs(self) -> tuple:
        """Storage pointers of every tensor the torch graphs read or write (checked once per
        iteration: a replaced tensor re-captures)."""
        ts = [*self.agent.state_dict().values(), self.lr, self.update.perm, self.update.stats,
              self._reward_mean, *vars(self.buf).values(), self.io.obs, self.io.action,
              self.io.reward, self.io.done, self.io.timeout]
        ts += [p.grad for p in self.agent.parameters() if p.grad is not None]
        ts += [v for st in self.optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
        return tuple(t.data_ptr() for t in ts)

    def _capture_torch(self) -> None:
        """Warm up and capture the torch graphs (CUDA only, those enabled), then put back every
        state the warm-up moved (weights, normaliser, Adam state, learning rate, RNG): the first
        recorded iteration starts from the state the run had before capture."""
        graphs = [g for g in (*self.policy_graphs, self.ppo_graph) if g.enabled]
        if not graphs:
            return
        dev = torch.device(self.policy_device)
        with torch.no_grad():
            weights = {k: v.clone() for k, v in self.agent.state_dict().items()}
            adam = {id(p): {k: v.clone() for k, v in st.items() if torch.is_tensor(v)}
                    for p, st in self.optimizer.state.items()}
            lr = self.lr.clone()
        rng = torch.cuda.get_rng_state(dev)
        pool = torch.cuda.graph_pool_handle()
        for g in self.policy_graphs:
            if g.enabled and not g.capture(pool):
                for other in self.policy_graphs:  # one warning for the policy graphs, eager together
                    other.enabled, other.graph = False, None
                self.graph_fallbacks += 1
                break
        if self.ppo_graph.enabled and not self.ppo_graph.capture(pool):
            self.graph_fallbacks += 1
        with torch.no_grad():
            for k, v in self.agent.state_dict().items():
                v.copy_(weights[k])
            for p, st in self.optimizer.state.items():
                saved = adam.get(id(p), {})
                for k, v in st.items():
                    if torch.is_tensor(v):
                        v.copy_(saved[k]) if k in saved else v.zero_()  # fresh Adam state: zeros
            self.lr.copy_(lr)
        torch.cuda.set_rng_state(rng, dev)
        self._torch_ptrs = self._torch_inputs()

    def _check_torch_graphs(self) -> None:
        if any(g.graph is not None for g in (*self.policy_graphs, self.ppo_graph)) \
                and self._torch_inputs() != self._torch_ptrs:
            import sys

            print("fightlab: warning: tensors of the torch graphs were replaced; re-capturing",
                  file=sys.stderr, flush=True)
            self.graph_recaptures += 1
            self._capture_torch()

    def iterate(self) -> dict:
        """Run one iteration (rollout + update + curriculum) and return its row. One host read:
        the summary (env counters, losses, reward, learning rate) after the update; the
        rollout/update split comes from CUDA events read with it (host clock on the CPU)."""
        from fightlab.sim.physics import shared_stream

        cfg, env, T = self.cfg, self.env, self.cfg.ppo.num_steps
        ev = self._events
        with shared_stream(self.device), self._reads:
            t0 = time.perf_counter()
            self._check_torch_graphs()
            if ev:
                ev[0].record()
            # the rollout's action noise in one launch (no RNG inside the captured policy steps)
            torch.randn(self.buf.actions.shape, out=self.buf.actions)
            for s in range(T):
                with nvtx_range("policy"):
                    self.policy_graphs[s]()
                self._push()
                env.step()
                self._pull()
            with nvtx_range("policy"):
                self.policy_graphs[T]()
            if ev:
                ev[1].record()
            t1 = time.perf_counter()
            with nvtx_range("update"):
                self.update.draw()
                self.ppo_graph()
            if ev:
                ev[2].record()
            t2 = time.perf_counter()
            extra = torch.cat([self.update.stats, self._reward_mean])
            with self._reads.expected():
                summary = env.read_summary(extra=extra)
            host_reads = self._reads.take()
        vals = summary.pop("extra")
        losses = {k: float(v) for k, v in zip(STATS, vals[:len(STATS)])}
        reward = float(vals[len(STATS)])
        if ev:  # complete: the summary read waited for the stream
            rollout_s, update_s = ev[0].elapsed_time(ev[1]) / 1e3, ev[1].elapsed_time(ev[2]) / 1e3
        else:
            rollout_s, update_s = t1 - t0, t2 - t1
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
            tracking=ratio(summary["track_num"], summary["track_den"]),
            tracking_survived=ratio(summary["track_num_survived"], summary["track_den_survived"]),
            window_fall_rate=ws["fall_rate"], window_tracking=ws["tracking"],
            window_tracking_survived=ws["tracking_survived"],
            window_episode_s=ws["mean_episode_s"],
            reward=reward, episode_return=summary["return_sum"] / n if n else math.nan,
            **losses,
            overflow_count=summary["overflow_worlds"], nefc_overflow=summary["nefc_overflow"],
            contact_overflow=summary["contact_overflow"], nan_resets=summary["nan_resets"],
            solver_iter_hits=summary["solver_iter_hits"], solver_ls_hits=summary["solver_ls_hits"],
            contact_falls=summary["contact_falls"], tilt_falls=summary["tilt_falls"],
            rollout_s=rollout_s, update_s=update_s, host_reads=host_reads,
            graph_fallbacks=self.graph_fallbacks + env.graph_fallbacks,
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
                  optimizer=_float_lr(self.optimizer.state_dict()), curriculum=self.curriculum.state_dict(),
                  iteration=self.iteration, elapsed_s=self.elapsed_s, compile_s=self.compile_s,
                  time_to_solve_s=self.time_to_solve_s, solve_iteration=self.solve_iteration,
                  env_state=self.env.state_dict(), amp_target=self.env.amplitude_target,
                  obs=self.obs.detach().cpu(), torch_rng=torch.get_rng_state(),
                  gen_state=self.gen.get_state().cpu(), run_id=self.run_id,
                  segments=self.segments, history=self.history,
                  cuda_rng=torch.cuda.get_rng_state(torch.device(self.policy_device))
                  if self.policy_device.startswith("cuda") else None)
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
        adopt_optimizer_state(self.optimizer, self.lr)  # the loaded rate, capturable, steps on device
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
        try:
            self.gen.set_state(ck["gen_state"].to(self.gen.device) if self.policy_device == "cpu" else ck["gen_state"])
        except RuntimeError:
            # a checkpoint of another device type (a CPU generator's state does not fit a CUDA
            # one): the permutations continue from a seed of the run and its iteration, said here
            self.gen.manual_seed(self.cfg.seed + 12345 + self.iteration)
            print(f"resume: the minibatch permutation RNG comes from another device type; it "
                  f"continues from seed {self.cfg.seed + 12345 + self.iteration}", flush=True)
        if ck.get("cuda_rng") is not None and self.policy_device.startswith("cuda"):
            torch.cuda.set_rng_state(ck["cuda_rng"], torch.device(self.policy_device))

    # ------------------------------------------------------------------------------------------
    def train(self) -> dict:
        """Train until solved (if `stop_when_solved`), `max_iterations` or `segment_s`.

        Returns a result dict: solved, time_to_solve_s (None if unsolved), iterations,
        compile_s, env_steps_per_s, physics_steps_per_s, rollout_s_per_iter, update_s_per_iter,
        final_amplitude, fall_rate, mean_episode_s, overflow_count, nan_resets,
        host_reads_per_iter (median device→host reads per iteration, `fightlab.timing.HostReads`),
        graph_fallbacks (graphs asked for that ran eager, any segment), rows (list).
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
                    tracking_survived=ws["tracking_survived"],
                    overflow_count=int(sum(r["overflow_count"] for r in rows)),
                    nan_resets=int(sum(r["nan_resets"] for r in rows)),
                    host_reads_per_iter=med("host_reads"),
                    graph_fallbacks=int(max((r.get("graph_fallbacks") or 0 for r in self.history), default=0)),
                    elapsed_s=self.elapsed_s, last_row=last, rows=rows,
                    segment_end=bool(getattr(self, "segment_end", False)) and not self.curriculum.solved)


def _float_lr(state: dict) -> dict:
    """An optimizer state dict with each group's learning rate as a float (the file stays
    readable by any device and by older fightlab; `adopt_optimizer_state` turns it back)."""
    for g in state["param_groups"]:
        g["lr"] = float(g["lr"])
    return state


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
    """Append one row to a run's rows.csv; a file written under other columns (rows of an older
    fightlab before a resume) is first rewritten with the union of both headers (old rows'
    new fields empty), so every line has the header's fields."""
    import csv

    if path.exists() and path.stat().st_size:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != list(row):
            with open(path, newline="") as f:
                old = list(csv.DictReader(f))
            _write_rows(path, _union_rows(header, old, row))
            return
    new = not path.exists() or not path.stat().st_size
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row), lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow(row)


def _union_rows(header: list[str], old: list[dict], row: dict) -> list[dict]:
    """`old` rows (read under `header`) and `row`, each with every field of both (empty where a
    row lacks one); the first row carries the field order: the old header, then row's new keys."""
    fields = list(dict.fromkeys([*header, *row]))
    return [{k: r.get(k, "") for k in fields} for r in [*old, row]]


def train(cfg: TrainConfig, progress: bool = True) -> dict:
    """Train one run (see `Trainer.train`; the run folder is released at the end); returns its
    result dict."""
    with Trainer(cfg, progress=progress) as trainer:
        return trainer.train()
