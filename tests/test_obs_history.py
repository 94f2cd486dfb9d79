"""`ppo.obs_history`: the policy's input the last H observations stacked newest first, a reset
world's history its new first observation, the rollout keeping what the policy saw, the buffer
in checkpoints, mirrored block by block; H = 1 today's learner; its refusals one line each."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import warp as wp

from fightlab.config import ConfigError, EnvConfig, PPOConfig, TrainConfig, apply_overrides, to_dict, validate_train
from fightlab.rl.history import ObsHistory, mirror_blocks
from fightlab.rl.ppo import mirror
from fightlab.run.runner import Trainer

CUDA = torch.cuda.is_available() and wp.get_cuda_device_count() > 0

#: 4-step episodes (staggered): every world resets within a rollout of 8 steps
SHORT = EnvConfig(episode_s=0.08)


def _cfg(tmp_path, name="run", H=3, **kw):
    if "env" in kw:
        kw.setdefault("min_episode_s", 0.0)
    base = dict(body="simple", nworld=4, device="cpu", seed=5, max_iterations=2, checkpoint_every=0,
                run_dir=str(tmp_path / name), stop_when_solved=False, stop_after_stage=0,
                ppo=PPOConfig(num_steps=8, num_minibatches=2, update_epochs=1, obs_history=H))
    base.update(kw)
    return TrainConfig(**base)


def _rows(cfg) -> list[dict]:
    with Trainer(cfg, progress=False) as t:
        rows = t.train()["rows"]
    return [{k: v for k, v in r.items() if not k.endswith("_s") and k not in ("env_steps_per_s", "physics_steps_per_s")}
            for r in rows]


def test_the_history_shifts_newest_first_and_a_done_world_refills():
    """`ObsHistory` by hand: three pushes hold the last three observations newest first; a done
    world's blocks are all its new observation, the other world's shift on."""
    h = ObsHistory(nworld=2, obs_dim=2, H=3, device="cpu")
    o = lambda v: torch.tensor([[v, -v], [10 + v, -10 - v]])  # noqa: E731
    h.fill(o(0.0))
    assert h.stacked.tolist() == [[0, 0] * 3, [10, -10] * 3]
    for v in (1.0, 2.0):
        h.push(o(v), torch.zeros(2))
    assert h.stacked[0].tolist() == [2, -2, 1, -1, 0, 0] and h.stacked[1].tolist() == [12, -12, 11, -11, 10, -10]
    h.push(o(3.0), torch.tensor([0.0, 1.0]))
    assert h.stacked[0].tolist() == [3, -3, 2, -2, 1, -1] and h.stacked[1].tolist() == [13, -13] * 3


def test_the_rollout_keeps_the_stacked_input_and_resets_refill(tmp_path):
    """A training with H = 3 and 4-step episodes: at every step of the rollout the stored input's
    newest block is the env's observation, the older blocks are the previous step's shifted
    (the last three observations newest first), and after a world's done every block is its new
    episode's first observation; the first step after the start is the first observation ×3."""
    with Trainer(_cfg(tmp_path, env=SHORT, max_iterations=1), progress=False) as t:
        t.train()
        obs, dones = t.buf.obs.view(8, 4, 3, -1), t.buf.dones
        D = t.env.obs_dim
    assert obs.shape[-1] == D and t.agent.obs_history == 3
    assert torch.equal(obs[0], obs[0, :, :1].expand_as(obs[0]))  # the start: its observation ×3
    resets = 0
    for s in range(1, 8):
        for w in range(4):
            if dones[s - 1, w]:
                resets += 1
                assert torch.equal(obs[s, w], obs[s, w, :1].expand(3, D)), (s, w)
            else:
                assert torch.equal(obs[s, w, 1:], obs[s - 1, w, :2]), (s, w)
                assert not torch.equal(obs[s, w, 0], obs[s - 1, w, 0]), (s, w)  # a new observation
    assert resets >= 4  # every world reset at least once


def test_one_observation_is_todays_learner(tmp_path):
    """H = 1 (the default) builds no history: the buffer and the networks' inputs are obs_dim
    wide, and a training's rows are those of a config that never names the field. (The golden
    rows, tests/test_golden.py, hold it to the bits of the code before it.)"""
    cfg = _cfg(tmp_path, "a", H=1, max_iterations=2)
    assert PPOConfig().obs_history == 1 and TrainConfig(body="muscular-fast").ppo.obs_history == 1
    with Trainer(cfg, progress=False) as t:
        assert t.obs_hist is None and t.buf.obs.shape[-1] == t.env.obs_dim
        assert t.agent.actor[0].in_features == t.env.obs_dim == t.agent.critic[0].in_features
    plain = dataclasses.replace(cfg, run_dir=str(tmp_path / "b"),
                                ppo=PPOConfig(num_steps=8, num_minibatches=2, update_epochs=1))
    assert _rows(cfg) == _rows(plain)


def test_a_checkpoint_keeps_the_history_and_a_resume_goes_on_as_if_never_stopped(tmp_path):
    """A checkpoint holds the history as the run left it; a run resumed from it at iteration 2
    writes the rows of the run that never stopped (bit for bit, warp's CPU device)."""
    whole = _rows(_cfg(tmp_path, "whole", env=SHORT, max_iterations=3))
    with Trainer(_cfg(tmp_path, "part", env=SHORT, max_iterations=2), progress=False) as t:
        t.train()
        kept = t.obs_hist.stacked.clone()
    ck = torch.load(tmp_path / "part" / "latest.pt", weights_only=False)
    assert torch.equal(ck["obs_history"]["stacked"], kept)
    resumed = dataclasses.replace(_cfg(tmp_path, "part", env=SHORT, max_iterations=3),
                                  resume=str(tmp_path / "part" / "latest.pt"))
    with Trainer(resumed, progress=False) as t:
        t.train()
    import csv

    rows = list(csv.DictReader(open(tmp_path / "part" / "rows.csv")))
    assert [float(r["policy_loss"]) for r in rows] == [r["policy_loss"] for r in whole]
    assert [float(r["reward"]) for r in rows] == [r["reward"] for r in whole]


def test_symmetry_mirrors_each_block(tmp_path):
    """The stacked input's mirror map mirrors each observation within its block; a tiny training
    with H = 2 and each symmetry mode runs."""
    perm, sign = torch.tensor([1, 0, 2]), torch.tensor([1.0, 1.0, -1.0])
    x = torch.randn(5, 9)
    m = mirror(x, mirror_blocks(perm, sign, 3))
    assert torch.equal(m, torch.cat([mirror(x[:, 3 * k:3 * k + 3], (perm, sign)) for k in range(3)], dim=1))
    for mode in ("augment", "loss"):
        cfg = _cfg(tmp_path, mode, max_iterations=1,
                   ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1, obs_history=2, symmetry=mode))
        rows = _rows(cfg)
        assert len(rows) == 1 and rows[0]["policy_loss"] == rows[0]["policy_loss"]  # finite, not NaN


def test_ids_name_the_history_and_the_default_keeps_them():
    """A row from before the field has today's ids; H = 2 is another learner, named."""
    from fightlab.measure.learners import learner_changes
    from fightlab.measure.report import config_id, learner_id

    cfg = TrainConfig()
    old = to_dict(cfg)
    old["ppo"] = {k: v for k, v in old["ppo"].items() if k != "obs_history"}
    assert config_id(old) == config_id(to_dict(cfg)) and learner_id(old) == learner_id(to_dict(cfg))
    two = to_dict(dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, obs_history=2)))
    assert learner_id(two) != learner_id(to_dict(cfg)) and learner_changes(two) == "ppo.obs_history=2"
    assert learner_changes(old) == "defaults"


def test_refusals_are_one_line(tmp_path):
    """H outside 1..8 or not an integer; H > 1 outside a stage study (its policy is not yet
    evaluated, which a solve ends with); rsl_rl with H > 1; a checkpoint of H > 1 to evaluate."""
    cfg = TrainConfig(nworld=8, stop_after_stage=0)
    for typed in ("0", "9", "2.5", "two"):
        with pytest.raises(ConfigError) as e:
            validate_train(apply_overrides(cfg, [f"ppo.obs_history={typed}"]))
        msg = str(e.value)
        assert "obs_history" in msg and "\n" not in msg, typed
        if typed in ("0", "9"):
            assert "must be an integer in [1, 8]" in msg
    assert validate_train(apply_overrides(cfg, ["ppo.obs_history=8"])).ppo.obs_history == 8
    with pytest.raises(ConfigError, match=r"ppo.obs_history=2 needs stop_after_stage") as e:
        validate_train(apply_overrides(TrainConfig(nworld=8), ["ppo.obs_history=2"]))
    assert "\n" not in str(e.value)
    from fightlab.run.checkpoint import CheckpointError, policy_agent
    from fightlab.run.rsl import RSL_RL_CANNOT, check_rsl

    with pytest.raises(CheckpointError, match="not yet evaluated"):
        policy_agent({"config": to_dict(apply_overrides(cfg, ["ppo.obs_history=2"]))}, None, "cpu")
    assert RSL_RL_CANNOT["obs_history"][0] == 1
    pytest.importorskip("rsl_rl")
    rsl = apply_overrides(TrainConfig(nworld=8, learner="rsl_rl", stop_after_stage=0), ["ppo.obs_history=2"])
    with pytest.raises(ConfigError) as e:
        check_rsl(validate_train(rsl))
    assert "ppo.obs_history=2 is not an rsl_rl setting" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (runs in the recorded GPU check)")
def test_cuda_captured_policy_steps_equal_eager_with_a_history(tmp_path):
    """With H = 3 on CUDA, the rollout's captured policy steps replayed from one state (history,
    buffer, the env's action) against the same steps run eagerly (`TorchGraph.fn`): the same
    history, stored inputs, actions and values (the env stands still: the pushes still shift)."""
    cfg = _cfg(tmp_path, "g", device="cuda:0", nworld=256, max_iterations=1, policy_graph=True, update_graph=True,
               ppo=PPOConfig(num_steps=8, obs_history=3))
    with Trainer(cfg, progress=False) as tr:
        row = tr.train()["rows"][0]
        assert all(g.graph is not None for g in tr.policy_graphs) and row["graph_fallbacks"] == 0
        state = [tr.obs_hist.stacked, tr.buf.obs, tr.buf.actions, tr.buf.values, tr.buf.logprobs, tr.io.action]
        torch.randn(tr.buf.actions.shape, out=tr.buf.actions)
        saved = [t.detach().clone() for t in state]
        out = {}
        for how in ("eager", "graph"):
            with torch.no_grad():
                for t, v in zip(state, saved):
                    t.copy_(v)
            for g in tr.policy_graphs:
                g.fn() if how == "eager" else g()
            torch.cuda.synchronize()
            out[how] = [t.detach().cpu().clone() for t in state]
    assert not torch.equal(out["eager"][0], saved[0].cpu())  # the history did move
    for a, b in zip(out["eager"], out["graph"]):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), float((a - b).abs().max())
