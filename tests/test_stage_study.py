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
    from fightlab.rl.runner import Trainer, stage_done

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
    with pytest.raises(ConfigError, match="already finished .*stopped after stage 0"):
        Trainer(dataclasses.replace(cfg, resume=str(tmp_path / "run" / "latest.pt")), progress=False)


def _stopped_curve(n_stage0: int = 6) -> pd.DataFrame:
    """A curve stopped at the widening past stage 0 after `n_stage0` iterations."""
    c = train_curve(n_stage0)
    c["stage"], c["event"] = 0, "hold"
    c.loc[c.index[-1], ["stage", "event"]] = (1, "widen")
    return c


def test_reports_leave_stage_studies_out_and_the_learner_tables_count_their_ended_stages(tmp_path):
    stop = {"stop_after_stage": 0}
    rows = [train_row("simple", seed=1),  # a solve of today's learner, solo
            train_row("simple", seed=2, shared_gpu=4, params=stop, solved=False, time_to_solve_s=float("nan"),
                      iterations=6, final_amplitude=0.2, reference_passed=None),
            train_row("simple", seed=3, shared_gpu=4, params={**stop, "ppo": {"clip_coef": 0.4}}, solved=False,
                      time_to_solve_s=float("nan"), iterations=4, final_amplitude=0.2, reference_passed=None),
            # stopped by its budget inside stage 0: no stage ended, not a measurement
            train_row("simple", seed=4, shared_gpu=4, params={**stop, "ppo": {"clip_coef": 0.4}}, solved=False,
                      time_to_solve_s=float("nan"), iterations=3, final_amplitude=0.1, reference_passed=None)]
    curves = [train_curve(), _stopped_curve(6), _stopped_curve(4), _stopped_curve(3).assign(stage=0, event="hold")]
    for r, c in zip(rows, curves):
        results.append_row("train", r, tmp_path)
        results.write_curve(r["run_id"], c, tmp_path)
    runs = report.published_runs(tmp_path)
    assert runs["seed"].tolist() == [1] and not runs["stage_study"].any()
    summary = report.solve_summary(runs)
    assert summary["n_unsolved"].sum() == 0 and summary["n_shared"].sum() == 0
    assert report.packed_throughput(runs).reset_index()["concurrent"].tolist() == [1]
    every = report.published_runs(tmp_path, stage_studies=True)
    assert every["stage_study"].tolist() == [False, True, True, True]
    t = report.stage_table(every, tmp_path, packed=True)
    assert sorted(t["seed"].unique()) == [1, 2, 3]  # seed 4 ended no stage
    assert t[t["seed"] == 2][["stage", "iterations"]].values.tolist() == [[0, 6]]
    v = report.variant_table(every, tmp_path).set_index("changes")
    assert v.loc["defaults", "n"] == 2 and v.loc["defaults", "n_solved"] == 1
    assert v.loc["defaults", "iterations_median"] == len(train_curve())  # the solve's only
    assert v.loc["defaults", "stage0_median"] == (2 + 6) / 2
    clip = v.loc["ppo.clip_coef=0.4"]
    assert clip["n"] == 1 and clip["n_solved"] == 0 and clip["stage0_median"] == 4
    assert pd.isna(clip["iterations_median"])


def test_the_learner_study_figure_draws_a_variant_without_solves(tmp_path):
    import matplotlib.pyplot as plt

    from fightlab.figures.training import plot_learner_study

    v = pd.DataFrame([dict(body="simple", learner="a", changes="defaults", n=2, n_solved=2, seeds="1, 2",
                           stage0_median=120, stage0_min=110, stage0_max=130, iterations_median=410,
                           iterations_min=400, iterations_max=420),
                      dict(body="simple", learner="b", changes="ppo.clip_coef=0.4", n=2, n_solved=0, seeds="1, 2",
                           stage0_median=90, stage0_min=85, stage0_max=95, iterations_median=float("nan"),
                           iterations_min=float("nan"), iterations_max=float("nan"))])
    fig = plot_learner_study(v, floor=320, stage_floor=32)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["ppo.clip_coef=0.4 (2 runs, 0 solved)", "defaults (2 runs)"]
    plt.close(fig)
