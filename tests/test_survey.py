"""fightlab.survey.cost: the cost maths against the original's survey table,
one set-up constant per group, the EC2 CPU inconsistency flagged, our rows priced, the buying
guide, bad input as clear errors, Figure 3 drawn, notebook 07 at smoke size (CPU, tables only)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fightlab.config import ConfigError
from fightlab.survey import cost


@pytest.fixture(scope="module")
def ref():
    return cost.read_reference()


def test_the_reference_table_loads_with_its_groups(ref):
    assert len(ref) == 26 and tuple(ref.columns[:8]) == cost.REFERENCE_COLUMNS
    assert ref.groupby("group").size().to_dict() == {"vast.ai GPU": 16, "EC2 GPU": 4, "EC2 CPU": 6}
    assert set(ref.loc[ref["kind"] == "gpu", "gpu"]) <= set(cost.GPU_TYPES)
    assert ref.loc[ref["machine"] == "g6e.xlarge (L40S)", "gpu"].unique().tolist() == ["L40S"]
    assert set(ref.loc[ref["kind"] == "cpu", "vcpus"]) == {96, 192}
    # the cost's rounding is read from the file: 3 decimals in gpu_vs_ec2, 2 in cpu_baseline
    assert ref.groupby("source_table")["cost_decimals"].max().to_dict() == {"cpu_baseline": 2, "gpu_vs_ec2": 3}


def test_cost_formula():
    # (time to solve + set-up) × $/h / 3600; the table's RTX 5080 muscular-fast row at its own set-up
    assert cost.cost_per_solve(515, 85, 0.39) == pytest.approx(0.065)
    out = cost.cost_per_solve(np.array([3600.0, 1800.0]), 0.0, 2.0)
    assert out.tolist() == [2.0, 1.0]
    s = cost.cost_per_solve(pd.Series([100.0, 200.0], index=[3, 4]), 0.0, 36.0)
    assert isinstance(s, pd.Series) and s.to_dict() == {3: 1.0, 4: 2.0}
    # packed: price / solves per GPU-hour + one set-up shared by K
    assert cost.packed_cost_per_solve(10.0, 3.0) == pytest.approx(0.3)
    assert cost.packed_cost_per_solve(10.0, 3.0, setup_s=120, solves_per_setup=4) == pytest.approx(0.3 + 0.025)


def test_one_setup_per_group_reproduces_the_table(ref):
    setup = cost.fit_setup(ref)
    assert list(setup.index) == list(cost.GROUPS) and setup["n_rows"].sum() == len(ref)  # one constant each
    # the back-solved ranges the issue names: vast.ai 74–97 s, EC2 GPU ≈ 180 s, EC2 CPU ≈ 90 and ≈ 6 s
    assert setup.loc["vast.ai GPU", ["backsolved_min_s", "backsolved_max_s"]].round().tolist() == [74, 97]
    assert 175 < setup.loc["EC2 GPU", "setup_s"] < 185 and 85 < setup.loc["EC2 CPU", "setup_s"] < 95
    rep = cost.reproduce(ref, setup)
    assert rep.tol == cost.TOLERANCE == 0.05
    assert rep.table["setup_s"].nunique() == 3  # not per row
    ok = rep.table[rep.table["source_table"] == "gpu_vs_ec2"]
    assert ok["within_tol"].all() and ok["rel_error"].max() < 0.025
    # the misses are exactly the CPU baseline table's rows, by well over the tolerance
    miss = rep.misses
    assert miss["source_table"].tolist() == ["cpu_baseline", "cpu_baseline"]
    assert miss["machine"].tolist() == ["c8i.24xlarge, 96 vCPU", "c8a.24xlarge, 96 vCPU"]
    assert (miss["rel_error"] > 0.1).all()
    # a per-row set-up reproduces everything: the check is that ONE constant does it
    per_row = ref.assign(group=[f"row{i}" for i in range(len(ref))])
    trivial = cost.reproduce(per_row, dict(zip(per_row["group"], cost.backsolve_setup(ref))))
    assert trivial.misses.empty and trivial.table["rel_error"].max() < 1e-12


def test_the_ec2_cpu_inconsistency_is_flagged(ref):
    t = cost.ec2_cpu_inconsistency(ref)
    assert set(t["vcpus"]) == {96} and sorted(set(t["usd_per_h"])) == [1.34, 1.45, 2.02]
    by = t.groupby("source_table")["setup_backsolved_s"]
    assert by.min()["gpu_vs_ec2"] > 85 and by.max()["cpu_baseline"] < 7
    (line,) = cost.inconsistency_lines(ref)
    assert line.startswith("INCONSISTENT: the 'same' 96-vCPU EC2 machine has 3 prices")
    for s in ("$1.34/h", "$1.45/h", "$2.02/h", "89–90 s in gpu_vs_ec2", "6 s in cpu_baseline", "not fitted away"):
        assert s in line, s


def _write(tmp_path, df: pd.DataFrame):
    p = tmp_path / "reference.csv"
    df.to_csv(p, index=False)
    return p


def test_bad_input_is_a_clear_error(ref, tmp_path):
    raw = pd.read_csv(cost.REFERENCE_PATH, dtype=str, keep_default_na=False)
    with pytest.raises(ConfigError, match=r"unknown GPU 'GTX 1080'; known GPU types: T4, L4, A100"):
        cost.gpu_type("GTX 1080")
    assert cost.gpu_type("NVIDIA H200") == "H200" and cost.gpu_type("NVIDIA GeForce RTX 5090") == "RTX 5090"
    bad = raw.copy()
    bad.loc[3, "machine"] = "GTX 1080"
    with pytest.raises(ConfigError, match=r"row 5 \('GTX 1080', 'simple'\) machine: unknown GPU 'GTX 1080'"):
        cost.read_reference(_write(tmp_path, bad))
    for price, shown in (("0", "'0'"), ("-0.2", "'-0.2'"), ("", "''")):
        bad = raw.copy()
        bad.loc[0, "usd_per_h"] = price
        with pytest.raises(ConfigError, match=rf"row 2 \('RTX 5080', 'muscular-fast'\) usd_per_h = {shown}: must be a positive number"):
            cost.read_reference(_write(tmp_path, bad))
    with pytest.raises(ConfigError, match=r"missing column\(s\) cost_per_solve_usd; unexpected column\(s\) cost; expected columns: machine"):
        cost.read_reference(_write(tmp_path, raw.rename(columns={"cost_per_solve_usd": "cost"})))
    with pytest.raises(ConfigError, match="the survey table has no rows"):
        cost.read_reference(_write(tmp_path, raw.iloc[:0]))
    bad = raw.copy()
    bad.loc[0, "body"] = "humanoid"
    with pytest.raises(ConfigError, match=r"body = 'humanoid': valid: "):
        cost.read_reference(_write(tmp_path, bad))
    # missing rows: a group the fit needs has none
    with pytest.raises(ConfigError, match=r"set-up group 'EC2 GPU' has no rows in the reference table; groups present: vast.ai GPU, EC2 CPU"):
        cost.fit_setup(ref[ref["group"] != "EC2 GPU"])
    with pytest.raises(ConfigError, match=r"no set-up constant for group\(s\) 'EC2 CPU'"):
        cost.reproduce(ref, {"vast.ai GPU": 85.0, "EC2 GPU": 180.0})
    # the formula's own refusals
    with pytest.raises(ConfigError, match=r"price_per_hour must be a positive number, got 0.0"):
        cost.cost_per_solve(100, 80, 0)
    with pytest.raises(ConfigError, match=r"price_per_hour must be a positive number, got -1.0"):
        cost.cost_per_solve([100, 200], 80, [1.0, -1.0])
    with pytest.raises(ConfigError, match=r"setup_s must be a number >= 0, got -5.0"):
        cost.cost_per_solve(100, -5, 1.0)
    with pytest.raises(ConfigError, match=r"time_to_solve_s must be a positive number, got -1.0"):
        cost.cost_per_solve(-1, 0, 1.0)
    with pytest.raises(ConfigError, match=r"solves_per_gpu_hour must be a positive number, got 0.0"):
        cost.packed_cost_per_solve(0, 3.0)
    with pytest.raises(ConfigError, match=r"price_per_hour must be a positive number \[\$/h\] or None, got 'cheap'"):
        cost.validate_price("cheap")
    with pytest.raises(ConfigError, match=r"bands must increase: 1 follows 2"):
        cost.validate_bands([0, 2, 1])
    with pytest.raises(ConfigError, match=r"bands: a price cannot be negative, got -1"):
        cost.validate_bands([-1, 2])
    with pytest.raises(FileNotFoundError, match="survey reference table"):
        cost.read_reference(tmp_path / "absent.csv")


def _default_params(body) -> str:
    """A row's params JSON of the body's default learner and today's training physics: what reads
    otherwise when left out (an implied field, config.IMPLIED_FIELDS, reads as the value rows ran
    before it existed)."""
    from test_figures import train_row

    return train_row(body)["params"]


def _runs(gpu="NVIDIA H200"):
    """A published_runs-like table: three solo solved seeds per body and one packed run."""
    from fightlab.measure.report import SUMMARY_KEYS, learner_id  # noqa: F401 (SUMMARY_KEYS: the columns below)

    rows = []
    for body, tts, it in (("simple", 100.0, 500), ("muscular-fast", 240.0, 740)):
        for seed in range(3):
            rows.append(dict(run_id=f"{body}{seed}", time=f"2026-12-01T0{seed}:00:00+00:00", commit="abc1234",
                             gpu=gpu, body=body, nworld=1024, seed=seed, params=_default_params(body), setup="dense",
                             config="c", task="default", concurrent=1, mps=False, gpu_jobs=1, solved=True,
                             time_to_solve_s=tts + seed, iterations=it, compile_s=2.0, env_steps_per_s=1e5,
                             rollout_s_per_iter=0.2, update_s_per_iter=0.1))
    rows.append(dict(rows[0], run_id="packed", concurrent=4, time_to_solve_s=400.0, mps=True))
    # a learner-study variant packed beside it: another learner than the headline's
    rows.append(dict(rows[0], run_id="variant", concurrent=4, time_to_solve_s=300.0, mps=True,
                     params='{"ppo": {"init_std": 0.2}}', config="c2"))
    df = pd.DataFrame(rows)
    return df.assign(learner=[learner_id(json.loads(p)) for p in df["params"]])  # as published_runs


def test_our_rows_are_priced(ref):
    setup = cost.fit_setup(ref)
    said = []
    ours = cost.our_rows(_runs(), price_per_hour=3.6, setup=setup, log=said.append)
    assert (ours["mode"] != "solo").sum() == 1  # the variant is left out, and said
    assert any("1 packed train row(s) of another learner" in s for s in said), said
    solo = ours[ours["mode"] == "solo"].set_index("body")
    assert solo.loc["simple", "time_to_solve_s"] == 101.0  # the headline median
    host = setup.loc["vast.ai GPU", "setup_s"]
    assert solo.loc["simple", "setup_s"] == pytest.approx(host + 2.0)  # + compile_s
    assert solo.loc["simple", "cost_per_solve_usd"] == pytest.approx((101.0 + host + 2.0) * 3.6 / 3600)
    packed = ours[ours["mode"] != "solo"].iloc[0]
    assert packed["mode"] == "packed x4 MPS, 1024 worlds"  # the world count said: packed points may be a sweep's
    rate = 3600.0 / ((400.0 + 2.0) / 4)  # one solve in (wall + compile) / K GPU-seconds
    assert packed["solves_per_hour"] == pytest.approx(rate)
    assert packed["cost_per_solve_usd"] == pytest.approx(3.6 / rate + host * 3.6 / 3600 / 4)
    # packing rows: estimated points, the newest row per (body, GPU, nworld, K, MPS) only, and
    # only of the headline's training code (commit abc1234 here): another code's s/it is not its
    pk = pd.DataFrame([dict(run_id=i, time=t, commit=c, gpu="NVIDIA H200", body="simple", nworld=1024,
                            concurrent=k, mps=True, s_per_iter=sp, it_per_s_aggregate=k / sp)
                       for i, t, c, k, sp in (("old", "2026-12-01T01:00:00+00:00", "abc1234", 8, 0.8),
                                              ("new", "2026-12-01T02:00:00+00:00", "abc1234", 8, 0.72),
                                              ("k4", "2026-12-01T00:00:00+00:00", "abc1234", 4, 0.42),
                                              ("k16", "2026-12-01T00:00:00+00:00", "0ther01", 16, 1.4))])
    said.clear()
    est = cost.our_rows(_runs(), price_per_hour=3.6, setup=setup, packing=pk, log=said.append)
    est = est[est["time_estimated"]].set_index("mode")
    assert sorted(est.index) == ["packed x4 MPS, 1024 worlds", "packed x8 MPS, 1024 worlds"]
    x8 = est.loc["packed x8 MPS, 1024 worlds"]
    assert x8["time_to_solve_s"] == pytest.approx(500 * 0.72)  # headline iterations × s/it
    assert "packing row new" in x8["note"]
    assert any(x.startswith("survey: 1 packing row(s) left out: another training code") and "k16 (simple, commit 0ther01)" in x
               for x in said), said
    # a row of 4 GPUs (K = 8 each): a rental of 4 GPUs, 4 × the price, its aggregate over all 4; at
    # exactly 4 × one GPU's rate its cost per solve is one GPU's (the set-up shared by 4 × K)
    four = pk[pk["run_id"] == "new"].assign(run_id="g4", gpus=4, it_per_s_aggregate=4 * 8 / 0.72)
    est = cost.our_rows(_runs(), price_per_hour=3.6, setup=setup, packing=pd.concat([pk.assign(gpus=float("nan")), four]),
                        log=said.append)
    est = est[est["time_estimated"]].set_index("mode")
    g4, g1 = est.loc["packed x8 MPS on 4 GPUs, 1024 worlds"], est.loc["packed x8 MPS, 1024 worlds"]
    assert g4["usd_per_h"] == pytest.approx(4 * 3.6) and g4["solves_per_hour"] == pytest.approx(4 * g1["solves_per_hour"])
    assert "aggregate it/s of all 4 GPUs" in g4["note"] and "× 4 GPUs" in g4["note"]
    assert g4["cost_per_solve_usd"] == pytest.approx(3.6 / g1["solves_per_hour"] + host * 3.6 / 3600 / 8)
    # the assumed price by default, said in the note
    default = cost.our_rows(_runs(), setup=setup)
    assert (default["usd_per_h"] == cost.ASSUMED_PRICE_PER_HOUR["H200"]).all()
    assert default["note"].str.contains("assumed").all()
    with pytest.raises(ConfigError, match=r"unknown GPU 'NVIDIA Quadro X'; known GPU types:"):
        cost.our_rows(_runs("NVIDIA Quadro X"), price_per_hour=1.0, setup=setup)
    with pytest.raises(ConfigError, match="price_per_hour must be a positive number, got 0.0"):
        cost.our_rows(_runs(), price_per_hour=0, setup=setup)


def _backends(cpu_rows, gpu_rows=(), learner=None):
    """backends rows (data/results/backends.csv's columns this needs): (run_id, time, body,
    nworld, s_per_iter, env steps/s, compare_id) per CPU-backend row, then per MuJoCo Warp row;
    each ran ``learner`` (default: its body's default learner, the synthetic headline's)."""
    from fightlab.measure.report import learner_id

    rows = []
    for backend, gpu, spec in (("cpu", "CPU Test CPU (16 cores)", cpu_rows), ("gpu", "NVIDIA H200", gpu_rows)):
        for rid, t, body, nw, sp, eps, cid in spec:
            lrn = learner or learner_id(json.loads(_default_params(body)))
            rows.append(dict(run_id=rid, time=f"2026-12-01T{t}:00:00+00:00", commit="cde0b70", gpu=gpu, body=body,
                             nworld=nw, params=json.dumps(dict(backend=backend, compare_id=cid, learner=lrn)),
                             s_per_iter=sp, env_steps_per_s=eps, compile_s=0.5))
    return pd.DataFrame(rows)


_LEARNER = "00000000"  # not the synthetic headline's learner


def _varied_runs():
    """:func:`_runs` with simple's iterations 480 / 500 / 530 over its seeds (median 500) and
    muscular-fast's 700 / 740 / 800 (median 740)."""
    r = _runs()
    for body, its in (("simple", (480, 500, 530)), ("muscular-fast", (700, 740, 800))):
        solo = (r["body"] == body) & (r["concurrent"] == 1)
        r.loc[solo, "iterations"] = its
    return r


def test_cpu_backend_time_to_solve_is_estimated(ref):
    from fightlab.measure import backends

    setup = cost.fit_setup(ref)
    host = setup.loc["vast.ai GPU", "setup_s"]
    bk = _backends([("old", "01", "simple", 1024, 2.0, 1e4, "c1"), ("new", "03", "simple", 1024, 1.5, 1.4e4, "c2"),
                    ("mf", "03", "muscular-fast", 512, 3.0, 5e3, "c2")])
    said = []
    est = backends.estimated_time_to_solve(bk, _varied_runs(), log=said.append)
    assert est["body"].tolist() == ["simple"] and est["run_id"].tolist() == ["new"]  # the newest row, not "old"
    assert est["time_to_solve_s"].iloc[0] == pytest.approx(1.5 * 500)  # s/iteration × headline median iterations
    # muscular-fast's row ran another nworld than its headline (1024): left out, said
    assert any("muscular-fast: backends row mf ran 512 worlds, the headline 1024" in x for x in said), said
    ours = cost.our_rows(_varied_runs(), price_per_hour=3.6, setup=setup, cpu_price_per_hour=0.8, backends=bk,
                         log=said.append)
    cpu = ours[ours["kind"] == "cpu"]
    assert len(cpu) == 1
    r = cpu.iloc[0]
    assert (r["body"], r["group"], r["mode"], bool(r["time_estimated"])) == ("simple", "fightlab CPU", "solo", True)
    assert r["time_to_solve_s"] == pytest.approx(750.0) and r["usd_per_h"] == 0.8
    assert r["setup_s"] == pytest.approx(host + 0.5)  # host set-up + the backends row's compile_s
    assert r["cost_per_solve_usd"] == pytest.approx((750.0 + host + 0.5) * 0.8 / 3600)
    assert r["note"].startswith("estimated: backends row new (commit cde0b70) s/iteration × 500 "
                                "iterations to solve (headline; GPU runs, commit abc1234)"), r["note"]
    # the GPU rows are untouched by the backends rows
    base = cost.our_rows(_varied_runs(), price_per_hour=3.6, setup=setup, log=lambda _: None)
    pd.testing.assert_frame_equal(ours[ours["kind"] == "gpu"].reset_index(drop=True), base)
    # without a CPU price: left out, said
    said.clear()
    none = cost.our_rows(_varied_runs(), price_per_hour=3.6, setup=setup, backends=bk, log=said.append)
    assert (none["kind"] == "gpu").all()
    assert "survey: 1 estimated CPU-backend row(s) (simple) left out: no cpu_price_per_hour given" in said, said


def test_a_cpu_backend_row_of_another_learner_takes_that_learners_iterations_or_none(ref):
    """The CPU's seconds per iteration are its learner's (network, physics): they are multiplied
    by that learner's own iterations to solve, never by another learner's headline."""
    from fightlab.measure import backends
    from fightlab.measure.report import learner_id

    other = '{"ppo": {"init_std": 0.2}}'
    runs = _varied_runs()
    own = [dict(runs.iloc[0], run_id=f"old{i}", seed=i, params=other, config="c2", iterations=it,
                commit="0ld0001", time=f"2026-11-30T0{i}:00:00+00:00") for i, it in enumerate((600, 640, 700))]
    runs = pd.concat([runs, pd.DataFrame(own)], ignore_index=True)
    runs = runs.assign(learner=[learner_id(json.loads(p)) for p in runs["params"]])
    bk = _backends([("sim", "03", "simple", 1024, 1.5, 1.4e4, "c2")], learner=learner_id(json.loads(other)))
    said = []
    est = backends.estimated_time_to_solve(bk, runs, log=said.append)
    r = est.iloc[0]
    assert (r["iterations_of"], r["iterations_to_solve"], r["headline_n_solo"]) == ("learner", 640.0, 3)
    assert r["time_to_solve_s"] == pytest.approx(1.5 * 640) and r["headline_commit"] == "0ld0001"
    ours = cost.our_rows(runs, price_per_hour=3.6, setup=cost.fit_setup(ref), cpu_price_per_hour=0.8, backends=bk,
                         log=said.append)
    note = ours[ours["kind"] == "cpu"]["note"].item()
    assert f"640 iterations to solve (its learner {learner_id(json.loads(other))}'s 3 solo solve(s); the " \
           "headline's learner is" in note, note
    # a row without its seconds per iteration: no estimate, said with the row named
    said.clear()
    bad = bk.assign(s_per_iter=float("nan"))
    assert backends.estimated_time_to_solve(bad, runs, log=said.append).empty
    assert any("backends row sim (data/results/backends.csv) has s_per_iter nan" in x for x in said), said
    # a learner with no solo solve at that nworld: no estimate, said
    said.clear()
    bk = _backends([("sim", "03", "simple", 1024, 1.5, 1.4e4, "c2")], learner=_LEARNER)
    assert backends.estimated_time_to_solve(bk, runs, log=said.append).empty
    assert any(f"backends row sim ran learner {_LEARNER}" in x and "no solo solve on a GPU at 1024 worlds" in x
               for x in said), said


def test_a_measured_cpu_backend_solve_wins_over_the_estimate(ref):
    setup = cost.fit_setup(ref)
    runs = _varied_runs()
    cpu_label = "CPU Test CPU (16 cores)"
    measured = [dict(runs.iloc[0], run_id=f"cpu{i}", gpu=cpu_label, params='{"backend": "cpu"}', seed=i,
                     time_to_solve_s=900.0 + 10 * i, iterations=600, time=f"2026-12-02T0{i}:00:00+00:00")
                for i in range(2)]
    runs = pd.concat([runs, pd.DataFrame(measured)], ignore_index=True)
    from fightlab.measure.report import learner_id

    runs = runs.assign(learner=[learner_id(json.loads(p)) for p in runs["params"]])  # as published_runs
    bk = _backends([("sim", "03", "simple", 1024, 1.5, 1.4e4, "c2"), ("mf", "03", "muscular-fast", 1024, 3.0, 5e3, "c2")])
    said = []
    ours = cost.our_rows(runs, price_per_hour=3.6, setup=setup, cpu_price_per_hour=0.8, backends=bk, log=said.append)
    cpu = ours[ours["kind"] == "cpu"].set_index("body")
    assert sorted(cpu.index) == ["muscular-fast", "simple"]  # one row per body, never both
    assert not cpu.loc["simple", "time_estimated"] and cpu.loc["simple", "time_to_solve_s"] == 905.0  # measured median
    assert cpu.loc["simple", "note"].startswith("CPU backend headline")
    # its learner ({} params: PPOConfig's own, not simple's defaults) is not the GPU headline's: said
    assert cpu.loc["simple", "machine"].startswith("CPU backend (earlier learner), ")
    assert "not the GPU headline's" in cpu.loc["simple", "note"]
    assert cpu.loc["muscular-fast", "time_estimated"]
    assert cpu.loc["muscular-fast", "time_to_solve_s"] == pytest.approx(3.0 * 740)
    assert any("CPU backend simple: a measured solve (train rows) wins over the estimate from backends row sim" in x
               for x in said), said
    # the measured CPU-backend rows never become the GPU headline
    solo_gpu = ours[(ours["kind"] == "gpu") & (ours["mode"] == "solo")].set_index("body")
    assert solo_gpu.loc["simple", "time_to_solve_s"] == 101.0
    # a CPU-backend solve with its policy on a GPU is no CPU baseline: left out, said; the
    # estimate stands for simple again
    gpu_policy = runs.assign(params=['{"backend": "cpu", "policy_device": "cuda:0"}' if r.startswith("cpu") else p
                                     for r, p in zip(runs["run_id"], runs["params"])])
    said.clear()
    ours = cost.our_rows(gpu_policy, price_per_hour=3.6, setup=setup, cpu_price_per_hour=0.8, backends=bk,
                         log=said.append)
    cpu = ours[ours["kind"] == "cpu"].set_index("body")
    assert cpu.loc["simple", "time_estimated"] and cpu.loc["simple", "time_to_solve_s"] == pytest.approx(1.5 * 500)
    assert "survey: 2 CPU-backend train row(s) with the policy on a GPU left out (a CPU + GPU machine: not the " \
           "CPU baseline, and not priced)" in said, said


def test_backend_ratios_and_their_refusals():
    from fightlab.measure import backends
    from fightlab.measure.report import headline, solve_summary

    bk = _backends([("c1", "01", "simple", 1024, 1.5, 2e4, "a"), ("c2", "02", "simple", 1024, 1.4, 2.2e4, "b")],
                   [("g1", "01", "simple", 1024, 0.2, 1.6e5, "a"), ("g2", "02", "simple", 8192, 0.6, 4.4e5, "b"),
                    ("lone", "02", "muscular-fast", 1024, 0.3, 1e5, "b")])
    r = backends.backend_ratios(bk)
    assert r["compare_id"].tolist() == ["a", "b"]  # the GPU row without a CPU row in its comparison: left out
    assert r["env_steps_ratio"].tolist() == pytest.approx([8.0, 20.0])
    assert r["s_per_iter_ratio"].tolist() == pytest.approx([0.2 / 1.5, 0.6 / 1.4])
    assert r[["cpu_nworld", "gpu_nworld"]].values.tolist() == [[1024, 1024], [1024, 8192]]
    with pytest.raises(ConfigError, match=r"backends rows need column\(s\) env_steps_per_s"):
        backends.backend_ratios(bk.drop(columns=["env_steps_per_s"]))
    with pytest.raises(ConfigError, match=r"backends row c1: params must be a JSON object with backend 'cpu' or 'gpu'"):
        backends.backend_ratios(bk.assign(params=['{"compare_id": "a"}'] + list(bk["params"][1:])))
    twice = pd.concat([bk, bk.iloc[[0]].assign(run_id="c1b")], ignore_index=True)
    with pytest.raises(ConfigError, match=r"backends comparison 'a', simple: 2 CPU-backend rows \(c1, c1b\); expected one"):
        backends.backend_ratios(twice)
    with pytest.raises(ConfigError, match=r"headline backend must be 'gpu' or 'cpu', got 'tpu'"):
        headline(solve_summary(_runs()), backend="tpu")


def test_the_committed_backends_rows():
    """data/results/backends.csv (H200 host, 16 cores, commit cde0b70): the ratios the rows
    store are the table's, and the CPU backend's estimated rows reach the survey."""
    from fightlab import results
    from fightlab.measure import backends
    from fightlab.paths import REPO_ROOT

    rows = results.read_rows("backends", REPO_ROOT)
    r = backends.backend_ratios(rows)
    gpu = rows[[json.loads(p)["backend"] == "gpu" for p in rows["params"]]].set_index("time")
    assert len(r) == len(gpu) >= 4
    assert r["env_steps_ratio"].to_numpy() == pytest.approx(
        gpu.loc[r["time"], "env_steps_ratio_vs_cpu_backend"].to_numpy())
    h200 = r[r["commit"] == "cde0b70"].set_index(["body", "gpu_nworld"])["env_steps_ratio"].round(1)
    assert h200.to_dict() == {("muscular-fast", 1024): 7.3, ("simple", 1024): 8.8,
                              ("muscular-fast", 8192): 18.2, ("simple", 8192): 20.6}
    s = cost.load_survey(log=lambda _: None)  # priced at the assumed CPU price (its own test)
    assert len(s.backends) == len(rows)
    # simple's CPU-backend solve was measured (train row 9b54506bb40b): its row is the
    # measured solve; muscular-fast's stays the estimate
    est = s.ours[s.ours["kind"] == "cpu"].set_index("body")["time_estimated"]
    assert est.to_dict() == {"simple": False, "muscular-fast": True}
    priced = cost.load_survey(cpu_price_per_hour=1.0, log=lambda _: None).ours
    cpu = priced[priced["kind"] == "cpu"].set_index("body")
    assert cpu.loc["simple", "time_to_solve_s"] == pytest.approx(812.4, abs=0.05)
    assert cpu.loc["simple", "time_source"] == "measured solve" and not cpu.loc["simple", "time_estimated"]
    assert cpu.loc["muscular-fast", "time_estimated"]
    assert cpu.loc["muscular-fast", "note"].startswith("estimated: backends row ")


def test_buying_guide_on_a_small_table():
    def row(machine, price, tts, c, body="simple", mode="solo", origin="reference"):
        return dict(origin=origin, machine=machine, provider="vast.ai" if origin == "reference" else origin,
                    kind="gpu", gpu=machine, group="vast.ai GPU", body=body, mode=mode, usd_per_h=price,
                    time_to_solve_s=tts, time_estimated=False, time_source="measured solve", setup_s=60.0,
                    cost_per_solve_usd=c, solves_per_hour=1.0, note="")
    t = pd.DataFrame([row("A", 0.2, 400, 0.03), row("B", 0.7, 180, 0.05), row("C", 1.5, 150, 0.09),
                      row("H200", 3.0, 100, 0.05, mode="packed x8 MPS", origin="fightlab")])
    g = cost.buying_guide(t, bands=[0, 1, 2]).set_index(["band", "packing"])
    assert g.loc[("$0–1/h", "solo"), "cheapest"] == "A (vast.ai)"
    assert g.loc[("$0–1/h", "solo"), "fastest"] == "B (vast.ai)"
    assert g.loc[("$0–1/h", "solo"), "n_rows"] == 2
    assert g.loc[("$1–2/h", "solo"), "cheapest"] == g.loc[("$1–2/h", "solo"), "fastest"] == "C (vast.ai)"
    assert g.loc[("≥ $2/h", "packed"), "cheapest"] == "H200 (fightlab, packed x8 MPS)"
    assert g.loc[("$0–1/h", "packed"), "cheapest"] == "none" and g.loc[("≥ $2/h", "solo"), "n_rows"] == 0
    with pytest.raises(ConfigError, match="buying_guide needs a survey table"):
        cost.buying_guide(t.drop(columns=["usd_per_h"]))


# --- bench rows: ours (data/results/bench.csv) and a rented survey's (data/survey/bench/) ------------

def _bench_row(body="simple", gpu="NVIDIA H200", ok=True, est=600.0, iters=500.0, compile_s=20.0, first=3.0,
               install=None, hour=1, size="full", reason="", run_id=None):
    """One bench row (fightlab.results' schema) as `python -m fightlab bench` writes it."""
    from fightlab import results

    params = dict(size=size, device="cuda:0", bench_id="b1")
    if reason:
        params["reason"] = reason
    s_it = est / iters if est is not None and est == est else 1.0
    row = dict.fromkeys(results.columns("bench"))
    row.update(results.run_metadata(body=body, nworld=1024, seed=0, params=params, device="cpu"))
    row.update(run_id=run_id or f"b{hour}-{body}-{gpu[-4:].replace(' ', '')}", time=f"2026-12-02T0{hour}:00:00+00:00",
               gpu=gpu, commit="abc1234", ok=ok, install_s=install, compile_s=compile_s, first_iter_s=first,
               s_per_iter=s_it, train_s_per_iter=s_it,
               iterations_to_solve_reference=iters, estimated_time_to_solve_s=est)
    return row


def _rented(root, survey_id, folder, rows, offer_usd_per_h=None, infra="vast"):
    """A rented try as the launcher leaves it: data/survey/bench/<id>/<folder>/bench.csv (rows
    written with results.append_row, then collected) and survey.json naming its offer and files."""
    import shutil

    from fightlab import results

    host = root / "host" / folder
    for r in rows:
        results.append_row("bench", r, host)
    d = cost.survey_bench_path(root) / survey_id
    (d / folder).mkdir(parents=True)
    shutil.move(results.results_path("bench", host), d / folder / "bench.csv")
    state_path = d / "survey.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else dict(survey_id=survey_id, infra=infra, results={})
    offer = None if offer_usd_per_h is None else dict(id=1, machine_id=2, dph_total=offer_usd_per_h)
    state["results"].setdefault(folder, []).append(dict(cluster=f"fl-{survey_id}-{folder}", status="done", offer=offer,
                                                        files=[f"{folder}/bench.csv", f"{folder}/bench.json"]))
    state_path.write_text(json.dumps(state))


def test_a_bench_row_becomes_a_survey_row(ref, tmp_path):
    from fightlab import results

    setup = cost.fit_setup(ref)
    host = setup.loc["vast.ai GPU", "setup_s"]
    results.append_row("bench", _bench_row(hour=1, est=700.0), tmp_path)  # older: superseded
    results.append_row("bench", _bench_row(hour=2), tmp_path)
    bench = cost.read_bench(tmp_path)
    assert len(bench) == 2 and set(bench["source"]) == {cost.BENCH_SOURCE} and set(bench["provider"]) == {"fightlab"}
    said = []
    rows = cost.bench_rows(bench, setup=setup, log=said.append)
    (r,) = rows.to_dict("records")
    assert list(rows.columns) == list(cost.SURVEY_COLUMNS)
    assert (r["machine"], r["gpu"], r["body"], r["mode"], r["origin"]) == ("H200", "H200", "simple", "solo", "fightlab")
    assert r["time_source"] == "bench estimate" and r["time_estimated"] and r["time_to_solve_s"] == 600.0
    # set-up: install (not measured on our machine: the host set-up) + compile + first iteration
    assert r["setup_s"] == pytest.approx(host + 20.0 + 3.0)
    assert r["usd_per_h"] == cost.ASSUMED_PRICE_PER_HOUR["H200"]  # the assumed price, as our other H200 rows
    assert r["cost_per_solve_usd"] == pytest.approx((600.0 + host + 23.0) * 3.0 / 3600)
    assert r["note"].startswith("bench estimate: fightlab bench row b2-simple-H200 (commit abc1234, 1024 worlds): "
                                "500 iterations to solve × 1.2 s/iteration; set-up = host set-up (install not "
                                "measured)"), r["note"]
    assert said == ["survey: fightlab bench: 1 older bench row(s) superseded by a newer one of the same GPU type "
                    "and body: b1-simple-H200"]
    # a given price is the parameter our H200 rows take
    assert cost.bench_rows(bench, price_per_hour=4.5, setup=setup, log=lambda _: None)["usd_per_h"].tolist() == [4.5]
    with pytest.raises(ConfigError, match="price_per_hour must be a positive number, got -1.0"):
        cost.bench_rows(bench, price_per_hour=-1.0, setup=setup)
    with pytest.raises(ConfigError, match=r"bench_rows needs the fitted set-up"):
        cost.bench_rows(bench)
    assert cost.bench_rows(cost.read_bench(tmp_path / "nothing"), setup=setup).empty


def test_bench_rows_not_ok_or_with_bad_values_are_left_out_and_counted(ref, tmp_path):
    from fightlab import results

    setup = cost.fit_setup(ref)
    for r in (_bench_row(run_id="good"),
              _bench_row(run_id="badhost", body="muscular-fast", ok=False, est=None,
                         reason="bad host: speed: 100 env steps/s = 0.05 × the expected 2000"),
              _bench_row(run_id="noest", body="muscular-fast", est=float("nan")),
              _bench_row(run_id="negcompile", gpu="NVIDIA GeForce RTX 4090", compile_s=-1.0),
              _bench_row(run_id="neginstall", gpu="NVIDIA L40S", install=-5.0),
              _bench_row(run_id="smoke", gpu="NVIDIA A100", size="smoke"),
              _bench_row(run_id="odd", gpu="NVIDIA Quadro X")):
        results.append_row("bench", r, tmp_path)
    said = []
    rows = cost.bench_rows(cost.read_bench(tmp_path), setup=setup, log=said.append)
    assert rows["body"].tolist() == ["simple"] and rows["gpu"].tolist() == ["H200"]  # "good" alone
    (line,) = said
    assert line.startswith("survey: fightlab bench: 6 bench row(s) left out: badhost (ok false (bad host: speed:")
    for why in ("noest (estimated_time_to_solve_s = nan, not a positive number)",
                "negcompile (compile_s = -1.0, not a number >= 0)", "neginstall (install_s = -5.0, not a number >= 0)",
                "smoke (size 'smoke', not full)", "odd (unknown GPU 'NVIDIA Quadro X')"):
        assert why in line, (why, line)
    # a GPU type without a price (none recorded, given or assumed): left out, said, never an error
    results.append_row("bench", _bench_row(run_id="l4", gpu="NVIDIA L4"), tmp_path / "l4")
    said.clear()
    assert cost.bench_rows(cost.read_bench(tmp_path / "l4"), setup=setup, log=said.append).empty
    assert said == ["survey: fightlab bench: 1 bench row(s) left out: l4 (no offer price recorded; no price for GPU "
                    "'L4': give price_per_hour [$/h] (assumed prices exist for H200, H100))"]


def test_a_rented_hosts_rows_and_the_offer_price_recorded_for_them(ref, tmp_path):
    from fightlab import results

    setup = cost.fit_setup(ref)
    # --picker vastai: survey.json records the offer's $/h; it wins over a given price
    _rented(tmp_path, "s1", "rtx4090-1", [_bench_row(gpu="NVIDIA GeForce RTX 4090", install=240.0, est=300.0),
                                          _bench_row(gpu="NVIDIA GeForce RTX 4090", body="muscular-fast",
                                                     install=240.0, est=800.0, iters=740.0)],
            offer_usd_per_h=0.35)
    # a host that failed: its rows are not ok
    _rented(tmp_path, "s1", "l40s-1", [_bench_row(gpu="NVIDIA L40S", ok=False, est=None, reason="bad host: …")],
            offer_usd_per_h=0.6)
    # --picker sky: no offer recorded
    _rented(tmp_path, "s2", "rtx3090-1", [_bench_row(gpu="NVIDIA GeForce RTX 3090", install=200.0)], infra="runpod")
    bench = cost.read_bench(tmp_path)
    assert sorted(set(bench["source"])) == ["survey s1", "survey s2"]
    assert bench.set_index("path")["offer_usd_per_h"].fillna(0).to_dict() == {
        "data/survey/bench/s1/l40s-1/bench.csv": 0.6, "data/survey/bench/s1/rtx4090-1/bench.csv": 0.35,
        "data/survey/bench/s2/rtx3090-1/bench.csv": 0.0}
    said = []
    rows = cost.bench_rows(bench, price_per_hour=2.0, setup=setup, log=said.append).set_index(["gpu", "body"])
    assert sorted(rows.index) == [("RTX 3090", "simple"), ("RTX 4090", "muscular-fast"), ("RTX 4090", "simple")]
    r = rows.loc[("RTX 4090", "simple")]
    assert r["usd_per_h"] == 0.35 and r["provider"] == "vast.ai"  # the offer's price, not the given 2.0
    assert r["setup_s"] == pytest.approx(240.0 + 20.0 + 3.0)  # install measured by the launcher: no host set-up
    assert r["cost_per_solve_usd"] == pytest.approx((300.0 + 263.0) * 0.35 / 3600)
    assert "the rented offer's $0.35/h (survey.json)" in r["note"] and "survey s1 row" in r["note"]
    assert rows.loc[("RTX 3090", "simple"), "usd_per_h"] == 2.0  # no offer recorded: the given price
    assert rows.loc[("RTX 3090", "simple"), "provider"] == "runpod"
    assert any(x.startswith("survey: survey s1: 1 bench row(s) left out: ") and "ok false (bad host" in x
               for x in said), said
    # end to end: load_survey reads them, Figure 3 draws them with their own marker
    import shutil

    from fightlab import figures

    cost.reference_path(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(cost.REFERENCE_PATH, cost.reference_path(tmp_path))
    s = cost.load_survey(tmp_path, price_per_hour=2.0, log=lambda _: None)
    assert len(s.bench) == 4 and (s.ours["time_source"] == "bench estimate").sum() == 3
    assert "rented bench rows: the offer's $/h where the launcher recorded it" in s.price_note
    svg = figures.draw(["figure3_survey"], tmp_path)["figure3_survey"][1].read_text()
    assert "fightlab bench estimate" in svg and "RTX 4090 vast.ai" in svg
    # a torn bench.csv in a survey folder is refused, naming the file and line
    with (cost.survey_bench_path(tmp_path) / "s2" / "rtx3090-1" / "bench.csv").open("a") as f:
        f.write("torn,row\n")
    with pytest.raises(results.MalformedRowError, match=r"s2/rtx3090-1/bench.csv:3: malformed row"):
        cost.read_bench(tmp_path)


def test_the_guide_counts_a_measured_solve_not_its_bench_estimate_too(ref, tmp_path):
    from fightlab import results

    setup = cost.fit_setup(ref)
    ours = cost.our_rows(_runs(), setup=setup, log=lambda _: None)  # measured H200 solves of both bodies
    results.append_row("bench", _bench_row(est=60.0, iters=500.0), tmp_path)  # H200 simple: cheaper, estimated
    results.append_row("bench", _bench_row(gpu="NVIDIA GeForce RTX 4090", est=250.0), tmp_path)
    est = cost.bench_rows(cost.read_bench(tmp_path), setup=setup, price_per_hour=3.0, log=lambda _: None)
    table = cost.survey_table(ref, pd.concat([ours, est], ignore_index=True), setup)
    sup = cost.superseded(table)
    assert table.loc[sup, ["gpu", "body", "time_source"]].values.tolist() == [["H200", "simple", "bench estimate"]]
    # the original's measured RTX 4090 rows (another trainer) do not supersede fightlab's estimate
    assert not sup[(table["gpu"] == "RTX 4090") & (table["origin"] == "fightlab")].any()
    g = cost.buying_guide(table).set_index(["band", "body", "packing"])
    top = g.loc[("$2–4/h", "simple", "solo")]
    assert top["n_superseded"] == 1 and top["cheapest"] == top["fastest"] == "H200 (fightlab)"  # measured, not estimate
    inband = (table["body"] == "simple") & (table["mode"] == "solo") & table["usd_per_h"].between(2, 4, inclusive="left")
    assert top["n_rows"] == inband.sum() - 1  # every row of the band but the superseded estimate
    assert (g.drop(index=("$2–4/h", "simple", "solo"))["n_superseded"] == 0).all()
    # kept in the table (and Figure 3), labelled as an estimate where the guide shows one
    assert (table["time_source"] == "bench estimate").sum() == 2
    alone = cost.buying_guide(table[~((table["gpu"] == "H200") & (table["time_source"] == "measured solve"))])
    assert "H200 (fightlab) (bench estimate)" in set(alone["cheapest"])


def test_the_committed_survey_and_its_guide(ref):
    s = cost.load_survey(log=lambda _: None)
    assert (s.table["origin"] == "reference").sum() == len(ref)
    guide = cost.buying_guide(s.table)
    assert len(guide) == 4 * 2 * 2  # bands × bodies × solo/packed
    cheap = guide.set_index(["band", "body", "packing"]).loc[("$0–1/h", "simple", "solo")]
    assert cheap["cheapest"] == "RTX 3090 (vast.ai)" and cheap["fastest"] == "RTX 5090 (vast.ai)"
    b = cost.setup_breakdown(s.table)
    assert ((b["setup_share"] > 0) & (b["setup_share"] < 1)).all()
    assert np.allclose(b["setup_usd"] + b["train_usd"],
                       (b["setup_s"] + b["time_to_solve_s"]) * b["usd_per_h"] / 3600)


def test_figure3_is_drawn_and_skipped_without_its_table(tmp_path, capsys):
    import shutil

    from fightlab import figures

    assert figures.draw(["figure3_survey"], tmp_path) == {"figure3_survey": []}
    out = capsys.readouterr().out
    assert "skip figure3_survey:" in out and "reference.csv is absent" in out
    cost.reference_path(tmp_path).parent.mkdir(parents=True)
    shutil.copy(cost.REFERENCE_PATH, cost.reference_path(tmp_path))
    paths = figures.draw(["figure3_survey"], tmp_path)["figure3_survey"]  # reference rows alone
    assert [p.name for p in paths] == ["figure3_survey.png", "figure3_survey.svg"]
    svg = paths[1].read_text()
    assert "original: vast.ai GPU" in svg and "original: EC2 CPU (contrast)" in svg and "RTX 5090" in svg
    # a broken reference table fails the figure with its one line
    raw = pd.read_csv(cost.REFERENCE_PATH, dtype=str, keep_default_na=False)
    raw.loc[0, "usd_per_h"] = "0"
    raw.to_csv(cost.reference_path(tmp_path), index=False)
    with pytest.raises(figures.DataFileError, match="figure3_survey"):
        figures.draw(["figure3_survey"], tmp_path)
    assert "usd_per_h = '0': must be a positive number" in capsys.readouterr().out


def test_notebook_07_at_smoke_size(tmp_path):
    import json

    from fightlab.reproduce import reproduce

    assert reproduce(only=["07"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    nb = json.loads((tmp_path / "07_survey-smoke.ipynb").read_text())
    out = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "INCONSISTENT: the 'same' 96-vCPU EC2 machine" in out
    assert "rows outside the 5% tolerance: 2" in out and "c8i.24xlarge" in out
    assert "assumed $3.00/h for one H200" in out and "cheapest" in out and "image/png" in out
    # the CPU backend: the committed ratios (H200 at 1024 and 8192 worlds vs 16 cores at 1024) and
    # the estimated time to solve, priced at the assumed CPU price (said)
    for ratio in ("7.3x", "8.8x", "18.2x", "20.6x"):
        assert f"{ratio} the CPU backend's env steps/s" in out, ratio
    assert "CPU backend time to solve" in out and "CPU-backend rows: assumed $0.22/h: 16 vCPU" in out
    # simple's CPU-backend solve was measured: said as measured, its estimate marked as
    # not the one the survey prices; muscular-fast's stays an estimate
    assert "simple: CPU backend time to solve 812.4 s (measured: 1 solo solve(s), 430 iterations" in out
    assert "the survey takes the measured solve" in out
    assert "muscular-fast: CPU backend time to solve \\u2248" in out  # ≈, as json.dumps escapes it
    assert "bench rows read: " in out and "time_source" in out  # the bench section runs on whatever rows exist
    # at the default price its Figure 3 is the committed one, byte for byte (the main job's comparison)
    from fightlab import paths
    from fightlab.paths import REPO_ROOT

    drawn = paths.RUNS / "survey" / "nb07-smoke" / "figures" / "figure3_survey.png"
    committed = REPO_ROOT / "figures" / "figure3_survey.png"
    # digests, not bytes: pytest's diff of two PNGs' bytes runs for tens of minutes
    assert _sha256(drawn) == _sha256(committed), (
        f"{drawn} differs from {committed}: redraw with python -m fightlab figures")


def test_assumed_cpu_price_is_the_reference_lowest_per_vcpu_times_cores():
    import pandas as pd
    from fightlab.config import ConfigError
    ref = pd.DataFrame(dict(machine=["RTX 4090", "c8a.24xlarge, 96 vCPU", "c8a.48xlarge, 192 vCPU"],
                            usd_per_h=[0.4, 1.44, 3.65]))
    price, why = cost.assumed_cpu_price_per_hour(ref, 16)
    assert price == pytest.approx(16 * 1.44 / 96) and "16 vCPU" in why and "c8a.24xlarge" in why
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="cores must be a positive integer"):
            cost.assumed_cpu_price_per_hour(ref, bad)
    with pytest.raises(ConfigError, match="no reference row names its vCPUs"):
        cost.assumed_cpu_price_per_hour(ref.iloc[:1], 16)
    assert cost.cpu_machine_name("CPU Intel(R) Xeon(R) Processor (16 cores)") == \
        "CPU backend, Intel Xeon Processor (16 cores)"


def test_committed_survey_prices_the_cpu_backend_rows_by_default():
    """From the committed data: the CPU-backend rows (estimated from data/results/backends.csv)
    are priced at the assumed CPU price unless one is given, and the note says which."""
    s = cost.load_survey(log=lambda m: None)
    cpu = s.ours[s.ours["group"] == "fightlab CPU"]
    if cpu.empty:
        pytest.skip("no CPU-backend rows committed")
    price, _ = cost.assumed_cpu_price_per_hour(s.reference, 16)
    assert (cpu["usd_per_h"] == price).all() and "CPU-backend rows: assumed" in s.price_note
    for bad in ("abc", True, [1], 0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="cpu_price_per_hour must be"):
            cost.load_survey(cpu_price_per_hour=bad, log=lambda m: None)
    given = cost.load_survey(cpu_price_per_hour=0.5, log=lambda m: None)
    assert (given.ours.loc[given.ours["group"] == "fightlab CPU", "usd_per_h"] == 0.5).all()
    assert "$0.50/h given" in given.price_note


def test_a_train_row_alone_gives_the_cpu_price_its_cores(tmp_path):
    """A measured CPU-backend solve with no backends rows: its cores come from the train row's last
    segment (sim.cpu.backend_record; train rows store none at the params' top level), so
    load_survey prices it at the reference's assumed $/h for those cores."""
    import shutil
    import sys

    from fightlab import results
    from fightlab.paths import REPO_ROOT

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from test_figures import train_row

    (tmp_path / "data" / "survey").mkdir(parents=True)
    shutil.copy(cost.reference_path(REPO_ROOT), cost.reference_path(tmp_path))
    seg = dict(backend="cpu", physics="MuJoCo's C engine", cores=12, threads=12)
    for seed in (1, 2):
        results.append_row("train", train_row("simple", seed=seed, tts=700.0 + seed, gpu="CPU Test CPU (12 cores)",
                                               params=dict(segments=[dict(backend="gpu", cores=64), seg])), tmp_path)
    s = cost.load_survey(tmp_path, log=lambda m: None)
    want, source = cost.assumed_cpu_price_per_hour(s.reference, 12)
    cpu = s.ours[s.ours["kind"] == "cpu"]
    assert len(cpu) == 1 and cpu["body"].iloc[0] == "simple" and not cpu["time_estimated"].iloc[0]
    assert cpu["usd_per_h"].iloc[0] == pytest.approx(want) and source in s.price_note
    assert cpu["time_to_solve_s"].iloc[0] == pytest.approx(701.5)


def _sha256(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
