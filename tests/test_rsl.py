"""rsl_rl's learner on the task through the door (`fightlab.run.rsl`): two iterations of each body
at tiny size, its rows and train row, its policy in the task's evaluation, and its refusals."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from fightlab.config import TrainConfig

pytest.importorskip("rsl_rl", reason="rsl-rl-lib is not installed (scripts/setup.sh installs the rsl extra)")


def _cfg(tmp_path, body, **kw):
    import dataclasses

    from fightlab.config import body_ppo

    return TrainConfig(body=body, nworld=4, device="cpu", seed=3, max_iterations=2, run_dir=str(tmp_path / body),
                       checkpoint_every=1, curriculum_wait=1, learner="rsl_rl",
                       ppo=dataclasses.replace(body_ppo(body, "rsl_rl"), num_steps=4), **kw)


@pytest.mark.parametrize("body", ["simple", "muscular-fast"])
def test_rsl_rl_trains_each_body_through_the_door(tmp_path, body):
    """`Trainer(cfg)` with learner rsl_rl runs rsl_rl's OnPolicyRunner for 2 iterations: rows with
    the task's columns and rsl_rl's losses, a checkpoint, and a train row naming the learner and
    its version."""
    from fightlab.envs.task import evaluate_policy
    from fightlab.measure.report import train_row
    from fightlab.run.rsl import RSL_RL_VERSION, RslLearner
    from fightlab.run.runner import Trainer

    with Trainer(_cfg(tmp_path, body), progress=False) as t:
        assert isinstance(t, RslLearner) and isinstance(t, Trainer)
        res = t.train()
        params = json.loads(train_row(t, res)["params"])
        stats = evaluate_policy(t.make_policy, body, t.cfg.env, 2, "cpu", episodes_per_world=0.02,
                                progress=False)
    assert res["iterations"] == 2 and not res["solved"]
    rows = list(csv.DictReader(open(tmp_path / body / "rows.csv")))
    assert [r["iteration"] for r in rows] == ["1", "2"]
    for col in ("rsl_value", "rsl_surrogate", "rsl_entropy", "learning_rate", "action_std", "amplitude",
                "event", "window_fall_rate", "rollout_s", "update_s", "host_reads"):
        assert col in rows[0], col
    assert all(float(r["rollout_s"]) > 0 and float(r["update_s"]) > 0 for r in rows)
    assert (tmp_path / body / "latest.pt").exists()
    from fightlab.run.checkpoint import CheckpointError, load_checkpoint

    with pytest.raises(CheckpointError, match="is a --learner rsl_rl run's: render and the reference check take"):
        load_checkpoint(tmp_path / body / "latest.pt")  # one line, not "damaged"
    assert params["learner"] == "rsl_rl"
    seg = params["segments"][-1]
    assert seg["learner"] == "rsl_rl" and seg["rsl_rl_version"] == RSL_RL_VERSION
    assert seg["rsl_rl_settings"]["num_steps_per_env"] == 4
    assert stats["episodes"] >= 0 and stats["timestep"] > 0


def test_the_settings_are_mjlabs_with_the_tasks_rollout():
    """rsl_rl's defaults are mjlab's G1 PPO (config.RSL_RL_PPO) in rsl_rl's names, for every body;
    a --set of a PPOConfig field reaches rsl_rl's argument."""
    import dataclasses

    from fightlab.config import apply_overrides
    from fightlab.run.rsl import train_cfg

    for body in ("simple", "muscular-fast"):
        cfg = TrainConfig(body=body, learner="rsl_rl")
        out = train_cfg(cfg)
        assert out["num_steps_per_env"] == cfg.ppo.num_steps == 32
        assert out["algorithm"] == {"class_name": "PPO", "use_clipped_value_loss": True, "learning_rate": 1e-3,
                                    "clip_param": 0.2, "entropy_coef": 0.01, "value_loss_coef": 1.0,
                                    "num_learning_epochs": 5, "num_mini_batches": 4, "gamma": 0.99, "lam": 0.95,
                                    "max_grad_norm": 1.0, "schedule": "adaptive", "desired_kl": 0.01}
        assert out["actor"]["hidden_dims"] == out["critic"]["hidden_dims"] == [512, 256, 128]
        assert out["actor"]["distribution_cfg"]["init_std"] == {"simple": 0.3}.get(body, 1.0)  # the study's
        assert out["obs_groups"] == {"actor": ["policy"], "critic": ["policy"]}
    tuned = apply_overrides(TrainConfig(learner="rsl_rl"), ["ppo.init_std=0.5", "ppo.desired_kl=null",
                                                           "ppo.desired_kl_per_action=0.002", "ppo.adaptive_lr=false"])
    out = train_cfg(tuned)
    assert out["actor"]["distribution_cfg"]["init_std"] == 0.5
    assert out["algorithm"]["schedule"] == "fixed"
    from fightlab.bodies import build

    assert out["algorithm"]["desired_kl"] == 0.002 * build("simple").nu  # fightlab's per-action rule
    assert TrainConfig(learner="rsl_rl").ppo != TrainConfig().ppo  # each learner its own defaults
    assert dataclasses.replace(TrainConfig(learner="rsl_rl"), body="muscular-fast").ppo.hidden == (512, 256, 128)


def test_the_door_hands_rsl_rl_copies():
    """rsl_rl keeps a step's observation until after the next step (its storage copies it then):
    the door's observations are copies, not the task's buffers that the next step overwrites."""
    import torch

    from fightlab.envs.task import StanceTask
    from fightlab.run.rsl import RslDoor

    task = StanceTask(TrainConfig(body="simple", nworld=4, device="cpu", seed=1, learner="rsl_rl"))
    door = RslDoor(task)
    first = door.get_observations()
    before = first["policy"].clone()
    a = torch.zeros(door.num_envs, door.num_actions)
    second, *_ = door.step(a)
    assert torch.equal(first["policy"], before)  # untouched by the step
    third, *_ = door.step(a)
    assert not torch.equal(second["policy"], third["policy"])  # the task moved on; the copy did not
    assert second["policy"].data_ptr() != third["policy"].data_ptr()



def test_the_door_adds_no_host_read_per_step(monkeypatch):
    """The door's copies are device work only: a step through `RslDoor` reads nothing back to the
    host beyond what the task's own step does (on a GPU every read is a sync; rsl_rl's ≈ 300 per
    iteration are its own). Every tensor→host read is counted around the door's part of a step."""
    import types

    import torch

    from fightlab.run.rsl import RslDoor
    from fightlab.timing import HostReads

    n, groups = 4, {"policy": torch.zeros(4, 37), "critic": torch.zeros(4, 50)}
    out = (groups, torch.zeros(n), torch.zeros(n, dtype=torch.bool), {"time_outs": torch.zeros(n)})
    task = types.SimpleNamespace(num_envs=n, num_actions=9, max_episode_length=100, device="cpu", cfg=None,
                                 episode_length_buf=torch.zeros(n), get_observations=lambda: groups,
                                 step=lambda actions: out)
    reads = []
    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, (lambda f, name: lambda self, *a, **k: (reads.append(name),
                                                                                        f(self, *a, **k))[1])(
            getattr(torch.Tensor, name), name))
    door = RslDoor(task)
    with HostReads("cpu") as hr:  # warp's reads
        door.get_observations()
        for _ in range(3):
            obs, *_ = door.step(torch.zeros(n, 9))
    assert reads == [] and hr.count == 0
    assert obs["policy"].data_ptr() != groups["policy"].data_ptr()  # still copies


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fightlab", "train", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_an_unknown_learner_is_one_line(tmp_path):
    r = _cli("--learner", "sb3", "--device", "cpu", "--run-dir", str(tmp_path / "x"))
    assert r.returncode == 2
    err = [line for line in r.stderr.strip().splitlines() if not line.startswith("Warp CUDA warning")]
    assert len(err) == 1 and "'sb3'" in err[0] and "fightlab, rsl_rl" in err[0], r.stderr
    assert not (tmp_path / "x").exists()


def test_rsl_rl_missing_is_one_line_saying_how_to_install(tmp_path, monkeypatch):
    """Without rsl_rl importable the run stops before any work with the install line."""
    from fightlab.errors import ConfigError
    from fightlab.run.runner import Trainer

    monkeypatch.setitem(sys.modules, "rsl_rl", None)
    monkeypatch.setitem(sys.modules, "rsl_rl.runners", None)
    with pytest.raises(ConfigError, match=r"pip install 'rsl-rl-lib==5\.5\.1'"):
        Trainer(_cfg(tmp_path, "simple"), progress=False)
    assert not (tmp_path / "simple").exists() or not any((tmp_path / "simple").iterdir())


@pytest.mark.parametrize("kw, says", [
    (dict(policy_device="cpu", backend="cpu"), "--policy-device"),
])
def test_settings_rsl_rl_cannot_take_are_refused(tmp_path, kw, says):
    from fightlab.errors import ConfigError
    from fightlab.run.runner import Trainer

    with pytest.raises(ConfigError, match=says):
        Trainer(_cfg(tmp_path, "simple", **kw), progress=False)


def test_the_learner_is_part_of_the_learner_id_and_old_rows_keep_theirs():
    """Rows written before the learner field (no "learner" in params) keep their id; a rsl_rl
    run's differs from fightlab's of the same config."""
    from fightlab.config import to_dict
    from fightlab.measure.learners import learner_id

    ours, theirs = to_dict(TrainConfig()), to_dict(TrainConfig(learner="rsl_rl"))
    old = {k: v for k, v in ours.items() if k != "learner"}
    assert learner_id(ours) == learner_id(old) != learner_id(theirs)


@pytest.mark.parametrize("learner", ["fightlab", "rsl_rl"])
def test_every_training_writes_tensorboard_events_read_back_by_tensorboard(tmp_path, learner):
    """The default logger writes each row's numbers as scalars in the run folder (listed in
    its manifest), read back with tensorboard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from fightlab.rundir import RunDir
    from fightlab.run.runner import Trainer

    import dataclasses

    cfg = dataclasses.replace(_cfg(tmp_path, "simple"), learner=learner)
    with Trainer(cfg, progress=False) as t:
        t.train()
        listed = RunDir.files(t.rundir)
    rows = list(csv.DictReader(open(tmp_path / "simple" / "rows.csv")))
    acc = EventAccumulator(str(tmp_path / "simple"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"task/episodes", "task/amplitude", "learner/learning_rate", "time/rollout_s", "time/update_s"} <= tags
    got = [(e.step, e.value) for e in acc.Scalars("learner/learning_rate")]
    assert got == [(int(r["iteration"]), pytest.approx(float(r["learning_rate"]), rel=1e-6)) for r in rows]
    assert any(f.startswith("events.out.tfevents") for f in listed)


def test_an_unknown_logger_is_one_line(tmp_path):
    r = _cli("--logger", "mlflow", "--device", "cpu", "--run-dir", str(tmp_path / "x"))
    err = [line for line in r.stderr.strip().splitlines() if not line.startswith("Warp CUDA warning")]
    assert r.returncode == 2 and len(err) == 1 and "'mlflow'" in err[0] and "auto, tensorboard, wandb, none" in err[0]


def test_wandb_missing_is_one_line(tmp_path, monkeypatch):
    from fightlab.errors import ConfigError
    from fightlab.run.tracking import RunLog

    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[wandb\]'"):
        RunLog("wandb", tmp_path, "abc", {})


def test_wandb_offline_writes_into_the_run_folder_read_back_by_wandbs_reader(tmp_path, monkeypatch):
    """--logger wandb with WANDB_MODE=offline, a 1-iteration tiny training: wandb's offline run file
    lies in the run folder's wandb/ (listed in its manifest), nothing beside the run folder, and
    wandb's own reader of that file (its DataStore, the records `wandb sync` uploads) gives each
    logged scalar at step = the iteration, equal to rows.csv's column."""
    pytest.importorskip("wandb", reason="the wandb extra (pip install -e '.[wandb]') is not installed")
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal.datastore import DataStore

    from fightlab.config import PPOConfig
    from fightlab.rundir import RunDir
    from fightlab.run.runner import Trainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_ERROR_REPORTING", raising=False)  # restored after: the run sets it
    cfg = TrainConfig(body="simple", nworld=4, device="cpu", seed=7, max_iterations=1, logger="wandb",
                      run_dir=str(tmp_path / "run"), ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1))
    with Trainer(cfg, progress=False) as t:
        t.train()
        listed = RunDir.files(t.rundir)
    assert "wandb" in listed and os.listdir(tmp_path) == ["run"]
    assert os.environ["WANDB_ERROR_REPORTING"] == "false"  # offline: wandb's error reports off too
    (path,) = (tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    store, logged = DataStore(), []
    store.open_for_scan(str(path))
    while (data := store.scan_data()) is not None:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "history":
            logged.append({i.nested_key[0] if i.nested_key else i.key: json.loads(i.value_json)
                           for i in record.history.item})
    rows = list(csv.DictReader(open(tmp_path / "run" / "rows.csv")))
    assert [h["_step"] for h in logged] == [int(r["iteration"]) for r in rows] == [1]
    for tag in ("learner/learning_rate", "learner/policy_loss", "task/episodes", "time/rollout_s"):
        assert logged[0][tag] == pytest.approx(float(rows[0][tag.split("/")[1]]), rel=1e-9), tag


def test_auto_without_tensorboard_is_a_note_and_tensorboard_asked_is_one_line(tmp_path, monkeypatch, capsys):
    from fightlab.errors import ConfigError
    from fightlab.run.tracking import RunLog

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    log = RunLog("auto", tmp_path, "abc", {})
    log.row({"iteration": 1, "reward": 0.5})
    log.close()
    assert "tensorboard package is not installed" in capsys.readouterr().out and not list(tmp_path.glob("events.out.tfevents*"))
    with pytest.raises(ConfigError, match="pip install tensorboard"):
        RunLog("tensorboard", tmp_path, "abc", {})


def test_an_rsl_rl_run_resumes_where_it_stopped(tmp_path):
    """A segment's checkpoint resumes: the actor, critic, optimizer and learning rate, the
    curriculum and the worlds come back; rows.csv goes on from the checkpoint's rows."""
    import dataclasses

    import torch

    from fightlab.run.runner import Trainer

    cfg = _cfg(tmp_path, "simple")
    with Trainer(cfg, progress=False) as t:
        t.train()
        lr, actor = t.runner.alg.learning_rate, {k: v.clone() for k, v in t.runner.alg._raw_actor.state_dict().items()}
    resumed = dataclasses.replace(TrainConfig(), resume=str(tmp_path / "simple" / "latest.pt"), max_iterations=3,
                                  device="cpu")
    with Trainer(resumed, progress=False) as t:
        t._start()
        assert t.iteration == 2 and t.runner.alg.learning_rate == lr
        assert all(torch.equal(v, actor[k]) for k, v in t.runner.alg._raw_actor.state_dict().items())
    with Trainer(resumed, progress=False) as t:
        res = t.train()
    assert res["iterations"] == 3
    rows = list(csv.DictReader(open(tmp_path / "simple" / "rows.csv")))
    assert [r["iteration"] for r in rows] == ["1", "2", "3"]


@pytest.mark.parametrize("setting", ["ppo.critic_learning_rate=0.001", "ppo.kl_estimator=k3", "ppo.symmetry=augment",
                                     "ppo.stage_lr_scale=[1,1,1,1,1,1,1,1,1,2]"])
def test_rsl_rl_refuses_settings_it_has_no_place_for(tmp_path, setting):
    """A PPOConfig field rsl_rl has no setting for (run.rsl.RSL_RL_CANNOT) would be recorded but not
    used: one line, before any work (no compiling line, no folder)."""
    r = _cli("--learner", "rsl_rl", "--set", setting, "--device", "cpu", "--run-dir", str(tmp_path / "x"))
    err = [line for line in r.stderr.strip().splitlines() if not line.startswith("Warp CUDA warning")]
    assert r.returncode == 2 and len(err) == 1 and "is not an rsl_rl setting" in err[0], r.stderr
    assert setting.split("=")[0] in err[0]
    assert "compiling" not in r.stdout + r.stderr and not (tmp_path / "x").exists()


def test_rsl_rl_settings_out_of_range_are_one_line(tmp_path):
    """rsl_rl's settings are PPOConfig's fields, under the same rules."""
    r = _cli("--learner", "rsl_rl", "--set", "ppo.init_std=-1", "--device", "cpu", "--run-dir", str(tmp_path / "x"))
    err = [line for line in r.stderr.strip().splitlines() if not line.startswith("Warp CUDA warning")]
    assert r.returncode == 2 and len(err) == 1 and "init_std" in err[0] and "-1" in err[0], r.stderr
    assert not (tmp_path / "x").exists()


def test_an_rsl_rl_checkpoint_exports_with_parity_and_replays_in_the_c_engine(tmp_path, capsys, monkeypatch):
    """`export` of a 2-iteration rsl_rl run's checkpoint: its actor rebuilt with rsl_rl's MLPModel
    gives the trained runner's actions; policy.onnx passes the parity check (<= 1e-5 on >= 1000
    recorded observations), carries the learner and rsl_rl's version, gives the runner's actions
    in onnxruntime, and replays in MuJoCo's C engine; `evaluate` of the .pt runs the same actor.
    Without rsl_rl the export is one line, before any env."""
    for m in ("onnx", "onnxruntime", "onnxscript"):
        pytest.importorskip(m, reason="the export extra (pip install -e '.[export]') is not installed")
    import onnx
    import onnxruntime as ort
    import torch

    from fightlab.cli import main
    from fightlab.run.checkpoint import load_checkpoint
    from fightlab.run.evaluate import evaluate, evaluate_exported
    from fightlab.run.export import checkpoint_policy, export_policy
    from fightlab.run.rsl import RSL_RL_VERSION
    from fightlab.run.runner import Trainer

    with Trainer(_cfg(tmp_path, "simple"), progress=False) as t:
        t.train()
        env = t.env.unwrapped
        obs = torch.randn(64, env.obs_dim)
        want = t.make_policy(env)(obs).detach()  # the runner's own actor (rsl_rl's as_jit copy)
    ck = tmp_path / "simple" / "latest.pt"
    rebuilt = checkpoint_policy(load_checkpoint(ck, any_learner=True), env, "cpu")
    with torch.no_grad():
        assert torch.allclose(rebuilt(obs), want, rtol=0, atol=1e-6)
    r = export_policy(ck, progress=False)
    assert r["learner"] == "rsl_rl" and r["n_obs"] >= 1000 and r["max_abs_diff"] <= 1e-5, r
    meta = {m.key: m.value for m in onnx.load(r["path"]).metadata_props}
    assert meta["learner"] == "rsl_rl" and meta["rsl_rl_version"] == RSL_RL_VERSION
    assert meta["fightlab_body"] == "simple" and json.loads(meta["config"])["learner"] == "rsl_rl"
    session = ort.InferenceSession(r["path"], providers=["CPUExecutionProvider"])
    got = session.run(None, {"obs": obs.numpy()})[0]
    assert float(abs(torch.from_numpy(got) - want).max()) <= 1e-5
    res = evaluate_exported(r["path"], nworld=2, episodes_per_world=0.05, backend="cpu", progress=False)
    assert res["backend"] == "cpu" and res["ckpt_iteration"] == 2 and res["physics_engine"]
    assert evaluate(ck, nworld=2, episodes_per_world=0.05, progress=False)["ckpt_iteration"] == 2
    assert main(["evaluate", str(ck), "--device", "cpu", "--nworld", "1", "--no-progress"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["evaluate", str(ck), "--reference-check", "--device", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "render and the reference check take fightlab's learner's only" in err and "\n" not in err
    # rsl_rl missing: one line naming how to install it, nothing built or written
    import fightlab.envs.task

    monkeypatch.setitem(sys.modules, "rsl_rl", None)
    monkeypatch.setitem(sys.modules, "rsl_rl.runners", None)
    monkeypatch.setattr(fightlab.envs.task, "evaluate_policy", lambda *a, **k: pytest.fail("env built"))
    capsys.readouterr()
    assert main(["export", str(ck), "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install 'rsl-rl-lib==" in err and "\n" not in err and not (tmp_path / "policy.onnx").exists()
