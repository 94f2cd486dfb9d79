"""Many jobs on one machine: ``python -m fightlab batch`` packs K jobs per GPU, over every GPU.

A job is a fightlab command (``train --body simple --seed 1``, ``evaluate …``, ``profile …``:
anything ``python -m fightlab CMD …`` takes), a notebook with parameters (``notebook 06
size=smoke``, or ``notebook path/to/x.ipynb key=value``, run with papermill in notebooks/ as
``fightlab.reproduce`` runs them) or a Python script (``python bench/factor_probe.py 1024``).
Jobs come from a jobs file (``--jobs FILE``: one job per line as above, ``#`` comments and blank
lines skipped) and/or ``--job 'CMD …'`` (repeatable). Every job is expanded over the grid, the
cross product of ``--grid KEY=V1,V2,…`` (commas inside brackets or quotes do not split, so
``--grid env.push_impulse_ns=[20,40],[10,20]`` has two values); ``--set KEY=VALUE`` adds one value,
never split (``--set env.push_impulse_ns=[20,40]`` is one list). For a command or script a key
``name`` becomes ``--name VALUE`` (underscores as dashes) and a dotted key ``env.x`` / ``ppo.x``
becomes ``--set env.x=VALUE``; for a notebook a key is a parameter (the value read as a Python
literal, else kept as a string), refused unless the notebook's parameters cell has it.

Lanes: every visible GPU (``nvidia-smi -L``; ``--gpus 0,1`` to choose; no GPU: one CPU lane)
runs up to ``--concurrent K`` jobs at once, each with ``CUDA_VISIBLE_DEVICES`` set to its lane's
GPU (so ``cuda:0`` is that GPU) and the packing in its environment (``FIGHTLAB_CONCURRENT`` =
min(K, jobs): jobs at once on its GPU; ``FIGHTLAB_MPS``; ``FIGHTLAB_GPU_JOBS`` = jobs at once on
the host over all lanes), which every row the job writes records (``fightlab.results``). With GPU
lanes and K > 1, CUDA MPS is started for the batch (``nvidia-cuda-mps-control -d`` with its pipe
and log folders under the batch folder) and stopped after it (``quit``); a daemon already running
is used and left alone; without MPS the jobs time-slice (said in one line).

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

import ast
import contextlib
import dataclasses
import fcntl
import functools
import itertools
import json
import math
import os
import re
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

from fightlab.config import ConfigError
from fightlab.paths import NOTEBOOKS, REPO_ROOT, RUNS
from fightlab.rundir import MANIFEST, atomic_path, atomic_write, check_location

BATCH_ROOT = RUNS / "batch"
STATE = "batch.json"
ARCHIVE = "batch.tar.gz"
LOCK = ".fightlab-batch.lock"
FORMAT = "fightlab-batch-1"
KILL_GRACE_S = 10.0
MPS_CONTROL = "nvidia-cuda-mps-control"
#: statuses a resume runs again (failed ones only with retry_failed)
RERUN = ("pending", "running", "paused", "timeout", "budget", "interrupted")
TAIL_LINES = 5
#: most jobs one batch may hold (job lines × the grid's cross product), checked before the cross
#: product is built: a batch past it is a typo (a grid of millions of points), not a study
MAX_JOBS = 10_000

__all__ = ["BatchError", "Job", "Lane", "Mps", "split_values", "parse_grid", "parse_sets", "expand",
           "parse_job", "read_jobs_file", "check_devices", "make_jobs", "notebook_path", "check_notebook_params",
           "discover_gpus", "make_lanes", "check_options", "MAX_JOBS", "job_command", "archive", "summary_table", "run_batch",
           "resolve_batch_dir"]


class BatchError(ConfigError):
    """Bad batch input or a refused batch folder: one line naming the value and the choices."""


# --- jobs ------------------------------------------------------------------------------------

@dataclasses.dataclass
class Job:
    """One job of a batch.

    kind: "fightlab" (``argv`` = the arguments of ``python -m fightlab``), "notebook"
    (``notebook`` = path, ``params`` = papermill parameters) or "python" (``argv`` = the
    arguments of ``python``). The rest is state, kept in batch.json.
    """
    id: str
    kind: str
    argv: list = dataclasses.field(default_factory=list)
    notebook: str | None = None
    params: dict = dataclasses.field(default_factory=dict)
    status: str = "pending"
    lane: str | None = None
    attempts: int = 0
    seconds: float = 0.0
    rc: int | None = None
    started: float | None = None   # wall clock (time.time()) of the last attempt
    ended: float | None = None
    tail: str = ""
    run_dir: str | None = None
    pid: int | None = None          # the last attempt's process (its process group's id)

    def label(self) -> str:
        if self.kind == "notebook":
            return f"notebook {Path(self.notebook).name} " + " ".join(
                f"{k}={v!r}" for k, v in self.params.items())
        return ("" if self.kind == "fightlab" else "python ") + shlex.join(self.argv)


def split_values(text: str) -> list[str]:
    """Split ``text`` at commas outside brackets, braces, parentheses and quotes:
    ``"1,[2,3],'a,b'"`` → ``["1", "[2,3]", "'a,b'"]``."""
    out, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return out


def _key_value(item: str, flag: str) -> tuple[str, str]:
    if "=" not in item or not item.split("=", 1)[0].strip():
        raise BatchError(f"{flag} expects KEY=VALUE, got {item!r}")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", key):
        raise BatchError(f"{flag}: bad key {key!r} in {item!r}; keys are names such as seed or "
                         "env.push_impulse_ns")
    return key, raw


def parse_grid(items: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``["seed=1,2", "body=simple,muscular-fast"]`` → ``[("seed", ["1", "2"]), ("body", […])]``.

    Raises:
      BatchError: no ``=``, a bad key, an empty grid (no value, or an empty value such as
        ``seed=1,,2``), a key or one key's value given twice.
    """
    out: dict[str, list[str]] = {}
    for item in items:
        key, raw = _key_value(item, "--grid")
        values = [v.strip() for v in split_values(raw)]
        if not raw.strip() or any(not v for v in values):
            raise BatchError(f"--grid {item!r}: empty grid value; give KEY=V1,V2,... (e.g. seed=1,2,3)")
        if key in out:
            raise BatchError(f"--grid {key} given twice; give all its values in one --grid {key}=V1,V2")
        if dup := next((v for i, v in enumerate(values) if v in values[:i]), None):
            raise BatchError(f"--grid {item!r}: value {dup!r} given twice (two identical jobs); give each once")
        out[key] = values
    return list(out.items())


def parse_sets(items: Iterable[str]) -> list[tuple[str, str]]:
    """``--set KEY=VALUE`` items as (key, value): the value is one value, never split."""
    return [_key_value(item, "--set") for item in items]


def check_size(n_bases: int, grid: list[tuple[str, list[str]]]) -> int:
    """The batch's job count, job lines × the grid's points, computed without building them.

    Raises:
      BatchError: more than :data:`MAX_JOBS`, naming the count, its factors and the limit."""
    n = n_bases * math.prod(len(v) for _, v in grid)
    if n > MAX_JOBS:
        sizes = " × ".join([f"{n_bases} job line(s)"] + [f"{len(v)} {k}" for k, v in grid])
        raise BatchError(f"the batch would hold {n:,} jobs ({sizes}); at most {MAX_JOBS:,}: split it "
                         "into smaller batches")
    return n


def expand(grid: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """The cross product of a grid, in order (the last key varies fastest); ``[{}]`` for none."""
    keys = [k for k, _ in grid]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in grid))]


def notebook_path(name: str) -> Path:
    """A notebook by number (``06`` → notebooks/06_train.ipynb) or path (``x.ipynb``).

    Raises:
      BatchError: no such notebook (names the numbered notebooks).
    """
    if name.endswith(".ipynb"):
        p = Path(name).expanduser()
        if not p.is_file():
            raise BatchError(f"notebook {name!r} not found")
        return p.resolve()
    found = {p.name[:2]: p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}
    key = name.strip().zfill(2)
    if key not in found:
        raise BatchError(f"unknown notebook {name!r}; notebooks: {', '.join(found)} (or a path to an .ipynb)")
    return found[key]


def parse_job(line: str) -> Job:
    """One job-file line (or ``--job`` text): ``CMD ARGS…`` (a fightlab command), ``notebook NN
    KEY=VALUE…`` or ``python SCRIPT ARGS…``. Not checked here (:func:`make_jobs` does)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError as e:
        raise BatchError(f"job {line!r}: {e}") from None
    if not words:
        raise BatchError(f"empty job {line!r}")
    if words[0] in ("notebook", "nb"):
        if len(words) < 2:
            raise BatchError(f"job {line!r}: notebook needs a number or a path (e.g. notebook 06 size=smoke)")
        params = dict(_key_value(w, f"notebook {words[1]}") for w in words[2:])
        return Job(id="", kind="notebook", notebook=words[1], params=params)
    if words[0] == "python":
        return Job(id="", kind="python", argv=words[1:])
    return Job(id="", kind="fightlab", argv=words)


def read_jobs_file(path: str | Path) -> list[Job]:
    """The jobs of a jobs file: one per line, blank lines and ``#`` comments skipped."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark some editors write: dropped
    except OSError as e:
        raise BatchError(f"jobs file {str(path)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise BatchError(f"jobs file {str(path)!r} is not UTF-8 text (byte {e.start}: {e.reason})") from None
    jobs = [parse_job(ln) for ln in text.splitlines() if ln.split("#", 1)[0].strip()]
    if not jobs:
        raise BatchError(f"jobs file {str(path)!r} holds no job")
    return jobs


def _literal(raw: str):
    """A notebook parameter value: a Python literal (``3``, ``[20, 40]``, ``True``, ``'x'``),
    else JSON (``true``), else the text itself."""
    for parse in (ast.literal_eval, json.loads):
        try:
            return parse(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return raw


@functools.lru_cache(maxsize=64)
def _notebook_params(path: str) -> dict:
    import papermill as pm

    return pm.inspect_notebook(path)


def check_notebook_params(path: Path, keys: Iterable[str]) -> None:
    """Refuse parameters a notebook does not have (papermill would only warn and inject them).

    Raises:
      BatchError: naming the unknown keys and the notebook's parameters
        (``papermill.inspect_notebook``).
    """
    have = _notebook_params(str(path))
    bad = [k for k in keys if k not in have]
    if bad:
        raise BatchError(f"notebook {path.name} has no parameter {', '.join(map(repr, bad))}; its "
                         f"parameters: {', '.join(have) or 'none'}")


def _flags(values: Iterable[tuple[str, str]], base: list[str] | None = None,
           check_job: Callable | None = None, via_set: dict | None = None) -> list[str]:
    """Grid / set values as arguments: ``env.x`` → ``--set env.x=V``; ``name`` → ``--name V``, or
    ``--set name=V`` where the command has no such flag but takes that ``--set`` (a TrainConfig
    field without a flag of its own, e.g. curriculum_wait), as ``check_job`` on ``base`` says for
    the key's first value (``via_set`` caches that per key: one look per job line and key)."""
    out = []
    cache = {} if via_set is None else via_set
    for key, v in values:
        if "." not in key and key not in cache:
            flag, setting = ["--" + key.replace("_", "-"), v], ["--set", f"{key}={v}"]
            cache[key] = bool(check_job is not None and base is not None and check_job(base + flag)[0]
                              and not check_job(base + setting)[0])
        out += ["--set", f"{key}={v}"] if "." in key or cache[key] else ["--" + key.replace("_", "-"), v]
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")[:60]


def _once(seen: dict, identity: str, point: dict, base: Job) -> None:
    """Record that grid ``point`` of job line ``base`` runs ``identity``; raises BatchError when
    an earlier point of that line runs the same (one value spelled two ways)."""
    if identity in seen:
        a, b = (" ".join(f"{k}={v}" for k, v in p.items()) for p in (seen[identity], point))
        raise BatchError(f"--grid points {a!r} and {b!r} of job {base.label()!r} run the same "
                         "(one value spelled two ways); give each once")
    seen[identity] = point


def make_jobs(bases: list[Job], grid: list[tuple[str, list[str]]], sets: list[tuple[str, str]],
              commands: Iterable[str], check_job: Callable[[list[str]], tuple] | None = None) -> list[Job]:
    """Expand every base job over the grid (and ``sets``) into the batch's jobs, checked in one
    pass: the size first (:func:`check_size`, before the cross product is built), then each job.

    Args:
      bases: :func:`parse_job` results; grid: :func:`parse_grid`; sets: :func:`parse_sets`.
      commands: the fightlab commands a job may name ("batch" is never one).
      check_job: ``argv -> (error, identity)`` for a fightlab argv, one parse for both: the line
        the command line would print when it refuses the argv (else None), and what the argv runs
        (its flags as the command line reads them; for a new training its whole config; None
        when refused). Two grid points of one job line that run the same (``seed=1,01``,
        ``backend=gpu,warp``) are refused, and so are two of a notebook line whose parameters
        read the same. None: no check.
    Returns:
      jobs with ids ``NNN-<what>`` in order.
    Raises:
      BatchError: no job, more than :data:`MAX_JOBS`, an unknown command (names the commands),
        an argv ``check_job`` refuses, a missing script, an unknown notebook or notebook parameter.
    """
    commands = [c for c in commands if c != "batch"]
    if not bases:
        raise BatchError("batch needs jobs: --jobs FILE and/or --job 'CMD ARGS' (e.g. --job 'train "
                         "--body simple'), or --resume BATCH_ID")
    check_size(len(bases), grid)
    points = expand(grid)
    both = sorted({k for k, _ in grid} & {k for k, _ in sets})
    if both:
        raise BatchError(f"{both[0]!r} is given by --grid and by --set; give each key once")
    keys = [k for k, _ in grid] + [k for k, _ in sets]
    for base in bases:  # a key the job line sets itself would be set twice (the last one wins)
        own = set(base.params) if base.kind == "notebook" else {
            a.split("=", 1)[0] for i, a in enumerate(base.argv) if i and base.argv[i - 1] == "--set"} | {
            a[2:].replace("-", "_") for a in base.argv if a.startswith("--")}
        clash = sorted(k for k in keys if k in own)
        if clash:
            raise BatchError(f"job {base.label()!r} sets {clash[0]!r} itself and --grid/--set set it "
                             "again; give it in one place")
    jobs: list[Job] = []
    for base in bases:
        seen: dict[str, dict] = {}  # what a grid point of this job line runs -> the point
        via_set: dict[str, bool] = {}  # per key: a --set rather than a flag (`_flags`)
        for point in points:
            values = list(point.items()) + list(sets)
            if base.kind == "notebook":
                path = notebook_path(base.notebook)
                params = {**{k: _literal(v) for k, v in base.params.items()},
                          **{k: _literal(v) for k, v in values}}
                check_notebook_params(path, params)
                what = path.stem + "-" + "-".join(f"{k}={v}" for k, v in point.items())
                jobs.append(Job(id="", kind="notebook", notebook=str(path), params=params))
                if point:  # the parameters as the notebook reads them: "smoke" and 'smoke' are one
                    _once(seen, json.dumps(params, sort_keys=True, default=repr), point, base)
            elif base.kind == "python":
                argv = list(base.argv) + _flags(values)
                if not argv:
                    raise BatchError("job 'python' needs a script (e.g. python bench/factor_probe.py 1024)")
                if not argv[0].startswith("-") and not Path(argv[0]).is_file():
                    raise BatchError(f"job 'python {shlex.join(argv)}': script {argv[0]!r} not found")
                what = ("py" if argv[0].startswith("-") else Path(argv[0]).stem) + "-" + "-".join(f"{k}={v}" for k, v in point.items())
                jobs.append(Job(id="", kind="python", argv=argv))
            else:
                cmd = base.argv[0]
                if cmd not in commands:
                    raise BatchError(f"unknown command {cmd!r} in job {base.label()!r}; commands: "
                                     f"{', '.join(commands)}, notebook NN, python SCRIPT")
                argv = list(base.argv) + _flags(values, list(base.argv), check_job, via_set)
                why, same = check_job(argv) if check_job else (None, None)
                if why:
                    raise BatchError(f"job {shlex.join(argv)!r}: {why}")
                if point and same is not None:
                    _once(seen, same, point, base)
                what = cmd + "-" + "-".join(f"{k}={v}" for k, v in point.items())
                jobs.append(Job(id="", kind="fightlab", argv=argv))
            jobs[-1].id = f"{len(jobs) - 1:03d}-{_slug(what.rstrip('-'))}"
    # two trainings in one run folder: the second would start over the first's files
    dirs = [str(Path(d).resolve()) for j in jobs if j.kind == "fightlab" and j.argv[0] == "train"
            for d in [_opt(j.argv, "--run-dir")] if d is not None]
    twice = sorted({d for d in dirs if dirs.count(d) > 1})
    if twice:
        raise BatchError(f"--run-dir {twice[0]} is given to {dirs.count(twice[0])} training jobs; each "
                         "job needs its own (leave --run-dir out: the batch gives each jobs/<id>/run)")
    return jobs


# --- lanes -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Lane:
    """A GPU (``gpu`` = its index; None: the CPU lane) running up to ``slots`` jobs at once."""
    name: str
    gpu: int | None
    slots: int
    running: int = 0


def discover_gpus(run: Callable = subprocess.run) -> list[int]:
    """GPU indices from ``nvidia-smi -L`` (lines ``GPU N: …``); [] without nvidia-smi or when it
    fails (no driver). ``run`` is injectable (tests)."""
    try:
        out = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [int(m.group(1)) for m in re.finditer(r"^GPU (\d+):", out.stdout, re.M)]


def check_devices(jobs: list[Job], lanes: list[Lane]) -> None:
    """Refuse, before any job starts, jobs that ask for a CUDA device on a host whose only lane
    is the CPU (no GPU found): each would fail after its start-up.

    Raises:
      BatchError: naming the first such job, its device and how many there are.
    """
    if any(lane.gpu is not None for lane in lanes):
        return
    cuda = [(j, d) for j in jobs if j.kind == "fightlab" for d in [_opt(j.argv, "--device") or ""]
            if d.startswith("cuda")]
    if cuda:
        raise BatchError(f"job {cuda[0][0].label()!r} asks for --device {cuda[0][1]} but this host "
                         f"has no GPU (nvidia-smi lists none; {len(cuda)} of {len(jobs)} job(s) do): run the "
                         "batch on a GPU host, or give the jobs --device cpu")


def make_lanes(gpus: str | None, found: list[int], concurrent: int) -> list[Lane]:
    """Lanes of ``--gpus`` (comma-separated indices; None: every GPU found; no GPU: one CPU lane).

    Raises:
      BatchError: an index that is not a GPU of this host (names those it has), a bad list.
    """
    if gpus is None or not gpus.strip():
        chosen = list(found)
    else:
        try:
            chosen = list(dict.fromkeys(int(g) for g in gpus.split(",")))
        except ValueError:
            raise BatchError(f"--gpus takes GPU indices such as 0,1, got {gpus!r}") from None
        bad = [g for g in chosen if g not in found]
        if bad:
            have = ", ".join(map(str, found)) if found else "none (nvidia-smi -L lists no GPU: jobs run on one CPU lane without --gpus)"
            raise BatchError(f"--gpus {gpus}: no GPU {', '.join(map(str, bad))} on this host; its GPUs: {have}")
    if not chosen:
        return [Lane("cpu", None, concurrent)]
    return [Lane(f"gpu{g}", g, concurrent) for g in chosen]


def check_options(concurrent, gpus: str | None, job_timeout_s, budget_s, min_left_s,
                  discover: Callable[[], list[int]] = discover_gpus) -> list[Lane]:
    """The batch's own flags, checked before any job is built or checked: the lanes they make.

    Raises:
      BatchError: --concurrent not a positive integer, a time that is not a positive number of
        seconds (--min-left-s: >= 0), a --gpus index this host lacks (:func:`make_lanes`)."""
    if isinstance(concurrent, bool) or not isinstance(concurrent, int) or concurrent < 1:
        raise BatchError(f"--concurrent must be a positive integer (jobs at once per GPU), got {concurrent!r}")
    for name, v in (("--job-timeout-s", job_timeout_s), ("--budget-s", budget_s)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise BatchError(f"{name} must be a positive number of seconds, got {v!r}")
    if not (math.isfinite(min_left_s) and min_left_s >= 0):
        raise BatchError(f"--min-left-s must be a number of seconds >= 0, got {min_left_s!r}")
    return make_lanes(gpus, discover(), concurrent)


# --- CUDA MPS --------------------------------------------------------------------------------

class Mps:
    """CUDA MPS for a batch: started when no daemon runs (and stopped by :meth:`stop`), an
    existing daemon used and left alone, or none (jobs time-slice).

    Attributes:
      active: jobs run under MPS; started: this batch started the daemon; env: variables the
        jobs get (the pipe / log folders of a daemon this batch started); message: one line.
    """

    def __init__(self, folder: Path, want: bool, which: Callable = shutil.which):
        self.folder = Path(folder)
        self.active = self.started = False
        self.env: dict[str, str] = {}
        self.message = ""
        self._bin = which(MPS_CONTROL) if want else None
        self._want = want

    def _control(self, stdin: str | None, env: dict, *args: str) -> subprocess.CompletedProcess:
        feed = dict(input=stdin) if stdin is not None else dict(stdin=subprocess.DEVNULL)
        return subprocess.run([self._bin, *args], capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=60, **feed)

    def start(self) -> "Mps":
        if not self._want:
            self.message = "batch: CUDA MPS not used (no GPU lane, one job per GPU, or --no-mps)"
            return self
        if self._bin is None:
            self.message = (f"batch: CUDA MPS is not available ({MPS_CONTROL} not found on PATH): "
                            "jobs sharing a GPU time-slice")
            return self
        try:
            if self._control("get_server_list\n", {}).returncode == 0:
                self.active = True
                self.message = "batch: using the CUDA MPS daemon already running (left running)"
                return self
            env = dict(CUDA_MPS_PIPE_DIRECTORY=str(self.folder / "mps" / "pipe"),
                       CUDA_MPS_LOG_DIRECTORY=str(self.folder / "mps" / "log"))
            for v in env.values():
                Path(v).mkdir(parents=True, exist_ok=True)
            r = self._control(None, env, "-d")
        except (OSError, subprocess.SubprocessError) as e:
            self.message = f"batch: CUDA MPS could not start ({e}): jobs sharing a GPU time-slice"
            return self
        if r.returncode != 0:
            self.message = (f"batch: CUDA MPS could not start ({MPS_CONTROL} -d: rc {r.returncode} "
                            f"{(r.stderr or r.stdout).strip()[-200:]}): jobs sharing a GPU time-slice")
            return self
        self.active = self.started = True
        self.env = env
        self.message = f"batch: CUDA MPS started for the batch (pipe {env['CUDA_MPS_PIPE_DIRECTORY']})"
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
    min_left_s, no_mps, with_checkpoints; those it has), which `--resume` keeps unless given."""
    try:
        state = json.loads((Path(folder) / STATE).read_text())
    except (OSError, ValueError):
        return {}
    keys = ("concurrent", "gpus", "job_timeout_s", "budget_s", "min_left_s", "no_mps", "with_checkpoints")
    return {k: state[k] for k in keys if state.get(k) is not None}


@contextlib.contextmanager
def _claim(folder: Path, fresh: bool):
    """Hold the batch folder (flock on its lock file) for one batch process.

    Raises:
      BatchError: a protected place (fightlab.rundir.check_location), a fresh batch in a folder
        that is not empty, or a folder another live batch holds.
    """
    from fightlab.rundir import check_location

    check_location(folder)
    if fresh and folder.exists() and any(folder.iterdir()):
        if (folder / STATE).exists():
            raise BatchError(f"batch folder {str(folder)!r} holds a batch already: continue it with "
                             f"--resume {folder}, or choose a new --batch-dir")
        raise BatchError(f"batch folder {str(folder)!r} is not empty and not a batch's; choose a new "
                         "--batch-dir (nothing there is deleted)")
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pid = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise BatchError(f"batch folder {str(folder)!r} is in use by another batch (pid {pid}); "
                         "wait for it, or choose a new --batch-dir") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write_state(folder: Path, state: dict) -> None:
    atomic_write(folder / STATE, json.dumps(state, indent=1, default=str))  # never a torn batch.json


def _opt(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _drop(argv: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def _train_finished(run_dir: Path) -> bool:
    """A training wrote its result row (fightlab.measure.report.finish_run): solved or out of
    iterations; a segment that ended writes none."""
    return (run_dir / "data" / "results" / "train.csv").is_file()


def job_command(job: Job, folder: Path, left_s: float | None, min_left_s: float) -> list[str]:
    """The command line of ``job``'s next attempt (sets ``job.run_dir`` for trainings).

    A training runs in its own folder (``--run-dir``, default ``jobs/<id>/run``), continues from
    its ``latest.pt`` when there is one (``train --resume``; ``--set`` dropped: a resumed run keeps
    its checkpoint's config), and with a budget gets ``--segment-s`` = ``left_s − min_left_s``
    (the smaller, if the job gives one). A notebook runs with papermill in notebooks/, its executed
    copy in ``jobs/<id>/``.
    """
    py = [sys.executable]
    jdir = folder / "jobs" / job.id
    if job.kind == "notebook":
        src = Path(job.notebook)
        return py + ["-m", "papermill", str(src), str(jdir / src.name), "-y", json.dumps(job.params),
                     "--cwd", str(NOTEBOOKS), "-k", "python3", "--log-output", "--no-progress-bar"]
    if job.kind == "python":
        return py + list(job.argv)
    argv = list(job.argv)
    if argv[0] == "train":
        resume = _opt(argv, "--resume")
        run_dir = _opt(argv, "--run-dir") or (str(Path(resume).parent) if resume else str(jdir / "run"))
        if _opt(argv, "--run-dir") is None and resume is None:
            argv += ["--run-dir", run_dir]
        job.run_dir = str(Path(run_dir).resolve())
        latest = Path(run_dir) / "latest.pt"
        if resume is None and latest.is_file():
            argv = _drop(argv, "--set") + ["--resume", str(latest)]
        if "--no-progress" not in argv:
            argv.append("--no-progress")
        if left_s is not None:
            seg = max(left_s - min_left_s, 1.0)
            given = _opt(argv, "--segment-s")
            if given is not None:
                with contextlib.suppress(ValueError):
                    seg = min(seg, float(given))
            argv = _drop(argv, "--segment-s") + ["--segment-s", f"{seg:.0f}" if seg >= 10 else f"{seg:.2f}"]
    return py + ["-m", "fightlab", *argv]


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
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
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
        p = rd / str(rel)
        if Path(str(rel)).is_absolute() or ".." in Path(str(rel)).parts or not (p.is_file() or p.is_symlink()):
            continue
        if rd in p.parent.resolve().parents or p.parent.resolve() == rd:
            out.append(p)
    return out


def archive(folder: Path, with_checkpoints: bool, run_dirs: Iterable[str | Path] = ()) -> Path:
    """``batch.tar.gz`` of the batch folder (logs, state, rows, curves, executed notebooks, run
    folders), without checkpoints (``*.pt``; with them, each run's ``latest.pt`` link too)
    unless ``with_checkpoints``, locks (the batch's and the run folders') and MPS pipes.
    ``run_dirs`` outside the batch folder (a job's own ``--run-dir``) go in as
    ``<batch>/run_dirs/<folder name>``, only the files their manifest lists (what fightlab
    wrote there): a folder without one (``/``, ``/usr/lib``, a job's refused ``--run-dir``) adds
    nothing. Written through a temporary (`fightlab.rundir.atomic_path`). Returns the archive's
    path."""
    out = folder / ARCHIVE

    def keep(info: tarfile.TarInfo):
        name = info.name.split("/", 1)[1] if "/" in info.name else ""
        if name in (ARCHIVE, ARCHIVE + ".tmp", LOCK, STATE + ".tmp") or name.startswith("mps/pipe"):
            return None
        if name.endswith(".pt") and not with_checkpoints:
            return None
        if name.rsplit("/", 1)[-1] in (".fightlab-run.lock",):  # a run folder's writer lock
            return None
        if info.issym() and with_checkpoints and name.endswith("latest.pt") and "/" not in info.linkname:
            return info  # the link to the newest checkpoint beside it (`--resume .../latest.pt`)
        if not (info.isfile() or info.isdir()):
            return None
        return info

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
    lines = job.tail.splitlines()
    text = lines[-1] if lines else ""
    return text if len(text) <= width else text[:width - 1] + "…"


def summary_table(jobs: list[Job]):
    """pandas DataFrame: job, lane, status, seconds, rc, tail (:func:`summary_tail`: the log's
    last line)."""
    import pandas as pd

    return pd.DataFrame([dict(job=j.id, lane=j.lane or "-", status=j.status, seconds=round(j.seconds, 1),
                              rc=j.rc if j.rc is not None else pd.NA, tail=summary_tail(j))
                         for j in jobs])


def run_batch(jobs: list[Job] | None, folder: Path, *, concurrent: int = 1, gpus: str | None = None,
              job_timeout_s: float | None = None, budget_s: float | None = None,
              min_left_s: float = 60.0, mps: bool = True, with_checkpoints: bool = False,
              retry_failed: bool = False, progress: bool = True, resume: bool = False,
              discover: Callable[[], list[int]] = discover_gpus, poll_s: float = 0.1,
              kill_grace_s: float = KILL_GRACE_S, log: Callable[[str], None] | None = None) -> dict:
    """Run a batch (see the module docstring) and return its state (batch.json's content).

    Args:
      jobs: :func:`make_jobs` (None with ``resume``: the jobs come from batch.json).
      folder: the batch folder (:func:`resolve_batch_dir`).
      concurrent: jobs at once per lane (≥ 1); gpus: ``--gpus``; job_timeout_s, budget_s,
        min_left_s: seconds (see the module docstring); mps: try CUDA MPS; with_checkpoints:
        put ``*.pt`` in the archive; retry_failed: a resume re-runs failed jobs too;
        discover: GPU indices of this host (injectable for tests).
    Raises:
      BatchError: bad numbers, GPUs or folder, before any job starts. KeyboardInterrupt: after
        stopping the running jobs, saving the state, MPS and the archive.
    """
    from tqdm.auto import tqdm

    say = log or (lambda m: tqdm.write(m, file=sys.stderr))
    t0 = time.monotonic()
    lanes = check_options(concurrent, gpus, job_timeout_s, budget_s, min_left_s, discover)
    if jobs is not None:
        check_devices(jobs, lanes)
    folder = Path(folder)
    with _claim(folder, fresh=not resume):
        print(f"batch {folder.name}: {folder}", flush=True)  # once its options passed and it is ours
        if resume:
            state = json.loads((folder / STATE).read_text())
            if state.get("format") != FORMAT:
                raise BatchError(f"{folder / STATE}: not a fightlab batch state ({FORMAT})")
            jobs = [Job(**j) for j in state["jobs"]]
            check_devices([j for j in jobs if j.status in RERUN or (retry_failed and j.status == "failed")], lanes)
            state["resumes"] = state.get("resumes", 0) + 1
        else:
            state = dict(format=FORMAT, batch_id=folder.name, created=time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), resumes=0)
        for j in jobs:
            if j.status == "running" and j.pid and _ours(j.pid, folder):  # left by a killed batch
                say(f"[batch] {j.id}: its process group {j.pid} outlived the batch that started it: stopped")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(j.pid, signal.SIGKILL)
        todo = [j for j in jobs if j.status in RERUN or (retry_failed and j.status == "failed")]
        for j in todo:
            if j.kind == "fightlab" and j.argv[0] == "train":
                job_command(j, folder, None, min_left_s)  # sets run_dir
                if _train_finished(Path(j.run_dir)):       # finished before a kill -9 was recorded
                    j.status = "done"
        todo = [j for j in todo if j.status != "done"]
        n = max(len(todo), 1)
        per_lane = min(concurrent, math.ceil(n / len(lanes)))
        gpu_jobs = min(per_lane * len(lanes), n)
        m = Mps(folder, want=mps and lanes[0].gpu is not None and per_lane > 1).start()
        if lanes[0].gpu is None:
            m.message = "batch: no GPU (nvidia-smi -L lists none): the jobs run on one CPU lane"
        elif not mps and per_lane > 1:
            m.message = "batch: --no-mps: jobs sharing a GPU time-slice"
        if m.message and (m.started or m.active or per_lane > 1 or lanes[0].gpu is None):
            say(m.message)
        state.update(lanes=[lane.name for lane in lanes], concurrent=concurrent, mps=m.active,
                     mps_started=m.started, budget_s=budget_s, job_timeout_s=job_timeout_s,
                     gpus=gpus, min_left_s=min_left_s, no_mps=not mps, with_checkpoints=with_checkpoints,
                     jobs=[dataclasses.asdict(j) for j in jobs])

        def save():
            state["jobs"] = [dataclasses.asdict(j) for j in jobs]
            _write_state(folder, state)

        save()
        running: dict[str, tuple[Job, Lane, subprocess.Popen, float, float, str]] = {}
        bar = tqdm(total=len(todo), desc=f"batch {folder.name}", unit="job", disable=not progress,
                   file=sys.stderr)
        pending = list(todo)
        handlers = {}
        if threading.current_thread() is threading.main_thread():
            def stop(signum, frame):
                raise KeyboardInterrupt(f"signal {signum}")

            handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            while pending or running:
                # start jobs into free slots, the least busy lane first
                while pending:
                    lane = min(lanes, key=lambda ln: ln.running)
                    if lane.running >= lane.slots:
                        break
                    left = None if budget_s is None else budget_s - (time.monotonic() - t0)
                    if left is not None and left <= min_left_s:
                        for j in pending:
                            j.status = "budget"
                            say(f"[batch] {j.id}: not started, {max(left, 0):.0f} s of the budget left "
                                f"(a job needs more than --min-left-s {min_left_s:g})")
                        bar.update(len(pending))
                        pending = []
                        save()
                        break
                    job = pending.pop(0)
                    # a training's segment ends (with a checkpoint) before its time limit too
                    seg_left = left
                    if job_timeout_s is not None:
                        own = job_timeout_s - min(min_left_s, job_timeout_s / 4) + min_left_s
                        seg_left = own if seg_left is None else min(seg_left, own)
                    cmd = job_command(job, folder, seg_left, min_left_s)
                    jdir = folder / "jobs" / job.id
                    jdir.mkdir(parents=True, exist_ok=True)
                    # the jobs run this fightlab, whatever the cwd or an installed copy
                    path = os.pathsep.join(x for x in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if x)
                    env = {**os.environ, **m.env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path,
                           "FIGHTLAB_BATCH": str(folder.resolve()),
                           "FIGHTLAB_CONCURRENT": str(per_lane), "FIGHTLAB_MPS": "1" if m.active else "0",
                           "FIGHTLAB_GPU_JOBS": str(gpu_jobs)}
                    for old in ("FIGHTLAB_SHARED_GPU", "FIGHTLAB_HOST_JOBS"):
                        env.pop(old, None)  # the new names say it
                    if lane.gpu is not None:
                        env["CUDA_VISIBLE_DEVICES"] = str(lane.gpu)
                    limit, why = math.inf, "timeout"
                    if job_timeout_s is not None:
                        limit = job_timeout_s
                    if left is not None and left - min_left_s / 4 < limit:
                        limit, why = left - min_left_s / 4, "budget"
                    with open(jdir / "log.txt", "a") as fh:
                        fh.write(f"=== batch {folder.name} attempt {job.attempts + 1} lane {lane.name}: "
                                 f"{shlex.join(cmd)}\n")
                        fh.flush()
                        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                                start_new_session=True, stdin=subprocess.DEVNULL)
                    job.status, job.lane, job.attempts, job.rc = "running", lane.name, job.attempts + 1, None
                    job.started, job.ended, job.pid = time.time(), None, proc.pid
                    lane.running += 1
                    running[job.id] = (job, lane, proc, time.monotonic(), limit, why)
                    save()
                    bar.set_postfix(running=len(running))
                # finished or over time
                for jid, (job, lane, proc, start, limit, why) in list(running.items()):
                    rc = proc.poll()
                    over = rc is None and time.monotonic() - start > limit
                    if rc is None and not over:
                        continue
                    if over:
                        _kill_group(proc, kill_grace_s)
                        rc = proc.returncode
                    else:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(proc.pid, signal.SIGKILL)  # nothing of a finished job lingers
                    job.rc, job.ended = rc, time.time()
                    job.seconds += time.monotonic() - start
                    log_path = folder / "jobs" / job.id / "log.txt"
                    job.tail = _tail(log_path)
                    is_train = job.kind == "fightlab" and job.argv[0] == "train"
                    if over and is_train and _train_finished(Path(job.run_dir)):
                        job.status = "done"  # it had written its result and was exiting
                    elif over:
                        job.status = why
                    elif rc != 0:
                        job.status = "failed"
                    elif is_train and not _train_finished(Path(job.run_dir)):
                        job.status = "paused"
                    else:
                        job.status = "done"
                    lane.running -= 1
                    del running[jid]
                    say(f"[{lane.name}] {job.id} {job.status} rc={rc} {job.seconds:.1f} s"
                        + (f": {job.tail.splitlines()[-1] if job.tail else '(empty log)'}"
                           if job.status != "done" else ""))
                    bar.update(1)
                    bar.set_postfix(running=len(running))
                    save()
                if running or pending:
                    time.sleep(poll_s)
        except BaseException:
            for job, lane, proc, start, _, _ in running.values():
                _kill_group(proc, kill_grace_s)
                job.status, job.rc, job.ended = "interrupted", proc.returncode, time.time()
                job.seconds += time.monotonic() - start
                job.tail = _tail(folder / "jobs" / job.id / "log.txt")
            raise
        finally:
            for sig, h in handlers.items():
                signal.signal(sig, h)
            bar.close()
            m.stop()
            state["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            save()
            table = summary_table(jobs)
            atomic_write(folder / "summary.txt", table.to_string(index=False) + "\n")
            state["archive"] = str(archive(folder, with_checkpoints, [j.run_dir for j in jobs if j.run_dir]))
            save()
    return state


def command(*, resume: str | None = None, batch_dir: str | None = None, concurrent=None,
            jobs_file: str | None = None, job=(), grid=(), sets=(), gpus: str | None = None,
            job_timeout_s: float | None = None, budget_s: float | None = None, min_left_s: float | None = None,
            no_mps: bool = False, with_checkpoints: bool = False, retry_failed: bool = False,
            progress: bool = True, commands=(), check_job=None) -> int:
    """`python -m fightlab batch`, its flags as given (None: not given; a resumed batch keeps its
    saved options unless given again), checked in one pass before anything runs: the batch's
    own flags (`check_options`), the grid's size, every job (`make_jobs` over `commands`, each
    argv checked by `check_job`); then run (`run_batch`), the summary table printed. Returns the exit code:
    0 every job done, 1 some not (continue with --resume), 130 interrupted.

    Raises:
      ConfigError: one line naming the flag: --concurrent not a positive integer, --resume with
        jobs given, a bad grid, set, jobs file or job."""
    folder = resolve_batch_dir(resume, batch_dir)
    # a resumed batch keeps its own options (batch.json) unless given again
    saved = saved_options(folder) if resume is not None else {}

    def pick(given, key, default):
        return given if given is not None else saved.get(key, default)

    raw = pick(concurrent, "concurrent", 1)
    try:
        concurrent = int(raw)
    except ValueError:
        concurrent = raw
    if isinstance(concurrent, str) or concurrent < 1:
        raise ConfigError(f"--concurrent must be a positive integer (jobs at once per GPU), got {raw!r}")
    options = dict(gpus=pick(gpus, "gpus", None), job_timeout_s=pick(job_timeout_s, "job_timeout_s", None),
                   budget_s=pick(budget_s, "budget_s", None), min_left_s=pick(min_left_s, "min_left_s", 60.0))
    check_options(concurrent, **options)  # the batch's own flags before its jobs
    if resume is not None:
        if jobs_file or job or grid or sets:
            raise ConfigError("--resume takes its jobs from the batch's batch.json; --jobs, --job, "
                              "--grid and --set are refused with it")
        jobs = None
    else:
        grid = parse_grid(grid)
        sets = parse_sets(sets)
        bases = (read_jobs_file(jobs_file) if jobs_file is not None else []) + [parse_job(j) for j in job]
        jobs = make_jobs(bases, grid, sets, commands, check_job=check_job)
    try:
        state = run_batch(jobs, folder, concurrent=concurrent, **options,
                          mps=not (no_mps or saved.get("no_mps", False)),
                          with_checkpoints=with_checkpoints or saved.get("with_checkpoints", False),
                          retry_failed=retry_failed, progress=progress, resume=resume is not None)
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
