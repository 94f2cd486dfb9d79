"""Training physics vs reference physics: the solver fields, the reference check that ends a
solve, and its verdict gating the headline, Figure 2's iterations and the survey."""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest

from fightlab import results
from fightlab.cli import main
from fightlab.config import (REFERENCE_SOLVER, ConfigError, EnvConfig, PPOConfig, TrainConfig, reference_env,
                             task_id, validate_env)
from fightlab.measure import report

#: a custom task that solves at its first check: one stage, a one-iteration wait, 0.1 s episodes
#: and thresholds any policy meets, so the reference check runs at the end of a tiny training
SOLVES = ["--device", "cpu", "--nworld", "4", "--no-progress", "--max-iterations", "4",
          "--set", "curriculum_stages=[1.0]", "--set", "curriculum_wait=1", "--set", "max_fall_rate=1.0",
          "--set", "min_tracking=0.0", "--set", "min_episode_s=0.0", "--set", "env.episode_s=0.1",
          "--set", "ppo.num_steps=8", "--set", "reference_nworld=4"]


def test_the_solver_fields_reach_mujoco_warps_model():
    from fightlab.envs.stance import StanceEnv

    cfg = EnvConfig(solver_iterations=3, solver_ls_iterations=5, solver_tolerance=1e-6, solver_ls_tolerance=0.02)
    env = StanceEnv("simple", 2, "cpu", cfg=cfg, graph=False)
    assert (env.mjm.opt.iterations, env.mjm.opt.ls_iterations) == (3, 5)
    assert (env.m.opt.iterations, env.m.opt.ls_iterations) == (3, 5)  # MuJoCo Warp's Model
    assert env.m.opt.tolerance.numpy()[0] == pytest.approx(1e-6)
    assert env.m.opt.ls_tolerance.numpy()[0] == pytest.approx(0.02)
    ref = StanceEnv("simple", 2, "cpu", cfg=reference_env(cfg), graph=False)
    assert (ref.m.opt.iterations, ref.m.opt.ls_iterations) == (10, 20)
    assert reference_env(cfg, timestep=0.002).timestep == 0.002


@pytest.mark.parametrize("item, expect", [
    ("env.solver_iterations=0", "EnvConfig.solver_iterations must be an integer in [1, 1000], got 0"),
    ("env.solver_iterations=2.5", "EnvConfig.solver_iterations must be an integer, got '2.5'"),
    ("env.solver_ls_iterations=-1", "EnvConfig.solver_ls_iterations must be an integer in [1, 1000], got -1"),
    ("env.solver_tolerance=0", "EnvConfig.solver_tolerance must be a number in (0, 1], got 0.0"),
    ("env.solver_ls_tolerance=-0.1", "EnvConfig.solver_ls_tolerance must be a number in (0, 1], got -0.1"),
    ("env.solver_tolerance=nan", "EnvConfig.solver_tolerance must be a finite number"),
    ("reference_nworld=0", "reference_nworld must be an integer in [1,"),
])
def test_bad_solver_fields_are_one_line(item, expect, capsys):
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", item]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err and len(err.strip().splitlines()) == 1, err


def test_validate_env_refuses_a_bool_iteration_count():
    with pytest.raises(ConfigError, match="solver_iterations must be an integer"):
        validate_env(EnvConfig(solver_iterations=True))


def test_num_steps_is_a_fixed_field_of_the_task(capsys):
    cfg = TrainConfig(ppo=PPOConfig(num_steps=16))
    assert task_id(cfg).startswith("custom-") and task_id(TrainConfig()) == "default"
    assert report.task_of({"ppo": {"num_steps": 16}}) == task_id(cfg)
    assert report.task_of({"ppo": {"num_steps": 32}}) == "default"


def test_the_solver_fields_are_recorded_and_split_configs_but_old_rows_keep_their_ids():
    from fightlab.config import to_dict

    new = to_dict(TrainConfig(env=EnvConfig(**REFERENCE_SOLVER)))
    old = json.loads(json.dumps(new))
    for k in REFERENCE_SOLVER:
        old["env"].pop(k)
    assert report.config_id(new) == report.config_id(old)  # the reference values are implied
    assert report.learner_id(new) == report.learner_id(old)
    cheap = to_dict(TrainConfig(env=EnvConfig(solver_iterations=3, solver_ls_iterations=5)))
    assert report.config_id(cheap) != report.config_id(new)
    assert report.learner_id(cheap) != report.learner_id(new)
    assert ("env.solver_iterations", 3) in report.learner_diff(cheap)
    # a row from before the fields ran the reference solver: it differs from today's defaults there
    today = EnvConfig()
    if (today.solver_iterations, today.solver_ls_iterations) != (10, 20):
        assert ("env.solver_iterations", 10) in report.learner_diff(old)


def test_reward_terms_weighted_in_code_split_the_learner():
    from fightlab.config import to_dict

    p = to_dict(TrainConfig())
    assert report.learner_id({**p, "reward_terms": {"feet": 0.5}}) != report.learner_id(p)


def test_a_solve_ends_with_the_reference_check_in_its_row(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *SOLVES, "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "reference check (4 worlds, Newton 10/20): dt fall" in out and "; passed [" in out, out
    row = results.read_rows("train", run).iloc[0]
    assert row["solved"] == True and row["reference_passed"] == True  # noqa: E712
    assert row["reference_eval_s"] > 0 and math.isfinite(row["time_to_solve_s"])
    assert 0 <= row["reference_fall_rate_dt"] <= 1 and 0 <= row["reference_tracking_half_dt"] <= 1
    ref = json.loads(row["params"])["reference_eval"]
    assert ref["passed"] and ref["nworld"] == 4 and ref["solver"] == REFERENCE_SOLVER
    assert ref["dt"]["timestep"] == pytest.approx(0.004) and ref["dt/2"]["timestep"] == pytest.approx(0.002)
    assert ref["dt"]["episodes"] >= 4 and ref["curriculum_iterations"] == row["iterations"]
    # the same check on the saved policy from the command line: exit 0 when it passes
    assert main(["evaluate", str(run / "latest.pt"), "--reference-check", "--nworld", "4", "--device", "cpu",
                 "--no-progress"]) == 0
    assert "reference check: passed" in capsys.readouterr().out


def test_a_failing_check_is_reported_unsolved_with_its_reason(tmp_path, monkeypatch, capsys):
    from fightlab.envs import task

    real = task.evaluate_policy

    def falls_at_half_dt(make_policy, body, env_cfg, *a, **k):
        r = real(make_policy, body, env_cfg, *a, **k)
        return dict(r, fall_rate=0.5) if env_cfg.timestep < 0.004 else r

    monkeypatch.setattr(task, "evaluate_policy", falls_at_half_dt)
    run = tmp_path / "run"
    assert main(["train", *SOLVES, "--set", "max_fall_rate=0.2", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "FAILED (dt/2: fall rate 0.500 > 0.2): not a solve of the task" in out, out
    assert "solved=False" in out and "reference=failed" in out
    row = results.read_rows("train", run).iloc[0]
    assert row["solved"] == False and row["reference_passed"] == False  # noqa: E712
    assert math.isnan(row["time_to_solve_s"])
    ref = json.loads(row["params"])["reference_eval"]
    assert ref["reason"] == "dt/2: fall rate 0.500 > 0.2" and ref["curriculum_time_to_solve_s"] > 0
    assert main(["evaluate", str(run / "latest.pt"), "--reference-check", "--nworld", "4", "--device", "cpu",
                 "--no-progress"]) == 1


@pytest.mark.parametrize("args, expect", [
    (["--reference-check", "--body", "muscular-fast"], "--body muscular-fast conflicts with the checkpoint's body (simple)"),
    (["--reference-check", "--timestep", "0.002"], "--timestep conflicts"),
    (["--reference-check", "--physics", "training"], "--physics conflicts"),
    (["--physics", "cheap"], "--physics must be one of training, reference, got 'cheap'"),
])
def test_reference_check_bad_input_is_one_line(args, expect, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--max-iterations", "1",
                 "--set", "ppo.num_steps=4", "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run / "latest.pt"), "--device", "cpu", "--no-progress", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err and len(err.strip().splitlines()) == 1, err


def test_publish_needs_a_full_size_reference_check():
    from fightlab.publish import training_size_problem

    assert training_size_problem(TrainConfig(reference_nworld=4)).startswith("reference_nworld 4 is below 256")
    assert training_size_problem(TrainConfig()) is None


def _row(run_id, seed, tts, passed=None, solver=None, t="2026-12-02T10:00:00+00:00"):
    from fightlab.config import to_dict

    cfg = TrainConfig(body="simple", nworld=1024, env=EnvConfig(**(solver or REFERENCE_SOLVER)))
    params = to_dict(cfg)
    params.update(concurrent=1, gpu_jobs=1, task="default")
    meta = results.run_metadata(body="simple", nworld=1024, seed=seed, params=params, device="cpu")
    meta.update(run_id=run_id, gpu="NVIDIA H200", commit="abc1234", time=t)
    ref = {c: None for c in results.REFERENCE_COLUMNS}
    if passed is not None:
        ref.update(reference_passed=passed, reference_eval_s=10.0, reference_fall_rate_dt=0.0,
                   reference_tracking_dt=0.9, reference_fall_rate_half_dt=0.5 if not passed else 0.0,
                   reference_tracking_half_dt=0.9)
    return dict(meta, time_to_solve_s=tts, iterations=int(tts * 5), compile_s=1.0, env_steps_per_s=1.0,
                physics_steps_per_s=1.0, rollout_s_per_iter=0.1, update_s_per_iter=0.01, solved=True,
                final_amplitude=1.0, fall_rate=0.0, mean_episode_s=10.0, overflow_count=0, nan_resets=0,
                host_reads_per_iter=1.0, graph_fallbacks=0, tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None, **ref)


def test_the_verdict_gates_the_headline_figure2_and_the_survey(tmp_path):
    """A row whose check failed (faked: solved as its curriculum said, the check False), or a
    row in other physics without a check, is not a solve: the headline, the iterations of
    Figure 2 and `--nworld auto`, and the survey's rows leave it out; rows trained in the
    reference physics itself (every row from before the check) and passing rows count."""
    from fightlab.measure import sweep
    from fightlab.survey import cost

    cheap = dict(solver_iterations=2, solver_ls_iterations=4)
    for r in (_row("ref0", 0, 100.0), _row("ref1", 1, 102.0),                              # before the check
              _row("pass0", 0, 50.0, True, cheap), _row("pass1", 1, 52.0, True, cheap),
              _row("fail0", 2, 10.0, False, cheap), _row("fail1", 3, 11.0, False, cheap),
              _row("fail2", 4, 12.0, False, cheap),
              _row("unchecked", 5, 5.0, None, cheap)):
        results.append_row("train", r, tmp_path)
    runs = report.published_runs(tmp_path)
    verdict = dict(zip(runs["run_id"], runs["reference"]))
    assert verdict == {"ref0": "trained in reference", "ref1": "trained in reference", "pass0": "passed",
                       "pass1": "passed", "fail0": "failed", "fail1": "failed", "fail2": "failed",
                       "unchecked": "unchecked"}
    assert runs.set_index("run_id")["solved"].to_dict() == {
        "ref0": True, "ref1": True, "pass0": True, "pass1": True, "fail0": False, "fail1": False,
        "fail2": False, "unchecked": False}
    assert runs["curriculum_solved"].all()
    s = report.solve_summary(runs)
    cheap_group = s[s["n_unsolved"] == 4]  # the three failed and the unchecked: counted, not summarised
    assert len(cheap_group) == 1 and cheap_group["n_solo"].item() == 2
    assert cheap_group["time_to_solve_median_s"].item() == 51.0  # the failing 10-12 s left out
    h = report.headline(s)
    assert h["n_solo"].tolist() == [2] and h["time_to_solve_median_s"].tolist() in ([51.0], [101.0])
    its = sweep.iterations_to_solve(runs)
    assert its["n_solved"].sum() == 4 and its["iterations_min"].min() == 250  # 50 s × 5: no failing row
    ours = cost.our_rows(runs, price_per_hour=3.0, setup={"vast.ai GPU": 60.0})
    assert (pd.to_numeric(ours["time_to_solve_s"]) >= 50.0).all()


def test_reference_verdict_reads_the_cell_as_written_or_read_back():
    cheap = {"env": {"solver_iterations": 2}}
    for cell, want in ((True, "passed"), ("True", "passed"), (1.0, "passed"), (False, "failed"),
                       ("False", "failed"), (0.0, "failed")):
        assert report.reference_verdict(cell, cheap) == want
    for cell in (None, float("nan"), ""):
        assert report.reference_verdict(cell, cheap) == "unchecked"
        assert report.reference_verdict(cell, {}) == "trained in reference"
        assert report.reference_verdict(cell, {"env": dict(REFERENCE_SOLVER)}) == "trained in reference"
    assert dataclasses.asdict(reference_env(EnvConfig(solver_iterations=2)))["solver_iterations"] == 10


def test_an_interrupted_reference_check_resumes_into_the_check_and_its_row(tmp_path, monkeypatch, capsys):
    """Ctrl-C (or a kill) between the solve and the end of its check: the checkpoint says solved
    but holds no verdict, so `--resume` trains no further, runs the check and writes the row;
    a resume after that finds the run finished."""
    from fightlab.envs import task
    from fightlab.run.checkpoint import load_checkpoint

    real = task.evaluate_policy

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(task, "evaluate_policy", interrupted)
    run = tmp_path / "run"
    assert main(["train", *SOLVES, "--run-dir", str(run)]) == 130
    ck = load_checkpoint(run / "latest.pt")
    assert ck["curriculum"]["solved"] and ck["reference_eval"] is None
    assert not (run / "results").exists() or results.read_rows("train", run).empty
    capsys.readouterr()
    monkeypatch.setattr(task, "evaluate_policy", real)
    # a bad segment flag is refused before the check is announced
    assert main(["train", "--resume", str(run / "latest.pt"), "--no-progress", "--max-iterations", "0"]) == 2
    bad = capsys.readouterr()
    assert "running the check" not in bad.out and len(bad.err.strip().splitlines()) == 1, bad
    assert main(["train", "--resume", str(run / "latest.pt"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "reference check did not finish: running the check" in out and "; passed [" in out, out
    row = results.read_rows("train", run).iloc[0]
    assert row["solved"] == True and row["reference_passed"] == True  # noqa: E712
    assert row["iterations"] == ck["iteration"] and row["time_to_solve_s"] == pytest.approx(ck["time_to_solve_s"])
    assert math.isfinite(row["rollout_s_per_iter"])  # the run's rows, not the check-only segment's none
    assert load_checkpoint(run / "latest.pt")["reference_eval"]["passed"] is True
    assert main(["train", "--resume", str(run / "latest.pt"), "--no-progress"]) == 2
    assert "already finished" in capsys.readouterr().err


def test_the_checks_physics_is_validated_before_training(capsys):
    # 2e-5 s trains at 1000 substeps per control step; the check's dt/2 would need 2000
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", "env.timestep=2e-5"]) == 2
    err = capsys.readouterr().err
    assert "EnvConfig.timestep 2e-05: a solve's reference check also runs at dt/2 = 1e-05 s, which fails" in err
    assert len(err.strip().splitlines()) == 1, err


def test_the_engines_solver_is_recorded_and_a_clamped_tolerance_refused(capsys):
    """MuJoCo Warp raises a Newton tolerance below 1e-6 to 1e-6 (float32): the reference's 1e-8
    runs as 1e-6 and the check records that; any other tolerance it would clamp is refused."""
    from fightlab.envs.stance import StanceEnv

    env = StanceEnv("simple", 2, "cpu", cfg=reference_env(EnvConfig()), graph=False)
    assert env.engine_solver["solver_tolerance"] == pytest.approx(1e-6)
    assert env.engine_solver["solver_iterations"] == 10
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress",
                 "--set", "env.solver_tolerance=1e-7"]) == 2
    err = capsys.readouterr().err
    assert "solver_tolerance 1e-07 is below MuJoCo Warp's smallest, 1e-06" in err, err


def test_skipping_qacc_smooth_reaches_mujoco_warp_and_trains(tmp_path, capsys):
    """`env.solver_qacc_smooth=false`: MuJoCo Warp's opt.run_qacc_smooth, so its step skips the
    unconstrained acceleration and M's factorisation; a tiny training runs and stays finite; the
    reference check runs with it on; the CPU backend (no such option) runs it on and its row
    says so (params.physics_engine)."""
    import numpy as np
    from mujoco_warp._src import smooth

    from fightlab.envs.stance import StanceEnv

    env = StanceEnv("simple", 2, "cpu", cfg=EnvConfig(solver_iterations=2, solver_qacc_smooth=False), graph=False)
    assert env.m.opt.run_qacc_smooth is False and smooth.skip_qacc_smooth(env.m, env.d)
    assert env.engine_solver["solver_qacc_smooth"] is False
    env.reset()
    for _ in range(5):
        env.step()
    assert np.isfinite(env.d.qpos.numpy()).all() and env.read_summary()["nan_resets"] == 0
    ref = StanceEnv("simple", 2, "cpu", cfg=reference_env(env.cfg), graph=False)
    assert ref.m.opt.run_qacc_smooth is True and not smooth.skip_qacc_smooth(ref.m, ref.d)
    run = tmp_path / "run"
    assert main(["train", *SOLVES, "--set", "env.solver_qacc_smooth=false", "--run-dir", str(run)]) == 0
    row = results.read_rows("train", run).iloc[0]
    params = json.loads(row["params"])
    assert params["env"]["solver_qacc_smooth"] is False and params["reference_eval"]["solver_engine"]["solver_qacc_smooth"] is True
    assert report.learner_id(params) != report.learner_id({**params, "env": {**params["env"], "solver_qacc_smooth": True}})
    capsys.readouterr()
    # the CPU backend's C engine always computes qacc_smooth: its row records the physics it ran
    cpu_run = tmp_path / "cpu"
    assert main(["train", "--backend", "cpu", "--device", "cpu", "--nworld", "2", "--no-progress",
                 "--max-iterations", "1", "--set", "ppo.num_steps=4", "--set", "env.solver_qacc_smooth=false",
                 "--run-dir", str(cpu_run)]) == 0
    cpu_params = json.loads(results.read_rows("train", cpu_run).iloc[0]["params"])
    assert cpu_params["env"]["solver_qacc_smooth"] is False and cpu_params["physics_engine"]["solver_qacc_smooth"] is True
    assert params["physics_engine"]["solver_qacc_smooth"] is False  # MuJoCo Warp ran what was asked
    assert params["physics_engine"]["solver_tolerance"] == pytest.approx(1e-6)
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", "env.solver_qacc_smooth=2"]) == 2
    assert "solver_qacc_smooth must be true or false, got '2'" in capsys.readouterr().err


def test_a_cpu_layout_on_resume_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--max-iterations", "1",
                 "--set", "ppo.num_steps=4", "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(run / "latest.pt"), "--cpu-layout", "original", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--cpu-layout original conflicts with --resume" in err and len(err.strip().splitlines()) == 1, err


def test_the_task_warning_shows_the_values_as_typed():
    from fightlab.config import task_warning

    w = task_warning(TrainConfig(ppo=PPOConfig(num_steps=4), env=EnvConfig(push_interval_s=(0.5, 2.0))))
    assert "ppo.num_steps=4 (task: 32)" in w and "env.push_interval_s=[0.5, 2] (task: [1, 3])" in w, w


def test_explicit_damping_reaches_both_engines_and_the_reference_keeps_eulerdamp(tmp_path, capsys):
    """`env.solver_eulerdamp=false` sets MuJoCo's mjDSBL_EULERDAMP on the MjModel, MuJoCo Warp's
    model and the CPU backend's; a tiny training with it records the physics run and the learner
    it names; the reference physics runs eulerdamp; a non-boolean is one line."""
    import mujoco
    import numpy as np

    from fightlab.envs.stance import StanceEnv

    bit = int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    cfg = EnvConfig(solver_eulerdamp=False)
    env = StanceEnv("simple", 2, "cpu", cfg=cfg, graph=False)
    assert env.mjm.opt.disableflags & bit and int(env.m.opt.disableflags) & bit
    assert env.engine_solver["solver_eulerdamp"] is False
    env.reset()
    for _ in range(5):
        env.step()
    assert np.isfinite(env.d.qpos.numpy()).all() and env.read_summary()["nan_resets"] == 0
    ref = StanceEnv("simple", 2, "cpu", cfg=reference_env(cfg), graph=False)
    assert not int(ref.m.opt.disableflags) & bit and ref.engine_solver["solver_eulerdamp"] is True
    cpu = StanceEnv("simple", 2, "cpu", cfg=cfg, graph=False, backend="cpu", threads=1)
    assert cpu.engine_solver["solver_eulerdamp"] is False  # the C engine's model: sim.cpu.copy_options
    run = tmp_path / "run"
    assert main(["train", *SOLVES, "--set", "env.solver_eulerdamp=false", "--run-dir", str(run)]) == 0
    params = json.loads(results.read_rows("train", run).iloc[0]["params"])
    assert params["env"]["solver_eulerdamp"] is False and params["physics_engine"]["solver_eulerdamp"] is False
    assert params["reference_eval"]["solver_engine"]["solver_eulerdamp"] is True
    assert report.physics_label(params).endswith(", explicit damping")
    assert report.learner_id(params) != report.learner_id({**params, "env": {**params["env"], "solver_eulerdamp": True}})
    old = {**params, "env": {k: v for k, v in params["env"].items() if k != "solver_eulerdamp"}}
    assert report.config_id(old) == report.config_id({**old, "env": {**old["env"], "solver_eulerdamp": True}})
    capsys.readouterr()
    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", "env.solver_eulerdamp=2"]) == 2
    assert "solver_eulerdamp must be true or false, got '2'" in capsys.readouterr().err
