"""StanceEnv: hold a fighting stance, keep a 2 Hz bounce, survive pushes; batched over nworld.

Everything inside `step` runs on the device with masks (no host reads): actions → ctrl around the
reference, pushes, `substeps` MuJoCo Warp physics steps, fall / NaN / slot-overflow checks,
reward, masked reset of done worlds, observations. The step is captured as one graph (CUDA, or
warp's CPU graph) after a warm-up call on a throw-away state. The runner reads one small summary
per iteration (`read_summary`).

Observation `[nworld, obs_dim]` float32, obs_dim = OBS_FIXED + OBS_NBLOCK·nu = 13 + 3·nu, all from
qpos/qvel and env state, so it is valid right after a reset without running kinematics (the
index constants below name these entries):
  OBS_GRAVITY + 0…2: gravity direction in the pelvis frame;
  OBS_HEIGHT: pelvis height above the stance height (m);
  OBS_LINVEL + 0…2: pelvis linear velocity in the pelvis frame (m/s);
  OBS_ANGVEL + 0…2: pelvis angular velocity (rad/s, local);
  OBS_PHASE_SIN, OBS_PHASE_COS: sin/cos of the rhythm phase; OBS_AMP: current amplitude a;
  OBS_FIXED + b·nu + i for actuator i, by block b: OBS_QERR_BLOCK joint angle minus reference
  target (rad), OBS_QVEL_BLOCK joint velocity × 0.1 (rad/s), OBS_PREV_ACTION_BLOCK previous action.
Privileged observation `[nworld, priv_dim]` (`privileged=True`; the asymmetric critic's extra
input, `PPOConfig.critic_obs`; the policy never sees it), priv_dim = PRIV_FIXED + nv:
  PRIV_PUSH_FORCE + 0…2: the push force acting now (world frame) over the largest push force;
  PRIV_PUSH_LEFT: env steps the push still acts over push_steps; PRIV_PUSH_NEXT: time to the next
  push over the longest interval; PRIV_EPISODE: env steps into the episode over episode_steps;
  PRIV_FIXED + j: qvel of every DOF j × 0.1 (rad/s, m/s).
Reward per env step: `fightlab.envs.rewards.weighted_sum` (× control_dt, so an episode's return
is O(10)); a fall adds −fall_penalty; `read_summary` gives each term's weighted sum.
Fall: a geom of any body other than the support bodies (feet, toes) touches the floor, the torso
tilts over `tilt_fall_deg`, qpos/qvel turn non-finite (NaN reset), or the world's constraint or
contact slots overflow (d.overflow NEFC / NARROWPHASE / BROADPHASE). Each kind is counted.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
import warp as wp

import mujoco_warp as mjw
from fightlab import bodies
from fightlab.config import EnvConfig, short_repr, validate_backend, validate_body, validate_env, validate_nworld
from fightlab.devices import validate_device
from fightlab.errors import ConfigError
from fightlab.envs import stance_kernels as K
from fightlab.envs.reference import build_table
from fightlab.envs.reset import fused_reset_support, reset_data_and_task
from fightlab.envs.rewards import REWARD_KEYS, REWARD_TERMS, code_weights  # noqa: F401 (this module's names too)
from fightlab.envs.stance_kernels import (  # noqa: F401 (the layout's names, as the docstring lists them)
    ACC_COUNT, ACC_DZ, ACC_DZ_R, ACC_N, ACC_R, ACC_RETURN, ACC_R_R, ACC_STEPS, OBS_AMP, OBS_ANGVEL,
    OBS_FIXED, OBS_GRAVITY, OBS_HEIGHT, OBS_LINVEL, OBS_NBLOCK, OBS_PHASE_COS, OBS_PHASE_SIN,
    OBS_PREV_ACTION_BLOCK, OBS_QERR_BLOCK, OBS_QVEL_BLOCK, PRIV_EPISODE, PRIV_FIXED,
    PRIV_PUSH_FORCE, PRIV_PUSH_LEFT, PRIV_PUSH_NEXT, SUM_LEN, SUM_N, SUM_RETURN, SUM_TRACK_DEN,
    SUM_TRACK_DEN_SURVIVED, SUM_TRACK_NUM, SUM_TRACK_NUM_SURVIVED)
from fightlab.sim import physics
from fightlab.sim.physics import Counter
from fightlab.sim.nvtx import nvtx_range


class StanceEnv:
    """The batched stance task on MuJoCo Warp.

    Args:
      body: "muscular-fast" or "simple".
      nworld: number of parallel worlds (int > 0).
      device: "cpu", "cuda" or "cuda:N".
      seed: RNG seed for resets and pushes.
      cfg: EnvConfig (defaults are the headline task).
      nconmax, njmax: override the measured slot sizes (e.g. a tiny njmax to test overflow).
      graph: capture the step as a graph (CUDA graph, or warp's CPU graph).
      mjmodel: optional pre-built MjModel (e.g. with a changed timestep); defaults to
        `fightlab.bodies.build(body)`.
      tree_factor: factor trees over 64 DOF (muscular-fast) with `fightlab.kernels.factor`
        (same physics to float32 rounding; `self.tree_factor` says whether it is in use,
        `self.tree_factor_variant` which variant).
      backend: "gpu" (the substeps on MuJoCo Warp, on `device`) or "cpu" (on MuJoCo's C engine,
        `fightlab.sim.cpu`, with `device="cpu"`; the step runs eager, not as a graph).
      threads: the CPU backend's threads (default: every core); ignored by "gpu".
      privileged: also write the privileged observation `priv_obs` each step (the asymmetric
        critic's input; module docstring).
      solver_loop: how MuJoCo Warp runs the Newton loop, one of `sim.physics.SOLVER_LOOPS`
        ("auto": MuJoCo Warp's, unrolled for a short loop, the same physics either way: the env's
        default, which evaluation and the reference check run; a training resolves its own
        "auto" first, `sim.physics.training_solver_loop`); "single_launch":
        `fightlab.kernels.newton` solves (`self.newton_kernel`; engine_solver says so, and
        its "newton_build" names the kernel's fixes, `kernels.newton.built_fixes`).
      fused_reset: the masked reset in one launch (`fightlab.envs.reset`; `self.fused_reset`
        says whether it is in use: where it writes every field MuJoCo Warp's reset_data does,
        on MuJoCo Warp; engine_solver["reset"] is then "fused"), else reset_data's six launches
        and the task's own.

    Attributes (torch views, zero-copy on the env's device):
      obs [nworld, obs_dim] float32, reward [nworld], done [nworld], fall [nworld],
      timeout [nworld] float32 (0/1); action [nworld, nu] float32 (written by `step`);
      priv_obs [nworld, priv_dim] float32 (priv_dim = PRIV_FIXED + nv with `privileged`, else 0);
      privileged_dim: PRIV_FIXED + nv, the width `privileged` gives.
      engine_solver: the Newton solver as the engine runs it (`sim.physics.engine_solver`), with
        "solver_loop" / "newton_build" for the single launch and "reset": "fused" for the fused reset.

    Raises:
      ValueError (`fightlab.errors.ConfigError`): unknown body, bad nworld or device, bad config,
        a tree_factor or fused_reset that is not True / False (names the value and choices).
    """

    def __init__(self, body: str = "simple", nworld: int = 1024, device: str = "cpu",
                 seed: int = 0, cfg: EnvConfig | None = None, nconmax: int | None = None,
                 njmax: int | None = None, graph: bool = True,
                 mjmodel: mujoco.MjModel | None = None, tree_factor: bool = True,
                 backend: str = "gpu", threads: int | None = None, privileged: bool = False,
                 solver_loop: str = "auto", fused_reset: bool = True):
        for flag, value in (("tree_factor", tree_factor), ("fused_reset", fused_reset)):
            if not isinstance(value, bool):
                raise ConfigError(f"{flag} must be True or False, got {short_repr(value)}")
        self.body = validate_body(body)
        self.nworld = validate_nworld(nworld)
        self.device = validate_device(device)
        self.backend = validate_backend(backend)
        if self.backend == "cpu" and self.device != "cpu":
            raise ValueError(f"backend 'cpu' runs the env on warp's CPU device: device must be 'cpu', "
                             f"got {device!r}")
        self.cfg = validate_env(cfg or EnvConfig())
        self.seed = int(seed)
        self.info = bodies.BODIES[self.body]  # the body's registry record (names, slots, bounce)
        mjm = mjmodel if mjmodel is not None else self.info.build()
        self.mjm = physics.prepare_mjmodel(mjm, self.cfg)
        self.slots = physics.slots_for(self.body, nconmax, njmax)
        self.m, self.d = physics.put(self.mjm, self.nworld, self.slots, self.device,
                                     qacc_smooth=self.cfg.solver_qacc_smooth, solver_loop=solver_loop)
        # the solver as the engine runs it (MuJoCo Warp raises a tolerance below 1e-6)
        self.engine_solver = physics.engine_solver(self.mjm, None if self.backend == "cpu" else self.m)
        from fightlab.kernels.factor import active_variant, use_tree_factor
        from fightlab.kernels.newton import built_fixes, use_newton

        self.tree_factor = tree_factor and use_tree_factor(self.m)
        self.tree_factor_variant = active_variant(self.m)  # "shared" / "global" / None
        self.newton_kernel = solver_loop == "single_launch" and self.backend == "gpu" and use_newton(self.m) is None
        # the masked reset in one launch (`envs.reset`) where it writes every field reset_data does
        self.fused_reset = fused_reset and self.backend == "gpu" and fused_reset_support(self.m) is None
        if self.fused_reset:  # recorded with the physics (rows' physics_engine), not a physics change
            self.engine_solver["reset"] = "fused"
        if self.newton_kernel:  # what ran, and which build of the kernel (its fixes change over time)
            self.engine_solver["solver_loop"] = "single_launch"
            self.engine_solver["newton_build"] = list(built_fixes(self.m))
        self.nu = self.mjm.nu
        self.obs_dim = OBS_FIXED + OBS_NBLOCK * self.nu
        # floor on the observation normaliser's std: 0.01 everywhere, 0.2 for the amplitude
        # (OBS_AMP), which is constant during the first curriculum stage
        self.obs_min_std = np.full(self.obs_dim, 0.01, np.float32)
        self.obs_min_std[OBS_AMP] = 0.2
        self.privileged_dim = PRIV_FIXED + self.mjm.nv
        self.priv_dim = self.privileged_dim if privileged else 0
        self.substeps = self.cfg.substeps  # physics steps per env step (mjm.opt.timestep = cfg.timestep)
        self._build_constants()
        self._alloc()
        self._cpu = self._cpu_physics(threads, mjmodel) if self.backend == "cpu" else None
        # the C engine's substeps are host calls, which a graph cannot hold: the CPU backend runs eager
        self._graph = physics.StepGraph(self.launch_step, self.device,
                                        enabled=graph and self.backend == "gpu",
                                        name="env step", watch=self._graph_inputs)
        self.compile_s = 0.0
        self._warm = False

    # ----------------------------------------------------------------------------------------
    def _build_constants(self):
        mjm, cfg, dev = self.mjm, self.cfg, self.device
        key = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, self.info.keyframe)
        if key < 0:
            raise ValueError(f"body {self.body!r} has no keyframe {self.info.keyframe!r}")
        jnt = mjm.actuator_trnid[:, 0]
        self._act_qadr = mjm.jnt_qposadr[jnt].astype(np.int32)
        self._act_dadr = mjm.jnt_dofadr[jnt].astype(np.int32)
        self.key_qpos = mjm.key_qpos[key].astype(np.float32)
        self.ctrl_stance = mjm.key_ctrl[key].astype(np.float32)
        self.z_stance = float(self.key_qpos[2])
        support = {mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, b) for b in self.info.support_bodies}
        floor = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, self.info.floor_geom)
        geom_support = np.array([1 if (mjm.geom_bodyid[g] in support or g == floor) else 0
                                 for g in range(mjm.ngeom)], np.int32)
        self.geom_support = geom_support  # 1: the geom may touch the floor (support bodies, the floor)
        self.torso_id = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, self.info.torso_body)
        self.table_np = build_table(mjm, self.info, self.info.bounce_gain, cfg)
        lo = mjm.actuator_ctrlrange[:, 0].astype(np.float32)
        hi = mjm.actuator_ctrlrange[:, 1].astype(np.float32)
        unlimited = mjm.actuator_ctrllimited == 0
        lo[unlimited], hi[unlimited] = -1e6, 1e6
        self._task = K.task_params(cfg)
        with wp.ScopedDevice(dev):
            self._w_act_qadr = wp.array(self._act_qadr, dtype=int)
            self._w_act_dadr = wp.array(self._act_dadr, dtype=int)
            self._w_key_qpos = wp.array(self.key_qpos, dtype=float)
            self._w_ctrl_stance = wp.array(self.ctrl_stance, dtype=float)
            self._w_ctrl_lo = wp.array(lo, dtype=float)
            self._w_ctrl_hi = wp.array(hi, dtype=float)
            self._w_table = wp.array(self.table_np, dtype=float)
            self._w_geom_support = wp.array(geom_support, dtype=int)

    def _cpu_physics(self, threads: int | None, mjmodel):
        """The CPU backend (`fightlab.sim.cpu.CpuPhysics`): the body's spec with a contact sensor
        per geom that may not touch (`geom_support == 0`, the fall rule's one definition)."""
        from fightlab.sim import cpu

        if mjmodel is not None:
            raise ValueError("backend 'cpu' compiles the body's model from its spec (with contact "
                             "sensors); a custom mjmodel is not supported there")
        return cpu.CpuPhysics(bodies.build_spec(self.body), self.mjm, self.nworld,
                              self.geom_support == 0, threads or cpu.cpu_count())

    @property
    def threads(self) -> int | None:
        """The CPU backend's threads (None on the "gpu" backend)."""
        return None if self._cpu is None else self._cpu.nthread

    def _alloc(self):
        n, nu = self.nworld, self.nu
        with wp.ScopedDevice(self.device):
            z = lambda *shape, dtype=float: wp.zeros(shape, dtype=dtype)  # noqa: E731
            self._action = z(n, nu)
            self._prev_action = z(n, nu)
            self._obs = z(n, self.obs_dim)
            self._priv = z(n, self.priv_dim)
            self._reward = z(n)
            self._done = z(n)
            self._fall = z(n)
            self._timeout = z(n)
            self._reset = wp.zeros(n, dtype=bool)
            self._step_count = z(n, dtype=int)
            self._amp = z(n)
            self._amp_ctl = z(2)
            self._push_next = z(n)
            self._push_left = z(n, dtype=int)
            self._push_force = wp.zeros(n, dtype=wp.vec3)
            self._rng = z(n, dtype=int)
            self._ncon = z(n, dtype=int)
            self._bad_contact = z(n, dtype=int)
            self._slot_seen = z(n, dtype=int)   # 1: the world had a slot reset since the summary
            self._ep_acc = z(n, ACC_N)
            self._counters = z(int(Counter.N), dtype=int)
            self._sums = z(SUM_N)
            self._reward_terms = z(n, len(REWARD_KEYS))  # per world: each term's weighted sum since the summary
        t = wp.to_torch
        self.action = t(self._action)
        self.obs = t(self._obs)
        self.priv_obs = t(self._priv)
        self.reward = t(self._reward)
        self.done = t(self._done)
        self.fall = t(self._fall)
        self.timeout = t(self._timeout)
        self.episode_length = t(self._step_count)  # int32 [nworld]: env steps into each episode

    def _graph_inputs(self) -> list:
        """What the captured step reads and writes, checked by identity before each replay (a
        replaced array re-captures): every field of the model, its options and the data, and
        the env's own arrays."""
        d, m = self.d, self.m
        own = [v for k, v in vars(self).items() if k.startswith("_") and isinstance(v, wp.array)]
        return [*vars(m).values(), *vars(m.opt).values(), *vars(d).values(),
                *vars(d.contact).values(), *vars(d.efc).values(), *own]

    @property
    def graph_fallbacks(self) -> int:
        """How many times the step graph fell back to eager (0 or 1; the warning said why)."""
        return self._graph.fallbacks

    @property
    def graph_captured(self) -> bool:
        """Whether `step` replays a captured graph."""
        return self._graph.graph is not None

    # ----------------------------------------------------------------------------------------
    def _launch_pre_step(self):
        d = self.d
        wp.launch(K.pre_step, dim=self.nworld,
                  inputs=[self._w_ctrl_stance, self._w_ctrl_lo, self._w_ctrl_hi, self._w_table,
                          self.torso_id,
                          self._task, self.seed + 1, self._amp_ctl, self._action, self._step_count],
                  outputs=[d.ctrl, d.xfrc_applied,
                           self._amp, self._push_next, self._push_left, self._push_force,
                           self._rng])

    def _launch_contact_check(self):
        d = self.d
        wp.launch(K.contact_check, dim=d.naconmax,
                  inputs=[self._w_geom_support,
                          d.nacon, d.contact.geom, d.contact.worldid],
                  outputs=[self._ncon, self._bad_contact])

    def _launch_post_step(self):
        d = self.d
        wp.launch(K.post_step, dim=self.nworld,
                  inputs=[self._w_act_qadr, self._w_act_dadr, self._w_ctrl_stance, self._w_table, self.torso_id,
                          self.z_stance, self.slots.nconmax,
                          d.qpos, d.qvel, d.xmat,
                          self._task, self._amp, self._action],
                  outputs=[d.overflow,
                           self._step_count, self._prev_action, self._ncon, self._bad_contact,
                           self._slot_seen, self._ep_acc, self._counters, self._sums,
                           self._reward_terms, self._reward, self._done, self._fall, self._timeout, self._reset])

    def _launch_reset(self, stagger: bool):
        d = self.d
        if self.fused_reset:
            m = self.m
            wp.launch(reset_data_and_task, dim=self.nworld,
                      inputs=[m.nq, m.nv, m.nu, m.na, m.nbody, m.ntree, m.qpos0, m.body_mocapid, m.body_treeid,
                              self._w_key_qpos, self._w_ctrl_stance, self._w_act_qadr,
                              self._task, self.seed, int(stagger), self._reset],
                      outputs=[d.xfrc_applied, d.M, d.tree_asleep, d.tree_awake, d.body_awake, d.body_awake_ind,
                               d.dof_awake_ind, d.solver_niter, d.ne, d.nf, d.nl, d.nefc, d.ntree_awake,
                               d.nbody_awake, d.nv_awake, d.time, d.energy, d.qpos, d.qvel, d.act,
                               d.qacc_warmstart, d.ctrl, d.qfrc_applied, d.qacc, d.act_dot, d.nacon, d.overflow,
                               self._step_count, self._push_next, self._push_left, self._prev_action,
                               self._ep_acc, self._rng])
            return
        if self._cpu is None:
            mjw.reset_data(self.m, d, self._reset)
        else:  # the same state, only the fields the C engine's backend uses, none when no world is done
            self._cpu.reset(d, self._reset)
        wp.launch(K.reset_worlds, dim=self.nworld,
                  inputs=[self._w_key_qpos, self._w_ctrl_stance, self._w_act_qadr,
                          self._task, self.seed, int(stagger), self._reset],
                  outputs=[d.qpos, d.qvel, d.ctrl,
                           self._step_count, self._push_next, self._push_left, self._prev_action,
                           self._ep_acc, self._rng])

    def _launch_observe(self):
        d = self.d
        wp.launch(K.observe, dim=self.nworld,
                  inputs=[self._w_act_qadr, self._w_act_dadr, self._w_ctrl_stance, self._w_table,
                          self.z_stance,
                          d.qpos, d.qvel,
                          self._task, self._amp, self._step_count, self._prev_action],
                  outputs=[self._obs])
        if self.priv_dim:
            wp.launch(K.observe_privileged, dim=self.nworld,
                      inputs=[d.qvel, self._task, self._step_count, self._push_next, self._push_left,
                              self._push_force],
                      outputs=[self._priv])

    def launch_step(self, physics: bool = True, task: bool = True):
        """Launch one env step's kernels, uncaptured (`step` replays them as one graph): pre-step,
        `substeps` physics steps with contact checks, post-step, masked reset, observe, in NVTX
        ranges; no host read. `physics=False` leaves out `mujoco_warp.step`, `task=False`
        everything but it (`fightlab.measure.graphs` times the two parts apart)."""
        with nvtx_range("physics"):
            if task:
                self._launch_pre_step()
            if self._cpu is not None:  # MuJoCo's C engine (fightlab.sim.cpu): contacts via its sensors
                if physics:
                    self._cpu.step(self.d, self.substeps, self._ncon if task else None,
                                   self._bad_contact if task else None)
            for _ in range(self.substeps if self._cpu is None else 0):
                if physics:
                    mjw.step(self.m, self.d)
                if task:
                    self._launch_contact_check()
        if not task:
            return
        with nvtx_range("observation/reward"):
            self._launch_post_step()
        with nvtx_range("reset"):
            self._launch_reset(stagger=False)
        with nvtx_range("observation/reward"):
            self._launch_observe()

    # ----------------------------------------------------------------------------------------
    def set_amplitude(self, target: float, ramp_s: float | None = None, immediate: bool = False):
        """Set the rhythm amplitude target a ∈ [0, 1]; worlds ramp to it over `ramp_s` (default
        cfg.amplitude_ramp_s) from the current value. A host write, not a read."""
        if not 0.0 <= target <= 1.0:
            raise ValueError(f"amplitude must be in [0, 1], got {target!r}")
        ramp_s = self.cfg.amplitude_ramp_s if ramp_s is None else ramp_s
        cur = getattr(self, "_amp_target", 0.0)
        rate = abs(target - cur) / ramp_s if ramp_s > 0 else 1e9
        self._amp_target = float(target)
        self._amp_ctl.assign(np.array([target, max(rate, 1e-9)], np.float32))
        if immediate:
            self._amp.fill_(float(target))

    @property
    def amplitude_target(self) -> float:
        return getattr(self, "_amp_target", 0.0)

    def warmup(self):
        """Compile every kernel (one step on a throw-away state), then capture the step graph.
        Returns compile_s (seconds). The state is reset afterwards by `reset()`."""
        import time

        if self._warm:
            return 0.0
        t0 = time.perf_counter()
        with wp.ScopedDevice(self.device):
            self._reset.fill_(True)
            self._launch_reset(stagger=False)
            self._launch_observe()
            self.launch_step()
            self._graph.capture()
            wp.synchronize_device(self.device)
        self.compile_s = time.perf_counter() - t0
        self._warm = True
        return self.compile_s

    def reset(self, stagger: bool = True) -> torch.Tensor:
        """Reset every world to the stance keyframe (joint noise ± init_noise_rad, zero velocity),
        with `stagger` at a random step of its episode, so that episodes end spread over time
        (as in rsl_rl). Returns the observation view [nworld, obs_dim]."""
        self.warmup()
        with wp.ScopedDevice(self.device):
            self._reset.fill_(True)
            self._launch_reset(stagger=stagger)
            self._reset.fill_(False)
            self._launch_observe()
            self._counters.zero_()
            self._sums.zero_()
            self._reward_terms.zero_()
            self._slot_seen.zero_()
        return self.obs

    def step(self, action: torch.Tensor | None = None):
        """Advance every world by one env step (control_dt) with `action` ([nworld, nu] float in
        [-1, 1], clipped, on the env's device; None: the `action` buffer as it is). Returns (obs,
        reward, done, {"fall", "timeout"}): the views, overwritten by the next step.
        """
        if action is not None:
            if tuple(action.shape) != (self.nworld, self.nu):
                raise ValueError(f"action must have shape ({self.nworld}, {self.nu}), got "
                                 f"{tuple(action.shape)}")
            self.action.copy_(action)
        with wp.ScopedDevice(self.device):
            self._graph()
        return self.obs, self.reward, self.done, {"fall": self.fall, "timeout": self.timeout}

    def close(self) -> None:
        """Switch the tree factor and the single-launch solve off for this env's model (they also
        go when the env is garbage collected); the env must not be stepped afterwards."""
        from fightlab.kernels.factor import disable_tree_factor
        from fightlab.kernels.newton import disable_newton

        disable_tree_factor(self.m)
        disable_newton(self.m)
        self.tree_factor = False
        self.tree_factor_variant = None
        self.newton_kernel = False

    def _state_arrays(self) -> dict:
        d = self.d
        return dict(qpos=d.qpos, qvel=d.qvel, act=d.act, ctrl=d.ctrl, qacc_warmstart=d.qacc_warmstart,
                    time=d.time, xfrc_applied=d.xfrc_applied, step_count=self._step_count,
                    amp=self._amp, amp_ctl=self._amp_ctl, push_next=self._push_next,
                    push_left=self._push_left, push_force=self._push_force, rng=self._rng,
                    ep_acc=self._ep_acc, prev_action=self._prev_action)

    def state_dict(self) -> dict:
        """The simulation and task state of every world, as host copies: MuJoCo Warp's qpos,
        qvel, act, ctrl, qacc_warmstart, time, xfrc_applied ([nworld, …], their dtypes) and the
        env's step counters, amplitude and its ramp, push timers/forces, RNG counters, episode
        accumulators and previous action; ``amp_target`` (0-d float64) is the curriculum target.
        With the env's seed and config this determines every later step (checkpoints)."""
        out = {k: v.numpy().copy() for k, v in self._state_arrays().items()}
        out["amp_target"] = np.array(self.amplitude_target, np.float64)
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output (same body and nworld) and clear the summary
        counters. Raises ValueError naming an array that is missing or of another shape."""
        arrs = self._state_arrays()
        for k, a in arrs.items():
            want = a.numpy().shape
            got = getattr(state.get(k), "shape", None)
            if got != want:
                raise ValueError(f"env state {k!r} has shape {got}, this env has {want} "
                                 "(different body or nworld?)")
        for k, a in arrs.items():
            a.assign(state[k])
        if "amp_target" in state:
            self._amp_target = float(state["amp_target"])
        self._counters.zero_()
        self._sums.zero_()
        self._reward_terms.zero_()

    def read_summary(self, clear: bool = True, extra: torch.Tensor | None = None) -> dict:
        """Read the per-iteration counters — and `extra`, a caller's float tensor on the env's
        device — in one device→host copy, and optionally zero the counters.

        Returns a dict: episodes, falls, timeouts, overflow_worlds (slot resets: a world that runs
        out of slots is reset and may run out again before the summary), overflow_distinct_worlds
        (the worlds among them), nan_resets, solver_iter_hits, solver_ls_hits, nefc_overflow,
        contact_overflow (of the slot resets), contact_falls, tilt_falls (ints); episode_s_sum,
        return_sum, track_num, track_den (floats; over every finished episode),
        track_num_survived, track_den_survived (the same over the episodes that reached the time
        limit); `REWARD_KEYS` (floats: each term's weighted reward, × control_dt, and the fall
        penalty's, summed over every world's env steps); with `extra`, "extra": its values
        (float64 numpy [len(extra)]).
        """
        n_extra = 0 if extra is None else int(extra.numel())
        c0, s0, r0 = 0, int(Counter.N), int(Counter.N) + SUM_N  # where each part starts in the copy
        e0 = r0 + len(REWARD_KEYS)
        with physics.shared_stream(self.device):  # torch on warp's stream: ordered after the steps
            if getattr(self, "_packed", None) is None or self._packed.numel() != e0 + n_extra:
                self._packed = torch.zeros(e0 + n_extra, dtype=torch.float64, device=self.obs.device)
            pk = self._packed
            pk[c0:s0].copy_(wp.to_torch(self._counters))  # int32 → float64: exact
            pk[s0:r0].copy_(wp.to_torch(self._sums))
            torch.sum(wp.to_torch(self._reward_terms), dim=0, dtype=torch.float64, out=pk[r0:e0])
            if n_extra:
                pk[e0:].copy_(extra.reshape(-1))
            host = pk.cpu().numpy()  # the one read (a synchronising copy on CUDA)
            if clear:
                self._counters.zero_()
                self._sums.zero_()
                self._reward_terms.zero_()
                self._slot_seen.zero_()
        s = host[s0:r0]
        out = physics.describe_counters(host[c0:s0])
        out.update(episode_s_sum=float(s[SUM_LEN]), return_sum=float(s[SUM_RETURN]),
                   track_num=float(s[SUM_TRACK_NUM]), track_den=float(s[SUM_TRACK_DEN]),
                   track_num_survived=float(s[SUM_TRACK_NUM_SURVIVED]),
                   track_den_survived=float(s[SUM_TRACK_DEN_SURVIVED]))
        out.update(zip(REWARD_KEYS, map(float, host[r0:e0])))
        if n_extra:
            out["extra"] = host[e0:].copy()
        return out
