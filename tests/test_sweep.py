"""The world-count sweep (fightlab.measure.sweep): the driver at tiny CPU sizes, resume after an
interruption, the `--nworld auto` rule on synthetic ramps, bad nworld lists, the time-to-solve
summary and Figure 2 from synthetic rows, notebook 04 at smoke size."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fightlab import figures, results
from fightlab.cli import main
from fightlab.config import ConfigError, PPOConfig, TrainConfig, to_dict
from fightlab.measure import sweep
from fightlab.measure.report import learner_id, published_runs
from fightlab.run import nworld as nworld_rule  # the --nworld auto rule (core); sweep measures for it

TINY = dict(ppo=PPOConfig(num_steps=4, num_minibatches=2, update_epochs=1))
LEARNER = learner_id(to_dict(TrainConfig()))


def _meta(body, nworld, seed=0, gpu="NVIDIA H200", commit="abc1234", params=None, **more):
    row = results.run_metadata(body=body, nworld=nworld, seed=seed, params={**(params or {}), **more},
                               device="cpu")
    row.update(gpu=gpu, commit=commit)
    return row


def sweep_row(body, nworld, s_per_iter, gpu="NVIDIA H200", commit="abc1234", learner=LEARNER):
    row = _meta(body, nworld, gpu=gpu, commit=commit, learner=learner, sweep_id="x")
    row.update(iterations=9, s_per_iter=s_per_iter, rollout_s_per_iter=0.8 * s_per_iter,
               update_s_per_iter=0.15 * s_per_iter, env_steps_per_s=nworld * 32 / s_per_iter,
               host_reads_per_iter=1.0, graph_fallbacks=0, compile_s=2.0,
               s_per_iter_min=s_per_iter, s_per_iter_max=s_per_iter)
    return row


def train_row(body, nworld, seed, iterations, solved=True, concurrent=1, commit="abc1234"):
    params = {**to_dict(TrainConfig(body=body, nworld=nworld, seed=seed)), "concurrent": concurrent,
              "task": "default"}
    row = _meta(body, nworld, seed=seed, commit=commit, params=params)
    row.update(time_to_solve_s=iterations * 0.3 if solved else None, iterations=iterations, compile_s=3.0,
               env_steps_per_s=1e5, physics_steps_per_s=5e5, rollout_s_per_iter=0.2,
               update_s_per_iter=0.02, solved=solved, final_amplitude=1.0, fall_rate=0.01,
               mean_episode_s=9.8, overflow_count=0, nan_resets=0, host_reads_per_iter=1.0,
               graph_fallbacks=0, tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None,
               **dict(dict.fromkeys(results.REFERENCE_COLUMNS), reference_passed=True if solved else None))
    return row


def synthetic_root(tmp_path):
    """Sweep rows at 4 world counts per body, solve rows at 3 of them (two seeds, one packed)."""
    for body, base in (("simple", 0.1), ("muscular-fast", 0.2)):
        for n in (256, 512, 1024, 4096):
            results.append_row("sweep", sweep_row(body, n, base * (1 + n / 1024)), tmp_path)
        for n, its in ((256, 900), (1024, 500), (4096, 450)):
            results.append_row("train", train_row(body, n, 0, its), tmp_path)
            results.append_row("train", train_row(body, n, 1, its + 20, concurrent=4), tmp_path)
    results.append_row("train", train_row("simple", 1024, 2, 1500, solved=False), tmp_path)
    return tmp_path


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expect", [
    ("128,1.5", "'1.5' is not an integer"),
    ("128,lots", "'lots' is not an integer"),
    ("128,0", "'0' is not a positive integer"),
    ("-4", "'-4' is not a positive integer"),
    ("128,256,128", "128 is listed twice"),
    ("128,99999999", "'99999999' is above the most worlds accepted (4194304)"),
    ("", "needs at least one world count"),
    ("²", "'²' is not an integer"),  # str.isdigit accepts it, int() does not
    ("128,٣", "'٣' is not an integer"),
])
def test_bad_nworld_lists_are_one_clear_line(value, expect, capsys):
    assert main(["sweep", "--device", "cpu", "--nworld-list", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: --nworld-list: " if value else "fightlab: error: ") and expect in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_unicode_digits_are_one_clear_line(capsys):
    with pytest.raises(ConfigError, match="'²' is not a seed"):
        sweep.parse_seed_list("0,²")
    assert sweep.parse_seed_list(" 0, +1") == [0, 1] and sweep.int_text(" -3 ") == -3
    from fightlab.config import validate_nworld
    from fightlab.devices import resolve_device, validate_device

    for bad in ("²", "1²", "٣"):
        with pytest.raises(ConfigError, match="nworld must be a positive integer"):
            validate_nworld(bad)
    assert validate_nworld(" 64 ") == 64
    with pytest.raises(ConfigError, match="'cuda:²'"):
        validate_device("cuda:²")
    with pytest.raises(ConfigError, match="'cuda:²'"):
        resolve_device("cuda:²", has_cuda=lambda: True)
    assert main(["sweep", "--solve", "--seeds", "²"]) == 2
    err = capsys.readouterr().err
    assert "'²' is not a seed" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("sid", ["..", ".", "a/b", "../x", "-x", ".hidden", "a b", "x/..", ""])
def test_bad_sweep_ids_are_refused_before_any_write(sid, tmp_path, monkeypatch, capsys):
    import fightlab.paths

    monkeypatch.setattr(fightlab.paths, "RUNS", tmp_path / "runs")
    assert main(["sweep", "--device", "cpu", "--nworld-list", "4", f"--sweep-id={sid}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"fightlab: error: --sweep-id {sid!r} refused") and "[A-Za-z0-9]" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_sweep_id_folder_must_sit_directly_under_the_sweep_root(tmp_path):
    root = tmp_path / "runs" / "sweep"
    assert sweep.validate_sweep_id("cpu-1a2b.c_d", root) == root / "cpu-1a2b.c_d"
    root.mkdir(parents=True)
    (root / "link").symlink_to(tmp_path)  # a name that passes the rule but points elsewhere
    with pytest.raises(ConfigError, match="'link' refused.*resolves to"):
        sweep.validate_sweep_id("link", root)


def test_sweep_refuses_ignored_and_unsafe_flag_combinations(monkeypatch, capsys):
    from fightlab import devices

    for extra in (["--solve"], ["--publish"], ["--device", "cpu"], ["--body", "simple"], ["--nworld-list", "128,x"],
                  ["--sweep-id", "s1"]):
        assert main(["sweep", "--summary", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert f"does not take {extra[0]}" in err and len(err.splitlines()) == 1, err
    # no GPU here: --solve prints the batch for a GPU machine, --solve --run is refused
    monkeypatch.setattr(devices, "default_device", lambda: "cpu")
    assert main(["sweep", "--solve"]) == 0
    out = capsys.readouterr().out
    assert "python -m fightlab batch" in out and "for a GPU machine" in out
    assert main(["sweep", "--solve", "--run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "needs a GPU" in err and len(err.splitlines()) == 1
    # the GPU-sized default world counts on the CPU: refused, with an example
    assert main(["sweep", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--nworld-list 4,8" in err and len(err.splitlines()) == 1
    assert main(["sweep"]) == 2  # no GPU: the default device is the CPU
    assert "--nworld-list 4,8" in capsys.readouterr().err
    # with a GPU, --solve without --run only prints it
    monkeypatch.setattr(devices, "default_device", lambda: "cuda:0")
    assert main(["sweep", "--solve"]) == 0
    assert "add --run to run it" in capsys.readouterr().out


def test_default_sweep_id_depends_on_the_commit(monkeypatch):
    opts = sweep.sweep_options(["simple"], [4], "cpu", 3, 1, 0)
    assert sweep.sweep_id(opts, "aaaaaaa") == sweep.sweep_id(opts, "aaaaaaa")
    assert sweep.sweep_id(opts, "aaaaaaa") != sweep.sweep_id(opts, "bbbbbbb")
    monkeypatch.setenv("FIGHTLAB_COMMIT", "ccccccc")
    assert sweep.sweep_id(opts) == sweep.sweep_id(opts, "ccccccc")
    assert sweep.sweep_folder(opts).name == sweep.sweep_id(opts, "ccccccc")


def _fake_point(body, nworld, *a, **k):
    return dict(s_per_iter=0.1, s_per_iter_min=0.1, s_per_iter_max=0.1, rollout_s_per_iter=0.08,
                update_s_per_iter=0.02, env_steps_per_s=nworld * 4 / 0.1, host_reads_per_iter=1.0,
                graph_fallbacks=0, iterations=2, num_steps=4, compile_s=0.0, learner="x")


def test_resuming_a_sweep_of_another_commit_says_so(tmp_path, monkeypatch):
    folder = tmp_path / "runs" / "sweep" / "mine"
    kw = dict(device="cpu", iterations=3, skip=1, sweep_dir=folder, point=_fake_point)
    monkeypatch.setenv("FIGHTLAB_COMMIT", "aaaaaaa")
    logs = []
    sweep.run_sweep(["simple"], [4, 8], log=logs.append, **kw)
    assert not any("kept" in line for line in logs)
    assert sweep.read_state(folder)["points"]["simple/4"]["commit"] == "aaaaaaa"
    monkeypatch.setenv("FIGHTLAB_COMMIT", "bbbbbbb")
    logs.clear()
    rows = sweep.run_sweep(["simple"], [4, 8], log=logs.append, **kw)
    assert len(rows) == 2
    assert ("sweep mine: 2 points from commit aaaaaaa kept; pass a new --sweep-id to re-measure"
            in logs), logs
    # an older sweep.json without commits: the rows' commit is used
    state = sweep.read_state(folder)
    for e in state["points"].values():
        e.pop("commit")
    (folder / sweep.STATE).write_text(json.dumps(state))
    logs.clear()
    sweep.run_sweep(["simple"], [4, 8], log=logs.append, **kw)
    assert any("2 points from commit aaaaaaa kept" in line for line in logs), logs


def test_parse_lists():
    assert sweep.parse_nworld_list("128, 256,512") == [128, 256, 512]
    assert sweep.parse_nworld_list([4, 8]) == [4, 8]
    with pytest.raises(ConfigError, match="True is not an integer"):
        sweep.parse_nworld_list([True, 8])
    with pytest.raises(ConfigError, match="1 is listed twice"):
        sweep.parse_seed_list("1,1")


def test_sweep_publish_and_auto_on_the_cpu_are_refused(capsys):
    assert main(["sweep", "--device", "cpu", "--nworld-list", "4", "--publish"]) == 2
    assert "device 'cpu' is not a GPU" in capsys.readouterr().err
    assert main(["train", "--device", "cpu", "--nworld", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--nworld auto times a ramp on a GPU" in err and "--nworld 64" in err


# --- the driver and resume ---------------------------------------------------------------------

def test_sweep_driver_writes_one_row_per_point_and_resumes(tmp_path):
    folder = tmp_path / "runs" / "sweep" / "s"
    kw = dict(device="cpu", iterations=3, skip=1, sweep_dir=folder, log=lambda s: None, **TINY)
    calls = []

    def interrupted(body, nworld, *a, **k):
        calls.append(nworld)
        if nworld == 8:
            raise KeyboardInterrupt  # the machine went away during the second point
        return sweep.time_point(body, nworld, *a, **k)

    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(["simple"], [4, 8], point=interrupted, **kw)
    state = sweep.read_state(folder)
    assert state["points"]["simple/4"]["status"] == "done"
    assert state["points"]["simple/8"]["status"] == "running"
    first = results.read_rows("sweep", folder)
    assert list(first["nworld"]) == [4]  # the finished point's row was written as it finished

    calls.clear()

    def counted(body, nworld, *a, **k):
        calls.append(nworld)
        return sweep.time_point(body, nworld, *a, **k)

    rows = sweep.run_sweep(["simple"], [4, 8], point=counted, **kw)
    assert calls == [8]  # the finished point is skipped
    assert list(rows["nworld"]) == [4, 8] and rows["run_id"].iloc[0] == first["run_id"].iloc[0]
    assert rows["run_id"].iloc[1] == state["points"]["simple/8"]["run_id"]  # same run_id on re-run
    r = rows.iloc[1]
    assert r["iterations"] == 2 and r["s_per_iter"] > 0 and r["graph_fallbacks"] == 0
    assert r["env_steps_per_s"] == pytest.approx(8 * 4 / r["s_per_iter"])
    assert json.loads(r["params"])["learner"] == learner_id(to_dict(TrainConfig(**TINY)))
    assert json.loads(r["params"])["physics_engine"]["solver_loop"] == "unrolled"  # the CPU's solve
    # the same command again does nothing; other options in the same folder are refused
    calls.clear()
    assert len(sweep.run_sweep(["simple"], [4, 8], point=counted, **kw)) == 2 and calls == []
    with pytest.raises(ConfigError, match="holds a sweep with other options \\(nworlds differ\\)"):
        sweep.run_sweep(["simple"], [4, 16], point=counted, **kw)


def test_sweep_folder_has_one_writer(tmp_path):
    folder = tmp_path / "runs" / "sweep" / "busy"

    def nested(body, nworld, *a, **k):  # a second sweep into the folder while the first runs
        sweep.run_sweep(["simple"], [4], device="cpu", iterations=3, skip=1, sweep_dir=folder,
                        log=lambda s: None)
        raise AssertionError("not reached")

    with pytest.raises(ConfigError, match="is in use by pid"):
        sweep.run_sweep(["simple"], [4], device="cpu", iterations=3, skip=1, sweep_dir=folder,
                        point=nested, log=lambda s: None)


def test_solve_batch_command():
    argv = sweep.solve_batch_argv(["simple"], "256,1024", "0,1", concurrent=4, max_iterations=100)
    assert argv == ["batch", "--job", "train --max-iterations 100 --no-progress --publish",
                    "--grid", "body=simple", "--grid", "nworld=256,1024", "--grid", "seed=0,1",
                    "--concurrent", "4"]
    from fightlab.cli import check_job

    assert check_job(["train", "--max-iterations", "100", "--no-progress", "--publish"])[0] is None
    with pytest.raises(ConfigError, match="'0' is not a positive integer"):
        sweep.solve_batch_argv(["simple"], "0,1024")


# --- the summary and the figure ----------------------------------------------------------------

def test_time_to_solve_table_on_synthetic_rows(tmp_path):
    root = synthetic_root(tmp_path)
    t = sweep.time_to_solve_table(results.read_rows("sweep", root), published_runs(root))
    assert len(t) == 8
    s = t[t["body"] == "simple"].set_index("nworld")
    # median iterations of both seeds (one packed: packing changes wall time, not iterations)
    assert s.loc[256, "iterations_median"] == 910 and s.loc[256, "packed"] == "1,4"
    assert s.loc[256, "time_to_solve_s"] == pytest.approx(910 * 0.1 * 1.25)
    assert s.loc[256, "time_to_solve_min_s"] == pytest.approx(900 * 0.125)
    assert s.loc[1024, "n_runs"] == 3 and s.loc[1024, "n_solved"] == 2  # the unsolved run: counted, not timed
    assert pd.isna(s.loc[512, "time_to_solve_s"]) and s.loc[512, "n_runs"] == 0
    assert s.loc[1024, "env_steps_per_s"] == pytest.approx(1024 * 32 / 0.2)
    # another commit's train rows pool (iterations are the learner's, as for --nworld auto) and are
    # listed; another learner's never pair with these sweep rows
    runs = published_runs(root)
    later = runs[(runs["body"] == "simple") & (runs["nworld"] == 4096)].assign(
        commit="fff0000", iterations=500, time="2099-01-01T00:00:00+00:00")
    pooled = sweep.time_to_solve_table(results.read_rows("sweep", root), pd.concat([runs, later]))
    p = pooled[pooled["body"] == "simple"].set_index("nworld")
    assert p.loc[4096, "n_solved"] == 4 and p.loc[4096, "commits"] == "abc1234,fff0000"
    assert p.loc[4096, "iterations_median"] == pytest.approx((470 + 500) / 2)  # of 450, 470, 500, 500
    assert p.loc[1024, "commits"] == "abc1234"
    other = runs.assign(params=[json.dumps({**json.loads(x), "ppo": {"clip_coef": 0.11}}) for x in runs["params"]])
    assert sweep.time_to_solve_table(results.read_rows("sweep", root), other)["time_to_solve_s"].isna().all()
    # another learner's sweep rows (a later default change): the table keeps the newest
    # learner's points per body, never a mix; learner=None keeps both
    sw = results.read_rows("sweep", root)
    newer = sw[sw["body"] == "simple"].assign(
        params=[json.dumps({**json.loads(x), "learner": "0ther000"}) for x in sw[sw["body"] == "simple"]["params"]],
        time="2099-01-01T00:00:00+00:00", s_per_iter=7.0)
    mixed = sweep.time_to_solve_table(pd.concat([sw, newer]), runs)
    assert mixed.groupby("body")["learner"].nunique().max() == 1 and len(mixed) == 8
    assert set(mixed[mixed["body"] == "simple"]["learner"]) == {"0ther000"}
    assert mixed[mixed["body"] == "simple"]["time_to_solve_s"].isna().all()  # no train row of that learner
    assert len(sweep.time_to_solve_table(pd.concat([sw, newer]), runs, learner=None)) == 12
    # the same learner's newer sweep with the single-launch solve: its points alone (iterations,
    # the learner's, pool both solves); the older rows recorded no solve: MuJoCo Warp's
    one_launch = sw[sw["body"] == "simple"].assign(
        params=[json.dumps({**json.loads(x), "physics_engine": {"solver_loop": "single_launch"}})
                for x in sw[sw["body"] == "simple"]["params"]], time="2099-01-01T00:00:00+00:00", s_per_iter=0.05)
    sl = sweep.time_to_solve_table(pd.concat([sw, one_launch]), runs)
    assert len(sl) == 8 and set(sl[sl["body"] == "simple"]["solve"]) == {"single-launch"}
    assert set(sl[sl["body"] != "simple"]["solve"]) == {"MuJoCo Warp"}
    assert sl.set_index(["body", "nworld"]).loc[("simple", 1024), "time_to_solve_s"] == pytest.approx(510 * 0.05)
    assert len(sweep.time_to_solve_table(pd.concat([sw, one_launch]), runs, learner=None)) == 12
    heads = [line for line in sweep.summary_lines(sl) if " on NVIDIA H200 (" in line]
    assert any(h.startswith("simple") and "single-launch solve" in h for h in heads), heads
    assert any(h.startswith("muscular-fast") and "MuJoCo Warp solve" in h for h in heads), heads
    # a point measured again replaces the older measurement
    again = results.read_rows("sweep", root).iloc[[0]].assign(s_per_iter=9.0, time="2099-01-01T00:00:00+00:00",
                                                            commit="fff0000")
    t2 = sweep.time_to_solve_table(pd.concat([results.read_rows("sweep", root), again]), runs)
    assert len(t2) == 8 and (t2["s_per_iter"] == 9.0).sum() == 1 and (t2["commit"] == "fff0000").sum() == 1
    lines = sweep.findings(t)
    assert any(line.startswith("simple on NVIDIA H200: fastest solve at 1024 worlds") for line in lines), lines
    # one solved world count: said as the only one, never "fastest", in the lines and on Figure 2
    one = t[t["nworld"] == 1024]
    lines1 = sweep.findings(one)
    assert any(line.startswith("simple on NVIDIA H200: solved at 1024 worlds only") for line in lines1), lines1
    assert not any("fastest" in line for line in lines1), lines1
    from fightlab.figures.sweep import plot_world_sweep

    def marks(table):
        fig = plot_world_sweep(table)
        return [a.get_text() for a in fig.axes[0].texts]

    assert "the only world count solved" in marks(one) and not any("fastest" in m for m in marks(one))
    assert "fastest: 1024" in marks(t)
    # each count's median against the original's 350-500 (910 and 510 outside, 460 inside), and the
    # flat bottom: 1024 alone within 2 % (256: 910 x 0.125 = 113.75 s against 510 x 0.2 = 102 s)
    assert ("simple on NVIDIA H200: median iterations to solve by nworld 256: 910, 1024: 510, 4096: 460 "
            "(the original: 350–500 at any world count; outside that here: 256, 1024)") in lines, lines
    assert "simple on NVIDIA H200: within 2% of the fastest: 1024 worlds; the others 256: +11.5%, 4096: +125.5%" in lines
    assert any(line.startswith("simple on NVIDIA H200: within 20% of the fastest: 256, 1024 worlds")
               for line in sweep.findings(t, tolerance=0.2))
    check = sweep.packing_check(published_runs(root))
    assert check.empty  # no seed ran both solo and packed here
    both = published_runs(root)
    both = pd.concat([both, both[both["concurrent"] == 1].assign(concurrent=4, iterations=505)])
    check = sweep.packing_check(both)
    assert len(check) == 6 and (check["iterations_packed"] == 505).all() and (check["concurrent"] == 4).all()
    assert (check["iterations_diff"] == check["iterations_packed"] - check["iterations_solo"]).all()


def test_figure2_from_synthetic_rows_and_skipped_without_rows(tmp_path, capsys):
    root = synthetic_root(tmp_path / "a")
    drawn = figures.draw(["figure2_world_sweep"], root)
    assert sorted(p.name for p in drawn["figure2_world_sweep"]) == ["figure2_world_sweep.png",
                                                                     "figure2_world_sweep.svg"]
    svg = (root / "figures" / "figure2_world_sweep.svg").read_text()
    assert "original study (RTX 5090" in svg and "solo seconds per iteration" in svg
    # sweep rows without any train rows: drawn (throughput), the time panel says why it is empty
    bare = tmp_path / "b"
    results.append_row("sweep", sweep_row("simple", 256, 0.1), bare)
    assert figures.draw(["figure2_world_sweep"], bare)["figure2_world_sweep"]
    assert "no solved trainings yet" in (bare / "figures" / "figure2_world_sweep.svg").read_text()
    # no sweep rows: skipped with one line, nothing written
    capsys.readouterr()
    empty = tmp_path / "c"
    empty.mkdir()
    assert figures.draw(["figure2_world_sweep"], empty) == {"figure2_world_sweep": []}
    assert "skip figure2_world_sweep:" in capsys.readouterr().out and not (empty / "figures").exists()


# --- the --nworld auto rule --------------------------------------------------------------------

KNOWN = {256: 900.0, 1024: 500.0, 4096: 450.0}


def test_auto_rule_picks_the_minimum_of_predicted_time():
    ramp = {256: 0.10, 512: 0.11, 1024: 0.13, 2048: 0.2, 4096: 0.35}
    n, t = nworld_rule.pick_nworld(ramp, KNOWN)
    assert n == 1024
    assert t.set_index("nworld").loc[512, "iterations"] == pytest.approx(700.0)  # log2-linear
    assert t["chosen"].sum() == 1 and t.loc[t["chosen"], "predicted_s"].iloc[0] == pytest.approx(65.0)


def test_auto_rule_flat_curve_takes_the_fewest_worlds():
    flat_known = {256: 1000.0, 4096: 1000.0}
    n, _ = nworld_rule.pick_nworld({256: 0.1, 1024: 0.1, 4096: 0.1}, flat_known)
    assert n == 256
    n, _ = nworld_rule.pick_nworld({256: 0.1005, 1024: 0.1}, flat_known)  # within the tolerance
    assert n == 256


def test_auto_rule_minimum_at_either_edge_and_no_extrapolation():
    assert nworld_rule.pick_nworld({256: 0.01, 1024: 0.13, 4096: 0.35}, KNOWN)[0] == 256
    assert nworld_rule.pick_nworld({256: 1.0, 1024: 0.5, 4096: 0.1}, KNOWN)[0] == 4096
    # outside the committed range: shown, never picked, however fast
    n, t = nworld_rule.pick_nworld({128: 1e-6, 1024: 0.13, 8192: 1e-6}, KNOWN)
    assert n == 1024 and list(t["in_range"]) == [False, True, False]


def test_auto_rule_refuses_missing_data():
    with pytest.raises(ConfigError, match="two or more world counts .*none.*pass --nworld N"):
        nworld_rule.pick_nworld({1024: 0.1}, {})
    with pytest.raises(ConfigError, match="two or more world counts"):
        nworld_rule.pick_nworld({1024: 0.1}, {1024: 500.0})
    with pytest.raises(ConfigError, match="no ramp world count \\(8192\\) lies within"):
        nworld_rule.pick_nworld({8192: 0.1}, KNOWN)
    with pytest.raises(ConfigError, match="must be positive"):
        nworld_rule.pick_nworld({1024: 0.0}, KNOWN)
    with pytest.raises(ConfigError, match="measured no world count"):
        nworld_rule.pick_nworld({}, KNOWN)


def test_auto_nworld_ramps_inside_the_committed_range_and_records_it(tmp_path):
    root = synthetic_root(tmp_path)
    ramped = []

    def fake(body, nworld, device, **k):
        ramped.append(nworld)
        return dict(s_per_iter={256: 0.1, 512: 0.11, 1024: 0.13, 2048: 0.2, 4096: 0.35}[nworld])

    cfg = TrainConfig(body="simple", device="cpu")
    with pytest.raises(ConfigError, match="on device 'cpu' pass a number"):
        sweep.auto_nworld(cfg, root=root, point=fake)
    n, rec = sweep.auto_nworld(cfg, root=root, point=fake, allow_cpu=True, log=lambda s: None)
    assert n == 1024 and ramped == [256, 512, 1024, 2048, 4096]
    assert rec["known_iterations"] == {"256": 910.0, "1024": 510.0, "4096": 460.0} and rec["chosen"] == 1024
    assert [r["nworld"] for r in rec["ramp"]] == ramped
    json.dumps(rec)  # goes into the row's params
    # another learner has no committed iterations: refused before any ramp
    ramped.clear()
    other = TrainConfig(body="simple", device="cpu", ppo=PPOConfig(learning_rate=3e-4))
    with pytest.raises(ConfigError, match="two or more world counts"):
        sweep.auto_nworld(other, root=root, point=fake, allow_cpu=True)
    assert ramped == []
    table = sweep.time_to_solve_table(results.read_rows("sweep", root), published_runs(root))
    vs = sweep.auto_vs_sweep(table).set_index("body")
    assert vs.loc["simple", "auto_nworld"] == vs.loc["simple", "best_nworld"] == 1024


def test_auto_runs_are_judged_against_the_sweep_without_themselves(tmp_path):
    """`--nworld auto`'s acceptance: a solo auto training's time to solve against the best point's seeds'
    spread (simple: 1024 worlds, 500 / 520 iterations × 0.2 s = 100–104 s), the sweep as the
    rule saw it (auto rows and CPU-backend rows never enter the iterations)."""
    root = synthetic_root(tmp_path)

    def auto(nworld, time_s, its=300, solved=True, concurrent=1, seed=5):
        row = train_row("simple", nworld, seed, its, solved=solved, concurrent=concurrent)
        p = json.loads(row["params"])
        p["nworld_auto"] = dict(chosen=nworld, ramp=[dict(nworld=nworld, s_per_iter=0.2, iterations=510,
                                                          predicted_s=102.0)])
        row.update(params=json.dumps(p), time_to_solve_s=time_s)
        results.append_row("train", row, root)

    auto(1024, 101.0)                     # within 100-104 s
    auto(512, 95.0)                       # faster than the best point's fastest run
    auto(1024, 110.0)                     # slower
    auto(1024, 90.0, concurrent=4)        # packed: not a time to solve
    auto(1024, None, solved=False)
    cpu = train_row("simple", 1024, 7, 100)  # the C engine's solve: not a MuJoCo Warp iteration count
    cpu["params"] = json.dumps({**json.loads(cpu["params"]), "backend": "cpu"})
    results.append_row("train", cpu, root)
    runs, sw = published_runs(root), results.read_rows("sweep", root)
    a = sweep.auto_runs(sw, runs)
    assert len(a) == 5 and (a["best_nworld"] == 1024).all()
    assert a["best_time_to_solve_s"].tolist() == pytest.approx([102.0] * 5)  # median 510: without 300s, 100
    assert a["best_min_s"].tolist() == pytest.approx([100.0] * 5) and a["best_max_s"].tolist() == pytest.approx([104.0] * 5)
    assert a["ok"].tolist() == [True, True, False, False, False]
    assert a["verdict"].iloc[0].startswith("within") and a["verdict"].iloc[1].startswith("faster")
    assert a["verdict"].iloc[2] == "slower than the best point's slowest seed (104.0 s): +5.8%"
    assert a["verdict"].iloc[3].startswith("packed") and a["verdict"].iloc[4] == "not solved"
    assert a["predicted_s"].tolist() == pytest.approx([102.0] * 5)
    # the figure's pool does take the auto runs (they are trainings of the learner), never the CPU row
    t = sweep.time_to_solve_table(sw, runs).set_index(["body", "nworld"])
    assert t.loc[("simple", 1024), "n_solved"] == 5 and t.loc[("simple", 1024), "iterations_min"] == 300
    assert sweep.known_iterations(runs, "simple", LEARNER)[1024] == 300.0  # 300 ×3, 500, 520
    assert sweep.warp_runs(runs)["run_id"].tolist() == runs["run_id"].iloc[:-1].tolist()
    assert sweep.auto_runs(sw, runs.iloc[:0]).empty
    # rows read raw (no published_runs columns): packing from params, so the packed row stays packed
    raw = sweep.auto_runs(sw, results.read_rows("train", root))
    assert raw["ok"].tolist() == [True, True, False, False, False] and raw["verdict"].iloc[3].startswith("packed")
    # another task, a solved row without a time, unrecorded packing: never a pass
    odd = runs[runs["run_id"] == a["run_id"].iloc[0]].copy()
    odd = pd.concat([odd.assign(run_id="t", params=[json.dumps({**json.loads(odd["params"].iloc[0]),
                                                                "task": "other"})]),
                     odd.assign(run_id="n", time_to_solve_s=float("nan")),
                     odd.assign(run_id="c", concurrent=float("nan"))])
    v = sweep.auto_runs(sw, pd.concat([runs[~runs["run_id"].isin(a["run_id"])], odd])).set_index("run_id")
    assert not v["ok"].any()
    assert v.loc["t", "verdict"].startswith("another task") and v.loc["n", "verdict"].startswith("solved, but no time")
    assert v.loc["c", "verdict"].startswith("packing not recorded")
    # a newer sweep of another learner on that GPU does not hide this learner's points
    newer = sw[sw["body"] == "simple"].assign(
        params=[json.dumps({**json.loads(x), "learner": "0ther000"}) for x in sw[sw["body"] == "simple"]["params"]],
        time="2099-01-01T00:00:00+00:00")
    assert sweep.auto_runs(pd.concat([sw, newer]), runs)["ok"].tolist() == [True, True, False, False, False]
    # an auto run of the single-launch solve is judged against that solve's sweep points only
    engine = {"physics_engine": {"solver_loop": "single_launch"}}
    one = runs[runs["run_id"] == a["run_id"].iloc[0]].assign(
        params=lambda d: [json.dumps({**json.loads(x), **engine}) for x in d["params"]])
    alone = sweep.auto_runs(sw, pd.concat([runs[~runs["run_id"].isin(a["run_id"])], one]))
    assert alone["verdict"].tolist() == ["no solved sweep point of this GPU, body, learner and Newton solve"]
    fast = sw.assign(params=[json.dumps({**json.loads(x), **engine}) for x in sw["params"]], s_per_iter=sw["s_per_iter"] / 2)
    both = sweep.auto_runs(pd.concat([sw, fast]), pd.concat([runs[~runs["run_id"].isin(a["run_id"])], one]))
    assert both["best_time_to_solve_s"].tolist() == pytest.approx([51.0]) and not both["ok"].iloc[0]


def test_train_nworld_auto_records_the_ramp_in_the_row(tmp_path, monkeypatch):
    record = dict(rule="test", chosen=4, ramp=[dict(nworld=4, s_per_iter=0.01)])
    seen = {}

    def fake_auto(cfg, **kw):
        seen["cfg"] = cfg
        return 4, record

    monkeypatch.setattr(sweep, "auto_nworld", fake_auto)
    run = tmp_path / "run"
    assert main(["train", "--device", "cpu", "--nworld", "auto", "--max-iterations", "2", "--run-dir",
                 str(run), "--no-progress", "--set", "ppo.num_steps=4", "--set", "ppo.update_epochs=1"]) == 0
    assert seen["cfg"].ppo.num_steps == 4  # the ramp times the learner that will train
    row = results.read_rows("train", run).iloc[0]
    assert row["nworld"] == 4 and json.loads(row["params"])["nworld_auto"] == record


# --- notebook 04 -------------------------------------------------------------------------------

def test_notebook_04_at_smoke_size(tmp_path):
    from fightlab.reproduce import reproduce

    assert reproduce(only=["04"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    nb = json.loads((tmp_path / "04_world_sweep-smoke.ipynb").read_text())
    out = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "s_per_iter" in out and "python -m fightlab batch" in out and "nworld auto" in out
    # the committed auto trainings (H200) are listed; the smoke sweep (warp's CPU) cannot judge them
    assert "--nworld auto picked" in out and "no solved sweep point of this GPU, body, learner and Newton solve" in out
    # the parameters cell prints the folder the sweep really ran in
    folders = [p for p in sweep.SWEEP_ROOT.iterdir() if p.name.startswith("cpu-")]
    shown = [f for f in folders if f"'sweep_dir': '{f}'" in out]
    assert len(shown) == 1 and (shown[0] / sweep.STATE).is_file(), out[:2000]


def _curve(stage0: int, wait: int = 2) -> pd.DataFrame:
    """A training's curve: ``stage0`` iterations in the first stage, then 9 stages of ``wait``
    (the last row of a stage is its widening, the stage it left; the solving row the last's)."""
    stage, event = [], []
    for s, n in enumerate([stage0] + [wait] * 9):
        for i in range(n):
            widen = i == n - 1 and s < 9
            stage.append(s + 1 if widen else s)
            event.append("widen" if widen else ("solved" if s == 9 and i == n - 1 else "wait"))
    return pd.DataFrame({"iteration": range(len(stage)), "stage": stage, "event": event})


def test_stage0_by_nworld_splits_the_first_stage_from_the_rest(tmp_path):
    """Stage 0 against nworld, from the curves: seeds and packed runs pool, an unsolved run or a
    run without a curve does not count, and the world-iterations are nworld × stage 0."""
    for n, seed, s0, conc in ((512, 1, 30, 1), (1024, 1, 20, 1), (1024, 2, 24, 4), (4096, 1, 8, 1)):
        row = train_row("simple", n, seed, s0 + 18, concurrent=conc)
        results.append_row("train", row, tmp_path)
        results.write_curve(row["run_id"], _curve(s0), tmp_path)
    results.append_row("train", train_row("simple", 2048, 1, 99), tmp_path)  # no curve: left out
    old = train_row("simple", 8192, 1, 30)  # a row from before packing was recorded (concurrent NaN)
    old["params"] = json.dumps({k: v for k, v in json.loads(old["params"]).items() if k != "concurrent"})
    results.append_row("train", old, tmp_path)
    results.write_curve(old["run_id"], _curve(12), tmp_path)
    lost = train_row("simple", 512, 3, 60, solved=False)
    results.append_row("train", lost, tmp_path)
    results.write_curve(lost["run_id"], _curve(40), tmp_path)
    t = sweep.stage0_by_nworld(published_runs(tmp_path), tmp_path).set_index("nworld")
    assert t.index.tolist() == [512, 1024, 4096, 8192] and t.loc[8192, "stage0_median"] == 12
    assert t.loc[1024, "n"] == 2 and t.loc[1024, "seeds"] == "1,2"
    assert t.loc[1024, "stage0_median"] == 22 and t.loc[1024, "stage0_min"] == 20
    assert (t["later_median"] == 18).all()
    assert t.loc[512, "iterations_median"] == 48 and t.loc[512, "stage0_world_iterations_median"] == 512 * 30
    assert sweep.stage0_by_nworld(published_runs(tmp_path / "none"), tmp_path / "none").empty


def test_every_committed_training_is_full_size_and_the_studies_start_at_the_bound():
    """The publish rule's full size (publish.training_size_problem) holds for every committed train
    row, and the training studies' smallest world counts are not below its bound."""
    import types

    from fightlab.publish import MIN_PUBLISH_NWORLD, training_size_problem
    from fightlab.paths import REPO_ROOT

    rows = results.read_rows("train", REPO_ROOT)
    assert len(rows) > 0
    dflt = TrainConfig()
    for _, r in rows.iterrows():
        p = json.loads(r["params"])
        cfg = types.SimpleNamespace(nworld=int(r["nworld"]), **{k: p.get(k, getattr(dflt, k)) for k in (
            "max_iterations", "curriculum_stages", "curriculum_wait")})
        assert training_size_problem(cfg) is None, (r["run_id"], training_size_problem(cfg))
    assert min(sweep.SOLVE_NWORLDS) == MIN_PUBLISH_NWORLD == min(sweep.RAMP_NWORLDS)
    assert min(rows["nworld"].astype(int)) == MIN_PUBLISH_NWORLD


@pytest.mark.parametrize("name", ["sweep", "train"])
def test_summary_with_a_byte_that_is_not_utf8_is_one_line(name, tmp_path, monkeypatch, capsys):
    """sweep --summary over a data/results file with a non-UTF-8 byte: one line naming the file
    and line, exit 2 (the same read guards train --publish, tests/test_cli.py)."""
    import shutil

    import fightlab.paths

    for e in ("sweep", "train"):
        dst = results.results_path(e, tmp_path)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(results.results_path(e, fightlab.paths.REPO_ROOT), dst)
    path = results.results_path(name, tmp_path)
    data = path.read_bytes()
    second = data.index(b"\n") + 1
    path.write_bytes(data[:second + 2] + b"\xe9" + data[second + 3:])
    monkeypatch.setattr(fightlab.paths, "REPO_ROOT", tmp_path)
    assert main(["sweep", "--summary"]) == 2
    err = capsys.readouterr().err
    assert err == f"fightlab: error: {path}:2: byte 0xe9 at offset {second + 2} is not UTF-8; fix or remove " \
                  "that line by hand (fightlab writes its data files as UTF-8)\n"


def test_summary_fits_100_columns_and_says_each_point(capsys):
    """sweep --summary over the committed rows: every line within sweep.SUMMARY_WIDTH columns, one
    line per sweep point under its (body, GPU) heading, the findings wrapped."""
    from fightlab.paths import REPO_ROOT

    assert main(["sweep", "--summary"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(map(len, out)) <= sweep.SUMMARY_WIDTH == 100
    table = sweep.time_to_solve_table(results.read_rows("sweep", REPO_ROOT), published_runs(REPO_ROOT))
    assert sum(1 for ln in out if ln.startswith(" nworld ")) == table.groupby(["gpu", "body"]).ngroups
    for r in table.itertuples():
        want = f"{r.nworld:>7} {r.s_per_iter:>7.4f} {r.env_steps_per_s:>11,.0f} {f'{r.n_solved}/{r.n_runs}':>7}"
        assert sum(1 for ln in out if ln.startswith(want)) == 1, want
    assert any(ln.startswith(sweep.findings(table)[0][:60]) for ln in out)
