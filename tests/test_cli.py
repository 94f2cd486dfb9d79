"""CLI errors: one clear line naming the bad value, exit code 2, no traceback."""

import os
import re
import subprocess
import sys

import pytest

from fightlab.cli import main


@pytest.mark.parametrize("args, expect", [
    (["train", "--body", "robot"], "unknown body 'robot'; valid bodies: muscular-fast, simple"),
    (["train", "--nworld", "0"], "nworld must be a positive integer, got 0"),
    (["train", "--nworld", "-5"], "nworld must be a positive integer, got -5"),
    (["train", "--nworld", "1.5"], "nworld must be a positive integer, got '1.5'"),
    (["train", "--nworld", "lots"], "nworld must be a positive integer, got 'lots'"),
    (["train", "--device", "tpu"], "device must be 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
    (["train", "--set", "ppo.nope=1"], "unknown field 'nope'"),
    (["train", "--set", "env.solver_loop=unrolled"],
     "unknown field 'env.solver_loop': 'solver_loop' is a field of TrainConfig; give --set solver_loop=unrolled"),
    (["train", "--set", "ppo.w_pose=2"], "'w_pose' is a field of EnvConfig; give --set env.w_pose=2"),
    (["train", "--set", "stop_after_stage=9"], "stop_after_stage must be null or an integer in [0, 8]"),
    (["train", "--set", "ppo.learning_rate=abc"], "PPOConfig.learning_rate must be a finite number, got 'abc'"),
    (["train", "--set", "ppo.learning_rate=-1"], "PPOConfig.learning_rate must be a number in (0, 1], got -1.0"),
    (["train", "--set", "ppo.adaptive_lr=maybe"], "PPOConfig.adaptive_lr must be true or false, got 'maybe'"),
    (["train", "--set", "ppo.hidden=abc"], "PPOConfig.hidden must be a list of numbers"),
    (["train", "--device", "cpu", "--set", "ppo.hidden=[1000000,1000000]"],
     "PPOConfig.hidden's layers must be at most 4096 wide"),
    (["train", "--device", "cpu", "--set", "ppo.hidden=[4096,4096,4096]"],
     "PPOConfig.hidden [4096, 4096, 4096] gives 69,623,975 network parameters"),
    (["train", "--set", "env.push_impulse_ns=[20]"], "EnvConfig.push_impulse_ns must be a pair [min, max]"),
    (["train", "--set", "curriculum_wait=abc"], "TrainConfig.curriculum_wait must be an integer, got 'abc'"),
    (["train", "--set", "seed=abc"], "'seed' has its own flag (--seed)"),
    (["train", "--body", "simple", "--nworld", "4", "--set", "body=muscular-fast"],
     "'body' has its own flag (--body)"),
    (["train", "--set", "nworld=8"], "'nworld' has its own flag (--nworld)"),
    (["train", "--set", "graph=false"], "'graph' has its own flag (--no-env-graph)"),
    (["train", "--body", ""], "unknown body ''; valid bodies: muscular-fast, simple"),
    (["train", "--device", ""], "device must be 'cpu', 'cuda' or 'cuda:N', got ''"),
    (["train", "--nworld", ""], "nworld must be a positive integer, got ''"),
    (["train", "--device", "cpu", "--run-dir", ""], "--run-dir must name a folder"),
    (["train", "--device", "cpu", "--set", "env.control_dt=1e-9"], "at least 1 physics substep"),
    (["train", "--device", "cpu", "--set", "env.episode_s=0.001"], "must be at least one control step"),
    (["train", "--device", "cpu", "--set", "min_episode_s=100"], "min_episode_s must be a number in [0, 10]"),
    (["train", "--device", "cpu", "--set", "max_fall_rate=2"], "max_fall_rate must be a number in [0, 1]"),
    (["evaluate", "--zero-action", "--body", "simple", "--episodes", "inf"], "--episodes must be in [1, 10000]"),
    (["evaluate", "--zero-action", "--body", "", "--device", "cpu"], "unknown body ''"),
    (["profile", "--nstep", "0", "--device", "cpu"], "--nstep must be an integer in [1, 100000]"),
    (["profile", "--top", "0", "--device", "cpu"], "--top must be a positive integer"),
    (["train", "--set", "env.timestep=0.003"], "must be a whole multiple of timestep"),
    (["train", "--checkpoint-every", "-1"], "checkpoint_every must be an integer >= 0"),
    (["train", "--segment-s", "-5"], "segment_s must be a positive number"),
    (["train", "--device", "cpu", "--publish"], "device 'cpu' is not a GPU"),
    (["train", "--backend", "cpu", "--nworld", "16", "--max-iterations", "1", "--publish"],
     "nworld 16 is below 256, the smallest world count of the committed training studies"),
    (["train", "--backend", "cpu", "--nworld", "256", "--max-iterations", "319", "--publish"],
     "max_iterations 319 is below 320 (10 curriculum stages × the 32-iteration wait)"),
    (["describe", "boxer"], "unknown body 'boxer'; valid bodies: muscular-fast, simple"),
    (["evaluate", "--zero-action", "--body", "simple", "--amplitude", "7"], "--amplitude must be in [0, 1], got 7.0"),
    (["evaluate", "--zero-action", "--body", "simple", "--episodes", "0.1"], "--episodes must be in [1, 10000]"),
    (["evaluate", "--zero-action", "--body", "simple", "--device", "cpu", "--publish"], "is not a GPU"),
    (["slots", "--seconds", "-1", "--device", "cpu"], "--seconds must be > 0"),
    (["slots", "--body", "robot", "--device", "cpu"], "unknown body 'robot'"),
    (["reproduce", "--only", "06", "--device", "gpu"], "device must be 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    (["reproduce", "--only", "06", "--size", "full", "--device", "cpu", "--publish"], "device 'cpu' is not a GPU"),
    (["reproduce", "--only", "01", "--size", "smoke", "--device", "cpu", "--publish"], "writes notebook 01_bodies's figures into the committed figures/, which are drawn at full size; size 'smoke' is not 'full'"),
    (["evaluate", "missing.pt"], "checkpoint 'missing.pt' does not exist"),
    (["figures", "--only", "nope"], "unknown figure 'nope'; valid figures: train_curves, profile_stages, "
                                    "factor_time, factor_trajectory"),
    (["figures", "--root", "no/such/folder"], "--root 'no/such/folder' is not a folder"),
])
def test_cli_errors(args, expect, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err
    assert "Traceback" not in err


def test_cuda_without_gpu_is_a_clear_error(capsys):
    import warp as wp

    wp.init()
    if wp.get_cuda_device_count() > 0:
        pytest.skip("this machine has a GPU")
    assert main(["train", "--device", "cuda", "--nworld", "4"]) == 2
    err = capsys.readouterr().err
    assert "'cuda'" in err and "no CUDA GPU" in err


def test_truncated_checkpoint_cli(tmp_path, capsys):
    p = tmp_path / "cut.pt"
    import torch

    torch.save({"format": "fightlab-ckpt-1", "payload": list(range(1000))}, p)
    p.write_bytes(p.read_bytes()[:200])  # cut short
    assert main(["evaluate", str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and "unreadable or truncated" in err


def test_module_entry_point_reports_errors_without_traceback():
    r = subprocess.run([sys.executable, "-m", "fightlab", "train", "--body", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "valid bodies: muscular-fast, simple" in r.stderr and "Traceback" not in r.stderr


TINY = ["--device", "cpu", "--nworld", "2", "--no-progress", "--set", "ppo.num_steps=4",
        "--set", "ppo.num_minibatches=1", "--set", "ppo.update_epochs=1"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("run") / "simple-tiny"
    assert main(["train", "--body", "simple", "--max-iterations", "1", "--run-dir", str(d), *TINY]) == 0
    return d


def test_resume_stays_in_the_checkpoint_folder_and_refuses_conflicts(tiny_run, capsys):
    ck = str(tiny_run / "latest.pt")
    assert main(["train", "--resume", ck, "--body", "muscular-fast", "--device", "cpu"]) == 2
    assert "--body muscular-fast conflicts with the checkpoint (simple)" in capsys.readouterr().err
    assert main(["train", "--resume", ck, "--set", "ppo.gamma=0.9", "--device", "cpu"]) == 2
    assert "--set cannot change a resumed run" in capsys.readouterr().err
    # finished (max_iterations reached): refused until the limit is raised
    assert main(["train", "--resume", ck, "--device", "cpu"]) == 2
    assert "already finished at iteration 1" in capsys.readouterr().err
    assert main(["train", "--resume", ck, "--max-iterations", "2", "--device", "cpu", "--no-progress"]) == 0
    import pandas as pd

    rows = pd.read_csv(tiny_run / "rows.csv")
    assert rows["iteration"].tolist() == [1, 2]  # both segments in the checkpoint's own folder


def test_checkpoint_of_the_other_body_is_a_clear_error(tiny_run, capsys, tmp_path):
    import torch

    ck = torch.load(tiny_run / "latest.pt", weights_only=False)
    ck["config"]["body"] = "muscular-fast"
    torch.save(ck, tmp_path / "other.pt")
    assert main(["evaluate", str(tmp_path / "other.pt"), "--nworld", "2", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "does not fit body 'muscular-fast'" in err and "Traceback" not in err
    ck["config"]["env"]["nonsense"] = 1
    torch.save(ck, tmp_path / "future.pt")
    assert main(["evaluate", str(tmp_path / "future.pt"), "--nworld", "2", "--device", "cpu"]) == 2
    assert "does not know" in capsys.readouterr().err


def test_fresh_run_in_an_old_folder_starts_clean(tiny_run, tmp_path):
    import shutil

    d = tmp_path / "again"
    shutil.copytree(tiny_run, d, symlinks=True)
    assert main(["train", "--body", "simple", "--max-iterations", "1", "--run-dir", str(d), *TINY]) == 0
    import pandas as pd

    assert len(pd.read_csv(d / "data" / "results" / "train.csv")) == 1
    assert len(pd.read_csv(d / "rows.csv")) == 1  # the earlier run's rows are gone
    assert sorted(p.name for p in d.glob("ckpt_*.pt")) == ["ckpt_000001.pt"]  # this run's only
    # a run file that fightlab did not write (not in the manifest) is never deleted: refused
    (d / "ckpt_000099.pt").write_bytes(b"not fightlab's")
    assert main(["train", "--body", "simple", "--max-iterations", "1", "--run-dir", str(d), *TINY]) == 2
    assert (d / "ckpt_000099.pt").read_bytes() == b"not fightlab's" and (d / "rows.csv").exists()


def test_evaluate_shows_progress_and_what_ran(capsys):
    assert main(["evaluate", "--zero-action", "--body", "simple", "--nworld", "2", "--device", "cpu"]) == 0
    o = capsys.readouterr()
    assert "evaluate simple ×2: 100%" in o.err and "500/500" in o.err  # one bar over the env steps
    assert "policy=zero action;" in o.out and "2 worlds × 10 s (--episodes 1 per world" in o.out
    # which physics ran: the training physics by default, the reference with --physics reference
    assert "physics=training (Newton 2/4 without qacc_smooth, explicit damping)" in o.out
    assert main(["evaluate", "--zero-action", "--body", "simple", "--nworld", "2", "--device", "cpu",
                 "--physics", "reference", "--no-progress"]) == 0
    assert "physics=reference (Newton 10/20 with qacc_smooth)" in capsys.readouterr().out


def test_profile_measures_the_training_factor_path_by_default(capsys):
    """The training physics factors M only inside Newton (no qacc_smooth, explicit damping); in the
    reference physics the factor path is training's tree kernel unless --no-tree-factor."""
    base = ["profile", "--body", "muscular-fast", "--nworld", "2", "--nstep", "1", "--device", "cpu", "--top", "1"]
    from fightlab.config import EnvConfig

    assert main(base + ["--no-progress"]) == 0
    e = EnvConfig()
    if not (e.solver_qacc_smooth or e.solver_eulerdamp):
        assert "mass-matrix factor: none" in capsys.readouterr().out
    args = base + ["--physics", "reference"]
    assert main(args) == 0
    o = capsys.readouterr()
    assert re.search(r"profile muscular-fast ×2: 100%.*5/5", o.err), o.err  # a bar over the phases
    assert "mass-matrix factor (tree, " in o.out and "fightlab tree factor (single launch)" in o.out
    assert main(args + ["--no-tree-factor", "--no-progress"]) == 0
    o = capsys.readouterr()
    assert "mass-matrix factor (sparse)" in o.out and "MuJoCo Warp per-level sparse factor" in o.out
    assert "profile muscular-fast" not in o.err


def test_profile_writes_its_row_under_runs_and_publishes_physics_from_a_gpu_only(capsys, monkeypatch):
    """The row goes under runs/profile (appended, a second run adds one); --publish from a CPU
    device or of --what env is refused in one line before any work, data/ untouched."""
    from fightlab import results
    from fightlab.paths import REPO_ROOT, RUNS

    committed = (REPO_ROOT / "data" / "results" / "profile.csv").read_bytes()
    base = ["profile", "--body", "simple", "--nworld", "2", "--nstep", "1", "--device", "cpu", "--no-progress"]
    before = len(results.read_rows("profile", RUNS / "profile"))  # other tests' profiles add rows too
    for n in (1, 2):
        assert main(base) == 0
        assert f"profile: 1 row -> {RUNS / 'profile'}" in capsys.readouterr().out
        assert len(results.read_rows("profile", RUNS / "profile")) == before + n
    for extra, want in ((["--publish"], "a profile publishes from a CUDA device"),
                        (["--publish", "--what", "env"], "device 'cpu' is not a GPU")):
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and want in err[0], err
    import fightlab.cli as cli

    monkeypatch.setattr(cli, "publish_plans", lambda a: [])  # as on a GPU: the device passes the gate
    assert main(base + ["--publish", "--what", "env"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--publish takes --what physics only" in err[0] and "'env'" in err[0], err
    assert main(base + ["--publish"]) == 2  # 1 step: not notebook 02's full size
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--publish takes --nstep >= 20" in err[0] and "got 1" in err[0], err
    assert (REPO_ROOT / "data" / "results" / "profile.csv").read_bytes() == committed


def test_slots_is_quiet_and_shows_progress():
    """No warp banner or per-module load lines (a fresh process: warp initialises once)."""
    r = subprocess.run([sys.executable, "-m", "fightlab", "slots", "--body", "simple", "--nworld", "2",
                        "--seconds", "0.02", "--device", "cpu"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = r.stdout + r.stderr
    assert "initialized" not in text and not re.search(r"(?m)^Module ", text), text
    assert "SLOTS simple nworld=2" in r.stdout and "slots simple ×2: 100%" in r.stderr


@pytest.mark.parametrize("flags, want", [
    (["--no-graph"], dict(graph=False, policy_graph=False, update_graph=False)),
    (["--no-update-graph"], dict(graph=True, policy_graph=True, update_graph=False)),
    (["--no-env-graph", "--no-policy-graph"], dict(graph=False, policy_graph=False, update_graph=True)),
    ([], dict(graph=True, policy_graph=True, update_graph=True)),
])
def test_graph_flags_set_each_graph(flags, want, tmp_path):
    import torch

    d = tmp_path / "run"
    assert main(["train", "--body", "simple", "--nworld", "2", "--device", "cpu", "--max-iterations", "1",
                 "--set", "ppo.num_steps=2", "--set", "ppo.num_minibatches=1", "--set", "ppo.update_epochs=1",
                 "--run-dir", str(d), "--no-progress", *flags]) == 0
    cfg = torch.load(d / "latest.pt", weights_only=False)["config"]
    assert {k: cfg[k] for k in want} == want


def test_runs_from_inside_the_package(tmp_path):
    """`python -m fightlab` from fightlab/measure: its profile.py must not shadow the standard
    library's (warp imports cProfile, which imports profile): a tiny training runs."""
    from pathlib import Path

    import fightlab

    inside = Path(fightlab.__file__).parent / "measure"
    r = subprocess.run([sys.executable, "-m", "fightlab", "train", "--nworld", "2", "--device", "cpu",
                        "--max-iterations", "1", "--set", "ppo.num_steps=4", "--no-progress",
                        "--run-dir", str(tmp_path / "run")], cwd=inside, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "iterations=1" in r.stdout and "Traceback" not in r.stderr


def test_optimizer_state_of_the_wrong_shape_is_one_line_at_load(tiny_run, tmp_path, capsys):
    import torch

    from fightlab.run.checkpoint import policy_parameter_names
    from fightlab.rl.models import ActorCritic

    ck = torch.load(tiny_run / "latest.pt", weights_only=False)
    names = policy_parameter_names(ck["agent"])
    obs, nu = ck["agent"]["obs_norm.mean"].shape[0], ck["agent"]["actor_logstd"].shape[0]
    assert names == [n for n, _ in ActorCritic(obs, nu, tuple(ck["config"]["ppo"]["hidden"])).named_parameters()]
    i = ck["optimizer"]["param_groups"][0]["params"][2]
    ck["optimizer"]["state"][i]["exp_avg"] = torch.zeros(3)
    torch.save(ck, tmp_path / "bad-opt.pt")
    for args in (["evaluate", str(tmp_path / "bad-opt.pt"), "--nworld", "2", "--device", "cpu"],
                 ["train", "--resume", str(tmp_path / "bad-opt.pt"), "--max-iterations", "2", "--device", "cpu"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"optimizer: exp_avg of parameter {i} ({names[2]}) has shape [3], the policy's parameter" in err, err


def test_publish_over_a_results_file_that_is_not_utf8_is_one_line_before_training(tmp_path, monkeypatch, capsys):
    import fightlab.paths
    from fightlab import results

    path = results.results_path("train", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(results.results_path("train", fightlab.paths.REPO_ROOT).read_bytes()[:3000] + b"\xff\n")
    monkeypatch.setattr(fightlab.paths, "REPO_ROOT", tmp_path)
    args = ["train", "--backend", "cpu", "--nworld", "256", "--max-iterations", "320", "--publish",
            "--run-dir", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fightlab: error: {path}:") and "is not UTF-8" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()  # refused before any work


def test_evaluate_defaults_to_the_checkpoints_nworld(tiny_run, capsys):
    ck = str(tiny_run / "latest.pt")  # trained with --nworld 2
    assert main(["evaluate", ck, "--device", "cpu", "--no-progress"]) == 0
    assert "; 2 worlds × 10 s" in capsys.readouterr().out
    assert main(["evaluate", ck, "--device", "cpu", "--no-progress", "--nworld", "3"]) == 0
    assert "; 3 worlds × 10 s" in capsys.readouterr().out  # the flag still overrides


def test_trains_last_line_names_its_run_folder(tmp_path, capsys):
    d = tmp_path / "named"
    assert main(["train", "--body", "simple", "--max-iterations", "1", "--run-dir", str(d), *TINY]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"run folder: {d.resolve()}" and lines[-2].startswith("run ")


@pytest.mark.parametrize("edit, expect", [
    (lambda o: o["param_groups"][0].update(params=5), "param_groups' params must be lists of parameter indices"),
    (lambda o: o["param_groups"][0].update(lr="fast"), "param_groups' lr must be a number > 0, got 'fast'"),
    (lambda o: o["param_groups"][0].update(betas=(0.9,)), "param_groups' betas must be a pair of numbers"),
    (lambda o: o["state"][0].update(step="x"), "step of parameter 0 (actor_logstd) must be a number"),
    (lambda o: o["state"][0].update(exp_avg_sq=o["state"][0]["exp_avg_sq"].double()),
     "exp_avg_sq of parameter 0 (actor_logstd) is torch.float64, the policy's parameter torch.float32"),
    (lambda o: o["state"][0].update(exp_avg=o["state"][0]["exp_avg"] * float("nan")),
     "exp_avg of parameter 0 (actor_logstd) is not all finite"),
    (lambda o: o["param_groups"][0]["params"].pop(), "parameters listed, the policy has"),
])
def test_hand_edited_optimizer_state_is_one_line(tiny_run, tmp_path, capsys, edit, expect):
    import torch

    ck = torch.load(tiny_run / "latest.pt", weights_only=False)
    edit(ck["optimizer"])
    torch.save(ck, tmp_path / "edited.pt")
    assert main(["evaluate", str(tmp_path / "edited.pt"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is damaged or hand-edited: optimizer: " in err and expect in err, err


def test_a_shortened_curriculum_does_not_lower_the_publish_floor(capsys):
    """--set curriculum_stages / curriculum_wait change the task; the floor stays the task's 320."""
    from fightlab.cli import main as cli_main

    assert cli_main(["train", "--backend", "cpu", "--nworld", "256", "--max-iterations", "1",
                     "--set", "curriculum_stages=[1.0]", "--set", "curriculum_wait=1", "--publish",
                     "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "max_iterations 1 is below 320 (10 curriculum stages × the 32-iteration wait)" in err


@pytest.mark.parametrize("value, expect", [
    ("/", "is the filesystem root, $HOME or a folder holding the repository"),
    ("notebooks", "is inside the repository's source tree"),
    ("TMP/scratch", "is not a folder named runs nor inside one"),
])
def test_an_unusable_runs_folder_is_one_line(value, expect, tmp_path):
    import subprocess
    import sys

    value = value.replace("TMP", str(tmp_path))  # a folder that holds no repository, wherever the clone is
    r = subprocess.run([sys.executable, "-m", "fightlab", "describe", "simple"], capture_output=True,
                       text=True, env={**os.environ, "FIGHTLAB_RUNS": value}, timeout=300)
    assert r.returncode == 2 and expect in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"fightlab: error: FIGHTLAB_RUNS={value!r}")


def test_a_runs_folder_that_is_a_file_is_one_line(tmp_path):
    from fightlab.paths import runs_problem

    f = tmp_path / "runs"
    f.write_text("x")
    assert runs_problem(f).endswith("is a file, not a folder")
    assert runs_problem(tmp_path / "new" / "runs") is None  # not there yet: made when needed


@pytest.mark.parametrize("hidden, expect", [
    ("[1]*17", "at most 16 layers, got 17"),
    ("[1100]*15", "add up to at most 16384"),  # 36 M parameters: under the parameter bound
])
def test_deep_networks_are_bounded(hidden, expect, capsys):
    # tiny sizes: were the bound not to hold, the training would end at once, not run for hours
    assert main(["train", "--device", "cpu", "--nworld", "2", "--max-iterations", "1", "--no-progress",
                 "--set", f"ppo.hidden={eval(hidden)}"]) == 2
    err = capsys.readouterr().err
    assert expect in err and err.count("\n") == 1
