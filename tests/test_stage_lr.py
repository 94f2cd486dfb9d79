"""`ppo.stage_lr_scale`: a learning rate per curriculum stage, reset at each widening from the
door's extras; off by default; its refusals one line each."""

from __future__ import annotations

import csv
import dataclasses

import pytest

from fightlab.config import ConfigError, EnvConfig, PPOConfig, TrainConfig, apply_overrides, to_dict, validate_train
from fightlab.run.runner import Trainer

#: a curriculum that widens at every check: 4-step episodes (every world ends one an
#: iteration), no fall or tracking bar, a check after each iteration
LOOSE = dict(curriculum_wait=1, curriculum_stages=(0.1, 0.5, 1.0), max_fall_rate=1.0, min_tracking=0.0,
             min_episode_s=0.0, env=EnvConfig(episode_s=0.08))


def _rows(tmp_path, **ppo) -> list[dict]:
    cfg = TrainConfig(body="simple", nworld=4, device="cpu", seed=7, max_iterations=3, run_dir=str(tmp_path),
                      checkpoint_every=0, stop_after_stage=1, **LOOSE,
                      ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1, **ppo))
    t = Trainer(cfg, progress=False)
    t.train()
    t.close()
    return list(csv.DictReader(open(tmp_path / "rows.csv")))


def test_the_rate_moves_by_the_stage_factor_at_each_widening(tmp_path):
    """A fixed rate: stage 0 trains at learning_rate × 2, and the widening into stage 1 moves the
    rows' rate to learning_rate × 0.5 (the update after it). With the KL rule cutting the rate
    every epoch (a KL target below any step) the widening resets it to learning_rate × 0.5 and
    the rule goes on from there: a reset, not a multiply of the adapted rate."""
    rows = _rows(tmp_path / "fixed", adaptive_lr=False, learning_rate=1e-3, stage_lr_scale=(2.0, 0.5, 0.25))
    assert [(r["stage"], r["event"]) for r in rows] == [("1", "widen"), ("2", "widen")]
    lr = [float(r["learning_rate"]) for r in rows]
    assert lr[0] == pytest.approx(2e-3) and lr[1] == pytest.approx(0.5e-3)
    rows = _rows(tmp_path / "kl", learning_rate=1e-3, desired_kl=1e-9, stage_lr_scale=(2.0, 0.5, 0.25))
    lr = [float(r["learning_rate"]) for r in rows]
    assert [r["event"] for r in rows] == ["widen", "widen"]
    assert lr[0] == pytest.approx(2e-3 / 1.5) and lr[1] == pytest.approx(0.5e-3 / 1.5)


def test_bad_factors_are_refused_in_one_line():
    """A count other than the curriculum's stages (the rule across fields) and a non-positive
    factor (the field's rule): one line each, naming the field."""
    cfg = TrainConfig(nworld=8)
    for typed, expect in (("[1, 0.5]", "one factor per curriculum stage (10), got 2"),
                          ("[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]", "must be null or positive numbers"),
                          ("[1, 1, 1, 1, 1, 1, 1, 1, 1, -2]", "must be null or positive numbers")):
        with pytest.raises(ConfigError) as e:
            validate_train(apply_overrides(cfg, [f"ppo.stage_lr_scale={typed}"]))
        assert expect in str(e.value) and "stage_lr_scale" in str(e.value) and "\n" not in str(e.value), typed
    ok = apply_overrides(cfg, ["ppo.stage_lr_scale=[1, 1, 1, 1, 1, 1, 1, 1, 0.5, 0.5]"])
    assert validate_train(ok).ppo.stage_lr_scale == (1.0,) * 8 + (0.5, 0.5)
    assert apply_overrides(ok, ["ppo.stage_lr_scale=none"]).ppo.stage_lr_scale is None


def test_off_by_default_and_the_default_keeps_ids():
    """None by default (the golden rows hold); a row from before the field has today's ids;
    rsl_rl refuses it (its runner never sees the stage)."""
    from fightlab.measure.report import config_id, learner_id
    from fightlab.run.rsl import RSL_RL_CANNOT

    cfg = TrainConfig()
    assert cfg.ppo.stage_lr_scale is None and RSL_RL_CANNOT["stage_lr_scale"][0] is None
    old = to_dict(cfg)
    old["ppo"] = {k: v for k, v in old["ppo"].items() if k != "stage_lr_scale"}
    assert config_id(old) == config_id(to_dict(cfg)) and learner_id(old) == learner_id(to_dict(cfg))
    set_ = dataclasses.replace(cfg, ppo=dataclasses.replace(cfg.ppo, stage_lr_scale=(1.0,) * 10))
    assert learner_id(to_dict(set_)) != learner_id(to_dict(cfg))
