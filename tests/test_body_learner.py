"""Per-body learner defaults (`config.BODY_PPO`): a TrainConfig's default PPOConfig is its body's,
`with_body` moves a config to another body keeping a template's own changes, and the learner
labels name the changes from the row's own body's defaults."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd

from fightlab.bodies import BODY_NAMES
from fightlab.config import BODY_PPO, PPOConfig, TrainConfig, apply_overrides, body_ppo, to_dict, with_body
from fightlab.measure import report
from fightlab.run.launch import TrainRequest, plan_training


def test_each_body_gets_its_own_default_learner():
    assert set(BODY_PPO) <= set(BODY_NAMES)
    for body in BODY_NAMES:
        ppo = TrainConfig(body=body).ppo
        assert ppo == body_ppo(body)
        for name, value in BODY_PPO.get(body, {}).items():
            assert getattr(ppo, name) == value and getattr(PPOConfig(), name) != value, (body, name)
    # the two bodies' defaults differ where BODY_PPO says so, and an explicit PPOConfig is kept
    assert TrainConfig(body="simple").ppo != TrainConfig(body="muscular-fast").ppo
    mine = PPOConfig(update_epochs=7)
    assert TrainConfig(body="muscular-fast", ppo=mine).ppo is mine
    assert body_ppo("no-such-body") == PPOConfig()  # refused later, by validate_train, in one line


def test_the_train_command_plans_the_bodys_learner_and_set_changes_it():
    for body in BODY_NAMES:
        cfg = plan_training(TrainRequest(body=body, device="cpu", nworld=4)).cfg
        assert cfg.ppo == body_ppo(body)
    cfg = plan_training(TrainRequest(body="muscular-fast", device="cpu", nworld=4,
                                     overrides=("ppo.clip_coef=0.7",))).cfg
    assert cfg.ppo == dataclasses.replace(body_ppo("muscular-fast"), clip_coef=0.7)
    assert cfg.ppo != body_ppo("muscular-fast")  # the --set moved it off the default


def test_with_body_keeps_a_templates_changes_over_the_new_bodys_defaults():
    base = apply_overrides(TrainConfig(), ["ppo.num_steps=4", "ppo.learning_rate=3e-4"])
    mf = with_body(base, "muscular-fast")
    assert mf.body == "muscular-fast" and mf.ppo.num_steps == 4 and mf.ppo.learning_rate == 3e-4
    assert mf.ppo.hidden == body_ppo("muscular-fast").hidden  # the new body's default, not simple's
    assert mf.ppo.clip_coef == body_ppo("muscular-fast").clip_coef
    assert with_body(mf, "simple").ppo == base.ppo  # and back
    # what dataclasses.replace would have done instead: simple's learner on muscular-fast
    assert dataclasses.replace(base, body="muscular-fast").ppo.hidden != mf.ppo.hidden


def test_learner_labels_read_each_row_against_its_own_bodys_defaults():
    for body in BODY_NAMES:
        assert report.learner_changes(to_dict(TrainConfig(body=body))) == "defaults"
    # one learner (the defaults of the other body) reads differently on each body
    simple_on_mf = to_dict(dataclasses.replace(TrainConfig(body="muscular-fast"), ppo=body_ppo("simple")))
    changed = report.learner_changes(simple_on_mf)
    assert all(f"ppo.{k}=" in changed for k in {**BODY_PPO["simple"], **BODY_PPO["muscular-fast"]})
    runs = pd.DataFrame([dict(body="simple", learner="L", params=json.dumps(to_dict(TrainConfig()))),
                         dict(body="muscular-fast", learner="L", params=json.dumps(
                             to_dict(dataclasses.replace(TrainConfig(body="muscular-fast"), ppo=body_ppo("simple")))))])
    labels = report.learner_labels(runs)
    assert labels[("simple", "L")] == "defaults"
    assert labels[("muscular-fast", "L")] == report.learner_changes(json.loads(runs["params"].iloc[1]))
    assert "ppo.hidden=[256, 128, 64]" in labels[("muscular-fast", "L")]  # as a row stores it


def test_compare_backends_applies_set_to_each_bodys_own_defaults(monkeypatch):
    """`--set` items land on each body's defaults, so one equal to another body's default still
    acts (a template moved between bodies could not tell it from that body's default)."""
    from fightlab.measure import backends

    got = {}
    monkeypatch.setattr(backends, "compare", lambda bodies, *a, base=None, **k: got.update(base=base))
    backends.compare_from_flags(None, gpu_device="cpu", overrides=("ppo.hidden=[256,128,64]", "ppo.num_steps=4"),
                                progress=False)
    base = got["base"]
    assert set(base) == set(BODY_NAMES)
    for body, cfg in base.items():
        assert cfg.body == body and cfg.ppo.hidden == (256, 128, 64) and cfg.ppo.num_steps == 4
        assert cfg.ppo.clip_coef == body_ppo(body).clip_coef


def test_an_rsl_rl_runs_changes_are_against_rsl_rls_defaults():
    """A --learner rsl_rl run's learner reads against rsl_rl's defaults (config.RSL_RL_PPO), not
    fightlab's: named first, its defaults are "defaults", a --set shows as itself."""
    from fightlab.config import apply_overrides

    for body in ("simple", "muscular-fast"):
        cfg = TrainConfig(body=body, learner="rsl_rl")
        assert report.learner_changes(to_dict(cfg)) == "rsl_rl: defaults"
        tuned = apply_overrides(cfg, ["ppo.init_std=0.7"])
        assert report.learner_changes(to_dict(tuned)) == "rsl_rl: ppo.init_std=0.7"
