"""GAE, PPO, curriculum and solve criterion, resume."""

import copy
import dataclasses
import math
import re

import pytest
import torch

from fightlab.config import ConfigError, PPOConfig, TrainConfig
from fightlab.rl.models import ActorCritic, ObsNormalizer
from fightlab.rl.ppo import ppo_update
from fightlab.envs.curriculum import Curriculum
from fightlab.run.runner import Trainer
from fightlab.rl.storage import RolloutStorage, compute_gae


def test_gae_matches_hand_computation():
    g, lam = 0.9, 0.8
    r = torch.tensor([[1.0], [2.0], [3.0]])
    v = torch.tensor([[0.5], [1.0], [1.5]])
    d = torch.tensor([[0.0], [1.0], [0.0]])  # the episode ends at step 1
    nv = torch.tensor([2.0])
    adv, ret = compute_gae(r, v, d, nv, g, lam)
    # by hand: δ2 = 3 + .9·2 − 1.5 = 3.3; A2 = 3.3
    #          δ1 = 2 + 0 − 1.0 = 1.0 (done: no bootstrap); A1 = 1.0
    #          δ0 = 1 + .9·1.0 − .5 = 1.4; A0 = 1.4 + .9·.8·1.0 = 2.12
    assert torch.allclose(adv[:, 0], torch.tensor([2.12, 1.0, 3.3]), atol=1e-6)
    assert torch.allclose(ret, adv + v)


def test_obs_normalizer_matches_batch_statistics():
    torch.manual_seed(0)
    x = torch.randn(1000, 3) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 0.0])
    n = ObsNormalizer(3)
    for chunk in x.split(137):
        n.update(chunk)
    assert torch.allclose(n.mean, x.mean(0), atol=1e-4)
    assert torch.allclose(n.var, x.var(0, unbiased=False), rtol=1e-3)


def test_ppo_improves_a_tiny_known_problem():
    """One-step task: reward = −‖a − W·obs‖²; PPO must cut the error of the mean action."""
    torch.manual_seed(0)
    obs_dim, act_dim, N = 4, 2, 512
    W = torch.tensor([[0.5, -0.5, 0.0, 0.3], [0.0, 0.4, -0.6, 0.0]])
    agent = ActorCritic(obs_dim, act_dim, hidden=(32, 32), init_std=0.5)
    cfg = PPOConfig(num_steps=1, num_minibatches=4, update_epochs=4, learning_rate=3e-3,
                    adaptive_lr=False, ent_coef=0.0)
    opt = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5)
    buf = RolloutStorage(1, N, obs_dim, act_dim, "cpu")

    def error():
        o = torch.randn(2048, obs_dim)
        with torch.no_grad():
            return float(((agent.act_mean(o) - o @ W.T) ** 2).sum(-1).mean())

    before = error()
    for _ in range(60):
        o = torch.randn(N, obs_dim)
        with torch.no_grad():
            a, logp, _, v, _, _ = agent.get_action_and_value(o)
        r = -((a - o @ W.T) ** 2).sum(-1)
        buf.obs[0], buf.actions[0], buf.logprobs[0], buf.values[0] = o, a, logp, v
        buf.rewards[0], buf.dones[0] = r, torch.ones(N)
        adv, ret = compute_gae(buf.rewards, buf.values, buf.dones, torch.zeros(N), 0.99, 0.95)
        buf.advantages.copy_(adv)
        buf.returns.copy_(ret)
        stats = ppo_update(agent, opt, buf, cfg)
        assert all(math.isfinite(x) for x in stats.values())
    after = error()
    assert after < 0.3 * before, (before, after)


def _summary(episodes=100, falls=0, timeouts=None, mean_s=10.0, tracking=0.9):
    timeouts = episodes - falls if timeouts is None else timeouts
    return dict(episodes=episodes, falls=falls, timeouts=timeouts, episode_s_sum=mean_s * episodes,
                track_num=tracking * 1.0, track_den=1.0)


def test_curriculum_widens_after_wait_and_solves_at_the_top():
    c = Curriculum(stages=tuple(round(0.1 * i, 1) for i in range(1, 11)), wait=32)
    events = [c.update(_summary()) for _ in range(320)]
    assert events[:31] == ["wait"] * 31
    assert events[31] == "widen" and c.stage >= 1
    assert events.count("widen") == 9 and events[-1] == "solved"
    assert c.solved and c.amplitude == 1.0
    # the fastest possible solve: 10 stages × W iterations
    assert events.index("solved") == 10 * 32 - 1


def test_the_widening_row_reports_the_window_that_passed():
    """A widening clears the window; its iteration's row still reports the window that passed
    (fall rate, tracking, episode length), not NaN."""
    c = Curriculum(stages=(0.5, 1.0), wait=2)
    assert [c.update(_summary(falls=2, tracking=0.8)) for _ in range(2)] == ["wait", "widen"]
    assert c.window_stats()["episodes"] == 0 and c.widened_on["fall_rate"] == pytest.approx(0.02)
    # a run stopped on the widening (stop_after_stage) reports the same; kept by a checkpoint
    assert c.last_stats()["fall_rate"] == pytest.approx(0.02)
    c2 = Curriculum(stages=(0.5, 1.0), wait=2)
    c2.load_state_dict(c.state_dict())
    assert c2.last_stats() == c.last_stats()
    from fightlab.envs.task import episode_row

    summary = {**_summary(falls=2, tracking=0.8), **dict.fromkeys(
        ("track_num_survived", "track_den_survived", "return_sum", "overflow_worlds", "nefc_overflow",
         "contact_overflow", "nan_resets", "solver_iter_hits", "solver_ls_hits", "contact_falls",
         "tilt_falls"), 0)}
    row = episode_row(c, "widen", summary)
    assert (row["amplitude"], row["stage"]) == (0.5, 1)  # the amplitude that passed
    assert row["window_fall_rate"] == pytest.approx(0.02) and row["window_tracking"] == pytest.approx(0.8)


def test_curriculum_holds_on_falls_tracking_and_short_episodes():
    c = Curriculum(stages=(0.5, 1.0), wait=4)
    for _ in range(4):
        ev = c.update(_summary(falls=6))          # 6 % falls > 5 %
    assert ev == "hold" and c.stage == 0
    c = Curriculum(stages=(0.5, 1.0), wait=4)
    for _ in range(4):
        ev = c.update(_summary(tracking=0.7))     # tracking below 0.75
    assert ev == "hold"
    # at the last stage, episodes must last ≥ 9.5 s on average and end only by fall/time-out
    c = Curriculum(stages=(1.0,), wait=4)
    for _ in range(4):
        ev = c.update(_summary(mean_s=9.0))
    assert ev == "hold" and not c.solved
    c = Curriculum(stages=(1.0,), wait=4)
    for _ in range(4):
        ev = c.update(_summary(timeouts=90, falls=2))  # 8 episodes ended otherwise
    assert ev == "hold"
    c = Curriculum(stages=(1.0,), wait=4)
    for _ in range(4):
        ev = c.update(_summary(episodes=0))       # nothing finished: no verdict
    assert ev == "hold"
    for _ in range(4):
        ev = c.update(_summary(falls=5, mean_s=9.6))  # 5 % exactly passes
    assert ev == "solved"


def test_curriculum_window_covers_only_the_last_w_iterations():
    c = Curriculum(stages=(0.5, 1.0), wait=4)
    for _ in range(4):
        c.update(_summary(falls=50))
    assert c.stage == 0
    for i in range(4):
        ev = c.update(_summary(falls=0))
    assert ev == "widen"  # the bad iterations fell out of the window


def _tiny_cfg(tmp_path, **kw):
    return TrainConfig(body="simple", nworld=4, device="cpu", seed=7, max_iterations=2,
                       run_dir=str(tmp_path), checkpoint_every=1, curriculum_wait=1,
                       ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1), **kw)


DETERMINISTIC = ("iteration", "env_steps", "amplitude", "stage", "episodes", "reward",
                 "policy_loss", "value_loss", "entropy", "approx_kl", "learning_rate")


def _copied(checkpoint, folder) -> str:
    """`checkpoint` copied into `folder` (made): an older checkpoint resumes in a folder of its
    own, as in its run's folder it would overwrite the later ones."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    return str(shutil.copy(checkpoint, folder / checkpoint.name))


def test_resume_gives_the_same_next_row(tmp_path):
    a = Trainer(_tiny_cfg(tmp_path / "a"), progress=False)
    a.train()
    a.close()
    row2 = a.rows[1]
    b = Trainer(dataclasses.replace(_tiny_cfg(tmp_path / "b"), resume=_copied(tmp_path / "a" / "ckpt_000001.pt",
                                                                              tmp_path / "b")),
                progress=False)
    b.train()
    assert len(b.rows) == 1 and b.rows[0]["iteration"] == 2
    for k in DETERMINISTIC:
        x, y = row2[k], b.rows[0][k]
        assert (x == y) or (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=1e-7), k
    assert b.elapsed_s > a.rows[0]["wall_s"]  # segments add up


def test_truncated_checkpoint_is_a_clear_error(tmp_path):
    from fightlab.run.checkpoint import CheckpointError, load_checkpoint

    p = tmp_path / "x.pt"
    p.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(CheckpointError, match="unreadable or truncated"):
        load_checkpoint(p)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    torch.save({"hello": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match=r"not a fightlab checkpoint \(format None, expected 'fightlab-ckpt-1'\)"):
        load_checkpoint(tmp_path / "other.pt")


def test_normaliser_floor_keeps_a_constant_feature_from_exploding():
    """The amplitude is constant (0.1) during the first stage: when it moves to 0.2 the normalised
    value must stay moderate, not jump to the clip."""
    n = ObsNormalizer(2, min_std=[0.0, 0.2])
    n.update(torch.tensor([[0.1, 0.1]] * 64))
    out = n(torch.tensor([[0.2, 0.2]]))
    assert out[0, 0] == 10.0                 # no floor: clipped
    assert abs(float(out[0, 1]) - 0.5) < 1e-3  # floor 0.2: (0.2 − 0.1) / 0.2


def test_train_row_records_the_factor_kernel_and_host_jobs(tmp_path, monkeypatch):
    """A row says which mass-matrix factor produced it and how many GPU jobs shared the host."""
    from fightlab.measure.report import factor_setup, train_row

    monkeypatch.setenv("FIGHTLAB_HOST_JOBS", "2")
    for body, variant in (("muscular-fast", "shared"), ("simple", None)):
        cfg = dataclasses.replace(_tiny_cfg(tmp_path / body), body=body, max_iterations=1)
        t = Trainer(cfg, progress=False)
        res = t.train()
        params = __import__("json").loads(train_row(t, res)["params"])
        t.env.close()
        assert params["tree_factor_variant"] == variant and params["gpu_jobs"] == 2
        assert (params["concurrent"], params["mps"]) == (1, False)
        assert factor_setup(body, params) == ("tree factor, shared" if variant else "dense")


def test_evaluate_says_which_policy_it_ran(tmp_path, capsys):
    """An evaluation row names the checkpoint's iteration and whether that run had solved, so a
    half-trained policy cannot pass for the solved one."""
    import json

    from fightlab.measure.report import eval_row
    from fightlab.run.evaluate import evaluate

    Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=1), progress=False).train()
    res = evaluate(tmp_path / "latest.pt", nworld=2, device="cpu")
    assert (res["ckpt_iteration"], res["ckpt_solved"]) == (1, False)
    row = eval_row(res, tmp_path / "latest.pt", "cpu", seed=1, local_root=tmp_path / "eval")
    p = json.loads(row["params"])
    assert (p["ckpt_iteration"], p["ckpt_solved"]) == (1, False)
    assert "policy=iteration 1 (NOT solved)" in capsys.readouterr().out


def test_resumed_run_records_every_segment(tmp_path, monkeypatch):
    """Segments of a resumed run that ran other code are named in the row and keep it out of
    any one setup's summary; the worst GPU sharing of any segment is the run's."""
    import json

    from fightlab.measure.report import factor_setup, train_row

    monkeypatch.setenv("FIGHTLAB_COMMIT", "aaa1111")
    monkeypatch.setenv("FIGHTLAB_SHARED_GPU", "3")
    Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=1), progress=False).train()
    monkeypatch.setenv("FIGHTLAB_COMMIT", "bbb2222")
    monkeypatch.setenv("FIGHTLAB_SHARED_GPU", "1")
    b = Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=2,
                                    resume=str(tmp_path / "latest.pt")), progress=False)
    res = b.train()
    p = json.loads(train_row(b, res)["params"])
    assert [s["commit"] for s in p["segments"]] == ["aaa1111", "bbb2222"]
    assert p["mixed_segments"] is True and p["concurrent"] == 3
    assert factor_setup("simple", p) == "dense (mixed segments)"


def test_overflow_message_counts_resets_and_worlds(tmp_path, monkeypatch, capsys):
    """A world that runs out of slots is reset and runs out again: the line names both counts."""
    from fightlab.sim import physics

    s = physics.SLOTS["simple"]
    monkeypatch.setitem(physics.SLOTS, "simple", physics.Slots(s.nconmax, 4, "test: too few rows"))
    t = Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=1), progress=False)
    t.train()
    out = capsys.readouterr().out
    # 4 worlds × 4 steps, every one of them out of rows: 16 resets of 4 worlds
    assert "OVERFLOW iteration 1: 16 slot resets in 4 of 4 worlds" in out, out
    assert t.rows[0]["overflow_count"] == 16


def test_zero_action_evaluation_of_a_checkpoint_says_its_policy_did_not_run(tmp_path, capsys):
    from fightlab.measure.report import eval_row
    from fightlab.run.evaluate import evaluate

    Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=1), progress=False).train()
    res = evaluate(tmp_path / "latest.pt", nworld=2, device="cpu", zero_action=True, progress=False,
                   episodes_per_world=1.5)
    assert res["zero_action"] and res["seconds_per_world"] == pytest.approx(15.0)
    eval_row(res, tmp_path / "latest.pt", "cpu", seed=1, local_root=tmp_path / "eval")
    out = capsys.readouterr().out
    assert "policy=zero action (body and task from the checkpoint of iteration 1; its policy did not run)" in out
    assert "policy=iteration" not in out
    # --episodes is per world; the count printed is every episode that ended, all worlds together
    assert "2 worlds × 15 s (--episodes 1.5 per world" in out
    assert f"{res['episodes']} episodes ended in all" in out and res["episodes"] >= 2


def test_a_run_that_changes_the_task_says_so_and_its_row_is_marked(tmp_path, capsys):
    """curriculum_wait is a Fixed field: the run warns once at the start, its row's params carry
    task=custom-…, and the end-of-run line says it is not a solve of the task."""
    import json

    from fightlab import results
    from fightlab.config import task_id
    from fightlab.measure.report import finish_run

    cfg = dataclasses.replace(_tiny_cfg(tmp_path / "r"), max_iterations=1)  # curriculum_wait=1: another task
    with Trainer(cfg, progress=False) as t:
        finish_run(t, t.train())
    out = capsys.readouterr().out
    assert out.count("fightlab: warning: this run changes the fixed task (curriculum_wait=1") == 1
    assert f"task={task_id(cfg)} (another task" in out
    row = results.read_rows("train", tmp_path / "r").iloc[-1]
    assert json.loads(row["params"])["task"] == task_id(cfg) != "default"


def test_a_policy_that_holds_the_pelvis_still_is_never_solved():
    """The tracking measure's honesty check: a pelvis held still (cancelling the bounce) has lock-in numerator
    Σdz·r − Σdz·Σr/n = dz·(Σr − Σr) = 0, so tracking 0: it survives every episode to the time
    limit and still never widens nor solves, however long it runs."""
    c = Curriculum(stages=(0.1, 1.0), wait=32)
    events = {c.update(_summary(falls=0, mean_s=10.0, tracking=0.0)) for _ in range(400)}
    assert events == {"wait", "hold"} and not c.solved and c.stage == 0
    c = Curriculum(stages=(1.0,), wait=32)
    assert "solved" not in {c.update(_summary(tracking=0.0)) for _ in range(400)}


def test_kl_target_is_per_action_by_default_and_fixed_when_set():
    from fightlab.config import ConfigError, coerce_field, validate_train
    from fightlab.rl.ppo import PPOUpdate
    d = PPOConfig()
    assert d.desired_kl is None and d.kl_target(37) == pytest.approx(37 * d.desired_kl_per_action)
    assert d.kl_target(83) == pytest.approx(83 * d.desired_kl_per_action)
    assert PPOConfig(desired_kl=0.01).kl_target(83) == 0.01  # a set target ignores nu
    # the update uses the target of its policy's action count
    agent = ActorCritic(4, 5, hidden=(8,), init_std=0.3)
    buf = RolloutStorage(2, 3, 4, 5, "cpu")
    opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
    upd = PPOUpdate(agent, opt, torch.tensor(1e-3), buf, PPOConfig(num_minibatches=1, desired_kl_per_action=0.01))
    assert upd.desired_kl == pytest.approx(0.05)
    # --set: a number, or null for the rule; anything else and out-of-range values are one-line errors
    assert coerce_field(PPOConfig, "desired_kl", "0.04") == 0.04
    assert coerce_field(PPOConfig, "desired_kl", "null") is None
    with pytest.raises(ConfigError, match="desired_kl must be a finite number"):
        coerce_field(PPOConfig, "desired_kl", "high")
    assert coerce_field(PPOConfig, "desired_kl", "None") is None
    with pytest.raises(ConfigError, match="or null"):
        coerce_field(PPOConfig, "desired_kl", "0.01x")
    for bad in (dict(desired_kl=0.0), dict(desired_kl_per_action=-1.0), dict(desired_kl_per_action=None),
                dict(desired_kl_per_action=0.5)):  # 0.5 × 83 actions: a KL target of 41.5
        with pytest.raises(ConfigError, match="PPOConfig.desired_kl"):
            validate_train(TrainConfig(body="simple", nworld=2, device="cpu", ppo=PPOConfig(**bad)))
    # a set desired_kl makes any per-action value moot: allowed (the CLI warns when both are given)
    validate_train(TrainConfig(body="simple", nworld=2, device="cpu",
                               ppo=PPOConfig(desired_kl=0.05, desired_kl_per_action=0.5)))


def test_the_per_action_bound_covers_the_biggest_body():
    from fightlab import bodies
    from fightlab.config import MAX_KL_PER_ACTION
    nus = {b: bodies.build(b).nu for b in bodies.BODIES}  # the policy's actions: one per actuator
    assert max(nus.values()) == bodies.max_nu() == 83 and MAX_KL_PER_ACTION * bodies.max_nu() <= 1.0


def test_train_warns_when_both_kl_fields_are_set(capsys):
    from fightlab.config import apply_overrides
    cfg = apply_overrides(TrainConfig(body="simple", nworld=2, device="cpu"),
                           ["ppo.desired_kl=0.05", "ppo.desired_kl_per_action=0.003"])
    assert cfg.ppo.kl_target(37) == 0.05
    assert "ppo.desired_kl_per_action is ignored: ppo.desired_kl=0.05" in capsys.readouterr().err
    apply_overrides(TrainConfig(body="simple", nworld=2, device="cpu"), ["ppo.desired_kl_per_action=0.003"])
    assert "ignored" not in capsys.readouterr().err


def test_network_size_bound_counts_the_models_parameters():
    """config.network_params, the bound's count, is ActorCritic's parameter count for a body's
    real observation size (the env's 13 + 3·nu layout)."""
    from fightlab.bodies import BODIES, build
    from fightlab.config import network_params
    from fightlab.envs.stance import OBS_FIXED, OBS_NBLOCK

    assert (OBS_FIXED, OBS_NBLOCK) == (13, 3)
    for name in BODIES:
        nu = build(name).nu
        for hidden in ((256, 128, 64), (7,)):
            model = ActorCritic(OBS_FIXED + OBS_NBLOCK * nu, nu, hidden)
            assert network_params(hidden, nu) == sum(p.numel() for p in model.parameters())


def test_a_build_announces_the_compile_once_per_body_and_device(tmp_path, monkeypatch, capsys):
    """One stderr line before the env is built (warp compiles its kernels then), also without a
    progress bar; an empty kernel cache says the compile is certain."""
    import warp as wp

    from fightlab import devices
    from fightlab.run import runner

    monkeypatch.setattr(devices, "_ANNOUNCED", set())
    Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=1), progress=False).close()
    err = capsys.readouterr().err
    assert err.count("compiling MuJoCo Warp kernels for simple on cpu: ") == 1, err
    assert runner.announce_compile("simple", "cpu") is None  # once per process and build
    monkeypatch.setattr(wp.config, "kernel_cache_dir", str(tmp_path / "no-cache"))
    line = runner.announce_compile("muscular-fast", "cpu", backend="cpu")
    assert line.startswith("compiling the env's warp kernels for muscular-fast on cpu: about a minute the "
                           "first time (warp's kernel cache is empty)")
    assert capsys.readouterr().err == line + "\n"


def test_the_loop_sees_the_task_only_through_the_door(tmp_path):
    """TrainLoop trains a task that offers nothing but the door's members (`VecEnv`'s and its
    captured form's, `CAPTURED`); the curriculum's statistics reach the row from the extras."""
    from fightlab.envs.task import StanceTask
    from fightlab.envs.vecenv import CAPTURED, VecEnv
    from fightlab.rl.loop import TrainLoop

    names = set(VecEnv.__annotations__) | set(CAPTURED) | {
        k for k, v in vars(VecEnv).items() if callable(v) and not k.startswith("_")}

    class Narrow:
        def __init__(self, env):
            self._env = env

        def __getattr__(self, k):
            if k not in names:
                raise AttributeError(f"the loop read env.{k}, which the door does not name")
            return getattr(self._env, k)

    cfg = _tiny_cfg(tmp_path)
    task = StanceTask(cfg)
    assert isinstance(task, VecEnv)
    loop = TrainLoop(cfg, Narrow(task))
    loop.warm_up()
    loop.capture()
    row = loop.iterate()
    assert (row["iteration"], row["env_steps"], loop.rows) == (1, 16, [row])
    assert set(loop.extras["summary"]) >= {"episodes", "falls", "overflow_worlds"}
    assert (row["stage"], row["event"]) == (loop.extras["curriculum"]["stage"], loop.extras["curriculum"]["event"])


def test_the_door_refuses_a_bad_config_in_one_line():
    """A library user's StanceTask checks each field's rule as the command line does."""
    from fightlab.config import ConfigError
    from fightlab.envs.task import StanceTask

    for bad in (PPOConfig(num_steps=0), PPOConfig(num_steps=-3)):
        with pytest.raises(ConfigError, match="num_steps") as e:
            StanceTask(TrainConfig(body="simple", nworld=4, device="cpu", ppo=bad))
        assert "\n" not in str(e.value)


def test_a_second_learner_drives_the_same_door(tmp_path):
    """A minimal REINFORCE-style learner (rsl_rl's calls only: get_observations, step) trains the
    task for 2 iterations and reads the curriculum's statistics from the extras."""
    import torch

    from fightlab.envs.task import StanceTask

    cfg = _tiny_cfg(tmp_path)
    env = StanceTask(cfg)
    torch.manual_seed(0)
    policy = torch.nn.Linear(env.get_observations()["policy"].shape[1], env.num_actions)
    log_std = torch.zeros(env.num_actions, requires_grad=True)
    opt = torch.optim.Adam([*policy.parameters(), log_std], lr=1e-3)
    seen = []
    for _ in range(2):
        logps, rewards = [], []
        obs = env.get_observations()["policy"]
        for _ in range(env.iteration_steps):
            dist = torch.distributions.Normal(policy(obs), log_std.exp())
            action = dist.sample()
            logps.append(dist.log_prob(action).sum(-1))
            obs, reward, done, extras = env.step(action.clamp(-1, 1))
            obs = obs["policy"].clone()
            rewards.append(reward.clone())
            assert extras["time_outs"].shape == (env.num_envs,)
        returns = torch.stack(rewards).flip(0).cumsum(0).flip(0)
        loss = -(torch.stack(logps) * (returns - returns.mean())).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.append(extras)  # the iteration's last step carries the task's check
    assert [e["curriculum"]["event"] for e in seen] in (["hold", "hold"], ["widen", "hold"], ["widen", "widen"],
                                                        ["hold", "widen"])
    assert all(e["episode"]["stage"] == e["curriculum"]["stage"] for e in seen)
    assert all(isinstance(e["log"]["/task/fall_rate"], float) for e in seen)
    assert env.curriculum.stage == seen[-1]["curriculum"]["stage"]


def test_every_further_summary_field_is_a_row_column():
    """A field the task adds to its summary reaches the row (and rows.csv) under its own name;
    the fields shown through derived columns do not."""
    from types import SimpleNamespace

    from fightlab.envs.task import SUMMARY_INPUTS, episode_stats
    from fightlab.rl.ppo import STATS
    from fightlab.rl.rows import iteration_row

    cfg = _tiny_cfg("unused")
    loop = SimpleNamespace(cfg=cfg, iteration=1, elapsed_s=1.0, graph_fallbacks=0,
                           env=SimpleNamespace(num_envs=cfg.nworld, substeps=4, graph_fallbacks=0))
    summary = dict.fromkeys(SUMMARY_INPUTS, 2.0) | dict.fromkeys(
        ("episodes", "nefc_overflow", "contact_overflow", "nan_resets", "solver_iter_hits",
         "solver_ls_hits", "contact_falls", "tilt_falls"), 1) | {"reward_new_term": 0.25}
    row = iteration_row(loop, episode_stats(summary), [0.5] * (len(STATS) + 1), 2.0, 1.0, 1.0, 0)
    assert row["reward_new_term"] == 0.25
    assert not SUMMARY_INPUTS & set(row)
    assert (row["fall_rate"], row["reward"], row["env_steps_per_s"]) == (2.0, 0.5, 8.0)


def test_an_optimizer_state_out_of_adams_ranges_is_refused_at_load(tmp_path):
    """Values torch's Adam would accept and turn into a NaN policy, or that another optimizer
    wrote: refused at load in one line naming the field."""
    import torch

    from fightlab.config import TrainConfig
    from fightlab.run.checkpoint import CheckpointError, load_checkpoint
    from fightlab.run.runner import Trainer

    cfg = TrainConfig(body="simple", nworld=2, device="cpu", seed=0, max_iterations=1,
                      run_dir=str(tmp_path / "run"))
    with Trainer(cfg, progress=False) as t:
        t.train()
    good = torch.load(tmp_path / "run" / "latest.pt", weights_only=False)

    def edited(fn):
        ck = copy.deepcopy(good)
        fn(ck["optimizer"])
        path = tmp_path / "bad.pt"
        torch.save(ck, path)
        return path

    first = lambda o: o["state"][0]  # noqa: E731
    cases = [
        (lambda o: first(o).__setitem__("exp_avg_sq", -first(o)["exp_avg_sq"] - 1), "exp_avg_sq of parameter 0"),
        (lambda o: first(o).__setitem__("step", torch.tensor(float("nan"))), "step of parameter 0"),
        (lambda o: o["param_groups"][0].__setitem__("lr", -1.0), "lr must be a number > 0"),
        (lambda o: o["param_groups"][0].__setitem__("eps", -1.0), "eps must be a number > 0"),
        (lambda o: o["param_groups"][0].__setitem__("betas", (2.0, 0.999)), "betas must be a pair of numbers in [0, 1)"),
        (lambda o: o["param_groups"][0].pop("lr"), "lr is missing"),
        (lambda o: o["param_groups"].extend([dict(o["param_groups"][0], params=[])] * 2), "3 parameter groups"),
        (lambda o: o["param_groups"].append(dict(o["param_groups"][0], params=[])),
         "the second parameter group lists 0 parameters, the critic has 8"),
    ]
    for fn, expect in cases:
        with pytest.raises(CheckpointError, match=re.escape(expect)):
            load_checkpoint(edited(fn))
    load_checkpoint(tmp_path / "run" / "latest.pt")  # the untouched one loads


def test_the_asymmetric_critic_sees_the_privileged_observation_and_resumes(tmp_path):
    """`ppo.critic_obs="privileged"`: the env writes the privileged observation (the push acting
    now, the time to the next, the time into the episode, every DOF's velocity), the critic reads
    it beside the policy's observation (its own normaliser), the actor is unchanged in shape; a
    resume gives the same next row; the evaluation of its checkpoint loads the policy."""
    from fightlab.envs.stance import PRIV_EPISODE, PRIV_FIXED, PRIV_PUSH_LEFT, StanceEnv
    from fightlab.run.evaluate import evaluate

    env = StanceEnv("simple", 4, "cpu", seed=3, privileged=True)
    env.reset(stagger=False)
    assert env.priv_obs.shape == (4, PRIV_FIXED + env.mjm.nv) == (4, env.privileged_dim)
    assert torch.all(env.priv_obs[:, PRIV_EPISODE] == 0) and torch.all(env.priv_obs[:, PRIV_PUSH_LEFT] == 0)
    for _ in range(3):
        env.step()
    assert torch.allclose(env.priv_obs[:, PRIV_EPISODE], torch.full((4,), 3 / env.cfg.episode_steps))
    qvel = torch.as_tensor(env.d.qvel.numpy())
    assert torch.allclose(env.priv_obs[:, PRIV_FIXED:], 0.1 * qvel) and qvel.abs().max() > 0
    assert StanceEnv("simple", 2, "cpu").priv_obs.shape == (2, 0)

    cfg = dataclasses.replace(_tiny_cfg(tmp_path / "a"), ppo=PPOConfig(num_steps=4, num_minibatches=2,
                                                                       update_epochs=1, critic_obs="privileged"))
    a = Trainer(cfg, progress=False)
    a.train()
    a.close()
    nobs = a.env.obs_dim
    assert a.agent.critic[0].in_features == nobs + a.env.privileged_dim and a.agent.actor[0].in_features == nobs
    assert a.buf.priv.abs().sum() > 0 and a.agent.priv_norm.count > 0
    b = Trainer(dataclasses.replace(cfg, run_dir=str(tmp_path / "b"), resume=_copied(tmp_path / "a" / "ckpt_000001.pt",
                                                                                    tmp_path / "b")),
                progress=False)
    b.train()
    for k in DETERMINISTIC:
        x, y = a.rows[1][k], b.rows[0][k]
        assert (x == y) or (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=1e-7), k
    res = evaluate(tmp_path / "a" / "latest.pt", nworld=2, device="cpu", progress=False)
    assert res["episodes_per_world"] == 1.0 and 0 <= res["fall_rate"] <= 1


def test_critic_obs_bad_value_is_one_line(capsys):
    from fightlab.cli import main

    assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", "ppo.critic_obs=oracle"]) == 2
    err = capsys.readouterr().err
    assert "PPOConfig.critic_obs must be one of policy, privileged, got 'oracle'" in err
    assert len(err.strip().splitlines()) == 1, err
    for typed in ("1", "[1]"):  # not a string in JSON: still the choices
        assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress", "--set", f"ppo.critic_obs={typed}"]) == 2
        assert f"PPOConfig.critic_obs must be one of policy, privileged, got '{typed}'" in capsys.readouterr().err


def test_the_critic_learning_rate_is_a_group_of_its_own_apart_from_the_kl_rule(tmp_path):
    """`ppo.critic_learning_rate`: the critic's parameters in Adam's second group at that fixed
    rate while the KL rule moves the actor's; both networks learn; the checkpoint holds both
    groups and a resume gives the same next row; the default (None) is one group, as before."""
    from fightlab.run.checkpoint import load_checkpoint
    from fightlab.rl.ppo import make_optimizer, optimizer_order

    agent = ActorCritic(6, 2, hidden=(8, 8))
    opt, lr = make_optimizer(agent, 1e-3, "cpu")
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["lr"] is lr
    opt, lr = make_optimizer(agent, 1e-3, "cpu", critic_learning_rate=5e-3)
    names = [n for n, _ in agent.named_parameters()]
    assert [len(g["params"]) for g in opt.param_groups] == [7, 6]  # 3 layers × (weight, bias) + log-std; 3 layers
    assert opt.param_groups[0]["lr"] is lr and opt.param_groups[1]["lr"] == 5e-3
    assert optimizer_order(names, 2)[-6:] == [n for n in names if n.startswith("critic.")]
    with pytest.raises(ValueError, match="one or two parameter groups, got 3"):
        optimizer_order(names, 3)

    # a KL target far below any step: the rule cuts the actor's rate every epoch, never the critic's
    ppo = PPOConfig(num_steps=4, num_minibatches=2, update_epochs=3, desired_kl=1e-9, critic_learning_rate=5e-3)
    cfg = dataclasses.replace(_tiny_cfg(tmp_path / "a"), ppo=ppo)
    a = Trainer(cfg, progress=False)
    critic0 = [p.detach().clone() for p in a.agent.critic.parameters()]
    a.train()
    a.close()
    groups = a.optimizer.param_groups
    assert len(groups) == 2 and groups[1]["lr"] == 5e-3
    assert float(a.lr) == pytest.approx(1e-3 / 1.5 ** 6)  # 2 iterations × 3 epochs, each ÷ 1.5
    assert a.rows[-1]["learning_rate"] == pytest.approx(float(a.lr))  # the rows report the actor's
    assert all(not torch.equal(p0, p) for p0, p in zip(critic0, a.agent.critic.parameters()))
    ck = load_checkpoint(tmp_path / "a" / "ckpt_000001.pt")  # two groups pass the file's checks
    assert [len(g["params"]) for g in ck["optimizer"]["param_groups"]] == [len(list(a.agent.actor.parameters())) + 1,
                                                                           len(list(a.agent.critic.parameters()))]
    # a file whose groups and config disagree is refused in one line, before any resume
    from fightlab.run.checkpoint import CheckpointError

    def edited(fn, name):
        bad = copy.deepcopy(ck)
        fn(bad)
        torch.save(bad, tmp_path / name)
        return tmp_path / name

    for fn, expect in (
            (lambda c: c["config"]["ppo"].__setitem__("critic_learning_rate", None),
             "2 parameter group(s), but the config's ppo.critic_learning_rate None makes 1"),
            (lambda c: c["optimizer"]["param_groups"][1].__setitem__("lr", 0.02),
             "the critic's group runs at 0.02, the config's ppo.critic_learning_rate is 0.005")):
        with pytest.raises(CheckpointError, match=re.escape(expect)):
            load_checkpoint(edited(fn, "bad.pt"))
    b = Trainer(dataclasses.replace(cfg, run_dir=str(tmp_path / "b"), resume=_copied(tmp_path / "a" / "ckpt_000001.pt",
                                                                                    tmp_path / "b")),
                progress=False)
    b.train()
    assert b.optimizer.param_groups[1]["lr"] == 5e-3 and float(b.lr) == pytest.approx(float(a.lr))
    for k in DETERMINISTIC:
        x, y = a.rows[1][k], b.rows[0][k]
        assert (x == y) or (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=1e-7), k


def test_critic_learning_rate_bad_values_are_one_line_and_the_default_keeps_ids(capsys):
    from fightlab.cli import main
    from fightlab.config import apply_overrides, to_dict
    from fightlab.measure.report import config_id, learner_id

    for typed in ("0", "-0.001", "2", "abc", "inf"):
        assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress",
                     "--set", f"ppo.critic_learning_rate={typed}"]) == 2, typed
        err = capsys.readouterr().err
        assert "PPOConfig.critic_learning_rate must be" in err and typed in err, (typed, err)
        assert len(err.strip().splitlines()) == 1, err
    cfg = TrainConfig()
    assert cfg.ppo.critic_learning_rate is None
    assert apply_overrides(cfg, ["ppo.critic_learning_rate=none"]) == cfg
    assert apply_overrides(cfg, ["ppo.critic_learning_rate=1e-3"]).ppo.critic_learning_rate == 1e-3
    # a row written before the field existed has the same ids as today's default
    old = to_dict(cfg)
    old["ppo"] = {k: v for k, v in old["ppo"].items() if k != "critic_learning_rate"}
    assert config_id(old) == config_id(to_dict(cfg)) and learner_id(old) == learner_id(to_dict(cfg))
    set_ = to_dict(apply_overrides(cfg, ["ppo.critic_learning_rate=1e-3"]))
    assert learner_id(set_) != learner_id(to_dict(cfg))


def test_matmul_precision_is_a_learner_field_that_never_leaks(tmp_path, capsys, monkeypatch):
    """`ppo.matmul_precision`: the policy's forward passes and the update run at the learner's
    precision, a checkpoint's policy at the one it trained with, and the process's setting is put
    back after each: two trainers built before either trains, or an evaluation between building
    and training, each still run at their own (the rows' params say what ran). Bad values are one
    line; the default keeps the ids of rows written before the field."""
    from fightlab.cli import main
    from fightlab.config import apply_overrides, to_dict
    from fightlab.measure.report import config_id, learner_id
    from fightlab.rl import models
    from fightlab.run.checkpoint import load_checkpoint, policy_agent

    for typed in ("medium", "tf32", "1", "null"):
        assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress",
                     "--set", f"ppo.matmul_precision={typed}"]) == 2, typed
        err = capsys.readouterr().err
        assert "PPOConfig.matmul_precision must be one of highest, high, got" in err, (typed, err)
        assert len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match="matmul precision must be one of highest, high, got 'medium'"):
        with models.matmul_precision("medium"):
            pass
    with pytest.raises(ValueError, match="got 'medium'"):
        ActorCritic(6, 2, matmul_precision="medium")
    cfg = TrainConfig()
    assert cfg.ppo.matmul_precision == "highest"
    old = to_dict(cfg)
    old["ppo"] = {k: v for k, v in old["ppo"].items() if k != "matmul_precision"}
    assert config_id(old) == config_id(to_dict(cfg)) and learner_id(old) == learner_id(to_dict(cfg))
    high = apply_overrides(cfg, ["ppo.matmul_precision=high"])
    assert high.ppo.matmul_precision == "high" and learner_id(to_dict(high)) != learner_id(to_dict(cfg))

    # every matmul the learners run records the precision it ran at
    seen = []
    linear = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear",
                        lambda *a, **k: seen.append(torch.get_float32_matmul_precision()) or linear(*a, **k))
    before = torch.get_float32_matmul_precision()
    tiny = PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1)
    hi = Trainer(dataclasses.replace(_tiny_cfg(tmp_path / "hi"), ppo=dataclasses.replace(tiny, matmul_precision="high")),
                 progress=False)
    lo = Trainer(_tiny_cfg(tmp_path / "lo"), progress=False)  # built after hi, trained after it
    assert torch.get_float32_matmul_precision() == before
    seen.clear()
    hi.train()
    hi.close()
    assert seen and set(seen) == {"high"}, set(seen)
    ck = load_checkpoint(tmp_path / "hi" / "latest.pt")
    assert ck["config"]["ppo"]["matmul_precision"] == "high"
    agent = policy_agent(ck, hi.env, "cpu")  # the policy's products as it trained
    seen.clear()
    agent.act_mean(hi.env.obs)
    assert set(seen) == {"high"} and torch.get_float32_matmul_precision() == before
    seen.clear()
    lo.train()
    lo.close()
    assert seen and set(seen) == {"highest"}, set(seen)
    assert torch.get_float32_matmul_precision() == before


def test_gaussian_kl_is_the_closed_form_and_zero_for_the_same_policy():
    from fightlab.rl.ppo import gaussian_kl

    g = torch.Generator().manual_seed(0)
    m0, m1 = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    ls0, s1 = torch.randn(3, generator=g) * 0.3, torch.rand(5, 3, generator=g) + 0.5
    got = gaussian_kl(m0, ls0, m1, s1)
    want = torch.distributions.kl_divergence(torch.distributions.Normal(m0, ls0.exp().expand_as(m0)),
                                             torch.distributions.Normal(m1, s1)).sum(-1)
    assert got.shape == (5,) and torch.allclose(got, want, atol=1e-6)
    assert torch.allclose(gaussian_kl(m0, ls0, m0, ls0.exp().expand_as(m0)), torch.zeros(5), atol=1e-6)


def test_the_analytic_kl_drives_the_rate_and_is_a_learner_field(tmp_path, capsys):
    """`ppo.kl_estimator="analytic"`: the rollout keeps its action means, the update's KL is the
    closed form against them (0 before the first step: the first minibatch of a fresh policy),
    the rule reads it; the default "k3" keeps every row's id; bad values are one line."""
    from fightlab.cli import main
    from fightlab.config import apply_overrides, to_dict
    from fightlab.measure.report import config_id, learner_id
    from fightlab.rl.ppo import PPOUpdate, make_optimizer
    from fightlab.rl.storage import RolloutStorage

    for typed in ("exact", "1", "K3"):
        assert main(["train", "--device", "cpu", "--nworld", "2", "--no-progress",
                     "--set", f"ppo.kl_estimator={typed}"]) == 2, typed
        err = capsys.readouterr().err
        assert f"PPOConfig.kl_estimator must be one of k3, analytic, got '{typed}'" in err, err
        assert len(err.strip().splitlines()) == 1, err
    cfg = TrainConfig()
    old = to_dict(cfg)
    old["ppo"] = {k: v for k, v in old["ppo"].items() if k != "kl_estimator"}
    assert config_id(old) == config_id(to_dict(cfg)) and learner_id(old) == learner_id(to_dict(cfg))
    an = apply_overrides(cfg, ["ppo.kl_estimator=analytic"])
    assert learner_id(to_dict(an)) != learner_id(to_dict(cfg))

    agent = ActorCritic(6, 2, hidden=(8, 8))
    with pytest.raises(ValueError, match="needs a RolloutStorage built with keep_means=True"):
        PPOUpdate(agent, *make_optimizer(agent, 1e-3, "cpu"), RolloutStorage(4, 2, 6, 2, "cpu"),
                  PPOConfig(kl_estimator="analytic"))

    # a KL target far below any step: the analytic KL > 0 after the first step cuts the rate each epoch
    ppo = PPOConfig(num_steps=4, num_minibatches=2, update_epochs=3, desired_kl=1e-9, kl_estimator="analytic")
    a = Trainer(dataclasses.replace(_tiny_cfg(tmp_path / "a"), ppo=ppo), progress=False)
    assert a.buf.means.shape == a.buf.actions.shape
    a.train()
    a.close()
    assert a.buf.means.abs().sum() > 0
    assert float(a.lr) == pytest.approx(1e-3 / 1.5 ** 6)
    assert all(0 <= r["approx_kl"] < 1 for r in a.rows)
    # the KL the update reads is the closed form against the rollout's means: means stored δ away
    # from the policy's, one minibatch read before its step: 2 actions × δ² / (2σ²)
    from fightlab.rl.ppo import ppo_update

    torch.manual_seed(0)
    agent = ActorCritic(6, 2, hidden=(8, 8), init_std=0.3)
    buf = RolloutStorage(4, 2, 6, 2, "cpu", keep_means=True)
    buf.obs.normal_()
    buf.actions.normal_()
    buf.advantages.normal_()
    buf.returns.normal_()
    with torch.no_grad():
        mean = agent.get_action_and_value(buf.obs.reshape(8, 6))[4].reshape(4, 2, 2)
    buf.means.copy_(mean + 0.1)
    opt, lr = make_optimizer(agent, 1e-3, "cpu")
    st = ppo_update(agent, opt, buf, PPOConfig(num_minibatches=1, update_epochs=1, kl_estimator="analytic",
                                               adaptive_lr=False), lr=lr)
    assert st["approx_kl"] == pytest.approx(2 * 0.1 ** 2 / (2 * 0.3 ** 2), rel=1e-4)
    assert Trainer(_tiny_cfg(tmp_path / "b"), progress=False).buf.means.shape[-1] == 0  # k3 keeps none


# --- the gate: each field's rule once, one validation, one publish rule -----------------------

def test_each_config_field_declares_its_rule_once_beside_it():
    """Every field of EnvConfig, PPOConfig and TrainConfig carries its rule (`config.Rule` in its
    metadata: a check, a nested config, or a rule across fields); the functions that check
    configs name no field by its quoted name (the old way of listing fields to check), so a
    field's rule is written once, beside it, and the walker and the cross rules read it."""
    import inspect

    from fightlab import config

    names = set()
    for cls in (config.EnvConfig, PPOConfig, TrainConfig):
        for f in dataclasses.fields(cls):
            rule = f.metadata.get("rule")
            assert isinstance(rule, config.Rule), f"{cls.__name__}.{f.name} has no rule"
            assert rule.check is not None or rule.cross or rule.kind == "config", f.name
            names.add(f.name)
    for fn in (config.check_fields, config.check_cross, config.validate_env, config.validate_train,
               config.validate_layout, config.validate_policy_device):
        src = inspect.getsource(fn)
        assert not [n for n in names if re.search(rf"[\"']{n}[\"']", src)], fn.__name__
    # a cross rule's field is judged by check_cross, which reads it as an attribute
    cross = [f.name for cls in (config.EnvConfig, PPOConfig, TrainConfig) for f in dataclasses.fields(cls)
             if f.metadata["rule"].cross]
    assert cross and all(f".{n}" in inspect.getsource(config.check_cross) for n in cross)


def test_every_rule_refuses_a_bad_value_in_one_line():
    from fightlab import config

    for cls in (config.EnvConfig, PPOConfig, TrainConfig):
        for f in dataclasses.fields(cls):
            rule = f.metadata["rule"]
            if rule.check is None:
                continue
            with pytest.raises(config.ConfigError) as e:
                rule.check(f"{cls.__name__}.{f.name}", object())
            msg = str(e.value)
            assert "\n" not in msg and (" got " in msg or "unknown body" in msg), f.name


def test_the_reward_weight_fields_are_the_reward_terms_weights():
    """The reward terms (envs.stance.REWARD_TERMS) name their weight fields; EnvConfig declares
    each with its rule (a number >= 0), and no weight field lacks its term."""
    from fightlab.config import EnvConfig, validate_env
    from fightlab.envs.stance import REWARD_TERMS

    named = {t.weight for t in REWARD_TERMS if isinstance(t.weight, str)}
    weights = {f.name for f in dataclasses.fields(EnvConfig) if f.name.startswith("w_")}
    assert named == weights
    for name in named:
        with pytest.raises(ValueError, match=rf"EnvConfig.{name} must be a number >= 0, got -1"):
            validate_env(dataclasses.replace(EnvConfig(), **{name: -1}))


def test_one_gate_validates_once_and_applies_the_publish_rule_once(monkeypatch):
    """A train request passes the gate (run.launch.plan_run) once: one validation, one publish
    rule, whatever the path (here a fresh run and a refused --publish)."""
    from fightlab.config import ConfigError
    from fightlab.run import launch

    calls = []
    real_validate, real_publish = launch.validate_train, launch.refuse_publish
    monkeypatch.setattr(launch, "validate_train", lambda cfg: calls.append("validate") or real_validate(cfg))
    monkeypatch.setattr(launch, "refuse_publish", lambda *a, **k: calls.append("publish") or real_publish(*a, **k))
    plan = launch.plan_training(launch.TrainRequest(body="simple", nworld="4", device="cpu", seed=2))
    assert calls == ["validate", "publish"] and plan.start == "fresh" and not plan.publish
    assert plan.cfg.nworld == 4 and plan.cfg.seed == 2
    calls.clear()
    with pytest.raises(ConfigError, match="device 'cpu' is not a GPU"):
        launch.plan_training(launch.TrainRequest(nworld=512, device="cpu", publish=True))
    assert calls == ["validate", "publish"]


def test_the_run_validation_and_the_train_publish_rule_have_one_caller():
    """`validate_train(` is called in one place in fightlab/ (the gate), and the train path
    (the command line, rl/, run/, the training row) applies the publish rule in the gate alone
    (evaluate's rows have their own call)."""
    from pathlib import Path

    import fightlab

    pkg = Path(fightlab.__file__).parent

    def callers(needle, files):
        return [(p.relative_to(pkg).as_posix(), ln.strip()) for p in files
                for ln in p.read_text().splitlines() if needle in ln and "def " not in ln]

    assert [p for p, _ in callers("validate_train(", pkg.rglob("*.py"))] == ["run/launch.py"]
    train_path = [pkg / "cli.py", pkg / "measure" / "report.py",
                  *sorted((pkg / "rl").glob("*.py")), *sorted((pkg / "run").glob("*.py"))]
    lines = [ln for _, ln in callers("refuse_publish(", train_path)]
    assert len(lines) == 2 and lines[0].startswith("refuse_publish(publish_plans(args))"), lines
    assert lines[1].startswith('refuse_publish([dict(publish=publish, device=checked.device, what="the training row"'), lines


def test_the_publish_rule_is_evaluated_from_at_most_two_places():
    """`publish.check_publish` is called from two places in fightlab/: before any work
    (`publish.refuse_publish`, for the command line and the run's gate) and at write time
    (`results.files.check_committed`)."""
    import ast
    from pathlib import Path

    import fightlab

    pkg = Path(fightlab.__file__).parent
    sites = [f"{p.relative_to(pkg).as_posix()}:{n.lineno}" for p in sorted(pkg.rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Call)
             and getattr(n.func, "id", getattr(n.func, "attr", None)) == "check_publish"]
    assert len(sites) <= 2 and {s.split(":")[0] for s in sites} == {"publish.py", "results/files.py"}, sites


def test_a_train_flag_is_declared_once():
    """train's flags are one table (run.launch.TRAIN_FLAGS): the parser, the request, the fields
    `--set` refuses and the config are made from it."""
    import argparse

    from fightlab.config import ConfigError
    from fightlab.run import launch

    assert [f.name for f in dataclasses.fields(launch.TrainRequest)] == [f.name for f in launch.TRAIN_FLAGS]
    assert set(launch.FLAG_FIELDS) <= {f.name for f in dataclasses.fields(TrainConfig)}
    p = argparse.ArgumentParser()
    for f in launch.TRAIN_FLAGS:
        p.add_argument(f.option, **f.argparse)
    req = launch.request_from_args(p.parse_args(["--nworld", "4", "--device", "cpu", "--seed", "5",
                                                 "--checkpoint-every", "0", "--no-env-graph",
                                                 "--set", "ppo.num_steps=4"]))
    cfg = launch.plan_training(req).cfg
    assert (cfg.nworld, cfg.seed, cfg.checkpoint_every, cfg.graph, cfg.ppo.num_steps) == (4, 5, 0, False, 4)
    with pytest.raises(ConfigError, match=r"--set seed=… is refused: 'seed' has its own flag \(--seed\)"):
        launch.plan_overrides(TrainConfig(), ["seed=3"])
    with pytest.raises(ConfigError, match=r"has its own flag \(--no-tree-factor\)"):
        launch.plan_overrides(TrainConfig(), ["tree_factor=false"])


def test_the_trainer_trusts_its_plan(tmp_path, monkeypatch):
    """A Trainer given the gate's plan validates nothing again (the env keeps its own cheap
    checks for direct library users)."""
    from fightlab.config import apply_overrides
    from fightlab.run import launch

    plan = launch.plan_run(apply_overrides(TrainConfig(body="simple", nworld=2, device="cpu", max_iterations=1,
                                                       run_dir=str(tmp_path / "run")), ["ppo.num_steps=4"]))

    def again(*a, **k):
        raise AssertionError("validated again")

    monkeypatch.setattr(launch, "validate_train", again)
    monkeypatch.setattr(launch, "refuse_publish", again)
    with Trainer(plan, progress=False) as t:
        assert t.cfg == plan.cfg and t.publish is False


def test_a_time_limit_ends_the_run_unsolved(tmp_path):
    """time_limit_s ends a run once its training time reaches it: the run stops after the
    iteration that crossed it, unsolved, with its rows and checkpoint, and the limit in its config."""
    from fightlab.config import apply_overrides

    cfg = apply_overrides(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=50), ["time_limit_s=1e-9"])
    with Trainer(cfg, progress=False) as t:
        res = t.train()
    assert res["iterations"] == 1 and not res["solved"] and res["elapsed_s"] >= 1e-9
    assert (tmp_path / "latest.pt").exists() or any(tmp_path.rglob("latest.pt"))
    for bad in ("-1", "0", "abc"):
        with pytest.raises(ConfigError, match="time_limit_s"):
            from fightlab.config import validate_train

            validate_train(apply_overrides(_tiny_cfg(tmp_path), [f"time_limit_s={bad}"]))


def test_a_diverged_update_stops_the_run_and_writes_no_checkpoint_of_it(tmp_path, monkeypatch, capsys):
    """Non-finite update values (read in the iteration's one host read) stop the run with one
    line; a checkpoint of non-finite weights is refused, the last finite checkpoint kept."""
    from fightlab.cli import main
    from fightlab.errors import Diverged
    from fightlab.rl import ppo as P

    t = Trainer(_tiny_cfg(tmp_path / "a"), progress=False)
    t.train()  # 2 finite iterations, a checkpoint each
    kept = sorted(p.name for p in (tmp_path / "a").glob("ckpt_*.pt"))
    with torch.no_grad():
        t.agent.actor_logstd.fill_(float("nan"))
    with pytest.raises(Diverged, match="iteration 2: the agent's actor_logstd are not all finite.*start a new run"):
        t.save()
    t.close()
    assert sorted(p.name for p in (tmp_path / "a").glob("ckpt_*.pt")) == kept and not list((tmp_path / "a").glob("*.tmp"))

    real = P.PPOUpdate.run

    def nan_after_first(self):  # the second update's losses come out non-finite
        real(self)
        if getattr(self, "_ran", False):
            self.stats[0] = float("nan")
        self._ran = True

    monkeypatch.setattr(P.PPOUpdate, "run", nan_after_first)
    run = tmp_path / "b"
    argv = ["train", "--body", "simple", "--nworld", "4", "--device", "cpu", "--max-iterations", "3",
            "--run-dir", str(run), "--checkpoint-every", "1", "--no-graph", "--no-progress",
            "--set", "ppo.num_steps=4", "--set", "ppo.num_minibatches=2", "--set", "ppo.update_epochs=1"]
    assert main(argv) == 1
    err = [e for e in capsys.readouterr().err.strip().splitlines() if e.startswith("fightlab: error")]
    assert len(err) == 1 and err[0].startswith("fightlab: error: iteration 2: the update's policy_loss nan"), err
    from fightlab.run.runner import check_update_finite

    with pytest.raises(Diverged, match="the update's rsl_value inf"):  # rsl_rl's losses too
        check_update_finite(dict(iteration=3, rsl_value=float("inf"), rsl_surrogate=0.1, learning_rate=1e-3))
    check_update_finite(dict(iteration=3, rsl_value=0.2, reward=float("nan")))  # not an update value
    assert sorted(p.name for p in run.glob("ckpt_*.pt")) == ["ckpt_000001.pt"]


def test_mirrored_samples_keep_their_originals_log_probability():
    """"augment" with a strongly asymmetric policy (mirrored actions far in its tails): the
    mirrored samples' ratio is taken against the original's log-probability, so 12 Adam steps
    leave every weight finite (recomputed under the old policy, those log-probabilities were so
    low that the ratio overflowed float32)."""
    from fightlab.rl.ppo import make_optimizer

    torch.manual_seed(0)
    n_obs, n_act = 4, 4
    agent = ActorCritic(n_obs, n_act, hidden=(8, 8), init_std=0.05)
    with torch.no_grad():
        agent.actor[-1].bias.copy_(torch.tensor([2.0, -2.0, 1.5, -1.5]))  # far from its mirror
    swap = (torch.tensor([1, 0, 3, 2]), torch.ones(4))
    buf = RolloutStorage(8, 16, n_obs, n_act, "cpu")
    buf.obs.normal_()
    with torch.no_grad():
        mean = agent.act_mean(buf.obs.reshape(-1, n_obs))
        act = mean + 0.05 * torch.randn_like(mean)
        buf.actions.copy_(act.reshape(buf.actions.shape))
        buf.logprobs.copy_(agent.get_action_and_value(buf.obs.reshape(-1, n_obs), act)[1].reshape(buf.logprobs.shape))
    buf.advantages.normal_()
    buf.returns.normal_()
    cfg = PPOConfig(num_steps=8, num_minibatches=4, update_epochs=3, symmetry="augment", learning_rate=1e-2)
    opt, lr = make_optimizer(agent, cfg.learning_rate, "cpu")
    stats = ppo_update(agent, opt, buf, cfg, lr=lr, mirror=dict(policy=swap, critic=(torch.zeros(0, dtype=torch.long),
                                                                                     torch.zeros(0)), actions=swap))
    assert all(math.isfinite(v) for v in stats.values()), stats
    assert all(bool(torch.isfinite(p).all()) for p in agent.parameters())


def test_a_resumed_run_whose_segments_ran_another_newton_solve_is_mixed(tmp_path, monkeypatch):
    """Each segment records the Newton solve its engine ran; a run resumed where another solve
    ran (a GPU's single launch, then warp's CPU device) is marked mixed, not one setup's."""
    import json

    from fightlab.measure.report import train_row

    monkeypatch.setenv("FIGHTLAB_COMMIT", "aaa1111")
    Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=1), progress=False).train()
    b = Trainer(dataclasses.replace(_tiny_cfg(tmp_path), max_iterations=2,
                                    resume=str(tmp_path / "latest.pt")), progress=False)
    res = b.train()
    p = json.loads(train_row(b, res)["params"])
    loops = [s["solver_loop"] for s in p["segments"]]
    assert loops[0] == loops[1] == p["physics_engine"]["solver_loop"] and "mixed_segments" not in p
    b.segments[0]["solver_loop"] = "single_launch"
    assert json.loads(train_row(b, res)["params"])["mixed_segments"] is True


def test_the_library_task_refuses_a_cross_field_mistake_in_one_line():
    """StanceTask built from a library call (not through the run's gate) applies the rules across
    fields too: MuJoCo Warp's solver loop with the CPU backend's C engine is refused, one line."""
    from fightlab.config import ConfigError
    from fightlab.envs.task import StanceTask

    cfg = TrainConfig(body="simple", nworld=2, device="cpu", backend="cpu", solver_loop="single_launch")
    with pytest.raises(ConfigError, match="solver_loop 'single_launch' is MuJoCo Warp's") as e:
        StanceTask(cfg)
    assert "\n" not in str(e.value)


def test_a_library_config_of_the_wrong_type_is_refused_in_one_line():
    """A TrainConfig whose env or ppo is not its config class (None, a dict), or a task built from
    a dict, is refused with one ConfigError line naming the field, not a TypeError."""
    from fightlab.config import ConfigError
    from fightlab.envs.task import StanceTask

    for kw, msg in ((dict(env=None), "env must be of type EnvConfig, got None"),
                    (dict(env={"timestep": 0.004}), "env must be of type EnvConfig"),
                    (dict(ppo={"num_steps": 32}), "ppo must be of type PPOConfig")):
        with pytest.raises(ConfigError, match=msg) as e:
            StanceTask(TrainConfig(body="simple", nworld=2, device="cpu", **kw))
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="a config must be a TrainConfig"):
        StanceTask({"body": "simple"})
