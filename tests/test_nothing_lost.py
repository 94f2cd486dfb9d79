"""Nothing lost: run folders, one writer, resume that keeps its settings, one row per run,
sound CSVs and checkpoints. CPU device, tiny sizes."""

import hashlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

from fightlab import results
from fightlab.paths import REPO_ROOT
from fightlab.cli import main
from fightlab.config import ConfigError
from fightlab.publish import check_publish
from fightlab.run.checkpoint import safe_load
from fightlab.rundir import LOCK, MANIFEST, RunDir, RunDirError, check_location

TINY = ["--device", "cpu", "--nworld", "2", "--no-progress", "--set", "ppo.num_steps=4",
        "--set", "ppo.num_minibatches=1", "--set", "ppo.update_epochs=1"]


def _tree_digest(root):
    """{relative path: sha1} of every file under root."""
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------
# 1. a fresh run deletes only what fightlab wrote; protected places are refused

@pytest.mark.parametrize("where", ["repo", "dot", "dotdot", "home", "git", "results_root"])
def test_protected_places_are_refused(where, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    path = {"repo": REPO_ROOT, "dot": ".", "dotdot": "..", "home": os.path.expanduser("~")}.get(where)
    if where == "git":
        (tmp_path / ".git").mkdir()
        path = tmp_path
    if where == "results_root":
        (tmp_path / "data" / "results").mkdir(parents=True)
        path = tmp_path
    with pytest.raises(RunDirError, match="refused"):
        check_location(path)


def test_train_into_a_results_root_deletes_nothing(tmp_path, capsys):
    """The repository-root case of the review, on a copy: a folder holding data/ (results,
    curves) that fightlab did not make is refused before anything is written or removed."""
    (tmp_path / "data" / "results").mkdir(parents=True)
    (tmp_path / "data" / "results" / "train.csv").write_text("run_id\nabc\n")
    (tmp_path / "data" / "curves").mkdir()
    (tmp_path / "data" / "curves" / "abc.csv").write_text("iteration\n1\n")
    before = _tree_digest(tmp_path)
    assert main(["train", "--run-dir", str(tmp_path), "--max-iterations", "1", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: run folder") and "refused" in err
    assert _tree_digest(tmp_path) == before


def test_a_foreign_non_empty_folder_is_refused_and_kept(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["train", "--run-dir", str(tmp_path), "--max-iterations", "1", *TINY]) == 2
    assert "was not made by fightlab" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_fresh_run_removes_only_its_manifests_files(tmp_path):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    listed = json.loads((d / MANIFEST).read_text())["files"]
    assert {"rows.csv", "latest.pt", "ckpt_000001.pt", "data/results/train.csv"} <= set(listed)
    assert any(f.startswith("data/curves/") for f in listed)
    (d / "notes.txt").write_text("the user's own file")
    (d / "data" / "mine.txt").write_text("also the user's")
    old_id = results.read_rows("train", d)["run_id"].item()  # ids as text (an all-digit id too)
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    assert (d / "notes.txt").read_text() == "the user's own file"
    assert (d / "data" / "mine.txt").read_text() == "also the user's"
    new = results.read_rows("train", d)
    assert len(new) == 1 and new["run_id"].item() != old_id
    assert not results.curve_path(old_id, d).exists()


# ---------------------------------------------------------------------------------------------
# 2. what may publish: one rule, applied to the repository's data/ whatever the caller

def test_publish_rule_refuses_cpu_and_smoke():
    check_publish(True, "cuda:0", "rows")
    check_publish(False, "cpu", "rows")
    with pytest.raises(ConfigError, match="device 'cpu' is not a GPU"):
        check_publish(True, "cpu", "rows")
    with pytest.raises(ConfigError, match="size 'smoke' is not 'full'"):
        check_publish(True, "cuda:0", "rows", size="smoke")


def test_a_cpu_row_never_reaches_the_repositorys_data():
    name = "zz_test_guard"
    results.register_experiment(name, ("x_s",))
    path = results.results_path(name, REPO_ROOT)
    assert not path.exists()
    try:
        row = results.run_metadata(body="simple", nworld=2, seed=0, params={}, device="cpu")
        with pytest.raises(ConfigError, match="not a GPU"):
            results.append_row(name, {**row, "x_s": 1.0}, REPO_ROOT)
        row["gpu"] = "NVIDIA H200"  # a GPU row at a smoke size is refused too
        row["params"] = json.dumps({"size": "smoke"})
        with pytest.raises(ConfigError, match="size 'smoke'"):
            results.append_row(name, {**row, "x_s": 1.0}, REPO_ROOT)
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)
        results.EXPERIMENTS.pop(name, None)


# ---------------------------------------------------------------------------------------------
# 3. one writer per run folder; a stale lock of a killed process is taken over

_HOLD = """
import sys, time
from fightlab.rundir import RunDir
rd = RunDir(sys.argv[1], fresh=True)
print("ready", flush=True)
time.sleep(600)
"""


def test_second_writer_is_refused_and_a_killed_holder_leaves_a_stale_lock(tmp_path, capsys):
    d = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 2
        err = capsys.readouterr().err
        assert f"in use by another fightlab process (pid {holder.pid})" in err
        with pytest.raises(RunDirError, match=f"pid {holder.pid}"):
            RunDir(d, fresh=False)
    finally:
        holder.send_signal(signal.SIGKILL)  # kill -9: no clean-up ran
        holder.wait(30)
    assert (d / LOCK).read_text().strip() == str(holder.pid)
    rd = RunDir(d, fresh=True)
    assert rd.stale_pid == holder.pid
    assert f"stale lock of pid {holder.pid}" in capsys.readouterr().out
    rd.release()
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0


def test_one_process_two_trainers_same_folder(tmp_path):
    from fightlab.config import PPOConfig, TrainConfig
    from fightlab.run.runner import Trainer

    cfg = TrainConfig(body="simple", nworld=2, device="cpu", max_iterations=1, run_dir=str(tmp_path / "r"),
                      ppo=PPOConfig(num_steps=4, num_minibatches=1, update_epochs=1))
    with Trainer(cfg, progress=False) as a:
        with pytest.raises(RunDirError, match="in use by this process"):
            Trainer(cfg, progress=False)
        a.train()
    with pytest.raises(ConfigError, match="closed"):
        a.train()
    Trainer(cfg, progress=False).close()  # free again


_REPLACE_MANY = """
import sys, time
from fightlab import results
root, k, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
for i in range(20):
    meta = results.run_metadata(body="simple", nworld=2, seed=k, params={"i": i}, device="cpu")
    meta["run_id"] = f"shared{i % 5}"          # five runs that every writer keeps replacing
    m = dict(time_to_solve_s=float(i), iterations=i, compile_s=0.0, env_steps_per_s=1.0,
             physics_steps_per_s=1.0, rollout_s_per_iter=0.1, update_s_per_iter=0.1, solved=True,
             final_amplitude=1.0, fall_rate=0.0, mean_episode_s=10.0, overflow_count=0, nan_resets=0,
             host_reads_per_iter=1.0, graph_fallbacks=0, tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None, **dict.fromkeys(results.REFERENCE_COLUMNS))
    results.append_row("train", {**meta, **m}, root)
    meta["run_id"] = f"own{k}x{i}"             # and one new run each time
    results.append_row("train", {**meta, **m}, root)
"""


def test_replacements_from_parallel_processes_keep_one_row_per_run(tmp_path):
    start = str(time.time() + 8.0)
    procs = [subprocess.Popen([sys.executable, "-c", _REPLACE_MANY, str(tmp_path), str(k), start])
             for k in range(4)]
    assert [p.wait(180) for p in procs] == [0] * 4
    df = results.read_rows("train", tmp_path)
    assert df["run_id"].is_unique
    assert sorted(df["run_id"]) == sorted([f"shared{j}" for j in range(5)]
                                          + [f"own{k}x{i}" for k in range(4) for i in range(20)])


# ---------------------------------------------------------------------------------------------
# 5 and 6. a resumed run keeps its settings; one row per run_id

def test_resume_keeps_every_setting_and_records_segments(tmp_path, capsys):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", "--checkpoint-every", "5",
                 "--no-graph", *TINY]) == 0
    ck = str(d / "latest.pt")
    assert main(["train", "--resume", ck, "--checkpoint-every", "50", "--device", "cpu"]) == 2
    assert "--checkpoint-every 50 conflicts with the checkpoint (5)" in capsys.readouterr().err
    assert main(["train", "--resume", ck, "--run-dir", str(tmp_path / "elsewhere"), "--device", "cpu"]) == 2
    assert "--run-dir" in capsys.readouterr().err and not (tmp_path / "elsewhere").exists()
    # resumed without those flags: the checkpoint's checkpoint_every and graph=False stay
    assert main(["train", "--resume", ck, "--max-iterations", "2", "--device", "cpu", "--no-progress"]) == 0
    saved = torch.load(d / "latest.pt", weights_only=False)
    assert saved["config"]["checkpoint_every"] == 5 and saved["config"]["graph"] is False
    # --no-graph turned every graph off, and they stay off
    assert saved["config"]["policy_graph"] is False and saved["config"]["update_graph"] is False
    assert [s["max_iterations"] for s in saved["segments"]] == [1, 2]
    assert [s["device"] for s in saved["segments"]] == ["cpu", "cpu"]
    # the finished, unsolved run resumed once more: still one row for its run_id, the latest
    assert main(["train", "--resume", ck, "--max-iterations", "3", "--device", "cpu", "--no-progress"]) == 0
    rows = results.read_rows("train", d)  # the reader that keeps ids as text (an all-digit id too)
    assert len(rows) == 1 and rows["iterations"].item() == 3
    assert rows["run_id"].item() == saved["run_id"]
    curve = pd.read_csv(d / "data" / "curves" / f"{saved['run_id']}.csv.gz")
    assert curve["iteration"].tolist() == [1, 2, 3]


def _train_row(run_id, iterations):
    meta = results.run_metadata(body="simple", nworld=2, seed=0, params={}, device="cpu")
    meta["run_id"] = run_id
    return {**meta, **dict(time_to_solve_s=None, iterations=iterations, compile_s=0.1,
                           env_steps_per_s=1.0, physics_steps_per_s=5.0, rollout_s_per_iter=0.1,
                           update_s_per_iter=0.1, solved=False, final_amplitude=0.1, fall_rate=0.0,
                           mean_episode_s=1.0, overflow_count=0, nan_resets=0,
                           host_reads_per_iter=1.0, graph_fallbacks=0, tracking=0.9, tracking_survived=0.9, peak_gpu_mem_mib=None, **dict.fromkeys(results.REFERENCE_COLUMNS))}


def test_publishing_a_run_twice_keeps_one_row(tmp_path):
    results.append_row("train", _train_row("aaa", 1), tmp_path)
    results.append_row("train", _train_row("bbb", 1), tmp_path)
    results.append_row("train", _train_row("aaa", 7), tmp_path)
    df = results.read_rows("train", tmp_path)
    assert df["run_id"].tolist() == ["aaa", "bbb"]  # replaced where it stood
    assert df["iterations"].tolist() == [7, 1]


# ---------------------------------------------------------------------------------------------
# 7. torn and unterminated CSVs

def test_missing_final_newline_is_repaired(tmp_path):
    path = results.append_row("train", _train_row("aaa", 1), tmp_path)
    path.write_text(path.read_text().rstrip("\n"))  # a whole row, no final newline
    results.append_row("train", _train_row("bbb", 2), tmp_path)
    assert results.read_rows("train", tmp_path)["run_id"].tolist() == ["aaa", "bbb"]


def test_a_torn_last_line_is_refused_naming_file_and_line(tmp_path):
    path = results.append_row("train", _train_row("aaa", 1), tmp_path)
    results.append_row("train", _train_row("bbb", 2), tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # the last row cut short
    with pytest.raises(results.MalformedRowError, match=rf"{path}:3: malformed row"):
        results.read_rows("train", tmp_path)
    with pytest.raises(results.MalformedRowError, match=rf"{path}:3"):
        results.append_row("train", _train_row("ccc", 3), tmp_path)
    assert path.read_text() == text[: len(text) - 40]  # nothing appended past it


# ---------------------------------------------------------------------------------------------
# hand-edited checkpoints: a one-line error before anything is built

@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("ck") / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    return d / "latest.pt"


@pytest.mark.parametrize("edit, expect", [
    (lambda ck: ck.update(curriculum=None), "curriculum must be a dict"),
    (lambda ck: ck.update(config="junk"), "config must be a dict"),
    (lambda ck: ck.pop("env_state"), "env_state must be a dict of numeric numpy arrays"),
    (lambda ck: ck["env_state"].update(qpos=ck["env_state"]["qpos"].astype(str)), "numeric numpy arrays"),
    (lambda ck: ck["env_state"].pop("qpos"), "env state 'qpos' has shape None"),
    (lambda ck: ck["config"].update(curriculum_stages="abc"), "curriculum_stages must rise"),
    (lambda ck: ck["config"].update(graph="no"), "graph must be true or false"),
    (lambda ck: ck["config"].pop("body"), "stored config lacks ['body']"),
    (lambda ck: ck.update(torch_rng=torch.zeros(3)), "torch_rng must be a torch RNG state"),
    (lambda ck: ck.update(optimizer={"param_groups": "x"}), "optimizer must be a torch optimizer state"),
    (lambda ck: next(iter(ck["agent"].values())).fill_(float("nan")), "agent weights are not all finite"),
    (lambda ck: ck.update(amp_target=1e9), "amp_target must be a number in [0, 1]"),
    (lambda ck: ck.pop("run_id"), "run_id must be letters and digits"),
    (lambda ck: ck.update(segments=[{"shared_gpu": "x"}]), "segments' shared_gpu must be an integer"),
    (lambda ck: ck["history"].pop(), "history must hold the rows of iterations 1..1"),
    (lambda ck: ck.update(iteration="x"), "iteration must be an integer >= 0, got 'x'"),
    (lambda ck: ck["curriculum"].update(stage=99), "curriculum stage 99 is beyond"),
    (lambda ck: ck["config"].update(nworld=-3), "nworld must be a positive integer"),
    (lambda ck: ck.update(elapsed_s=float("nan")), "elapsed_s must be a number >= 0"),
])
def test_hand_edited_checkpoints_are_one_line_errors(tiny_ckpt, tmp_path, edit, expect, capsys):
    ck = safe_load(tiny_ckpt)  # env_state as numpy arrays: saved back as an older fightlab wrote it
    edit(ck)
    p = tmp_path / "copy" / "ckpt_000001.pt"  # a copied checkpoint in a folder of its own
    p.parent.mkdir()
    torch.save(ck, p)
    argvs = [["evaluate", str(p), "--nworld", "2", "--device", "cpu"],
             ["train", "--resume", str(p), "--max-iterations", "5", "--device", "cpu"]]
    if "env state" in expect:  # only a resume restores the simulation state
        argvs = argvs[1:]
    for argv in argvs:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("fightlab: error: checkpoint") and expect in err, err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_kill_9_mid_training_then_resume_keeps_whole_rows_in_order(tmp_path):
    d = tmp_path / "run"
    cmd = [sys.executable, "-m", "fightlab", "train", "--run-dir", str(d), "--max-iterations", "500",
           "--checkpoint-every", "2", *TINY]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def past_4():  # a checkpoint at iteration 4 or later (retention drops the older ones)
            return any(int(q.stem[5:]) >= 4 for q in d.glob("ckpt_*.pt") if q.stem[5:].isdigit())

        deadline = time.time() + 480  # a loaded 2-core machine compiles and starts slowly
        while time.time() < deadline and not past_4():
            time.sleep(0.2)
        assert past_4(), "training did not reach iteration 4"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    with open(d / "rows.csv", "a") as f:
        f.write("1")  # a torn line that reads as iteration 1
    ck = torch.load(d / "latest.pt", weights_only=False)
    n = ck["iteration"]
    assert main(["train", "--resume", str(d / "latest.pt"), "--max-iterations", str(n + 1),
                 "--device", "cpu", "--no-progress"]) == 0
    rows = pd.read_csv(d / "rows.csv")
    assert rows["iteration"].tolist() == list(range(1, n + 2))
    assert results.read_rows("train", d)["run_id"].tolist() == [ck["run_id"]]



def test_later_checkpoints_by_iteration_past_six_digits(tmp_path):
    from fightlab.run.checkpoint import later_checkpoints

    for name in ("ckpt_000005.pt", "ckpt_999999.pt", "ckpt_1000000.pt", "ckpt_12.pt", "ckpt_000007.tmp"):
        (tmp_path / name).write_bytes(b"x")
    assert later_checkpoints(tmp_path, 5) == ["ckpt_999999.pt", "ckpt_1000000.pt"]
    assert later_checkpoints(tmp_path / "absent", 0) == []


def test_fork_rule_on_rows_either_order(tmp_path, capsys):
    """`report.fork_if_diverged` on rows: a fork that published first makes the original (a
    fresh run) the renamed one; the split point is where the two parted, not the last segment's
    start; a row that is an earlier state of the run (a prefix, ended where it went on) keeps it."""
    import types

    from fightlab.measure.report import fork_if_diverged

    s0 = dict(segment_id="a", start_iteration=0)
    fork = [s0, dict(segment_id="f", start_iteration=2)]

    def root_with(name, segments, iterations):
        r = tmp_path / name
        row = _train_row("run0", iterations)
        row["params"] = json.dumps({"segments": segments})
        results.append_row("train", row, r)
        return r

    def run(segments):
        return types.SimpleNamespace(run_id="run0", segments=segments, run_dir=tmp_path / "none", forked_from=None)

    published_fork = root_with("a", fork, 3)
    original = run([s0])  # the fresh original, finishing after the fork published
    assert fork_if_diverged(original, [published_fork]) == "run0" and original.forked_from == "run0@2"
    # the fork extended unpublished (a third segment from 3) against the original's row at 10
    extended = run(fork + [dict(segment_id="g", start_iteration=3)])
    assert fork_if_diverged(extended, [root_with("b", [s0], 10)]) == "run0" and extended.forked_from == "run0@2"
    # its own earlier state: kept
    same = run(fork + [dict(segment_id="g", start_iteration=3)])
    assert fork_if_diverged(same, [root_with("c", fork, 3)]) is None and same.run_id == "run0"
    assert "forked_from run0@2" in capsys.readouterr().out


def test_a_finished_run_without_its_row_writes_it_on_resume(tmp_path, capsys):
    """A run stopped on its last iteration before its row was written (a signal or a segment's
    end there, a kill): resuming its checkpoint writes the row with no training; with the row
    there, the resume is refused as finished."""
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "2", *TINY]) == 0
    row = results.read_rows("train", d).iloc[0]
    results.results_path("train", d).unlink()
    capsys.readouterr()
    assert main(["train", "--resume", str(d / "latest.pt"), "--device", "cpu", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "finished at iteration 2 without its row: writing it, no training" in out, out
    again = results.read_rows("train", d).iloc[0]
    assert again["run_id"] == row["run_id"] and again["iterations"] == 2
    assert pd.read_csv(d / "rows.csv")["iteration"].tolist() == [1, 2]  # no iteration trained
    assert main(["train", "--resume", str(d / "latest.pt"), "--device", "cpu", "--no-progress"]) == 2
    assert "already finished at iteration 2" in capsys.readouterr().err


def test_sigterm_while_a_training_starts_is_one_line_and_frees_its_folder(tmp_path):
    """SIGTERM as soon as the run folder is taken (start-up: the env's build, warm-up): exit 143,
    one line naming the signal (the start-up's "terminated", or, when training had begun, the
    saved iteration's), and the folder's lock released (a new run there is not refused)."""
    d = tmp_path / "run"
    cmd = [sys.executable, "-m", "fightlab", "train", "--run-dir", str(d), "--max-iterations", "500", *TINY]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not (d / LOCK).exists():
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("fightlab: ") and "SIGTERM" in last and "Traceback" not in err, err
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0  # not held


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_saves_the_last_iteration_then_resume_continues(tmp_path, sig):
    """A cloud's preemption (SIGTERM) or Ctrl-C (SIGINT) mid-training: the iteration under way
    ends, its checkpoint is written, one line says where to resume, exit 128 + the signal; the
    resume continues from that iteration with every row once."""
    d = tmp_path / "run"
    cmd = [sys.executable, "-m", "fightlab", "train", "--run-dir", str(d), "--max-iterations", "500",
           "--checkpoint-every", "100", *TINY]
    # a suite started in the background (`cmd &`) ignores SIGINT, and a child inherits that (the
    # training then rightly keeps it ignored): the child starts with the default disposition
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not ((d / "rows.csv").exists() and
                                              len((d / "rows.csv").read_text().splitlines()) >= 4):
            time.sleep(0.2)
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + sig, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"fightlab: stopped by {signal.Signals(sig).name} at iteration ") and "--resume" in last, err
    n = int(last.split("at iteration ")[1].split(";")[0])
    ck = torch.load(d / "latest.pt", weights_only=False)
    assert ck["iteration"] == n >= 3  # not the every-100 checkpoint: the last whole iteration's
    assert pd.read_csv(d / "rows.csv")["iteration"].tolist() == list(range(1, n + 1))
    assert main(["train", "--resume", str(d / "latest.pt"), "--max-iterations", str(n + 1),
                 "--device", "cpu", "--no-progress"]) == 0
    assert pd.read_csv(d / "rows.csv")["iteration"].tolist() == list(range(1, n + 2))


# ---------------------------------------------------------------------------------------------
# the break-it review's findings (each fails on the commit it reviewed)

def test_empty_resume_is_refused_not_a_fresh_run(tmp_path, capsys):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    before = _tree_digest(d)
    assert main(["train", "--resume", "", "--run-dir", str(d), *TINY]) == 2
    assert "--resume must name a checkpoint file, got ''" in capsys.readouterr().err
    assert _tree_digest(d) == before


@pytest.mark.parametrize("sub", ["data/newsub", "data/results/sub", "figures/x", "notebooks/runs/x"])
def test_run_folders_inside_the_repository_only_under_runs(sub):
    with pytest.raises(RunDirError, match="inside the repository, run folders live under runs/"):
        check_location(REPO_ROOT / sub)
    check_location(REPO_ROOT / "runs" / "train" / "x")  # allowed


def test_a_symlinked_data_folder_is_refused(tmp_path):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    import shutil

    shutil.rmtree(d / "data")
    (d / "data").symlink_to(tmp_path)
    with pytest.raises(RunDirError, match="is a symbolic link"):
        RunDir(d, fresh=False)


def test_resuming_in_a_folder_fightlab_did_not_make_never_touches_the_users_files(tmp_path, capsys):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    import shutil

    # the user's folder: their notes, their backup, a latest.pt that is a file of their own
    user = tmp_path / "mine"
    user.mkdir()
    shutil.copy(d / "ckpt_000001.pt", user / "ckpt_000001.pt")
    (user / "notes.txt").write_text("mine")
    (user / "ckpt_backup_200.pt").write_bytes(b"my own backup")
    shutil.copy(d / "ckpt_000001.pt", user / "latest.pt")
    before = _tree_digest(user)
    assert main(["train", "--resume", str(user / "ckpt_000001.pt"), "--max-iterations", "2",
                 "--device", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "holds files that are not a fightlab run's" in err and "notes.txt" in err
    assert _tree_digest(user) == before and not (user / LOCK).exists()  # nothing left behind
    # a checkpoint alone in a folder, whatever its name: resumed, and never listed or deleted
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(d / "ckpt_000001.pt", alone / "mine.pt")
    assert main(["train", "--resume", str(alone / "mine.pt"), "--max-iterations", "2",
                 "--device", "cpu", "--no-progress"]) == 0
    assert "mine.pt" not in json.loads((alone / MANIFEST).read_text())["files"]
    assert pd.read_csv(alone / "rows.csv")["iteration"].tolist() == [1, 2]  # the whole history
    assert main(["train", "--run-dir", str(alone), "--max-iterations", "1", *TINY]) == 0  # fresh
    assert "removed" in capsys.readouterr().out and (alone / "mine.pt").exists()
    # a user's rows.csv next to a copied checkpoint refuses the resume: nothing is overwritten
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(d / "ckpt_000001.pt", other / "ckpt_000001.pt")
    (other / "rows.csv").write_text("name,score\nalice,3\n")
    assert main(["train", "--resume", str(other / "ckpt_000001.pt"), "--max-iterations", "2",
                 "--device", "cpu"]) == 2
    assert "rows.csv" in capsys.readouterr().err
    assert (other / "rows.csv").read_text() == "name,score\nalice,3\n"


def test_a_300_character_folder_name_is_one_line(tmp_path, capsys):
    assert main(["train", "--run-dir", str(tmp_path / ("a" * 300)), "--max-iterations", "1", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and "too long" in err and err.count("\n") == 1


def test_a_hard_link_of_the_repositorys_results_is_the_repositorys(tmp_path):
    repo_file = results.results_path("train", REPO_ROOT)
    link = tmp_path / "data" / "results" / "train.csv"
    link.parent.mkdir(parents=True)
    try:
        os.link(repo_file, link)
    except OSError:
        pytest.skip("no hard link across these filesystems")
    before = hashlib.sha256(repo_file.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match="not a GPU"):
        results.append_row("train", _train_row("zzlinked", 1), tmp_path)
    assert hashlib.sha256(repo_file.read_bytes()).hexdigest() == before


def test_resuming_an_older_checkpoint_in_its_folder_is_refused_and_a_copy_forks(tmp_path, capsys):
    """A resume of an older checkpoint in its own folder would write over the run's later
    checkpoints and rows: refused in one line, nothing touched. Copied into a new folder it is
    a fork: when the original's row is where the fork's would go, the fork gets a new run_id
    (params forked_from, its latest.pt renamed too), so neither row replaces the other; a run
    resumed from its own latest state keeps its id."""
    import shutil

    from fightlab.config import TrainConfig
    from fightlab.measure.report import fork_if_diverged
    from fightlab.run.runner import Trainer

    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "3", "--checkpoint-every", "1", *TINY]) == 0
    capsys.readouterr()
    before = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()}
    assert main(["train", "--resume", str(d / "ckpt_000001.pt"), "--max-iterations", "3",
                 "--device", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is at iteration 1 but its folder holds later ones (ckpt_000002.pt, ckpt_000003.pt)" in err[0]
    assert {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in d.rglob("*") if p.is_file()} == before
    run_id = results.read_rows("train", d)["run_id"].item()

    fork = tmp_path / "fork"
    fork.mkdir()
    shutil.copy(d / "ckpt_000001.pt", fork / "ckpt_000001.pt")
    with Trainer(TrainConfig(resume=str(fork / "ckpt_000001.pt"), max_iterations=2, device="cpu"),
                 progress=False) as tr:
        tr.train()
        assert tr.run_id == run_id and fork_if_diverged(tr, [fork]) is None  # nothing of it there yet
        assert fork_if_diverged(tr, [d]) == run_id  # d's row went to 3 another way
        assert tr.run_id != run_id and tr.forked_from == f"{run_id}@1"
        assert "forked_from" in capsys.readouterr().out
    forked = torch.load(fork / "latest.pt", weights_only=False)
    assert forked["run_id"] == tr.run_id and forked["forked_from"] == f"{run_id}@1"
    assert torch.load(fork / "ckpt_000001.pt", weights_only=False)["run_id"] == run_id  # the parent's state
    # the original resumed from its latest state continues its own row: same id
    with Trainer(TrainConfig(resume=str(d / "latest.pt"), max_iterations=4, device="cpu"), progress=False) as tr2:
        tr2.train()
        assert fork_if_diverged(tr2, [d]) is None and tr2.run_id == run_id


def test_a_torn_row_file_in_the_run_folder_is_said_before_training(tmp_path, capsys):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 0
    with open(d / "data" / "results" / "train.csv", "a") as f:
        f.write("torn,abc\n")
    capsys.readouterr()  # the first run's own output (a first compile's note, run alone)
    assert main(["train", "--resume", str(d / "latest.pt"), "--max-iterations", "2",
                 "--device", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "train.csv:3: malformed row" in err and err.count("\n") == 1
    assert torch.load(d / "latest.pt", weights_only=False)["iteration"] == 1  # nothing trained


@pytest.mark.parametrize("args, expect", [
    (["slots", "--seconds", "inf", "--device", "cpu"], "--seconds must be > 0"),
    (["slots", "--seconds", "1e-300", "--device", "cpu"], "at least 0.01"),
    (["train", "--seed", "99999999999999999999", "--device", "cpu"], "seed must be an integer in [0, 2**31)"),
    (["train", "--nworld", "1000000000000", "--device", "cpu"], "nworld must be at most 4194304"),
    (["train", "--run-dir", " ", "--device", "cpu"], "--run-dir must name a folder, got ' '"),
    (["evaluate", "", "--device", "cpu"], "evaluate needs a CHECKPOINT file, got ''"),
    (["reproduce", "--only", "", "--device", "cpu"], "--only takes notebook numbers such as 06, got ''"),
    (["figures", "--root", ""], "--root must name a folder holding data/, got ''"),
    (["train", "--device", "cpu", "--set", "env.timestep=1e-300"], "physics substeps per control step; at most 1000"),
    (["evaluate", "--zero-action", "--body", "simple", "--device", "cpu", "--timestep", "1e-300"],
     "at most 1000"),
    # values that pass a type check but no machine can hold, and text past Python's own limits
    (["train", "--device", "cpu", "--set", "ppo.num_steps=" + "1" * 5000],
     "PPOConfig.num_steps must be an integer, got '1111"),
    (["train", "--device", "cpu", "--set", "ppo.learning_rate=1" + "0" * 400], "must be a finite number"),
    (["train", "--device", "cpu", "--set", "ppo.hidden=" + "[" * 50000], "PPOConfig.hidden must be a list"),
    (["train", "--device", "cpu", "--nworld", "2", "--set", "ppo.num_steps=1000000000"],
     "more than 16,777,216 samples an iteration"),
    (["train", "--device", "cpu", "--set", "ppo.update_epochs=" + "1" + "0" * 23], "update_epochs must be at most 1000"),
    (["train", "--device", "cpu", "--set", "env.n_phase=1000000000000"], "n_phase must be an integer in [4, 4096]"),
    (["train", "--device", "cpu", "--set", "env.episode_s=5e7"], "env steps per episode"),
    (["train", "--device", "cpu", "--set", "curriculum_wait=" + "1" + "0" * 23], "curriculum_wait must be an integer in [1, "),
    (["train", "--device", "cpu", "--max-iterations", "100000000000"], "max_iterations must be at most"),
    (["evaluate", "--zero-action", "--body", "simple", "--device", "cpu", "--episodes", "1e11"],
     "--episodes must be in [1, 10000]"),
    (["profile", "--nstep", "100000000000000", "--device", "cpu"], "--nstep must be an integer in [1, 100000]"),
])
def test_more_one_line_errors(args, expect, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err and "Traceback" not in err, err


def test_a_huge_value_argparse_refuses_is_cut_in_its_error(capsys):
    with pytest.raises(SystemExit) as e:  # argparse's own refusal exits
        main(["train", "--seed", "9" * 5000, "--device", "cpu"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: argument --seed: invalid int value: '999") and len(err) < 300, err
    assert "(5000 characters)" in err and err.count("\n") == 1


@pytest.mark.parametrize("args", [
    ["train", "--seed", "9'" + "9" * 5000, "--device", "cpu"],    # argparse quotes it in double quotes
    ["train", "--seed", "1", "9" * 5000, "--device", "cpu"],      # unrecognized arguments: unquoted
    ["train", "--body", "b" * 5000, "--device", "cpu"],           # fightlab's own refusal
    ["figures", "--only", "f" * 5000],
])
def test_every_refusal_of_a_huge_value_is_one_short_line(args, capsys):
    try:
        code = main(args)
    except SystemExit as e:  # argparse's own refusal exits
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fightlab: error: ") and err.count("\n") == 1, err
    assert len(err) < 600 and "characters)" in err, err


def test_a_set_key_given_twice_uses_the_last_and_says_so(capsys):
    from fightlab.config import TrainConfig, apply_overrides

    cfg = apply_overrides(TrainConfig(), ["ppo.clip_coef=0.1", "ppo.gamma=0.9", "ppo.clip_coef=0.2"])
    assert cfg.ppo.clip_coef == 0.2 and cfg.ppo.gamma == 0.9
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fightlab: warning: --set ppo.clip_coef given twice ('0.1', then '0.2'): the last, '0.2', is used"]
    apply_overrides(TrainConfig(), ["ppo.clip_coef=0.1", "ppo.clip_coef=0.1"])  # the same value: nothing to say
    assert capsys.readouterr().err == ""


def test_run_dir_under_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert main(["train", "--run-dir", str(tmp_path / "afile" / "sub"), "--max-iterations", "1", *TINY]) == 2
    assert "cannot be made or locked" in capsys.readouterr().err


def test_text_in_a_metric_column_and_a_torn_curve_are_refused(tmp_path):
    path = results.append_row("train", _train_row("aaa", 1), tmp_path)
    text = path.read_text().rstrip("\n")
    last = results.columns("train")[-1]
    path.write_text(text[: text.rindex(",")] + ",abc\n")  # the last column = "abc"
    with pytest.raises(results.MalformedRowError, match=rf"train.csv:2: column '{last}' holds 'abc'"):
        results.read_rows("train", tmp_path)
    c = results.write_curve("aaa", pd.DataFrame({"iteration": [1, 2], "reward": [0.1, 0.2]}), tmp_path)
    _gz_text(c, results.read_text(c) + "3")
    with pytest.raises(results.MalformedRowError, match=r"aaa.csv.gz:4"):
        results.read_curve("aaa", tmp_path)
    _gz_text(c, 'garbage,,,"\n')  # a quote left open: the parser's error as one line, the file named
    with pytest.raises(results.MalformedRowError, match=r"aaa.csv.gz: not a readable curve|aaa.csv.gz:\d"):
        results.read_curve("aaa", tmp_path)
    c.write_bytes(c.read_bytes()[:12])  # a torn copy of the gzip file
    with pytest.raises(results.MalformedRowError, match=r"aaa.csv.gz: not a whole gzip file"):
        results.read_curve("aaa", tmp_path)
    c.write_text("iteration\n1\n")  # plain text under the gzip name: intact, misnamed
    with pytest.raises(results.MalformedRowError, match=r"aaa.csv.gz: not gzip \(plain text under a .gz name\?\): "
                       r"compress it with `gzip -n` or rename it to aaa.csv"):
        results.read_curve("aaa", tmp_path)
    _gz_text(c, "iteration,reward\n1,0.1\niteration,reward\n2,0.2\n")  # a header repeated mid-file
    with pytest.raises(results.MalformedRowError, match=r"aaa.csv.gz:3: column 'iteration' holds 'iteration', not a number"):
        results.read_curve("aaa", tmp_path)
    _gz_text(c, "iteration,event\n1,wait\n2,widen\n")  # a column of text is text
    assert results.read_curve("aaa", tmp_path)["event"].tolist() == ["wait", "widen"]
    _gz_text(c, '"iter\nation",reward\n1,0.1\n')  # a newline inside a column name
    with pytest.raises(results.MalformedRowError) as e:
        results.read_curve("aaa", tmp_path, need=("iteration",))
    assert "\n" not in str(e.value), str(e.value)


def _gz_text(path, text):
    """Replace the text inside a gzip curve file (a hand edit of its content)."""
    path.write_bytes(gzip.compress(text.encode()))


def test_a_cpu_curve_never_reaches_the_repositorys_data():
    with pytest.raises(ConfigError, match="needs the device"):
        results.write_curve("zz0test", pd.DataFrame({"a": [1]}), REPO_ROOT)
    with pytest.raises(ConfigError, match="not a GPU"):
        results.write_curve("zz0test", pd.DataFrame({"a": [1]}), REPO_ROOT, device="cpu")
    assert not results.curve_path("zz0test", REPO_ROOT).exists()


def test_params_that_are_not_json_an_infinite_metric_and_an_empty_curve_are_refused(tmp_path):
    path = results.append_row("train", _train_row("aaa", 1), tmp_path)
    good = path.read_text()
    path.write_text(good.replace('"{}"', "notjson").replace(",{},", ",notjson,"))
    with pytest.raises(results.MalformedRowError, match=r"train.csv:2: column 'params' is not a JSON"):
        results.read_rows("train", tmp_path)
    head, row = good.splitlines()
    cells = row.split(",")
    cells[head.split(",").index("compile_s")] = "inf"
    path.write_text(head + "\n" + ",".join(cells) + "\n")
    with pytest.raises(results.MalformedRowError, match=r"train.csv:2: column 'compile_s' is infinite"):
        results.read_rows("train", tmp_path)
    c = results.write_curve("aaa", pd.DataFrame({"iteration": [1]}), tmp_path)
    _gz_text(c, "")
    with pytest.raises(results.MalformedRowError, match="empty curve file"):
        results.read_curve("aaa", tmp_path)
    c.unlink()
    c.with_name("aaa.csv").write_text("")  # the plain format, empty
    with pytest.raises(results.MalformedRowError, match="aaa.csv: empty curve file"):
        results.read_curve("aaa", tmp_path)
