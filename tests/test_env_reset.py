"""The stance env's masked reset in one launch (fightlab.envs.reset) against MuJoCo Warp's
reset_data and the task's reset_worlds, on warp's CPU device: the same bits in every Data field
but the contact slots (which the next step's collision rewrites), the same trajectories."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from fightlab.envs.reset import fused_reset_support
from fightlab.envs.stance import StanceEnv
from fightlab.sim import physics


def _arrays(obj, prefix: str = "") -> dict:
    """Every warp array of a MuJoCo Warp Data (nested structs walked), by dotted name."""
    out = {}
    for k, v in vars(obj).items():
        if isinstance(v, wp.array):
            out[prefix + k] = v.numpy().copy()
        elif hasattr(v, "__dict__") and not isinstance(v, (int, float, str)):
            out.update(_arrays(v, f"{prefix}{k}."))
    return out


def _pair(body: str, nworld: int):
    envs = [StanceEnv(body, nworld, "cpu", seed=5, graph=False, fused_reset=f) for f in (False, True)]
    assert not envs[0].fused_reset and envs[1].fused_reset
    # what ran is recorded with the physics (rows' physics_engine)
    assert "reset" not in envs[0].engine_solver and envs[1].engine_solver["reset"] == "fused"
    return envs


@pytest.mark.parametrize("body", ["simple", "muscular-fast"])
def test_one_reset_writes_what_reset_data_and_reset_worlds_write(body):
    """Worlds 0 and 2 of 4 reset after 5 steps and a sentinel written into every float and int
    Data field: every field equal to the bit (the contact slots aside), and the task's episode
    state too; world 0's reset zeroes nacon in both."""
    a, b = _pair(body, 4)
    for env in (a, b):
        env.reset()
        gen = torch.Generator().manual_seed(1)
        for _ in range(5):
            env.action[:] = torch.rand(env.action.shape, generator=gen) * 2 - 1
            env.step()
        for k, arr in vars(env.d).items():  # a sentinel in every per-world field: what a reset
            if isinstance(arr, wp.array) and arr.dtype in (wp.float32, wp.int32):  # fails to write shows
                arr.fill_(3)
        env._reset.assign(np.array([True, False, True, False]))
        env._launch_reset(stagger=True)
    da, db = _arrays(a.d), _arrays(b.d)
    assert da.keys() == db.keys() and len(da) > 50
    differ = [k for k in da if not k.startswith("contact.") and not np.array_equal(da[k], db[k], equal_nan=True)]
    assert differ == [], differ
    assert int(db["nacon"][0]) == 0
    for k in ("_step_count", "_push_next", "_push_left", "_prev_action", "_ep_acc", "_rng"):
        np.testing.assert_array_equal(getattr(a, k).numpy(), getattr(b, k).numpy(), err_msg=k)


def test_a_rollout_with_resets_is_the_same_bit_for_bit():
    """60 env steps of 8 worlds under large random actions (falls, so resets): the same
    observations, rewards, dones and state at every step."""
    a, b = _pair("simple", 8)
    resets = 0
    for env in (a, b):
        env.reset()
    gens = [torch.Generator().manual_seed(0) for _ in range(2)]
    for _ in range(60):
        for env, gen in zip((a, b), gens):
            env.action[:] = torch.rand(env.action.shape, generator=gen) * 4 - 2
            env.step()
        resets += int(a.done.sum())
        assert torch.equal(a.obs, b.obs) and torch.equal(a.reward, b.reward) and torch.equal(a.done, b.done)
    assert resets > 0
    sa, sb = a.state_dict(), b.state_dict()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("flag", ["fused_reset", "tree_factor"])
def test_env_switches_take_a_bool_only(flag):
    """A string such as "no" is truthy: refused, before the model is built."""
    with pytest.raises(ValueError, match=f"{flag} must be True or False, got 'no'"):
        StanceEnv("simple", 2, "cpu", **{flag: "no"})


def test_models_with_fields_it_does_not_write_keep_reset_data():
    """A mocap body, an equality constraint, a sensor: named (the env would keep MuJoCo Warp's
    reset_data); both bodies take the fused reset."""
    from fightlab.bodies import build

    for name in ("simple", "muscular-fast"):
        m, _ = physics.put(build(name), 1, physics.slots_for(name), "cpu")
        assert fused_reset_support(m) is None
    mocap, sensor = '<body mocap="true" pos="0 0 1"/>', '<sensor><accelerometer site="s"/></sensor>'
    eq = '<equality><weld body1="b"/></equality>'
    body = '<body name="b" pos="0 0 .5"><freejoint/><geom size=".1"/><site name="s"/></body>'
    cases = ((mocap + body, sensor + eq, "mocap bodies"), (body, sensor + eq, "equality constraints"),
             (body, sensor, "sensors"))
    for world, extra, words in cases:
        xml = f"<mujoco><worldbody>{world}</worldbody>{extra}</mujoco>"
        m, _ = physics.put(mujoco.MjModel.from_xml_string(xml), 1, physics.Slots(None, None, "given"), "cpu")
        reason = fused_reset_support(m)
        assert reason is not None and reason.startswith(words), (words, reason)
