"""The training loop: rollouts, GAE, the PPO update and the torch graphs, over any task behind
the door (`fightlab.envs.vecenv.VecEnv`'s captured form); one host read per iteration. After
CleanRL's ``ppo_continuous_action.py`` with rsl_rl's split: the loop knows nothing of the task,
run folders, ``rows.csv`` or checkpoints (`fightlab.run.runner.Trainer` is the run around it).
"""

from __future__ import annotations

import sys
import time
import weakref

import torch

from fightlab.config import TrainConfig
from fightlab.envs.vecenv import VecEnv
from fightlab.rl.env_io import PolicyIO
from fightlab.rl.graphs import TorchGraph
from fightlab.rl.history import ObsHistory, mirror_blocks
from fightlab.rl.models import ActorCritic
from fightlab.rl.ppo import PPOUpdate, make_optimizer
from fightlab.rl.rows import iteration_row
from fightlab.rl.storage import RolloutStorage, compute_gae
from fightlab.sim.nvtx import nvtx_range
from fightlab.sim.physics import shared_stream
from fightlab.timing import HostReads, default_sync


class TrainLoop:
    """The agent, optimizer, rollout buffer and graphs of a training on the task `env`.

    Attributes: policy_graphs (the num_steps + 1 torch graphs of the rollout, `TorchGraph`),
    ppo_graph (the update's), graph_fallbacks (torch graphs asked for that run eager);
    policy_device (`cfg.policy_device`, else `cfg.device`) and io (what the policy reads and
    writes: the env, or a `PolicyIO` on `cfg.policy_device`: then an iteration reads the host
    num_steps + 1 times on CUDA); obs_hist (an `ObsHistory` with `PPOConfig.obs_history` > 1, the
    policy's input; None: the env's observation is); iteration, elapsed_s (training wall clock,
    compile excluded), compile_s, time_to_solve_s, solve_iteration (when the task's extras first say solved), rows
    (this loop's), extras (the task's last `end_iteration` extras).
    """

    def __init__(self, cfg: TrainConfig, env: VecEnv):
        self.cfg, self.env = cfg, env
        self.device = cfg.device
        self.policy_device = cfg.policy_device or cfg.device
        torch.manual_seed(cfg.seed)
        self.io = PolicyIO(env, cfg.policy_device) if cfg.policy_device else env
        dev = torch.device(self.policy_device)
        priv_dim = env.priv_dim if cfg.ppo.critic_obs == "privileged" else 0
        if cfg.ppo.critic_obs == "privileged" and not priv_dim:
            raise ValueError("PPOConfig.critic_obs 'privileged' needs an env built with privileged=True")
        H = cfg.ppo.obs_history
        self.agent = ActorCritic(env.obs_dim, env.num_actions, cfg.ppo.hidden, cfg.ppo.init_std,
                                 obs_min_std=env.obs_min_std, priv_dim=priv_dim,
                                 matmul_precision=cfg.ppo.matmul_precision, obs_history=H).to(dev)
        self.obs_hist = ObsHistory(env.num_envs, env.obs_dim, H, dev) if H > 1 else None
        self.optimizer, self.lr = make_optimizer(self.agent, self._stage_lr(0), dev,
                                                 cfg.ppo.critic_learning_rate)
        self.buf = RolloutStorage(cfg.ppo.num_steps, env.num_envs, H * env.obs_dim, env.num_actions, dev, priv_dim=priv_dim,
                                  keep_means=cfg.ppo.kl_estimator == "analytic")
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(cfg.seed + 12345)
        self.update = PPOUpdate(self.agent, self.optimizer, self.lr, self.buf, cfg.ppo, self.gen,
                                mirror=self._mirror_maps(dev))
        self._reward_mean = torch.zeros(1, device=dev)
        me = weakref.ref(self)  # no reference cycle: a dropped loop frees what it holds at once
        self.policy_graphs = [TorchGraph(lambda s=s: me()._policy_step(s), dev, enabled=cfg.policy_graph,
                                         name="policy step") for s in range(cfg.ppo.num_steps + 1)]
        self.ppo_graph = TorchGraph(lambda: me()._update_step(), dev, enabled=cfg.update_graph,
                                    name="PPO update", warmup=2)
        self._torch_ptrs: tuple = ()
        self.graph_fallbacks = self.graph_recaptures = 0
        self._reads = HostReads(self.policy_device)
        self._events = ([torch.cuda.Event(enable_timing=True) for _ in range(3)]
                        if dev.type == "cuda" else None)
        self.iteration, self.elapsed_s, self.compile_s = 0, 0.0, 0.0
        self.time_to_solve_s = self.solve_iteration = None
        self.rows: list[dict] = []
        self.extras: dict = {}

    def warm_up(self) -> None:
        """Compile and load the task's kernels, start every world (`VecEnv.reset`), warm torch up;
        the time goes to compile_s."""
        with shared_stream(self.device):
            t0 = time.perf_counter()
            self.obs = self.env.reset()["policy"]
            self._pull()
            if self.obs_hist is not None:  # every world starts: its history is its first observation
                self.obs_hist.fill(self.io.obs)
            with torch.no_grad():  # cuBLAS handles, the allocator: outside the timed loop
                self.agent.get_action_and_value(self._policy_obs(), priv=self.io.priv_obs if self.agent.priv_dim else None)
            self._sync()
            self.compile_s = time.perf_counter() - t0

    def capture(self) -> None:
        """Capture the torch graphs (after a restore: they hold the tensors they see); the time
        goes to compile_s."""
        with shared_stream(self.device):
            t0 = time.perf_counter()
            self._capture_torch()
            self._sync()
            self.compile_s += time.perf_counter() - t0

    def _sync(self) -> None:
        """Wait for the env's device and, when it differs, the policy's (`fightlab.timing`)."""
        default_sync(self.device)()
        if self.policy_device != self.device:
            default_sync(self.policy_device)()

    def _pull(self) -> None:
        """The env's outputs to a `PolicyIO` (an expected read); nothing without one."""
        if self.io is not self.env:
            with self._reads.expected():
                self.io.pull()

    def _push(self) -> None:
        """The policy's action to the env from a `PolicyIO` (an expected read)."""
        if self.io is not self.env:
            with self._reads.expected():
                self.io.push()

    def _policy_obs(self) -> torch.Tensor:
        """The policy's input: the env's observation, or the stacked history (`obs_hist`)."""
        return self.io.obs if self.obs_hist is None else self.obs_hist.stacked

    def _policy_step(self, s: int) -> None:
        """Torch work between env steps s−1 and s (no host reads; captured as policy[s]): store
        step s−1's reward (the value bootstrapped at time-outs: the episode was cut, not ended,
        as in rsl_rl) and done; then, for s < num_steps, sample step s's action from the env's
        observation into the buffer and the env's action; for s = num_steps, the bootstrap value,
        GAE and the mean reward. With an observation history, step s−1's observation (and
        done) first goes into it, and the stacked history is the observation."""
        cfg, env, buf, agent = self.cfg, self.io, self.buf, self.agent
        gamma, T = cfg.ppo.gamma, cfg.ppo.num_steps
        priv = env.priv_obs if agent.priv_dim else None  # an asymmetric critic's input
        if s > 0:
            buf.rewards[s - 1].copy_(env.reward + gamma * buf.values[s - 1] * env.timeout)
            buf.dones[s - 1].copy_(env.done)
            if self.obs_hist is not None:
                self.obs_hist.push(env.obs, env.done)
        obs = self._policy_obs()
        with torch.no_grad():
            if s < T:  # buf.actions[s] holds this step's standard-normal noise (iterate draws it)
                action, logp, _, value, mean, _ = agent.get_action_and_value(obs, noise=buf.actions[s], priv=priv)
                buf.obs[s].copy_(obs)
                if priv is not None:
                    buf.priv[s].copy_(priv)
                buf.actions[s].copy_(action)
                buf.logprobs[s].copy_(logp)
                if buf.means.shape[-1]:  # an analytic KL's old means (PPOConfig.kl_estimator)
                    buf.means[s].copy_(mean)
                buf.values[s].copy_(value)
                env.action.copy_(action)
            else:
                next_value = agent.get_value(obs, priv)
                adv, ret = compute_gae(buf.rewards, buf.values, buf.dones, next_value, gamma,
                                       cfg.ppo.gae_lambda)
                buf.advantages.copy_(adv)
                buf.returns.copy_(ret)
                self._reward_mean.copy_(buf.rewards.mean().reshape(1))

    def _update_step(self) -> None:
        """The PPO update over the buffer (permutations drawn before it), then the normaliser
        (it moves only between iterations, so the rollout's log-probs and the update see the
        same normalisation; with an observation history, over the newest block: each observation
        counted once). No host reads; captured as the update graph."""
        self.update.run()
        D = self.env.obs_dim
        self.agent.obs_norm.update(self.buf.obs[..., :D].reshape(-1, D))
        if self.agent.priv_dim:
            self.agent.priv_norm.update(self.buf.priv.reshape(-1, self.agent.priv_dim))

    def _torch_inputs(self) -> tuple:
        """Storage pointers of every tensor the torch graphs read or write (checked once per
        iteration: a replaced tensor re-captures)."""
        ts = [*self.agent.state_dict().values(), self.lr, self.update.perm, self.update.stats,
              self._reward_mean, *vars(self.buf).values(), self.io.obs, self.io.action,
              self.io.reward, self.io.done, self.io.timeout, self.io.priv_obs]
        if self.obs_hist is not None:
            ts += [self.obs_hist.stacked]
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
            hist = None if self.obs_hist is None else self.obs_hist.stacked.clone()
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
            if hist is not None:  # the warm-up's policy steps pushed into it
                self.obs_hist.stacked.copy_(hist)
        torch.cuda.set_rng_state(rng, dev)
        self._torch_ptrs = self._torch_inputs()

    def _check_torch_graphs(self) -> None:
        if any(g.graph is not None for g in (*self.policy_graphs, self.ppo_graph)) \
                and self._torch_inputs() != self._torch_ptrs:
            print("fightlab: warning: tensors of the torch graphs were replaced; re-capturing",
                  file=sys.stderr, flush=True)
            self.graph_recaptures += 1
            self._capture_torch()

    def _mirror_maps(self, dev: torch.device) -> dict | None:
        """The door's mirror maps as tensors on ``dev`` when `PPOConfig.symmetry` uses them (the
        policy's over each block of an observation history)."""
        if self.cfg.ppo.symmetry == "none":
            return None
        maps = self.env.mirror_maps()
        if maps is None:
            raise ValueError(f"PPOConfig.symmetry {self.cfg.ppo.symmetry!r} needs a task with mirror maps; this one has none")
        out = {k: (torch.as_tensor(p, dtype=torch.long, device=dev), torch.as_tensor(sg, dtype=torch.float32, device=dev))
               for k, (p, sg) in maps.items()}
        if self.obs_hist is not None:  # the stacked input: each observation mirrored in its block
            out["policy"] = mirror_blocks(*out["policy"], self.obs_hist.H)
        return out

    def _stage_lr(self, stage: int) -> float:
        """The rate the run starts curriculum stage ``stage`` at: learning_rate, × the stage's
        `PPOConfig.stage_lr_scale` factor when set."""
        p = self.cfg.ppo
        return p.learning_rate if p.stage_lr_scale is None else p.learning_rate * p.stage_lr_scale[stage]

    def iterate(self) -> dict:
        """Run one iteration (rollout + update, then the task's `end_iteration`) and return its row.
        One host read: the task's counters with the learner's losses, reward and learning rate,
        after the update (a widening into a stage of `PPOConfig.stage_lr_scale` then resets the
        rate on the device, no read; the row keeps the update's); the rollout/update split comes from CUDA events read with it (host
        clock on the CPU)."""
        env, T, ev = self.env, self.cfg.ppo.num_steps, self._events
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
                env.advance()
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
                extras = env.end_iteration(learner=extra)
            cur = extras.get("curriculum") or {}
            if self.cfg.ppo.stage_lr_scale is not None and cur.get("event") == "widen":
                self.lr.fill_(self._stage_lr(cur["stage"]))  # a host write: the next update's rate
            host_reads = self._reads.take()
        vals = extras["learner"]
        if ev:  # complete: the summary read waited for the stream
            rollout_s, update_s = ev[0].elapsed_time(ev[1]) / 1e3, ev[1].elapsed_time(ev[2]) / 1e3
        else:
            rollout_s, update_s = t1 - t0, t2 - t1
        wall = time.perf_counter() - t0
        self.iteration += 1
        self.elapsed_s += wall
        row = iteration_row(self, extras["episode"], vals, wall, rollout_s, update_s, host_reads)
        if extras.get("solved") and self.time_to_solve_s is None:
            self.time_to_solve_s, self.solve_iteration = self.elapsed_s, self.iteration
        self.extras = extras
        self.rows.append(row)
        return row
