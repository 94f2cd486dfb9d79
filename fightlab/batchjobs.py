"""A batch's input, checked in one pass before anything runs: its jobs over the grid and its lanes.

A job is a fightlab command (``train --body simple --seed 1``: anything ``python -m fightlab CMD
…`` takes), a notebook with parameters (``notebook 06 size=smoke``, or ``notebook x.ipynb k=v``,
run with papermill in notebooks/ as ``fightlab.reproduce`` runs them) or a Python script
(``python bench/factor_probe.py 1024``), from a jobs file (``--jobs FILE``: one per line, ``#``
comments and blank lines skipped) and/or ``--job 'CMD …'``. Each is expanded over the cross
product of ``--grid KEY=V1,V2,…`` (commas inside brackets or quotes do not split:
``env.push_impulse_ns=[20,40],[10,20]`` is two values); ``--set KEY=VALUE`` adds one value, never
split. For a command or script a key ``name`` becomes ``--name VALUE`` (underscores as dashes), a
dotted key ``env.x`` ``--set env.x=VALUE``; for a notebook a key is a parameter (a Python literal,
else a string), refused unless its parameters cell has it. Lanes: every GPU (``nvidia-smi -L``;
``--gpus 0,1`` to choose, ``all``; none: one CPU lane), each running up to ``--concurrent K`` jobs
(at most :data:`MAX_PER_GPU` per GPU).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import itertools
import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

from fightlab.errors import ConfigError
from fightlab.paths import NOTEBOOKS

#: most jobs one batch may hold (job lines × the grid's cross product), checked before the cross
#: product is built: a batch past it is a typo (a grid of millions of points), not a study
MAX_JOBS = 10_000


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
    """The batch's job count, job lines × the grid's points, computed without building them;
    BatchError for more than :data:`MAX_JOBS`, naming the count, its factors and the limit."""
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
    """A notebook by number (``06`` → notebooks/06_train.ipynb) or path (``x.ipynb``); BatchError
    for no such notebook (naming the numbered notebooks)."""
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
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark some editors write: dropped
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
    """Refuse parameters a notebook does not have (papermill would only warn and inject them):
    BatchError naming the unknown keys and the notebook's (``papermill.inspect_notebook``)."""
    have = _notebook_params(str(path))
    bad = [k for k in keys if k not in have]
    if bad:
        raise BatchError(f"notebook {path.name} has no parameter {', '.join(map(repr, bad))}; its "
                         f"parameters: {', '.join(have) or 'none'}")


def _flags(values: Iterable[tuple[str, str]], base: list[str] | None = None,
           check_job: Callable | None = None, via_set: dict | None = None) -> list[str]:
    """Grid / set values as arguments: ``env.x`` → ``--set env.x=V``; ``name`` → ``--name V``, or
    ``--set name=V`` where ``check_job`` on ``base`` refuses the flag but takes that ``--set`` (a
    TrainConfig field without a flag, e.g. curriculum_wait; ``via_set`` caches it per key)."""
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


def make_jobs(bases: list[Job], grid: list[tuple[str, list[str]]], sets: list[tuple[str, str]],
              commands: Iterable[str], check_job: Callable[[list[str]], tuple] | None = None) -> list[Job]:
    """Expand every base job over the grid (and ``sets``) into the batch's jobs, checked in one
    pass: the size first (:func:`check_size`, before the cross product is built), then each job.

    Args:
      bases: :func:`parse_job` results; grid: :func:`parse_grid`; sets: :func:`parse_sets`.
      commands: the fightlab commands a job may name ("batch" is never one).
      check_job: ``argv -> (error, identity)`` for a fightlab argv, one parse for both: the line
        the command line would print when it refuses the argv (else None), and what the argv runs
        (for a new training its whole config; None when refused). Two grid points of one job line
        that run the same (``seed=1,01``; a notebook's parameters that read the same) are
        refused. None: no check.
    Returns:
      jobs with ids ``NNN-<what>`` in order.
    Raises:
      BatchError: no job, more than :data:`MAX_JOBS`, an unknown command (names the commands), a
        key given twice, an argv ``check_job`` refuses, a missing script, an unknown notebook or
        notebook parameter, two trainings in one ``--run-dir``.
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
            values, same = list(point.items()) + list(sets), None
            if base.kind == "notebook":
                path = notebook_path(base.notebook)
                params = {k: _literal(v) for k, v in [*base.params.items(), *values]}
                check_notebook_params(path, params)
                job, what = Job(id="", kind="notebook", notebook=str(path), params=params), path.stem
                same = json.dumps(params, sort_keys=True, default=repr)  # as read: "smoke" and 'smoke' are one
            elif base.kind == "python":
                argv = list(base.argv) + _flags(values)
                if not argv:
                    raise BatchError("job 'python' needs a script (e.g. python bench/factor_probe.py 1024)")
                if not argv[0].startswith("-") and not Path(argv[0]).is_file():
                    raise BatchError(f"job 'python {shlex.join(argv)}': script {argv[0]!r} not found")
                job, what = Job(id="", kind="python", argv=argv), "py" if argv[0].startswith("-") else Path(argv[0]).stem
            else:
                if (what := base.argv[0]) not in commands:
                    raise BatchError(f"unknown command {what!r} in job {base.label()!r}; commands: "
                                     f"{', '.join(commands)}, notebook NN, python SCRIPT")
                argv = list(base.argv) + _flags(values, list(base.argv), check_job, via_set)
                why, same = check_job(argv) if check_job else (None, None)
                if why:
                    raise BatchError(f"job {shlex.join(argv)!r}: {why}")
                job = Job(id="", kind="fightlab", argv=argv)
            if point and same is not None:
                if same in seen:  # one value spelled two ways
                    a, b = (" ".join(f"{k}={v}" for k, v in p.items()) for p in (seen[same], point))
                    raise BatchError(f"--grid points {a!r} and {b!r} of job {base.label()!r} run the "
                                     "same (one value spelled two ways); give each once")
                seen[same] = point
            tag = "-".join(f"{k}={v}" for k, v in point.items())
            job.id = f"{len(jobs):03d}-{_slug(f'{what}-{tag}'.rstrip('-'))}"
            jobs.append(job)
    # two trainings in one run folder: the second would start over the first's files
    dirs = [str(Path(d).resolve()) for j in jobs if j.kind == "fightlab" and j.argv[0] == "train"
            for d in [_opt(j.argv, "--run-dir")] if d is not None]
    twice = sorted({d for d in dirs if dirs.count(d) > 1})
    if twice:
        raise BatchError(f"--run-dir {twice[0]} is given to {dirs.count(twice[0])} training jobs; each "
                         "job needs its own (leave --run-dir out: the batch gives each jobs/<id>/run)")
    return jobs


# --- lanes -----------------------------------------------------------------------------------

#: most jobs at once per GPU: CUDA MPS serves at most 48 client contexts per device (compute
#: capability 7.0 and later; nvidia-cuda-mps-control(1)); more would queue or fail to start
MAX_PER_GPU = 48
#: failed jobs in a row after which a GPU lane takes no new job while another lane is left (a
#: GPU that died fails every job at once; a job that fails on its own fails on every lane)
LANE_FAILS = 2


@dataclasses.dataclass
class Lane:
    """A GPU (``gpu`` = its nvidia-smi index, ``uuid`` its UUID when listed; None: the CPU lane)
    running up to ``slots`` jobs at once; ``fails``: its failed jobs in a row; ``ok``: its jobs
    that ran through (done, paused); ``down``: set aside (no new job)."""
    name: str
    gpu: int | None
    slots: int
    running: int = 0
    uuid: str | None = None
    fails: int = 0
    down: bool = False
    ok: int = 0

    def healthy(self) -> bool:
        """Not set aside, no failure since its last job that ran through, and one such job or one
        running: a lane whose jobs run fine, beside which failures in a row mean a bad GPU."""
        return not self.down and self.fails == 0 and (self.ok > 0 or self.running > 0)

    def device(self) -> str:
        """The job's ``CUDA_VISIBLE_DEVICES``: the UUID (one name with or without an MPS server,
        which renumbers the devices it sees), else the index; "" on the CPU lane."""
        return "" if self.gpu is None else (self.uuid or str(self.gpu))


def discover_gpus(run: Callable = subprocess.run) -> dict[int, str | None]:
    """GPUs from ``nvidia-smi -L`` (lines ``GPU N: NAME (UUID: GPU-…)``): index -> UUID (None
    where the line has none); {} without nvidia-smi or when it fails (no driver). ``run`` is
    injectable (tests)."""
    try:
        out = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0:
        return {}
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^GPU (\d+):.*?(?:\(UUID: (GPU-[^)\s]+)\))?\s*$",
                                                             out.stdout, re.M)}


def check_devices(jobs: list[Job], lanes: list[Lane]) -> None:
    """Refuse, before any job starts, jobs that ask for a CUDA device when the only lane is the
    CPU (each would fail after its start-up): BatchError naming the first, its device, how many."""
    if any(lane.gpu is not None for lane in lanes):
        return
    cuda = [(j, d) for j in jobs if j.kind == "fightlab" for d in [_opt(j.argv, "--device") or ""]
            if d.startswith("cuda")]
    if cuda:
        raise BatchError(f"job {cuda[0][0].label()!r} asks for --device {cuda[0][1]} but the batch has "
                         f"no GPU lane (nvidia-smi lists no GPU, or --gpus none; {len(cuda)} of {len(jobs)} "
                         "job(s) do): run the batch on a GPU host with GPU lanes, or give the jobs --device cpu")


def make_lanes(gpus: str | None, found, concurrent: int) -> list[Lane]:
    """Lanes of ``--gpus``: comma-separated indices, ``all`` (every GPU ``found``), ``none`` (one
    CPU lane, which a GPU host may want too); None: every GPU found, or one CPU lane without any.
    ``found``: GPU indices, or index -> UUID (:func:`discover_gpus`).

    Raises:
      BatchError: an index that is not a GPU of this host (names those it has), an index given
        twice, ``all`` on a host without GPUs, a bad list (an index is ASCII digits),
        an empty or blank ``--gpus``.
    """
    uuids = dict(found) if isinstance(found, dict) else dict.fromkeys(found)
    have = ", ".join(map(str, uuids)) or "none (nvidia-smi -L lists no GPU)"
    spec = (gpus or "").strip().lower()
    if gpus is None:
        chosen = list(uuids)
    elif not spec:
        raise BatchError(f"--gpus {gpus!r} names no GPU; give indices such as 0,1, all or none")
    elif spec == "none":
        chosen = []
    elif spec == "all":
        if not uuids:
            raise BatchError("--gpus all: this host has no GPU (nvidia-smi -L lists none); leave --gpus "
                             "out or give --gpus none to run the jobs on one CPU lane")
        chosen = list(uuids)
    else:
        words = [g.strip() for g in gpus.split(",")]
        if not all(re.fullmatch(r"[0-9]+", g) for g in words):  # not int(): it takes +1, 1_0, fullwidth digits
            raise BatchError(f"--gpus takes GPU indices such as 0,1, all, or none (one CPU lane), got {gpus!r}")
        chosen = [int(g) for g in words]
        if (dup := next((g for i, g in enumerate(chosen) if g in chosen[:i]), None)) is not None:
            raise BatchError(f"--gpus {gpus}: GPU {dup} given twice; give each GPU once (its lane runs "
                             "--concurrent jobs at once)")
        bad = [g for g in chosen if g not in uuids]
        if bad:
            raise BatchError(f"--gpus {gpus}: no GPU {', '.join(map(str, bad))} on this host; its GPUs: {have}")
    return [Lane(f"gpu{g}", g, concurrent, uuid=uuids[g]) for g in chosen] or [Lane("cpu", None, concurrent)]


def lanes_left(lanes: list[Lane], state: dict, again: bool, say: Callable[[str], None]) -> list[Lane]:
    """The lanes a resume uses: those batch.json's ``lanes_down`` names left out (said in one line
    each), unless ``again`` (``--gpus`` given again) or none would be left."""
    down = state.get("lanes_down") or {}
    if again:
        state["lanes_down"] = {}
        return lanes
    left = [lane for lane in lanes if lane.name not in down]
    if not left:
        return lanes
    for lane in lanes:
        if lane.name in down:
            say(f"[batch] {lane.name}: set aside by an earlier run of this batch ({down[lane.name]}): left "
                "out; give --gpus again to use it")
    return left


def lane_result(lane: Lane, job: Job, lanes: list[Lane], state: dict, say: Callable[[str], None]) -> None:
    """Count ``job``'s end against its GPU lane: :data:`LANE_FAILS` failures in a row set it aside
    (``state["lanes_down"]``) only while another lane is :meth:`Lane.healthy` (so never the last
    lane; jobs failing on every lane are the jobs' fault: recorded failed, no lane set aside); a
    job that ran through (done, paused) clears the count."""
    if job.status == "failed":
        lane.fails += 1
    elif job.status in ("done", "paused"):
        lane.fails, lane.ok = 0, lane.ok + 1
    if (lane.fails >= LANE_FAILS and not lane.down and lane.gpu is not None
            and any(ln.healthy() for ln in lanes if ln is not lane)):
        lane.down = True
        state.setdefault("lanes_down", {})[lane.name] = f"{lane.fails} jobs failed in a row"
        left = [ln.name for ln in lanes if not ln.down]
        say(f"[batch] {lane.name}: {lane.fails} jobs failed in a row on it: set aside, no new job starts "
            f"there ({', '.join(left) or 'no lane'} left); its failed jobs run again with --resume --retry-failed")


def check_options(concurrent, gpus: str | None, job_timeout_s, budget_s, min_left_s,
                  discover: Callable[[], list[int]] = discover_gpus) -> list[Lane]:
    """The batch's own flags, checked before any job is built or checked: the lanes they make.

    Raises:
      BatchError: --concurrent not a positive integer (above :data:`MAX_PER_GPU` on GPU lanes), a
        time that is not a positive number of seconds (--min-left-s: >= 0), a bad --gpus
        (:func:`make_lanes`)."""
    k = None if isinstance(concurrent, (bool, float)) else concurrent
    with contextlib.suppress(ValueError):
        k = int(k) if isinstance(k, str) else k  # a command line's text
    if not isinstance(k, int) or k < 1:
        raise BatchError(f"--concurrent must be a positive integer (jobs at once per GPU), got {concurrent!r}")
    for name, v in (("--job-timeout-s", job_timeout_s), ("--budget-s", budget_s)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise BatchError(f"{name} must be a positive number of seconds, got {v!r}")
    if not (math.isfinite(min_left_s) and min_left_s >= 0):
        raise BatchError(f"--min-left-s must be a number of seconds >= 0, got {min_left_s!r}")
    lanes = make_lanes(gpus, discover(), k)
    if k > MAX_PER_GPU and lanes[0].gpu is not None:
        raise BatchError(f"--concurrent {k}: at most {MAX_PER_GPU} jobs at once per GPU (CUDA MPS serves "
                         f"{MAX_PER_GPU} clients per device); {len(lanes)} GPU lane(s) run at most "
                         f"{MAX_PER_GPU * len(lanes)} jobs at once")
    return lanes


def _opt(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _drop(argv: list[str], flag: str) -> list[str]:
    out, it = [], iter(argv)
    for a in it:
        if a == flag:
            next(it, None)  # its value
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
