"""fightlab.measure.sidebyside: the learners side by side from hand-made train rows (medians,
unsolved runs within their budget, the ratio and its two factors), and the study tag."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from fightlab import results
from fightlab.config import ConfigError, TrainConfig, apply_overrides, to_dict
from fightlab.measure import sidebyside as sbs
from fightlab.measure.learners import learner_id
from fightlab.measure.summary import config_id
from fightlab.paths import REPO_ROOT


def row(body="simple", learner="fightlab", seed=1, tts=40.0, its=400, nworld=1024, solved=True, ref=True,
        budget=None, study="side_by_side", gpu="NVIDIA H100 80GB HBM3", roll=0.08, upd=0.02, s_it=0.1,
        mem=4000.0, **params) -> dict:
    """A train row as read back: params JSON with study, learner, time_limit_s; env_steps_per_s
    from ``s_it`` (nworld × 32 / s_it)."""
    p = {"concurrent": 1, **params, "study": study}
    if learner != "fightlab":
        p["learner"] = learner
    if budget is not None:
        p["time_limit_s"] = budget
    r = dict.fromkeys(results.columns("train"))
    r.update(run_id=f"{body}-{learner}-{nworld}-{seed}-{study}", gpu=gpu, body=body, nworld=nworld, seed=seed,
             params=json.dumps(p), time_to_solve_s=tts if solved and ref else math.nan, iterations=its,
             env_steps_per_s=nworld * 32 / s_it, rollout_s_per_iter=roll, update_s_per_iter=upd,
             solved=bool(solved and ref), host_reads_per_iter=1.0 if learner == "fightlab" else 285.0,
             reference_passed=(ref if solved else None), peak_gpu_mem_mib=mem)
    return r


def frame(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=list(results.columns("train")))


def both_bodies():
    """fightlab solves simple in 40 / 44 / 50 s (400 / 420 / 480 iterations, 0.1 s/it); rsl_rl
    at 1024 solves 2 of 3 (120, 150 s; 600, 700 its; 0.2 s/it), at 4096 1 of 3 (budget 440 s).
    muscular-fast: fightlab 90 / 86 / 95 s; rsl_rl 0 of 3 within 880 s."""
    rs = [row(seed=s, tts=t, its=i) for s, t, i in ((1, 40.0, 400), (2, 44.0, 420), (3, 50.0, 480))]
    rs += [row(learner="rsl_rl", seed=1, tts=120.0, its=600, s_it=0.2, budget=440),
           row(learner="rsl_rl", seed=2, tts=150.0, its=700, s_it=0.2, budget=440),
           row(learner="rsl_rl", seed=3, solved=False, its=2200, s_it=0.2, budget=440)]
    rs += [row(learner="rsl_rl", nworld=4096, seed=s, solved=s == 1, tts=100.0, its=300, s_it=0.5, budget=440)
           for s in (1, 2, 3)]
    rs += [row("muscular-fast", seed=s, tts=t, its=450, s_it=0.2) for s, t in ((1, 90.0), (2, 86.0), (3, 95.0))]
    rs += [row("muscular-fast", learner="rsl_rl", seed=s, solved=False, its=2700 + s, s_it=0.32, budget=900)
           for s in (1, 2, 3)]
    return frame(*rs)


def test_the_table_counts_solves_within_budget_and_reports_medians_only_past_half():
    t = sbs.side_by_side_table(both_bodies()).set_index(["body", "learner", "nworld"])
    f = t.loc[("simple", "fightlab", 1024)]
    assert (f.runs, f.solved, f.unsolved) == (3, 3, 0) and f.time_to_solve_s == 44.0 and f.iterations_to_solve == 420
    assert f.s_per_iter == pytest.approx(0.1) and f.time_text == "44.0 s" and f.reference_passed == "3/3"
    assert f.host_reads_per_iter == 1.0 and f.peak_gpu_mem_mib == 4000.0 and f.seeds == "1, 2, 3"
    r = t.loc[("simple", "rsl_rl", 1024)]  # 2 of 3: the median is the slower solve, 150 s
    assert (r.solved, r.unsolved, r.budget_s) == (2, 1, 440) and r.time_to_solve_s == 150.0
    assert r.iterations_to_solve == 700 and r.iterations_run == 700 and r.reference_passed == "2/2"
    w = t.loc[("simple", "rsl_rl", 4096)]  # 1 of 3: no median, "> budget"
    assert w.solved == 1 and math.isnan(w.time_to_solve_s) and w.time_text == "> 440 s"
    m = t.loc[("muscular-fast", "rsl_rl", 1024)]
    assert m.solved == 0 and m.unsolved == 3 and m.time_text == "> 900 s" and m.iterations_run == 2702
    assert m.reference_passed == "0/0"


def test_the_median_counts_unsolved_runs_as_not_solved_within_budget():
    assert sbs.median_within_budget([10, 20, 30, 40], [True, True, True, False]) == 25.0
    assert math.isnan(sbs.median_within_budget([10, 20, 30, 40], [True, True, False, False]))
    assert sbs.median_within_budget([30, 10, 20], [True, True, False]) == 30.0
    assert math.isnan(sbs.median_within_budget([], []))


def test_a_failed_reference_check_is_an_unsolved_run_and_counted():
    t = sbs.side_by_side_table(frame(row(seed=1), row(seed=2, ref=False), row(seed=3, tts=60.0)))
    r = t.iloc[0]
    assert (r.solved, r.unsolved, r.reference_failed, r.reference_passed) == (2, 1, 1, "2/3")
    assert r.time_to_solve_s == 60.0  # 40, 60 and the failed check counted as unsolved


def test_the_ratio_splits_into_seconds_per_iteration_and_iterations():
    d = {r.body: r for _, r in sbs.differences(sbs.side_by_side_table(both_bodies())).iterrows()}
    s = d["simple"]  # rsl_rl's best: 1024 (150 s) over 4096 (> budget)
    assert s.rsl_rl_nworld == 1024 and not s.lower_bound
    assert s.time_ratio == pytest.approx(150 / 44) and s.s_per_iter_ratio == pytest.approx(2.0)
    assert s.iterations_ratio == pytest.approx(700 / 420) and s.dominant == "seconds per iteration" and s.goal_met
    m = d["muscular-fast"]  # rsl_rl never solved: its budget and iterations run are lower bounds
    assert m.lower_bound and m.time_ratio == pytest.approx(900 / 90) and m.iterations_ratio == pytest.approx(2702 / 450)
    assert m.s_per_iter_ratio == pytest.approx(1.6) and m.dominant == "iterations" and m.goal_met
    text = sbs.difference_text(m)
    assert "ratio ≥ 10.00" in text and "the larger factor: iterations" in text and "meets the goal" in text


def test_a_slow_rsl_rl_within_twice_misses_the_goal_and_a_body_with_one_learner_is_left_out():
    rs = frame(*[row(seed=s, tts=40.0, its=400) for s in (1, 2, 3)],
               *[row(learner="rsl_rl", seed=s, tts=60.0, its=400, s_it=0.15) for s in (1, 2, 3)],
               *[row("muscular-fast", seed=s) for s in (1, 2, 3)])
    d = sbs.differences(sbs.side_by_side_table(rs))
    assert list(d["body"]) == ["simple"] and d["time_ratio"].item() == 1.5 and d["goal_met"].item() is False
    assert "misses the goal" in sbs.difference_text(d.iloc[0])


def test_only_solo_rows_of_the_study_count_and_one_card_only():
    rs = frame(row(seed=1), row(seed=2, study=None), row(seed=3, concurrent=4), row(seed=4, tts=50.0))
    t = sbs.side_by_side_table(rs)
    assert len(t) == 1 and t["runs"].item() == 2 and t["seeds"].item() == "1, 4"
    assert sbs.side_by_side_table(frame(row(study=None))).empty
    with pytest.raises(ConfigError, match="one card"):
        sbs.side_by_side_table(frame(row(seed=1), row(seed=2, gpu="NVIDIA H200")))


def test_the_study_tag_is_kept_in_params_and_changes_no_id():
    base = to_dict(TrainConfig(body="simple"))
    tagged = to_dict(apply_overrides(TrainConfig(body="simple"), ["study=side_by_side", "time_limit_s=400"]))
    assert tagged["study"] == "side_by_side" and base["study"] is None
    assert learner_id(tagged) == learner_id(base) and config_id(tagged) == config_id(base)
    old = {k: v for k, v in base.items() if k not in ("study", "time_limit_s")}  # a row from before the fields
    assert config_id(old) == config_id(base) and learner_id(old) == learner_id(base)


def test_study_cards_most_rows_first():
    rs = frame(row(seed=1), row(seed=2, gpu="NVIDIA H200"), row(seed=3, gpu="NVIDIA H200"), row(seed=4, study=None,
                                                                                                gpu="B200"))
    assert sbs.study_cards(rs) == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]


def test_speed_rows_give_the_seconds_per_iteration_ratios_of_their_study_only():
    def speed(body, rsl, s_it, roll, upd, reads, study="learner_speed"):
        r = results.run_metadata(body=body, nworld=1024, seed=0, device="cpu",
                                 params={"study": study, "learner": "rsl_rl" if rsl else "fightlab"})
        r.update(gpu="H100", rsl_rl=rsl, iterations=25, s_per_iter=s_it, rollout_s_per_iter=roll,
                 update_s_per_iter=upd, host_reads_per_iter=reads, stage_reached=0, overflow_count=0, nan_resets=0)
        return r

    rows = pd.DataFrame([speed("simple", False, 0.12, 0.10, 0.02, 1.0), speed("simple", True, 0.24, 0.14, 0.08, 285.0),
                         speed("simple", True, 0.30, 0.2, 0.1, 285.0, study="rsl_rl_first_segment"),
                         speed("muscular-fast", False, 0.2, 0.17, 0.03, 1.0)])
    t = sbs.speed_table(rows)
    assert len(t) == 3 and t.loc[(t.body == "simple") & (t.learner == "rsl_rl"), "s_per_iter"].item() == 0.24
    r = sbs.speed_ratios(t)  # muscular-fast has one learner: left out
    assert list(r["body"]) == ["simple"] and r["s_per_iter_ratio"].item() == pytest.approx(2.0)
    assert r["update_s_per_iter_ratio"].item() == pytest.approx(4.0) and r["host_reads_per_iter_ratio"].item() == 285.0
    assert sbs.speed_table(rows.iloc[:0]).empty


def test_notebook_08_at_smoke_size(tmp_path):
    """Both learners through the same door (2 iterations, 4 worlds, CPU), then the committed rows:
    the learner_speed ratios printed as computed, the figure drawn, nothing published."""
    from fightlab.reproduce import reproduce

    assert reproduce(only=["08"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    nb = json.loads((tmp_path / "08_side_by_side-smoke.ipynb").read_text())
    out = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "door/fightlab" in out and "door/rsl_rl" in out and "iterations=2" in out
    speed = sbs.speed_ratios(sbs.speed_table(results.read_rows("learner_speed", REPO_ROOT)))
    for r in speed.itertuples():  # the committed rows' ratios, as the notebook prints them
        assert f"learner_speed, {r.body}, {r.nworld} worlds, {r.gpu}: rsl_rl / fightlab seconds per iteration " \
               f"{r.s_per_iter_ratio:.2f}" in out
    assert "learners_side_by_side.png" in out and "image/png" in out


def test_rsl_rl_budget_is_ten_times_fightlabs_median_on_that_card_only():
    rs = both_bodies()
    assert sbs.fightlab_budget_s(rs, "simple", 1024, "NVIDIA H100 80GB HBM3") == 440.0
    assert sbs.fightlab_budget_s(rs, "muscular-fast", 1024, "NVIDIA H100 80GB HBM3") == 900.0
    assert math.isnan(sbs.fightlab_budget_s(rs, "simple", 1024, "NVIDIA H200"))
    assert math.isnan(sbs.fightlab_budget_s(rs, "simple", 2048, "NVIDIA H100 80GB HBM3"))
    half = frame(row(seed=1), row(seed=2, solved=False), row(seed=3, solved=False))  # 1 of 3 solved: no median
    assert math.isnan(sbs.fightlab_budget_s(half, "simple", 1024, "NVIDIA H100 80GB HBM3"))


def _script(tmp_path, *args, **env):
    """bench/side_by_side.sh on the CPU at 4 worlds, 2 iterations, one seed; rows of the sweep under
    tmp_path (OUT), run folders under runs/ (the tests' own, conftest)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DEVICE": "cpu", "NWORLD": "4", "ITERS": "2", "SEEDS": "1", "PY": sys.executable,
           "OUT": str(tmp_path), "PYTHONPATH": str(REPO_ROOT), **env}
    return subprocess.run(["bash", str(REPO_ROOT / "bench" / "side_by_side.sh"), *args], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def repo_work():
    """A WORK under the repository's runs/ (with OUT, a study's WORK must lie inside the
    repository), unique to the test, removed at its end (and runs/ if it made it)."""
    import contextlib
    import shutil
    import uuid

    runs = REPO_ROOT / "runs"
    made = not runs.exists()
    work = runs / f"sbs-test-{uuid.uuid4().hex[:12]}"
    yield work
    shutil.rmtree(work, ignore_errors=True)
    if made:
        with contextlib.suppress(OSError):
            runs.rmdir()


def _refused(r, *words):
    """One line on stderr naming ``words``, exit 2, nothing on stdout."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and not r.stdout, (r.returncode, r.stdout, r.stderr)
    assert lines[0].startswith("side_by_side.sh: error: ") and all(w in lines[0] for w in words), lines[0]


@pytest.mark.parametrize("args, env, words", [
    (("study", "simple"), dict(NWORLD="x"), ["NWORLD='x'", "positive integer"]),
    (("study", "simple"), dict(RSL_NWORLD="many"), ["RSL_NWORLD='many'", '"best"']),
    (("study", "simple"), dict(SEEDS="1 -2"), ["SEEDS", "'-2'"]),
    (("study", "simple"), dict(ITERS="0"), ["ITERS='0'"]),
    (("study", "simple"), dict(BUDGET_S="abc"), ["BUDGET_S='abc'", "positive number"]),
    (("study", "simple"), dict(SEGMENT_S="-1"), ["SEGMENT_S='-1'"]),
    (("study", "simple", "fightlb rsl_rl"), {}, ["'fightlb'", "fightlab or rsl_rl"]),
    (("study", "simple"), {}, ["WORK=", "outside the repository", "runs/"]),  # OUT set, WORK in tmp
    (("sweep", "simple"), dict(SWEEP_ITERS="2", WARM="2"), ["WARM=2", "SWEEP_ITERS=2"]),
    (("sweep", "simple"), dict(WARM="x"), ["WARM='x'"]),
    (("sweep", "simple"), dict(SWEEP_NWORLDS="4 eight"), ["SWEEP_NWORLDS", "'eight'"]),
    (("sweep", "simple"), dict(OUT="/proc/fightlab-nope"), ["OUT=/proc/fightlab-nope", "writable"]),
    (("sweep", "simple"), dict(OUT="FILE"), ["OUT=", "writable"]),
    (("sweep", "simple"), dict(WORK="FILE"), ["WORK=", "writable"]),
])
def test_bad_inputs_are_refused_in_one_line_before_anything_is_made(tmp_path, args, env, words):
    (tmp_path / "file").write_text("")
    env = {"WORK": str(tmp_path / "work"), "OUT": str(tmp_path / "out"),
           **{k: str(tmp_path / "file") if v == "FILE" else v for k, v in env.items()}}
    _refused(_script(tmp_path, *args, **env), *words)
    assert not (tmp_path / "work").exists() and (env["WORK"] == str(tmp_path / "file") or not (tmp_path / "out").exists())


def test_a_second_copy_on_the_same_work_is_refused(tmp_path):
    import fcntl

    work = tmp_path / "work"
    work.mkdir()
    with open(work / ".side_by_side.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the first copy, still running
        r = _script(tmp_path, "sweep", "simple", WORK=str(work), SWEEP_NWORLDS="4", SWEEP_ITERS="2", WARM="0")
    _refused(r, f"WORK={work}", "in use")
    assert sorted(p.name for p in work.iterdir()) == [".side_by_side.lock"]


@pytest.mark.slow
def test_rsl_rl_trains_at_the_best_world_count_of_the_sweep_rows_in_out(tmp_path, repo_work):
    """RSL_NWORLD=best reads the sweep's rows in OUT (where `sweep` writes them), past warp's banner."""
    from fightlab.measure.sidebyside import SWEEP_STUDY

    for n in (4, 8):  # 8 worlds at the same seconds per iteration: twice the samples per second
        r = results.run_metadata(body="simple", nworld=n, seed=0, device="cpu", params={"study": SWEEP_STUDY})
        r.update(rsl_rl=True, iterations=2, s_per_iter=0.5, rollout_s_per_iter=0.4, update_s_per_iter=0.1,
                 host_reads_per_iter=285.0, stage_reached=0, overflow_count=0, nan_resets=0)
        results.append_row("learner_speed", r, tmp_path)
    r = _script(tmp_path, "study", "simple", "rsl_rl", RSL_NWORLD="best", BUDGET_S="60", WORK=str(repo_work))
    assert r.returncode == 0 and "its best world count on cpu from the sweep: 8" in r.stderr, r.stdout + r.stderr
    rows = results.read_rows("train", repo_work / "rsl_rl-simple-8w-s1")
    assert len(rows) == 1 and rows["nworld"].tolist() == [8]


@pytest.mark.slow
def test_the_study_script_trains_both_learners_tagged_and_gives_rsl_rl_its_budget(tmp_path, repo_work):
    """A CPU smoke of the study (nothing published on the CPU): fightlab, then rsl_rl with
    time_limit_s = BUDGET_S, both tagged study side_by_side; without a fightlab median and without
    BUDGET_S, rsl_rl does not run and the line says why (exit 1)."""
    r = _script(tmp_path, "study", "simple", BUDGET_S="60", WORK=str(repo_work))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fightlab simple s1: run " in r.stdout and "rsl_rl simple s1: run " in r.stdout
    folder = REPO_ROOT / r.stdout.strip().splitlines()[-1].removeprefix("run folders: ")
    rows = pd.concat([results.read_rows("train", folder / x) for x in ("fightlab-simple-s1", "rsl_rl-simple-4w-s1")])
    params = [json.loads(p) for p in rows["params"]]
    assert [p["study"] for p in params] == ["side_by_side"] * 2 and [p.get("learner") for p in params] == [
        "fightlab", "rsl_rl"] and [p.get("time_limit_s") for p in params] == [None, 60.0]
    assert rows["iterations"].tolist() == [2, 2] and rows["peak_gpu_mem_mib"].isna().all()  # the CPU: empty
    assert not results.results_path("train", tmp_path).exists()  # nothing went to OUT's or the repo's data/
    r = _script(tmp_path, "study", "simple", "rsl_rl", WORK=str(repo_work / "again"))
    assert r.returncode == 1 and "no fightlab median time to solve at 4 worlds on cpu" in r.stderr
    assert "rsl_rl simple s1" not in r.stdout


@pytest.mark.slow
def test_the_sweep_writes_one_learner_speed_row_per_world_count(tmp_path):
    """One row per world count; the same call again (same WORK, OUT) trains none and adds no row."""
    sweep = dict(SWEEP_NWORLDS="4 8", SWEEP_ITERS="2", WARM="0", WORK=str(tmp_path / "work"))
    r = _script(tmp_path, "sweep", "simple", **sweep)
    assert r.returncode == 0, r.stdout + r.stderr
    again = _script(tmp_path, "sweep", "simple", **sweep)
    assert again.returncode == 0 and "sweep simple 4: done earlier" in again.stdout, again.stdout + again.stderr
    assert "sweep simple 8: done earlier" in again.stdout and "worlds: s/it" not in again.stdout
    rows = results.read_rows("learner_speed", tmp_path)
    assert rows["nworld"].tolist() == [4, 8] and rows["rsl_rl"].astype(bool).all()
    params = [json.loads(p) for p in rows["params"]]
    assert {p["study"] for p in params} == {"rsl_rl_nworld_sweep"} and all("last_fall_rate" in p for p in params)
    assert (rows["iterations"] == 2).all() and (rows["s_per_iter"] > 0).all()
    assert _script(tmp_path, "nope").returncode == 2


@pytest.mark.slow
def test_a_study_longer_than_one_call_goes_on_in_segments_on_a_new_machine(tmp_path, repo_work):
    """SEGMENT_S stops each training with a checkpoint; the archive in OUT (latest.pt as a file,
    members relative to the repository root) unpacked there where WORK was gone resumes the run,
    which then finishes with one row; a finished run is skipped, and the archive is gone once
    nothing is left to continue."""
    import shutil
    import subprocess

    work, out = repo_work, tmp_path / "out"
    out.mkdir()
    env = dict(WORK=str(work), SEGMENT_S="0.001", OUT=str(out), POLICIES="1")
    r = _script(out, "study", "simple", "fightlab", **env)
    assert r.returncode == 0 and "fightlab simple s1: segment ended at iteration 1" in r.stdout, r.stdout + r.stderr
    archive = out / "sbs-work.tgz"
    shutil.rmtree(work)  # the machine is gone; its archive came back
    subprocess.run(["tar", "xzf", str(archive), "-C", str(REPO_ROOT)], check=True)
    assert (work / "fightlab-simple-s1" / "latest.pt").is_file() and not (work / "fightlab-simple-s1" / "latest.pt").is_symlink()
    r = _script(out, "study", "simple", "fightlab", **env)
    assert r.returncode == 0 and "fightlab simple s1: run " in r.stdout, r.stdout + r.stderr
    rows = results.read_rows("train", work / "fightlab-simple-s1")
    assert len(rows) == 1 and rows["iterations"].tolist() == [2] and not archive.exists()
    listed = subprocess.run(["tar", "tzf", str(out / "policies.tgz")], capture_output=True, text=True, check=True)
    assert listed.stdout.split() == [str((work / "fightlab-simple-s1" / "latest.pt").relative_to(REPO_ROOT))]
    kept = subprocess.run(["tar", "tzf", str(out / "sbs-rows.tgz")], capture_output=True, text=True, check=True)
    run = str((work / "fightlab-simple-s1").relative_to(REPO_ROOT))
    assert {f"{run}/data/results/train.csv", f"{run}.log"} <= set(kept.stdout.split())  # the finished run's record
    r = _script(out, "study", "simple", "fightlab", **env)
    assert r.returncode == 0 and "fightlab simple s1: finished earlier" in r.stdout


def test_rsl_rl_s_best_world_count_is_the_sweep_s_most_samples_per_second():
    """`best_nworld`: per body and card, the sweep row with the largest nworld / s_per_iter (the
    newest per nworld); other studies, cards and bodies ignored; None without sweep rows."""
    from fightlab.measure.sidebyside import SWEEP_STUDY, best_nworld

    def row(n, s, body="simple", gpu="G", study=SWEEP_STUDY, time="2026-12-06T00:00:00"):
        return dict(body=body, gpu=gpu, nworld=n, s_per_iter=s, time=time, params=json.dumps({"study": study}))

    speed = pd.DataFrame([row(512, 0.30), row(1024, 0.32), row(2048, 0.70), row(4096, 2.0),
                          row(2048, 0.36, time="2026-12-07T00:00:00"),  # newer: 5,689 samples/s per step
                          row(8192, 0.5, study="learner_speed"), row(8192, 0.5, gpu="other"),
                          row(8192, 0.5, body="muscular-fast")])
    assert best_nworld(speed, "simple", "G") == 2048  # 512/0.30 1,707; 1024/0.32 3,200; 2048/0.36; 4096/2.0 2,048
    assert best_nworld(speed, "muscular-fast", "G") == 8192 and best_nworld(speed, "simple", "other") == 8192
    assert best_nworld(speed, "simple", "H") is None
    assert best_nworld(speed.iloc[:0], "simple", "G") is None


def test_a_best_group_needs_three_seeds_unless_none_has_them():
    # rsl_rl at 4096: one quick seed; at 1024: three slower ones -> 1024 is its best
    rs = frame(*[row(seed=s, tts=40.0, its=400) for s in (1, 2, 3)],
               *[row(learner="rsl_rl", seed=s, tts=200.0, its=800, s_it=0.25) for s in (1, 2, 3)],
               row(learner="rsl_rl", seed=1, tts=120.0, its=400, s_it=0.3, nworld=4096))
    d = sbs.differences(sbs.side_by_side_table(rs)).iloc[0]
    assert d.rsl_rl_nworld == 1024 and d.rsl_rl_runs == 3 and d.time_ratio == 5.0
    assert "preliminary" not in sbs.difference_text(d)
    only = frame(*[row(seed=s, tts=40.0, its=400) for s in (1, 2, 3)],
                 row(learner="rsl_rl", seed=1, tts=120.0, its=400, s_it=0.3, nworld=4096))
    d = sbs.differences(sbs.side_by_side_table(only)).iloc[0]
    assert d.rsl_rl_nworld == 4096 and d.rsl_rl_runs == 1 and d.time_ratio == 3.0
    assert "(preliminary: rsl_rl 1 run, fewer than 3)" in sbs.difference_text(d)


def test_a_body_with_one_learner_says_which_is_missing():
    rs = frame(*[row(seed=s) for s in (1, 2, 3)], *[row(learner="rsl_rl", seed=s, tts=200.0) for s in (1, 2, 3)],
               *[row("muscular-fast", seed=s) for s in (1, 2, 3)])
    lines = sbs.missing_lines(sbs.side_by_side_table(rs))
    assert lines == ["muscular-fast: no rsl_rl side-by-side training on this card yet, so no ratio "
                     "(bash bench/side_by_side.sh study muscular-fast rsl_rl)"]
    assert sbs.missing_lines(sbs.side_by_side_table(frame(*[row(seed=s) for s in (1, 2)],
                                                          row(learner="rsl_rl")))) == []


def test_rsl_rl_short_of_three_runs_at_its_sweep_s_best_world_count_is_named():
    """With the sweep's rows: a body whose rsl_rl runs lack 3 at its best world count gets a line
    (how many so far, the command); 3 there, or no sweep row for the card: no line."""
    from fightlab.measure.sidebyside import SWEEP_STUDY

    def sweep(n, s_it, gpu="NVIDIA H100 80GB HBM3"):
        return dict(body="simple", gpu=gpu, nworld=n, s_per_iter=s_it, time="2026-12-06T00:00:00",
                    params=json.dumps({"study": SWEEP_STUDY}))

    speed = pd.DataFrame([sweep(1024, 0.3), sweep(4096, 0.4)])  # 4096: the most samples per second
    base = [row(seed=s) for s in (1, 2, 3)] + [row(learner="rsl_rl", seed=s, tts=200.0) for s in (1, 2, 3)]
    card = "NVIDIA H100 80GB HBM3"
    one = sbs.side_by_side_table(frame(*base, row(learner="rsl_rl", seed=1, tts=150.0, nworld=4096)))
    assert sbs.missing_lines(one, speed, card) == [
        "simple: rsl_rl has 1 of 3 runs at its best world count (4096, from its sweep) so far "
        "(RSL_NWORLD=best bash bench/side_by_side.sh study simple rsl_rl)"]
    assert sbs.missing_lines(one) == [] and sbs.missing_lines(one, speed, "another card") == []
    three = sbs.side_by_side_table(frame(*base, *[row(learner="rsl_rl", seed=s, tts=150.0, nworld=4096)
                                                  for s in (1, 2, 3)]))
    assert sbs.missing_lines(three, speed, card) == []
