"""python -m fightlab bench (fightlab.measure.bench) at smoke size on the CPU."""

import json
import re

import pandas as pd
import pytest

from fightlab import cli, hosts, results
from fightlab.config import ConfigError
from fightlab.measure import bench
from fightlab.measure.report import SUMMARY_KEYS, headline, published_runs, solve_summary
from fightlab.paths import REPO_ROOT
from fightlab.survey.cost import GPU_TYPES


def test_smoke_rows_written(tmp_path):
    out = tmp_path / "b"
    rows = bench.run_bench(["simple"], "cpu", nworld=8, size="smoke", train_s=2.0, out=out,
                           progress=False, log=lambda s: None)
    assert len(rows) == 1 and rows[0]["ok"]
    df = results.read_rows("bench", out)
    assert list(df.columns) == list(results.columns("bench"))
    r = df.iloc[0]
    for col in ("compile_s", "first_iter_s", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter",
                "env_steps_per_s", "train_iterations", "train_s_per_iter", "cpu_cores", "job_wall_s"):
        assert r[col] > 0, col
    assert r["gpu"] == "cpu" and r["body"] == "simple" and r["nworld"] == 8 and r["commit"]
    params = json.loads(r["params"])
    assert params["cpu_model"] and "not measured" in " ".join(params["host_check"])
    assert "estimated" in params["estimate"]["note"]
    assert r["estimated_time_to_solve_s"] == pytest.approx(
        r["iterations_to_solve_reference"] * r["train_s_per_iter"])
    assert pd.isna(r["bandwidth_mb_per_s"]) and pd.isna(r["expected_env_steps_per_s"])
    saved = json.loads((out / "bench.json").read_text())
    assert saved["rows"][0]["run_id"] == r["run_id"]


def test_failed_check_ends_early(tmp_path):
    def check(device, url):
        return dict(ok=False, lines=["FAILED GPU not visible"], reason="GPU not visible",
                    cuda_driver_version=None, cuda_toolkit_version=None, bandwidth_mb_per_s=None)

    def never(*a, **k):
        raise AssertionError("measured after a failed check")

    rows = bench.run_bench(["simple", "muscular-fast"], "cpu", nworld=8, size="smoke", train_s=2.0,
                           out=tmp_path / "b", progress=False, log=lambda s: None, check=check,
                           point=never, train=never)
    assert [r["ok"] for r in rows] == [False, False]
    assert all("GPU not visible" in json.loads(r["params"])["reason"] for r in rows)


def test_bad_host_stops(tmp_path):
    def point(body, n, device, **k):
        return dict(compile_s=1.0, first_iter_s=0.5, iterations=2, s_per_iter=1.0, rollout_s_per_iter=0.8,
                    update_s_per_iter=0.2, env_steps_per_s=10.0)

    def never(*a, **k):
        raise AssertionError("trained on a bad host")

    old = bench.expected_speed
    bench.expected_speed = lambda *a: (1000.0, 3)
    try:
        rows = bench.run_bench(["simple"], "cpu", nworld=8, size="smoke", train_s=2.0, out=tmp_path / "b",
                               progress=False, log=lambda s: None, point=point, train=never)
    finally:
        bench.expected_speed = old
    assert not rows[0]["ok"] and "bad host" in json.loads(rows[0]["params"])["reason"]
    assert rows[0]["speed_ratio_vs_expected"] == pytest.approx(0.01)


def test_bad_host_rule():
    assert bench.bad_host(100.0, 1000.0)[0] is False        # 1/10 speed: the study's 4090
    assert bench.bad_host(400.0, 1000.0)[0] is True
    assert bench.bad_host(299.0, 1000.0, fraction=0.3)[0] is False
    ok, line = bench.bad_host(100.0, None)
    assert ok is None and "no reference" in line


def test_expected_speed_same_gpu_only():
    train = pd.DataFrame(dict(gpu=["NVIDIA H200", "NVIDIA H200", "RTX 4090", "NVIDIA H200"],
                              body=["simple"] * 4, nworld=[1024, 1024, 1024, 1024],
                              env_steps_per_s=[100.0, 300.0, 5.0, 1e6], concurrent=[1, 1, 1, 4]))
    assert bench.expected_speed("NVIDIA H200", "simple", 1024, None, train) == (200.0, 2)
    assert bench.expected_speed("NVIDIA A100", "simple", 1024, None, train) == (None, 0)
    assert bench.expected_speed("NVIDIA H200", "simple", 512, pd.DataFrame(), train) == (None, 0)


def test_driver_check():
    assert bench.cuda_version(12080) == pytest.approx(12.8)
    # warp's rule: minor-version compatibility, the toolkit's major .0 (11.4 for CUDA 11)
    assert bench.min_driver_cuda(13.4) == 13.0 and bench.min_driver_cuda(12.8) == 12.0
    assert bench.min_driver_cuda(11.8) == 11.4
    assert bench.driver_check(13.0, 13.4) is None  # the H200: driver 13.0 runs warp's 13.4 build
    assert bench.driver_check(12.9, 13.4) and "older than 13.0" in bench.driver_check(12.9, 13.4)
    assert bench.driver_check(11.2, 11.8) and bench.driver_check(11.4, 11.8) is None
    assert bench.driver_check(12.8, 12.8) is None and bench.driver_check(None, 12.8) is None


def test_estimate_synthetic_train_rows():
    df = published_runs(REPO_ROOT)
    keys = headline(solve_summary(df)).xs("simple", level="body", drop_level=False).index[0]
    m = pd.Series(True, index=df.index)
    for k, v in zip(SUMMARY_KEYS, keys):
        m &= df[k] == v
    m &= (df["solved"] == True) & (df["concurrent"] == 1)  # noqa: E712
    df = df.copy()
    df.loc[m, "iterations"] = [100 * (i + 1) for i in range(int(m.sum()))]
    want = float(pd.Series([100 * (i + 1) for i in range(int(m.sum()))]).median())
    it, t, src = bench.estimate("simple", 0.5, df)
    assert it == want and t == pytest.approx(want * 0.5) and "estimated" in src["note"]
    assert bench.estimate("simple", 0.5, df.iloc[0:0])[:2] == (None, None)


def _err(capsys, argv):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fightlab: error: ") and "\n" not in err
    return err


def test_time_limit_too_short(capsys, tmp_path):
    err = _err(capsys, ["bench", "--device", "cpu", "--train-s", "120", "--time-limit-s", "60",
                        "--bodies", "simple", "--out", str(tmp_path / "b")])
    assert "--time-limit-s 60 is too short" in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("argv, said", [
    (["--nworld", "lots"], "--nworld"),
    (["--nworld", "auto"], "--nworld auto"),
    (["--bodies", "nobody"], "nobody"),
    (["--bodies", "simple,simple"], "twice"),
    (["--train-s", "0"], "--train-s"),
    (["--publish"], "--publish"),
])
def test_bad_input_one_line(capsys, tmp_path, argv, said):
    assert said in _err(capsys, ["bench", "--device", "cpu", "--out", str(tmp_path / "b"), *argv])


def test_bandwidth_fallback_rule():
    good, line, info = bench.bandwidth_check("NVIDIA GeForce RTX 4090", 900.0, launch_us=4.2)
    assert good is True and "0.89 × the RTX 4090's published 1008 GB/s" in line and "4.2 µs (not judged)" in line
    assert info["published_gb_per_s"] == hosts.PUBLISHED_BANDWIDTH_GB_S["RTX 4090"] and "1,008 GB/s" in info["source"]
    bad, line, _ = bench.bandwidth_check("NVIDIA GeForce RTX 4090", 0.1 * 1008.0)  # 1/10: the study's 4090
    assert bad is False and line.startswith("bad host: ")
    assert bench.bandwidth_check("NVIDIA A100-SXM4-80GB", 1400.0)[0] is True  # vs the slowest A100 variant
    assert bench.bandwidth_check("cpu", 20.0)[0] is None and bench.bandwidth_check("GTX 1080", 300.0)[0] is None
    assert set(hosts.PUBLISHED_BANDWIDTH_GB_S) == set(hosts.BANDWIDTH_SOURCES) == set(GPU_TYPES)
    for t in GPU_TYPES:  # every figure is the first one its source quotes
        num, unit = re.search(r"([\d,.]+)\+? (GB|TB)/s", hosts.BANDWIDTH_SOURCES[t]).groups()
        assert float(num.replace(",", "")) * (1000 if unit == "TB" else 1) == hosts.PUBLISHED_BANDWIDTH_GB_S[t], t


@pytest.mark.parametrize("copy_gb_per_s, ok", [(90.0, False), (950.0, True)])
def test_bad_host_falls_back_to_published_bandwidth(tmp_path, monkeypatch, copy_gb_per_s, ok):
    """No earlier rows of the card: the probe's copy bandwidth against the published peak
    decides (fake numbers: a 4090 probed at 90 GB/s is a bad host, at 950 it trains)."""
    def point(body, n, device, **k):
        return dict(compile_s=1.0, first_iter_s=0.5, iterations=2, s_per_iter=1.0, rollout_s_per_iter=0.8,
                    update_s_per_iter=0.2, env_steps_per_s=10.0)

    trained, probes = [], []
    monkeypatch.setattr(bench.meta, "gpu_name", lambda device: "NVIDIA GeForce RTX 4090")
    rows = bench.run_bench(["simple", "muscular-fast"], "cpu", nworld=8, size="smoke", train_s=2.0,
                           out=tmp_path / "b", progress=False, log=lambda s: None, point=point,
                           train=lambda *a: trained.append(a) or dict(train_iterations=1, train_s_per_iter=1.0),
                           probe=lambda d: probes.append(d) or dict(copy_gb_per_s=copy_gb_per_s, launch_us=5.0))
    params = json.loads(rows[0]["params"])
    assert params["bandwidth_reference"]["published_gb_per_s"] == 1008.0 and len(probes) == 1  # once per job
    assert rows[0]["ok"] is ok and bool(trained) is ok
    assert ("bad host" in params.get("reason", "")) is (not ok)


def test_estimate_prefers_the_same_learner_and_nworld(tmp_path):
    """The bench's own learner at its nworld first (any commit, packed runs too), then
    interpolated between two of its world counts, then the headline; the basis is recorded."""
    from fightlab.config import TrainConfig, to_dict
    from fightlab.measure.report import learner_id

    def row(nworld, seed, iterations, concurrent=1, commit="abc1234", **ppo):
        cfg = to_dict(TrainConfig(body="simple", nworld=nworld, seed=seed))
        cfg["ppo"].update(ppo)
        r = results.run_metadata(body="simple", nworld=nworld, seed=seed, device="cpu",
                                 params={**cfg, "concurrent": concurrent, "task": "default"})
        r.update(gpu="NVIDIA H200", commit=commit, time_to_solve_s=iterations * 0.2, iterations=iterations,
                 compile_s=1.0, env_steps_per_s=1e5, physics_steps_per_s=5e5, rollout_s_per_iter=0.18,
                 update_s_per_iter=0.02, solved=True, final_amplitude=1.0, fall_rate=0.0, mean_episode_s=10.0,
                 overflow_count=0, nan_resets=0, host_reads_per_iter=1.0, graph_fallbacks=0, tracking=0.95,
                 tracking_survived=0.95, peak_gpu_mem_mib=None, **dict(dict.fromkeys(results.REFERENCE_COLUMNS), reference_passed=True))
        return r

    # the 4096-world row older than the 1024-world solo one: both groups hold one solo seed, and the
    # headline's tie-break is the newest (rows written in the same second would tie)
    older = {**row(4096, 1, 300), "time": "2026-01-01T00:00:00+00:00"}
    for r in (row(1024, 1, 400), row(1024, 2, 420, concurrent=4, commit="def5678"), older,
              row(1024, 1, 900, clip_coef=0.11), row(1024, 2, 910, clip_coef=0.11), row(1024, 3, 920, clip_coef=0.11)):
        results.append_row("train", r, tmp_path)
    df = published_runs(tmp_path)
    mine = learner_id(to_dict(TrainConfig()))
    it, t, src = bench.estimate("simple", 0.5, df, learner=mine, nworld=1024)
    assert it == 410 and t == pytest.approx(205.0) and src["basis"] == "learner and nworld"
    it2, _, src2 = bench.estimate("simple", 0.5, df, learner=mine, nworld=2048)
    assert it2 == pytest.approx(355.0) and src2["basis"].endswith("interpolated in log2(nworld)")
    # outside that learner's world counts, or another learner: the headline, said so; the headline
    # is today's learner's solo group (400), not the clip-0.11 group with more solo seeds
    it3, _, src3 = bench.estimate("simple", 0.5, df, learner=mine, nworld=16384)
    assert src3["basis"] == "headline" and it3 == 400 and "no committed solve of this learner" in src3["note"]
    assert bench.estimate("simple", 0.5, df, learner="00000000", nworld=1024)[0] == 400
