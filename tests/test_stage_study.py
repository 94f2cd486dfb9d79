"""`TrainConfig.stop_after_stage`: a learner study of the first curriculum stages. The run ends at
the widening past that stage, cannot solve, publishes with room for its stages only, and the
reports count its ended stages (the learner-study tables) and never it as an unsolved training."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from fightlab import results
from fightlab.config import ConfigError, TrainConfig, apply_overrides, validate_train
from fightlab.measure import report
from fightlab.publish import training_size_problem
from test_figures import train_curve, train_row  # synthetic rows (pytest puts tests/ on sys.path)


@pytest.mark.parametrize("raw, msg", [("-1", "got -1"), ("9", "got 9"), ("true", "got 'true'"),
                                      ("x", "an integer or null, got 'x'"), ("1.5", "got '1.5'")])
def test_bad_stop_after_stage_is_one_line(raw, msg):
    with pytest.raises(ConfigError) as e:
        validate_train(apply_overrides(TrainConfig(), [f"stop_after_stage={raw}"]))
    assert msg in str(e.value) and "\n" not in str(e.value)
    assert "[0, 8]" in str(e.value) or "integer or null" in str(e.value)


def test_stop_after_stage_parses_and_a_one_stage_curriculum_refuses_it():
    assert apply_overrides(TrainConfig(), ["stop_after_stage=0"]).stop_after_stage == 0
    assert apply_overrides(TrainConfig(stop_after_stage=3), ["stop_after_stage=null"]).stop_after_stage is None
    with pytest.raises(ConfigError, match="curriculum of one stage"):
        validate_train(TrainConfig(curriculum_stages=(1.0,), stop_after_stage=0))


def test_publish_needs_room_for_the_stages_it_measures():
    cfg = TrainConfig(nworld=1024, max_iterations=32, stop_after_stage=0)
    assert training_size_problem(cfg) is None
    short = training_size_problem(dataclasses.replace(cfg, max_iterations=31))
    assert "below 32 (1 curriculum stages" in short and "stop_after_stage" in short
    assert "below 96" in training_size_problem(dataclasses.replace(cfg, stop_after_stage=2, max_iterations=64))
    assert "could not solve" in training_size_problem(dataclasses.replace(cfg, stop_after_stage=None))


def test_a_run_stops_at_the_widening_past_its_stage_and_a_resume_says_it_finished(tmp_path):
    """A tiny CPU training (8 worlds, a 2-iteration wait) stops after stage 0 at its widening:
    unsolved, at the next stage's amplitude, the last row a widening; its resume is refused."""
    from fightlab.run.runner import Trainer, stage_done

    cfg = validate_train(apply_overrides(TrainConfig(
        body="simple", nworld=8, device="cpu", seed=1, max_iterations=40, checkpoint_every=0,
        run_dir=str(tmp_path / "run"), curriculum_wait=2),
        ["ppo.num_steps=4", "stop_after_stage=0", "max_fall_rate=1.0", "min_tracking=0"]))
    with Trainer(cfg, progress=False) as t:
        res = t.train()
    rows = res["rows"]
    assert not res["solved"] and res["final_amplitude"] == pytest.approx(0.2)
    assert rows[-1]["event"] == "widen" and res["iterations"] == len(rows) < cfg.max_iterations
    assert stage_done(cfg, 1) and not stage_done(cfg, 0) and not stage_done(dataclasses.replace(cfg, stop_after_stage=None), 5)
    # a resume of the stopped run (its row lost to a kill, or a segment that ended on the widening)
    # trains nothing and gives the run's result again, whatever --max-iterations it is given
    for max_it in (cfg.max_iterations, 2):
        with Trainer(dataclasses.replace(cfg, resume=str(tmp_path / "run" / "latest.pt"), max_iterations=max_it),
                     progress=False) as t:
            again = t.train()
        assert again["iterations"] == res["iterations"] and not again["segment_end"] and not again["solved"]


def test_a_segment_that_ends_on_the_stopping_widening_is_the_runs_end(tmp_path):
    """A segment budget that runs out on the widening past the stage: the run ended there, so the
    segment is its last (a row is written), not a pause to resume."""
    from fightlab.run.runner import Trainer

    cfg = validate_train(apply_overrides(TrainConfig(
        body="simple", nworld=8, device="cpu", seed=1, max_iterations=40, checkpoint_every=0,
        run_dir=str(tmp_path / "run"), curriculum_wait=2, segment_s=1e-9),
        ["ppo.num_steps=4", "stop_after_stage=0", "max_fall_rate=1.0", "min_tracking=0", "env.episode_s=0.1",
         "min_episode_s=0"]))  # 5-step episodes: every window has finished ones
    seen = []
    for _ in range(12):
        with Trainer(cfg, progress=False) as t:
            res = t.train()
        seen.append(res["segment_end"])
        if not res["segment_end"]:
            break
        cfg = dataclasses.replace(cfg, resume=str(tmp_path / "run" / "latest.pt"))
    assert seen[-1] is False and res["final_amplitude"] == pytest.approx(0.2) and not res["solved"]
