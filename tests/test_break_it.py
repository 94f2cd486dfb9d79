"""The break-it review's cases, each as it should end: a kill or a full disk leaves the old file
or the new one (never a torn or empty one) and says which file in one line; running out of
memory is one line naming the size asked; a crafted checkpoint is refused before any of it runs;
a batch archives only what fightlab wrote; a resume that rewrites rows.csv says so; checkpoint
retention; a bad integer cell is named with its line. CPU device, tiny sizes."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fightlab import results
from fightlab.cli import main
from fightlab.paths import REPO_ROOT
from fightlab.run.checkpoint import KEEP_CHECKPOINTS, safe_load
from fightlab.rundir import MANIFEST, atomic_path, atomic_write

TINY = ["--device", "cpu", "--nworld", "2", "--no-progress", "--set", "ppo.num_steps=4",
        "--set", "ppo.num_minibatches=1", "--set", "ppo.update_epochs=1"]


def _one_line_error(err: str) -> str:
    """The one error line of stderr (its last; a compile notice may come before it)."""
    lines = err.splitlines()
    assert lines and lines[-1].startswith("fightlab: error: ") and "Traceback" not in err, err
    assert sum(ln.startswith("fightlab: error:") for ln in lines) == 1, err
    return lines[-1]


def _tmp_files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.tmp"))


# --- the atomic writer ------------------------------------------------------------------------

def test_a_failed_rename_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "f.txt"
    p.write_text("old")

    def boom(*a, **k):
        raise OSError(errno.EIO, "rename failed")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(p, "new")
    assert p.read_text() == "old" and _tmp_files(tmp_path) == []


def test_a_full_disk_is_one_oserror_naming_the_file(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"old")
    with pytest.raises(OSError) as e:
        with atomic_path(p) as t:
            t.write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(p)
    assert p.read_bytes() == b"old" and _tmp_files(tmp_path) == []


def test_kill_9_mid_write_leaves_the_old_file_whole(tmp_path):
    p = tmp_path / "figure.png"
    p.write_bytes(b"the committed figure")
    code = ("import sys, time; from fightlab.rundir import atomic_path\n"
            f"with atomic_path({str(p)!r}) as t:\n"
            "    f = open(t, 'wb'); f.write(b'x' * 100000); f.flush()\n"
            "    print('writing', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert p.read_bytes() == b"the committed figure"


# --- figures ------------------------------------------------------------------------------------

@pytest.fixture
def factor_root(tmp_path):
    root = tmp_path / "root"
    (root / "data" / "results").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "data" / "results" / "factor.csv", root / "data" / "results")
    assert main(["figures", "--only", "factor_time", "--root", str(root)]) == 0
    return root


def test_a_kill_during_figures_leaves_the_old_figure(factor_root, monkeypatch, capsys):
    png = factor_root / "figures" / "factor_time.png"
    before = png.read_bytes()
    assert before

    def killed(*a, **k):  # the process dies between writing the temporary and the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    main(["figures", "--only", "factor_time", "--root", str(factor_root)])
    assert png.read_bytes() == before and _tmp_files(factor_root) == []


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_a_full_disk_during_figures_is_one_line_naming_the_file(factor_root, fmt, monkeypatch, capsys):
    import matplotlib.figure

    old = {p.name: p.read_bytes() for p in (factor_root / "figures").iterdir()}
    real = matplotlib.figure.Figure.savefig

    def full(self, fname, *a, **k):
        if k.get("format") == fmt:
            open(fname, "wb").write(b"<svg torn")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, fname, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    capsys.readouterr()
    assert main(["figures", "--only", "factor_time", "--root", str(factor_root)]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert f"factor_time.{fmt}: No space left on device" in err
    assert {p.name: p.read_bytes() for p in (factor_root / "figures").iterdir()} == old


# --- checkpoints: full disk, retention, crafted files ------------------------------------------

def test_a_full_disk_during_a_checkpoint_save_is_one_line(tmp_path, monkeypatch, capsys):
    import fightlab.run.checkpoint as ckpt

    def full(obj, f, *a, **k):  # what torch raises when its zip writer hits a full disk
        open(f, "wb").write(b"PK half")
        raise RuntimeError("[enforce fail at inline_container.cc:603] . unexpected pos 64 vs 0\n"
                           "PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(ckpt.torch, "save", full)
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert f"{d / 'ckpt_000001.pt'}: No space left on device" in err
    assert _tmp_files(d) == [] and not (d / "ckpt_000001.pt").exists()


def test_out_of_memory_is_one_line_naming_the_size(tmp_path, monkeypatch, capsys):
    import mujoco_warp

    def oom(*a, **k):
        raise RuntimeError("Failed to allocate 96000000000 bytes on device 'cpu'")

    monkeypatch.setattr(mujoco_warp, "make_data", oom)
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *TINY]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "out of memory training 2 worlds of simple on cpu" in err and "smaller --nworld" in err
    assert not (d / "rows.csv").exists() and not list(d.glob("*.pt")) and _tmp_files(d) == []


def test_torch_out_of_memory_is_one_line_too(tmp_path, monkeypatch, capsys):
    from fightlab.run.runner import Trainer

    def oom(self):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB")

    monkeypatch.setattr(Trainer, "train", oom)
    assert main(["train", "--run-dir", str(tmp_path / "run"), "--max-iterations", "1", *TINY]) == 2
    assert "out of memory training 2 worlds" in _one_line_error(capsys.readouterr().err)


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("keep") / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "7", "--checkpoint-every", "1", *TINY]) == 0
    return d


def _ckpts(d):
    return sorted(p.name for p in d.glob("ckpt_*.pt"))


def test_retention_keeps_latest_and_a_bounded_number_then_resumes(kept_run, capsys):
    d = kept_run
    assert KEEP_CHECKPOINTS == 3
    assert _ckpts(d) == [f"ckpt_{i:06d}.pt" for i in range(4, 8)]
    assert os.readlink(d / "latest.pt") == "ckpt_000007.pt"
    # checkpoints hold only what a weights-only load reads
    ck = torch.load(d / "latest.pt", map_location="cpu", weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in ck["env_state"].values())
    (d / "ckpt_000001.pt").write_bytes(b"the user's own copy")  # not in the manifest: never deleted
    assert main(["train", "--resume", str(d / "latest.pt"), "--max-iterations", "9", "--no-progress"]) == 0
    assert _ckpts(d) == ["ckpt_000001.pt"] + [f"ckpt_{i:06d}.pt" for i in range(6, 10)]
    assert (d / "ckpt_000001.pt").read_bytes() == b"the user's own copy"
    assert "resume:" not in capsys.readouterr().out  # rows.csv was the checkpoint's: nothing to say


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_is_refused_before_it_runs(kept_run, tmp_path, capsys):
    marker = tmp_path / "pwned"
    p = tmp_path / "copy" / "evil.pt"
    p.parent.mkdir()
    ck = torch.load(kept_run / "latest.pt", weights_only=True)
    ck["history"].append(_Evil(marker))
    torch.save(ck, p)
    for argv in (["evaluate", str(p), "--nworld", "2", "--device", "cpu"],
                 ["train", "--resume", str(p), "--max-iterations", "99", "--device", "cpu"]):
        assert main(argv) == 2
        err = _one_line_error(capsys.readouterr().err)
        assert "holds objects other than tensors" in err and "system" in err and str(p) in err
    assert not marker.exists()


def test_packing_refuses_a_crafted_latest_pt(tmp_path, capsys):
    from fightlab.measure import packing

    marker = tmp_path / "pwned"
    run = tmp_path / "batch" / "jobs" / "j1" / "run"
    run.mkdir(parents=True)
    (run / "rows.csv").write_text("iteration,wall_s\n" + "".join(f"{i},0.1\n" for i in range(1, 9)))
    torch.save({"config": _Evil(marker)}, run / "latest.pt")
    (tmp_path / "batch" / "batch.json").write_text(json.dumps({"jobs": [{"run_dir": str(run)}]}))
    assert packing.main([str(tmp_path / "batch")]) == 2
    assert "holds objects other than tensors" in _one_line_error(capsys.readouterr().err)
    assert not marker.exists()


def test_an_older_checkpoint_with_numpy_arrays_still_loads(kept_run, tmp_path):
    ck = safe_load(kept_run / "latest.pt")
    assert all(isinstance(v, np.ndarray) for v in ck["env_state"].values())
    ck["history"][0]["reward"] = np.float64(ck["history"][0]["reward"])  # numpy scalars, as older rows had
    torch.save(ck, tmp_path / "old.pt")  # as an older fightlab wrote it
    with pytest.raises(Exception):
        torch.load(tmp_path / "old.pt", weights_only=True)  # not loadable without numpy's globals
    from fightlab.run.checkpoint import load_checkpoint

    back = load_checkpoint(tmp_path / "old.pt")
    assert all(np.array_equal(back["env_state"][k], ck["env_state"][k]) for k in ck["env_state"])


# --- a resume that rebuilds rows.csv says so -----------------------------------------------------

@pytest.mark.parametrize("damage, why", [
    (lambda p: p.write_text(p.read_text() + "garbage,,,\n"), "held"),
    (lambda p: p.write_text(p.read_text().replace("\n2,", "\n9,", 1)), "differed from the checkpoint's rows"),
    (lambda p: p.unlink(), "was missing"),
])
def test_a_resume_that_rebuilds_rows_says_so(tmp_path, damage, why, capsys):
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "2", *TINY]) == 0
    good = (d / "rows.csv").read_text()
    damage(d / "rows.csv")
    capsys.readouterr()
    assert main(["train", "--resume", str(d / "latest.pt"), "--max-iterations", "3", "--no-progress"]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("resume:")]
    assert len(notes) == 1 and str(d / "rows.csv") in notes[0] and why in notes[0], notes
    assert (d / "rows.csv").read_text().startswith(good)


# --- the batch archive holds only what the batch wrote ------------------------------------------

def test_the_archive_holds_only_files_fightlab_wrote(kept_run, tmp_path):
    from fightlab import batch

    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "batch.json").write_text("{}")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "big.bin").write_bytes(os.urandom(1 << 20))
    run = tmp_path / "run"
    shutil.copytree(kept_run, run, symlinks=True)
    (run / "big.bin").write_bytes(os.urandom(1 << 20))  # the user's file beside a run's
    out = batch.archive(folder, False, ["/", "/usr/lib", str(foreign), str(run)])
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert not any("big.bin" in n or "/usr" in n or "foreign" in n for n in names), names
    assert "b/run_dirs/run/rows.csv" in names and f"b/run_dirs/run/{MANIFEST}" in names
    assert out.stat().st_size < 200_000 and _tmp_files(folder) == []


def test_a_batch_job_with_a_refused_run_dir_never_reaches_the_archive(tmp_path, capsys):
    big = tmp_path / "mine"
    big.mkdir()
    (big / "big.bin").write_bytes(os.urandom(1 << 20))
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--job",
               f"train --run-dir {big} --max-iterations 1 --device cpu --nworld 2"])
    assert rc != 0
    archive = folder / "batch.tar.gz"
    if archive.exists():
        with tarfile.open(archive) as tar:
            assert not any("big.bin" in n for n in tar.getnames())
    assert [p.name for p in big.iterdir()] == ["big.bin"]


# --- results files -------------------------------------------------------------------------------

def _row(run_id="a1", nworld=8):
    meta = results.run_metadata(body="simple", nworld=nworld, seed=0, params={}, device="cpu")
    return {**meta, "run_id": run_id, **{c: 1.0 for c in results.EXPERIMENTS["slots"]}}


def test_a_malformed_integer_cell_is_named_with_its_line(tmp_path):
    results.append_row("slots", _row("a1"), tmp_path)
    results.append_row("slots", _row("b2"), tmp_path)
    p = results.results_path("slots", tmp_path)
    lines = p.read_text().splitlines()
    cols = lines[0].split(",")
    rec = lines[2].split(",")
    rec[cols.index("nworld")] = "eight"
    p.write_text("\n".join([*lines[:2], ",".join(rec)]) + "\n")
    with pytest.raises(results.MalformedRowError, match=rf"{p}:3: column 'nworld' holds 'eight', not an integer"):
        results.read_rows("slots", tmp_path)


def test_an_append_killed_before_its_rename_leaves_the_old_file(tmp_path, monkeypatch):
    results.append_row("slots", _row("a1"), tmp_path)
    p = results.results_path("slots", tmp_path)
    before = p.read_bytes()

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        results.append_row("slots", _row("b2"), tmp_path)
    assert p.read_bytes() == before and _tmp_files(tmp_path) == []


# --- flags: what the help says is accepted, a bad value one line before anything is written -----

def test_batch_gpus_none_is_one_cpu_lane_on_a_gpu_host(tmp_path, monkeypatch, capsys):
    """--gpus none, as its help says: one CPU lane whose jobs see no GPU, even where nvidia-smi
    lists two; a bad value is still one line naming it and the choices."""
    from fightlab import batch
    b = tmp_path / "bin"
    b.mkdir()
    (b / "nvidia-smi").write_text("#!/bin/sh\nprintf 'GPU 0: NVIDIA Fake (UUID: GPU-0)\\nGPU 1: NVIDIA Fake (UUID: GPU-1)\\n'\n")
    (b / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    folder = tmp_path / "batch"
    code = "import os; print('seen=' + repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--gpus", "none",
               "--job", f"python -c {json.dumps(code)}"])
    out = capsys.readouterr()
    assert rc == 0 and "no GPU lane (nvidia-smi -L lists none, or --gpus none)" in out.err + out.out, out.err
    st = json.loads((folder / "batch.json").read_text())
    assert st["lanes"] == ["cpu"] and [j["status"] for j in st["jobs"]] == ["done"]
    assert "seen=''" in (folder / "jobs" / st["jobs"][0]["id"] / "log.txt").read_text()
    assert [ln.name for ln in batch.make_lanes(" None ", [0, 1], 2)] == ["cpu"]
    rc = main(["batch", "--batch-dir", str(tmp_path / "b2"), "--job", "train", "--gpus", "nein"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == "fightlab: error: --gpus takes GPU indices such as 0,1, all, or none (one CPU lane), got 'nein'"
    assert not (tmp_path / "b2").exists()


@pytest.mark.parametrize("seed", ["-3", "2147483648"])
def test_evaluate_seed_passes_trains_rule(seed, capsys):
    """evaluate --seed is refused as train --seed is (TrainConfig.seed's rule), before any env."""
    rc = main(["evaluate", "--zero-action", "--body", "simple", "--device", "cpu", "--nworld", "2",
               "--no-progress", f"--seed={seed}"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and err == f"fightlab: error: --seed must be an integer in [0, 2**31), got {seed}"
    rc = main(["evaluate", "--reference-check", "/no/such.pt", "--device", "cpu", f"--seed={seed}"])
    assert rc == 2 and "--seed must be an integer in [0, 2**31)" in capsys.readouterr().err


@pytest.mark.parametrize("args, said", [
    (["--iterations", "99999999999", "--nworld-list", "4"], "iterations must be at most 10000000"),
    (["--seed", "-1", "--nworld-list", "4"], "seed must be an integer in [0, 2**31), got -1"),
    (["--body", "nope"], "unknown body 'nope'; valid bodies: "),  # the bad body, not the missing list
    (["--body", "nope", "--nworld-list", "4"], "unknown body 'nope'"),
])
def test_a_bad_sweep_flag_is_refused_before_anything_is_written(args, said, capsys):
    """Every sweep flag, a point's training config included, is checked before the sweep's folder
    is made or its "rerun the same command" line is printed."""
    from fightlab.measure import sweep

    before = sorted(sweep.SWEEP_ROOT.iterdir()) if sweep.SWEEP_ROOT.exists() else None
    rc = main(["sweep", "--device", "cpu", "--no-progress", *args])
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("fightlab: error: ") and said in err[0], out
    assert "rerun the same command" not in out.out
    assert (sorted(sweep.SWEEP_ROOT.iterdir()) if sweep.SWEEP_ROOT.exists() else None) == before


def test_a_refused_run_that_changes_the_task_prints_one_line(tmp_path, capsys):
    """The task warning comes once the run has passed the gate: a run folder the run would refuse
    (not fightlab's, a protected place, in use) is refused at the gate, the error alone."""
    from fightlab.rundir import RunDir

    tiny = ["train", "--device", "cpu", "--nworld", "4", "--max-iterations", "2", "--no-progress",
            "--set", "curriculum_wait=1"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    held = RunDir(tmp_path / "held", fresh=True)
    try:
        for run_dir, said in ((foreign, "is not empty (mine.txt) and was not made by fightlab"),
                              (REPO_ROOT, "refused: it is the repository root"),
                              (tmp_path / "held", "is in use by this process")):
            rc = main([*tiny, "--run-dir", str(run_dir)])
            out = capsys.readouterr()
            lines = (out.out + out.err).strip().splitlines()
            assert rc == 2 and len(lines) == 1 and said in lines[0], lines
            assert lines[0].startswith("fightlab: error: run folder")
    finally:
        held.release()
    assert [p.name for p in foreign.iterdir()] == ["mine.txt"]


# --- the second break-it pass: a torn save, memory, crafted counts, one-line messages, a copy ---

CKPT_TINY = ["--device", "cpu", "--nworld", "4", "--no-progress", "--set", "ppo.num_steps=4",
             "--set", "ppo.num_minibatches=1", "--set", "ppo.update_epochs=1"]


def _saved_intact(d):
    """latest.pt links to a whole checkpoint and every checkpoint left loads; no temporary."""
    assert _tmp_files(d) == [] and os.path.islink(d / "latest.pt")
    for p in [d / "latest.pt", *d.glob("ckpt_*.pt")]:
        assert safe_load(p)["format"] == "fightlab-ckpt-1"


def test_any_torch_save_failure_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch, capsys):
    import fightlab.run.checkpoint as ckpt

    real, calls = torch.save, []

    def torn(obj, f, *a, **k):  # torch's zip writer on a full tmpfs: not an OSError, no "write failed"
        calls.append(f)
        if len(calls) < 2:
            return real(obj, f, *a, **k)
        open(f, "wb").write(b"PK half")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 143040 vs 142928")

    monkeypatch.setattr(ckpt.torch, "save", torn)
    d = tmp_path / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "2", "--checkpoint-every", "1", *CKPT_TINY]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert f"{d / 'ckpt_000002.pt'}: could not write the checkpoint (RuntimeError: " in err
    assert "unexpected pos" in err and err.endswith("is the disk full?")
    assert not (d / "ckpt_000002.pt").exists() and os.readlink(d / "latest.pt") == "ckpt_000001.pt"
    _saved_intact(d)


def test_a_full_tmpfs_during_a_checkpoint_save_is_one_line(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    probe = tmp_path / "probe"  # a checkpoint's size here: the tmpfs holds two and a half
    assert main(["train", "--run-dir", str(probe), "--max-iterations", "1", *CKPT_TINY]) == 0
    size_k = int(2.5 * (probe / "ckpt_000001.pt").stat().st_size / 1024) + 8
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_k}k", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("mount -t tmpfs refused here")
    try:
        d = mnt / "run"
        rc = main(["train", "--run-dir", str(d), "--max-iterations", "6", "--checkpoint-every", "1", *CKPT_TINY])
        err = _one_line_error(capsys.readouterr().err)
        assert rc == 2 and ("could not write the checkpoint" in err or "No space left" in err), err
        _saved_intact(d)  # the checkpoints before the full one whole, latest.pt on the last of them
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("message", [
    "Failed to convert input data to an array with type <class 'numpy.int32'>: Unable to allocate 366. MiB "
    "for an array with shape (96000000,) and data type int32",
    "Failed to allocate 7247757312 bytes on device 'cpu'"])
def test_out_of_memory_at_the_start_is_one_line_and_leaves_no_run_folder(tmp_path, monkeypatch, capsys, message):
    import mujoco_warp

    def oom(*a, **k):
        raise RuntimeError(message)

    monkeypatch.setattr(mujoco_warp, "make_data", oom)
    d = tmp_path / "new" / "run"
    assert main(["train", "--run-dir", str(d), "--max-iterations", "1", *CKPT_TINY]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "out of memory training 4 worlds of simple on cpu" in err and "smaller --nworld" in err
    assert not (tmp_path / "new").exists()  # no manifest listing nothing, no stale lock, no folder


def test_out_of_memory_evaluating_is_one_line(monkeypatch, capsys):
    import fightlab.envs.task as task

    def oom(*a, **k):
        raise RuntimeError("Failed to allocate 7247757312 bytes on device 'cpu'")

    monkeypatch.setattr(task, "evaluate_policy", oom)
    assert main(["evaluate", "--zero-action", "--body", "simple", "--device", "cpu", "--nworld", "4194304",
                 "--no-progress"]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "out of memory evaluating 4194304 worlds of simple on cpu" in err and "smaller --nworld" in err


def test_a_refused_restore_leaves_the_folder_as_it_was(kept_run, tmp_path, monkeypatch, capsys):
    import fightlab.run.runner as runner
    from fightlab.run.checkpoint import CheckpointError

    def refuse(run, ck):
        raise CheckpointError("checkpoint could not be restored (refused here)")

    monkeypatch.setattr(runner, "restore_checkpoint", refuse)
    fork = tmp_path / "fork"
    fork.mkdir()
    shutil.copy(kept_run / "ckpt_000007.pt", fork / "start.pt")
    assert main(["train", "--resume", str(fork / "start.pt"), "--max-iterations", "9", "--device", "cpu",
                 "--no-progress"]) == 2
    assert "refused here" in _one_line_error(capsys.readouterr().err)
    assert sorted(p.name for p in fork.iterdir()) == ["start.pt"]


@pytest.mark.parametrize("iteration", [10**30, 10**9, 10**5000], ids=["1e30", "1e9", "1e5000"])
def test_a_huge_iteration_is_refused_before_any_list_is_built(kept_run, tmp_path, capsys, iteration):
    p = tmp_path / "huge.pt"
    ck = torch.load(kept_run / "latest.pt", weights_only=True)
    ck["iteration"] = iteration
    torch.save(ck, p)
    t0 = time.perf_counter()
    assert main(["evaluate", str(p), "--nworld", "2", "--device", "cpu", "--no-progress"]) == 2
    err = _one_line_error(capsys.readouterr().err)
    assert ("iteration must be at most 10000000" in err or (iteration > 10**4000 and "holds objects" in err))
    assert time.perf_counter() - t0 < 30 and len(err) < 400  # torch's unpickler refuses the 5000-digit one


def test_a_policy_that_does_not_fit_names_its_first_mismatch(kept_run):
    from types import SimpleNamespace

    from fightlab.rl.models import ActorCritic
    from fightlab.run.checkpoint import CheckpointError, load_policy

    ck = safe_load(kept_run / "latest.pt")
    n_obs = ck["agent"]["obs_norm.mean"].shape[0] + 5
    agent = ActorCritic(n_obs, 83, tuple(ck["config"]["ppo"]["hidden"]))
    with pytest.raises(CheckpointError) as e:
        load_policy(agent, ck, "muscular-fast", SimpleNamespace(obs_dim=n_obs, nu=83))
    msg = str(e.value)
    assert "\n" not in msg and "(obs %d, actions 83): size mismatch for " % n_obs in msg, msg
    agent = ActorCritic(n_obs - 5, ck["agent"]["actor_logstd"].shape[0], (8,))
    with pytest.raises(CheckpointError, match=r"(Missing|Unexpected) key\(s\) in state_dict"):
        load_policy(agent, ck, "simple", SimpleNamespace(obs_dim=n_obs - 5, nu=0))


def test_unreadable_files_are_one_clean_line(kept_run, tmp_path, capsys):
    import pickle

    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps({"format": "fightlab-ckpt-1", "iteration": 1}, protocol=4))
    noise = tmp_path / "noise.pt"
    noise.write_bytes(np.random.default_rng(0).bytes(4096))
    cut = tmp_path / "cut.pt"
    cut.write_bytes((kept_run / "ckpt_000007.pt").read_bytes()[:5000])
    for p, expect in ((raw, "is not a checkpoint torch can read"), (noise, "is not a checkpoint torch can read"),
                      (cut, "is unreadable or truncated")):
        assert main(["evaluate", str(p), "--nworld", "2", "--device", "cpu", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Warning" not in err, err  # no torch warning before it
        line = _one_line_error(err)
        assert str(p) in line and expect in line, line
        assert "objects other than tensors" not in line and "If you are seeing" not in line


def test_a_reader_message_with_newlines_is_one_line_in_figures(tmp_path, monkeypatch, capsys):
    import fightlab.results as res

    p = res.results_path("train", tmp_path)
    p.parent.mkdir(parents=True)
    p.write_text('run_id\n"unterminated\n')

    def pandas_says(*a, **k):
        raise ValueError("Error tokenizing data. C error: EOF inside string starting at row 1\n"
                         "  (second line)")

    monkeypatch.setattr(res, "read_rows", pandas_says)
    assert main(["figures", "--only", "train_curves", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "EOF inside string starting at row 1 (second line)" in _one_line_error(err)


def test_a_copied_checkpoint_named_as_fightlab_writes_is_never_replaced(kept_run, tmp_path, capsys):
    import hashlib

    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    before = digest(kept_run / "ckpt_000007.pt")

    def resume_a_copy(folder: str, name: str, iterations: int) -> tuple[Path, int]:
        """The run's ckpt_000007.pt copied into a new folder under ``name``, resumed to ``iterations``."""
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / name
        shutil.copy(kept_run / "ckpt_000007.pt", path)
        return path, main(["train", "--resume", str(path), "--max-iterations", str(iterations),
                           "--device", "cpu", "--no-progress"])

    # a copy named latest.pt in a folder without a manifest: refused at the start, nothing written
    path, rc = resume_a_copy("user", "latest.pt", 9)
    assert rc == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "latest.pt' is not fightlab's link" in err and "start.pt" in err
    assert sorted(p.name for p in path.parent.iterdir()) == ["latest.pt"] and digest(path) == before
    # a copy at the ckpt_<iteration>.pt name the run writes (a segment of no iteration saves its
    # own state again): refused, the copy kept
    path, rc = resume_a_copy("other", "ckpt_000007.pt", 7)
    assert rc == 2
    err = _one_line_error(capsys.readouterr().err)
    assert "ckpt_000007.pt' was not written by this run" in err and digest(path) == before
    # the documented fork: the copy under another name resumes
    path, rc = resume_a_copy("fork", "start.pt", 8)
    assert rc == 0
    fork = path.parent
    assert os.readlink(fork / "latest.pt") == "ckpt_000008.pt" and (fork / "start.pt").exists()


def test_bench_out_never_writes_over_a_folder_fightlab_did_not_make(tmp_path, capsys):
    """`bench --out` into a folder of the user's (a bench.json of their own) or a system folder:
    one line, nothing written or replaced; an earlier bench's folder or an empty one is taken."""

    user = tmp_path / "user"
    user.mkdir()
    (user / "bench.json").write_text("my own bench notes")
    for out in (user, Path("/usr/lib")):
        before = sorted(p.name for p in out.iterdir())
        assert main(["bench", "--bodies", "simple", "--nworld", "4", "--device", "cpu", "--out", str(out)]) == 2
        err = _one_line_error(capsys.readouterr().err)
        assert "refused" in err and str(out) in err, err
        assert sorted(p.name for p in out.iterdir()) == before
    assert (user / "bench.json").read_text() == "my own bench notes"
