"""Many jobs on one machine: ``python -m fightlab batch`` packs K jobs per GPU, over every GPU.

The jobs (commands, notebooks, scripts over a ``--grid``) and lanes come from
`fightlab.batchjobs`, checked in one pass before anything runs. Each lane (a GPU, or the one CPU
lane) has a thread pool of K workers (``concurrent.futures``) waiting on its jobs' processes
(``Popen.wait`` with the job's time limit); the jobs wait in one queue and each starts on the
least busy lane, so a slow GPU holds no job another could take. Every job gets
``CUDA_VISIBLE_DEVICES`` set to its lane's GPU (its UUID from ``nvidia-smi -L``, else its index with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``; empty on the CPU lane) and the packing in its environment
(`fightlab.meta.PACKING_ENV`, recorded in every row it writes: ``FIGHTLAB_CONCURRENT`` = min(K,
jobs), ``FIGHTLAB_MPS``, ``FIGHTLAB_GPU_JOBS`` = jobs at once over all lanes). With GPU lanes and
K > 1, CUDA MPS runs for the batch (`Mps`): one control daemon for the host, serving every GPU it
sees (the CUDA MPS docs: a server per GPU is spawned by the one daemon; a daemon started with
``CUDA_VISIBLE_DEVICES`` renumbers the devices its clients see, so clients name theirs by UUID);
without it the jobs time-slice (said in one line).

A GPU lane whose jobs fail :data:`LANE_FAILS` times in a row (a GPU that died or fell off the bus)
is set aside while another lane looks healthy (`fightlab.batchjobs.lane_result`): it takes no new
job, its failed jobs stay failed (a resume with ``--retry-failed`` runs them once more, on the
lanes left), batch.json's ``lanes_down`` names it and a resume leaves it out unless ``--gpus`` is
given again. Jobs that fail on every lane are a bug in the jobs, not dead GPUs: they run and are
recorded failed, no lane set aside.

The batch folder, ``runs/batch/<batch_id>/`` (or ``--batch-dir``), holds ``batch.json`` (the
state: jobs, lanes, status, seconds, rc), ``jobs/<job_id>/log.txt``, an executed notebook per
notebook job, a training's run folder per train job (``jobs/<job_id>/run`` unless the job names
``--run-dir``), ``summary.txt`` and ``batch.tar.gz`` (everything above; checkpoints only with
``--with-checkpoints``). ``--resume BATCH_ID`` (or the folder) re-runs what did not finish
(trainings continue from their ``latest.pt``); finished jobs are skipped, failed ones too
unless ``--retry-failed``.

Time: ``--job-timeout-s`` kills a job's process group (SIGINT, then SIGKILL after
:data:`KILL_GRACE_S`; its checkpoints stay); ``--budget-s`` bounds the batch: a job starts only
with more than ``--min-left-s`` left, a training gets ``--segment-s`` (left − min-left) so it stops
with a checkpoint, and every job is killed ``min-left/4`` s before the budget ends.

Job status: pending, running, done, paused (a training's segment ended: resume continues it),
failed (rc ≠ 0: the log's tail is kept), timeout, budget (not started or stopped by the budget),
interrupted (the batch was stopped: Ctrl-C, kill).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import functools
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from fightlab.batchjobs import (  # noqa: F401 (the batch's names, importable from here)
    LANE_FAILS, MAX_JOBS, MAX_PER_GPU, BatchError, Job, Lane, _train_finished, check_devices, check_options,
    check_size, discover_gpus, expand, job_command, lane_result, lanes_left, make_jobs, make_lanes, parse_grid,
    parse_job, parse_sets, read_jobs_file, split_values)
from fightlab.batchstate import FORMAT, read_state
from fightlab.errors import ConfigError
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.rundir import (LOCK as RUN_LOCK, MANIFEST, atomic_path, atomic_write, check_location, listed_path,
                              lock_file)

BATCH_ROOT = RUNS / "batch"
STATE = "batch.json"
ARCHIVE = "batch.tar.gz"
LOCK = ".fightlab-batch.lock"
KILL_GRACE_S = 10.0
MPS_CONTROL = "nvidia-cuda-mps-control"
#: statuses a resume runs again (failed ones only with retry_failed)
RERUN = ("pending", "running", "paused", "timeout", "budget", "interrupted")
TAIL_LINES = 5


# --- CUDA MPS --------------------------------------------------------------------------------

class Mps:
    """CUDA MPS for a batch: started when no daemon runs (``nvidia-cuda-mps-control -d``, pipe
    and log folders under the batch folder; ``quit`` by :meth:`stop`), an existing daemon used and
    left alone, or none (jobs time-slice). Wanted for ``gpu`` lanes of ``per_lane`` > 1 jobs
    unless not ``allowed`` (``--no-mps``). One daemon for the host, whatever the GPU count: it
    sees ``devices`` (the lanes' UUIDs, all of them, as ``CUDA_VISIBLE_DEVICES``; without UUIDs
    no ``CUDA_VISIBLE_DEVICES``: every GPU, none renumbered).

    Attributes:
      active: jobs run under MPS; started: this batch started the daemon; env: variables the
        jobs get (the pipe / log folders of a daemon this batch started); message: one line.
    """

    def __init__(self, folder: Path, gpu: bool, per_lane: int, allowed: bool = True, which: Callable = shutil.which,
                 devices: Iterable[str] = ()):
        self.folder, self.active, self.started, self.env, self.message = Path(folder), False, False, {}, ""
        self.devices = [d for d in devices if d]
        self._want = gpu and per_lane > 1 and allowed  # GPU lanes of more than one job, no --no-mps
        self._bin = which(MPS_CONTROL) if self._want else None
        if not gpu:
            self.message = "batch: no GPU lane (nvidia-smi -L lists none, or --gpus none): the jobs run on one CPU lane"
        elif not allowed and per_lane > 1:
            self.message = "batch: --no-mps: jobs sharing a GPU time-slice"

    def _control(self, stdin: str | None, env: dict, *args: str) -> subprocess.CompletedProcess:
        feed = dict(input=stdin) if stdin is not None else dict(stdin=subprocess.DEVNULL)
        full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}  # None: unset
        return subprocess.run([self._bin, *args], capture_output=True, text=True, env=full, timeout=60, **feed)

    def start(self) -> "Mps":
        """Use a daemon already running, else start one; ``message`` says which, or why not."""
        slicing = ": jobs sharing a GPU time-slice"
        if self._want and self._bin is None:
            self.message = f"batch: CUDA MPS is not available ({MPS_CONTROL} not found on PATH)" + slicing
        if not (self._want and self._bin):
            return self
        env = dict(CUDA_MPS_PIPE_DIRECTORY=str(self.folder / "mps" / "pipe"),
                   CUDA_MPS_LOG_DIRECTORY=str(self.folder / "mps" / "log"))
        try:
            if self._control("get_server_list\n", {}).returncode == 0:
                self.active, self.message = True, "batch: using the CUDA MPS daemon already running (left running)"
                return self
            for v in env.values():
                Path(v).mkdir(parents=True, exist_ok=True)
            uuids = all(d.startswith("GPU-") for d in self.devices) and self.devices
            r = self._control(None, {**env, "CUDA_VISIBLE_DEVICES": ",".join(uuids) if uuids else None}, "-d")
            why = r.returncode and f"{MPS_CONTROL} -d: rc {r.returncode} {(r.stderr or r.stdout).strip()[-200:]}"
        except (OSError, subprocess.SubprocessError) as e:
            why = str(e)
        if why:
            self.message = f"batch: CUDA MPS could not start ({why})" + slicing
        else:
            self.active, self.started, self.env = True, True, env
            self.message = (f"batch: CUDA MPS started for the batch, one daemon for its {len(self.devices) or 1} "
                            f"GPU(s) (pipe {env['CUDA_MPS_PIPE_DIRECTORY']})")
        return self

    def stop(self) -> None:
        """Quit the daemon this batch started (never one that was running before)."""
        if self.started:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self._control("quit\n", self.env)
            self.started = False


# --- the batch folder ------------------------------------------------------------------------

def resolve_batch_dir(resume: str | None, batch_dir: str | None) -> Path:
    """The batch folder: ``--resume`` (an id under runs/batch/ or a folder), else ``--batch-dir``,
    else runs/batch/<new id> (UTC time + pid)."""
    if resume is not None:
        if not resume.strip():
            raise BatchError("--resume takes a batch id or folder, got ''")
        p = Path(resume).expanduser()
        if not (p / STATE).is_file() and (BATCH_ROOT / resume / STATE).is_file():
            p = BATCH_ROOT / resume
        if not (p / STATE).is_file():
            have = sorted(d.parent.name for d in BATCH_ROOT.glob(f"*/{STATE}"))[-5:] if BATCH_ROOT.exists() else []
            raise BatchError(f"--resume {resume}: no {STATE} there or under {BATCH_ROOT}; latest "
                             f"batches: {', '.join(have) or 'none'}")
        return p.resolve()
    if batch_dir is not None:
        if not batch_dir.strip():
            raise BatchError("--batch-dir must name a folder, got ''")
        return Path(batch_dir).expanduser().resolve()
    return (BATCH_ROOT / (time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{os.getpid()}")).resolve()


def saved_options(folder: Path) -> dict:
    """The options a batch ran with (batch.json: concurrent, gpus, job_timeout_s, budget_s,
    min_left_s, no_mps, with_checkpoints; those it has), which `--resume` keeps unless given.
    BatchError for a batch.json a resume cannot use (`fightlab.batchstate.read_state`)."""
    state = read_state(Path(folder) / STATE)[0]
    keys = ("concurrent", "gpus", "job_timeout_s", "budget_s", "min_left_s", "no_mps", "with_checkpoints")
    return {k: state[k] for k in keys if state.get(k) is not None}


@contextlib.contextmanager
def _claim(folder: Path, fresh: bool):
    """Hold the batch folder (flock on its lock file) for one batch process.

    Raises:
      BatchError: a protected place (fightlab.rundir.check_location), a fresh batch in a folder
        that is not empty, or a folder another live batch holds.
    """
    check_location(folder)
    if fresh and folder.exists() and any(folder.iterdir()):
        if (folder / STATE).exists():
            raise BatchError(f"batch folder {str(folder)!r} holds a batch already: continue it with "
                             f"--resume {folder}, or choose a new --batch-dir")
        raise BatchError(f"batch folder {str(folder)!r} is not empty and not a batch's; choose a new "
                         "--batch-dir (nothing there is deleted)")
    folder.mkdir(parents=True, exist_ok=True)
    fd, pid = lock_file(folder / LOCK)
    if fd is None:
        raise BatchError(f"batch folder {str(folder)!r} is in use by another batch (pid {pid}); "
                         "wait for it, or choose a new --batch-dir")
    try:
        yield
    finally:
        os.close(fd)


def _tail(log: Path, n: int = TAIL_LINES) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _ours(pid: int, folder: Path) -> bool:
    """``pid`` is a live job of the batch in ``folder``: a process group leader whose environment
    says FIGHTLAB_BATCH=<folder> (Linux /proc; elsewhere False: nothing is killed on a guess)."""
    try:
        if os.getpgid(pid) != pid:
            return False
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except (OSError, ProcessLookupError):
        return False
    return f"FIGHTLAB_BATCH={folder.resolve()}".encode() in environ


def _kill_group(proc: subprocess.Popen, grace_s: float = KILL_GRACE_S) -> None:
    """SIGINT to the job's process group (a training stops like Ctrl-C), SIGKILL after grace."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
            break
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # children the job left behind


def _written_by_fightlab(rd: Path) -> list[Path]:
    """The files of run folder ``rd`` that fightlab wrote: its manifest and the files the
    manifest lists, inside the folder; [] for a folder that is no fightlab run folder (no
    manifest, unreadable, or a place runs are refused: ``/``, ``$HOME``, a checkout)."""
    try:
        rd = check_location(rd)
        files = json.loads((rd / MANIFEST).read_text())["files"]
    except (ConfigError, OSError, ValueError, KeyError, TypeError):
        return []
    out = [rd / MANIFEST]
    for rel in files if isinstance(files, list) else []:
        p = listed_path(rd, str(rel))
        if p is not None and (p.is_file() or p.is_symlink()):
            out.append(p)
    return out


def archive(folder: Path, with_checkpoints: bool, run_dirs: Iterable[str | Path] = ()) -> Path:
    """``batch.tar.gz`` (atomically) of the batch folder (logs, state, rows, curves, executed
    notebooks, run folders), without checkpoints (``*.pt``; with them, each run's ``latest.pt``
    link too) unless ``with_checkpoints``, locks and MPS pipes. ``run_dirs`` outside the batch
    folder (a job's own ``--run-dir``) go in as ``<batch>/run_dirs/<folder name>``, only the
    files their manifest lists (:func:`_written_by_fightlab`). Returns the archive's path."""
    out = folder / ARCHIVE

    def keep(info: tarfile.TarInfo):
        name = info.name.split("/", 1)[1] if "/" in info.name else ""
        if (name in (ARCHIVE, ARCHIVE + ".tmp", LOCK, STATE + ".tmp") or name.startswith("mps/pipe")
                or (name.endswith(".pt") and not with_checkpoints) or name.rsplit("/", 1)[-1] == RUN_LOCK):
            return None
        # with checkpoints, the link to the newest one beside it (`--resume .../latest.pt`)
        link = info.issym() and with_checkpoints and name.endswith("latest.pt") and "/" not in info.linkname
        return info if link or info.isfile() or info.isdir() else None

    with atomic_path(out) as tmp, tarfile.open(tmp, "w:gz") as tar:
        tar.add(folder, arcname=folder.name, filter=keep)
        for rd in dict.fromkeys(Path(r).resolve() for r in run_dirs):
            if rd.is_dir() and folder.resolve() not in (rd, *rd.parents):
                for p in _written_by_fightlab(rd):
                    tar.add(p, arcname=f"{folder.name}/run_dirs/{rd.name}/{p.relative_to(rd)}",
                            filter=keep, recursive=False)
    return out


#: characters of a job's log in the summary's ``tail`` column
TAIL_CHARS = 100


def summary_tail(job: Job, width: int = TAIL_CHARS) -> str:
    """The summary's ``tail`` of ``job``: its log's last line (a training's: its run folder; a
    failure's: its error), "" for a job that has not run. A longer line keeps its start, cut
    with a trailing "…" (the job's last lines are in batch.json and its log)."""
    text = (job.tail.splitlines() or [""])[-1]
    return text if len(text) <= width else text[:width - 1] + "…"


def summary_table(jobs: list[Job]):
    """pandas DataFrame: job, lane, status, seconds, rc, tail (:func:`summary_tail`: the log's
    last line)."""
    import pandas as pd

    return pd.DataFrame([dict(job=j.id, lane=j.lane or "-", status=j.status, seconds=round(j.seconds, 1),
                              rc=j.rc if j.rc is not None else pd.NA, tail=summary_tail(j))
                         for j in jobs])


def _load(jobs: list[Job] | None, folder: Path, lanes: list[Lane], resume: bool, retry_failed: bool,
          min_left_s: float, say: Callable[[str], None]) -> tuple[dict, list[Job], list[Job]]:
    """The state (fresh, or batch.json's), the jobs and those to run; a job left by a killed
    batch stopped, a training that wrote its result before a kill -9 was recorded done."""
    if resume:
        state, jobs = read_state(folder / STATE)
        state["resumes"] = state.get("resumes", 0) + 1
    else:
        state = dict(format=FORMAT, batch_id=folder.name, created=time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), resumes=0)
    todo = [j for j in jobs if j.status in RERUN or (retry_failed and j.status == "failed")]
    check_devices(todo, lanes)
    for j in jobs:
        if j.status == "running" and j.pid and _ours(j.pid, folder):  # left by a killed batch
            say(f"[batch] {j.id}: its process group {j.pid} outlived the batch that started it: stopped")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(j.pid, signal.SIGKILL)
    for j in todo:
        if j.kind == "fightlab" and j.argv[0] == "train":
            job_command(j, folder, None, min_left_s)  # sets run_dir
            if _train_finished(Path(j.run_dir)):
                j.status = "done"
    return state, jobs, [j for j in todo if j.status != "done"]


def _start(job: Job, lane: Lane, folder: Path, env: dict, left: float | None, job_timeout_s: float | None,
           min_left_s: float, save: Callable[[], None]) -> tuple[subprocess.Popen, float, str]:
    """Start ``job``'s next attempt on ``lane`` (own process group, log.txt appended): the process,
    its limit in s (inf: none) and its status past it (timeout, or budget: min-left/4 before).
    The state says "running" (``save``) before the process starts: a batch killed at once keeps
    the attempt on record."""
    seg_left = left  # a training's segment ends (with a checkpoint) before its time limit too
    if job_timeout_s is not None:
        own = job_timeout_s - min(min_left_s, job_timeout_s / 4) + min_left_s
        seg_left = own if seg_left is None else min(seg_left, own)
    cmd = job_command(job, folder, seg_left, min_left_s)
    jdir = folder / "jobs" / job.id
    jdir.mkdir(parents=True, exist_ok=True)
    limit, why = (math.inf if job_timeout_s is None else job_timeout_s), "timeout"
    if left is not None and left - min_left_s / 4 < limit:
        limit, why = left - min_left_s / 4, "budget"
    # the CPU lane hides every GPU: with --gpus none on a GPU host its jobs' "auto" is the CPU
    env = {**env, "CUDA_VISIBLE_DEVICES": lane.device()}
    if lane.gpu is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # an index means nvidia-smi's GPU
    with open(jdir / "log.txt", "a") as fh:
        fh.write(f"=== batch {folder.name} attempt {job.attempts + 1} lane {lane.name}: {shlex.join(cmd)}\n")
        fh.flush()
        job.status, job.lane, job.attempts, job.rc = "running", lane.name, job.attempts + 1, None
        job.started, job.ended, job.pid = time.time(), None, None
        save()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, stdin=subprocess.DEVNULL)
    job.pid = proc.pid
    return proc, limit, why


def _wait(proc: subprocess.Popen, limit: float, grace_s: float) -> bool:
    """A lane's worker: wait up to ``limit`` s; True: over, stopped (:func:`_kill_group`). The
    group of a finished job is killed too (nothing of it lingers)."""
    try:
        proc.wait(timeout=None if math.isinf(limit) else max(limit, 0.0))
    except subprocess.TimeoutExpired:
        _kill_group(proc, grace_s)
        return True
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return False


def _settle(job: Job, rc: int | None, start: float, folder: Path, over: str | None) -> None:
    """Record an attempt's end (``over``: the status of a job stopped by its limit or the batch)."""
    job.rc, job.ended = rc, time.time()
    job.seconds += time.monotonic() - start
    job.tail = _tail(folder / "jobs" / job.id / "log.txt")
    is_train = job.kind == "fightlab" and job.argv[0] == "train"
    finished = is_train and _train_finished(Path(job.run_dir))
    if over == "interrupted" or (over and not finished):
        job.status = over
    elif over or (rc == 0 and finished == is_train):
        job.status = "done"  # a training over its limit that had written its result was exiting
    else:
        job.status = "failed" if rc != 0 else "paused"


def _job_env(folder: Path, m: Mps, per_lane: int, gpu_jobs: int) -> dict:
    """Every job's environment: this fightlab (whatever the cwd or an installed copy), the batch,
    its packing."""
    env = {k: v for k, v in os.environ.items() if k not in ("FIGHTLAB_SHARED_GPU", "FIGHTLAB_HOST_JOBS")}
    path = os.pathsep.join(x for x in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if x)
    return {**env, **m.env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path,  # old names dropped: the new say it
            "FIGHTLAB_BATCH": str(folder.resolve()), "FIGHTLAB_CONCURRENT": str(per_lane),
            "FIGHTLAB_MPS": "1" if m.active else "0", "FIGHTLAB_GPU_JOBS": str(gpu_jobs)}


@contextlib.contextmanager
def _signals_interrupt():
    """SIGTERM and SIGHUP as Ctrl-C (KeyboardInterrupt: the jobs stopped, the state saved) while
    the batch runs in the main thread; the old handlers after."""
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, signal.default_int_handler) for s in (signal.SIGTERM, signal.SIGHUP)} if main else {}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _finish(folder: Path, state: dict, jobs: list[Job], with_checkpoints: bool, save: Callable[[], None]) -> None:
    """The batch's end: its end time, summary.txt and archive recorded in batch.json."""
    state["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save()
    atomic_write(folder / "summary.txt", summary_table(jobs).to_string(index=False) + "\n")
    state["archive"] = str(archive(folder, with_checkpoints, [j.run_dir for j in jobs if j.run_dir]))
    save()


def run_batch(jobs: list[Job] | None, folder: Path, *, concurrent: int = 1, gpus: str | None = None,
              job_timeout_s: float | None = None, budget_s: float | None = None,
              min_left_s: float = 60.0, mps: bool = True, with_checkpoints: bool = False,
              retry_failed: bool = False, progress: bool = True, resume: bool = False,
              discover: Callable[[], list[int] | dict] = discover_gpus, lanes_again: bool = False) -> dict:
    """Run a batch (see the module docstring) and return its state (batch.json's content).
    Jobs start in order on the least busy lane not set aside; the batch records each end as it comes.

    Args:
      jobs: :func:`make_jobs` (None with ``resume``: the jobs come from batch.json).
      folder: the batch folder (:func:`resolve_batch_dir`).
      concurrent: jobs at once per lane (≥ 1); gpus: ``--gpus``; job_timeout_s, budget_s,
        min_left_s: seconds; mps: try CUDA MPS; with_checkpoints: put ``*.pt`` in the archive;
        retry_failed: a resume re-runs failed jobs too; discover: the GPUs (tests inject it:
        indices, or index -> UUID); lanes_again: a resume uses lanes set aside before too.
    Raises:
      BatchError: bad numbers, GPUs or folder, before any job starts. KeyboardInterrupt: after
        stopping the running jobs, saving the state, MPS and the archive.
    """
    from tqdm.auto import tqdm

    say = functools.partial(tqdm.write, file=sys.stderr)
    t0 = time.monotonic()
    lanes = check_options(concurrent, gpus, job_timeout_s, budget_s, min_left_s, discover)
    if jobs is not None:
        check_devices(jobs, lanes)
    folder = Path(folder)
    if resume:
        read_state(folder / STATE)  # a damaged batch.json: refused before the folder is claimed
    with _claim(folder, fresh=not resume), _signals_interrupt():
        print(f"batch {folder.name}: {folder}", flush=True)  # once its options passed and it is ours
        state, jobs, pending = _load(jobs, folder, lanes, resume, retry_failed, min_left_s, say)
        lanes = lanes_left(lanes, state, lanes_again, say) if resume else lanes
        n = max(len(pending), 1)
        per_lane = min(concurrent, math.ceil(n / len(lanes)))
        m = Mps(folder, gpu=lanes[0].gpu is not None, per_lane=per_lane, allowed=mps,
                devices=[lane.device() for lane in lanes]).start()
        if m.message:
            say(m.message)
        env = _job_env(folder, m, per_lane, gpu_jobs=min(per_lane * len(lanes), n))
        state.update(lanes=[lane.name for lane in lanes], concurrent=concurrent, mps=m.active,
                     mps_started=m.started, budget_s=budget_s, job_timeout_s=job_timeout_s,
                     gpus=gpus, min_left_s=min_left_s, no_mps=not mps, with_checkpoints=with_checkpoints)

        def save():
            state["jobs"] = [dataclasses.asdict(j) for j in jobs]
            atomic_write(folder / STATE, json.dumps(state, indent=1, default=str))  # never a torn batch.json

        save()
        bar = tqdm(total=len(pending), desc=f"batch {folder.name}", unit="job", disable=not progress,
                   file=sys.stderr)
        pools = {lane.name: cf.ThreadPoolExecutor(per_lane, f"batch-{lane.name}") for lane in lanes}
        running: dict[cf.Future, tuple[Job, Lane, subprocess.Popen, float, str]] = {}
        try:
            while pending or running:
                while pending and (up := [ln for ln in lanes if not ln.down]) and (
                        lane := min(up, key=lambda ln: ln.running)).running < per_lane:
                    left = None if budget_s is None else budget_s - (time.monotonic() - t0)
                    if left is not None and left <= min_left_s:
                        for j in pending:
                            j.status = "budget"
                            say(f"[batch] {j.id}: not started, {max(left, 0):.0f} s of the budget left "
                                f"(a job needs more than --min-left-s {min_left_s:g})")
                        bar.update(len(pending))
                        pending = []
                        break
                    job = pending.pop(0)
                    proc, limit, why = _start(job, lane, folder, env, left, job_timeout_s, min_left_s, save)
                    running[pools[lane.name].submit(_wait, proc, limit, KILL_GRACE_S)] = (
                        job, lane, proc, time.monotonic(), why)
                    lane.running += 1
                    save()
                if pending and not running:  # every lane set aside: the rest stays pending
                    say(f"[batch] every lane is set aside: {len(pending)} job(s) not started, left pending "
                        "(a resume runs them)")
                    break
                done = cf.wait(running, timeout=1.0, return_when=cf.FIRST_COMPLETED)[0] if running else ()
                for f in sorted(done, key=lambda f: running[f][3]):  # in start order: lanes judged alike
                    job, lane, proc, start, why = running.pop(f)
                    _settle(job, proc.returncode, start, folder, why if f.result() else None)
                    lane.running -= 1
                    say(f"[{lane.name}] {job.id} {job.status} rc={job.rc} {job.seconds:.1f} s"
                        + (f": {job.tail.splitlines()[-1] if job.tail else '(empty log)'}"
                           if job.status != "done" else ""))
                    lane_result(lane, job, lanes, state, say)
                    bar.update(1)
                    save()
                bar.set_postfix(running=len(running))
        except BaseException:
            for job, _, proc, start, _ in running.values():
                _kill_group(proc, KILL_GRACE_S)
                _settle(job, proc.returncode, start, folder, "interrupted")
            raise
        finally:
            for pool in pools.values():
                pool.shutdown(wait=True)
            bar.close()
            m.stop()
            _finish(folder, state, jobs, with_checkpoints, save)
    return state


def command(*, resume: str | None = None, batch_dir: str | None = None, concurrent=None,
            jobs_file: str | None = None, job=(), grid=(), sets=(), gpus: str | None = None,
            job_timeout_s: float | None = None, budget_s: float | None = None, min_left_s: float | None = None,
            no_mps: bool = False, with_checkpoints: bool = False, retry_failed: bool = False,
            progress: bool = True, commands=(), check_job=None) -> int:
    """`python -m fightlab batch`, its flags as given (None: not given; a resumed batch keeps its
    saved options unless given again), checked in one pass before anything runs (`check_options`,
    then `make_jobs` over `commands`, each argv checked by `check_job`); then `run_batch`, the
    summary table printed. Returns 0 every job done, 1 some not (--resume), 130 interrupted.

    Raises:
      ConfigError: one line naming the flag: --concurrent not a positive integer, --resume with
        jobs given, --retry-failed without --resume, a damaged batch.json, a bad grid, set, jobs file or job."""
    if retry_failed and resume is None:
        raise BatchError("--retry-failed runs a batch's failed jobs again and needs --resume BATCH_ID")
    folder = resolve_batch_dir(resume, batch_dir)
    saved = {"concurrent": 1, "min_left_s": 60.0, **(saved_options(folder) if resume is not None else {})}
    options = {k: v if v is not None else saved.get(k) for k, v in dict(
        gpus=gpus, job_timeout_s=job_timeout_s, budget_s=budget_s, min_left_s=min_left_s).items()}
    concurrent = concurrent if concurrent is not None else saved["concurrent"]
    check_options(concurrent, **options)  # the batch's own flags before its jobs
    concurrent = int(concurrent)
    if resume is not None:
        if jobs_file or job or grid or sets:
            raise ConfigError("--resume takes its jobs from the batch's batch.json; --jobs, --job, "
                              "--grid and --set are refused with it")
        jobs = None
    else:
        grid, sets = parse_grid(grid), parse_sets(sets)
        bases = (read_jobs_file(jobs_file) if jobs_file is not None else []) + [parse_job(j) for j in job]
        jobs = make_jobs(bases, grid, sets, commands, check_job=check_job)
    try:
        state = run_batch(jobs, folder, concurrent=concurrent, **options,
                          mps=not (no_mps or saved.get("no_mps", False)),
                          with_checkpoints=with_checkpoints or saved.get("with_checkpoints", False),
                          retry_failed=retry_failed, progress=progress, resume=resume is not None,
                          lanes_again=gpus is not None)
    except KeyboardInterrupt:
        print(f"fightlab: batch interrupted; its state is {folder / STATE}: continue with "
              f"python -m fightlab batch --resume {folder}", file=sys.stderr)
        return 130
    table = summary_table([Job(**j) for j in state["jobs"]])
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_colwidth", 160):
        print(table.to_string(index=False))
    print(f"batch {folder.name}: archive {state['archive']}")
    unfinished = [j["id"] for j in state["jobs"] if j["status"] != "done"]
    if unfinished:
        print(f"batch {folder.name}: {len(unfinished)} job(s) not done; continue with "
              f"python -m fightlab batch --resume {folder}")
    return 1 if unfinished else 0