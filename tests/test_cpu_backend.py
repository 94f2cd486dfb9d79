"""The CPU MuJoCo backend (fightlab.sim.cpu, issue 18) against MuJoCo Warp on warp's CPU device,
at tiny sizes: one env step from the same state and actions, resets and pushes, the contact
sensors, bad input, a short training."""

import numpy as np
import pytest
import torch

from fightlab.cli import main
from fightlab.envs.stance import StanceEnv

N = 4

#: float32 tolerances of one env step (5 substeps), CPU backend vs MuJoCo Warp: the C engine
#: steps in float64 within the control step, MuJoCo Warp in float32; the measured errors are
#: ~1e-6 (qpos) and ~3e-5 (qvel), the same order as MuJoCo Warp's own change under a 1-ulp
#: perturbation of the state (`_one_ulp_sensitivity`)
TOL = dict(qpos=2e-5, qvel=5e-4, obs=5e-4, reward=1e-5)


def _pair(body, seed=3, **kw):
    gpu = StanceEnv(body, N, "cpu", seed=seed, **kw)
    cpu = StanceEnv(body, N, "cpu", seed=seed, backend="cpu", threads=2, **kw)
    for e in (gpu, cpu):
        e.set_amplitude(0.5, immediate=True)
        e.reset()
    return gpu, cpu


def _actions(env, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(N, env.nu, generator=g) * 2 - 1 for _ in range(n)]


def _step_errors(gpu, cpu, action):
    og, rg, _, _ = gpu.step(action)
    og, rg = og.clone(), rg.clone()
    oc, rc, _, _ = cpu.step(action)
    sg, sc = gpu.state_dict(), cpu.state_dict()
    return dict(qpos=float(np.abs(sg["qpos"] - sc["qpos"]).max()),
                qvel=float(np.abs(sg["qvel"] - sc["qvel"]).max()),
                obs=float((og - oc).abs().max()), reward=float((rg - rc).abs().max()))


def _one_ulp_sensitivity(env, state, action):
    """MuJoCo Warp's own change after one env step when the state's qpos/qvel move by 1 ulp."""
    env.load_state_dict(state)
    env.step(action)
    a = env.state_dict()
    bumped = dict(state)
    bumped["qpos"] = np.nextafter(state["qpos"], np.float32(np.inf))
    bumped["qvel"] = np.nextafter(state["qvel"], np.float32(np.inf))
    env.load_state_dict(bumped)
    env.step(action)
    b = env.state_dict()
    return dict(qpos=float(np.abs(a["qpos"] - b["qpos"]).max()),
                qvel=float(np.abs(a["qvel"] - b["qvel"]).max()))


@pytest.mark.parametrize("body", ["simple", "muscular-fast"])
def test_same_state_one_env_step(body, capsys):
    """From the same state (20 env steps of random actions on MuJoCo Warp, loaded into the CPU
    backend) and the same action, one env step agrees within float32 tolerance."""
    gpu, cpu = _pair(body)
    acts = _actions(gpu, 21)
    for a in acts[:20]:
        gpu.step(a)
    state = gpu.state_dict()
    cpu.load_state_dict(state)
    err = _step_errors(gpu, cpu, acts[20])
    ulp = _one_ulp_sensitivity(gpu, state, acts[20])
    with capsys.disabled():
        print(f"\n{body}: CPU backend vs MuJoCo Warp, one env step: " +
              ", ".join(f"{k} {v:.2e}" for k, v in err.items()) +
              f"; MuJoCo Warp's own 1-ulp sensitivity: qpos {ulp['qpos']:.2e}, qvel {ulp['qvel']:.2e}")
    for k, tol in TOL.items():
        assert err[k] < tol, (k, err[k], tol)


def test_resets_and_pushes_match(tmp_path, monkeypatch):
    """Same seed → the same push schedule and resets on both backends; a world whose state goes
    non-finite is a NaN reset on both (the C engine's own reset is shown to the env as NaN)."""
    monkeypatch.chdir(tmp_path)
    gpu, cpu = _pair("simple", seed=11)
    for e in (gpu, cpu):
        e.read_summary()
    acts = _actions(gpu, 30, seed=1)
    for a in acts[:15]:
        gpu.step(a)
        cpu.step(a)
    sg, sc = gpu.state_dict(), cpu.state_dict()
    for k in ("push_next", "push_left", "push_force", "rng", "step_count", "amp"):
        np.testing.assert_array_equal(sg[k], sc[k], err_msg=k)
    assert (sg["push_left"] > 0).any() or (sg["rng"] > 1).any(), "no push drawn in 15 steps"
    # world 0 goes non-finite on both
    bad = cpu.state_dict()
    bad["qvel"][0, :] = np.nan
    for e in (gpu, cpu):
        e.load_state_dict(bad)
    for a in acts[15:18]:
        gpu.step(a)
        cpu.step(a)
    s_g, s_c = gpu.read_summary(), cpu.read_summary()
    assert s_g["nan_resets"] == s_c["nan_resets"] == 1, (s_g, s_c)
    sg, sc = gpu.state_dict(), cpu.state_dict()
    for k in ("push_next", "push_left", "rng", "step_count"):
        np.testing.assert_array_equal(sg[k], sc[k], err_msg=k)
    assert sg["step_count"][0] == sc["step_count"][0] == 2  # reset, then two more steps
    np.testing.assert_allclose(sg["qpos"], sc["qpos"], atol=1e-3)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()  # the C engine's warning: stderr only


def test_contact_sensors_see_the_contacts_that_count():
    """The backend's contact sensors flag exactly the watched geoms that are in MuJoCo's
    contact list, substep by substep, through a push-over."""
    import mujoco

    from fightlab import bodies
    from fightlab.sim import cpu

    m0 = bodies.build("simple")
    env = StanceEnv("simple", 1, "cpu", backend="cpu", threads=1)
    watch = env.geom_support == 0
    m, adr = cpu.with_contact_sensors(bodies.build_spec("simple"), watch)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    torso = m0.body("torso").id
    seen = 0
    for k in range(400):
        d.xfrc_applied[torso, 0] = 300.0 if k < 50 else 0.0
        mujoco.mj_step(m, d)
        listed = sorted({int(g) for pair in d.contact.geom for g in pair if watch[g]})
        sensed = sorted(int(g) for g in np.flatnonzero(watch)[d.sensordata[adr] > 0])
        assert listed == sensed, (k, listed, sensed)
        seen += bool(listed)
    assert seen > 50  # it fell and lay on the floor


def test_backend_errors():
    with pytest.raises(ValueError, match="backend must be one of gpu, cpu, got 'tpu'"):
        StanceEnv("simple", 2, "cpu", backend="tpu")


@pytest.mark.parametrize("args, expect", [
    (["train", "--backend", "fpga"], "backend must be one of gpu, cpu, got 'fpga'"),
    (["train", "--backend", "cpu", "--workers", "0"], "--workers must be a positive integer, got '0'"),
    (["train", "--backend", "cpu", "--workers", "-2"], "--workers must be a positive integer, got '-2'"),
    (["train", "--backend", "cpu", "--worlds-per-worker", "x"],
     "--worlds-per-worker must be a positive integer, got 'x'"),
    (["train", "--backend", "cpu", "--cpu-layout", "huge"],
     "--cpu-layout must be one of all-cores, original, got 'huge'"),
    (["train", "--workers", "2"], "need --backend cpu"),
    (["train", "--backend", "cpu", "--workers", "2", "--worlds-per-worker", "3", "--nworld", "8"],
     "--nworld 8 conflicts with --workers 2 × --worlds-per-worker 3 = 6"),
    (["train", "--set", "backend=cpu"], "'backend' has its own flag (--backend)"),
])
def test_cli_errors(args, expect, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_more_workers_than_cores_warns(capsys):
    from fightlab.sim import cpu

    cores = cpu.cpu_count()
    assert cpu.layout(cores + 3, 2, 0) == (cores + 3, 2, 2 * (cores + 3))
    err = capsys.readouterr().err
    assert err.startswith("fightlab: warning: ") and f"{cores + 3} workers on {cores} cores" in err
    assert cpu.layout(None, None, 10)[0] == cores  # the default: every core


def test_short_training_on_the_cpu_backend(tmp_path, capsys):
    """2 iterations at nworld 4 on the CPU backend, through the command line; the row's params
    record the backend, cores, threads and layout."""
    import csv
    import json

    rc = main(["train", "--backend", "cpu", "--workers", "2", "--worlds-per-worker", "2",
               "--body", "simple", "--max-iterations", "2", "--run-dir", str(tmp_path / "run"),
               "--no-progress", "--set", "ppo.num_steps=8", "--set", "ppo.num_minibatches=2"])
    assert rc == 0, capsys.readouterr().err
    rows = list(csv.DictReader(open(tmp_path / "run" / "rows.csv")))
    assert len(rows) == 2
    res = list((tmp_path / "run").glob("*result*.csv")) or list((tmp_path / "run").rglob("train.csv"))
    assert res, list((tmp_path / "run").iterdir())
    row = list(csv.DictReader(open(res[0])))[-1]
    params = json.loads(row["params"])
    assert params["backend"] == "cpu" and params["workers"] == 2 and params["worlds_per_worker"] == 2
    seg = params["segments"][-1]
    assert seg["backend"] == "cpu" and seg["threads"] == 2 and seg["layout"] == "2x2" and seg["cores"] >= 1
    assert seg["cpu"]


@pytest.mark.parametrize("mask", [[True, False, True, False], [False] * N])
def test_cpu_reset_is_reset_data(mask):
    """`CpuPhysics.reset` (the CPU backend's masked reset: only the fields it uses, nothing when
    no world is done) leaves the same state as `mujoco_warp.reset_data`, bitwise, and the next
    C-engine step from it is bitwise the same."""
    import mujoco_warp as mjw
    import warp as wp

    from fightlab import bodies
    from fightlab.sim import cpu, physics

    env = StanceEnv("simple", N, "cpu")  # for its model and geom_support (MuJoCo Warp backend)
    mjm = env.mjm
    backend = cpu.CpuPhysics(bodies.build_spec("simple"), mjm, N, env.geom_support == 0, 2)
    fields = ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "qfrc_applied", "xfrc_applied",
              "time", "xmat", "overflow")
    rng = np.random.default_rng(0)
    datas = []
    for _ in range(2):
        m, d = physics.put(mjm, N, env.slots, "cpu")
        datas.append(d)
    d_ref, d_cpu = datas
    mujoco_start = {}
    for k in fields:
        a = getattr(d_ref, k).numpy()
        mujoco_start[k] = (rng.integers(0, 4, a.shape) if a.dtype.kind == "i"
                           else rng.normal(size=a.shape) * 0.01).astype(a.dtype)
    mujoco_start["qpos"] += np.asarray(mjm.qpos0, np.float32)
    mujoco_start["overflow"][:] = 0
    for d in datas:
        for k, v in mujoco_start.items():
            getattr(d, k).assign(v)
    with wp.ScopedDevice("cpu"):
        reset = wp.array(np.array(mask), dtype=bool)
        mjw.reset_data(m, d_ref, reset)
        backend.reset(d_cpu, reset)
    for k in fields:
        np.testing.assert_array_equal(getattr(d_ref, k).numpy(), getattr(d_cpu, k).numpy(), err_msg=k)
    outs = []
    for d in datas:
        backend.step(d, 5)
        outs.append({k: getattr(d, k).numpy().copy() for k in fields})
    for k in fields:
        np.testing.assert_array_equal(outs[0][k], outs[1][k], err_msg=k)
