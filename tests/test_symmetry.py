"""Left–right symmetry: the mirror maps derived from each body's model, checked through MuJoCo's
kinematics and the env's own observation and control kernels (warp's CPU device), and the
`ppo.symmetry` lever in a tiny training of each body."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from fightlab.bodies import BODY_NAMES, build
from fightlab.bodies import mirror as M
from fightlab.envs.mirror import mirror_maps
from fightlab.envs.stance import StanceEnv


@pytest.mark.parametrize("body", BODY_NAMES)
def test_every_mirror_map_twice_is_the_identity(body):
    m = build(body)
    for f in (M.joint_mirror, M.qpos_mirror, M.qvel_mirror, M.actuator_mirror):
        assert f(m).is_involution(), f.__name__
    env = StanceEnv(body, 1, "cpu", privileged=True, graph=False)
    maps = mirror_maps(env)
    assert [len(maps[k].perm) for k in ("policy", "critic", "actions")] == [env.obs_dim, env.priv_dim, env.nu]
    for k, mp in maps.items():
        assert mp.is_involution(), k
        x = np.random.default_rng(0).normal(size=(3, len(mp.perm))).astype(np.float32)
        assert np.array_equal(mp.apply(mp.apply(x)), x)


@pytest.mark.parametrize("body", BODY_NAMES)
def test_the_mirrored_pose_puts_every_body_at_its_partners_mirrored_place(body):
    """The joint signs come from the axes: a random pose and its mirror (qpos_mirror) put each
    body where its partner's y → −y reflection is, with the reflected orientation."""
    m = build(body)
    qm = M.qpos_mirror(m)
    rng = np.random.default_rng(1)
    q = m.qpos0.copy()
    q[7:] += rng.uniform(-0.3, 0.3, m.nq - 7)
    q[:3] += (0.1, 0.2, 0.05)
    q[3:7] = [0.9, 0.2, -0.3, 0.1]
    q[3:7] /= np.linalg.norm(q[3:7])
    d, d2 = mujoco.MjData(m), mujoco.MjData(m)
    d.qpos[:], d2.qpos[:] = q, qm.apply(q)
    mujoco.mj_kinematics(m, d)
    mujoco.mj_kinematics(m, d2)
    S = np.diag([1.0, -1.0, 1.0])
    for b in range(1, m.nbody):
        p = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, M.partner_name(m.body(b).name))
        assert p > 0, m.body(b).name
        np.testing.assert_allclose(d2.xpos[p], S @ d.xpos[b], atol=1e-9)
        np.testing.assert_allclose(d2.xmat[p].reshape(3, 3), S @ d.xmat[b].reshape(3, 3) @ S, atol=1e-9)


def _mirrored_pair(env, rng):
    """Worlds 0 and 1 of ``env``: a perturbed stance state and its mirror about the reference
    (the keyframe; amplitude 0), same timers; actions a and its mirror."""
    st = env.state_dict()
    qm, vm = M.qpos_mirror(env.mjm), M.qvel_mirror(env.mjm)
    key = env.key_qpos.astype(np.float64)
    q = key.copy()
    q[7:] += rng.uniform(-0.1, 0.1, env.mjm.nq - 7)
    q[:3] += (0.02, 0.03, -0.01)
    q[3:7] = [0.98, 0.05, -0.08, 0.1]
    q[3:7] /= np.linalg.norm(q[3:7])
    v = rng.normal(0, 0.5, env.mjm.nv)
    st["qpos"][0], st["qpos"][1] = q, key + qm.apply(q - key)
    st["qvel"][0], st["qvel"][1] = v, vm.apply(v)
    for k in ("step_count", "amp", "push_next", "push_left", "push_force", "rng", "ep_acc"):
        st[k][1] = st[k][0]
    st["push_next"][:] = 100.0   # no push starts within the step
    st["push_left"][:] = 0
    st["amp"][:] = 0.0
    st["amp_ctl"][:] = (0.0, 1e-9)
    a = rng.uniform(-0.2, 0.2, env.nu).astype(np.float32)
    st["prev_action"][0], st["prev_action"][1] = a, mirror_maps(env)["actions"].apply(a)
    return st, a


@pytest.mark.parametrize("body", BODY_NAMES)
def test_the_observation_of_the_mirrored_state_is_the_mirrored_observation(body):
    """Through the env's kernels (physics left out: the observation of the loaded state, the
    control of the loaded action): obs(mirror x) = obs_mirror(obs(x)), priv likewise, and the
    control offsets from the stance of the mirrored action are the mirrored offsets."""
    env = StanceEnv(body, 2, "cpu", seed=5, privileged=True, graph=False)
    env.reset(stagger=False)
    maps = mirror_maps(env)
    st, a = _mirrored_pair(env, np.random.default_rng(2))
    env.load_state_dict(st)
    env.action[0] = torch.as_tensor(a)
    env.action[1] = torch.as_tensor(maps["actions"].apply(a))
    with wp.ScopedDevice("cpu"):
        env.launch_step(physics=False)
    obs, priv = env.obs.numpy(), env.priv_obs.numpy()
    assert np.abs(obs[0]).max() > 0.05 and np.abs(obs[1] - obs[0]).max() > 0.05
    np.testing.assert_allclose(obs[1], maps["policy"].apply(obs[0]), atol=2e-5)
    np.testing.assert_allclose(priv[1], maps["critic"].apply(priv[0]), atol=2e-5)
    ctrl = env.d.ctrl.numpy() - env.ctrl_stance
    assert np.abs(ctrl[0]).max() > 0.01
    np.testing.assert_allclose(ctrl[1], maps["actions"].apply(ctrl[0]), atol=2e-6)
    # the prev-action block is the loaded action's (post-step copies the action in)
    np.testing.assert_allclose(obs[0, -env.nu:], a, atol=1e-6)


@pytest.mark.parametrize("body", BODY_NAMES)
@pytest.mark.parametrize("mode", ["augment", "loss"])
def test_a_tiny_training_runs_with_each_symmetry_mode(tmp_path, body, mode):
    """Two iterations on warp's CPU device (eager update); the mirrored samples reach the loss
    (the update differs from "none"'s), with and without the asymmetric critic."""
    import dataclasses

    from fightlab.config import PPOConfig, TrainConfig
    from fightlab.run.runner import Trainer

    def run(sym, critic, sub):
        cfg = TrainConfig(body=body, nworld=4, device="cpu", seed=7, max_iterations=2, run_dir=str(tmp_path / sub),
                          checkpoint_every=0, curriculum_wait=1,
                          ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1, symmetry=sym,
                                        critic_obs=critic))
        t = Trainer(cfg, progress=False)
        t.train()
        t.close()
        return t.rows

    critic = "privileged" if mode == "augment" else "policy"
    base, rows = run("none", critic, "a"), run(mode, critic, "b")
    assert len(rows) == 2 and all(np.isfinite(r["policy_loss"]) and np.isfinite(r["value_loss"]) for r in rows)
    assert rows[0]["reward"] == base[0]["reward"]          # the same first rollout
    assert rows[0]["policy_loss"] != base[0]["policy_loss"] or rows[1]["reward"] != base[1]["reward"]
    assert dataclasses.asdict(PPOConfig())["symmetry"] == "none"
