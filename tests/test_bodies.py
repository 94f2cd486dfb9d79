"""Tests of fightlab.bodies: sizes, the stance keyframe, collisions, masses, describe, slot sizing."""

import mujoco
import numpy as np
import pytest

from fightlab.bodies import BODIES, body_info, bounce_gain, build, build_spec
from fightlab.bodies import describe as desc
from fightlab.measure import slots
from fightlab.bodies.muscles import N_MUSCLES

NAMES = sorted(BODIES)
SUPPORT = set(body_info("simple").support_bodies)


@pytest.fixture(scope="module", params=NAMES)
def name_model(request):
    return request.param, build(request.param)


def test_registry_names():
    assert set(BODIES) == {"muscular-fast", "simple"}


def test_one_registry_record_per_body():
    """bodies.BODY_NAMES (the bottom layer's copy) lists BODIES in order; each record is what
    body_info returns, holds the slot sizes physics uses, and names elements its model has."""
    from fightlab.bodies import BODY_NAMES
    from fightlab.sim import physics

    assert tuple(BODIES) == BODY_NAMES
    for name, rec in BODIES.items():
        assert rec.name == name and body_info(name) is rec
        assert physics.SLOTS[name] is rec.slots and physics.slots_for(name) is rec.slots
        assert rec.slots.nconmax > 0 and rec.slots.njmax > 0 and "max" in rec.slots.source
        m = build(name)
        obj = mujoco.mjtObj
        assert mujoco.mj_name2id(m, obj.mjOBJ_KEY, rec.keyframe) >= 0
        assert mujoco.mj_name2id(m, obj.mjOBJ_GEOM, rec.floor_geom) >= 0
        for b in (rec.torso_body, rec.pelvis_body, rec.head_body, *rec.support_bodies):
            assert mujoco.mj_name2id(m, obj.mjOBJ_BODY, b) >= 0, (name, b)
        for j in (*rec.guard_joints, *rec.bounce_joints):
            assert mujoco.mj_name2id(m, obj.mjOBJ_JOINT, j) >= 0, (name, j)
        assert bounce_gain(name) == rec.bounce_gain


@pytest.mark.parametrize("name,nv", [("muscular-fast", 89), ("simple", 43)])
def test_dof_and_single_tree(name, nv):
    m = build(name)
    assert m.nv == nv
    assert m.ntree == 1
    assert m.nu == nv - 6                                   # one servo per hinge
    assert [m.actuator(i).name for i in range(m.nu)] == [m.joint(j).name for j in range(1, m.njnt)]
    assert m.joint(0).name == "root" and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert np.all(m.jnt_limited[1:]) and np.all(m.actuator_ctrllimited)
    np.testing.assert_allclose(m.actuator_ctrlrange, m.jnt_range[1:])
    assert np.all(m.dof_damping[6:] > 0)


def test_options(name_model):
    _, m = name_model
    assert m.opt.timestep == pytest.approx(0.004)
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    assert m.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert (m.opt.iterations, m.opt.ls_iterations) == (10, 20)


def test_muscles():
    m = build("muscular-fast")
    muscles = [g for g in range(m.ngeom) if m.geom(g).name.startswith("muscle_")]
    assert len(muscles) == N_MUSCLES == 63
    assert all(m.geom_type[g] == mujoco.mjtGeom.mjGEOM_ELLIPSOID for g in muscles)
    assert all(m.geom_contype[g] == 1 for g in muscles)
    assert desc.describe(build("simple"))["n_ellipsoid_muscles"] == 0


@pytest.mark.parametrize("bad", ["muscular", "", None, 3])
def test_unknown_body_raises(bad):
    with pytest.raises(ValueError) as err:
        build(bad)
    msg = str(err.value)
    assert repr(bad) in msg and "muscular-fast" in msg and "simple" in msg
    with pytest.raises(ValueError):
        build_spec(bad)
    with pytest.raises(ValueError):
        body_info(bad)


def test_collides_with_floor_only(name_model):
    _, m = name_model
    floor = m.geom("floor").id
    assert (m.geom_contype[floor], m.geom_conaffinity[floor]) == (0, 1)
    body = [g for g in range(m.ngeom) if g != floor]
    for g1 in body:
        assert m.geom_conaffinity[g1] == 0, m.geom(g1).name   # nothing collides with a body geom
        if m.geom_contype[g1] == 0:
            assert m.geom_group[g1] == 3                      # non-colliding geoms are visual
    assert sum(m.geom_contype[g] for g in body) > 0


def test_mass(name_model):
    name, m = name_model
    mass = float(m.body_mass.sum())
    assert 60.0 <= mass <= 80.0
    assert desc.describe(m)["mass_kg"] == pytest.approx(mass)


def _run_stance(m, seconds):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("stance").id)
    mujoco.mj_forward(m, d)
    z0 = d.xpos[m.body("pelvis").id][2]
    bad_contacts = set()
    for _ in range(int(seconds / m.opt.timestep)):
        mujoco.mj_step(m, d)
        for c in d.contact[: d.ncon]:
            for g in c.geom:
                b = m.body(m.geom_bodyid[g]).name
                if b != "world" and b not in SUPPORT:
                    bad_contacts.add(b)
    return d, z0, bad_contacts


def test_stance_keyframe_holds(name_model):
    name, m = name_model
    key = m.key("stance")
    assert np.all(key.qvel == 0)
    np.testing.assert_allclose(key.ctrl, key.qpos[7:])      # zero action = hold the stance
    d, z0, bad = _run_stance(m, 2.0)
    z1 = d.xpos[m.body("pelvis").id][2]
    assert abs(z1 - z0) < 0.02, (name, z0, z1)
    assert not bad, bad
    assert d.xmat[m.body("torso").id][8] > 0.9                 # torso z axis within ~25 deg of up
    assert np.abs(d.qvel).max() < 0.5


def test_stance_holds_a_whole_episode(name_model):
    name, m = name_model
    d, z0, bad = _run_stance(m, 10.0)
    assert abs(d.xpos[m.body("pelvis").id][2] - z0) < 0.02 and not bad, name


def test_push_knocks_zero_action_over(name_model):
    """Not absurdly stiff: a 1.5 m/s shove of the whole body topples the zero-action stance."""
    _, m = name_model
    d = mujoco.MjData(m)
    for ang in (0.0, np.pi / 2, np.pi, 3 * np.pi / 2):
        mujoco.mj_resetDataKeyframe(m, d, m.key("stance").id)
        d.qvel[:2] = 1.5 * np.cos(ang), 1.5 * np.sin(ang)
        for _ in range(int(2.5 / m.opt.timestep)):
            mujoco.mj_step(m, d)
        assert d.xpos[m.body("pelvis").id][2] < 0.6, ang


def test_stance_shape(name_model):
    _, m = name_model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("stance").id)
    mujoco.mj_kinematics(m, d)
    from fightlab.bodies.skeleton import lowest_support_z

    assert lowest_support_z(m, d) == pytest.approx(0.0, abs=1e-6)   # soles exactly on the floor
    q = lambda j: d.qpos[m.jnt_qposadr[m.joint(j).id]]
    for s in ("l", "r"):
        assert 0.4 < q(f"knee_{s}") < 0.65                            # ~25-35 deg
        assert q(f"elbow_{s}") > 1.5                                  # guard: elbows bent
        assert d.xpos[m.body(f"hand_{s}").id][2] > 1.2                # hands up
    assert d.xpos[m.body("foot_l").id][0] > d.xpos[m.body("foot_r").id][0] + 0.2  # left foot forward
    assert d.xpos[m.body("foot_l").id][1] - d.xpos[m.body("foot_r").id][1] > 0.25  # feet apart


def test_bounce(name_model):
    name, m = name_model
    info = body_info(name)
    legs = ("hip_x", "hip_y", "hip_z", "knee", "ankle_y", "ankle_x")
    assert set(info.bounce_joints) == {f"{j}_{s}" for j in legs for s in "lr"}
    for s in "lr":                                          # knees bend, hips flex, ankles dorsiflex
        c = info.bounce_joints
        assert c[f"knee_{s}"] > 0.3 and c[f"hip_y_{s}"] > 0 and c[f"ankle_y_{s}"] > 0
        assert abs(c[f"hip_x_{s}"]) < c[f"knee_{s}"] and abs(c[f"ankle_x_{s}"]) < c[f"knee_{s}"]
    assert all(j in [m.joint(i).name for i in range(m.njnt)] for j in info.guard_joints)
    g = bounce_gain(name)
    assert 0.05 < g < 0.2                                   # metres per unit s
    # the coefficients lower the pelvis while the feet stay flat and in place (pelvis frame fixed)
    d = mujoco.MjData(m)
    for amp, lo, hi in ((0.05 * 0.03 / g, 0.95, 1.05),      # small signal: the slope g itself
                        (0.03 / g, 0.8, 1.3)):              # full amplitude: mildly nonlinear
        mujoco.mj_resetDataKeyframe(m, d, m.key("stance").id)
        mujoco.mj_kinematics(m, d)
        feet0 = {s: (d.xpos[m.body(f"foot_{s}").id] - d.xpos[1]).copy() for s in "lr"}
        for j, c in info.bounce_joints.items():
            d.qpos[m.jnt_qposadr[m.joint(j).id]] += c * amp
        mujoco.mj_kinematics(m, d)
        for s in "lr":
            rel = d.xpos[m.body(f"foot_{s}").id] - d.xpos[1]
            assert np.linalg.norm(rel[:2] - feet0[s][:2]) < 0.1 * g * amp + 1e-4   # < 3 mm
            assert lo < (rel[2] - feet0[s][2]) / (g * amp) < hi        # feet closer = pelvis drop
            assert d.xmat[m.body(f"foot_{s}").id][8] > 0.999             # soles flat


def test_describe_values():
    mf = desc.describe(build("muscular-fast"))
    sp = desc.describe(build("simple"))
    assert (mf["nv"], mf["nq"], mf["nu"], mf["ntree"]) == (89, 90, 83, 1)
    assert (sp["nv"], sp["nq"], sp["nu"], sp["ntree"]) == (43, 44, 37, 1)
    # longest DOF chain: root 6 + abdomen 3 + chest 3 (+ clavicle 2) + shoulder 3 + elbow/pronation 2
    # + wrist 2 (+ finger 4)
    assert mf["tree_depth"] == 6 + 3 + 3 + 2 + 3 + 2 + 2 + 4 == 25
    assert sp["tree_depth"] == 6 + 3 + 3 + 3 + 2 + 2 == 19
    assert mf["n_ellipsoid_muscles"] == 63
    assert mf["n_colliding_geoms"] == 63 + 1 + 1 + 2 + 4   # muscles, floor, head, hands, feet+toes
    assert (mf["nbody_without_world"], sp["nbody_without_world"]) == (51, 19)  # MuJoCo's nbody − world
    assert set(mf) == {"nv", "nq", "nu", "nbody_without_world", "ngeom", "ntree", "tree_depth",
                       "n_ellipsoid_muscles", "n_colliding_geoms", "mass_kg"}


def test_tree_depth_less_one_is_mujoco_warps_level_updates():
    """The sparse factor's sequential level updates (one launch each in MuJoCo Warp) are the
    tree depth less one: the root DOF has no parent to update."""
    import mujoco_warp as mjw

    m = build("muscular-fast")
    assert len(mjw.put_model(m).qLD_updates) == desc.describe(m)["tree_depth"] - 1 == 24


def test_recommend_slots():
    assert slots.recommend_slots(32, 260) == (48, 400)
    assert slots.recommend_slots(1, 1) == (16, 16)
    assert slots.recommend_slots(33, 320) == (64, 480)


def test_fallen_contacts_cpu():
    out = slots.fallen_contacts_cpu("simple", n=3, seconds=1.5, limp=True)
    assert out["ncon_max"] > 0 and out["nefc_max"] >= 4 * out["ncon_max"] - 1
    assert out["nconmax"] >= 1.5 * out["ncon_max"] and out["nconmax"] % 16 == 0
    assert out["njmax"] >= 1.5 * out["nefc_max"] and out["njmax"] % 16 == 0


def test_fallen_contacts_warp_cpu():
    pytest.importorskip("mujoco_warp")
    out = slots.fallen_contacts("muscular-fast", nworld=4, seconds=1.0, device="cpu")
    assert out["nworld"] == 4 and out["steps"] == 250
    assert 0 < out["ncon_max"] < 256 and 0 < out["nefc_max"] < 1024
    assert out["ncon_mean"] <= out["ncon_max"] and out["nefc_p99"] <= out["nefc_max"]
    assert out["nconmax"] % 16 == 0 and out["njmax"] >= 1.5 * out["nefc_max"]


def test_fallen_contacts_overflow_raises():
    pytest.importorskip("mujoco_warp")
    with pytest.raises(RuntimeError, match="overflow"):
        slots.fallen_contacts("simple", nworld=2, seconds=0.02, device="cpu", nconmax=4, njmax=8)
