"""fightlab.results (schema, validation, CSV round trip), fightlab.meta and fightlab.figures.style."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass

import pandas as pd
import pytest

from fightlab import meta as run_meta
from fightlab import results
from fightlab.results import EXPERIMENTS, META_COLUMNS


def _metrics(**over):
    m = {
        "time_to_solve_s": 123.5,
        "iterations": 40,
        "compile_s": 12.25,
        "env_steps_per_s": 1.5e6,
        "physics_steps_per_s": 6.0e6,
        "rollout_s_per_iter": 0.5,
        "update_s_per_iter": 0.25,
        "solved": True,
        "final_amplitude": 0.9,
        "fall_rate": 0.01,
        "mean_episode_s": 8.0,
        "overflow_count": 0,
        "nan_resets": 0,
        "host_reads_per_iter": 1.0,
        "graph_fallbacks": 0,
        "tracking": 0.9,
        "tracking_survived": 0.95,
        "reference_passed": True,
        "reference_eval_s": 12.5,
        "reference_fall_rate_dt": 0.0,
        "reference_tracking_dt": 0.97,
        "reference_fall_rate_half_dt": 0.004,
        "reference_tracking_half_dt": 0.96,
        "peak_gpu_mem_mib": 5120.5,
    }
    m.update(over)
    return m


def _row(**over):
    meta = results.run_metadata(body="simple", nworld=1024, seed=3, params={"lr": 3e-4, "gamma": 0.99}, device="cpu")
    row = {**meta, **_metrics()}
    row.update(over)
    return row


def test_schema_order():
    assert META_COLUMNS == (
        "run_id", "time", "commit", "host", "gpu", "driver", "warp", "mujoco_warp", "torch",
        "body", "nworld", "seed", "params",
    )
    assert results.columns("train")[: len(META_COLUMNS)] == META_COLUMNS
    assert "time_to_solve_s" in EXPERIMENTS["train"]


def test_run_metadata_fields():
    meta = results.run_metadata(body="simple", nworld=8, seed=0, params={"b": 1, "a": [1, 2]}, device="cpu")
    assert tuple(meta) == META_COLUMNS
    assert len(meta["run_id"]) == 12
    assert meta["gpu"] == "cpu"
    assert meta["time"].endswith("+00:00")
    assert meta["params"] == '{"a": [1, 2], "b": 1}'  # JSON, sorted keys
    assert meta["warp"] == run_meta.package_version("warp-lang")
    assert isinstance(meta["commit"], str) and meta["commit"]


def test_round_trip(tmp_path):
    r1 = _row()
    r2 = _row(seed=4, solved=False, time_to_solve_s=None, driver="", commit="0123456")
    p = results.append_row("train", r1, tmp_path)
    assert p == tmp_path / "data" / "results" / "train.csv"
    results.append_row("train", {k: r2[k] for k in reversed(list(r2))}, tmp_path)  # any dict order
    df = results.read_rows("train", tmp_path)
    assert list(df.columns) == list(results.columns("train"))
    assert len(df) == 2
    assert df["run_id"].tolist() == [r1["run_id"], r2["run_id"]]
    assert df["nworld"].tolist() == [1024, 1024] and df["seed"].tolist() == [3, 4]
    assert df["commit"].iloc[1] == "0123456"  # digits stay text
    assert df["driver"].iloc[1] == ""
    assert df["time_to_solve_s"].iloc[0] == 123.5 and math.isnan(df["time_to_solve_s"].iloc[1])
    assert df["solved"].tolist() == [True, False]
    assert df["env_steps_per_s"].iloc[0] == 1.5e6
    assert json.loads(df["params"].iloc[0]) == {"lr": 3e-4, "gamma": 0.99}


def test_read_missing_file_gives_empty_frame(tmp_path):
    df = results.read_rows("train", tmp_path)
    assert df.empty and list(df.columns) == list(results.columns("train"))


def test_params_from_dataclass_and_numpy():
    np = pytest.importorskip("numpy")

    @dataclass
    class Cfg:
        lr: float = 1e-3
        n: int = 4

    assert json.loads(results.params_json(Cfg())) == {"lr": 1e-3, "n": 4}
    assert json.loads(results.params_json({"x": np.float32(0.5), "v": np.arange(2)})) == {"x": 0.5, "v": [0, 1]}
    with pytest.raises(TypeError, match="object"):
        results.params_json({"f": object()})
    with pytest.raises(TypeError, match="dict"):
        results.params_json([1, 2])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"nworld": 0}, "'nworld'"),
        ({"nworld": 2.0}, "'nworld'"),
        ({"nworld": True}, "'nworld'"),
        ({"seed": "1"}, "'seed'"),
        ({"body": ""}, "'body'"),
        ({"time": "yesterday"}, "'time'"),
        ({"params": "{not json"}, "'params'"),
        ({"params": "[1, 2]"}, "'params'"),
        ({"run_id": "a/b"}, "'run_id'"),
        ({"gpu": None}, "'gpu'"),
        ({"env_steps_per_s": "fast"}, "'env_steps_per_s'"),
        ({"compile_s": float("inf")}, "'compile_s'"),
    ],
)
def test_validation_names_the_column(change, match):
    with pytest.raises(ValueError, match=match):
        results.validate_row("train", _row(**change))


def test_missing_and_extra_columns_are_named(tmp_path):
    row = _row()
    del row["fall_rate"]
    with pytest.raises(ValueError, match="missing.*fall_rate"):
        results.validate_row("train", row)
    with pytest.raises(ValueError, match="unexpected.*reward_per_s"):
        results.append_row("train", _row(reward_per_s=1.0), tmp_path)
    assert not (tmp_path / "data").exists()  # nothing written for a bad row
    with pytest.raises(ValueError, match="unknown experiment 'nope'.*train"):
        results.validate_row("nope", _row())


def test_none_and_nan_metrics_are_allowed():
    results.validate_row("train", _row(time_to_solve_s=None, final_amplitude=float("nan")))


def test_header_mismatch_is_refused(tmp_path):
    path = tmp_path / "data" / "results" / "train.csv"
    path.parent.mkdir(parents=True)
    cols = list(results.columns("train"))
    path.write_text(",".join(cols[:-1] + ["old_column"]) + "\n")
    with pytest.raises(ValueError, match=r"does not match.*missing \['peak_gpu_mem_mib'\].*extra \['old_column'\]"):
        results.append_row("train", _row(), tmp_path)
    with pytest.raises(ValueError, match="does not match"):
        results.read_rows("train", tmp_path)
    path.write_text(",".join(reversed(cols)) + "\n")
    with pytest.raises(ValueError, match="different order"):
        results.append_row("train", _row(), tmp_path)


def test_register_experiment():
    name = "unit_test_bench"
    try:
        cols = results.register_experiment(name, ["env_steps_per_s", "factor_ms_per_step"])
        assert results.register_experiment(name, cols) == cols  # idempotent
        with pytest.raises(ValueError, match="already registered"):
            results.register_experiment(name, ["other_s"])
        with pytest.raises(ValueError, match="clashes"):
            results.register_experiment("x_exp", ["seed"])
        with pytest.raises(ValueError, match="Bad-Name"):
            results.register_experiment("Bad-Name", ["a_s"])
    finally:
        EXPERIMENTS.pop(name, None)


def test_curves(tmp_path):
    df = pd.DataFrame({"iteration": [0, 1, 2], "wall_time_s": [0.0, 1.5, 3.0], "mean_reward": [0.1, 0.2, 0.4]})
    p = results.write_curve("abc123", df, tmp_path)
    assert p == tmp_path / "data" / "curves" / "abc123.csv.gz" == results.curve_path("abc123", tmp_path)
    pd.testing.assert_frame_equal(results.read_curve("abc123", tmp_path), df)
    pd.testing.assert_frame_equal(pd.read_csv(p), df)  # plain gzip CSV: any reader takes it
    first = p.read_bytes()
    assert results.write_curve("abc123", df, tmp_path).read_bytes() == first  # no time stamp inside
    with pytest.raises(ValueError, match="run_id"):
        results.write_curve("../x", df, tmp_path)
    with pytest.raises(TypeError, match="DataFrame"):
        results.write_curve("abc", [1, 2], tmp_path)


def test_a_plain_csv_curve_is_read_and_replaced_by_the_runs_next_curve(tmp_path):
    df = pd.DataFrame({"iteration": [1, 2], "reward": [0.5, 0.25]})
    legacy = tmp_path / "data" / "curves" / "old1.csv"
    legacy.parent.mkdir(parents=True)
    df.to_csv(legacy, index=False)
    assert results.curve_path("old1", tmp_path) == legacy
    pd.testing.assert_frame_equal(results.read_curve("old1", tmp_path, need=("iteration",)), df)
    longer = pd.DataFrame({"iteration": [1, 2, 3], "reward": [0.5, 0.25, 0.125]})
    p = results.write_curve("old1", longer, tmp_path)
    assert p.name == "old1.csv.gz" and not legacy.exists()  # one curve per run
    pd.testing.assert_frame_equal(results.read_curve("old1", tmp_path), longer)
    other = tmp_path / "data" / "curves" / "other.csv"
    other.write_text("iteration\n1\n")
    results.write_curve("old2", df, tmp_path)
    assert other.exists()  # another run's curve is never touched
    mine = legacy.with_name("old1.csv")  # a user's plain copy beside the run's .csv.gz
    mine.write_text("my note\n")
    results.write_curve("old1", df, tmp_path)
    assert mine.read_text() == "my note\n"  # not the run's curve: kept


def test_every_committed_curve_is_whole_gzip_csv():
    import gzip

    from fightlab.paths import REPO_ROOT

    files = sorted((REPO_ROOT / "data" / "curves").iterdir())
    assert files, "no committed curves"
    for f in files:
        assert f.name.endswith(".csv.gz"), f"{f.name}: curves are committed as <run_id>.csv.gz"
        text = gzip.decompress(f.read_bytes()).decode()
        assert text.count("\n") >= 2 and "," in text.splitlines()[0], f.name


# ---------------------------------------------------------------------------------------------
# _meta: robust without git / nvidia-smi


def test_metadata_without_git(tmp_path, monkeypatch):
    assert run_meta.git_commit(tmp_path) == "unknown"  # not a repository
    assert run_meta.git_commit(tmp_path / "missing") == "unknown"

    def no_binaries(*a, **k):
        raise FileNotFoundError("no such program")

    monkeypatch.setattr(subprocess, "run", no_binaries)
    assert run_meta.git_commit() == "unknown"
    driver = run_meta.driver_version()
    assert driver == "" or driver.startswith("cuda-")
    row = results.run_metadata(body="simple", nworld=1, seed=0, params={}, device="cpu")
    assert row["commit"] == "unknown"
    results.validate_row("train", {**row, **_metrics()})


def test_commit_override_is_the_short_form(monkeypatch):
    # the GPU launcher passes the full sha; rows must carry the same short form as git here
    full = "99997D959cebef656324245286beea9fa65b6efc"
    monkeypatch.setenv("FIGHTLAB_COMMIT", full)
    assert run_meta.git_commit() == "99997d9"
    monkeypatch.setenv("FIGHTLAB_COMMIT", full + "-dirty")
    assert run_meta.git_commit() == "99997d9-dirty"
    monkeypatch.setenv("FIGHTLAB_COMMIT", "e0d8c0e-dirty")  # anything else is taken as given
    assert run_meta.git_commit() == "e0d8c0e-dirty"
    monkeypatch.setenv("FIGHTLAB_COMMIT", full[:12])
    assert run_meta.git_commit() == full[:12]


def test_git_commit_and_dirty(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git not available")
    assert run_meta.git_commit(tmp_path) == "unknown"  # no commit yet
    (tmp_path / "f.txt").write_text("a")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    sha = run_meta.git_commit(tmp_path)
    assert sha != "unknown" and not sha.endswith("-dirty")
    full = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert sha == full.strip()[:7]  # always 7 characters, as the FIGHTLAB_COMMIT override gives
    (tmp_path / "untracked.txt").write_text("u")
    assert run_meta.git_commit(tmp_path) == sha  # untracked files do not make it dirty
    (tmp_path / "f.txt").write_text("b")
    assert run_meta.git_commit(tmp_path) == sha + "-dirty"


def test_gpu_name_on_cpu():
    assert run_meta.gpu_name("cpu") == "cpu"
    assert run_meta.gpu_name(None) == "cpu"
    assert run_meta.package_version("no-such-distribution-xyz") == ""


# ---------------------------------------------------------------------------------------------
# plots


def test_savefig_writes_png_and_svg(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fightlab.figures import style as plots

    before = matplotlib.rcParams["axes.grid"]
    with plots.use_style():
        assert matplotlib.rcParams["axes.grid"] is True
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [0, 1, 4])
        plots.label(ax, x="wall time [s]", y="reward [-]")
        with pytest.raises(ValueError, match="'reward' has no unit"):
            plots.label(ax, y="reward")
        paths = plots.savefig(fig, "test_figure", tmp_path)
        plt.close(fig)
    assert matplotlib.rcParams["axes.grid"] == before
    assert paths == [tmp_path / "figures" / "test_figure.png", tmp_path / "figures" / "test_figure.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths[1].read_text()
    with pytest.raises(ValueError, match="test.png"):
        plots.savefig(fig, "test.png", tmp_path)


def test_scratch_root_clears_only_inside_runs(tmp_path):
    from fightlab.results import scratch_root

    run = tmp_path / "runs" / "x"
    (run / "data" / "results").mkdir(parents=True)
    (run / "data" / "results" / "old.csv").write_text("a\n")
    assert scratch_root(run) == run and not (run / "data").exists()
    (tmp_path / "data").mkdir()
    with pytest.raises(ValueError, match="only clears folders inside runs/"):
        scratch_root(tmp_path)
    assert (tmp_path / "data").exists()


_APPEND_MANY = """
import sys, time
import pandas as pd
from fightlab import results
# widen the window between the header check and the write, so that without the lock the
# writers race for the header (and interleave rows) every time, not by luck
_to_csv = pd.DataFrame.to_csv
_first = [True]
def _slow(self, *a, **k):
    time.sleep(0.5 if _first[0] else 0.01)
    _first[0] = False
    return _to_csv(self, *a, **k)
pd.DataFrame.to_csv = _slow
root, k, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))  # all writers begin together, on a missing file
for i in range(25):
    meta = results.run_metadata(body="simple", nworld=1024, seed=k, params={"i": i}, device="cpu")
    m = dict(time_to_solve_s=1.0, iterations=i, compile_s=0.0, env_steps_per_s=1.0,
             physics_steps_per_s=1.0, rollout_s_per_iter=0.1, update_s_per_iter=0.1, solved=True,
             final_amplitude=1.0, fall_rate=0.0, mean_episode_s=10.0, overflow_count=0, nan_resets=0,
             host_reads_per_iter=1.0, graph_fallbacks=0, tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None, **dict.fromkeys(results.REFERENCE_COLUMNS))
    results.append_row("train", {**meta, **m}, root)
"""


def test_append_row_from_parallel_processes_keeps_every_row(tmp_path):
    """Jobs on several GPUs publish into the same CSV at once: one header, every row whole."""
    import sys

    import time

    start = str(time.time() + 8.0)  # after every interpreter has imported fightlab
    procs = [subprocess.Popen([sys.executable, "-c", _APPEND_MANY, str(tmp_path), str(k), start])
             for k in range(4)]
    assert [p.wait(120) for p in procs] == [0] * 4
    df = results.read_rows("train", tmp_path)
    assert len(df) == 4 * 25 and df["run_id"].is_unique
    assert sorted(df.groupby("seed").size()) == [25] * 4
    text = results.results_path("train", tmp_path).read_text()
    assert text.count("run_id,") == 1  # one header line


def test_packing_recorded_when_the_launcher_says(monkeypatch):
    for names in results.PACKING_ENV.values():
        for n in names:
            monkeypatch.delenv(n, raising=False)
    meta = results.run_metadata(body="simple", nworld=8, seed=0, params={"a": 1}, device="cpu")
    assert json.loads(meta["params"]) == {"a": 1}  # started by hand: nothing claimed
    monkeypatch.setenv("FIGHTLAB_HOST_JOBS", "2")  # the older name still read
    meta = results.run_metadata(body="simple", nworld=8, seed=0, params={"a": 1}, device="cpu")
    assert json.loads(meta["params"]) == {"a": 1, "gpu_jobs": 2, "concurrent": 1, "mps": False}
    monkeypatch.setenv("FIGHTLAB_CONCURRENT", "4")
    monkeypatch.setenv("FIGHTLAB_MPS", "1")
    monkeypatch.setenv("FIGHTLAB_GPU_JOBS", "8")  # the new name wins over the old
    meta = results.run_metadata(body="simple", nworld=8, seed=0, params={"gpu_jobs": 1}, device="cpu")
    assert json.loads(meta["params"]) == {"gpu_jobs": 1, "concurrent": 4, "mps": True}  # the caller's own value wins


def test_packing_of_old_rows():
    assert results.packing_of({"shared_gpu": 3, "host_jobs": 2}) == dict(concurrent=3, mps=False, gpu_jobs=2)
    assert results.packing_of({}) == dict(concurrent=1, mps=False, gpu_jobs=1)
    assert results.packing_of({"concurrent": 8, "mps": True, "shared_gpu": 2}) == dict(
        concurrent=8, mps=True, gpu_jobs=1)
    nan = results.packing_of({}, default_concurrent=float("nan"))["concurrent"]
    assert nan != nan


def test_a_file_of_an_older_schema_reads_and_gains_the_new_columns(tmp_path):
    """Columns are only added at the end: a file whose header is the schema's first columns
    reads (new columns NaN) and, at the next write, is rewritten under the full header."""
    results.append_row("train", _row(), tmp_path)
    path = results.results_path("train", tmp_path)
    n = 5 + len(results.REFERENCE_COLUMNS)  # the file as it was before these columns
    path.write_text("\n".join(ln.rsplit(",", n)[0] for ln in path.read_text().splitlines()) + "\n")
    old = results.read_rows("train", tmp_path)
    assert len(old) == 1 and old["graph_fallbacks"].isna().all() and old["tracking_survived"].isna().all() and old["nan_resets"].item() == 0
    results.append_row("train", _row(), tmp_path)
    assert path.read_text().splitlines()[0] == ",".join(results.columns("train"))
    df = results.read_rows("train", tmp_path)
    assert len(df) == 2 and df["graph_fallbacks"].isna().tolist() == [True, False]
    # a row from before peak_gpu_mem_mib keeps an empty cell; the new row has its number
    assert df["peak_gpu_mem_mib"].isna().tolist() == [True, False] and df["peak_gpu_mem_mib"].iloc[1] == 5120.5


def test_peak_gpu_mem_is_warps_pool_high_water_mark_plus_torchs_reserved_peak(monkeypatch):
    """train rows' peak_gpu_mem_mib: empty on the CPU device; on CUDA warp's memory-pool
    high-water mark plus torch's max_memory_reserved, in MiB; empty where warp's pool is off."""
    import torch
    import warp as wp

    from fightlab.measure.report import peak_gpu_mem_mib

    assert math.isnan(peak_gpu_mem_mib("cpu"))
    monkeypatch.setattr(wp, "is_mempool_enabled", lambda d: d == "cuda:0")
    monkeypatch.setattr(wp, "get_mempool_used_mem_high", lambda d: 3 * 2**20)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: 2**19)
    assert peak_gpu_mem_mib("cuda:0") == 3.5
    assert math.isnan(peak_gpu_mem_mib("cuda:1"))


def test_a_byte_that_is_not_utf8_names_the_file_and_line(tmp_path):
    """Reading or appending to a results file with a non-UTF-8 byte: MalformedRowError naming the
    file, line and byte (never UnicodeDecodeError); a header line's byte too."""
    results.append_row("train", _row(run_id="aaa111"), tmp_path)
    results.append_row("train", _row(run_id="bbb222"), tmp_path)
    path = results.results_path("train", tmp_path)
    data = path.read_bytes()
    third = data.index(b"bbb222")  # line 3
    path.write_bytes(data[:third + 3] + b"\xe9" + data[third + 4:])
    with pytest.raises(results.MalformedRowError, match=rf"{path}:3: byte 0xe9 at offset {third + 3} is not UTF-8"):
        results.read_rows("train", tmp_path)
    with pytest.raises(results.MalformedRowError, match=rf"{path}:3: byte 0xe9"):
        results.append_row("train", _row(run_id="ccc333"), tmp_path)
    path.write_bytes(b"\xff" + data)
    with pytest.raises(results.MalformedRowError, match=rf"{path}:1: byte 0xff at offset 0"):
        results.read_rows("train", tmp_path)


def test_read_text_is_the_one_utf8_read_of_a_data_file(tmp_path):
    """results.read_text (the survey's reference table reads through it too): the text, or one
    MalformedRowError naming file, line and byte."""
    from fightlab.survey import cost

    p = tmp_path / "t.csv"
    p.write_bytes("a,b\n1,é\n".encode())
    assert results.read_text(p) == "a,b\n1,é\n"
    p.write_bytes(b"a,b\n1,2\n3,\xe9\n")
    with pytest.raises(results.MalformedRowError, match=rf"{p}:3: byte 0xe9 at offset 10 is not UTF-8"):
        results.read_text(p)
    with pytest.raises(results.MalformedRowError, match=rf"{p}:3: byte 0xe9"):
        cost.read_reference(p)


@pytest.mark.parametrize("key,value,kind", [("env", 3, "object"), ("ppo", "x", "object"),
                                            ("physics_engine", [1], "object"), ("segments", {"a": 1}, "array"),
                                            ("segments", [{}, "x"], "array of objects"),
                                            ("learner", [1], "string or null")])
def test_a_params_section_of_another_type_is_refused_with_its_line(tmp_path, key, value, kind):
    """A row whose params hold a section (env, ppo, …) as another JSON type is refused on reading,
    with file, line and key named, so no reader indexes into a text or a number."""
    results.append_row("train", _row(), tmp_path)
    results.append_row("train", _row(params=json.dumps({key: value, "lr": 3e-4})), tmp_path)
    path = results.results_path("train", tmp_path)
    with pytest.raises(results.MalformedRowError, match=rf"{path}:3: params\['{key}'\] is .* not a JSON {kind}"):
        results.read_rows("train", tmp_path)
    good = {"env": {}, "ppo": {}, "physics_engine": {}, "segments": [{}], "learner": None}[key]
    results.append_row("train", _row(params=json.dumps({key: good})), tmp_path / "ok")
    assert len(results.read_rows("train", tmp_path / "ok")) == 1
