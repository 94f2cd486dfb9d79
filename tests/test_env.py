"""StanceEnv on warp's CPU device with tiny sizes."""

import dataclasses

import numpy as np
import pytest
import torch

from fightlab.config import EnvConfig
from fightlab.envs.stance import REWARD_KEYS, StanceEnv

NO_PUSH = EnvConfig(push_impulse_ns=(0.0, 0.0))


@pytest.fixture(scope="module")
def env():
    e = StanceEnv("simple", nworld=4, device="cpu", seed=3, cfg=NO_PUSH)
    e.reset(stagger=False)
    return e


def _qpos(env):
    return env.d.qpos.numpy().copy()


def _set_qpos(env, world, qpos):
    q = env.d.qpos.numpy()
    q[world] = qpos
    env.d.qpos.assign(q)
    v = env.d.qvel.numpy()
    v[world] = 0
    env.d.qvel.assign(v)


def _rot_x(angle_rad):
    """MuJoCo quaternion (w, x, y, z) of a rotation about x."""
    return np.array([np.cos(angle_rad / 2), np.sin(angle_rad / 2), 0.0, 0.0])


def test_shapes(env):
    obs = env.reset(stagger=False)
    assert obs.shape == (4, env.obs_dim) and obs.dtype == torch.float32
    assert env.obs_dim == 13 + 3 * env.nu == 13 + 3 * 37
    obs, rew, done, info = env.step(torch.zeros(4, env.nu))
    assert rew.shape == (4,) and done.shape == (4,)
    assert info["fall"].shape == (4,) and info["timeout"].shape == (4,)
    with pytest.raises(ValueError, match="action must have shape"):
        env.step(torch.zeros(3, env.nu))


def test_zero_action_standing_is_quiet(env):
    """200 zero-action steps without pushes at a = 0: no NaN, no fall, the pelvis stays up."""
    env.set_amplitude(0.0, immediate=True)
    env.reset(stagger=False)
    env.read_summary()
    for _ in range(200):
        obs, _, _, info = env.step(torch.zeros(4, env.nu))
        assert torch.isfinite(obs).all()
    s = env.read_summary()
    assert s["nan_resets"] == 0 and s["falls"] == 0, s
    z = _qpos(env)[:, 2]
    assert np.all(np.abs(z - env.z_stance) < 0.05), z


def test_masked_reset_touches_only_done_worlds(env):
    env.reset(stagger=False)
    for _ in range(5):
        env.step(torch.zeros(4, env.nu))
    before = env._step_count.numpy().copy()
    q = _qpos(env)
    lying = q[1].copy()
    lying[2] = 0.15
    lying[3:7] = _rot_x(np.pi / 2)  # pelvis on its side, body on the floor
    _set_qpos(env, 1, lying)
    _, _, done, info = env.step(torch.zeros(4, env.nu))
    after = env._step_count.numpy()
    assert done.tolist() == [0.0, 1.0, 0.0, 0.0] and info["fall"][1] == 1.0
    assert after[1] == 0                                   # world 1 restarted its episode
    assert np.all(after[[0, 2, 3]] == before[[0, 2, 3]] + 1)  # the others just advanced
    q1 = _qpos(env)[1]
    # world 1 is back at the keyframe (joint noise ±init_noise_rad only)
    assert abs(q1[2] - env.z_stance) < 1e-6
    assert np.allclose(q1[:7], env.key_qpos[:7], atol=1e-6)
    assert np.max(np.abs(q1 - env.key_qpos)) <= env.cfg.init_noise_rad + 1e-6


def test_falls_detected_by_contact_and_by_tilt(env):
    env.reset(stagger=False)
    env.read_summary()
    # contact: upright, but sunk 0.3 m so that the shins and knees touch the floor
    sunk = env.key_qpos.copy()
    sunk[2] -= 0.3
    _set_qpos(env, 0, sunk)
    # tilt: 70° about x, lifted 1 m so that nothing touches the floor yet
    tilted = env.key_qpos.copy()
    tilted[2] += 1.0
    tilted[3:7] = _rot_x(np.radians(70))
    _set_qpos(env, 2, tilted)
    _, _, done, info = env.step(torch.zeros(4, env.nu))
    assert info["fall"].tolist() == [1.0, 0.0, 1.0, 0.0]
    s = env.read_summary()
    assert s["falls"] == 2 and s["contact_falls"] >= 1 and s["tilt_falls"] >= 1, s
    assert s["episodes"] == 2


def test_push_changes_velocity():
    """A push starting on the first step moves the pelvis along the push direction."""
    cfg = dataclasses.replace(NO_PUSH, push_interval_s=(0.01, 0.01), push_impulse_ns=(30.0, 30.0))
    pushed = StanceEnv("simple", nworld=2, device="cpu", seed=1, cfg=cfg)
    quiet = StanceEnv("simple", nworld=2, device="cpu", seed=1, cfg=NO_PUSH)
    for e in (pushed, quiet):
        e.set_amplitude(0.0, immediate=True)
        e.reset(stagger=False)
        for _ in range(5):  # the 0.1 s push
            e.step(torch.zeros(2, e.nu))
    f = pushed._push_force.numpy()
    assert np.allclose(np.linalg.norm(f, axis=1), 30.0 / 0.1, rtol=1e-4)
    dv = pushed.d.qvel.numpy()[:, :2] - quiet.d.qvel.numpy()[:, :2]
    for w in range(2):
        # the free joint's linear velocity gained ≳ a third of impulse/mass along the force
        along = dv[w] @ f[w, :2] / np.linalg.norm(f[w, :2])
        assert along > 0.1, (dv[w], f[w])


def test_overflow_counted_with_tiny_njmax():
    env = StanceEnv("simple", nworld=3, device="cpu", seed=0, cfg=NO_PUSH, njmax=4)
    env.reset(stagger=False)
    env.read_summary()
    _, _, done, info = env.step(torch.zeros(3, env.nu))
    s = env.read_summary()
    assert s["overflow_worlds"] == 3 and s["nefc_overflow"] == 3, s
    assert s["overflow_distinct_worlds"] == 3, s
    assert s["falls"] == 3  # an overflow reset counts as a fall
    assert done.tolist() == [1.0, 1.0, 1.0]
    # a reset world runs out again: three steps count nine resets of the same three worlds
    for _ in range(3):
        env.step(torch.zeros(3, env.nu))
    s = env.read_summary()
    assert s["overflow_worlds"] == 9 and s["overflow_distinct_worlds"] == 3, s
    env.step(torch.zeros(3, env.nu))  # the summary cleared the worlds seen, too
    assert env.read_summary()["overflow_distinct_worlds"] == 3


def test_nan_world_is_reset_and_counted(env):
    env.reset(stagger=False)
    env.read_summary()
    q = env.key_qpos.copy()
    q[10] = np.nan
    _set_qpos(env, 3, q)
    obs, _, done, info = env.step(torch.zeros(4, env.nu))
    s = env.read_summary()
    assert s["nan_resets"] == 1 and done[3] == 1.0
    assert torch.isfinite(obs).all()
    assert np.isfinite(_qpos(env)).all()


def test_bad_input_errors():
    with pytest.raises(ValueError, match="valid bodies: muscular-fast, simple"):
        StanceEnv("robot", nworld=2)
    for bad in (0, -3, 1.5, "many"):
        with pytest.raises(ValueError, match="nworld must be a positive integer"):
            StanceEnv("simple", nworld=bad)
    with pytest.raises(ValueError, match="amplitude must be in"):
        StanceEnv("simple", nworld=1).set_amplitude(1.5)


def test_tree_factor_is_the_default_for_the_89_dof_tree_and_keeps_the_physics():
    """muscular-fast (one 89-DOF tree) steps through fightlab's single-launch factor by default;
    the trajectory matches MuJoCo Warp's own sparse factor to float32 rounding over 10 env steps
    (50 physics steps, no pushes). simple (43 DOF, dense path) has nothing to replace."""
    from fightlab.kernels.factor import is_tree_factor_enabled

    envs = {on: StanceEnv("muscular-fast", nworld=2, device="cpu", seed=5, cfg=NO_PUSH, tree_factor=on)
            for on in (True, False)}
    assert envs[True].tree_factor and is_tree_factor_enabled(envs[True].m)
    assert envs[True].tree_factor_variant == "shared"  # 7 KiB of staging fits
    assert not envs[False].tree_factor and not is_tree_factor_enabled(envs[False].m)
    assert envs[False].tree_factor_variant is None
    qpos = {}
    for on, e in envs.items():
        e.reset(stagger=False)
        for _ in range(10):
            e.step(torch.full((2, e.nu), 0.2))
        qpos[on] = _qpos(e)
    envs[True].close()
    assert not is_tree_factor_enabled(envs[True].m) and envs[True].tree_factor_variant is None
    dev = np.max(np.abs(qpos[True] - qpos[False]))
    assert dev < 1e-4, dev
    assert not StanceEnv("simple", nworld=1, device="cpu", cfg=NO_PUSH).tree_factor


def test_the_warp_model_leaves_the_lights_out_and_keeps_the_physics():
    """The body's lamp (rendering only) is not in MuJoCo Warp's model: one kernel a physics step
    fewer, and 20 steps with random controls equal, to the bit, those of the model with it."""
    import mujoco_warp as mjw

    from fightlab.bodies import build
    from fightlab.sim import physics

    mjm = physics.prepare_mjmodel(build("simple"), EnvConfig())
    assert mjm.nlight >= 1
    (m, d), (lit, d_lit) = (physics.put(mjm, 3, physics.slots_for("simple"), "cpu") for _ in range(2))
    assert m.nlight == 0
    lit.nlight = mjm.nlight  # MuJoCo Warp's model as put_model makes it
    ctrl = np.random.default_rng(0).uniform(-1, 1, (3, mjm.nu)).astype(np.float32)
    for data in (d, d_lit):
        data.ctrl.assign(ctrl)
    for _ in range(20):
        mjw.step(m, d)
        mjw.step(lit, d_lit)
    assert np.abs(d_lit.light_xpos.numpy()).max() > 0 and not d.light_xpos.numpy().any()  # the kernel ran in one only
    for a, b in ((d.qpos, d_lit.qpos), (d.qvel, d_lit.qvel), (d.qacc, d_lit.qacc), (d.efc.force, d_lit.efc.force)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_state_dict_round_trip_gives_the_same_next_step():
    """The env's state door: a second env loaded with the first one's state_dict steps to the
    same observation, reward and done; a state of another nworld is refused by name."""
    a = StanceEnv("simple", nworld=3, device="cpu", seed=5)
    a.reset(stagger=True)
    act = torch.full((3, a.nu), 0.3)
    for _ in range(4):
        a.step(act)
    a.set_amplitude(0.4)
    state = a.state_dict()
    assert state["amp_target"] == pytest.approx(0.4) and state["qpos"].shape == (3, a.mjm.nq)
    b = StanceEnv("simple", nworld=3, device="cpu", seed=5)
    b.reset(stagger=False)
    b.load_state_dict(state)
    assert b.amplitude_target == pytest.approx(0.4)
    oa, ra, da, _ = a.step(act)
    oa, ra, da = oa.clone(), ra.clone(), da.clone()
    ob, rb, db, _ = b.step(act)
    assert torch.equal(oa, ob) and torch.equal(ra, rb) and torch.equal(da, db)
    c = StanceEnv("simple", nworld=2, device="cpu", seed=5)
    with pytest.raises(ValueError, match="env state 'qpos' has shape"):
        c.load_state_dict(state)


# A pushed, falling, timing-out rollout, bit for bit: a refactor must not change it. A change of
# behaviour (a new reward term) re-records both on purpose: `python tests/test_env.py` prints them.
_ROLLOUT_SHA256 = "8ea1c43fbe95c878848571bcb764569076d5b509580be1485207189df5b7e9bd"
_ROLLOUT_SUMMARY = dict(episodes=6, falls=2, timeouts=4, tilt_falls=2,
                        episode_s_sum=0.9399999380111694, return_sum=-17.09811782836914,
                        track_num=0.002800658345222473, track_den=0.0038779843598604202)


def _rollout() -> tuple[str, dict]:
    """(sha256, summary) of the recorded rollout: 3 worlds, 20 steps, fixed alternating actions,
    pushes every 0.04–0.1 s, 0.2 s episodes and a 15° tilt limit (falls and timeouts both
    happen), amplitude ramping to 1, staggered start; the hash covers the observations,
    rewards, done/fall/timeout of every step, the summary and the final state."""
    import hashlib

    from fightlab.config import REFERENCE_SOLVER

    cfg = EnvConfig(episode_s=0.2, push_interval_s=(0.04, 0.1), push_impulse_ns=(40.0, 80.0),
                    tilt_fall_deg=15.0, **REFERENCE_SOLVER)  # the solver of the recording
    env = StanceEnv("simple", nworld=3, device="cpu", seed=11, cfg=cfg)
    env.set_amplitude(1.0, ramp_s=0.1)
    env.reset(stagger=True)
    h = hashlib.sha256()
    act = 0.5 * torch.sin(torch.arange(3 * env.nu, dtype=torch.float32).reshape(3, env.nu))
    for k in range(20):
        obs, rew, done, info = env.step(act if k % 2 == 0 else -act)
        for t in (obs, rew, done, info["fall"], info["timeout"]):
            h.update(t.numpy().tobytes())
    s = env.read_summary()
    added = ("track_num_survived", "track_den_survived", *REWARD_KEYS)  # summary keys added after the recording
    h.update(repr(sorted((k, v) for k, v in s.items() if k not in added)).encode())
    for _, v in sorted(env.state_dict().items()):
        h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest(), s


def test_fixed_seed_rollout_is_bitwise_the_recorded_one():
    digest, s = _rollout()
    assert {k: s[k] for k in _ROLLOUT_SUMMARY} == _ROLLOUT_SUMMARY, s
    assert digest == _ROLLOUT_SHA256
    # the 4 timeouts count in the survived sums, the 2 falls only in the criterion's
    assert 0 < s["track_den_survived"] < s["track_den"]


def test_tracking_over_survived_episodes():
    """Episodes that all reach the time limit (no push): the survived sums are the criterion's,
    bit for bit; episodes that all fall after a few steps (hard pushes, an 8° tilt limit): the
    criterion's tracking has them, the survived sums stay 0."""
    quiet = dict(episode_s=0.2, push_interval_s=(5.0, 6.0))
    hard = dict(episode_s=0.4, push_interval_s=(0.05, 0.1), push_impulse_ns=(40.0, 80.0))
    for tilt, kw, all_survive in ((89.0, quiet, True), (8.0, hard, False)):
        env = StanceEnv("simple", nworld=3, device="cpu", seed=3, cfg=EnvConfig(tilt_fall_deg=tilt, **kw))
        env.set_amplitude(1.0, immediate=True)
        env.reset(stagger=False)
        zero = torch.zeros(3, env.nu)
        for _ in range(15):
            env.step(zero)
        s = env.read_summary()
        assert s["episodes"] >= 3 and s["track_den"] > 0, s
        if all_survive:
            assert s["timeouts"] == s["episodes"] and s["falls"] == 0, s
            assert (s["track_num_survived"], s["track_den_survived"]) == (s["track_num"], s["track_den"])
        else:
            assert s["falls"] == s["episodes"] and s["timeouts"] == 0, s
            assert (s["track_num_survived"], s["track_den_survived"]) == (0.0, 0.0)


def test_observation_layout_names_its_entries(env):
    """The OBS_* indices point at what the module docstring says: the amplitude, an upright
    body's gravity direction, the phase at step 0, and the previous (clipped) action block."""
    from fightlab.envs import stance as S

    assert env.obs_dim == S.OBS_FIXED + S.OBS_NBLOCK * env.nu
    assert env.obs_min_std[S.OBS_AMP] == 0.2 and env.obs_min_std[S.OBS_AMP - 1] == 0.01
    env.set_amplitude(0.4, immediate=True)
    obs = env.reset(stagger=False).numpy()
    assert np.all(obs[:, S.OBS_AMP] == np.float32(0.4))
    assert np.allclose(obs[:, S.OBS_GRAVITY:S.OBS_GRAVITY + 3], [0, 0, -1], atol=0.05)
    assert np.all(obs[:, S.OBS_PHASE_SIN] == 0) and np.all(obs[:, S.OBS_PHASE_COS] == 1)
    assert np.allclose(obs[:, S.OBS_HEIGHT], 0, atol=1e-6)
    act = torch.linspace(-2, 2, 4 * env.nu).reshape(4, env.nu)
    obs = env.step(act)[0].numpy()
    a0 = S.OBS_FIXED + S.OBS_PREV_ACTION_BLOCK * env.nu
    assert obs.shape[1] == a0 + env.nu
    np.testing.assert_array_equal(obs[:, a0:], act.clamp(-1, 1).numpy())
    env.set_amplitude(0.0, immediate=True)


def test_reward_terms_add_up_to_the_reward():
    """read_summary's per-term sums (REWARD_KEYS, over every world's steps since the last
    summary) add up to the rewards the steps returned; the fall penalty's is −fall_penalty per
    fall; a zero weight zeroes its term; the summary clears them."""
    from fightlab.envs.stance import REWARD_TERMS

    cfg = EnvConfig(episode_s=0.2, push_interval_s=(0.04, 0.1), push_impulse_ns=(40.0, 80.0),
                    tilt_fall_deg=15.0, w_upright=0.0)
    assert [t.weight_of(cfg) for t in REWARD_TERMS] == [1.0, 1.0, 1.0, 0.0, 0.1]
    assert dataclasses.replace(REWARD_TERMS[0], weight=0.25).weight_of(cfg) == 0.25
    env = StanceEnv("simple", nworld=3, device="cpu", seed=11, cfg=cfg)
    env.set_amplitude(1.0, ramp_s=0.1)
    env.reset(stagger=True)
    act = 0.5 * torch.sin(torch.arange(3 * env.nu, dtype=torch.float32).reshape(3, env.nu))
    total = 0.0
    for k in range(20):
        total += env.step(act if k % 2 == 0 else -act)[1].double().sum().item()
    s = env.read_summary()
    assert s["falls"] > 0 and s["reward_fall"] == -cfg.fall_penalty * s["falls"], s
    assert s["reward_upright"] == 0.0 and s["reward_action_rate"] < 0 < s["reward_pose"], s
    assert s["reward_alive"] == pytest.approx(3 * 20 * cfg.control_dt * cfg.w_alive, rel=1e-6)
    assert sum(s[k] for k in REWARD_KEYS) == pytest.approx(total, rel=1e-5, abs=1e-5)
    assert [env.read_summary()[k] for k in REWARD_KEYS] == [0.0] * len(REWARD_KEYS)


def test_default_learner_and_config_ids_are_unchanged():
    """The learner and config ids (measure.report) of the defaults before the training physics
    became a learner field and before each body had its own learner are those their committed
    rows carry (the reward weights stay the EnvConfig fields they were; the solver fields at the
    reference values are implied; the learner PPOConfig's own defaults); today's defaults,
    another training physics and each body's learner (config.BODY_PPO), have ids of their own."""
    from fightlab.config import REFERENCE_SOLVER, EnvConfig, PPOConfig, TrainConfig, to_dict
    from fightlab.measure.report import config_id, learner_id

    for body, config in (("simple", "dcae98e0"), ("muscular-fast", "046d117e")):
        params = to_dict(TrainConfig(body=body, env=EnvConfig(**REFERENCE_SOLVER), ppo=PPOConfig()))
        assert (learner_id(params), config_id(params)) == ("ea341b36", config), body
        today = to_dict(TrainConfig(body=body))
        assert learner_id(today) != "ea341b36" and config_id(today) != config


if __name__ == "__main__":  # the values to re-record after a deliberate change of behaviour
    digest, s = _rollout()
    print(f"_ROLLOUT_SHA256 = {digest!r}")
    print(f"_ROLLOUT_SUMMARY = {dict((k, s[k]) for k in _ROLLOUT_SUMMARY)!r}")

