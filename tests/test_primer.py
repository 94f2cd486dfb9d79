"""fightlab.measure.primer on the CPU at tiny sizes, and notebook 00 under papermill at smoke size."""

from __future__ import annotations

import ast
import json
import re
import math

import numpy as np
import pytest

from fightlab import results
from fightlab.figures import primer as primer_figures
from fightlab.measure import primer
from fightlab.reproduce import reproduce

YES, NO = (lambda: True), (lambda: False)


# ---------------------------------------------------------------------------------------------
# parameters


def test_params_smoke_cuts_and_devices():
    p = primer.params_for(size="smoke", device="cpu")
    assert p.device == "cpu" and p.devices == ["cpu"]
    assert max(p.vector_sizes) <= 2**18 and p.repeats <= 3
    assert p.mandelbrot_shape == (128, 192)
    full = primer.params_for(size="full", device="auto", has_cuda=YES)
    assert full.device == "cuda:0" and full.devices == ["cpu", "cuda:0"]
    assert full.mandelbrot_shape == (1024, 1536) and full.mandelbrot_max_iter == 20
    assert primer.params_for(device="auto", has_cuda=NO).devices == ["cpu"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"size": "huge"}, "size must be one of 'smoke', 'full', got 'huge'"),
        ({"device": "tpu"}, "got 'tpu'"),
        ({"device": "cuda:0", "has_cuda": NO}, "has none"),
        ({"repeats": 0}, "repeats.*0"),
        ({"warmup": -1}, "warmup.*-1"),
        ({"vector_sizes": [16, 0]}, "vector_sizes entry.*0"),
        ({"mandelbrot_shape": [8]}, "rows, columns"),
        ({"cnn_image_px": 10}, "multiple of 4.*10"),
    ],
)
def test_params_errors_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        primer.params_for(**kwargs)


# ---------------------------------------------------------------------------------------------
# vectors


def test_vector_kernels_match_numpy_and_the_article_example():
    c = primer.check_vector_kernels("cpu", n=257, a=-1.5)
    assert c["ok"]
    assert c["article_example"] == [8.0, 10.0, 12.0, 14.0, 16.0, 18.0]
    assert c["vec_add_max_abs_err"] == 0.0


def test_vector_sweep_rows_and_bandwidth():
    df = primer.vector_sweep([16, 4096], ["cpu"], repeats=2, warmup=0)
    ops = {"copy", "vec_add", "saxpy", "empty_kernel", "numpy_copy", "numpy_add", "numpy_saxpy"}
    assert set(df.op) == ops and set(df.n) == {16, 4096}
    assert len(df) == len(ops) * 2
    assert (df.median_s > 0).all()
    big = df[(df.n == 4096) & (df.op == "vec_add")].iloc[0]
    assert big.bytes == 12 * 4096
    # bytes moved per element: copy reads + writes, SAXPY reads x and y and writes y
    per = {op: df[(df.n == 4096) & (df.op == op)].iloc[0].bytes / 4096 for op in ("copy", "saxpy")}
    assert per == {"copy": 8, "saxpy": 12}
    assert big.gb_per_s == pytest.approx(big.bytes / big.median_s / 1e9)
    assert (df[df.op.isin(["copy", "numpy_copy"])].frac_of_copy == 1.0).all()
    assert df[df.op == "empty_kernel"].gb_per_s.isna().all()
    fig = primer_figures.plot_sweep(df)
    assert [ax.get_ylabel() for ax in fig.axes] == ["median time per call [us]", "effective bandwidth [GB/s]"]


# ---------------------------------------------------------------------------------------------
# Mandelbrot


def _mandelbrot_python(shape, max_iter):
    """Slow reference: one pixel at a time, float32 like the kernel."""
    x0, y0, step = primer.mandelbrot_grid(shape)
    f = np.float32
    out = np.zeros(shape, np.int32)
    for r in range(shape[0]):
        for c in range(shape[1]):
            cx, cy = f(x0) + f(c) * f(step), f(y0) + f(r) * f(step)
            x = y = f(0.0)
            n = 0
            while n < max_iter:
                xx, yy = x * x, y * y
                if xx + yy > f(4.0):
                    break
                y = f(2.0) * x * y + cy
                x = xx - yy + cx
                n += 1
            out[r, c] = n
    return out


def test_mandelbrot_numpy_matches_a_pixel_loop():
    shape = (12, 18)
    ref = _mandelbrot_python(shape, 20)
    assert np.array_equal(primer.mandelbrot_numpy(shape, 20), ref)
    assert ref.max() == 20 and ref.min() >= 1  # points inside and outside the set


def test_mandelbrot_warp_cpu_matches_numpy_and_a_missing_launch_is_caught():
    shape = (32, 48)
    ref = primer.mandelbrot_numpy(shape, 20)
    img = primer.mandelbrot_warp(shape, 20, "cpu")
    assert primer.image_match(img, ref) == 1.0
    never = primer.mandelbrot_warp(shape, 20, "cpu", launch=False)
    assert (never == -1).all() and primer.image_match(never, ref) == 0.0
    with pytest.raises(ValueError, match="shapes differ"):
        primer.image_match(img, ref[:3])


def test_mandelbrot_study_keeps_compile_first_and_steady_apart():
    df, images = primer.mandelbrot_study((16, 24), 20, ["cpu"], repeats=2, warmup=0)
    assert list(df.impl) == ["numpy", "warp cpu"] and set(images) == {"numpy", "warp cpu"}
    w = df.set_index("impl").loc["warp cpu"]
    assert w.compile_s > 0 and w.first_s > 0 and w.steady_s > 0
    assert w.compile_s > w.steady_s  # compiling costs more than running a 16x24 image
    assert w.image_match == 1.0 and w.never_launched_match == 0.0
    assert w.device_timer_s > 0 and w.device_timer_method == "host-clock"
    assert w.cold_total_s == pytest.approx(w.compile_s + w.first_s)
    assert 0 < w.compile_share < 1
    assert df.attrs["pixels"] == 16 * 24
    fig = primer_figures.plot_mandelbrot(images)
    assert "iterations [count]" in [a.get_ylabel() for a in fig.axes]


# ---------------------------------------------------------------------------------------------
# CNN


def test_load_digits_shapes():
    d = primer.load_digits(8, seed=1)
    assert d["x_train"].shape[1:] == (1, 8, 8) and d["x_train"].dtype.is_floating_point
    assert len(d["x_train"]) + len(d["x_test"]) == 1797
    assert set(d["y_train"].tolist()) == set(range(10))
    assert 0.0 <= float(d["x_train"].min()) and float(d["x_train"].max()) <= 1.0
    assert primer.load_digits(16)["x_test"].shape[-1] == 16


def test_cnn_study_times_and_learns_on_cpu():
    d = primer.load_digits(8, seed=0)
    df = primer.cnn_study(d, ["cpu"], batch=32, train_steps=100, repeats=2, warmup=1, seed=0)
    r = df.iloc[0]
    assert r.device == "cpu" and r.batch == 32 and r.image_px == 8
    assert r.step_s > 0 and r.first_s > 0 and r.samples_per_s == pytest.approx(32 / r.step_s)
    assert r.test_accuracy > 0.5  # 10 classes: chance is 0.1
    model = primer.TinyCNN(8)
    assert model(d["x_test"][:5]).shape == (5, 10)


# ---------------------------------------------------------------------------------------------
# closing table, prices, result row


def _tiny_run():
    p = primer.params_for(size="smoke", device="cpu", repeats=2, warmup=0, vector_sizes=[16, 1024],
                          mandelbrot_shape=[16, 24], cnn_image_px=8, cnn_train_steps=2)
    sweep = primer.vector_sweep(p.vector_sizes, p.devices, repeats=2, warmup=0)
    mandel, _ = primer.mandelbrot_study(p.mandelbrot_shape, 20, p.devices, repeats=2, warmup=0)
    cnn = primer.cnn_study(primer.load_digits(8), p.devices, batch=8, train_steps=2, repeats=2, warmup=0)
    return p, primer.summary(sweep, mandel, cnn, None)


def test_summary_ratios_and_result_row_on_a_cpu_only_run(tmp_path):
    p, s = _tiny_run()
    assert set(s) == set(results.EXPERIMENTS["primer"]) == set(primer.PRIMER_METRICS)
    assert s["vector_n"] == 1024 and s["mandelbrot_pixels"] == 16 * 24
    assert s["copy_gb_per_s_cpu"] > 0 and math.isnan(s["copy_gb_per_s_gpu"])
    table = primer.ratios(s)
    assert table.gpu.isna().all() and table.gpu_advantage_x.isna().all()
    assert (table.note == primer.GPU_MISSING).all()
    assert (table.cpu > 0).all()

    row = primer.result_row(p, s)
    results.validate_row("primer", row)
    assert row["body"] == "none" and row["gpu"] == "cpu" and row["copy_gb_per_s_gpu"] is None
    assert json.loads(row["params"])["size"] == "smoke"
    path = results.append_row("primer", row, tmp_path)
    back = results.read_rows("primer", tmp_path)
    assert path == tmp_path / "data" / "results" / "primer.csv" and len(back) == 1
    assert back.copy_gb_per_s_gpu.isna().all()


def test_ratios_with_a_gpu_read_the_right_way_round():
    s = {k: 1.0 for k in primer.PRIMER_METRICS}
    s.update(copy_gb_per_s_cpu=10.0, copy_gb_per_s_gpu=4000.0, cnn_step_s_cpu=0.02, cnn_step_s_gpu=0.004)
    t = primer.ratios(s).set_index("quantity")
    assert t.loc["copy bandwidth, largest n", "gpu_advantage_x"] == pytest.approx(400.0)
    assert t.loc["CNN training step", "gpu_advantage_x"] == pytest.approx(5.0)
    assert (t.note == "").all()


def test_cloud_prices_are_the_quoted_ones_with_a_source():
    df = primer.cloud_prices()
    quoted = dict(zip(df.instance, df.usd_per_h))
    assert quoted == {"p3.2xlarge": 3.06, "p5.48xlarge": 98.32, "g4dn.xlarge": 0.526}
    assert df.source.str.len().min() > 10
    for cited in df.source:  # what the repository holds, never a file beside it (../shared)
        assert "shared/" not in cited and (primer.REPO_ROOT / re.search(r"data/\S+\.md", cited)[0]).is_file()
    assert df.set_index("instance").loc["p5.48xlarge", "usd_per_gpu_h"] == pytest.approx(98.32 / 8)
    assert df.vs_cheapest_per_gpu_h_x.min() == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# the notebook


def test_primer_notebook_parameters_are_plain_literals():
    nb = json.loads(primer.REPO_ROOT.joinpath("notebooks", "00_gpu_primer.ipynb").read_text())
    cell = nb["cells"][1]
    assert "parameters" in cell["metadata"]["tags"]
    tree = ast.parse("".join(cell["source"]))
    names = set()
    for stmt in tree.body:
        assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1, ast.dump(stmt)
        ast.literal_eval(stmt.value)  # raises on anything but a literal
        names.add(stmt.targets[0].id)
    assert {"size", "device", "publish", "repeats", "warmup", "vector_sizes"} <= names
    values = {s.targets[0].id: ast.literal_eval(s.value) for s in tree.body}
    assert values["size"] == "auto" and values["device"] == "auto" and values["publish"] is False
    from fightlab.sizes import resolve_size

    # the committed values are valid once "auto" is resolved, as the notebook's first cell does
    publish = values.pop("publish")  # the notebook's first cell checks it (publish.check_publish)
    assert publish is False
    primer.params_for(**{**values, "size": resolve_size(values["size"], "cpu")})


def test_primer_notebook_runs_at_smoke_size(tmp_path):
    assert reproduce(only=["00"], size="smoke", device="cpu", out_dir=tmp_path) == 0
    out = json.loads((tmp_path / "00_gpu_primer-smoke.ipynb").read_text())
    text = json.dumps(out)
    for needle in ("frac_of_copy", "compile_share", "never_launched_match", "gpu_advantage_x",
                   "p5.48xlarge", "needs a GPU", "runs/primer/smoke-cpu/data/results/primer.csv"):
        assert needle in text, needle
    errors = [o for c in out["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def test_missing_cpu_compiler_is_named():
    with pytest.raises(RuntimeError, match="warp-clang.so"):
        primer.check_cpu_compiler(available=False)
    primer.check_cpu_compiler(available=True)  # no error
    primer.check_cpu_compiler()  # this install has it


def test_recovered_h200_sweep_matches_its_summary_row():
    # the first H200 primer run predates the sweep curve; a one-off script (git history:
    # bench/recover_primer_sweep.py) rebuilt it from the executed notebook's printed table: the
    # committed curve must agree with the row measured with it
    from pathlib import Path

    from fightlab import results

    repo, run_id = Path(__file__).resolve().parents[1], "4712542b7710"
    df = results.read_curve(run_id, repo)
    assert df["source"].str.startswith("recovered from the executed notebook's printed table").all()
    row = results.read_rows("primer", repo).set_index("run_id").loc[run_id]
    big = df[df["n"] == df["n"].max()].set_index(["device", "op"])["gb_per_s"]
    for dev, side in (("cpu", "cpu"), ("cuda:0", "gpu")):
        for op in ("copy", "vec_add", "saxpy"):
            # the printed median has 4-5 significant digits
            assert big[(dev, op)] == pytest.approx(row[f"{op}_gb_per_s_{side}"], rel=2e-3)
