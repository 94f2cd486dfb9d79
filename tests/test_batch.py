"""python -m fightlab batch: grid expansion and refusals, lanes over fake GPUs, CUDA MPS against a
fake nvidia-cuda-mps-control, failures, time limits, budget, resume after kill -9, the archive,
one real tiny CPU training and one notebook through the batch."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from fightlab import batch
from fightlab.config import ConfigError
from fightlab.cli import main

PY = sys.executable


@pytest.fixture
def fakebin(tmp_path, monkeypatch):
    """A folder on PATH for fake nvidia-smi / nvidia-cuda-mps-control; returns a maker
    ``make(gpus=N, mps=True)``. The MPS fake records every call in ``bin/mps.log``
    (``ARGS|STDIN|PIPE_DIR|CUDA_VISIBLE_DEVICES``); a daemon "runs" while ``bin/mps.running`` exists."""
    b = tmp_path / "bin"
    b.mkdir()
    monkeypatch.setenv("PATH", f"{b}{os.pathsep}{os.environ['PATH']}")
    for v in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(v, raising=False)

    def make(gpus: int = 0, mps: bool = False) -> Path:
        smi = b / "nvidia-smi"
        lines = "".join(f"GPU {i}: NVIDIA Fake (UUID: GPU-{i})\\n" for i in range(gpus))
        smi.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
        smi.chmod(0o755)
        if mps:
            ctl = b / batch.MPS_CONTROL
            ctl.write_text(f"""#!/bin/sh
if [ "$1" = "-d" ]; then line=""; touch {b}/mps.running; else read -r line; fi
echo "$*|$line|$CUDA_MPS_PIPE_DIRECTORY|$CUDA_VISIBLE_DEVICES" >> {b}/mps.log
case "$line" in
  get_server_list) [ -e {b}/mps.running ] || exit 1 ;;
  quit) rm -f {b}/mps.running ;;
esac
exit 0
""")
            ctl.chmod(0o755)
        return b

    return make


def _env_job(extra: str = "") -> str:
    """A fake job printing what the batch set for it (one JSON line), then ``extra``."""
    code = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in ('CUDA_VISIBLE_DEVICES', "
            "'FIGHTLAB_CONCURRENT', 'FIGHTLAB_MPS', 'FIGHTLAB_GPU_JOBS', 'CUDA_MPS_PIPE_DIRECTORY')}))"
            + extra)
    return f"python -c {json.dumps(code)}"


def _state(folder: Path) -> dict:
    return json.loads((folder / batch.STATE).read_text())


def _seen(folder: Path, job: dict) -> dict:
    log = (folder / "jobs" / job["id"] / "log.txt").read_text().splitlines()
    return json.loads(next(ln for ln in log if ln.startswith("{")))


# --- grid, jobs, refusals --------------------------------------------------------------------

def test_grid_expansion_and_list_values():
    assert batch.split_values("1,[2,3],'a,b',{x: 1, y: 2}") == ["1", "[2,3]", "'a,b'", "{x: 1, y: 2}"]
    grid = batch.parse_grid(["seed=1,2,3,4", "body=simple,muscular-fast"])
    points = batch.expand(grid)
    assert len(points) == 8 and points[0] == {"seed": "1", "body": "simple"}
    assert points[1] == {"seed": "1", "body": "muscular-fast"} and points[-1] == {"seed": "4", "body": "muscular-fast"}
    assert batch.expand(batch.parse_grid(["env.push_impulse_ns=[20,40],[10,20]"])) == [
        {"env.push_impulse_ns": "[20,40]"}, {"env.push_impulse_ns": "[10,20]"}]
    assert batch.expand([]) == [{}]
    # --set is one value, never split
    jobs = batch.make_jobs([batch.parse_job("train --nworld 2")], batch.parse_grid(["seed=1,2"]),
                           batch.parse_sets(["env.push_impulse_ns=[20,40]"]), ["train"])
    assert [j.argv for j in jobs] == [
        ["train", "--nworld", "2", "--seed", s, "--set", "env.push_impulse_ns=[20,40]"] for s in ("1", "2")]
    assert [j.id for j in jobs] == ["000-train-seed=1", "001-train-seed=2"]
    # a TrainConfig field without its own flag goes through train's --set
    from fightlab.cli import JOB_COMMANDS, check_job

    (job,) = batch.make_jobs([batch.parse_job("train")], batch.parse_grid(["curriculum_wait=5"]), [],
                             JOB_COMMANDS, check_job=check_job)
    assert job.argv == ["train", "--set", "curriculum_wait=5"]


def test_a_jobs_file_that_is_not_utf8_is_one_line(tmp_path, capsys, fakebin):
    fakebin(gpus=0)
    f = tmp_path / "jobs.txt"
    f.write_bytes(b"\xff\xfetrain --device cpu\n")
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--no-progress", "--jobs", str(f)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "is not UTF-8 text (byte 0" in err and "\n" not in err, err
    f.write_bytes("\ufefftrain --device cpu\n".encode())  # a byte-order mark: read as the text after it
    assert [j.argv for j in batch.read_jobs_file(f)] == [["train", "--device", "cpu"]]


@pytest.mark.parametrize("args, expect", [
    (["--job", "train", "--grid", "seed="], "--grid 'seed=': empty grid value"),
    (["--job", "train", "--grid", "seed=1,,2"], "empty grid value"),
    (["--job", "train", "--grid", "seed"], "--grid expects KEY=VALUE, got 'seed'"),
    (["--job", "train", "--grid", "seed=1", "--grid", "seed=2"], "--grid seed given twice"),
    (["--job", "train", "--grid", "seed=1,1"], "value '1' given twice"),
    (["--job", "train --device cpu", "--grid", "seed=1,01"], "--grid points 'seed=1' and 'seed=01' of job 'train --device cpu' run the same"),
    (["--job", "train", "--grid", "ppo.clip_coef=0.5,0.50"], "'ppo.clip_coef=0.5' and 'ppo.clip_coef=0.50'"),
    (["--job", "train", "--grid", "backend=gpu,warp"], "'backend=gpu' and 'backend=warp' of job 'train' run the same"),
    (["--job", "train", "--grid", "env.push_interval_s=[1,3],[1.0, 3.0]"], "run the same"),
    (["--job", "train", "--grid", "ppo.desired_kl=null,none"], "run the same"),
    (["--job", "evaluate --zero-action --body simple --device cpu", "--grid", "seed=1,01"], "run the same"),
    (["--job", "notebook 06", "--grid", "size=smoke,'smoke'"], "run the same"),
    (["--job", "train", "--concurrent", "0"], "--concurrent must be a positive integer (jobs at once per GPU), got '0'"),
    (["--job", "train", "--concurrent", "two"], "--concurrent must be a positive integer"),
    (["--job", "frobnicate --x 1"], "unknown command 'frobnicate' in job 'frobnicate --x 1'; commands: train, evaluate"),
    (["--job", "batch"], "unknown command 'batch'"),
    (["--job", "train", "--grid", "bogus=1,2"], "job 'train --bogus 1': unrecognized arguments: --bogus 1"),
    (["--job", "profile --what nope"], "argument --what: invalid choice: 'nope'"),
    (["--job", "train", "--grid", "ppo.learning_rate=abc,1e-3"], "PPOConfig.learning_rate must be a finite number, got 'abc'"),
    (["--job", "train --run-dir runs/x", "--grid", "seed=1,2"], "is given to 2 training jobs; each job needs its own"),
    (["--resume", "no-such-batch"], "--resume no-such-batch: no batch.json there or under"),
    (["--job", "python no_such_script.py"], "script 'no_such_script.py' not found"),
    (["--job", "notebook 99"], "unknown notebook '99'; notebooks: 00"),
    ([], "batch needs jobs"),
    (["--job", "train", "--budget-s", "-1"], "--budget-s must be a positive number of seconds, got -1.0"),
    # values, not only keys and types, before any job starts
    (["--job", "train --device cpu --nworld 2", "--grid", "body=simple,robot"], "unknown body 'robot'"),
    (["--job", "train --device cpu", "--grid", "ppo.kl_estimator=k3,bogus"],
     "PPOConfig.kl_estimator must be one of k3, analytic, got 'bogus'"),
    (["--job", "train --device cpu", "--set", "ppo.clip_coef=5"], "PPOConfig.clip_coef must be a number in (0, 1]"),
    (["--job", "train --device cpu --max-iterations 0"], "max_iterations must be a positive integer"),
    (["--job", "train --device cpu --segment-s 0"], "segment_s must be a positive number of seconds"),
    (["--job", "train --device cpu --nworld 2 --publish"], "device 'cpu' is not a GPU"),
    (["--job", "train --backend tpu"], "backend must be one of gpu, cpu, got 'tpu'"),
    (["--job", "train", "--retry-failed"], "--retry-failed runs a batch's failed jobs again and needs --resume"),
])
def test_bad_input_is_one_line(args, expect, tmp_path, capsys, fakebin):
    fakebin(gpus=0)
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--no-progress", *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("fightlab: error: ") and "\n" not in err, err
    assert expect in err, err


def test_notebook_unknown_parameter_refused(tmp_path, capsys, fakebin):
    """papermill only warns "Passed unknown parameter" and injects it: the batch refuses it, with
    the notebook's parameters listed (papermill.inspect_notebook)."""
    fakebin(gpus=0)
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--job", "notebook 06 size=smoke",
               "--grid", "nope=1,2"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "notebook 06_train.ipynb has no parameter 'nope'; its parameters: " in err
    assert "size" in err.split("its parameters: ")[1] and "device" in err
    assert not (tmp_path / "b").exists()  # refused before anything was written


def test_gpu_that_does_not_exist(tmp_path, capsys, fakebin):
    fakebin(gpus=1)
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--job", _env_job(), "--gpus", "0,3"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == "fightlab: error: --gpus 0,3: no GPU 3 on this host; its GPUs: 0"
    assert batch.discover_gpus() == {0: "GPU-0"}
    assert [ln.name for ln in batch.make_lanes(None, [], 2)] == ["cpu"]  # no GPU: one CPU lane


def test_a_grid_past_the_limit_is_refused_before_it_is_built(tmp_path, capsys, fakebin):
    """A grid of millions of points: one line naming the size and the limit, at once (the cross
    product is never built, no job checked)."""
    fakebin(gpus=0)
    values = ",".join(str(i) for i in range(2000))
    t0 = time.monotonic()
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--job", "train --nworld 2",
               "--grid", f"seed={values}", "--grid", f"ppo.num_steps={values}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and time.monotonic() - t0 < 10
    assert err == (f"fightlab: error: the batch would hold 4,000,000 jobs (1 job line(s) × 2000 seed × 2000 "
                   f"ppo.num_steps); at most {batch.MAX_JOBS:,}: split it into smaller batches")
    assert not (tmp_path / "b").exists()
    assert batch.check_size(2, [("seed", ["1"] * 100)]) == 200


def test_the_batch_flags_are_checked_before_its_jobs(tmp_path, capsys, fakebin):
    """A 100 × 100 grid with a bad --gpus: the flag's line at once, not after checking 10,000 jobs."""
    fakebin(gpus=0)
    values = ",".join(str(i) for i in range(100))
    t0 = time.monotonic()
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--job", "train --nworld 2",
               "--grid", f"seed={values}", "--grid", f"max_iterations={values}", "--gpus", "zero"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == ("fightlab: error: --gpus takes GPU indices such as 0,1, all, or none (one "
                               "CPU lane), got 'zero'")
    assert time.monotonic() - t0 < 10 and not (tmp_path / "b").exists()
    for flag, value, said in (("--budget-s", "-1", "--budget-s must be a positive number of seconds"),
                              ("--job-timeout-s", "nan", "--job-timeout-s must be a positive number")):
        rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--job", "train --nworld 2",
                   "--grid", f"seed={values}", flag, value])
        assert rc == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("run_dir", ["/", "/usr/lib", "HOME"])
def test_a_job_whose_run_folder_is_refused_never_starts(tmp_path, capsys, fakebin, run_dir):
    """A training job with a --run-dir its run would refuse (a protected place, a non-empty
    folder fightlab did not make) is refused with the batch, before any job starts: nothing of
    that folder reaches the batch's folder or its archive."""
    fakebin(gpus=0)
    run_dir = str(Path.home()) if run_dir == "HOME" else run_dir
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--job", f"train --nworld 2 --run-dir {run_dir}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and f"run folder {run_dir!r}" in err
    assert not (tmp_path / "b").exists()


def test_one_parse_gives_a_jobs_refusal_and_identity():
    """`cli.check_job`: (None, identity) for a job the command line takes, (line, None) else."""
    from fightlab.cli import check_job

    why, same = check_job(["train", "--nworld", "2", "--seed", "01"])
    assert why is None and same == check_job(["train", "--nworld", "02", "--seed", "1"])[1]
    assert check_job(["train", "--set", "ppo.hidden=[0]"]) == ("PPOConfig.hidden must be positive integers, "
                                                                "got (0,)", None)


# --- lanes and MPS ---------------------------------------------------------------------------

def test_scheduling_over_two_fake_gpus(tmp_path, capsys, fakebin):
    """2 fake GPUs × K=2, 7 jobs: never more than 2 at once per lane, each job on its lane's GPU
    with the packing in its environment; MPS missing: one line, jobs time-slice."""
    fakebin(gpus=2)
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--concurrent", "2",
               "--job", _env_job("; import time; time.sleep(0.3)"), "--grid", "x=" + ",".join("1234567")])
    out = capsys.readouterr()
    assert rc == 0, out
    assert "CUDA MPS is not available (nvidia-cuda-mps-control not found on PATH): jobs sharing a GPU time-slice" in out.err
    st = _state(folder)
    assert st["lanes"] == ["gpu0", "gpu1"] and st["mps"] is False
    jobs = st["jobs"]
    assert {j["status"] for j in jobs} == {"done"} and {j["lane"] for j in jobs} == {"gpu0", "gpu1"}
    for lane in ("gpu0", "gpu1"):
        spans = [(j["started"], j["ended"]) for j in jobs if j["lane"] == lane]
        at_once = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
        assert 1 <= at_once <= 2
    for j in jobs:
        seen = _seen(folder, j)
        assert seen["CUDA_VISIBLE_DEVICES"] == "GPU-" + j["lane"][3:]  # its UUID (nvidia-smi -L)
        assert (seen["FIGHTLAB_CONCURRENT"], seen["FIGHTLAB_MPS"], seen["FIGHTLAB_GPU_JOBS"]) == ("2", "0", "4")
    assert re.search(r"000-py-x=1\s+gpu0\s+done\s+[\d.]+\s+0", out.out)  # the summary table


def test_mps_started_for_the_batch_and_stopped(tmp_path, capsys, fakebin):
    b = fakebin(gpus=1, mps=True)
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--concurrent", "2",
               "--job", _env_job(), "--grid", "x=1,2"])
    assert rc == 0
    calls = (b / "mps.log").read_text().splitlines()
    pipe = str(folder / "mps" / "pipe")
    assert calls == ["|get_server_list||", f"-d||{pipe}|GPU-0", f"|quit|{pipe}|"]
    assert not (b / "mps.running").exists()
    assert "CUDA MPS started for the batch" in capsys.readouterr().err
    st = _state(folder)
    assert st["mps"] is True and st["mps_started"] is True  # this batch started it (and quit it: calls)
    for j in st["jobs"]:
        seen = _seen(folder, j)
        assert (seen["FIGHTLAB_MPS"], seen["CUDA_MPS_PIPE_DIRECTORY"]) == ("1", pipe)


def test_mps_already_running_is_used_and_left_alone(tmp_path, capsys, fakebin):
    b = fakebin(gpus=1, mps=True)
    (b / "mps.running").touch()
    folder = tmp_path / "b"
    assert main(["batch", "--batch-dir", str(folder), "--no-progress", "--concurrent", "2",
                 "--job", _env_job(), "--grid", "x=1,2"]) == 0
    assert (b / "mps.log").read_text().splitlines() == ["|get_server_list||"]  # no -d, no quit
    assert (b / "mps.running").exists()
    assert "using the CUDA MPS daemon already running (left running)" in capsys.readouterr().err
    assert all(_seen(folder, j)["FIGHTLAB_MPS"] == "1" for j in _state(folder)["jobs"])


# --- failures, limits, budget, resume ---------------------------------------------------------

def test_crash_and_timeout_do_not_stop_the_batch(tmp_path, capsys, fakebin):
    """A crashing job is marked failed with its log tail; a job over its time limit is killed
    with its whole process group (its child too); the other jobs run."""
    fakebin(gpus=0)
    folder = tmp_path / "b"
    pidfile = tmp_path / "child.pid"
    sleeper = ("import subprocess, time; p = subprocess.Popen(['sleep', '600']); "
               f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(600)")
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("# a crash, a hang, a good job\n"
                    "python -c \"raise SystemExit('boom: the job crashed')\"\n\n"
                    f"python -c {json.dumps(sleeper)}\n"
                    "python -c \"print('fine')\"\n")
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--jobs", str(jobs),
               "--job-timeout-s", "2"])
    out = capsys.readouterr().out
    assert rc == 1
    crash, hang, good = _state(folder)["jobs"]
    assert (crash["status"], crash["rc"]) == ("failed", 1) and "boom: the job crashed" in crash["tail"]
    assert hang["status"] == "timeout" and hang["rc"] != 0
    assert good["status"] == "done"
    assert _gone(int(pidfile.read_text()))
    assert "boom: the job crashed" in out and "3 job(s) not done" not in out and "2 job(s) not done" in out


def test_budget_then_resume(tmp_path, capsys, fakebin):
    """No job starts with less than --min-left-s of the budget left; --resume runs them."""
    fakebin(gpus=0)
    folder = tmp_path / "b"
    assert main(["batch", "--batch-dir", str(folder), "--no-progress", "--job", _env_job(),
                 "--grid", "x=1,2", "--budget-s", "5", "--min-left-s", "10"]) == 1
    st = _state(folder)
    assert [j["status"] for j in st["jobs"]] == ["budget", "budget"]
    assert not (folder / "jobs").exists()
    # a fresh batch in the same folder is refused; so are jobs with --resume
    assert main(["batch", "--batch-dir", str(folder), "--job", _env_job()]) == 2
    assert "holds a batch already: continue it with --resume" in capsys.readouterr().err
    assert main(["batch", "--resume", str(folder), "--job", _env_job()]) == 2
    assert "--resume takes its jobs from the batch's batch.json" in capsys.readouterr().err
    # resumed, the batch keeps its budget (still too small); a new budget runs them
    assert main(["batch", "--resume", str(folder), "--no-progress"]) == 1
    assert [j["status"] for j in _state(folder)["jobs"]] == ["budget", "budget"]
    assert main(["batch", "--resume", str(folder), "--no-progress", "--budget-s", "600"]) == 0
    st = _state(folder)
    assert [j["status"] for j in st["jobs"]] == ["done", "done"] and st["resumes"] == 2
    # a finished batch resumed runs nothing again
    assert main(["batch", "--resume", str(folder), "--no-progress"]) == 0
    assert [j["attempts"] for j in _state(folder)["jobs"]] == [1, 1]


def test_resume_after_kill_9(tmp_path, fakebin):
    """The first job kills the batch process (kill -9, as a lost machine would): the state says
    it was running; the resumed batch runs it and the rest, the log keeps both attempts."""
    fakebin(gpus=0)
    folder = tmp_path / "b"
    marker = tmp_path / "killed-once"
    killer = (f"import os, signal; m = {str(marker)!r}\n"
              "if not os.path.exists(m):\n    open(m, 'w').close(); os.kill(os.getppid(), signal.SIGKILL)\n"
              "print('second attempt')")
    r = subprocess.run([PY, "-m", "fightlab", "batch", "--batch-dir", str(folder), "--no-progress",
                        "--job", f"python -c {shlex.quote(killer)}", "--job", _env_job()],
                       capture_output=True, text=True, timeout=300,
                       cwd=str(Path(__file__).resolve().parents[1]))
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert [j["status"] for j in _state(folder)["jobs"]] == ["running", "pending"]
    assert main(["batch", "--resume", str(folder), "--no-progress"]) == 0
    first, second = _state(folder)["jobs"]
    assert (first["status"], first["attempts"], second["status"]) == ("done", 2, "done")
    log = (folder / "jobs" / first["id"] / "log.txt").read_text()
    assert log.count("=== batch b attempt") == 2 and "second attempt" in log


def test_one_batch_per_folder_and_nothing_deleted(tmp_path, capsys, fakebin):
    fakebin(gpus=0)
    folder = tmp_path / "b"
    assert main(["batch", "--batch-dir", str(folder), "--no-progress", "--job", _env_job()]) == 0
    fd = os.open(folder / batch.LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another batch holds the folder
    try:
        assert main(["batch", "--resume", str(folder), "--retry-failed", "--no-progress"]) == 2
        assert "is in use by another batch" in capsys.readouterr().err
    finally:
        os.close(fd)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    assert main(["batch", "--batch-dir", str(other), "--job", _env_job()]) == 2
    assert "is not empty and not a batch's" in capsys.readouterr().err
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_training_job_command_resumes_from_its_checkpoint(tmp_path):
    job = batch.make_jobs([batch.parse_job("train --body simple --nworld 2 --set ppo.num_steps=4")],
                          [], [], ["train"])[0]
    cmd = batch.job_command(job, tmp_path, left_s=None, min_left_s=60)
    run = tmp_path / "jobs" / job.id / "run"
    assert cmd[1:] == ["-m", "fightlab", "train", "--body", "simple", "--nworld", "2", "--set",
                       "ppo.num_steps=4", "--run-dir", str(run), "--no-progress"]
    run.mkdir(parents=True)
    (run / "latest.pt").write_bytes(b"")
    cmd = batch.job_command(job, tmp_path, left_s=400, min_left_s=60)
    assert cmd[3:] == ["train", "--body", "simple", "--nworld", "2", "--run-dir", str(run),
                       "--resume", str(run / "latest.pt"), "--no-progress", "--segment-s", "340"]
    assert job.run_dir == str(run.resolve())


def test_archive_leaves_checkpoints_out_unless_asked(tmp_path):
    folder = tmp_path / "b"
    (folder / "jobs" / "000" / "run").mkdir(parents=True)
    for name in ("jobs/000/log.txt", "jobs/000/run/ckpt_000002.pt", "jobs/000/run/rows.csv",
                 "jobs/000/run/.fightlab-run.lock", batch.STATE):
        (folder / name).write_text("x")
    (folder / "jobs/000/run/latest.pt").symlink_to("ckpt_000002.pt")
    for ckpt in (False, True):
        with tarfile.open(batch.archive(folder, ckpt)) as tar:
            names = sorted(tar.getnames())
            if ckpt:  # the link comes along with the checkpoints, as a link
                assert tar.getmember("b/jobs/000/run/latest.pt").linkname == "ckpt_000002.pt"
        assert ("b/jobs/000/run/ckpt_000002.pt" in names) is ckpt
        assert ("b/jobs/000/run/latest.pt" in names) is ckpt
        assert "b/jobs/000/run/.fightlab-run.lock" not in names
        assert "b/jobs/000/log.txt" in names and "b/batch.json" in names and "b/batch.tar.gz" not in names


# --- real jobs ---------------------------------------------------------------------------------

def test_real_tiny_training_through_the_batch(tmp_path, capsys, fakebin):
    """Two tiny CPU trainings packed 2 at once: each row records concurrent=2 (mps off, one lane)."""
    fakebin(gpus=0)
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--concurrent", "2",
               "--job", "train --body simple --nworld 2 --device cpu --max-iterations 2 --checkpoint-every 1",
               "--grid", "seed=1,2", "--set", "ppo.num_steps=4"])
    out = capsys.readouterr()
    jobs = _state(folder)["jobs"]
    assert rc == 0, (out, [j["tail"] for j in jobs])
    for j, seed in zip(jobs, (1, 2)):
        run = Path(j["run_dir"])
        assert run == folder / "jobs" / j["id"] / "run" and (run / "latest.pt").is_file()
        row = (run / "data" / "results" / "train.csv").read_text()
        import pandas as pd

        df = pd.read_csv(run / "data" / "results" / "train.csv")
        p = json.loads(df["params"][0])
        assert int(df["seed"][0]) == seed and row
        assert (p["concurrent"], p["mps"], p["gpu_jobs"]) == (2, False, 2)
    with tarfile.open(folder / batch.ARCHIVE) as tar:
        names = tar.getnames()
    assert any(n.endswith("/run/data/results/train.csv") for n in names)
    assert any(n.endswith("/log.txt") for n in names) and not any(n.endswith(".pt") for n in names)
    # the batch's packing row: K = 2 trainings, aggregate rate = K / median seconds per iteration
    from fightlab import results
    from fightlab.measure import packing

    row = packing.publish_batch(folder, tmp_path / "root", skip=1)
    assert (row["concurrent"], row["mps"], row["runs"], row["body"], row["nworld"]) == (2, False, 2, "simple", 2)
    assert row["it_per_s_aggregate"] == pytest.approx(2 / row["s_per_iter"])
    assert row["s_per_iter_min"] <= row["s_per_iter"] <= row["s_per_iter_max"]
    assert row["gpus"] == 1 and row["solves_per_hour"] is None  # one lane; 2 iterations solve nothing
    assert len(results.read_rows("packing", tmp_path / "root")) == 1
    # the same trainings as if on two GPU lanes: K = 1 per GPU, the aggregate counts both GPUs
    st = _state(folder)
    for j, lane in zip(st["jobs"], ("gpu0", "gpu1")):
        j["lane"] = lane
    (folder / batch.STATE).write_text(json.dumps(st))
    two = packing.batch_row(folder, skip=1)
    assert (two["gpus"], two["concurrent"]) == (2, 1)
    assert two["it_per_s_aggregate"] == pytest.approx(2 / two["s_per_iter"])
    assert packing.main([str(folder), "--skip", "1"]) == 0
    assert packing.main([str(tmp_path)]) == 2 and "no batch.json" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="no training with more than 5 iterations"):
        packing.batch_row(folder, skip=5)
    # --until: only iterations skip+1 … until count (the stretch where all K trainings run)
    import numpy as np

    first = [float(pd.read_csv(Path(j["run_dir"]) / "rows.csv").query("iteration == 1")["wall_s"].iloc[0])
             for j in jobs]
    one = packing.batch_row(folder, skip=0, until=1)
    assert one["s_per_iter"] == pytest.approx(float(np.median(first))) and json.loads(one["params"])["until"] == 1
    with pytest.raises(ConfigError, match="until=1 must be above skip=1"):
        packing.batch_row(folder, skip=1, until=1)
    assert packing.main([str(folder), "--skip", "1", "--until", "1"]) == 2
    with pytest.raises(ConfigError, match="skip=-1 must be >= 0"):
        packing.batch_row(folder, skip=-1)


def test_notebook_job_runs_with_papermill(tmp_path, capsys, fakebin):
    import nbformat

    fakebin(gpus=0)
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("a = 1\nname = 'x'")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("import os\nprint('cwd', os.path.basename(os.getcwd()), a * 10, name)")]
    nb.metadata["kernelspec"] = dict(name="python3", display_name="Python 3", language="python")
    src = tmp_path / "tiny.ipynb"
    nbformat.write(nb, src)
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress",
               "--job", f"notebook {src} name=y", "--grid", "a=2,[3]"])
    (j1, j2) = _state(folder)["jobs"]
    assert rc == 0, [j1["tail"], j2["tail"]]
    assert j1["params"] == {"name": "y", "a": 2} and j2["params"] == {"name": "y", "a": [3]}
    done = nbformat.read(folder / "jobs" / j1["id"] / "tiny.ipynb", as_version=4)
    assert "cwd notebooks 20 y" in done.cells[-1].outputs[0]["text"]


def test_bench_jobs_example_expands():
    """bench/jobs_example.txt (the bench's batch, after gpu_lanes.sh) is a valid jobs file."""
    from fightlab.cli import JOB_COMMANDS, check_job

    root = Path(__file__).resolve().parents[1]
    jobs = batch.make_jobs(batch.read_jobs_file(root / "bench" / "jobs_example.txt"),
                           [], [], JOB_COMMANDS, check_job=check_job)
    assert [j.kind for j in jobs] == ["fightlab", "fightlab", "notebook"]
    assert jobs[2].params == dict(size="full", device="cuda:0", publish=True)
    assert not (root / "bench" / "gpu_lanes.sh").exists()


def _start_and_wait_running(folder: Path, job: str) -> tuple[subprocess.Popen, dict]:
    """A batch in a subprocess with one job; returns once batch.json says the job runs."""
    import time

    p = subprocess.Popen([PY, "-m", "fightlab", "batch", "--batch-dir", str(folder), "--no-progress",
                          "--job", job], cwd=str(Path(__file__).resolve().parents[1]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(3000):  # waits for a state, asserts no duration
        st = _state(folder) if (folder / batch.STATE).exists() else None
        if st and st["jobs"][0]["status"] == "running" and st["jobs"][0]["pid"]:
            return p, st["jobs"][0]
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    raise AssertionError("the job never started")


def _alive(pid: int) -> bool:
    """The process runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def _gone(pid: int) -> bool:
    """Waits (a bounded number of polls, no duration asserted) for a killed process to go."""
    import time

    for _ in range(200):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_sigterm_stops_the_jobs_and_saves_the_state(tmp_path, fakebin):
    fakebin(gpus=0)
    folder = tmp_path / "b"
    p, job = _start_and_wait_running(folder, "python -c 'import time; time.sleep(600)'")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "continue with python -m fightlab batch --resume" in err
    st = _state(folder)
    assert st["jobs"][0]["status"] == "interrupted" and (folder / batch.ARCHIVE).is_file()
    assert _gone(job["pid"])


def test_resume_stops_a_job_that_outlived_its_batch(tmp_path, fakebin):
    fakebin(gpus=0)
    folder = tmp_path / "b"
    marker = tmp_path / "first"
    code = (f"import os, time; m = {str(marker)!r}\n"
            "if not os.path.exists(m):\n    open(m, 'w').close(); time.sleep(600)\nprint('quick')")
    p, job = _start_and_wait_running(folder, f"python -c {shlex.quote(code)}")
    p.kill()  # kill -9: the job (its own session) lives on
    p.communicate(timeout=60)
    assert _alive(job["pid"])
    assert main(["batch", "--resume", str(folder), "--no-progress"]) == 0
    assert _gone(job["pid"])
    assert _state(folder)["jobs"][0]["status"] == "done"


# --- found by the break-it review ------------------------------------------------------------

def test_resume_keeps_the_batch_options(tmp_path, capsys, fakebin):
    """A resumed batch runs with the options it was started with (concurrent, budget, time
    limit, ...) unless they are given again."""
    fakebin(gpus=0)
    folder = tmp_path / "b"
    assert main(["batch", "--batch-dir", str(folder), "--no-progress", "--job", _env_job(),
                 "--grid", "x=1,2,3", "--concurrent", "3", "--job-timeout-s", "50",
                 "--budget-s", "5", "--min-left-s", "10"]) == 1   # nothing fits the budget
    assert batch.saved_options(folder) == dict(concurrent=3, job_timeout_s=50.0, budget_s=5.0,
                                               min_left_s=10.0, no_mps=False, with_checkpoints=False)
    assert main(["batch", "--resume", str(folder), "--no-progress", "--budget-s", "600"]) == 0
    st = _state(folder)
    assert st["concurrent"] == 3 and st["job_timeout_s"] == 50.0 and st["budget_s"] == 600.0
    assert {_seen(folder, j)["FIGHTLAB_CONCURRENT"] for j in st["jobs"]} == {"3"}


@pytest.mark.parametrize("args, expect", [
    (["--job", "train --body simple", "--grid", "seed=1,2", "--set", "seed=3"],
     "'seed' is given by --grid and by --set"),
    (["--job", "train --body simple --seed 9", "--grid", "seed=1,2"],
     "sets 'seed' itself and --grid/--set set it again"),
    (["--job", "train --body simple --set ppo.gamma=0.9", "--grid", "ppo.gamma=0.99,0.98"],
     "sets 'ppo.gamma' itself"),
    (["--job", "notebook 06 size=smoke", "--grid", "size=smoke,full"], "sets 'size' itself"),
])
def test_a_key_set_twice_is_refused(args, expect, tmp_path, capsys, fakebin):
    fakebin(gpus=0)
    assert main(["batch", "--batch-dir", str(tmp_path / "b"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fightlab: error: ") and expect in err, err


def test_a_training_under_a_time_limit_ends_its_segment_before_it(tmp_path):
    job = batch.make_jobs([batch.parse_job("train --body simple --nworld 2")], [], [], ["train"])[0]
    cmd = batch.job_command(job, tmp_path, left_s=8 - 2 + 60, min_left_s=60)  # what run_batch gives for 8 s
    assert cmd[-2:] == ["--segment-s", "6.00"]


def test_packed_throughput_leaves_out_runs_without_a_wall_time(capsys):
    import pandas as pd

    from fightlab.measure.report import packed_throughput

    base = dict(body="simple", setup="dense", commit="c", gpu="g", nworld=1024, config="x", task="default",
                concurrent=4, mps="False", solved=True, iterations=500, rollout_s_per_iter=0.3,
                update_s_per_iter=0.1, compile_s=10.0)
    df = pd.DataFrame([dict(base, time_to_solve_s=200.0), dict(base, time_to_solve_s=200.0),
                       dict(base, time_to_solve_s=float("nan"))])
    out = packed_throughput(df, price_per_gpu_hour=2.0)
    assert "1 run(s) without a wall time" in capsys.readouterr().out
    r = out.iloc[0]
    assert out.index[0][-1] is False or out.index[0][-1] == False  # noqa: E712 — "False" is not True
    assert r["n_runs"] == 2 and r["n_solved"] == 2
    assert r["gpu_hours"] == pytest.approx(2 * 210 / 4 / 3600)


def test_every_committed_study_jobs_file_is_a_valid_batch():
    """bench/studies/*.jobs (the GPU sessions' learner studies and solve batches): each line a
    train job the command line accepts (flags, --set keys and values), so a GPU call never
    fails on a typo. With the seed grid bench/gpu.sh gives a file, or none where its lines name
    their seeds."""
    import re

    from fightlab import batch
    from fightlab.cli import JOB_COMMANDS, check_job
    from fightlab.paths import REPO_ROOT

    script = (REPO_ROOT / "bench" / "gpu.sh").read_text()
    files = sorted((REPO_ROOT / "bench" / "studies").glob("*.jobs"))
    assert files
    for f in files:
        spec = re.search(r'\[\w+\]="\d+\|@bench/studies/' + re.escape(f.name) + r'\|([^"]*)"', script)
        assert spec, f"{f.name} is not a study of bench/gpu.sh"
        grid = batch.parse_grid(re.findall(r"--grid (\S+)", spec.group(1)))
        jobs = batch.make_jobs(batch.read_jobs_file(f), grid, [], JOB_COMMANDS, check_job=check_job)
        assert jobs and all(j.argv[0] == "train" for j in jobs), f.name
        seeds = [j.argv[j.argv.index("--seed") + 1] if "--seed" in j.argv else None for j in jobs]
        assert len(jobs) == len(set(map(tuple, (j.argv for j in jobs)))), f"{f.name}: a job twice"
        assert all(s is not None for s in seeds) or grid, f"{f.name}: no seed given"


def test_cuda_jobs_on_a_host_without_gpu_are_refused_before_any_start(tmp_path, capsys, fakebin):
    """A batch whose jobs ask for --device cuda… on a host with no GPU stops at once with one
    line naming the job and its device, and writes no batch folder; with a GPU it is not refused."""
    fakebin(gpus=0)
    jobs = tmp_path / "gpu.jobs"
    jobs.write_text("train --body simple --nworld 2 --device cuda:0 --max-iterations 1\n"
                    "train --body simple --nworld 2 --device=cuda --max-iterations 1\n"
                    "train --body simple --nworld 2 --device cpu --max-iterations 1\n")
    rc = main(["batch", "--jobs", str(jobs), "--batch-dir", str(tmp_path / "b"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and "asks for --device cuda:0 but the batch has no GPU lane" in err and "2 of 3 job(s)" in err, err
    assert not (tmp_path / "b").exists()
    parsed = batch.read_jobs_file(jobs)
    batch.check_devices(parsed[2:], batch.make_lanes(None, [], 1))        # a CPU job on the CPU lane
    batch.check_devices(parsed, batch.make_lanes(None, [0], 1))          # a GPU lane: not refused


def test_summary_tail_shows_every_jobs_last_line():
    from fightlab.batch import TAIL_CHARS, Job, summary_table, summary_tail

    done = Job(id="j1", kind="fightlab", status="done", tail="run x simple solved=True\nrun folder: runs/train/a")
    failed = Job(id="j2", kind="python", status="failed", tail="Traceback …\nValueError: boom")
    long = Job(id="j3", kind="python", status="failed", tail="fightlab: error: " + "x" * 300)
    assert summary_tail(done) == "run folder: runs/train/a"
    assert summary_tail(failed) == "ValueError: boom"
    assert summary_tail(Job(id="j4", kind="python")) == ""
    t = summary_tail(long)
    assert len(t) == TAIL_CHARS and t.startswith("fightlab: error: xxx") and t.endswith("…")
    assert summary_table([done, failed])["tail"].tolist() == ["run folder: runs/train/a", "ValueError: boom"]


@pytest.mark.parametrize("grid", ["workers=1,2", "worlds_per_worker=1,2", "policy_device=cpu,cuda:0",
                                  "run_dir=/tmp/fl-x1,/tmp/fl-x01", "device=cpu,cuda:0"])
def test_grid_points_that_differ_in_a_flag_outside_the_config_are_kept(grid):
    """Points that differ in a flag the config does not fold in are two jobs, never 'the same'."""
    from fightlab.cli import JOB_COMMANDS, check_job

    base = "train --backend cpu --max-iterations 2" if "work" in grid or "policy" in grid else "train --nworld 4"
    jobs = batch.make_jobs([batch.parse_job(base)], batch.parse_grid([grid]), [], JOB_COMMANDS,
                           check_job=lambda a: (None, check_job(a)[1]))
    assert len(jobs) == 2
    ids = [check_job(j.argv)[1] for j in jobs]
    assert None not in ids and ids[0] != ids[1]  # compared, and found different
    assert check_job(jobs[0].argv)[0] is None or "cuda" in grid  # a job the command line takes


# --- several GPUs: placement, MPS once for the host, a dead or slow GPU (fake lanes) --------------

def _lane_job(spec: Path, extra_keys: tuple = ()) -> str:
    """A fake job that acts by the GPU it was given (``spec``: JSON, CUDA_VISIBLE_DEVICES -> seconds
    to sleep, or "die": SIGKILL itself, as a job whose GPU fell off the bus), after printing what
    the batch set for it (one JSON line)."""
    keys = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "FIGHTLAB_CONCURRENT", "FIGHTLAB_GPU_JOBS", *extra_keys)
    code = (f"import json, os, signal, time; d = os.environ.get('CUDA_VISIBLE_DEVICES'); "
            f"print(json.dumps({{k: os.environ.get(k) for k in {keys!r}}}), flush=True); "
            f"act = json.load(open({str(spec)!r})).get(d, 0.2); "
            "os.kill(os.getpid(), signal.SIGKILL) if act == 'die' else time.sleep(act)")
    return f"python -c {json.dumps(code)}"


def _per_lane(jobs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for j in jobs:
        out.setdefault(j["lane"], []).append(j)
    return out


@pytest.mark.parametrize("gpus, args, expect", [
    (2, ["--gpus", "0,0"], "--gpus 0,0: GPU 0 given twice; give each GPU once"),
    (2, ["--gpus", "1,0,1"], "GPU 1 given twice"),
    (2, ["--gpus", "0,5"], "--gpus 0,5: no GPU 5 on this host; its GPUs: 0, 1"),
    (0, ["--gpus", "all"], "--gpus all: this host has no GPU (nvidia-smi -L lists none)"),
    (0, ["--gpus", "0"], "--gpus 0: no GPU 0 on this host; its GPUs: none (nvidia-smi -L lists no GPU)"),
    (2, ["--concurrent", "49"], "--concurrent 49: at most 48 jobs at once per GPU (CUDA MPS serves 48 clients "
                                "per device); 2 GPU lane(s) run at most 96 jobs at once"),
    (2, ["--gpus", "all", "--concurrent", "100"], "--concurrent 100: at most 48 jobs at once per GPU"),
    (2, ["--gpus", ""], "--gpus '' names no GPU; give indices such as 0,1, all or none"),
    (2, ["--gpus", " "], "--gpus ' ' names no GPU"),
    (2, ["--gpus", "+1"], "--gpus takes GPU indices such as 0,1, all, or none (one CPU lane), got '+1'"),
    (2, ["--gpus", "\uff11"], "got '\uff11'"),  # a fullwidth 1
    (2, ["--gpus", "1_0"], "got '1_0'"),
    (2, ["--gpus", "0,"], "got '0,'"),
])
def test_bad_gpus_are_one_line_and_nothing_is_written(gpus, args, expect, tmp_path, capsys, fakebin):
    """`--gpus` naming a GPU that is not there, an index given twice, `all` without GPUs, more jobs
    at once per GPU than CUDA MPS serves: one line, exit 2, no batch folder."""
    fakebin(gpus=gpus)
    rc = main(["batch", "--batch-dir", str(tmp_path / "b"), "--no-progress", "--job", _env_job(),
               "--grid", "x=1,2", *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("fightlab: error: ") and "\n" not in err, err
    assert expect in err, err
    assert not (tmp_path / "b").exists()


def test_gpus_all_spreads_k_per_lane_over_four_gpus_under_one_mps_daemon(tmp_path, capsys, fakebin):
    """4 fake GPUs, --gpus all, K=2, 12 jobs: every lane runs jobs, never more than 2 at once on one,
    each job's CUDA_VISIBLE_DEVICES names its lane's GPU by UUID; one MPS daemon for the host,
    started seeing the 4 GPUs by UUID (the MPS docs: a daemon with CUDA_VISIBLE_DEVICES renumbers
    its clients' devices; UUIDs mean one GPU either way), quit at the end."""
    b = fakebin(gpus=4, mps=True)
    spec = tmp_path / "spec.json"
    spec.write_text("{}")
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--gpus", "all", "--concurrent", "2",
               "--job", _lane_job(spec, ("CUDA_MPS_PIPE_DIRECTORY",)), "--grid", "x=" + ",".join(map(str, range(12)))])
    out = capsys.readouterr()
    assert rc == 0, out
    st = _state(folder)
    assert st["lanes"] == ["gpu0", "gpu1", "gpu2", "gpu3"] and st["mps"] is True
    lanes = _per_lane(st["jobs"])
    assert sorted(lanes) == st["lanes"] and {j["status"] for j in st["jobs"]} == {"done"}
    for lane, jobs in lanes.items():
        spans = [(j["started"], j["ended"]) for j in jobs]
        assert max(sum(s <= t < e for s, e in spans) for t, _ in spans) <= 2
        for j in jobs:
            seen = _seen(folder, j)
            assert seen["CUDA_VISIBLE_DEVICES"] == "GPU-" + lane[3:] and seen["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
            assert (seen["FIGHTLAB_CONCURRENT"], seen["FIGHTLAB_GPU_JOBS"]) == ("2", "8")
            assert seen["CUDA_MPS_PIPE_DIRECTORY"] == str(folder / "mps" / "pipe")
    calls = (b / "mps.log").read_text().splitlines()
    pipe = str(folder / "mps" / "pipe")
    assert calls == ["|get_server_list||", f"-d||{pipe}|GPU-0,GPU-1,GPU-2,GPU-3", f"|quit|{pipe}|"]
    assert "one daemon for its 4 GPU(s)" in out.err


def test_a_dead_gpu_loses_no_job_and_runs_none_twice(tmp_path, capsys, fakebin):
    """2 fake GPUs, K=2, 8 jobs; every job on GPU 1 is killed (SIGKILL, as when its GPU falls off):
    the lane is set aside after LANE_FAILS failures, its failed jobs are recorded failed (none lost,
    none pending on it), GPU 0 runs the rest. `--resume --retry-failed` runs the failed jobs once
    more, on GPU 0 only; the finished ones never run again."""
    fakebin(gpus=2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"GPU-1": "die", "GPU-0": 0.3}))
    folder = tmp_path / "b"
    job = _lane_job(spec)
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--concurrent", "2",
               "--job", job, "--grid", "x=" + ",".join(map(str, range(8)))])
    out = capsys.readouterr()
    assert rc == 1, out
    st = _state(folder)
    failed = [j for j in st["jobs"] if j["status"] == "failed"]
    assert len(st["jobs"]) == 8 and {j["status"] for j in st["jobs"]} == {"done", "failed"}
    assert {j["lane"] for j in failed} == {"gpu1"} and batch.LANE_FAILS <= len(failed) <= 3
    assert all(j["rc"] == -signal.SIGKILL for j in failed)
    assert {j["lane"] for j in st["jobs"] if j["status"] == "done"} == {"gpu0"}
    assert list(st["lanes_down"]) == ["gpu1"] and "gpu1: 2 jobs failed in a row on it: set aside" in out.err
    assert all(j["attempts"] == 1 for j in st["jobs"])
    first = {j["id"]: j for j in st["jobs"]}

    rc = main(["batch", "--resume", str(folder), "--retry-failed", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert "gpu1: set aside by an earlier run of this batch (2 jobs failed in a row): left out" in out.err
    st = _state(folder)
    assert st["lanes"] == ["gpu0"] and {j["status"] for j in st["jobs"]} == {"done"}
    for j in st["jobs"]:
        was = first[j["id"]]
        log = (folder / "jobs" / j["id"] / "log.txt").read_text()
        if was["status"] == "done":  # never run again
            assert j["attempts"] == 1 and j["started"] == was["started"] and log.count("=== batch") == 1
        else:  # once more, on the healthy GPU
            assert j["attempts"] == 2 and j["lane"] == "gpu0" and log.count("=== batch") == 2
            seen = [json.loads(ln)["CUDA_VISIBLE_DEVICES"] for ln in log.splitlines() if ln.startswith("{")]
            assert seen == ["GPU-1", "GPU-0"], seen  # failed on the dead GPU, then done on the healthy one


def test_every_gpu_dead_sets_none_aside(tmp_path, capsys, fakebin):
    """Both fake GPUs kill every job: failing everywhere reads as the jobs' fault, so never both
    lanes are set aside: every job runs once and is recorded failed, none lost; `--resume
    --retry-failed --gpus all` runs them again on both once the GPUs are back."""
    fakebin(gpus=2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"GPU-0": "die", "GPU-1": "die"}))
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--job", _lane_job(spec),
               "--grid", "x=" + ",".join(map(str, range(6)))])
    out = capsys.readouterr()
    assert rc == 1, out.err
    st = _state(folder)
    # a lane whose first job is still starting looks healthy: under load one lane may go aside, never both
    assert [(j["status"], j["attempts"]) for j in st["jobs"]] == [("failed", 1)] * 6 and len(st.get("lanes_down") or {}) < 2
    spec.write_text("{}")  # the GPUs are back
    rc = main(["batch", "--resume", str(folder), "--retry-failed", "--no-progress", "--gpus", "all"])
    st = _state(folder)
    assert rc == 0 and st["lanes"] == ["gpu0", "gpu1"] and {j["status"] for j in st["jobs"]} == {"done"}


def test_a_slow_gpu_holds_no_job_another_could_take(tmp_path, capsys, fakebin):
    """2 fake GPUs, K=1, 6 jobs; GPU 0 takes 6 s a job, GPU 1 none: the jobs wait in one queue, so
    GPU 1 runs all but the one GPU 0 started (a per-lane split would leave 3 on GPU 0)."""
    fakebin(gpus=2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"GPU-0": 6.0, "GPU-1": 0.0}))
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--job", _lane_job(spec),
               "--grid", "x=" + ",".join(map(str, range(6)))])
    assert rc == 0, capsys.readouterr()
    lanes = _per_lane(_state(folder)["jobs"])
    assert len(lanes["gpu0"]) == 1 and len(lanes["gpu1"]) == 5


def test_packing_counts_gpus_and_solves_per_hour(tmp_path):
    """A batch's GPU count is the GPU lanes its jobs ran on, K per GPU min(--concurrent,
    ceil(jobs / GPUs)); solves per hour: solved trainings / the batch's wall-clock span, None when
    none solved or the batch was resumed."""
    from fightlab.measure import packing

    jobs = [dict(lane=f"gpu{i % 4}", started=1000.0 + i, ended=1000.0 + 1800 + i) for i in range(16)]
    assert packing.batch_packing(dict(concurrent=4, jobs=jobs)) == (4, 4)
    assert packing.batch_packing(dict(concurrent=8, jobs=jobs)) == (4, 4)  # 16 jobs over 4 GPUs: 4 each
    assert packing.batch_packing(dict(concurrent=2, jobs=[dict(lane="cpu")] * 3)) == (1, 2)
    runs = []
    for i, solved in enumerate(("True", "False", "True")):
        r = tmp_path / f"r{i}" / "data" / "results"
        r.mkdir(parents=True)
        (r / "train.csv").write_text(f"run_id,solved\nx{i},{solved}\n")
        runs.append(tmp_path / f"r{i}")
    runs.append(tmp_path / "unfinished")  # no train row: not a solve
    state = dict(jobs=jobs, resumes=0)
    assert packing.solves_per_hour(state, runs) == pytest.approx(2 / ((1800 + 15) / 3600))
    assert packing.solves_per_hour(dict(state, resumes=1), runs) is None
    assert packing.solves_per_hour(state, runs[1:2]) is None


def test_a_repeated_gpu_through_the_command_line_is_one_line(tmp_path, fakebin):
    """`python -m fightlab batch --gpus 0,1,0` in its own process: exit 2, one line on stderr, no
    traceback, nothing written (it was silently de-duplicated before)."""
    fakebin(gpus=2)
    r = subprocess.run([PY, "-m", "fightlab", "batch", "--batch-dir", str(tmp_path / "b"), "--gpus", "0,1,0",
                        "--job", "train --device cpu --nworld 2"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(batch.REPO_ROOT)})
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "fightlab: error: --gpus 0,1,0: GPU 0 given twice; give each GPU once (its lane runs --concurrent "
        "jobs at once)"], r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "b").exists()


def test_gpus_spellings_taken():
    """ASCII indices with spaces around each, all and none in any case."""
    names = lambda g: [ln.name for ln in batch.make_lanes(g, [0, 1], 1)]  # noqa: E731
    assert names(" 1 , 0 ") == ["gpu1", "gpu0"] and names("ALL") == ["gpu0", "gpu1"]
    assert names("None") == ["cpu"] and names(None) == ["gpu0", "gpu1"]


_JOB = '{"id": "000-a", "kind": "python", "argv": ["x.py"]'
_OK = '{"format": "fightlab-batch-1", "jobs": [%s}]}'


@pytest.mark.parametrize("text, expect", [
    ("{not json", "not JSON (Expecting property name enclosed in double quotes, line 1 column 2)"),
    ('{"format": "fightlab-batch-1", "jobs": [{"bogus": 1}]}', "jobs[0] has an unknown field 'bogus'; a job's fields: id,"),
    ("[]", "holds a JSON array, not an object"),
    ('{"jobs": []}', "no format 'fightlab-batch-1'"),
    ('{"format": "x", "jobs": []}', "format 'x', not 'fightlab-batch-1'"),
    ('{"format": "fightlab-batch-1"}', "no list of jobs"),
    ('{"format": "fightlab-batch-1", "jobs": {}}', "jobs is a JSON object, not a list"),
    ('{"format": "fightlab-batch-1", "jobs": [1]}', "jobs[0] is a JSON integer, not a job object"),
    ('{"format": "fightlab-batch-1", "jobs": [{"kind": "python"}]}', "jobs[0] has no 'id'"),
    (_OK % (_JOB + ', "attempts": "1"'), "jobs[0].attempts '1' is not integer"),
    (_OK % (_JOB + ', "attempts": true'), "jobs[0].attempts True is not integer"),
    (_OK % (_JOB + ', "params": []'), "jobs[0].params [] is not object"),
    (_OK % (_JOB + '}, ' + _JOB), "jobs[1].id '000-a' is not one job's folder name"),
    (_OK % _JOB.replace("000-a", "../x"), "jobs[0].id '../x' is not one job's folder name"),
    (_OK % _JOB.replace("python", "shell"), "jobs[0]: kind 'shell' / status 'pending'; kinds: fightlab,"),
    (_OK % (_JOB + ', "status": "lost"'), "status 'lost'; kinds: fightlab, notebook, python; statuses: pending,"),
    (_OK % _JOB.replace('"x.py"', ""), "jobs[0]: a python job needs argv, a list of words"),
    ('{"format": "fightlab-batch-1", "jobs": [], "job_timeout_s": "abc"}', "job_timeout_s 'abc' is not integer or number or null"),
    ('{"format": "fightlab-batch-1", "jobs": [], "lanes_down": []}', "lanes_down [] is not object or null"),
    (b"\xff{}", "not UTF-8 text (byte 0)"),
])
def test_a_damaged_batch_json_is_one_line_and_nothing_changes(text, expect, tmp_path, capsys, fakebin):
    """`--resume` of a batch.json that is not JSON, not an object, of another format, or whose jobs
    are not job objects of the known fields and types: one line naming the file, exit 2, the
    folder as it was (the command line and run_batch alike)."""
    fakebin(gpus=0)
    folder = tmp_path / "b"
    folder.mkdir()
    state = folder / batch.STATE
    state.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = {p: p.read_bytes() for p in folder.rglob("*")}
    rc = main(["batch", "--resume", str(folder), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith(f"fightlab: error: {state}: ") and "\n" not in err, err
    assert expect in err, err
    with pytest.raises(batch.BatchError, match=re.escape(expect)):
        batch.run_batch(None, folder, resume=True, progress=False, discover=lambda: [])
    assert {p: p.read_bytes() for p in folder.rglob("*")} == before


def test_a_lane_is_set_aside_only_beside_a_healthy_one():
    """LANE_FAILS failures in a row set a lane aside only while another lane is not set aside and
    has no failure since a job that ran through, or one running; never the last lane."""
    def lanes(**other):
        return [batch.Lane("gpu0", 0, 1), batch.Lane("gpu1", 1, 1, **other)]

    def fail_twice(ls):
        state = {}
        for _ in range(batch.LANE_FAILS):
            batch.lane_result(ls[0], batch.Job(id="a", kind="python", status="failed"), ls, state, lambda m: None)
        return ls[0].down, state.get("lanes_down")

    assert fail_twice(lanes(ok=1)) == (True, {"gpu0": "2 jobs failed in a row"})
    assert fail_twice(lanes(running=1))[0] is True  # running fine, nothing failed yet
    assert fail_twice(lanes())[0] is False  # nothing run yet on the other: no evidence
    assert fail_twice(lanes(ok=3, fails=1))[0] is False  # failing too: the jobs' fault
    assert fail_twice(lanes(ok=3, down=True))[0] is False  # never the last lane
    assert fail_twice(lanes(ok=3)[:1])[0] is False


def test_a_job_that_always_fails_sets_no_gpu_aside(tmp_path, capsys, fakebin):
    """A bug in the job (exit 3 wherever it runs) on 2 healthy fake GPUs: every job runs and is
    recorded failed, none left pending, the last lane never set aside (a lane whose first job is
    still starting looks healthy, so under load the other may be)."""
    fakebin(gpus=2)
    folder = tmp_path / "b"
    rc = main(["batch", "--batch-dir", str(folder), "--no-progress", "--job",
               'python -c "import sys, time; time.sleep(0.3); sys.exit(3)"', "--grid", "x=" + ",".join(map(str, range(1, 9)))])
    out = capsys.readouterr()
    assert rc == 1, out
    st = _state(folder)
    assert [(j["status"], j["rc"], j["attempts"]) for j in st["jobs"]] == [("failed", 3, 1)] * 8, out.err
    assert len(st.get("lanes_down") or {}) < 2, out.err  # never the last lane (start-up jitter may set one aside)
