"""Notebook 09's measurement (fightlab.measure.newton_study) on warp's CPU device: the profile rows
read for where the time went, the parameters refused in one line, the correctness rule, and the
notebook itself at smoke size (its rows, launches counted, nothing timed)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fightlab import results
from fightlab.config import ConfigError
from fightlab.measure import newton_study as S


def _profile(iterations, eulerdamp, factor_ms, solve_ms, factor_launches, nworld=1024, time="2026-12-03T17:00:00+00:00"):
    p = dict(what="physics", iterations=iterations, ls_iterations=4 if iterations == 2 else 20,
             qacc_smooth=False, eulerdamp=eulerdamp, factor_path="none" if not factor_launches else "tree")
    return dict(body="muscular-fast", nworld=nworld, gpu="NVIDIA H100", params=json.dumps(p), time=time,
                kernel_ms_per_step=2.0, graph_ms_per_step=1.0, mass_matrix_factor_ms_per_step=factor_ms,
                mass_matrix_factor_launches_per_step=factor_launches, constraint_solve_ms_per_step=solve_ms,
                constraint_solve_launches_per_step=38.0, launches_per_step=80.0 + factor_launches)


def test_hotspot_table_marks_todays_training_physics():
    rows = pd.DataFrame([_profile(10, True, 0.8, 0.9, 52.0), _profile(2, False, 0.0, 1.1, 0.0),
                         _profile(2, False, 0.0, 1.2, 0.0, time="2026-12-04T00:00:00+00:00")])
    t = S.hotspot_table(rows)
    assert list(t["training"]) == [False, True]  # the newest of each physics, today's last
    assert t.loc[1, "solve_share"] == pytest.approx(0.6) and t.loc[1, "factor_share"] == 0.0
    assert t.loc[0, "factor_share"] == pytest.approx(0.4)
    lines = S.hotspot_lines(t)
    assert "today's training physics" in lines[1] and "solve 60 % of kernel time" in lines[1]
    assert S.hotspot_table(pd.DataFrame()).empty


@pytest.mark.parametrize("change, refused", [
    (dict(bodies=[]), "bodies must be a non-empty list"),
    (dict(bodies=["boxer"]), "bodies: unknown body 'boxer'"),
    (dict(nworlds=[32, 32]), "nworlds: 32 is listed twice"),
    (dict(stage_nworlds=[]), "stage_nworlds must be a non-empty list"),
    (dict(variants=["fast"]), "variants: 'fast' is not 'all', 'default', 'none' or a comma list of fixes"),
    (dict(check_nworld=0), "check_nworld must be an integer in [1, 64]"),
    (dict(rollout_steps=-1), "rollout_steps must be an integer in [0, 10000]"),
])
def test_parameters_are_refused_in_one_line(change, refused):
    kw = dict(bodies=["simple"], nworlds=[32], stage_nworlds=[32], variants=["all"], check_nworld=3, rollout_steps=10)
    S.check_parameters(**kw)
    with pytest.raises(ConfigError, match=None) as e:
        S.check_parameters(**{**kw, **change})
    assert refused in str(e.value) and "\n" not in str(e.value)


def test_error_failures_is_the_tests_rule():
    ok = dict(qacc_rel_err_vs_f64=5e-5, stock_qacc_rel_err_vs_f64=2e-5, qacc_rel_err_vs_stock=1e-4,
              efc_force_rel_err_vs_f64=1e-6, stock_efc_force_rel_err_vs_f64=1e-6, efc_force_rel_err_vs_stock=1e-6,
              state_diff_rows=0, niter_equal=True, rollout_qpos_dev=1e-5, rollout_qpos_dev_ulp=1e-7)
    assert S.error_failures(ok) == []
    bad = S.error_failures({**ok, "qacc_rel_err_vs_f64": 2e-4, "state_diff_rows": 2, "rollout_qpos_dev": 1e-4})
    assert len(bad) == 3 and bad[0].startswith("qacc: 2.00e-04 from float64") and "2 row states differ" in bad[1]
    assert S.error_failures({**ok, "rollout_qpos_dev": None}) == []  # no rollout: nothing to judge


def test_notebook_runs_at_smoke_size(tmp_path):
    """notebooks/09 at smoke size on the CPU: the committed profile's story, the three models equal
    to MuJoCo Warp's solve, rows under runs/ with 79 → 42 launches and no time, no figure."""
    from fightlab.paths import RUNS
    from fightlab.reproduce import reproduce

    assert reproduce(only=["09"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    nb = json.loads((tmp_path / "09_newton_kernel-smoke.ipynb").read_text())
    out = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    for name in ("simple", "muscular-fast", "contact-tree-16"):
        assert f"{name}: equal to MuJoCo Warp's solve up to float32 rounding" in out
    assert "CPU smoke, not a measurement" in out and "the figure is a GPU measurement" in out
    assert "today's training physics" in out  # drawn from the committed data/results/profile.csv
    df = results.read_rows("newton", RUNS / "newton" / "nb09-smoke-cpu")
    variant = [json.loads(p)["variant"] for p in df["params"]]
    assert variant == ["mujoco_warp", "none", "all", "default"] * 2 + ["default"]
    assert df["graph_ms_per_step"].isna().all() and set(df["gpu"]) == {"cpu"}
    timed = S.speed_table(df)
    assert list(timed["launches_per_step"]) == [79.0, 42.0] * 2 and list(timed["solve_launches_per_step"]) == [38.0, 1.0] * 2
    assert (df["solve_cycles_median"].notna() == [v != "mujoco_warp" and b != "contact-tree-16"
                                                 for v, b in zip(variant, df["body"])]).all()
    assert not (results.results_path("newton", RUNS / "newton" / "nb09-smoke-cpu").parent / "figures").exists()


def test_the_fallen_state_rows_stay_out_of_the_stage_figure_and_are_named_in_the_table():
    """Stage rows of the fallen state (300 warm steps) are not the standing state's: the figure
    (the standing state) leaves them out, the notebook's table names their warm steps."""
    import json

    from fightlab import results
    from fightlab.figures.newton import stage_rows
    from fightlab.measure.newton_study import stage_table
    from fightlab.paths import REPO_ROOT

    rows = results.read_rows("newton", REPO_ROOT)
    fallen = [json.loads(p).get("nwarm") == 300 for p in rows["params"]]
    assert any(fallen)
    drawn = stage_rows(rows)
    assert len(drawn) and all(json.loads(p).get("nwarm", 10) == 10 for p in drawn["params"])
    heads = list(stage_table(rows[fallen]).columns)
    assert heads and all(h.endswith(", 300 warm steps]") for h in heads), heads
