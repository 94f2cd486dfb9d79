"""The main job's own measurements: a row per notebook, the figure comparison, the GPU sampler."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from fightlab import hosts, results
from fightlab import reproduce as rep
from fightlab.config import ConfigError


def _figure_notebook(folder: Path, runs: Path) -> Path:
    """98_fig.ipynb: draws one figure named like a committed one and one that is not committed."""
    meta = json.loads(rep.notebooks()["06"].read_text())["metadata"]
    src = (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "from fightlab.figures.style import savefig\n"
        f"root = {str(runs / 'fig' / 'nb98')!r}\n"
        "fig, ax = plt.subplots(); ax.plot([0, 1], [0, 1])\n"
        "savefig(fig, 'train_curves', root=root)\n"
        "savefig(fig, 'not_a_committed_figure', root=root)\n"
    )
    cells = [dict(cell_type="markdown", id="m", metadata={}, source="# fig"),
             dict(cell_type="code", id="p", metadata={"tags": ["parameters"]}, execution_count=None,
                  outputs=[], source="size = 'full'\ndevice = 'cpu'\npublish = False"),
             dict(cell_type="code", id="c", metadata={}, execution_count=None, outputs=[], source=src)]
    path = folder / "98_fig.ipynb"
    path.write_text(json.dumps(dict(cells=cells, metadata=meta, nbformat=4, nbformat_minor=5)))
    return path


def test_reproduce_writes_a_row_per_notebook_and_compares_its_figures(tmp_path, monkeypatch, capsys):
    nbdir, runs, out = tmp_path / "notebooks", tmp_path / "runs", tmp_path / "runs" / "notebooks"
    nbdir.mkdir()
    _figure_notebook(nbdir, runs)
    monkeypatch.setattr(rep, "NOTEBOOK_DIR", nbdir)
    monkeypatch.setattr(rep.paths, "RUNS", runs)
    assert rep.reproduce(only=["98"], size="smoke", device="cpu", out_dir=out) == 0
    printed = capsys.readouterr().out
    rows = results.read_rows("reproduce", out)
    assert len(rows) == 1
    row = rows.iloc[0]
    params = json.loads(row["params"])
    assert params["notebook"] == "98_fig" and params["size"] == "smoke" and params["job"]
    assert row["ok"] == 1 and row["wall_s"] > 0
    assert pd_isna(row["gpu_mem_peak_mib"])  # no GPU here
    assert row["figures_drawn"] == 2 and row["figures_differ"] == 1  # a line plot is not the committed one
    drawn = runs / "fig" / "nb98" / "figures"
    # at smoke size: said once, first, then the counts; no line per figure
    assert "differs from the committed figure" not in printed
    assert printed.index("at smoke size the measured figures differ") < printed.index("figure files (PNG and SVG)")
    assert printed.count("at smoke size") == 1
    side = out / "compare" / "train_curves.png"
    assert side.is_file() and f"side by side in {out / 'compare'}; one line per figure: rerun with --log-output (runs the notebooks again)" in printed
    from PIL import Image

    committed = Image.open(rep.REPO_ROOT / "figures" / "train_curves.png")
    assert Image.open(side).width > committed.width  # the two, side by side
    assert "1 notebook(s) in" in printed
    assert ("figure files (PNG and SVG): 0 the same as the committed ones, 2 differ, 2 have no committed twin, 0 could not "
            "be compared; side by side in") in printed
    # at full size, or with log_output (the verbose flag), one line per figure
    figs = rep.drawn_figures(0, runs=runs, exclude=out)
    verdicts = dict(zip(figs, rep.figure_verdicts(figs, tmp_path / "cmp")))
    for size, verbose in (("full", False), ("smoke", True)):
        rep.report_figures(verdicts, size, tmp_path / "cmp", verbose=verbose)
        lines = capsys.readouterr().out
        assert f"{drawn / 'train_curves.png'}: differs from the committed figure figures/train_curves.png" in lines
        assert f"{drawn / 'not_a_committed_figure.png'}: no committed figure of this name" in lines
        assert f"side by side: {tmp_path / 'cmp' / 'train_curves.png'}" in lines
        assert ("at smoke size" in lines) == (size == "smoke") and "--log-output" not in lines
    # the repository's data/ is untouched without publish_times
    assert not (rep.REPO_ROOT / "data" / "results" / "reproduce.csv").exists() or \
        "98_fig" not in (rep.REPO_ROOT / "data" / "results" / "reproduce.csv").read_text()


def pd_isna(v) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


def test_compare_figures_same_bytes(tmp_path):
    committed = tmp_path / "figures"
    committed.mkdir()
    (committed / "a.png").write_bytes(b"\x89PNG same")
    (committed / "b.svg").write_text("<svg>old</svg>")
    new = tmp_path / "runs" / "x" / "figures"
    new.mkdir(parents=True)
    (new / "a.png").write_bytes(b"\x89PNG same")
    (new / "b.svg").write_text("<svg>new</svg>")
    lines = rep.compare_figures([new / "a.png", new / "b.svg"], tmp_path / "cmp", committed)
    assert lines == [f"{new / 'a.png'}: same as the committed figure figures/a.png",
                     f"{new / 'b.svg'}: differs from the committed figure figures/b.svg"]
    assert not (tmp_path / "cmp").exists()  # nothing to show side by side


def test_drawn_figures_only_new_and_not_excluded(tmp_path):
    old = tmp_path / "a" / "figures" / "old.png"
    new = tmp_path / "b" / "figures" / "new.svg"
    skip = tmp_path / "notebooks" / "compare" / "figures" / "x.png"
    for p in (old, new, skip):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    past = time.time() - 3600
    os.utime(old, (past, past))
    since = time.time() - 60
    assert rep.drawn_figures(since, tmp_path, exclude=tmp_path / "notebooks") == [new]


def test_publish_times_follows_the_publish_rule():
    from fightlab.publish import refuse_publish

    with pytest.raises(ConfigError, match="device 'cpu' is not a GPU"):
        refuse_publish(rep.publish_plans(["07"], "full", False, "cpu", publish_times=True))
    with pytest.raises(ConfigError, match="size 'smoke' is not 'full'"):
        refuse_publish(rep.publish_plans(["07"], "smoke", False, "cuda:0", publish_times=True))


def test_gpu_memory_peak_reads_the_largest_sample(tmp_path, monkeypatch):
    # a stand-in nvidia-smi printing a rising then falling memory use, one value per call
    counter = tmp_path / "n"
    counter.write_text("0")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nn=$(cat %s); echo $((n + 1)) > %s\n"
                   "case $n in 0) echo 100;; 1) echo 700;; *) echo 300;; esac\n" % (counter, counter))
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with hosts.GpuMemoryPeak(0, interval_s=0.05) as mem:
        time.sleep(0.4)
    assert mem.peak_mib == 700.0
    with hosts.GpuMemoryPeak(None) as none:  # not a GPU: nothing sampled
        pass
    assert none.peak_mib is None


def _row(notebook, wall, gpu="NVIDIA H200", size="full", ok=True, job="j1", when="2026-12-02T10:00:00+00:00",
         mem=1000.0):
    meta = results.run_metadata(body="none", nworld=1, seed=0, device="cpu",
                                params=dict(notebook=notebook, size=size, publish=False, job=job, extra={}))
    meta.update(gpu=gpu, driver="580.1" if gpu != "cpu" else "", time=when)
    return {**meta, "wall_s": wall, "ok": ok, "gpu_mem_peak_mib": mem, "figures_drawn": 1, "figures_differ": 1}


def test_job_times_takes_the_newest_full_gpu_row_per_notebook(tmp_path):
    for r in (_row("00_gpu_primer", 30.0, when="2026-12-02T10:00:00+00:00"),
              _row("00_gpu_primer", 40.0, job="j2", when="2026-12-02T11:00:00+00:00", mem=3000.0),  # newer
              _row("06_train", 100.0, mem=2000.0),
              _row("06_train", 999.0, ok=False, when="2026-12-02T12:00:00+00:00"),   # failed: not counted
              _row("04_world_sweep", 999.0, size="smoke"),                           # not full size
              _row("04_world_sweep", 999.0, gpu="cpu", mem=None)):                  # not a GPU
        results.append_row("reproduce", r, tmp_path)
    t = rep.job_times(tmp_path)
    assert list(t["notebook"]) == ["00_gpu_primer", "06_train", "total"]
    assert list(t["wall_s"]) == [40.0, 100.0, 140.0]
    total = t.iloc[-1]
    assert total["gpu_mem_peak_mib"] == 3000.0 and total["job"] == "j2, j1"
    assert rep.job_times(tmp_path, gpu="NVIDIA A100").empty
    assert rep.job_times(tmp_path / "none").empty


def test_job_times_leaves_out_rows_that_are_not_the_main_jobs(tmp_path):
    good = _row("00_gpu_primer", 10.0)
    odd = [_row("06_train", 1.0), _row("07_survey", 1.0), _row("05_cuda_graphs", 1.0)]
    odd[0]["params"] = json.dumps(dict(size="full", job="j1"))                      # no notebook
    odd[1]["params"] = json.dumps(dict(notebook=5, size="full", job=["a"]))         # other types
    odd[2]["time"] = "not a time"
    for r in [good, *odd]:
        results.append_row("reproduce", r, tmp_path) if r is good else _append_raw(tmp_path, r)
    t = rep.job_times(tmp_path)
    assert list(t["notebook"]) == ["00_gpu_primer", "total"]
    assert t.iloc[-1]["notebooks"] == 1 and t.iloc[-1]["wall_s"] == 10.0  # a partial job, said


def _append_raw(root, row):
    """Append a row as a hand edit would (validate_row refuses a bad time)."""
    import csv

    path = results.results_path("reproduce", root)
    with open(path, "a", newline="") as f:
        csv.writer(f).writerow([row[c] for c in results.columns("reproduce")])


def test_a_second_job_on_the_same_runs_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(rep.paths, "RUNS", tmp_path / "runs")
    with rep.one_job(tmp_path / "runs"):
        with pytest.raises(ConfigError, match=r"another main job \(pid [0-9]+\) is running on the runs folder"):
            with rep.one_job(tmp_path / "runs"):
                pass
    with rep.one_job(tmp_path / "runs"):  # free again once the first ends
        pass


def test_figures_dated_in_the_future_were_not_drawn_by_this_job(tmp_path):
    future = tmp_path / "a" / "figures" / "future.png"
    future.parent.mkdir(parents=True)
    future.write_bytes(b"x")
    later = time.time() + 86400
    os.utime(future, (later, later))
    assert rep.drawn_figures(time.time() - 60, tmp_path) == []


def test_a_damaged_image_is_one_line_and_the_others_are_still_compared(tmp_path):
    committed = tmp_path / "figures"
    committed.mkdir()
    good = (rep.REPO_ROOT / "figures" / "train_curves.png").read_bytes()
    (committed / "a.png").write_bytes(good)
    (committed / "b.png").write_bytes(good)
    new = tmp_path / "runs" / "x" / "figures"
    new.mkdir(parents=True)
    (new / "a.png").write_bytes(good[:5000])  # torn
    (new / "b.png").write_bytes(good)
    lines = rep.compare_figures([new / "a.png", new / "b.png"], tmp_path / "cmp", committed)
    assert lines[0].startswith(f"{new / 'a.png'}: could not be compared with figures/a.png (")
    assert lines[1] == f"{new / 'b.png'}: same as the committed figure figures/b.png"


def test_a_torn_row_file_is_said_before_the_first_notebook(tmp_path, monkeypatch):
    nbdir, runs, out = tmp_path / "notebooks", tmp_path / "runs", tmp_path / "runs" / "notebooks"
    nbdir.mkdir()
    _figure_notebook(nbdir, runs)
    monkeypatch.setattr(rep, "NOTEBOOK_DIR", nbdir)
    monkeypatch.setattr(rep.paths, "RUNS", runs)
    path = results.results_path("reproduce", out)
    path.parent.mkdir(parents=True)
    path.write_text(",".join(results.columns("reproduce")) + "\ntorn,abc\n")
    with pytest.raises(results.MalformedRowError, match="reproduce.csv:2"):
        rep.reproduce(only=["98"], size="smoke", device="cpu", out_dir=out)
    assert not (out / "98_fig-smoke.ipynb").exists()  # nothing ran


def test_visible_gpu_follows_cuda_visible_devices():
    assert hosts.visible_gpu(0, {}) == "0"
    assert hosts.visible_gpu(1, {"CUDA_VISIBLE_DEVICES": "3,5"}) == "5"
    assert hosts.visible_gpu(0, {"CUDA_VISIBLE_DEVICES": "GPU-abc"}) == "GPU-abc"
    assert hosts.visible_gpu(2, {"CUDA_VISIBLE_DEVICES": "3,5"}) is None
    assert hosts.visible_gpu(None, {}) is None
