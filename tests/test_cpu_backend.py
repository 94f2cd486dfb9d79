"""The CPU MuJoCo backend (fightlab.sim.cpu) against MuJoCo Warp on warp's CPU device,
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
#: perturbation of the state (`fightlab.measure.backends.same_state_error`)
TOL = dict(qpos=2e-5, qvel=5e-4, obs=5e-4, reward=1e-5)


def _pair(body, seed=3, **kw):
    """The same env on both backends, in the reference physics (a converged Newton solve both
    engines have; the C engine always computes qacc_smooth), as `measure.backends` compares them."""
    from fightlab.config import EnvConfig, reference_env

    kw.setdefault("cfg", reference_env(EnvConfig()))
    gpu = StanceEnv(body, N, "cpu", seed=seed, **kw)
    cpu = StanceEnv(body, N, "cpu", seed=seed, backend="cpu", threads=2, **kw)
    for e in (gpu, cpu):
        e.set_amplitude(0.5, immediate=True)
        e.reset()
    return gpu, cpu


def _actions(env, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(N, env.nu, generator=g) * 2 - 1 for _ in range(n)]


@pytest.mark.parametrize("body", ["simple", "muscular-fast"])
def test_same_state_one_env_step(body):
    """From the same state (20 env steps of random actions on MuJoCo Warp, loaded into the CPU
    backend) and the same action, one env step agrees within float32 tolerance
    (`fightlab.measure.backends.same_state_error`, what compare-backends reports)."""
    from fightlab.measure.backends import same_state_error

    err = same_state_error(body, "cpu", nworld=N, threads=2)
    said = (f"{body}: CPU backend vs MuJoCo Warp, one env step: " + ", ".join(f"{k} {err[k]:.2e}" for k in TOL)
            + f"; MuJoCo Warp's own 1-ulp sensitivity: qpos {err['ulp_qpos']:.2e}, qvel {err['ulp_qvel']:.2e}")
    print(said)  # captured: shown with a failure (or `pytest -rP`), not between the dots
    for k, tol in TOL.items():
        assert err[k] < tol, f"{k} {err[k]:.2e} >= {tol:.0e}; {said}"


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
    assert cpu.layout(cores + 3, 2) == (cores + 3, 2, 2 * (cores + 3))
    err = capsys.readouterr().err
    assert err.startswith("fightlab: warning: ") and f"{cores + 3} workers on {cores} cores" in err
    assert cpu.layout(None, None, 10)[0] == cores  # the default: every core


def test_short_training_on_the_cpu_backend(tmp_path, capsys):
    """2 iterations at nworld 4 on the CPU backend, through the command line; the row's params
    record the backend, cores, threads and layout, its gpu column the CPU model and cores. Then
    a resume with another --backend is one clear line, and a resume to 3 iterations continues
    on the CPU backend (its device default: the CPU, whatever GPU the machine has)."""
    import csv
    import json

    from fightlab import meta

    rc = main(["train", "--backend", "cpu", "--workers", "2", "--worlds-per-worker", "2",
               "--body", "simple", "--max-iterations", "2", "--run-dir", str(tmp_path / "run"),
               "--checkpoint-every", "1",
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
    assert seg["backend"] == "cpu" and seg["threads"] == 2 and seg["layout"] == dict(workers=2, nworld=4, worlds_per_worker_max=2) and seg["cores"] >= 1
    assert seg["cpu"] and seg["physics"] == "MuJoCo's C engine"
    assert row["gpu"] == meta.cpu_label(seg["cores"]) and row["driver"] == ""
    ck = str(tmp_path / "run" / "latest.pt")
    capsys.readouterr()
    for args, said in ((["--backend", "gpu"], "--backend gpu conflicts with the checkpoint (backend=cpu)"),
                       (["--workers", "3"], "--workers 3 conflicts with the checkpoint (2)"),
                       (["--backend", "fpga"], "backend must be one of gpu, cpu, got 'fpga'")):
        assert main(["train", "--resume", ck, "--max-iterations", "3", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fightlab: error: ") and said in err, err
        assert len(err.strip().splitlines()) == 1, err
    assert main(["train", "--resume", ck, "--max-iterations", "3", "--no-progress"]) == 0, capsys.readouterr().err
    rows = list(csv.DictReader(open(tmp_path / "run" / "rows.csv")))
    assert [int(r["iteration"]) for r in rows][-1] == 3 and len(rows) == 3
    row = list(csv.DictReader(open(res[0])))[-1]
    segs = json.loads(row["params"])["segments"]
    assert len(segs) == 2 and all(x["backend"] == "cpu" for x in segs) and int(row["iterations"]) == 3


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


# --- compare-backends (fightlab.measure.backends) ----------------------------------------------

def _fake_point(body, nworld, device, iterations, skip, seed, run_dir, progress, base, **kw):
    """A timing of `measure.sweep.time_point`'s shape, without training (CPU backend 2× slower;
    with its policy on another device its update 4× faster)."""
    s = 2.0 if kw.get("backend") == "cpu" else 1.0
    upd = s / 8 if kw.get("policy_device") else s / 2
    s = s / 2 + upd
    return dict(s_per_iter=s, s_per_iter_min=s, s_per_iter_max=s, rollout_s_per_iter=s - upd,
                update_s_per_iter=upd, env_steps_per_s=nworld * 4 / s, host_reads_per_iter=1.0,
                graph_fallbacks=0, iterations=iterations - skip, num_steps=4, compile_s=0.1,
                learner="fake")


def test_compare_backends_rows(tmp_path):
    """A real comparison at tiny size: CPU backend vs MuJoCo Warp on warp's CPU device; rows
    name the CPU (gpu column for the CPU backend, params on both), ratios, same-state errors."""
    import json

    from fightlab import meta, results
    from fightlab.config import PPOConfig, TrainConfig
    from fightlab.measure import backends

    base = TrainConfig(ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1))
    lines = []
    rows = backends.compare(["simple"], "cpu", nworld=4, cpu_layout=(2, 2, 4), iterations=2, skip=1,
                            out_dir=tmp_path / "cmp", root=tmp_path, base=base, log=lines.append)
    assert list(rows.columns) == list(results.columns("backends")) and len(rows) == 2
    cpu_row, warp_row = rows.iloc[0], rows.iloc[1]
    pc, pw = json.loads(cpu_row["params"]), json.loads(warp_row["params"])
    assert pc["backend"] == "cpu" and pw["backend"] == "gpu" and pw["smoke"] is True
    assert cpu_row["gpu"] == meta.cpu_label() and meta.is_cpu_label(cpu_row["gpu"]) and cpu_row["driver"] == ""
    assert warp_row["gpu"] == "cpu"
    for p in (pc, pw):
        assert p["cpu"] == meta.cpu_model() and p["cores"] == meta.cpu_count()
    assert pc["layout"] == {"workers": 2, "nworld": 4, "worlds_per_worker_max": 2} and pc["workers"] == 2
    assert cpu_row["env_steps_ratio_vs_cpu_backend"] == 1.0 == cpu_row["s_per_iter_ratio_vs_cpu_backend"]
    assert warp_row["env_steps_ratio_vs_cpu_backend"] == pytest.approx(
        warp_row["env_steps_per_s"] / cpu_row["env_steps_per_s"])
    assert cpu_row["physics_steps_per_s"] == pytest.approx(cpu_row["env_steps_per_s"] * 5)
    for k, col in (("qpos", "same_state_qpos_err"), ("qvel", "same_state_qvel_err"),
                   ("obs", "same_state_obs_err"), ("reward", "same_state_reward_err")):
        assert 0 <= cpu_row[col] < TOL[k], (col, cpu_row[col])
    assert len(results.read_rows("backends", tmp_path / "cmp")) == 2
    assert any("same state" in ln for ln in lines)
    assert "ratio" in backends.summary_lines(rows)[0]


def test_compare_backends_cli_without_a_gpu(tmp_path, monkeypatch, capsys):
    """No GPU: one line says so and only the CPU backend is measured (every core by default)."""
    from fightlab import devices, meta
    from fightlab.measure import backends, sweep

    monkeypatch.setattr(devices, "default_device", lambda: "cpu")
    monkeypatch.setattr(sweep, "time_point", _fake_point)
    monkeypatch.setattr(backends, "ROOT", tmp_path)
    assert main(["compare-backends", "--body", "simple", "--nworld", "8", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.count("no CUDA GPU here: measuring the CPU backend only") == 1
    assert "CPU backend only" in out.splitlines()[-1] and meta.cpu_label() in out
    (folder,) = tmp_path.iterdir()
    rows = pd_read(folder)
    assert len(rows) == 1 and rows["nworld"][0] == 8


def test_compare_backends_with_the_policy_on_another_device(tmp_path, monkeypatch, capsys):
    """`--cpu-policy-device` adds the CPU backend with its policy elsewhere (here the CPU itself:
    the same copies); the ratios still divide by the CPU-policy row, `policy_device_effect` sets
    the two side by side, the estimate of the CPU backend's time to solve ignores it, and a bad
    device is one line."""
    import json

    from fightlab.config import ConfigError
    from fightlab.measure import backends, sweep

    monkeypatch.setattr(sweep, "time_point", _fake_point)
    monkeypatch.setattr(backends, "ROOT", tmp_path)
    assert main(["compare-backends", "--body", "simple", "--nworld", "8", "--gpu-device", "cpu",
                 "--cpu-policy-device", "cpu", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("simple: CPU backend with its policy on cpu:") and "1.60x env steps/s" in out, out
    (folder,) = tmp_path.iterdir()
    rows = pd_read(folder)
    ps = [json.loads(p) for p in rows["params"]]
    assert [(p["backend"], p["policy_device"]) for p in ps] == [("cpu", None), ("cpu", "cpu"), ("gpu", None)]
    assert rows["env_steps_ratio_vs_cpu_backend"].tolist() == pytest.approx([1.0, 2.0 / 1.25, 2.0])
    eff = backends.policy_device_effect(rows)
    assert len(eff) == 1 and eff["policy_device"][0] == "cpu" and eff["policy_gpu"][0] == "cpu"
    assert eff["cpu_policy_update_s"][0] == 1.0 and eff["gpu_policy_update_s"][0] == 0.25
    assert eff["env_steps_ratio"][0] == pytest.approx(2.0 / 1.25)
    ratios = backends.backend_ratios(rows)  # one MuJoCo Warp line, over the CPU-policy row
    assert len(ratios) == 1 and ratios["cpu_s_per_iter"][0] == 2.0
    assert backends.policy_device_effect(rows[[not p["policy_device"] for p in ps]]).empty
    with pytest.raises(ConfigError, match="need column\\(s\\) update_s_per_iter"):
        backends.policy_device_effect(rows.drop(columns=["update_s_per_iter"]))
    # "auto" (the default) adds the point only beside a CUDA MuJoCo Warp device
    assert [p["policy_device"] for p in backends.plan(["simple"], "cuda:0", 8, (2, None, 8), "cuda:0")] \
        == [None, "cuda:0", None]
    assert main(["compare-backends", "--body", "simple", "--nworld", "8", "--gpu-device", "cpu",
                 "--cpu-policy-device", "tpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: --cpu-policy-device 'tpu': device must be") and \
        "(choices: auto, none, cpu, cuda, cuda:N)" in err and len(err.strip().splitlines()) == 1, err
    # the policy on the CPU through the copies is a check of that path: it never publishes
    assert main(["compare-backends", "--body", "simple", "--nworld", "8", "--cpu-policy-device", "cpu",
                 "--publish", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "policy device 'cpu' is not a GPU" in err and len(err.strip().splitlines()) == 1, err


def pd_read(folder):
    from fightlab import results

    return results.read_rows("backends", folder)


@pytest.mark.parametrize("args, expect", [
    (["--gpu-device", "cpu", "--publish"], "MuJoCo Warp on warp's CPU device) under data/"),
    (["--body", "robot"], "unknown body 'robot'; valid bodies: muscular-fast, simple"),
    (["--nworld", "0"], "--nworld must be a positive integer, got '0'"),
    (["--workers", "0"], "--workers must be a positive integer, got '0'"),
    (["--cpu-nworld", "8", "--workers", "2", "--worlds-per-worker", "3"],
     "--cpu-nworld 8 conflicts with --workers 2 × --worlds-per-worker 3 = 6"),
    (["--cpu-layout", "huge"], "--cpu-layout must be one of all-cores, original, got 'huge'"),
    (["--iterations", "2", "--skip", "2"], "iterations must exceed skip"),
    (["--set", "backend=cpu"], "'backend' has its own flag"),
    (["--gpu-device", "cuda:7"], "cuda:7"),
])
def test_compare_backends_errors(args, expect, capsys):
    assert main(["compare-backends", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


# --- publishing the CPU backend --------------------------------------------------------------

def test_publish_rule_cpu_backend():
    """The C engine's CPU backend publishes at full size; MuJoCo Warp on warp's CPU never."""
    from fightlab.config import ConfigError
    from fightlab.publish import check_publish

    check_publish(True, "cpu", "rows", backend="cpu")
    with pytest.raises(ConfigError, match="warp's CPU device is a smoke check"):
        check_publish(True, "cpu", "rows")
    with pytest.raises(ConfigError, match="size 'smoke'"):
        check_publish(True, "cpu", "rows", size="smoke", backend="cpu")
    with pytest.raises(ConfigError, match="backend must be one of gpu, cpu"):
        check_publish(True, "cpu", "rows", backend="tpu")


def test_cpu_backend_rows_reach_the_repositorys_data_naming_the_cpu(tmp_path, monkeypatch):
    """A CPU-backend row (its gpu column the CPU model and cores) may enter the repository's
    data/; one that does not name its CPU, or a row of MuJoCo Warp on warp's CPU, may not. The
    repository is a temporary folder here (the rule reads results.REPO_ROOT): the suite never
    writes the real data/."""
    import json

    from fightlab import meta, results
    from fightlab.config import ConfigError

    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    REPO_ROOT = tmp_path
    name = "zz_test_cpu_guard"
    results.register_experiment(name, ("x_s",))
    path = results.results_path(name, REPO_ROOT)
    assert not path.exists()
    try:
        warp_cpu = results.run_metadata(body="simple", nworld=2, seed=0, params={"backend": "gpu"}, device="cpu")
        with pytest.raises(ConfigError, match="not a GPU"):
            results.append_row(name, {**warp_cpu, "x_s": 1.0}, REPO_ROOT)
        row = results.run_metadata(body="simple", nworld=2, seed=0, params={"backend": "cpu"},
                                   device="cpu", backend="cpu", cores=16)
        assert row["gpu"] == f"CPU {meta.cpu_model()} (16 cores)" and row["driver"] == ""
        unnamed = {**row, "gpu": "cpu", "x_s": 1.0}
        with pytest.raises(ConfigError, match="must name its CPU and cores"):
            results.append_row(name, unnamed, REPO_ROOT)
        assert not path.exists()
        results.append_row(name, {**row, "x_s": 1.0}, REPO_ROOT)
        assert json.loads(results.read_rows(name, REPO_ROOT)["params"][0])["backend"] == "cpu"
    finally:
        path.unlink(missing_ok=True)
        results.EXPERIMENTS.pop(name, None)


def test_train_publish_refusal_names_the_backends(capsys):
    assert main(["train", "--device", "cpu", "--publish"]) == 2
    err = capsys.readouterr().err
    assert "warp's CPU device is a smoke check" in err and "--backend cpu" in err
    assert len(err.strip().splitlines()) == 1


# --- review fixes: layout flags, the recorded layout, option copy, check order, names --------

@pytest.mark.parametrize("args, expect", [
    (["train", "--backend", "cpu", "--cpu-layout", "original", "--nworld", "4"],
     "--cpu-layout original is 72 workers × 6 worlds = 432 worlds; --nworld 4 conflicts"),
    (["train", "--backend", "cpu", "--cpu-layout", "original", "--workers", "4"],
     "--cpu-layout original is 72 workers × 6 worlds = 432 worlds; --workers conflicts"),
    (["train", "--backend", "cpu", "--cpu-layout", "all-cores", "--workers", "4"],
     "workers (every core); --workers 4 conflicts"),
    (["train", "--backend", "cpu", "--device", "cuda:0"], "--backend cpu needs --device cpu"),
    (["train", "--backend", "mujoco", "--device", "cuda"], "--backend cpu needs --device cpu"),
    (["train", "--backend", "cpu", "--cpu-layout", "original", "--device", "cuda:7"],
     "--backend cpu needs --device cpu"),
])
def test_cli_layout_and_device_errors(args, expect, capsys):
    """Messages name the flags the user typed; the backend/device pairing is checked before the
    device exists (no "no CUDA GPU" for a cpu-backend run given a CUDA device)."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err
    assert "no CUDA" not in err and "--worlds-per-worker 6" not in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args, nworld, workers, k", [
    (["--workers", "3", "--nworld", "5"], 5, 3, None),
    (["--workers", "3", "--nworld", "6"], 6, 3, 2),
    (["--cpu-layout", "original"], 432, 72, 6),
    (["--cpu-layout", "all-cores", "--worlds-per-worker", "2"], "2cores", "cores", 2),
])
def test_cli_layout_split(args, nworld, workers, k, monkeypatch):
    """train keeps the nworld asked for; K only where W divides it (the config it would train)."""
    from fightlab import meta

    seen = {}

    class Stop(Exception):
        pass

    def fake(plan, progress=True, **kw):
        seen["cfg"] = plan.cfg  # the gate's plan (run.launch.plan_run)
        raise Stop

    monkeypatch.setattr("fightlab.run.runner.Trainer", fake)
    with pytest.raises(Stop):
        main(["train", "--backend", "cpu", *args])
    cores = meta.cpu_count()
    cfg = seen["cfg"]
    assert cfg.nworld == (2 * cores if nworld == "2cores" else nworld)
    assert cfg.workers == (cores if workers == "cores" else workers) and cfg.worlds_per_worker == k
    assert cfg.backend == "cpu" and cfg.device == "cpu"


def test_recorded_layout_is_the_real_split():
    """workers 3, nworld 5: the row says 5 worlds (at most 2 per worker), never 3x2 = 6."""
    from types import SimpleNamespace

    from fightlab.sim import cpu

    rec = cpu.backend_record(SimpleNamespace(backend="cpu", threads=3, nworld=5, device="cpu"))
    assert rec["layout"] == dict(workers=3, nworld=5, worlds_per_worker_max=2)
    assert rec["backend"] == "cpu" and rec["threads"] == 3 and rec["physics"] == "MuJoCo's C engine"
    rec = cpu.backend_record(SimpleNamespace(backend="gpu", nworld=5, device="cpu"))
    assert rec["physics"] == "MuJoCo Warp on cpu" and "layout" not in rec


def test_layout_checks_nworld():
    from fightlab.config import ConfigError
    from fightlab.sim import cpu

    assert cpu.layout(3, None, 5) == (3, 2, 5)
    assert cpu.layout(3, 2, 6) == (3, 2, 6)
    with pytest.raises(ConfigError, match=r"nworld 7 is not workers × worlds_per_worker \(3 × 2 = 6\)"):
        cpu.layout(3, 2, 7)
    with pytest.raises(ConfigError, match="nworld must be a positive integer, got 0"):
        cpu.layout(3, None, 0)


def test_copy_options_is_explicit_and_checked(monkeypatch):
    """Every MjOption field is copied or listed as skipped; a field that does not copy is an
    error naming it, never a silent pass."""
    import mujoco

    from fightlab.sim import cpu

    src = mujoco.MjModel.from_xml_string("<mujoco><option timestep='0.003' iterations='7' "
                                         "gravity='0 0 -3'/></mujoco>")
    dst = mujoco.MjModel.from_xml_string("<mujoco/>")
    public = {n for n in dir(src.opt) if not n.startswith("_") and not callable(getattr(src.opt, n))}
    assert public == set(cpu.OPTION_FIELDS) | set(cpu.OPTION_SKIPPED)
    cpu.copy_options(src, dst)
    assert dst.opt.timestep == 0.003 and dst.opt.iterations == 7 and list(dst.opt.gravity) == [0, 0, -3]
    monkeypatch.setattr(cpu, "OPTION_FIELDS", tuple(f for f in cpu.OPTION_FIELDS if f != "impratio"))
    with pytest.raises(RuntimeError, match="impratio neither copied"):
        cpu.copy_options(src, dst)


def test_copy_options_names_a_field_that_did_not_copy(monkeypatch):
    import mujoco

    from fightlab.sim import cpu

    src = mujoco.MjModel.from_xml_string("<mujoco><option timestep='0.003'/></mujoco>")
    dst = mujoco.MjModel.from_xml_string("<mujoco/>")
    real = np.array_equal
    monkeypatch.setattr(cpu.np, "array_equal",
                        lambda a, b: False if float(np.asarray(a).ravel()[0]) == 0.003 else real(a, b))
    with pytest.raises(RuntimeError, match=r"MjOption.timestep did not copy"):
        cpu.copy_options(src, dst)


def test_policy_device_copies_train_the_same(tmp_path):
    """`TrainConfig.policy_device` (the CPU backend's policy on another device: on a GPU machine a
    GPU) goes through `PolicyIO`'s copies at every env step. With policy_device "cpu" the copies
    are the only difference, so the run is bitwise the run without it: same losses, rewards,
    curriculum and env state; its segments name the policy device, its row's params keep it
    (config_id apart) while a run without one keeps the params it had before the field."""
    import dataclasses
    import json

    from fightlab.config import PPOConfig, TrainConfig
    from fightlab.measure.report import config_id, train_row
    from fightlab.run.runner import PolicyIO, Trainer

    base = TrainConfig(body="simple", nworld=4, backend="cpu", workers=2, device="cpu", seed=5,
                       max_iterations=3, checkpoint_every=0, stop_when_solved=False,
                       ppo=PPOConfig(num_steps=8, num_minibatches=2, update_epochs=1))
    out = {}
    for name, pd in (("direct", None), ("copied", "cpu")):
        cfg = dataclasses.replace(base, run_dir=str(tmp_path / name), policy_device=pd)
        with Trainer(cfg, progress=False) as tr:
            res = tr.train()
            assert (tr.io is tr.env) == (pd is None) and tr.policy_device == "cpu"
            if pd:
                assert isinstance(tr.io, PolicyIO) and tr.io.obs.data_ptr() != tr.env.obs.data_ptr()
                assert torch.equal(tr.io.obs, tr.env.obs)  # pulled after the last step
                assert tr.segments[-1]["policy_device"] == "cpu" and tr.segments[-1]["policy_gpu"] == "cpu"
            else:
                assert "policy_device" not in tr.segments[-1]
            state = tr.env.state_dict()
            out[name] = (res, state, train_row(tr, res))
    (ra, sa, rowa), (rb, sb, rowb) = out["direct"], out["copied"]
    keys = ["reward", "policy_loss", "value_loss", "approx_kl", "learning_rate", "stage", "episodes"]
    assert len(ra["rows"]) == len(rb["rows"]) == 3 and all(k in ra["rows"][0] for k in keys)
    for a, b in zip(ra["rows"], rb["rows"]):
        assert all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in keys if k in a), (a, b)
    for k in sa:
        assert np.array_equal(sa[k], sb[k]), k
    pa, pb = json.loads(rowa["params"]), json.loads(rowb["params"])
    assert "policy_device" not in pa and pb["policy_device"] == "cpu" and pb["policy_gpu"] == "cpu"
    assert config_id(pa) != config_id(pb)


def test_a_gpu_policy_checkpoint_opens_on_a_machine_without_that_gpu(tmp_path, capsys):
    """A checkpoint whose run had its policy on a GPU (here: a CPU run's config set to cuda:3)
    passes the file check anywhere (it is not damaged); evaluate runs it on the CPU; a resume
    says in one line that the policy device is not here; a resume of a policy-on-CPU check
    refuses --publish before any training."""
    rd = tmp_path / "run"
    assert main(["train", "--backend", "cpu", "--policy-device", "cpu", "--workers", "2", "--nworld", "4",
                 "--max-iterations", "2", "--run-dir", str(rd), "--no-progress",
                 "--set", "ppo.num_steps=8", "--set", "ppo.num_minibatches=2"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(rd / "latest.pt"), "--max-iterations", "3", "--publish"]) == 2
    err = capsys.readouterr().err
    assert "policy device 'cpu' is not a GPU" in err and len(err.strip().splitlines()) == 1, err
    ck = torch.load(rd / "latest.pt", weights_only=False)
    ck["config"]["policy_device"] = "cuda:3"
    torch.save(ck, tmp_path / "gpu.pt")
    from fightlab.run.checkpoint import load_checkpoint

    assert load_checkpoint(str(tmp_path / "gpu.pt"))["config"]["policy_device"] == "cuda:3"
    assert main(["evaluate", str(tmp_path / "gpu.pt"), "--nworld", "4", "--device", "cpu", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "gpu.pt"), "--max-iterations", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: policy_device: device 'cuda:3'") and "damaged" not in err, err
    assert len(err.strip().splitlines()) == 1 and "--device cpu" not in err, err
    ck["config"]["policy_device"] = "tpu"  # a value no fightlab writes: that is damage
    torch.save(ck, tmp_path / "bad.pt")
    assert main(["train", "--resume", str(tmp_path / "bad.pt"), "--max-iterations", "3"]) == 2
    assert "is damaged or hand-edited" in capsys.readouterr().err


@pytest.mark.parametrize("args, expect", [
    (["train", "--policy-device", "cpu"], "policy_device 'cpu' is the CPU backend's option"),
    (["train", "--backend", "cpu", "--policy-device", "cpu", "--publish"], "policy device 'cpu' is not a GPU"),
    (["train", "--backend", "cpu", "--policy-device", "tpu:0"],
     "policy_device: device must be 'cpu', 'cuda' or 'cuda:N', got 'tpu:0'"),
    (["train", "--backend", "cpu", "--policy-device", "cuda:9"], "policy_device: device 'cuda:9'"),
    (["train", "--backend", "cpu", "--set", "policy_device=cpu"], "'policy_device' has its own flag"),
])
def test_policy_device_errors(args, expect, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
