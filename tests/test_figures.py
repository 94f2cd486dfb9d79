"""fightlab.figures and `python -m fightlab figures`: redraw committed figures from small synthetic
data written with fightlab.results (CPU, no measurement)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from fightlab import figures, results
from fightlab.cli import main
from fightlab.config import REFERENCE_SOLVER, EnvConfig, PPOConfig, body_ppo
from fightlab.measure import profile as prof


def _meta(body: str, nworld: int = 1024, seed: int = 0, gpu: str = "NVIDIA H200",
          commit: str = "abc1234", time: str = "2026-11-30T06:00:00+00:00", **params) -> dict:
    row = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device="cpu")
    row.update(gpu=gpu, commit=commit, time=time)
    return row


#: today's training physics (EnvConfig's solver fields): what a synthetic row of today's learner ran
NOW_PHYSICS = {k: getattr(EnvConfig(), k) for k in REFERENCE_SOLVER}


def train_row(body="simple", seed=0, tts=160.0, shared_gpu=1, params=None, gpu="NVIDIA H200",
              commit="abc1234", time="2026-11-30T06:00:00+00:00", nworld=1024, **metrics) -> dict:
    """A train row of today's training physics (its env's solver fields, unless `params` give
    them) whose reference check passed; `params` are added to the row's params JSON, `metrics`
    override metric columns."""
    params = dict(params or {})
    params["env"] = {**NOW_PHYSICS, **(params.get("env") or {})}
    # an implied field (config.IMPLIED_FIELDS) reads as the value rows ran before it existed, not as
    # today's default: a row of today's learner stores the body's own
    params["ppo"] = {"matmul_precision": body_ppo(body).matmul_precision, **(params.get("ppo") or {})}
    row = _meta(body, nworld=nworld, seed=seed, gpu=gpu, commit=commit, time=time, shared_gpu=shared_gpu,
                **params)
    row.update(time_to_solve_s=tts, iterations=500, compile_s=3.0, env_steps_per_s=1e5,
               physics_steps_per_s=5e5, rollout_s_per_iter=0.22, update_s_per_iter=0.11,
               solved=True, final_amplitude=1.0, fall_rate=0.01, mean_episode_s=9.8,
               overflow_count=0, nan_resets=0, host_reads_per_iter=1.0, graph_fallbacks=0,
               tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None,
               **dict(dict.fromkeys(results.REFERENCE_COLUMNS), reference_passed=True))
    assert set(metrics) <= set(results.EXPERIMENTS["train"]), metrics
    row.update(metrics)
    return row


def train_curve(n: int = 20) -> pd.DataFrame:
    it = np.arange(n)
    stage = np.minimum(9, it // 2)  # a widening every 2 iterations
    event = np.where((it % 2 == 1) & (it < 19), "widen", "wait")
    return pd.DataFrame({"iteration": it, "elapsed_s": it * 0.3, "reward": np.linspace(-0.1, 0.08, n),
                         "amplitude": np.minimum(1.0, 0.1 + it / n), "window_fall_rate": np.linspace(1, 0, n),
                         "window_episode_s": np.linspace(1, 10, n), "stage": stage + (event == "widen"),
                         "event": event})


def profile_row(body="simple", nworld=1024, gpu="NVIDIA H200", time="2026-11-30T06:00:00+00:00") -> dict:
    """A profile row of today's training physics (its solver fields as `profile.result_row` stores them)."""
    env = EnvConfig()
    row = _meta(body, nworld=nworld, gpu=gpu, time=time, factor_path="dense", iterations=env.solver_iterations,
                ls_iterations=env.solver_ls_iterations, qacc_smooth=env.solver_qacc_smooth,
                eulerdamp=env.solver_eulerdamp)
    row.update({c: 1.0 for c in prof.row_metrics()})
    row.update(nstep=20, kernel_ms_per_step=len(prof.STAGES), mass_matrix_factor_share=0.1, other_share=0.0)
    return row


def factor_row(body="muscular-fast", nworld=1024, traj_steps=0, gpu="NVIDIA H200") -> dict:
    row = _meta(body, nworld=nworld, gpu=gpu)
    row.update({c: 1.0 for c in results.EXPERIMENTS["factor"]})
    row.update(stock_factor_ms_per_step=0.67, tree_factor_ms_per_step=0.29, dense_factor_ms_per_step=7.6,
               traj_steps=float(traj_steps), traj_nan=False, graph=True)
    if not traj_steps:  # rows without the trajectory comparisons leave those columns empty
        for c in ("traj_dev_tree_rad", "traj_dev_ulp_rad", "traj_pushes", "traj_quiet_dev_tree_rad",
                  "traj_quiet_dev_ulp_rad", "traj_overflow_worlds"):
            row[c] = None
    return row


def primer_row(gpu="NVIDIA H200", time="2026-11-30T06:00:00+00:00") -> dict:
    row = _meta("none", nworld=1, gpu=gpu, time=time)
    row.update({c: 1.0 for c in results.EXPERIMENTS["primer"]})
    return row


def graphs_row(body="simple", setting="all", s_per_iter=0.25) -> dict:
    from fightlab.measure.graphs import SETTINGS

    row = _meta(body, setting=setting)
    g, p, u = SETTINGS[setting]
    row.update(env_graph=g, policy_graph=p, update_graph=u, iterations=9, s_per_iter=s_per_iter,
               rollout_s_per_iter=0.6 * s_per_iter, update_s_per_iter=0.3 * s_per_iter,
               host_reads_per_iter=1.0, graph_fallbacks=0, physics_ms_per_step=4.0,
               env_step_ms_per_step=4.4, rollout_ms_per_step=4.7, non_physics_share=0.15,
               env_non_physics_share=0.09, env_extra_ms_per_step=0.1, policy_ms_per_step=0.05,
               measured_non_physics_share=0.03)
    return row


def newton_row(body="simple", nworld=1024, single_launch=False, variant=None, graph_ms=0.5,
               gpu="NVIDIA H200") -> dict:
    """A newton row (notebook 09): MuJoCo Warp's solve or the single launch ("default" unless named)."""
    variant = variant or ("default" if single_launch else "mujoco_warp")
    row = _meta(body, nworld=nworld, gpu=gpu, variant=variant,
                solver_loop="single_launch" if single_launch else "unrolled")
    row.update(dict.fromkeys(results.EXPERIMENTS["newton"]))
    row.update(single_launch=single_launch, graph_ms_per_step=graph_ms, launches_per_step=43.0 if single_launch else 80.0)
    return row


def sweep_curve(scale: float = 1.0) -> pd.DataFrame:
    """A primer vector sweep's curve (fightlab.measure.primer.vector_sweep's columns that the figure reads)."""
    rows = [dict(device=d, op=op, n=n, median_s=scale * 1e-5 * (1 + n / 1e6), gb_per_s=n * 8 / 1e4 / scale)
            for d in ("cpu", "cuda:0") for op in ("copy", "saxpy", "empty_kernel") for n in (16, 4096, 1 << 20)]
    return pd.DataFrame(rows)


def factor_curve(n: int = 10, quiet: bool = True) -> pd.DataFrame:
    t = np.arange(1, n + 1) * 0.004
    c = {"step": np.arange(1, n + 1), "time_s": t, "dev_tree_rad": 1e-6 * t, "dev_ulp_rad": 2e-6 * t}
    if quiet:
        c.update(dev_quiet_tree_rad=1e-8 * t, dev_quiet_ulp_rad=np.zeros(n))  # zeros: log floor
    return pd.DataFrame(c)


@pytest.fixture
def root(tmp_path):
    """A repository-like folder with a few rows of each experiment the figures read."""
    rows = [train_row("simple", seed=1, tts=161.0), train_row("simple", seed=2, tts=167.0),
            train_row("muscular-fast", seed=1, tts=360.0, params=dict(tree_factor=True, host_jobs=2)),
            train_row("muscular-fast", seed=0, tts=650.0, shared_gpu=4)]
    for r in rows:
        results.append_row("train", r, tmp_path)
        results.write_curve(r["run_id"], train_curve(), tmp_path)
    for body in ("simple", "muscular-fast"):
        for n in (1024, 8192):
            results.append_row("profile", profile_row(body, n), tmp_path)
    with_traj = factor_row(nworld=1024, traj_steps=10)
    results.append_row("factor", with_traj, tmp_path)
    results.write_curve(with_traj["run_id"], factor_curve(), tmp_path)
    results.append_row("factor", factor_row(nworld=4096), tmp_path)  # no curve: skipped, not an error
    p = primer_row()
    results.append_row("primer", p, tmp_path)
    results.write_curve(p["run_id"], sweep_curve(), tmp_path)
    # a newer primer row without its sweep (a run from before the sweep was kept): not drawn
    results.append_row("primer", primer_row(time="2026-11-30T07:00:00+00:00"), tmp_path)
    for body in ("simple", "muscular-fast"):
        for setting, t in (("none", 0.45), ("env", 0.4), ("all", 0.3)):
            results.append_row("graphs", graphs_row(body, setting, t), tmp_path)
    for k, mps, s_it in ((1, False, 0.2), (4, False, 0.8), (4, True, 0.4), (8, True, 0.6)):
        row = _meta("simple")
        row.update(concurrent=k, mps=mps, runs=k, s_per_iter=s_it, it_per_s_aggregate=k / s_it,
                   s_per_iter_min=s_it, s_per_iter_max=s_it, gpus=1, solves_per_hour=None)
        results.append_row("packing", row, tmp_path)
    for body in ("simple", "muscular-fast"):  # Figure 2: sweep rows (the train rows above pair at 1024)
        for n, s_it in ((256, 0.15), (1024, 0.3), (4096, 0.9)):
            row = _meta(body, nworld=n, learner="x")
            row.update(iterations=9, s_per_iter=s_it, rollout_s_per_iter=0.8 * s_it,
                       update_s_per_iter=0.1 * s_it, env_steps_per_s=n * 32 / s_it, host_reads_per_iter=1.0,
                       graph_fallbacks=0, compile_s=2.0, s_per_iter_min=s_it, s_per_iter_max=s_it)
            results.append_row("sweep", row, tmp_path)
    for body in ("simple", "muscular-fast"):  # learners_side_by_side without side-by-side trainings
        for rsl, s_it in ((False, 0.12), (True, 0.24)):
            row = _meta(body, study="learner_speed", learner="rsl_rl" if rsl else "fightlab")
            row.update(rsl_rl=rsl, iterations=25, s_per_iter=s_it, rollout_s_per_iter=0.6 * s_it,
                       update_s_per_iter=0.3 * s_it, host_reads_per_iter=285.0 if rsl else 1.0, stage_reached=0,
                       overflow_count=0, nan_resets=0)
            results.append_row("learner_speed", row, tmp_path)
    for body in ("simple", "muscular-fast"):  # newton_time: both solves at two world counts
        for n in (32, 1024):
            for single, ms in ((False, 0.5), (True, 0.4)):
                results.append_row("newton", newton_row(body, n, single, graph_ms=ms * n / 32), tmp_path)
    # Figure 3: the committed survey reference table (our rows come from the train rows above)
    import shutil

    from fightlab.survey import cost

    cost.reference_path(tmp_path).parent.mkdir(parents=True)
    shutil.copy(cost.reference_path(), cost.reference_path(tmp_path))
    return tmp_path


def _files(root):
    d = root / "figures"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def test_figures_command_writes_every_figure(root, capsys):
    assert main(["figures", "--root", str(root)]) == 0
    assert _files(root) == sorted(f"{n}.{ext}" for n in figures.FIGURES for ext in ("png", "svg"))
    out = capsys.readouterr().out
    assert f"drew {len(figures.FIGURES)} of {len(figures.FIGURES)}" in out and "skip" not in out
    assert all((root / "figures" / f).stat().st_size > 1000 for f in _files(root))
    svg = (root / "figures" / "train_curves.svg").read_text()
    # one legend entry per headline group: body, setup, commit and its seeds; every other run
    # (here the shared-GPU one) grey, one entry for all
    assert "headline: simple, dense, abc1234: seeds 1, 2" in svg and "muscular-fast, tree factor" in svg
    assert "1 other runs (earlier code, learner studies, packed)" in svg


def test_only_draws_the_named_figures(root):
    assert main(["figures", "--root", str(root), "--only", "factor_time", "--only", "profile_stages"]) == 0
    assert _files(root) == ["factor_time.png", "factor_time.svg", "profile_stages.png", "profile_stages.svg"]


def test_bad_only_name_is_a_clear_error(root, capsys):
    assert main(["figures", "--root", str(root), "--only", "factor_time", "train_curve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: unknown figure 'train_curve'; valid figures: "
                          "train_curves, profile_stages, factor_time, factor_trajectory"), err
    assert "Traceback" not in err and not _files(root)  # nothing drawn before the check


def test_missing_or_empty_data_is_skipped_with_a_reason(tmp_path, capsys):
    (tmp_path / "data" / "results").mkdir(parents=True)
    (tmp_path / "data" / "results" / "profile.csv").write_text("")  # empty file
    # a header and no rows
    pd.DataFrame(columns=list(results.columns("factor"))).to_csv(results.results_path("factor", tmp_path), index=False)
    assert main(["figures", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"skip train_curves: {results.results_path('train', tmp_path)} is absent" in out
    assert "skip profile_stages:" in out and "skip factor_time:" in out and "has no rows" in out
    assert "skip factor_trajectory:" in out and "skip primer_vector_sweep:" in out
    assert f"drew 0 of {len(figures.FIGURES)}" in out and not _files(tmp_path)


def test_a_missing_curve_refuses_its_figures_after_drawing_the_others(root, capsys):
    """A curve file that a train or trajectory row names but that is missing: the figures that
    read it are not drawn (a line naming the file), the others are, and the command exits 2."""
    train = results.read_rows("train", root)
    lost = results.curve_path(train["run_id"].iloc[0], root)
    lost.unlink()
    factor = results.read_rows("factor", root)
    lost_traj = results.curve_path(factor["run_id"].iloc[0], root)  # the row with traj_steps > 0
    lost_traj.unlink()
    assert main(["figures", "--root", str(root)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("fightlab: error: not drawn: train_curves, stage_iterations, learner_study: "
                          f"{lost} is missing: the rows of data/results/train.csv list a curve")
    assert f"factor_trajectory: {lost_traj} is missing: the trajectory rows of data/results/factor.csv" in err
    assert f"cannot draw train_curves: {lost} is missing" in out
    names = _files(root)
    assert "train_curves.png" not in names and "factor_trajectory.png" not in names
    assert "factor_time.png" in names and "profile_stages.png" in names


def test_a_byte_that_is_not_utf8_is_one_line_naming_the_file_and_line(root, capsys):
    run_id = results.read_rows("train", root)["run_id"].iloc[0]
    curve = results.curve_path(run_id, root)
    raw = gzip.decompress(curve.read_bytes()) + b"1,2\xff\n"  # a hand edit in another encoding
    curve.write_bytes(gzip.compress(raw))
    lines = raw.count(b"\n")
    with pytest.raises(results.MalformedRowError, match=f"{curve}:{lines}: byte 0xff at offset"):
        results.read_curve(run_id, root)
    assert main(["figures", "--root", str(root), "--only", "train_curves"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "UnicodeDecodeError" not in err
    assert f"not drawn: train_curves: {curve}:{lines}: byte 0xff" in err and "is not UTF-8" in err


@pytest.mark.parametrize("text", ["a,b\n1,2\n", "HEADER_ONLY"])
def test_a_curve_without_the_training_columns_or_rows_is_refused(root, capsys, text):
    """A curve whose columns are not a training's, or that holds only its header: train_curves
    is not drawn, one line naming the file, exit 2 (never a silently different figure)."""
    run_id = results.read_rows("train", root)["run_id"].iloc[0]
    curve = results.curve_path(run_id, root)
    head = results.read_text(curve).splitlines()[0] + "\n"
    curve.write_bytes(gzip.compress((head if text == "HEADER_ONLY" else text).encode()))
    assert main(["figures", "--root", str(root), "--only", "train_curves"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"not drawn: train_curves: {curve}: the curve " in err
    assert "train_curves.png" not in _files(root)


def test_a_header_only_primer_curve_is_refused_not_drawn_empty(tmp_path, capsys):
    from fightlab.measure import primer as primer_measure  # noqa: F401 (the row's schema)

    row = dict(results.run_metadata(body="-", nworld=1, seed=0, params={}, device="cuda:0"))
    cols = results.columns("primer")
    row.update({c: 1.0 for c in cols if c not in row})
    results.append_row("primer", row, tmp_path)
    path = results.write_curve(row["run_id"], pd.DataFrame(columns=["device", "op", "n", "median_s", "gb_per_s"]),
                               tmp_path)
    assert path.exists()
    assert main(["figures", "--root", str(tmp_path), "--only", "primer_vector_sweep"]) == 2
    err = capsys.readouterr().err
    assert "not drawn: primer_vector_sweep:" in err and "the curve has a header and no rows" in err, err
    assert not (tmp_path / "figures" / "primer_vector_sweep.png").exists()


def test_one_figure_per_gpu(tmp_path):
    for gpu in ("NVIDIA H200", "NVIDIA GeForce RTX 5090"):
        results.append_row("profile", profile_row(gpu=gpu), tmp_path)
    drawn = figures.draw(["profile_stages"], tmp_path, log=lambda s: None)
    names = sorted(p.name for p in drawn["profile_stages"])
    assert names == ["profile_stages_nvidia-geforce-rtx-5090.png", "profile_stages_nvidia-geforce-rtx-5090.svg",
                     "profile_stages_nvidia-h200.png", "profile_stages_nvidia-h200.svg"]


def test_factor_curves_skip_rows_without_trajectory(root):
    df = results.read_rows("factor", root)
    assert list(df["traj_steps"]) == [10.0, 0.0]
    pairs = figures.factor_curves(df, root)
    assert len(pairs) == 1 and pairs[0][0]["run_id"] == df["run_id"].iloc[0]
    assert list(pairs[0][1].columns[:2]) == ["step", "time_s"]


def test_factor_plots():
    import matplotlib.pyplot as plt

    df = pd.DataFrame([factor_row(nworld=n) for n in (1024, 4096)])
    fig = figures.plot_factor_time(df)
    ax = fig.axes[0]
    assert len(ax.patches) == 3 * len(df) and ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["muscular-fast\n1024 worlds\nabc1234",
                                                            "muscular-fast\n4096 worlds\nabc1234"]
    assert not [t for t in ax.texts if t.get_text() == "not measured"] and not fig.texts
    plt.close(fig)

    # a row from before the shared variant: its bar is marked, and a note says which and why
    old = dict(factor_row(nworld=4096), commit="0ld0000", params='{"variant": "global"}')
    new = dict(factor_row(nworld=1024), params='{"variant": "shared"}')
    fig = figures.plot_factor_time(pd.DataFrame([new, old]))
    ax = fig.axes[0]
    assert len(ax.patches) == 4 * 2  # stock, global, shared, dense
    marks = [t for t in ax.texts if t.get_text() == "not measured"]
    assert len(marks) == 1 and marks[0].get_position()[0] == pytest.approx(1 + 0.1)  # shared, 2nd row
    note = " ".join(t.get_text() for t in fig.texts)
    assert "single launch, shared memory: not measured for muscular-fast ×4096" in note and "0ld0000" in note
    plt.close(fig)

    row = pd.Series(factor_row(traj_steps=10))
    fig = figures.plot_factor_trajectory([(row, factor_curve()), (row, factor_curve(quiet=False))])
    lines = fig.axes[0].get_lines()
    # the quiet curves are drawn; a curve without them draws only the pushed pair
    assert [ln.get_label() for ln in lines] == [f"muscular-fast, {w}" for _, w, _ in figures.TRAJECTORY_LINES] + \
        [f"muscular-fast, {w}" for _, w, _ in figures.TRAJECTORY_LINES[:2]]
    assert min(ln.get_ydata().min() for ln in lines) == figures.DEV_FLOOR_RAD  # exact zeros on the floor
    plt.close(fig)
    fig = figures.plot_factor_trajectory([])  # nothing to draw: a note, no error
    assert not fig.axes[0].get_lines()
    plt.close(fig)


def test_primer_sweep_draws_the_newest_row_with_a_sweep(root, monkeypatch):
    import matplotlib.pyplot as plt

    from fightlab.figures import primer

    newer = primer_row(time="2026-11-30T08:00:00+00:00")
    results.append_row("primer", newer, root)
    results.write_curve(newer["run_id"], sweep_curve(scale=2.0), root)
    seen, real_plot = [], primer.plot_sweep

    def spy(df, title=None):
        seen.append((df["median_s"].max(), title))
        return real_plot(df, title)

    monkeypatch.setattr(primer, "plot_sweep", spy)
    drawn = figures.draw(["primer_vector_sweep"], root, log=lambda s: None)
    assert len(drawn["primer_vector_sweep"]) == 2
    # the newest row that has a sweep (scale 2), titled with its card
    assert seen == [(sweep_curve(2.0)["median_s"].max(), "vector sweep, NVIDIA H200")]
    fig = real_plot(sweep_curve(), title="vector sweep, X")
    assert fig._suptitle is not None and fig._suptitle.get_text() == "vector sweep, X"
    ax_t, ax_bw = fig.axes
    # every (device, op) has a time line; the empty kernel moves no bytes: no bandwidth line
    assert len(ax_t.get_lines()) == 6 and len(ax_bw.get_lines()) == 4
    # colour = operation, line style = implementation: one legend each, every entry distinct
    ops, impl = ax_t.get_legend(), ax_bw.get_legend()
    assert [t.get_text() for t in ops.get_texts()] == ["copy", "saxpy", "empty kernel"]
    assert len({h.get_color() for h in ops.legend_handles}) == 3
    assert [t.get_text() for t in impl.get_texts()] == ["Warp on the CPU", "Warp on cuda:0"]
    assert [h.get_linestyle() for h in impl.legend_handles] == ["-", "--"]
    plt.close("all")


def test_factor_time_orders_the_trained_body_first(tmp_path, monkeypatch):
    # rows appended out of order (as sessions publish them): the figure lists muscular-fast first,
    # then the generated trees by name, world counts ascending
    for body, n in (("tree-100", 1024), ("muscular-fast", 8192), ("chain-100", 4096),
                    ("muscular-fast", 1024), ("chain-100", 1024)):
        results.append_row("factor", factor_row(body=body, nworld=n), tmp_path)
    seen = []
    real = figures.plot_factor_time
    monkeypatch.setattr(figures, "plot_factor_time",
                        lambda df: seen.append(list(zip(df["body"], df["nworld"]))) or real(df))
    figures.draw(["factor_time"], tmp_path, log=lambda s: None)
    assert seen == [[("muscular-fast", 1024), ("muscular-fast", 8192), ("chain-100", 1024),
                     ("chain-100", 4096), ("tree-100", 1024)]]


def test_check_names():
    from fightlab.config import ConfigError

    assert figures.check_names(None) == list(figures.FIGURES)
    assert figures.check_names(["factor_time", "train_curves", "factor_time"]) == ["train_curves", "factor_time"]
    with pytest.raises(ConfigError, match="unknown figure 'x', 'y'; valid figures: train_curves"):
        figures.check_names(["x", "train_curves", "y"])
    assert figures.gpu_slug("NVIDIA H200") == "nvidia-h200" and figures.gpu_slug("") == "unknown-gpu"


def test_unreadable_data_fails_after_drawing_the_rest(root, capsys):
    path = results.results_path("profile", root)
    path.write_text(path.read_text().replace("kernel_ms_per_step", "old_column", 1))
    assert main(["figures", "--root", str(root)]) == 2
    out, err = capsys.readouterr()
    assert "cannot draw profile_stages:" in out and "does not match the 'profile' schema" in out
    assert err.startswith(f"fightlab: error: not drawn: profile_stages: {path}:1: header does not match "
                          "the 'profile' schema") and err.count("\n") == 1
    assert "Traceback" not in err
    assert "profile_stages.png" not in _files(root) and "factor_time.png" in _files(root)


def test_committed_figures_have_their_data():
    """Each figure whose data file the repository holds is committed (png and svg): redraw with
    `python -m fightlab figures` after publishing rows."""
    from fightlab.figures import REPO_ROOT

    from fightlab.survey import cost

    for name in figures.FIGURES:
        table = {"stage_iterations": "train", "learner_study": "train", "figure2_world_sweep": "sweep",
                 "learners_side_by_side": "learner_speed"}.get(name, name.split("_")[0])  # train, profile, factor, ...
        path = (cost.reference_path(REPO_ROOT) if name == "figure3_survey"  # data/survey/, not a results table
                else results.results_path(table, REPO_ROOT))
        if not path.exists() or len(path.read_text().splitlines()) < 2:
            continue
        for ext in ("png", "svg"):
            assert list((REPO_ROOT / "figures").glob(f"{name}*.{ext}")), f"figures/{name}.{ext} is missing"


def test_a_figure_is_the_same_file_whatever_else_was_drawn(tmp_path):
    """From the committed data: each figure drawn alone equals the same figure drawn after the
    others in one process (no plot style leaking from one figure into the next)."""
    import shutil

    import matplotlib as mpl

    from fightlab.figures.style import use_style

    for name in ("alone", "together"):
        shutil.copytree(figures.REPO_ROOT / "data", tmp_path / name / "data")
    before = dict(mpl.rcParams)
    alone = {}
    for fig in figures.FIGURES:
        alone.update({p.name: p.read_bytes() for p in figures.draw([fig], tmp_path / "alone")[fig]})
    assert dict(mpl.rcParams) == before  # drawing leaves the caller's style alone
    use_style(**{"figure.dpi": 50.0})  # a caller's own style must not change the files either
    try:
        drawn = figures.draw(list(reversed(figures.FIGURES)), tmp_path / "together")
    finally:
        mpl.rcParams.update(before)
    together = {p.name: p.read_bytes() for paths in drawn.values() for p in paths}
    # every figure with committed rows (graphs_split and packing_throughput once their tables exist)
    needs = {"graphs_split": "graphs", "packing_throughput": "packing", "figure2_world_sweep": "sweep",
             "newton_time": "newton"}
    have = [f for f in figures.FIGURES if f not in needs
            or results.results_path(needs[f], figures.REPO_ROOT).exists()]
    assert alone.keys() == together.keys() and len(alone) % 2 == 0  # a .png and an .svg each
    assert all(any(k.startswith(f) and k.endswith(".png") for k in alone) for f in have), sorted(alone)  # per GPU too
    assert [k for k in alone if alone[k] != together[k]] == []


def test_train_curves_label_every_panel_and_highlight_the_headline_groups(root):
    import matplotlib.pyplot as plt

    from fightlab.measure.report import published_runs

    fig = figures.plot_train_curves(published_runs(root), root, log=lambda s: None)
    axes = fig.axes[:4]
    fig.canvas.draw()
    for ax in axes:  # the top row too (shared x axes hide them by default)
        assert any(t.get_visible() and t.get_text() for t in ax.get_xticklabels()), ax.get_ylabel()
    legend = axes[0].get_legend() or fig.legends[0]
    texts = [t.get_text() for t in legend.get_texts()]
    # 4 runs: two headline groups (the two simple seeds share one entry), the shared-GPU run grey
    assert texts == ["1 other runs (earlier code, learner studies, packed)",
                     "headline: muscular-fast, tree factor, global, abc1234: seed 1",
                     "headline: simple, dense, abc1234: seeds 1, 2"], texts
    assert sum(len(ax.get_lines()) for ax in axes) >= 4 * 4
    grey = [ln for ln in axes[0].get_lines() if ln.get_color() == "0.72"]
    assert len(grey) == 1 and grey[0].get_linestyle() == ":"  # the shared-GPU run, dotted
    plt.close(fig)


def test_stage_iterations_counts_each_stage_and_keeps_learners_and_tasks_apart(tmp_path):
    """Each iteration belongs to one stage (a widening's row to the stage it left); only solo
    solved runs of the task count; a changed learner is its own group; the figure draws it."""
    from fightlab.measure import report

    c = train_curve()
    got = report.stage_iterations(c)
    assert got.sum() == len(c) and got.tolist() == [2] * 9 + [2]
    rows = [train_row("simple", seed=1), train_row("simple", seed=2, params={"ppo": {"learning_rate": 3e-4}}),
            train_row("simple", seed=3, shared_gpu=4), train_row("simple", seed=4, solved=False),
            train_row("simple", seed=5, params={"task": "custom-12345678"})]
    for r in rows:
        results.append_row("train", r, tmp_path)
        results.write_curve(r["run_id"], c, tmp_path)
    t = report.stage_table(report.published_runs(tmp_path), tmp_path)
    assert sorted(t["seed"].unique()) == [1, 2] and t["learner"].nunique() == 2
    assert t.groupby("run_id")["iterations"].sum().tolist() == [len(c)] * 2
    assert t["amplitude"].min() == 0.1 and t["amplitude"].max() == 1.0
    # packed=True: the packed run too (a learner study's variants), still the task's solved runs only
    tp = report.stage_table(report.published_runs(tmp_path), tmp_path, packed=True)
    assert sorted(tp["seed"].unique()) == [1, 2, 3]
    assert tp.groupby("seed")["concurrent"].first().tolist() == [1, 1, 4]
    # the learner study's table: one row per learner, the packed run with its solo twin
    v = report.variant_table(report.published_runs(tmp_path), tmp_path).set_index("changes")
    assert sorted(v.index) == ["defaults", "ppo.learning_rate=0.0003"]
    assert v.loc["defaults", "n"] == 2 and v.loc["defaults", "seeds"] == "1, 3"
    assert v.loc["defaults", "iterations_median"] == len(c) and v.loc["defaults", "stage0_median"] == got[0]
    d = PPOConfig()
    assert report.learner_changes({"ppo": {"init_std": d.init_std, "hidden": list(d.hidden)},
                                   "env": NOW_PHYSICS}) == "defaults"
    # the fixed KL target of the old defaults reads as a change; the per-action field it overrides does not
    # rows without the solver fields ran the reference physics (config.IMPLIED_FIELDS): one label
    old = "Newton 10/20 with qacc_smooth"
    assert report.learner_changes({"ppo": {"desired_kl": 0.01, "desired_kl_per_action": 0.002,
                                           "init_std": 0.5}}) == f"ppo.desired_kl=0.01, ppo.init_std=0.5, {old}"
    assert report.learner_changes({"ppo": {"desired_kl": None, "desired_kl_per_action": 0.003}}) \
        == f"ppo.desired_kl_per_action=0.003, {old}"
    e = EnvConfig()
    now = dict(NOW_PHYSICS)
    assert report.learner_changes({"env": now}) == "defaults"
    assert report.learner_changes({"env": {**now, "solver_iterations": 1}}) \
        == (f"Newton 1/{e.solver_ls_iterations} {'with' if e.solver_qacc_smooth else 'without'} qacc_smooth"
            + ("" if e.solver_eulerdamp else ", explicit damping"))
    # a row of the training physics before explicit damping (no solver_eulerdamp: implied True) is not today's
    before = {k: v for k, v in now.items() if k != "solver_eulerdamp"}
    assert report.learner_changes({"env": before}) == ("defaults" if e.solver_eulerdamp else
                                                       "Newton 2/4 without qacc_smooth")
    assert " tol 1e-05/0.01" in report.learner_changes({"env": {**now, "solver_tolerance": 1e-5}})
    # a run that sets the old fixed target shares the learner of the rows that stored no per-action field
    assert report.learner_id({"ppo": {"desired_kl": 0.01, "desired_kl_per_action": 0.002}}) \
        == report.learner_id({"ppo": {"desired_kl": 0.01}})
    assert report.learner_id({"ppo": {"desired_kl": None, "desired_kl_per_action": 0.002}}) \
        != report.learner_id({"ppo": {"desired_kl": None, "desired_kl_per_action": 0.003}})
    assert report.learner_changes({"ppo": {"desired_kl": 0.02}, "env": {**now, "w_pose": 2.0, "timestep": 0.002}}) \
        == "ppo.desired_kl=0.02, env.w_pose=2.0"  # timestep is the task's, not the learner's
    drawn = figures.draw(["stage_iterations", "learner_study"], tmp_path, log=lambda s: None)
    assert [p.suffix for p in drawn["stage_iterations"]] == [".png", ".svg"]
    assert [p.suffix for p in drawn["learner_study"]] == [".png", ".svg"]


def test_committed_figures_equal_a_redraw(tmp_path):
    """What the README promises: `python -m fightlab figures` on a clone changes nothing. Every
    data-driven figure drawn from a copy of the committed data/ is byte-identical to the file under
    figures/ (PNG and SVG), and no committed file of a data-driven figure is left undrawn."""
    import shutil

    committed = figures.REPO_ROOT / "figures"
    shutil.copytree(figures.REPO_ROOT / "data", tmp_path / "data")
    drawn = {p.name: p for paths in figures.draw(root=tmp_path, log=lambda _: None).values() for p in paths}
    assert drawn, "no figure drawn from the committed data"
    missing = sorted(n for n in drawn if not (committed / n).exists())
    differ = sorted(n for n in drawn if (committed / n).exists()
                    and (committed / n).read_bytes() != drawn[n].read_bytes())
    assert not missing and not differ, (
        f"committed figures differ from a redraw: {differ}, not committed: {missing}; "
        "redraw with `.venv/bin/python -m fightlab figures` and commit figures/")
    stale = sorted(p.name for p in committed.iterdir() if p.suffix in (".png", ".svg")
                   and any(p.stem.startswith(f) for f in figures.FIGURES) and p.name not in drawn)
    assert not stale, f"committed figures no redraw writes (their data is gone): {stale}"


def test_training_figure_splits_the_reward_by_term_only_when_asked_and_the_curve_has_the_terms():
    """plot_training's per-term panel (notebook 06's own run): a term's iteration sum per env step,
    one line per reward_<term> column; without the flag or the columns, the 2×2 figure alone."""
    import matplotlib.pyplot as plt

    from fightlab.figures.training import plot_training

    curve = pd.DataFrame(dict(iteration=[1, 2], env_steps=[128, 256], elapsed_s=[1.0, 2.0],
                              reward=[0.01, 0.02], amplitude=[0.1, 0.1], window_fall_rate=[1.0, 0.5],
                              window_episode_s=[1.0, 2.0], reward_alive=[2.56, 2.56],
                              reward_fall=[-64.0, -32.0]))
    fig = plot_training({"run": curve}, reward_terms=True)
    terms = fig.axes[4]
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in terms.get_lines() if not ln.get_label().startswith("_")}
    assert lines == {"alive": [0.02, 0.02], "fall": [-0.5, -0.25]}, lines
    plt.close(fig)
    for fig in (plot_training({"run": curve}), plot_training({"run": curve[curve.columns[:7]]}, reward_terms=True)):
        assert len(fig.axes) == 4
        plt.close(fig)


def test_newton_time_draws_timed_rows_and_skips_untimed(tmp_path, capsys):
    from fightlab.figures.newton import timed_rows

    assert figures.draw(["newton_time"], tmp_path) == {"newton_time": []}
    assert "skip newton_time:" in capsys.readouterr().out
    results.append_row("newton", newton_row(graph_ms=None), tmp_path)  # a CPU smoke row: no graph time
    assert figures.draw(["newton_time"], tmp_path) == {"newton_time": []}
    assert "no newton row of NVIDIA H200 has a graph time" in capsys.readouterr().out
    for n, single, ms in ((32, False, 0.4), (32, True, 0.3), (1024, False, 0.6), (1024, True, 0.5)):
        results.append_row("newton", newton_row("muscular-fast", n, single, graph_ms=ms), tmp_path)
    results.append_row("newton", newton_row("muscular-fast", 1024, True, variant="none", graph_ms=9.0), tmp_path)
    paths = figures.draw(["newton_time"], tmp_path)["newton_time"]
    assert [p.name for p in paths] == ["newton_time.png", "newton_time.svg"]
    rows = timed_rows(results.read_rows("newton", tmp_path))
    assert len(rows) == 4 and set(rows["single_launch"]) == {False, True} and rows["graph_ms_per_step"].max() == 0.6


def test_learners_side_by_side_draws_each_run_and_marks_the_unsolved_at_their_budget(tmp_path, capsys):
    """From train rows of the side-by-side study (both learners, one card): each run's time to
    solve, the unsolved at their budget, seconds per iteration stacked; the same bytes when
    redrawn. Without those rows and without learner_speed rows: one line, nothing drawn."""
    assert figures.draw(["learners_side_by_side"], tmp_path) == {"learners_side_by_side": []}
    assert "skip learners_side_by_side: no side-by-side training" in capsys.readouterr().out
    runs = [train_row(seed=s, tts=40.0 + s, params=dict(study="side_by_side")) for s in (1, 2, 3)]
    runs += [train_row(seed=s, tts=150.0 if s < 3 else None, solved=s < 3,
                       reference_passed=True if s < 3 else None,
                       params=dict(study="side_by_side", learner="rsl_rl", time_limit_s=440)) for s in (1, 2, 3)]
    runs += [train_row(seed=9, params=dict(learner="rsl_rl"))]  # not of the study: left out
    for r in runs:
        results.append_row("train", r, tmp_path)
    first = figures.draw(["learners_side_by_side"], tmp_path)["learners_side_by_side"]
    assert [p.name for p in first] == ["learners_side_by_side.png", "learners_side_by_side.svg"]
    svg = first[1].read_text()
    assert "unsolved: at its budget" in svg and "2/3 solved" in svg and "3/3 solved" in svg and "rollout" in svg
    assert "4/3 solved" not in svg and "fightlab beside rsl_rl, solo, NVIDIA H200" in svg
    before = {p.name: p.read_bytes() for p in first}
    again = figures.draw(["learners_side_by_side"], tmp_path)["learners_side_by_side"]
    assert {p.name: p.read_bytes() for p in again} == before


def test_packing_throughput_plots_gpu_count_only_with_rows_of_several_gpus():
    """One-GPU rows (gpus 1 or empty, as every committed row): one panel, as before. With rows of
    2 and 4 GPUs: a second panel, aggregate it/s against GPUs, with N × and 0.9 N × the one-GPU
    row of the same body, nworld, K and MPS."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from fightlab.figures.packing import gpu_count, plot_packing

    def row(k, gpus, it_s, t="2026-12-01T12:00:00+00:00"):
        return dict(time=t, body="simple", nworld=1024, concurrent=k, mps=True, it_per_s_aggregate=it_s, gpus=gpus)

    one = pd.DataFrame([row(1, None, 5.0), row(4, float("nan"), 9.5)])
    assert list(gpu_count(one)) == [1, 1] and list(gpu_count(one.drop(columns="gpus"))) == [1, 1]
    fig = plot_packing(one)
    assert len(fig.axes) == 1
    plt.close(fig)
    fig = plot_packing(pd.concat([one, pd.DataFrame([row(4, 2, 18.0), row(4, 4, 35.0)])], ignore_index=True))
    assert len(fig.axes) == 2
    left, right = fig.axes
    assert [list(ln.get_xdata()) for ln in left.get_lines()][0] == [1, 4]  # the one-GPU K-scan alone
    measured, linear, goal = right.get_lines()[:3]
    assert list(measured.get_xdata()) == [1, 2, 4] and list(measured.get_ydata()) == [9.5, 18.0, 35.0]
    assert list(linear.get_ydata()) == [9.5, 19.0, 28.5, 38.0]
    assert list(goal.get_ydata()) == pytest.approx([0.9 * 9.5 * n for n in (1, 2, 3, 4)])
    plt.close(fig)


def test_a_stage_variant_is_named_by_what_it_had_on_its_day():
    """``variant_label``: a "default" row by its fixes (the default changes over time), an "all"
    row of a day with fewer switches by its fixes, today's default with switches added as
    "default + …", and " (default)" only after today's default build."""
    from fightlab.figures.newton import variant_label
    from fightlab.kernels.newton_hessian import DEFAULT_FIXES, FIXES

    old = ["bounds", "scatter", "pairs", "ldlt", "tree"]
    assert variant_label({"variant": "default", "fixes": old}) == ",".join(old)
    assert variant_label({"variant": "default", "fixes": list(DEFAULT_FIXES)}) == ",".join(DEFAULT_FIXES) + " (default)"
    extra = [f for f in FIXES if f not in DEFAULT_FIXES]
    assert variant_label({"variant": "all", "fixes": list(FIXES)}) == "default + " + ",".join(extra)
    assert variant_label({"variant": "x", "fixes": [*DEFAULT_FIXES, "update"]}) == "default + update"
    assert variant_label({"variant": "all", "fixes": list(FIXES[:3])}) == ",".join(FIXES[:3])
    assert variant_label({"variant": "bounds,tree", "fixes": ["bounds", "tree"]}) == "bounds,tree"


def test_a_value_a_figure_cannot_read_fails_that_figure_in_one_line(tmp_path):
    """A hand-made row whose params hold a value of a type the figure's reader does not expect
    (inside a section the row check lets through) ends that figure with one line naming it and the
    error, not a traceback; the command still fails after drawing the others."""
    for n, single in ((1024, False), (1024, True)):
        row = newton_row("muscular-fast", n, single, graph_ms=0.5)
        row["params"] = json.dumps({**json.loads(row["params"]), "stage_cycles": {"LDLt": "x"}, "cycles": "SM cycles"})
        results.append_row("newton", row, tmp_path)
    results.append_row("profile", profile_row(), tmp_path)
    lines = []
    with pytest.raises(figures.DataFileError, match=r"^not drawn: newton_time: TypeError"):
        figures.draw(["newton_time", "profile_stages"], tmp_path, log=lines.append)
    bad = [s for s in lines if s.startswith("figures: cannot draw newton_time:")]
    assert len(bad) == 1 and "holds a value it cannot read" in bad[0] and "\n" not in bad[0]
    assert (tmp_path / "figures" / "profile_stages.png").is_file()


def test_cards_whose_names_give_one_slug_get_a_figure_each(tmp_path):
    """Two GPU names that give one slug each keep a figure (sha1 of the name after the slug); a very
    long name gives a slug of at most 60 characters."""
    for gpu in ("NVIDIA H200", "nvidia h200"):
        results.append_row("profile", profile_row(gpu=gpu), tmp_path)
    names = sorted(p.name for p in figures.draw(["profile_stages"], tmp_path, log=lambda s: None)["profile_stages"])
    assert len(names) == 4 and len(set(names)) == 4 and all(n.startswith("profile_stages_nvidia-h200-") for n in names)
    assert figures.per_gpu_name("x", "NVIDIA H200", ["NVIDIA H200", "NVIDIA H100"]) == "x_nvidia-h200"
    long = figures.gpu_slug("A" * 300)
    assert len(long) <= 60 and long != figures.gpu_slug("A" * 299)
