"""The stance task's warp kernels, launched by `StanceEnv` (mujoco_warp's argument groups):
`pre_step`, `contact_check`, `post_step` (checks, reward, accumulators and counters, each in its
own `wp.func`), `reset_worlds` (its `reset_task`), `observe`, `observe_privileged`; `TaskParams`, and the index
constants of the layouts that `fightlab.envs.stance`'s docstring lists.
"""

from __future__ import annotations

import math

import warp as wp

from fightlab.config import EnvConfig
from fightlab.envs.reference import COL_PELVIS
from fightlab.envs.rewards import REWARD_FALL, REWARD_TERMS, RewardIn, RewardWeights, weighted_sum
from fightlab.sim import physics
from fightlab.sim.physics import Counter

# summary sums (float32): episode length sum (s), return sum, tracking numerator, denominator
# over every finished episode, and the same tracking sums over the episodes that survived to the
# time limit (no fall): the falling motion itself moves the pelvis in phase with the bounce
SUM_LEN, SUM_RETURN, SUM_TRACK_NUM, SUM_TRACK_DEN = 0, 1, 2, 3
SUM_TRACK_NUM_SURVIVED, SUM_TRACK_DEN_SURVIVED, SUM_N = 4, 5, 6
_CONTACT_BITS = int(physics.OverflowType.NARROWPHASE | physics.OverflowType.BROADPHASE)
_NEFC_BITS = int(physics.OverflowType.NEFC | physics.OverflowType.NJMAX_NNZ)

# observation indices (the layout is listed in the module docstring)
OBS_GRAVITY, OBS_HEIGHT, OBS_LINVEL, OBS_ANGVEL = 0, 3, 4, 7
OBS_PHASE_SIN, OBS_PHASE_COS, OBS_AMP, OBS_FIXED = 10, 11, 12, 13
OBS_QERR_BLOCK, OBS_QVEL_BLOCK, OBS_PREV_ACTION_BLOCK, OBS_NBLOCK = 0, 1, 2, 3
# privileged observation indices (the asymmetric critic's; listed in the module docstring)
PRIV_PUSH_FORCE, PRIV_PUSH_LEFT, PRIV_PUSH_NEXT, PRIV_EPISODE, PRIV_FIXED = 0, 3, 4, 5, 6

# per-episode accumulator columns of ep_acc [nworld, ACC_N] (float32): the lock-in sums
# Σ dz·r, Σ r², Σ dz, Σ r and their count n over the finite steps (dz: pelvis height above the
# stance, r: the commanded pelvis offset), the return, and the env steps lived
ACC_DZ_R, ACC_R_R, ACC_DZ, ACC_R, ACC_COUNT, ACC_RETURN, ACC_STEPS, ACC_N = 0, 1, 2, 3, 4, 5, 6, 7


@wp.struct
class TaskParams:
    """The task's constants, one value per env (built from its EnvConfig by `task_params`)."""

    dt: float              # control_dt, s
    rhythm_hz: float       # Hz
    episode_steps: int     # env steps per episode
    cos_tilt: float        # cos(tilt_fall_deg): a torso z·world z below this is a fall
    action_scale: float    # rad per unit action
    init_noise: float      # rad, uniform ± at reset
    reward_w: RewardWeights  # REWARD_TERMS' weights, in its order
    fall_penalty: float
    push_steps: int        # env steps a push lasts (≥ 1)
    push_duration: float   # s
    push_interval_lo: float  # s
    push_interval_hi: float  # s
    push_impulse_lo: float   # N·s
    push_impulse_hi: float   # N·s


def task_params(cfg: EnvConfig) -> TaskParams:
    """`TaskParams` of `cfg` (float fields are float32 on the device, as kernel scalars were)."""
    p = TaskParams()
    p.dt = cfg.control_dt
    p.rhythm_hz = cfg.rhythm_hz
    p.episode_steps = cfg.episode_steps
    p.cos_tilt = math.cos(math.radians(cfg.tilt_fall_deg))
    p.action_scale = cfg.action_scale_rad
    p.init_noise = cfg.init_noise_rad
    p.reward_w = RewardWeights(*[t.weight_of(cfg) for t in REWARD_TERMS])
    p.fall_penalty = cfg.fall_penalty
    p.push_steps = max(1, int(round(cfg.push_duration_s / cfg.control_dt)))
    p.push_duration = cfg.push_duration_s
    p.push_interval_lo, p.push_interval_hi = cfg.push_interval_s
    p.push_impulse_lo, p.push_impulse_hi = cfg.push_impulse_ns
    return p


@wp.func
def _rhythm_phase(step: int, task: TaskParams) -> float:
    """Phase in [0, 1) of the rhythm at env step `step` of the episode."""
    t = float(step) * task.dt
    return t * task.rhythm_hz - wp.floor(t * task.rhythm_hz)


@wp.func
def _table_row(phase: float, nphase: int) -> int:
    """Row of the stacked reference table for `phase` (the one gather per step)."""
    return wp.min(int(phase * float(nphase)), nphase - 1)


@wp.func
def _push(worldid: int, torso_id: int, task: TaskParams, seed: int,
          xfrc_applied_out: wp.array2d[wp.spatial_vector], push_next_out: wp.array[float],
          push_left_out: wp.array[int], push_force_out: wp.array[wp.vec3], rng_out: wp.array[int]):
    """Pushes: a constant horizontal force on the torso for push_steps env steps, every
    push_interval_s (uniform), of push_impulse_ns (uniform) in a uniform direction."""
    left = push_left_out[worldid]
    nxt = push_next_out[worldid] - task.dt
    force = push_force_out[worldid]
    if left <= 0 and nxt <= 0.0:
        state = wp.rand_init(seed, worldid * 7919 + rng_out[worldid] * 104729)
        rng_out[worldid] = rng_out[worldid] + 1
        theta = wp.randf(state, 0.0, 2.0 * wp.pi)
        impulse = wp.randf(state, task.push_impulse_lo, task.push_impulse_hi)
        mag = impulse / task.push_duration
        force = wp.vec3(mag * wp.cos(theta), mag * wp.sin(theta), 0.0)
        push_force_out[worldid] = force
        left = task.push_steps
        nxt = wp.randf(state, task.push_interval_lo, task.push_interval_hi)
    if left > 0:
        xfrc_applied_out[worldid, torso_id] = wp.spatial_vector(force, wp.vec3(0.0))
        left = left - 1
    else:
        xfrc_applied_out[worldid, torso_id] = wp.spatial_vector(wp.vec3(0.0), wp.vec3(0.0))
    push_left_out[worldid] = left
    push_next_out[worldid] = nxt


@wp.kernel
def pre_step(
    # Model:
    ctrl_stance: wp.array[float],
    ctrl_lo: wp.array[float],
    ctrl_hi: wp.array[float],
    table: wp.array2d[float],
    torso_id: int,
    # In:
    task: TaskParams,
    seed: int,
    amp_ctl_in: wp.array[float],
    action_in: wp.array2d[float],
    step_count_in: wp.array[int],
    # Data out:
    ctrl_out: wp.array2d[float],
    xfrc_applied_out: wp.array2d[wp.spatial_vector],
    # Out:
    amp_out: wp.array[float],
    push_next_out: wp.array[float],
    push_left_out: wp.array[int],
    push_force_out: wp.array[wp.vec3],
    rng_out: wp.array[int],
):
    worldid = wp.tid()
    dt = task.dt
    # amplitude ramp towards the target (amp_ctl_in = [target, rate per s])
    target = amp_ctl_in[0]
    rate = amp_ctl_in[1] * dt
    amp = amp_out[worldid]
    amp = amp + wp.clamp(target - amp, -rate, rate)
    amp_out[worldid] = amp

    phase = _rhythm_phase(step_count_in[worldid], task)
    row = _table_row(phase, table.shape[0])
    nu = ctrl_stance.shape[0]
    for i in range(nu):
        a = wp.clamp(action_in[worldid, i], -1.0, 1.0)
        target_i = ctrl_stance[i] + amp * table[row, i] + task.action_scale * a
        ctrl_out[worldid, i] = wp.clamp(target_i, ctrl_lo[i], ctrl_hi[i])

    _push(worldid, torso_id, task, seed, xfrc_applied_out, push_next_out, push_left_out, push_force_out, rng_out)


@wp.kernel
def contact_check(
    # Model:
    geom_support: wp.array[int],
    # Data in:
    nacon_in: wp.array[int],
    contact_geom_in: wp.array[wp.vec2i],
    contact_worldid_in: wp.array[int],
    # Out:
    ncon_out: wp.array[int],
    bad_contact_out: wp.array[int],
):
    cid = wp.tid()
    if cid >= wp.min(nacon_in[0], contact_geom_in.shape[0]):
        return
    worldid = contact_worldid_in[cid]
    g = contact_geom_in[cid]
    wp.atomic_add(ncon_out, worldid, 1)
    if g[0] >= 0 and g[1] >= 0:
        if geom_support[g[0]] == 0 or geom_support[g[1]] == 0:
            bad_contact_out[worldid] = 1


@wp.func
def _finite(worldid: int, qpos_in: wp.array2d[float], qvel_in: wp.array2d[float]) -> int:
    """1 when the world's qpos and qvel are all finite, else 0 (a NaN reset)."""
    finite = int(1)
    for i in range(qpos_in.shape[1]):
        if not wp.isfinite(qpos_in[worldid, i]):
            finite = 0
    for i in range(qvel_in.shape[1]):
        if not wp.isfinite(qvel_in[worldid, i]):
            finite = 0
    return finite


@wp.func
def _slot_overflow(bits: int, ncon: int, nconmax: int, counters_out: wp.array[int]):
    """(constraint rows overflowed, contacts overflowed) of one world from its ``d.overflow``
    bits; solver iteration limits hit are counted. NEFC is per world; pooled contact overflow
    sets the bit in every world, so only the worlds holding at least their share (nconmax) of
    contacts are blamed."""
    if bits & wp.static(int(physics.OverflowType.ITERATIONS)):
        wp.atomic_add(counters_out, wp.static(int(Counter.SOLVER_ITER_HITS)), 1)
    if bits & wp.static(int(physics.OverflowType.LS_ITERATIONS)):
        wp.atomic_add(counters_out, wp.static(int(Counter.SOLVER_LS_HITS)), 1)
    return (bits & wp.static(_NEFC_BITS)) != 0, (bits & wp.static(_CONTACT_BITS)) != 0 and ncon >= nconmax


@wp.func
def _checks(worldid: int, torso_id: int, nconmax: int, qpos_in: wp.array2d[float], qvel_in: wp.array2d[float],
            xmat_in: wp.array2d[wp.mat33], task: TaskParams, overflow_out: wp.array[int], ncon_out: wp.array[int],
            bad_contact_out: wp.array[int], counters_out: wp.array[int]):
    """One world's state after the substeps: (finite, constraint rows overflowed, contacts
    overflowed, tilted past tilt_fall_deg, a forbidden contact); its overflow bits, contact count
    and forbidden-contact flag are cleared for the next step."""
    finite = _finite(worldid, qpos_in, qvel_in)
    nefc_over, con_over = _slot_overflow(overflow_out[worldid], ncon_out[worldid], nconmax, counters_out)
    overflow_out[worldid] = 0
    ncon_out[worldid] = 0
    tilt = xmat_in[worldid, torso_id][2, 2] < task.cos_tilt
    touch = bad_contact_out[worldid] != 0
    bad_contact_out[worldid] = 0
    return finite, nefc_over, con_over, tilt, touch


@wp.func
def _write_step(worldid: int, steps: int, reward: float, fall: bool, timeout: bool, step_count_out: wp.array[int],
                reward_out: wp.array[float], done_out: wp.array[float], fall_out: wp.array[float],
                timeout_out: wp.array[float], reset_out: wp.array[bool]):
    """The step's outputs of one world: its step count, reward, done / fall / timeout (0/1) and
    the reset mask (done)."""
    done = fall or timeout
    step_count_out[worldid] = steps
    reward_out[worldid] = reward
    done_out[worldid] = wp.where(done, 1.0, 0.0)
    fall_out[worldid] = wp.where(fall, 1.0, 0.0)
    timeout_out[worldid] = wp.where(timeout, 1.0, 0.0)
    reset_out[worldid] = done


@wp.func
def _accumulate(worldid: int, finite: int, dz: float, zref: float, reward: float,
                ep_acc_out: wp.array2d[float]):
    """Add one step to the world's episode accumulators (the ACC_* columns; the lock-in sums
    only over finite steps)."""
    if finite:
        ep_acc_out[worldid, ACC_DZ_R] = ep_acc_out[worldid, ACC_DZ_R] + dz * zref
        ep_acc_out[worldid, ACC_R_R] = ep_acc_out[worldid, ACC_R_R] + zref * zref
        ep_acc_out[worldid, ACC_DZ] = ep_acc_out[worldid, ACC_DZ] + dz
        ep_acc_out[worldid, ACC_R] = ep_acc_out[worldid, ACC_R] + zref
        ep_acc_out[worldid, ACC_COUNT] = ep_acc_out[worldid, ACC_COUNT] + 1.0
    ep_acc_out[worldid, ACC_RETURN] = ep_acc_out[worldid, ACC_RETURN] + reward
    ep_acc_out[worldid, ACC_STEPS] = ep_acc_out[worldid, ACC_STEPS] + 1.0


@wp.func
def _end_episode(worldid: int, timeout: bool, dt: float, ep_acc_in: wp.array2d[float],
                 sums_out: wp.array[float], counters_out: wp.array[int]):
    """Add an ended episode to the summary sums: its bounce tracking (the lock-in correlation's
    numerator and denominator, also apart for an episode that reached the time limit), the
    length it lived (a staggered first episode starts late in its limit), its return."""
    n = ep_acc_in[worldid, ACC_COUNT]
    if n > 1.0:
        sum_r = ep_acc_in[worldid, ACC_R]
        num = ep_acc_in[worldid, ACC_DZ_R] - ep_acc_in[worldid, ACC_DZ] * sum_r / n
        den = ep_acc_in[worldid, ACC_R_R] - sum_r * sum_r / n
        if den > 1.0e-12:
            wp.atomic_add(sums_out, SUM_TRACK_NUM, num)
            wp.atomic_add(sums_out, SUM_TRACK_DEN, den)
            if timeout:
                wp.atomic_add(sums_out, SUM_TRACK_NUM_SURVIVED, num)
                wp.atomic_add(sums_out, SUM_TRACK_DEN_SURVIVED, den)
    wp.atomic_add(sums_out, SUM_LEN, ep_acc_in[worldid, ACC_STEPS] * dt)
    wp.atomic_add(sums_out, SUM_RETURN, ep_acc_in[worldid, ACC_RETURN])
    wp.atomic_add(counters_out, wp.static(int(Counter.EPISODES)), 1)


@wp.func
def _count_ending(worldid: int, fall: bool, touch: bool, tilt: bool, nan_reset: bool, nefc_over: bool,
                  con_over: bool, slot_seen_out: wp.array[int], counters_out: wp.array[int]):
    """Count an ended episode's kind: a timeout, or a fall and each of its kinds (a forbidden
    contact, a tilt, a NaN reset, a slot reset: the world's first since the summary, and which
    slots ran out)."""
    if not fall:
        wp.atomic_add(counters_out, wp.static(int(Counter.TIMEOUTS)), 1)
        return
    wp.atomic_add(counters_out, wp.static(int(Counter.FALLS)), 1)
    if touch:
        wp.atomic_add(counters_out, wp.static(int(Counter.CONTACT_FALLS)), 1)
    if tilt:
        wp.atomic_add(counters_out, wp.static(int(Counter.TILT_FALLS)), 1)
    if nan_reset:
        wp.atomic_add(counters_out, wp.static(int(Counter.NAN_RESETS)), 1)
    if nefc_over or con_over:
        wp.atomic_add(counters_out, wp.static(int(Counter.OVERFLOW_WORLDS)), 1)
        if slot_seen_out[worldid] == 0:  # its first slot reset since the last summary
            slot_seen_out[worldid] = 1
            wp.atomic_add(counters_out, wp.static(int(Counter.OVERFLOW_DISTINCT_WORLDS)), 1)
        if nefc_over:
            wp.atomic_add(counters_out, wp.static(int(Counter.NEFC_OVERFLOW)), 1)
        if con_over:
            wp.atomic_add(counters_out, wp.static(int(Counter.CONTACT_OVERFLOW)), 1)


@wp.kernel
def post_step(
    # Model:
    act_qadr: wp.array[int],
    act_dadr: wp.array[int],
    ctrl_stance: wp.array[float],
    table: wp.array2d[float],
    torso_id: int,
    z_stance: float,
    nconmax: int,
    # Data in:
    qpos_in: wp.array2d[float],
    qvel_in: wp.array2d[float],
    xmat_in: wp.array2d[wp.mat33],
    # In:
    task: TaskParams,
    amp_in: wp.array[float],
    action_in: wp.array2d[float],
    # Data out:
    overflow_out: wp.array[int],
    # Out:
    step_count_out: wp.array[int],
    prev_action_out: wp.array2d[float],
    ncon_out: wp.array[int],
    bad_contact_out: wp.array[int],
    slot_seen_out: wp.array[int],
    ep_acc_out: wp.array2d[float],
    counters_out: wp.array[int],
    sums_out: wp.array[float],
    reward_terms_out: wp.array2d[float],
    reward_out: wp.array[float],
    done_out: wp.array[float],
    fall_out: wp.array[float],
    timeout_out: wp.array[float],
    reset_out: wp.array[bool],
):
    worldid = wp.tid()
    finite, nefc_over, con_over, tilt, touch = _checks(worldid, torso_id, nconmax, qpos_in, qvel_in, xmat_in,
                                                       task, overflow_out, ncon_out, bad_contact_out, counters_out)
    steps = step_count_out[worldid] + 1
    row = _table_row(_rhythm_phase(steps - 1, task), table.shape[0])
    reward = float(0.0)
    if finite:
        r = RewardIn(worldid, row, amp_in[worldid], act_qadr, act_dadr, ctrl_stance, table, torso_id, z_stance,
                     qpos_in, qvel_in, xmat_in, action_in, prev_action_out)
        reward = weighted_sum(r, task.reward_w, task.dt, reward_terms_out)
        for i in range(act_qadr.shape[0]):
            prev_action_out[worldid, i] = wp.clamp(action_in[worldid, i], -1.0, 1.0)
    fall = touch or tilt or finite == 0 or nefc_over or con_over
    timeout = (steps >= task.episode_steps) and not fall
    if fall:
        reward = reward - task.fall_penalty
        reward_terms_out[worldid, REWARD_FALL] = reward_terms_out[worldid, REWARD_FALL] - task.fall_penalty
    _accumulate(worldid, finite, qpos_in[worldid, 2] - z_stance,
                amp_in[worldid] * table[row, act_qadr.shape[0] + COL_PELVIS], reward, ep_acc_out)
    if fall or timeout:
        _end_episode(worldid, timeout, task.dt, ep_acc_out, sums_out, counters_out)
        _count_ending(worldid, fall, touch, tilt, finite == 0, nefc_over, con_over, slot_seen_out, counters_out)
    _write_step(worldid, steps, reward, fall, timeout, step_count_out, reward_out, done_out, fall_out, timeout_out,
                reset_out)


@wp.func
def reset_task(
    worldid: int,
    # Model:
    key_qpos: wp.array[float],
    ctrl_stance: wp.array[float],
    act_qadr: wp.array[int],
    # In:
    task: TaskParams,
    seed: int,
    stagger: int,
    # Data out:
    qpos_out: wp.array2d[float],
    qvel_out: wp.array2d[float],
    ctrl_out: wp.array2d[float],
    # Out:
    step_count_out: wp.array[int],
    push_next_out: wp.array[float],
    push_left_out: wp.array[int],
    prev_action_out: wp.array2d[float],
    ep_acc_out: wp.array2d[float],
    rng_out: wp.array[int],
):
    """World ``worldid``'s new episode: the keyframe with noise on the actuated joints, the stance
    controls, a staggered or zero step count, the next push time, the accumulators cleared."""
    state = wp.rand_init(seed, worldid * 7919 + rng_out[worldid] * 104729 + 1)
    rng_out[worldid] = rng_out[worldid] + 1
    noise = task.init_noise
    for i in range(qpos_out.shape[1]):
        qpos_out[worldid, i] = key_qpos[i]
    for i in range(act_qadr.shape[0]):
        qpos_out[worldid, act_qadr[i]] = key_qpos[act_qadr[i]] + wp.randf(state, -noise, noise)
        ctrl_out[worldid, i] = ctrl_stance[i]
        prev_action_out[worldid, i] = 0.0
    for i in range(qvel_out.shape[1]):
        qvel_out[worldid, i] = 0.0
    if stagger:
        step_count_out[worldid] = int(wp.randf(state, 0.0, float(task.episode_steps)))
    else:
        step_count_out[worldid] = 0
    push_next_out[worldid] = wp.randf(state, task.push_interval_lo, task.push_interval_hi)
    push_left_out[worldid] = 0
    for k in range(ep_acc_out.shape[1]):
        ep_acc_out[worldid, k] = 0.0


@wp.kernel
def reset_worlds(
    # Model:
    key_qpos: wp.array[float],
    ctrl_stance: wp.array[float],
    act_qadr: wp.array[int],
    # In:
    task: TaskParams,
    seed: int,
    stagger: int,
    reset_in: wp.array[bool],
    # Data out:
    qpos_out: wp.array2d[float],
    qvel_out: wp.array2d[float],
    ctrl_out: wp.array2d[float],
    # Out:
    step_count_out: wp.array[int],
    push_next_out: wp.array[float],
    push_left_out: wp.array[int],
    prev_action_out: wp.array2d[float],
    ep_acc_out: wp.array2d[float],
    rng_out: wp.array[int],
):
    worldid = wp.tid()
    if not reset_in[worldid]:
        return
    reset_task(worldid, key_qpos, ctrl_stance, act_qadr, task, seed, stagger, qpos_out, qvel_out, ctrl_out,
               step_count_out, push_next_out, push_left_out, prev_action_out, ep_acc_out, rng_out)


@wp.kernel
def observe(
    # Model:
    act_qadr: wp.array[int],
    act_dadr: wp.array[int],
    ctrl_stance: wp.array[float],
    table: wp.array2d[float],
    z_stance: float,
    # Data in:
    qpos_in: wp.array2d[float],
    qvel_in: wp.array2d[float],
    # In:
    task: TaskParams,
    amp_in: wp.array[float],
    step_count_in: wp.array[int],
    prev_action_in: wp.array2d[float],
    # Out:
    obs_out: wp.array2d[float],
):
    worldid = wp.tid()
    nu = act_qadr.shape[0]
    # MuJoCo quaternions are (w, x, y, z); warp's are (x, y, z, w)
    q = wp.quat(qpos_in[worldid, 4], qpos_in[worldid, 5], qpos_in[worldid, 6], qpos_in[worldid, 3])
    q = wp.normalize(q)
    g = wp.quat_rotate_inv(q, wp.vec3(0.0, 0.0, -1.0))
    v = wp.quat_rotate_inv(q, wp.vec3(qvel_in[worldid, 0], qvel_in[worldid, 1], qvel_in[worldid, 2]))
    phase = _rhythm_phase(step_count_in[worldid], task)
    row = _table_row(phase, table.shape[0])
    amp = amp_in[worldid]
    for k in range(3):
        obs_out[worldid, OBS_GRAVITY + k] = g[k]
    obs_out[worldid, OBS_HEIGHT] = qpos_in[worldid, 2] - z_stance
    for k in range(3):
        obs_out[worldid, OBS_LINVEL + k] = v[k]
    for k in range(3):
        obs_out[worldid, OBS_ANGVEL + k] = qvel_in[worldid, 3 + k]
    obs_out[worldid, OBS_PHASE_SIN] = wp.sin(2.0 * wp.pi * phase)
    obs_out[worldid, OBS_PHASE_COS] = wp.cos(2.0 * wp.pi * phase)
    obs_out[worldid, OBS_AMP] = amp
    qerr0 = OBS_FIXED + OBS_QERR_BLOCK * nu
    qvel0 = OBS_FIXED + OBS_QVEL_BLOCK * nu
    act0 = OBS_FIXED + OBS_PREV_ACTION_BLOCK * nu
    for i in range(nu):
        qref = ctrl_stance[i] + amp * table[row, i]
        obs_out[worldid, qerr0 + i] = qpos_in[worldid, act_qadr[i]] - qref
        obs_out[worldid, qvel0 + i] = 0.1 * qvel_in[worldid, act_dadr[i]]
        obs_out[worldid, act0 + i] = prev_action_in[worldid, i]
    # a non-finite state must not poison the policy: zero it (the world is reset this step)
    for k in range(obs_out.shape[1]):
        if not wp.isfinite(obs_out[worldid, k]):
            obs_out[worldid, k] = 0.0


@wp.kernel
def observe_privileged(
    # Data in:
    qvel_in: wp.array2d[float],
    # In:
    task: TaskParams,
    step_count_in: wp.array[int],
    push_next_in: wp.array[float],
    push_left_in: wp.array[int],
    push_force_in: wp.array[wp.vec3],
    # Out:
    priv_out: wp.array2d[float],
):
    worldid = wp.tid()
    left = push_left_in[worldid]
    force = push_force_in[worldid]
    fmax = task.push_impulse_hi / task.push_duration
    for k in range(3):
        f = float(0.0)
        if left > 0:
            f = force[k] / fmax
        priv_out[worldid, PRIV_PUSH_FORCE + k] = f
    priv_out[worldid, PRIV_PUSH_LEFT] = float(left) / float(task.push_steps)
    priv_out[worldid, PRIV_PUSH_NEXT] = push_next_in[worldid] / task.push_interval_hi
    priv_out[worldid, PRIV_EPISODE] = float(step_count_in[worldid]) / float(task.episode_steps)
    for j in range(qvel_in.shape[1]):
        priv_out[worldid, PRIV_FIXED + j] = 0.1 * qvel_in[worldid, j]
    for k in range(priv_out.shape[1]):
        if not wp.isfinite(priv_out[worldid, k]):
            priv_out[worldid, k] = 0.0
