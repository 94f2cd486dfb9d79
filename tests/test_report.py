"""fightlab.measure.report's summary of published training runs: setup, host_jobs, grouping."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fightlab import results
from fightlab.config import body_ppo
from fightlab.measure import report
from test_figures import NOW_PHYSICS, train_row  # synthetic rows (pytest puts tests/ on sys.path)


def _write(root, rows):
    for r in rows:
        results.append_row("train", r, root)
    return report.published_runs(root)


def test_factor_setup():
    # muscular-fast's one tree has 89 DOF (> 64: sparse path); simple's 43 take the dense tile path
    # rows from before the shared variant ran the global-memory kernel
    assert report.factor_setup("muscular-fast", {"tree_factor": True}) == "tree factor, global"
    assert report.factor_setup("muscular-fast", {"tree_factor": True,
                                                 "tree_factor_variant": "shared"}) == "tree factor, shared"
    assert report.factor_setup("muscular-fast", {"tree_factor": False}) == "stock factor"
    assert report.factor_setup("muscular-fast", {}) == "stock factor"  # rows from before the switch
    assert report.factor_setup("simple", {"tree_factor": True}) == "dense"
    assert report.factor_setup("simple", {}) == "dense"
    assert report.factor_setup("robot", {}) == "unknown body"


def test_published_runs_columns(tmp_path):
    runs = _write(tmp_path, [train_row("simple"), train_row("muscular-fast", shared_gpu=4),
                             train_row("muscular-fast", params=dict(tree_factor=True, host_jobs=2))])
    assert list(runs["setup"]) == ["dense", "stock factor", "tree factor, global"]
    assert list(runs["host_jobs"]) == [1, 1, 2]  # default 1 where not recorded
    assert list(runs["shared_gpu"]) == [1, 4, 1]


def test_solve_summary_never_pools_commits_or_setups(tmp_path):
    t = "2026-11-30T0{}:00:00+00:00".format
    runs = _write(tmp_path, [
        # simple: two commits, each with its own median
        train_row("simple", seed=1, tts=100.0, commit="aaa1111", time=t(1)),
        train_row("simple", seed=2, tts=110.0, commit="aaa1111", time=t(1)),
        train_row("simple", seed=1, tts=200.0, commit="bbb2222", time=t(2), params=dict(host_jobs=2)),
        train_row("simple", seed=2, tts=220.0, commit="bbb2222", time=t(2)),
        train_row("simple", seed=3, tts=240.0, commit="bbb2222", time=t(2)),
        # a shared-GPU run and an unsolved solo run: counted, not summarised
        train_row("simple", seed=4, tts=900.0, commit="bbb2222", time=t(2), shared_gpu=2),
        train_row("simple", seed=5, tts=float("nan"), commit="bbb2222", time=t(2), solved=False),
        # muscular-fast, one commit, two factor paths
        train_row("muscular-fast", seed=1, tts=350.0, commit="bbb2222", time=t(3), params=dict(tree_factor=True)),
        train_row("muscular-fast", seed=2, tts=370.0, commit="bbb2222", time=t(3), params=dict(tree_factor=True)),
        train_row("muscular-fast", seed=1, tts=400.0, commit="bbb2222", time=t(4), params=dict(tree_factor=False)),
    ])
    s = report.solve_summary(runs)
    assert s.index.names == list(report.SUMMARY_KEYS)
    # these synthetic commits are in no git history: each is its own training code
    assert [k[:3] for k in s.index] == [("muscular-fast", "tree factor, global", "commit bbb2222"),
                                        ("muscular-fast", "stock factor", "commit bbb2222"),
                                        ("simple", "dense", "commit aaa1111"), ("simple", "dense", "commit bbb2222")]
    a, b = _grp(s, "simple", "dense", "aaa1111"), _grp(s, "simple", "dense", "bbb2222")
    assert (a["n_solo"], a["time_to_solve_median_s"], a["n_shared"], a["host_jobs"]) == (2, 105.0, 0, 1)
    assert (b["n_solo"], b["time_to_solve_median_s"], b["time_to_solve_max_s"]) == (3, 220.0, 240.0)
    assert (b["n_shared"], b["n_unsolved"], b["host_jobs"]) == (1, 1, 2)
    tree = _grp(s, "muscular-fast", "tree factor, global", "bbb2222")
    stock = _grp(s, "muscular-fast", "stock factor", "bbb2222")
    assert (tree["n_solo"], tree["time_to_solve_median_s"]) == (2, 360.0)
    assert tree["compile_s_median"] == 3.0  # the synthetic rows compile in 3 s
    assert tree["iterations_min"] <= tree["iterations_median"] <= tree["iterations_max"]
    assert (stock["n_solo"], stock["time_to_solve_median_s"]) == (1, 400.0)

    # headline: most solo seeds per body, the newest group among equals
    h = report.headline(s)
    assert [k[:3] for k in h.index] == [("muscular-fast", "tree factor, global", "commit bbb2222"),
                                        ("simple", "dense", "commit bbb2222")]
    c = report.original_comparison(s).set_index("body")
    assert c.loc["simple", "original_rtx5090_s"] == 185.0 and c.loc["simple", "original_ec2_96vcpu_s"] == 404.0
    assert c.loc["simple", "rtx5090_over_ours"] == pytest.approx(185.0 / 220.0)
    assert c.loc["muscular-fast", "ec2_96vcpu_over_ours"] == pytest.approx(714.0 / 360.0)


def test_training_code_id_from_git_history(tmp_path):
    """Commits that changed no training code (meta.TRAINING_CODE) share an id; a change under
    it, a dirty, unknown or missing commit does not (None)."""
    import subprocess

    from fightlab import meta

    def git(*a):
        return subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@t"), git("config", "user.name", "t")
    (tmp_path / "fightlab" / "envs").mkdir(parents=True)
    (tmp_path / "fightlab" / "envs" / "stance.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("a\n")
    git("add", "-A"), git("commit", "-qm", "one")
    c1 = git("rev-parse", "--short=7", "HEAD")
    (tmp_path / "README.md").write_text("b\n")
    (tmp_path / "fightlab" / "config.py").write_text("clip = 0.3\n")  # defaults: recorded in params
    git("add", "-A"), git("commit", "-qm", "docs")
    c2 = git("rev-parse", "--short=7", "HEAD")
    (tmp_path / "fightlab" / "envs" / "stance.py").write_text("x = 2\n")
    git("add", "-A"), git("commit", "-qm", "env")
    c3 = git("rev-parse", "--short=7", "HEAD")
    ids = [meta.training_code_id(c, str(tmp_path)) for c in (c1, c2, c3)]
    assert ids[0] is not None and ids[0] == ids[1] != ids[2] and len(ids[0]) == 8
    for bad in (c1 + "-dirty", "unknown", "fff0000", "", "not hex"):
        assert meta.training_code_id(bad, str(tmp_path)) is None
    assert meta.training_code_id(c1, str(tmp_path / "fightlab")) is None  # not a repository root


def test_solve_summary_pools_commits_of_the_same_training_code(tmp_path, monkeypatch):
    """Seeds of two commits with the same training code are one group (commits listed, the
    newest solo run's commit); a third commit with other code stays apart."""
    from fightlab import meta

    monkeypatch.setattr(meta, "training_code_id", lambda c, root=None: {"aaa1111": "c0de0001",
                                                                       "bbb2222": "c0de0001"}.get(c))
    t = "2026-11-30T0{}:00:00+00:00".format
    runs = _write(tmp_path, [
        train_row("simple", seed=1, tts=100.0, commit="aaa1111", time=t(1)),
        train_row("simple", seed=2, tts=110.0, commit="bbb2222", time=t(2)),
        train_row("simple", seed=3, tts=120.0, commit="bbb2222", time=t(3)),
        train_row("simple", seed=4, tts=900.0, commit="ccc3333", time=t(4)),
    ])
    assert list(runs["code"]) == ["c0de0001"] * 3 + ["commit ccc3333"]
    s = report.solve_summary(runs).reset_index().set_index("code")
    assert s.loc["c0de0001", "n_solo"] == 3 and s.loc["c0de0001", "time_to_solve_median_s"] == 110.0
    assert s.loc["c0de0001", "commits"] == "aaa1111 bbb2222" and s.loc["c0de0001", "commit"] == "bbb2222"
    assert s.loc["commit ccc3333", "n_solo"] == 1
    h = report.headline(report.solve_summary(runs))
    assert h.reset_index()["code"].tolist() == ["c0de0001"]  # 3 seeds beat the newer single seed


def _grp(s, body, setup, commit):
    r = s.reset_index()
    r = r[(r["body"] == body) & (r["setup"] == setup) & (r["commit"] == commit)]
    assert len(r) == 1, r
    return r.iloc[0]


def test_solve_summary_never_pools_cards_world_counts_or_configs(tmp_path):
    runs = _write(tmp_path, [
        train_row("simple", seed=1, tts=100.0),
        train_row("simple", seed=2, tts=110.0),                       # pools with seed 1
        train_row("simple", seed=3, tts=300.0, gpu="NVIDIA L4"),      # another card
        train_row("simple", seed=4, tts=150.0, nworld=8192),          # another world count
        train_row("simple", seed=5, tts=90.0, params={"lr": 3e-4}),   # another configuration
        train_row("simple", seed=6, tts=105.0, params={"host_jobs": 2, "run_dir": "x"}),  # pools
    ])
    s = report.solve_summary(runs).reset_index()
    assert len(s) == 4 and sorted(s["n_solo"]) == [1, 1, 1, 3]
    main = s[s["n_solo"] == 3].iloc[0]
    assert main["gpu"] == "NVIDIA H200" and main["nworld"] == 1024
    assert main["time_to_solve_median_s"] == 105.0


def test_headline_prefers_newer_among_equal_seed_counts(tmp_path):
    t = "2026-11-30T0{}:00:00+00:00".format
    runs = _write(tmp_path, [train_row("simple", seed=s, tts=100.0 + s, commit="old0000", time=t(1)) for s in (1, 2)]
                  + [train_row("simple", seed=s, tts=200.0 + s, commit="new1111", time=t(2)) for s in (1, 2)]
                  + [train_row("simple", seed=1, tts=50.0, commit="one2222", time=t(3))]
                  # a later shared-GPU run does not make the old group the newest
                  + [train_row("simple", seed=9, tts=50.0, commit="old0000", time=t(4), shared_gpu=3)])
    h = report.headline(report.solve_summary(runs))
    assert [k[:3] for k in h.index] == [("simple", "dense", "commit new1111")]
    assert h["commit"].tolist() == ["new1111"]


def test_summary_of_shared_runs_only(tmp_path):
    runs = _write(tmp_path, [train_row("simple", shared_gpu=4)])
    s = report.solve_summary(runs)
    assert s["n_solo"].tolist() == [0] and s["n_shared"].tolist() == [1]
    assert math.isnan(s["time_to_solve_median_s"].iloc[0])
    assert report.headline(s).empty and report.original_comparison(s).empty
    assert report.solve_summary(report.published_runs(tmp_path / "none")).empty


def test_config_id_ignores_the_factor_switch_and_segment_records():
    # kernel on / off and the per-segment record are kept apart by setup and commit, not config:
    # a with-vs-without comparison must land in the same config
    base = {"lr": 3e-4, "nworld": 1024}
    on = {**base, "tree_factor": True, "tree_factor_variant": "shared",
          "segments": [{"commit": "abc1234", "tree_factor_variant": "shared", "shared_gpu": 1}]}
    off = {**base, "tree_factor": False, "tree_factor_variant": None,
           "segments": [{"commit": "abc1234", "tree_factor_variant": None, "shared_gpu": 1}]}
    assert report.config_id(on) == report.config_id(off) == report.config_id(base)
    assert report.config_id({**base, "lr": 1e-3}) != report.config_id(base)


def test_factor_comparison_pools_commits_not_cards_or_configs(tmp_path):
    mf = "muscular-fast"
    on = {"tree_factor": True, "tree_factor_variant": "shared"}
    t = "2026-11-30T0{}:00:00+00:00".format
    runs = _write(tmp_path, [
        # seed 2 first in the file: seeds are listed sorted
        train_row(mf, seed=2, tts=420.0, commit="new1111", params={"tree_factor": False, "host_jobs": 2},
                  rollout_s_per_iter=0.42, update_s_per_iter=0.12, iterations=800, time=t(2)),
        train_row(mf, seed=1, tts=400.0, commit="old0000", params={"tree_factor": False},
                  rollout_s_per_iter=0.42, update_s_per_iter=0.12, iterations=700, time=t(1)),
        train_row(mf, seed=1, tts=340.0, commit="new1111", params=on,
                  rollout_s_per_iter=0.34, update_s_per_iter=0.11, iterations=740, time=t(2)),
        train_row(mf, seed=2, tts=999.0, commit="old0000", params=on, time=t(1)),  # older run of seed 2
        train_row(mf, seed=2, tts=360.0, commit="new1111", params=on,
                  rollout_s_per_iter=0.34, update_s_per_iter=0.11, iterations=760, time=t(3)),
        train_row(mf, seed=3, tts=10.0, commit="new1111", params=on, shared_gpu=2),   # not solo
        train_row(mf, seed=4, tts=10.0, commit="new1111", params=on, solved=False),   # not solved
        train_row(mf, seed=5, tts=10.0, commit="new1111", params=on, gpu="NVIDIA L4"),  # other card
        train_row(mf, seed=6, tts=10.0, commit="new1111", params={**on, "lr": 1.0}),  # other config
        train_row(mf, seed=7, tts=10.0, commit="new1111", params={**on, "mixed_segments": True}),
        # more runs at 4096 worlds, but without a stock run: not the group compared
        *[train_row(mf, seed=s, tts=10.0, commit="new1111", params=on, nworld=4096) for s in range(5)],
        train_row("simple", seed=1, tts=10.0),
    ])
    c = report.factor_comparison(runs)
    assert list(c.index) == ["stock factor", "tree factor, shared"]
    stock, tree = c.loc["stock factor"], c.loc["tree factor, shared"]
    assert stock["n"] == 2 and stock["commits"] == "old0000 new1111" and stock["seeds"] == "1 2"
    assert stock["host_jobs"] == 2 and stock["nworld"] == 1024
    assert (stock["time_to_solve_min_s"], stock["time_to_solve_max_s"]) == (400.0, 420.0)
    assert stock["iterations_median"] == 750.0
    assert stock["time_to_solve_median_s"] == 410.0 and tree["time_to_solve_median_s"] == 350.0
    assert tree["n"] == 2 and tree["seeds"] == "1 2" and tree["gpu"] == "NVIDIA H200"
    assert tree["commits"] == "new1111"  # seed 2's older run (999 s) replaced by its newest
    assert tree["stock_over_this"] == pytest.approx(410.0 / 350.0)
    assert tree["stock_over_this_per_iter"] == pytest.approx(0.54 / 0.45)
    with pytest.raises(ValueError, match="'simple' has no tree over 64 DOF.*muscular-fast"):
        report.factor_comparison(runs, body="simple")
    with pytest.raises(ValueError, match="unknown body 'chain-100'; bodies: "):
        report.factor_comparison(runs, body="chain-100")
    assert report.factor_comparison(runs[runs["body"] == "simple"]).empty


def test_factor_comparison_group_choice_and_newest_run(tmp_path):
    mf = "muscular-fast"
    glob = {"tree_factor": True, "tree_factor_variant": "global"}
    shared = {"tree_factor": True, "tree_factor_variant": "shared"}
    runs = _write(tmp_path, [
        # 4096 worlds: both tree variants, many runs, no stock run: nothing to compare against
        *[train_row(mf, seed=s, tts=10.0, nworld=4096, params=p) for s in range(4) for p in (glob, shared)],
        # 2048 worlds: a stock run alone
        train_row(mf, seed=1, tts=20.0, nworld=2048, params={"tree_factor": False}),
        # 1024 worlds: stock and shared: the group compared
        train_row(mf, seed=1, tts=400.0, params={"tree_factor": False}),
        # seed 1 shared: the newer run (+02:00: 08:30 UTC) comes first in the file
        train_row(mf, seed=1, tts=300.0, params=shared, time="2026-11-30T10:30:00+02:00"),
        train_row(mf, seed=1, tts=999.0, params=shared, time="2026-11-30T08:00:00+00:00"),
    ])
    c = report.factor_comparison(runs)
    assert list(c.index) == ["stock factor", "tree factor, shared"] and set(c["nworld"]) == {1024}
    assert c.loc["tree factor, shared", "time_to_solve_median_s"] == 300.0  # newest instant
    assert c.loc["tree factor, shared", "stock_over_this"] == pytest.approx(400.0 / 300.0)
    # without the 1024 group: the lone stock group beats the tree-only one (a stock reference
    # exists), and says so by having nothing else to compare
    c2 = report.factor_comparison(runs[runs["nworld"] != 1024])
    assert list(c2.index) == ["stock factor"] and set(c2["nworld"]) == {2048}
    # no stock anywhere: the group with the most setups, then runs
    c3 = report.factor_comparison(runs[runs["nworld"] == 4096])
    assert list(c3.index) == ["tree factor, global", "tree factor, shared"]
    assert "stock_over_this" not in c3.columns and c3["n"].tolist() == [4, 4]


def test_old_and_new_packing_read_alike(tmp_path):
    runs = _write(tmp_path, [train_row("simple", shared_gpu=4, params=dict(host_jobs=2)),
                             train_row("simple", shared_gpu=None, params=dict(concurrent=4, mps=True,
                                                                              gpu_jobs=8))])
    assert list(runs["concurrent"]) == [4, 4] and list(runs["gpu_jobs"]) == [2, 8]
    assert list(runs["mps"]) == [False, True]  # old rows: MPS unknown, read as off
    assert list(runs["shared_gpu"]) == [4, 4] and list(runs["host_jobs"]) == [2, 8]  # older names


def test_packed_runs_never_headline(tmp_path):
    runs = _write(tmp_path, [train_row("simple", seed=1, tts=100.0),
                             train_row("simple", seed=2, tts=50.0, shared_gpu=None,
                                       params=dict(concurrent=8, mps=True))])
    s = report.solve_summary(runs)
    (row,) = [r for _, r in s.iterrows()]
    assert (row["n_solo"], row["n_shared"], row["time_to_solve_median_s"]) == (1, 1, 100.0)
    assert report.headline(s)["time_to_solve_median_s"].tolist() == [100.0]


def test_solves_per_gpu_hour_and_cost_per_solve(tmp_path):
    """Synthetic rows: 1 solo run solving in 3600 s; 8 runs packed ×8 with MPS, each 7200 s,
    6 solved (the 2 unsolved ran 7200 s too: 1000 iterations × 7.2 s)."""
    packed = [train_row("simple", seed=s, tts=7200.0 - 3.0, shared_gpu=None,
                        params=dict(concurrent=8, mps=True, gpu_jobs=8)) for s in range(6)]
    packed += [train_row("simple", seed=s, tts=float("nan"), solved=False, shared_gpu=None,
                         iterations=1000, rollout_s_per_iter=5.0, update_s_per_iter=2.2 - 0.003,
                         params=dict(concurrent=8, mps=True, gpu_jobs=8)) for s in (6, 7)]
    runs = _write(tmp_path, [train_row("simple", seed=9, tts=3600.0 - 3.0), *packed])
    t = report.packed_throughput(runs, price_per_gpu_hour=4.0).reset_index().set_index("concurrent")
    solo, pk = t.loc[1], t.loc[8]
    assert (solo["n_runs"], solo["n_solved"], bool(solo["mps"])) == (1, 1, False)
    assert solo["gpu_hours"] == pytest.approx(1.0) and solo["solves_per_gpu_hour"] == pytest.approx(1.0)
    assert solo["cost_per_solve"] == pytest.approx(4.0)
    # 8 runs × 2 h / 8 jobs per GPU = 2 GPU-hours for 6 solves: 3 per GPU-hour, 4/3 per solve
    assert (pk["n_runs"], pk["n_solved"], bool(pk["mps"])) == (8, 6, True)
    assert pk["gpu_hours"] == pytest.approx(2.0) and pk["solves_per_gpu_hour"] == pytest.approx(3.0)
    assert pk["cost_per_solve"] == pytest.approx(4.0 / 3.0)
    assert "cost_per_solve" not in report.packed_throughput(runs).columns
    with pytest.raises(ValueError, match="price_per_gpu_hour must be a positive number"):
        report.packed_throughput(runs, price_per_gpu_hour=0)


# --- the task's Fixed fields -----------------------------------------------------------

def test_task_id_marks_a_changed_fixed_field_and_only_those():
    """Free fields (reward weights, PPO, nworld, seeds) keep the task; any Fixed field makes another
    task, with a stable id naming the change."""
    import dataclasses

    from fightlab.config import DEFAULT_TASK, PPOConfig, TASK_FIELDS, TrainConfig, task_changes, task_id

    base = TrainConfig()
    assert task_id(base) == DEFAULT_TASK and task_changes(base) == {}
    free = dataclasses.replace(base, nworld=64, seed=3, env=dataclasses.replace(base.env, w_alive=2.0,
                               action_scale_rad=0.5), ppo=PPOConfig(learning_rate=3e-4, init_std=1.0))
    assert task_id(free) == DEFAULT_TASK
    easier = dataclasses.replace(base, env=dataclasses.replace(base.env, push_impulse_ns=(5.0, 10.0)))
    tid = task_id(easier)
    assert tid.startswith("custom-") and len(tid) == len("custom-") + 8
    assert task_changes(easier) == {"env.push_impulse_ns": ((5.0, 10.0), (15.0, 30.0))}
    assert task_id(dataclasses.replace(easier, seed=9)) == tid  # the id names the task, not the run
    assert task_id(dataclasses.replace(base, min_tracking=0.5)) not in (DEFAULT_TASK, tid)
    assert "env.timestep" in TASK_FIELDS and "env.w_alive" not in TASK_FIELDS


def test_a_run_of_another_task_never_becomes_the_headline(tmp_path):
    """Rows whose params mark another task (or that rebuild to one) keep their own summary group,
    and the headline and factor comparison take only runs of the task itself."""
    import dataclasses

    from fightlab import results
    from fightlab.config import TrainConfig, to_dict

    def row(run_id, seed, t, cfg, mark=True):
        params = to_dict(cfg)
        params.update(concurrent=1, gpu_jobs=1)
        if mark:
            from fightlab.config import task_id
            params["task"] = task_id(cfg)
        meta = results.run_metadata(body=cfg.body, nworld=cfg.nworld, seed=seed, params=params, device="cpu")
        meta.update(run_id=run_id, gpu="NVIDIA H200", commit="abc1234")
        return dict(meta, time_to_solve_s=t, iterations=100, compile_s=1.0, env_steps_per_s=1.0,
                    physics_steps_per_s=1.0, rollout_s_per_iter=0.1, update_s_per_iter=0.01, solved=True,
                    final_amplitude=1.0, fall_rate=0.0, mean_episode_s=10.0, overflow_count=0, nan_resets=0,
                    host_reads_per_iter=1.0, graph_fallbacks=0, tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None,
                    **dict(dict.fromkeys(results.REFERENCE_COLUMNS), reference_passed=True))

    base = TrainConfig(body="simple", nworld=1024)
    easy = dataclasses.replace(base, env=dataclasses.replace(base.env, push_impulse_ns=(1.0, 2.0)))
    for i, seed in enumerate((1, 2)):
        results.append_row("train", row(f"task{i}", seed, 100.0 + i, base), tmp_path)
    for i, seed in enumerate((1, 2, 3)):  # more seeds, faster, newer: of another task
        results.append_row("train", row(f"easy{i}", seed, 10.0, easy, mark=i != 0), tmp_path)
    runs = report.published_runs(tmp_path)
    assert sorted(runs["task"].unique()) == sorted(["default", report.task_id(easy)])  # unmarked row derived
    s = report.solve_summary(runs)
    assert len(s) == 2
    h = report.headline(s)
    assert h.index.get_level_values("task").tolist() == ["default"]
    assert h["n_solo"].tolist() == [2] and h["time_to_solve_median_s"].tolist() == [100.5]
    assert report.task_of({"body": "simple", "env": "not a dict"}) == "default"  # nothing stored: the defaults
    assert report.task_of({"env": {"timestep": 0.002}}).startswith("custom-")


def test_a_task_typed_with_integers_is_the_same_task():
    """[5, 10] and [5.0, 10.0] are one task (the review found two ids), typed on the command line
    or given as a config; the stored value is a pair of floats like the default."""
    import dataclasses

    from fightlab.config import EnvConfig, TrainConfig, coerce_field, task_id

    assert coerce_field(EnvConfig, "push_impulse_ns", "[5,10]") == (5.0, 10.0)
    assert all(isinstance(x, float) for x in coerce_field(EnvConfig, "push_interval_s", "[1,3]"))
    base = TrainConfig()
    ints = dataclasses.replace(base, env=dataclasses.replace(base.env, push_impulse_ns=(5, 10)))
    floats = dataclasses.replace(base, env=dataclasses.replace(base.env, push_impulse_ns=(5.0, 10.0)))
    assert task_id(ints) == task_id(floats) != "default"
    assert task_id(dataclasses.replace(base, curriculum_wait=32.0)) == "default"
    assert report.task_of({"env": {"push_impulse_ns": [15, 30]}}) == "default"


def test_pick_variant_rule(tmp_path):
    """The study's decision rule: the lowest mean of the learners whose every seed solved, adopted
    only past the margin; what it adopts is the `--set`s that run it (values as JSON)."""
    # today's default of each body, whatever it is: the "defaults" learner (config.BODY_PPO)
    clip = lambda body, c: dict(ppo={"clip_coef": round(body_ppo(body).clip_coef + c, 3)})  # noqa: E731
    d = body_ppo("simple").clip_coef
    rows = []
    for seed, (a, b, c, e) in enumerate([(440, 400, 300, 430), (450, 410, 330, 425)], start=1):
        rows += [train_row("simple", seed=seed, params=clip("simple", 0), iterations=a),    # defaults: 445
                 train_row("simple", seed=seed, params=clip("simple", 0.1), iterations=b),  # 405 (-9 %)
                 train_row("simple", seed=seed, params=clip("simple", 0.3), iterations=c,   # one seed unsolved
                           solved=seed == 1),
                 train_row("muscular-fast", seed=seed, params=clip("muscular-fast", 0), iterations=600),
                 train_row("muscular-fast", seed=seed, params=clip("muscular-fast", 0.1),
                           iterations=e * 1.35)]  # 577 (-4 %)
    rows.append(train_row("simple", seed=3, params=clip("simple", 0.2), iterations=100))  # one seed only
    picks = report.pick_variant(_write(tmp_path, rows)).set_index("body")
    s, m = picks.loc["simple"], picks.loc["muscular-fast"]
    want = f"ppo.clip_coef={round(d + 0.1, 3)}"
    want_m = f"ppo.clip_coef={round(body_ppo('muscular-fast').clip_coef + 0.1, 3)}"
    assert s["adopt"] and s["best"] == want and s["sets"] == [want]
    assert s["best_mean"] == 405 and s["defaults_mean"] == 445
    assert set(s["variants"]) == {"defaults", want}  # the unsolved and the one-seed learners are not eligible
    assert m["best"] == want_m and not m["adopt"] and m["sets"] == []  # within 5 %
    assert report.pick_variant(report.published_runs(tmp_path), margin=0.03).set_index("body").loc[
        "muscular-fast", "adopt"]
    now = NOW_PHYSICS  # today's training physics; a row without it ran the reference (IMPLIED_FIELDS)
    assert report.learner_diff({"ppo": {"desired_kl": None, "clip_coef": d}, "env": now}) == []
    assert report.learner_diff({"ppo": {"init_std": 0.7}, "env": now}) == [("ppo.init_std", 0.7)]
    with pytest.raises(report.ConfigError, match="margin must be a fraction"):
        report.pick_variant(report.published_runs(tmp_path), margin=1.5)


def test_pick_variant_needs_the_defaults(tmp_path):
    d = body_ppo("simple").clip_coef
    runs = _write(tmp_path, [train_row("simple", seed=s, params=dict(ppo={"clip_coef": d + 0.1})) for s in (1, 2)]
                  + [train_row("simple", seed=3, params=dict(ppo={"clip_coef": d}))])
    with pytest.raises(report.ConfigError, match="no learner of today's defaults with >= 2 solved seeds"):
        report.pick_variant(runs)


def test_pick_variant_counts_seeds_and_known_counts(tmp_path):
    """Eligibility is over distinct seeds with every iteration count known; ties keep the defaults;
    bad margins and empty or foreign input are one-line errors."""
    d = body_ppo("simple").clip_coef
    rows = [train_row("simple", seed=s, params=dict(ppo={"clip_coef": d}), iterations=400) for s in (1, 2)]
    rows += [train_row("simple", seed=1, params=dict(ppo={"clip_coef": round(d + 0.1, 3)}), iterations=300)] * 2  # one seed twice
    rows += [train_row("simple", seed=s, params=dict(ppo={"clip_coef": round(d + 0.2, 3)}), iterations=it)
             for s, it in ((1, 250), (2, float("nan")))]  # a solved row without its count
    rows += [train_row("simple", seed=s, params=dict(ppo={"clip_coef": round(d + 0.3, 3)}), iterations=400) for s in (1, 2)]  # a tie
    p = report.pick_variant(_write(tmp_path, rows)).iloc[0]
    assert set(p["variants"]) == {"defaults", f"ppo.clip_coef={round(d + 0.3, 3)}"}
    assert p["best"] == "defaults" and not p["adopt"]
    runs = report.published_runs(tmp_path)
    for bad in (False, True, -0.1, 1.0, "0.05", float("nan"), None):
        with pytest.raises(report.ConfigError, match="margin must be a fraction"):
            report.pick_variant(runs, margin=bad)
    import numpy as np
    assert len(report.pick_variant(runs, margin=np.float32(0.05))) == 1
    with pytest.raises(report.ConfigError, match="needs published_runs rows"):
        report.pick_variant(pd.DataFrame())
    with pytest.raises(report.ConfigError, match="no runs of task 'default'"):
        report.pick_variant(runs.assign(task="custom-1"))


def _stage0_curve(n0: int) -> pd.DataFrame:
    """A stage-0-only run's curve: n0 iterations of stage 0, the last one its widening."""
    it = list(range(n0))
    return pd.DataFrame({"iteration": it, "elapsed_s": [0.1 * i for i in it], "reward": [0.0] * n0,
                         "amplitude": [0.1] * n0, "window_fall_rate": [0.0] * n0, "window_episode_s": [1.0] * n0,
                         "stage": [0] * (n0 - 1) + [1], "event": ["wait"] * (n0 - 1) + ["widen"]})


def test_pick_variant_over_stage0_of_a_stage_study(tmp_path):
    """metric="stage0": the same rule over the first stage of runs stopped after it, counted from
    their curves (with_stage0); a learner with a seed that never ended stage 0 is not eligible."""
    d = body_ppo("muscular-fast").clip_coef
    learners = {"c": d, "a": round(d + 0.1, 3), "b": round(d + 0.2, 3), "x": round(d + 0.3, 3)}
    n0 = {("c", 1): 220, ("c", 2): 200, ("a", 1): 190, ("a", 2): 196, ("b", 1): 150, ("x", 1): 100, ("x", 2): 0}
    for (name, seed), n in n0.items():
        r = train_row("muscular-fast", seed=seed, solved=False, iterations=n, time_to_solve_s=None,
                      params=dict(stop_after_stage=0, ppo={"clip_coef": learners[name]}))
        results.append_row("train", r, tmp_path)
        results.write_curve(r["run_id"], _stage0_curve(n) if n else _stage0_curve(60).assign(stage=0, event="wait"),
                            tmp_path)
    runs = report.with_stage0(report.published_runs(tmp_path, stage_studies=True), tmp_path)
    assert sorted(runs["stage0"]) == [0, 100, 150, 190, 196, 200, 220]
    p = report.pick_variant(runs, metric="stage0").iloc[0]
    want = f"ppo.clip_coef={learners['a']}"
    # b has one seed, x a seed that never ended stage 0: only the control and a are eligible
    assert set(p["variants"]) == {"defaults", want}
    assert p["defaults_mean"] == 210 and p["best_mean"] == 193 and p["adopt"] and p["sets"] == [want]  # -8 %
    assert not report.pick_variant(runs, margin=0.1, metric="stage0").iloc[0]["adopt"]
    with pytest.raises(report.ConfigError, match="metric must be 'iterations' or 'stage0', got 'stage1'"):
        report.pick_variant(runs, metric="stage1")
    with pytest.raises(report.ConfigError, match="missing \\['stage0'\\]"):
        report.pick_variant(runs.drop(columns="stage0"), metric="stage0")
    # the rule over solves sees none here: no learner of the defaults with solved seeds
    with pytest.raises(report.ConfigError, match=">= 2 solved seeds"):
        report.pick_variant(runs)
    assert report.with_stage0(runs.iloc[:0], tmp_path).empty
    assert set(report.pick_variant(runs.assign(stage0=runs["stage0"].replace(190, float("inf"))),
                                   metric="stage0").iloc[0]["variants"]) == {"defaults"}  # not finite: not eligible


def test_the_headline_is_todays_learner_not_the_group_with_most_seeds(tmp_path):
    """A candidate learner's solo seeds (more of them, newer) never replace the headline of the
    body's default learner; with no solo solve of today's learner the body has no headline."""
    d = body_ppo("simple").clip_coef
    rows = [train_row("simple", seed=s, tts=50.0 + s) for s in (0, 1)]
    rows += [train_row("simple", seed=s, tts=40.0, params=dict(ppo={"clip_coef": round(d + 0.1, 3)}),
                       time="2026-12-01T06:00:00+00:00") for s in (0, 1, 2)]
    rows += [train_row("muscular-fast", seed=s, params=dict(ppo={"clip_coef": 0.11})) for s in (0, 1)]
    s = report.solve_summary(_write(tmp_path, rows))
    assert sorted(s["learner_changes"]) == ["defaults", "ppo.clip_coef=0.11", f"ppo.clip_coef={round(d + 0.1, 3)}"]
    h = report.headline(s)
    assert h.index.get_level_values("body").tolist() == ["simple"]
    assert h["n_solo"].tolist() == [2] and h["time_to_solve_median_s"].tolist() == [50.5]
    runs = report.published_runs(tmp_path)
    assert report.no_headline_note("muscular-fast", runs) == (
        "no committed solo solved run of muscular-fast's default learner in data/results/train.csv "
        "(2 solo solves of other learners or Newton solves than today's defaults)")
    assert report.no_headline_note("simple", runs.iloc[:0]) == "no committed solo solved run of simple in data/results/train.csv"
    from fightlab.measure import bench
    assert bench.estimate("muscular-fast", 0.2, runs) == (None, None, {"note": report.no_headline_note("muscular-fast", runs)})
    with pytest.raises(report.ConfigError, match="with_stage0 needs published_runs rows"):
        report.with_stage0(pd.DataFrame())


def test_the_single_launch_is_the_gpu_default_and_a_group_of_its_own(tmp_path):
    """On a GPU the defaults' Newton solve is the single launch: its runs are the headline and
    MuJoCo Warp's solve is named as a change (its loops pool); on warp's CPU device MuJoCo Warp's
    is the default. Config ids keep their values from before the single launch; Figure 2's
    iterations pool both solves (the same physics to float32 rounding)."""
    gpu = dict(device="cuda:0", backend="gpu")
    single = dict(gpu, physics_engine={"solver_loop": "single_launch"})
    rows = [train_row("simple", seed=s, tts=50.0 + s, params=dict(gpu, physics_engine={"solver_loop": "unrolled"}))
            for s in (0, 1, 2)]
    rows += [train_row("simple", seed=s, tts=40.0 + s, params=single, time="2026-12-01T06:00:00+00:00")
             for s in (0, 1)]
    rows += [train_row("simple", seed=3, tts=53.0, params=dict(gpu, solver_loop="conditional"))]
    s = report.solve_summary(_write(tmp_path, rows))
    assert sorted(zip(s["learner_changes"], s["n_solo"])) == [("MuJoCo Warp solve", 4), ("defaults", 2)]
    h = report.headline(s)
    assert h["n_solo"].tolist() == [2] and h["time_to_solve_median_s"].tolist() == [40.5]
    # warp's CPU device and MuJoCo's C engine: MuJoCo Warp's solve is the default there
    now = dict(env=NOW_PHYSICS)
    assert report.learner_changes(dict(now, device="cpu", physics_engine={"solver_loop": "unrolled"}), "simple") == "defaults"
    assert report.learner_changes(dict(now, device="cpu", backend="cpu"), "simple") == "defaults"
    assert report.learner_changes(dict(now, device="cpu", solver_loop="single_launch"), "simple") == "single-launch solve"
    assert report.learner_changes(dict(now, **single), "simple") == "defaults"
    assert report.config_id({"solver_loop": "unrolled"}) == report.config_id({})
    assert report.config_id({"solver_loop": "single_launch"}) != report.config_id({})
    # what ran decides: a single launch that fell back ran MuJoCo Warp's loop; a hand-made spelling pools with neither
    fell_back = {"solver_loop": "single_launch", "physics_engine": {"solver_loop": "unrolled"}}
    assert report.config_id(fell_back) == report.config_id({})
    assert report.config_id({"solver_loop": "SINGLE_LAUNCH"}) not in (report.config_id({}),
                                                                     report.config_id({"solver_loop": "single_launch"}))
    from fightlab.measure import solvetime
    its = solvetime.iterations_to_solve(report.published_runs(tmp_path))
    assert its["n_runs"].tolist() == [6]
    # a learner study pools both solves too: a control of yesterday's solve, an arm of today's
    study = [train_row("simple", seed=s, params=dict(gpu, physics_engine={"solver_loop": "unrolled"}), iterations=400)
             for s in (1, 2)]
    study += [train_row("simple", seed=s, params=dict(single, ppo={"clip_coef": 0.9}), iterations=300) for s in (1, 2)]
    pick = report.pick_variant(_write(tmp_path / "study", study)).iloc[0]
    assert pick["defaults_mean"] == 400 and pick["best"] == "ppo.clip_coef=0.9" and pick["adopt"]


def test_pick_variant_judges_each_learner_against_its_own_defaults(tmp_path):
    """A study with rsl_rl's runs: they are picked among themselves against rsl_rl's defaults
    (`config.body_ppo(body, "rsl_rl")`), never pooled with fightlab's learner's "defaults"."""
    rsl = lambda **ppo: dict(learner="rsl_rl", ppo=dict(kl_estimator="analytic", **ppo))  # noqa: E731  (rows store it)
    d = body_ppo("simple", "rsl_rl").init_std
    rows = []
    for seed, (a, b, c) in enumerate([(440, 400, 300), (450, 420, 310)], start=1):
        rows += [train_row("simple", seed=seed, iterations=a),                              # fightlab's defaults
                 train_row("simple", seed=seed, params=rsl(), iterations=b),               # rsl_rl's: 410
                 train_row("simple", seed=seed, params=rsl(init_std=d + 0.4), iterations=c)]  # 305
    picks = report.pick_variant(_write(tmp_path, rows)).set_index(["body", "learner"])
    r, f = picks.loc[("simple", "rsl_rl")], picks.loc[("simple", "fightlab")]
    assert r["defaults_mean"] == 410 and r["best_mean"] == 305 and r["adopt"]
    assert r["best"] == f"rsl_rl: ppo.init_std={d + 0.4}" and r["sets"] == [f"ppo.init_std={d + 0.4}"]
    assert f["defaults_mean"] == 445 and not f["adopt"] and set(f["variants"]) == {"defaults"}
