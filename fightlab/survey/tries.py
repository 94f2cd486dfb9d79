"""One GPU type's tries, each command given to an injected runner: `Call` in, `Result` out.
`SubprocessRunner` runs them (logs under runs/survey/<id>/), `DryRunner` records them
(``--dry-run``, tests). `Survey` runs every try of a GPU type, with try cluster ``C``:

- ``--picker sky``: provision (``sky launch -c C --infra I --gpus G:1 --disk-size D -i N --down -y``,
  an empty task) given up after ``give_up_s``, since SkyPilot 0.14.1 waits for a Vast instance
  without a limit (``sky/provision/vast/instance.py:run_instances``) and 10 min for its SSH; a
  stopped ``sky`` client leaves its request on the API server, so ``sky api cancel ID -y``
  follows. Then the task (``sky launch -c C TASK_YAML ... --env K=V``), the rows collected
  (``rsync``) and, always, ``sky down C -y`` (``sky launch --down`` alone keeps a cluster whose
  provisioning, sync or setup failed).
- ``--picker vastai`` (Vast only): fightlab searches (``vastai search offers``),
  `offers.rank_offers` picks, ``vastai create instance`` rents, rsync uploads, ssh runs the task,
  and ``vastai destroy instance`` always; survey.json names every instance before its task starts.

Both collect the rows into a folder they make, ``data/survey/bench/<survey id>/<gpu>-<try>/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fightlab import meta
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.rundir import atomic_write
from fightlab.survey import hostcheck, offers
from fightlab.survey.options import SurveyOptions, accelerator, cluster_name, task_envs
from fightlab.survey.task import REMOTE_WORKDIR, TASK_YAML, task_script

__all__ = ["Call", "Result", "Runner", "DryRunner", "SubprocessRunner", "Survey", "SETUP_TIMEOUT_S",
           "VAST_IMAGE", "FINAL", "output_json", "answer_json", "output_tail", "write_state"]

#: setup's limit [s]: the host check, a venv, pip install -e . (torch's CUDA wheels included)
SETUP_TIMEOUT_S = 1200.0
#: rsync of the rows, and a teardown [s]
COLLECT_TIMEOUT_S, TEARDOWN_TIMEOUT_S = 180.0, 600.0
#: the image of a vastai-picked host: SkyPilot 0.14.1's default for Vast (sky/clouds/vast.py)
VAST_IMAGE = "vastai/base:0.0.2"
#: ssh options for vastai-picked hosts (Vast's proxy ports are reused: no known-hosts pinning)
SSH_OPTS = ("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=30")
#: what an interrupted ``sky`` client prints (sky/client/cli/command.py, _async_call_or_wait)
_SKY_CANCEL = re.compile(r"sky api cancel ([0-9a-zA-Z-]+)")
#: seconds between polls of a renting instance
POLL_S = 10.0
#: statuses after which no further host is tried for the GPU type ("planned": a dry run's try;
#: "collect failed": the rows' rsync failed after bench ran, not the host's fault)
FINAL = ("done", "no offer", "error", "planned", "collect failed")


@dataclass(frozen=True)
class Call:
    """One command of the survey: its cluster, its step (``provision``, ``task``, ``collect``,
    ``teardown``, ``search``, ``rent``, ``wait``, ``upload``), argv, its limit [s]."""

    cluster: str
    what: str
    argv: tuple[str, ...]
    timeout_s: float | None
    note: str = ""
    stdin: str | None = None  # a file the command reads on its standard input


@dataclass(frozen=True)
class Result:
    """A command's exit status (124: its limit passed; 127: not found; 130: interrupted) and
    output (stdout and stderr together)."""

    rc: int
    out: str = ""


Runner = Callable[[Call], Result]


class DryRunner:
    """Records every `Call` (``calls``) and answers as if it worked, with placeholders
    (``<INSTANCE>``, ``<SSH_HOST>``) for what a real command would print."""

    def __init__(self, offers_found: list[dict] | None = None):
        self.calls: list[Call] = []
        self.offers_found = offers_found
        self._lock = threading.Lock()

    def __call__(self, call: Call) -> Result:
        with self._lock:
            self.calls.append(call)
        answers = {("vastai", "search", "offers"): self.offers_found or [],
                   ("vastai", "create", "instance"): {"success": True, "new_contract": "<INSTANCE>"},
                   ("vastai", "show", "instance"): {"actual_status": "running", "ssh_host": "<SSH_HOST>",
                                                    "ssh_port": "<SSH_PORT>"}}
        key = tuple(call.argv[:3])
        return Result(0, json.dumps(answers[key]) if key in answers else "")


class SubprocessRunner:
    """Runs each `Call` from ``cwd`` (the repository) in its own process group, output to
    ``log_dir/<cluster>/<nn>-<what>.log``; past its limit the group gets SIGINT (a ``sky``
    client then prints the id of its request, which goes on running on SkyPilot's API server),
    then SIGTERM, then SIGKILL (rc 124). ``stop`` (set on Ctrl-C) ends every running call but a
    teardown (rc 130)."""

    def __init__(self, log_dir: Path, cwd: Path = REPO_ROOT):
        self.log_dir, self.cwd = Path(log_dir), Path(cwd)
        self.stop = threading.Event()
        self._n: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, call: Call) -> Result:
        with self._lock:
            n = self._n[call.cluster] = self._n.get(call.cluster, 0) + 1
        log = self.log_dir / call.cluster / f"{n:02d}-{call.what}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as f:
            f.write("$ " + shlex.join(call.argv) + "\n")
            f.flush()
            try:
                with open(call.stdin, "rb") if call.stdin else open(os.devnull, "rb") as inp:
                    p = subprocess.Popen(list(call.argv), cwd=self.cwd, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=inp, start_new_session=True)
            except FileNotFoundError:
                return Result(127, f"{call.argv[0]}: command not found")
            deadline = None if call.timeout_s is None else time.monotonic() + call.timeout_s
            rc = None
            while rc is None:
                try:
                    rc = p.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    late = deadline is not None and time.monotonic() > deadline
                    if late or (self.stop.is_set() and call.what != "teardown"):
                        _kill(p)
                        rc = 124 if late else 130
        return Result(rc, log.read_text(errors="replace")[-20000:])


def _kill(p: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGINT, 20.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
            p.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _task_timeout(o: SurveyOptions) -> float:
    return SETUP_TIMEOUT_S + o.time_limit_s + 120.0


def _remote_rows(o: SurveyOptions, prefix: str) -> list[str]:
    return [f"{prefix}runs/survey/{o.survey_id}/{f}" for f in ("bench.json", "data/results/bench.csv")]


def write_state(path: Path, state: dict) -> None:
    """``state`` as JSON into ``path`` through `fightlab.rundir.atomic_write`: a kill leaves the
    old file or the new one, never a torn one."""
    atomic_write(path, json.dumps(state, indent=1, default=str))


def output_json(out: str):
    """The JSON value a ``--raw`` command printed, past any warning lines before it (stdout and
    stderr are one). Raises ValueError when there is none."""
    dec = json.JSONDecoder()
    for m in re.finditer(r"^[\[{]", out, re.M):
        try:
            return dec.raw_decode(out, m.start())[0]
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON in the output")


def answer_json(r: Result):
    """The JSON value a command printed (`output_json`), or None when it failed or printed none."""
    try:
        return output_json(r.out) if r.rc == 0 else None
    except ValueError:
        return None


def output_tail(out: str) -> str:
    """Why a command failed, in one line: the host check's FAILED line, else the last line (300
    characters at most)."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    for ln in lines:
        if hostcheck.FAILED_MARK in ln:
            return ln[ln.index(hostcheck.FAILED_MARK):]
    return lines[-1][:300] if lines else ""


@dataclass
class _Try:
    cluster: str
    status: str = "failed"
    reason: str = ""
    offer: dict | None = None
    instance: str | None = None
    files: list[str] = field(default_factory=list)
    teardown: str = ""


class Survey:
    """The executor: runs each GPU type's tries with ``runner``, writes rows under ``dest``."""

    def __init__(self, o: SurveyOptions, runner: Runner, dest: Path, dry: bool, log: Callable[[str], None],
                 task: dict, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.o, self.run, self.dest, self.dry, self.task = o, runner, dest, dry, task
        self.stop = getattr(runner, "stop", None) or threading.Event()
        self.work = RUNS / "survey" / o.survey_id  # logs and task scripts (git-ignored)
        self.sleep, self.clock = sleep, clock
        self._log, self._lock = log, threading.Lock()
        self.state = dict(survey_id=o.survey_id, infra=o.infra, picker=o.picker, gpus=list(o.gpus),
                          bodies=list(o.bodies), requirements=dataclasses.asdict(o.requirements),
                          started=meta.utc_now(), results={g: [] for g in o.gpus})

    def log(self, line: str) -> None:
        with self._lock:
            self._log(line)

    def record(self, gpu: str, t: _Try) -> None:
        with self._lock:
            tries = self.state["results"][gpu]
            if tries and tries[-1]["cluster"] == t.cluster:
                tries.pop()
            tries.append(dataclasses.asdict(t))
            if not self.dry:
                write_state(self.dest / "survey.json", self.state)

    def gpu(self, gpu: str) -> str:
        """Every try of one GPU type; returns its last status."""
        tried: list = []
        candidates = None
        status = "failed"
        for k in range(1, self.o.tries + 1):
            if self.stop.is_set():
                break
            t = _Try(cluster_name(self.o.survey_id, gpu, k))
            try:
                if self.o.picker == "vastai":
                    if candidates is None:
                        candidates = self._search(gpu, t) or []
                    if candidates:
                        self._vast_try(gpu, t, candidates, tried)
                else:
                    self._sky_try(gpu, t)
            except Exception as e:  # noqa: BLE001 - an unexpected answer or a bug: said, teardown done
                t.status, t.reason = "error", f"{type(e).__name__}: {e}"
            self.record(gpu, t)
            self.log(f"survey: {gpu} try {k}: {t.status}" + (f" ({t.reason})" if t.reason else ""))
            status = t.status
            if status in FINAL:
                break
        return status

    # -- SkyPilot picks and launches
    def _sky_try(self, gpu: str, t: _Try) -> None:
        o, c = self.o, t.cluster
        res = ["--infra", o.infra, "--gpus", f"{accelerator(gpu)}:1"]
        auto = ["-i", str(o.autostop_min), "--down", "-y"]
        try:
            r = self.run(Call(c, "provision", ("sky", "launch", "-c", c, *res, "--disk-size",
                                               str(self.task["resources"]["disk_size"]), *auto),
                              o.give_up_s, f"give up after {o.give_up_s:g} s: the host did not answer; then "
                              "`sky api cancel <the request id the interrupted client prints>`"))
            self._cancel(r, c)
            if self._failed(r, t, "provisioning"):
                return
            envs = [x for k, v in task_envs(o, gpu) for x in ("--env", f"{k}={v}")]
            yaml = str(TASK_YAML.relative_to(REPO_ROOT))
            r = self.run(Call(c, "task", ("sky", "launch", "-c", c, yaml, *res, *auto, *envs),
                              _task_timeout(o), "workdir upload, setup (host check, pip install -e .), bench"))
            self._cancel(r, c)
            self._task_result(r, t)
            if t.status != "host check failed":
                self._collect(t, [f"{c}:{p}" for p in _remote_rows(o, REMOTE_WORKDIR + "/")], ())
        finally:
            d = self.run(Call(c, "teardown", ("sky", "down", c, "-y"), TEARDOWN_TIMEOUT_S, "finally, always"))
            self._teardown(d, t, f"sky down {c} -y")

    # -- fightlab picks with the vastai SDK
    def _search(self, gpu: str, t: _Try) -> list[dict] | None:
        o = self.o
        q = offers.vast_query(gpu, o.requirements)
        argv = ("vastai", "search", "offers", q, "-o", offers.VAST_ORDER, "--storage",
                str(self.task["resources"]["disk_size"]), "--raw")
        r = self.run(Call(t.cluster, "search", argv, 120.0, "once per GPU type; fightlab re-checks every offer"))
        if o.offers_found is not None:
            found = list(o.offers_found)
        elif self.dry:
            return [dict(id="<OFFER>", machine_id="<MACHINE>", dph_total=None)]
        else:
            try:
                found = output_json(r.out) if r.rc == 0 else None
                why = "" if isinstance(found, list) else f"failed (exit {r.rc})" if r.rc else "printed no list of offers"
            except ValueError:
                why = "printed no JSON"
            if why:
                t.status, t.reason = "error", f"vastai search {why}: {output_tail(r.out)}"
                return None
        ok, bad = offers.rank_offers(found, gpu, o.requirements)
        self.log(f"survey: {gpu}: {len(ok)} of {len(found)} offers pass ({q})")
        if not ok:
            why = Counter(w for _, w in bad)
            t.status, t.reason = "no offer", f"none of {len(found)} offers passes" + (
                ": " + "; ".join(f"{w} ({n}x)" for w, n in list(why.items())[:3]) if why else "")
            return None
        return ok

    def _vast_try(self, gpu: str, t: _Try, candidates: list[dict], tried: list) -> None:
        o, c = self.o, t.cluster
        left = [x for x in candidates if str(x.get("machine_id")) not in {str(m) for m in tried}]
        if not left:
            t.status, t.reason = "no offer", "every offer that passed was tried"
            return
        offer = left[0]
        tried.append(offer.get("machine_id"))
        t.offer = {k: offer.get(k) for k in ("id", "machine_id", "gpu_name", "dph_total", "cuda_max_good",
                                             "driver_version", "inet_down", "reliability", "geolocation")}
        disk = str(self.task["resources"]["disk_size"])
        r = self.run(Call(c, "rent", ("vastai", "create", "instance", str(offer["id"]), "--image", VAST_IMAGE,
                                      "--disk", disk, "--ssh", "--direct", "--label", c, "--raw"), 120.0,
                          "the cheapest untried offer that passes" +
                          (f", ${offer['dph_total']:g}/h" if isinstance(offer.get("dph_total"), (int, float)) else "")))
        new = answer_json(r)
        if not isinstance(new, dict) or "new_contract" not in new:
            t.reason = f"vastai create instance failed (exit {r.rc}): {output_tail(r.out)}"
            return
        t.instance = iid = str(new["new_contract"])
        self.record(gpu, t)  # survey.json names the instance before anything else can fail
        try:
            host = self._wait(t, iid)
            if host is None:
                return
            ssh = ["ssh", *SSH_OPTS, "-p", host[1], f"root@{host[0]}"]
            rsh = shlex.join(["ssh", *SSH_OPTS, "-p", host[1]])
            r = self.run(Call(c, "upload", ("rsync", "-az", "--filter=dir-merge,- .skyignore", "-e", rsh,
                                            f"{REPO_ROOT}/", f"root@{host[0]}:sky_workdir/"), 600.0,
                              ".skyignore as rsync's filter, SkyPilot's rule"))
            if self._failed(r, t, "upload"):
                return
            script = self.work / c / "task.sh"
            if not self.dry:
                script.parent.mkdir(parents=True, exist_ok=True)
                script.write_text(task_script(self.task, task_envs(o, gpu)))
            r = self.run(Call(c, "task", (*ssh, "cd ~/sky_workdir && bash -s"), _task_timeout(o),
                              f"{script}: the task YAML's envs, setup and run", stdin=str(script)))
            self._task_result(r, t)
            if t.status != "host check failed":
                self._collect(t, [f"root@{host[0]}:{p}" for p in _remote_rows(o, "sky_workdir/")],
                              ("-e", rsh))
        finally:
            d = self.run(Call(c, "teardown", ("vastai", "destroy", "instance", iid, "-y"), TEARDOWN_TIMEOUT_S,
                              "finally, always"))
            self._teardown(d, t, f"vastai destroy instance {iid} -y")

    def _wait(self, t: _Try, iid: str) -> tuple[str, str] | None:
        """(ssh host, port) once the instance runs and answers SSH, or None after give_up_s."""
        deadline = self.clock() + self.o.give_up_s
        while True:
            left = deadline - self.clock()
            if left <= 0:
                t.status, t.reason = "gave up", f"no answer within {self.o.give_up_s:g} s"
                return None
            r = self.run(Call(t.cluster, "wait", ("vastai", "show", "instance", iid, "--raw"), min(60.0, left),
                              f"every {POLL_S:g} s until running, give up after {self.o.give_up_s:g} s"))
            info = answer_json(r)
            info = info if isinstance(info, dict) else {}
            if str(info.get("actual_status")) == "running" and info.get("ssh_host") and info.get("ssh_port"):
                host = (str(info["ssh_host"]), str(info["ssh_port"]))
                p = self.run(Call(t.cluster, "wait", ("ssh", *SSH_OPTS, "-p", host[1], f"root@{host[0]}", "true"),
                                  min(30.0, max(left, 1.0)), "the host answers SSH"))
                if p.rc == 0:
                    return host
            self.sleep(POLL_S)

    def _cancel(self, r: Result, c: str) -> None:
        """A ``sky`` client stopped at its limit leaves its request running on the API server
        (a Vast launch waits there without a limit): cancel it, by the id the client printed."""
        m = _SKY_CANCEL.search(re.sub(r"\x1b\[[0-9;]*m", "", r.out)) if r.rc in (124, 130) else None
        if m:
            self.run(Call(c, "cancel", ("sky", "api", "cancel", m.group(1), "-y"), 120.0,
                          "the request the stopped client left on the API server"))

    # -- shared steps
    def _failed(self, r: Result, t: _Try, step: str) -> bool:
        if r.rc == 0:
            return False
        if r.rc == 124 and step == "provisioning":
            t.status, t.reason = "gave up", f"no answer within {self.o.give_up_s:g} s"
        elif r.rc == 127:
            t.status, t.reason = "error", output_tail(r.out)
        else:
            t.reason = f"{step} failed (exit {r.rc}): {output_tail(r.out)}"
        return True

    def _task_result(self, r: Result, t: _Try) -> None:
        if hostcheck.FAILED_MARK in r.out:
            t.status, t.reason = "host check failed", output_tail(r.out)
        elif r.rc == 124:
            t.reason = f"setup + bench passed their {_task_timeout(self.o):g} s"
        elif r.rc:
            t.reason = f"setup or bench failed (exit {r.rc}): {output_tail(r.out)}"

    def _collect(self, t: _Try, sources: list[str], rsh: tuple[str, ...]) -> None:
        dest = self.dest / t.cluster.split("-", 2)[2]
        if not self.dry:
            dest.mkdir(parents=True, exist_ok=False)  # a fresh folder: nothing of anyone else's
        r = self.run(Call(t.cluster, "collect", ("rsync", "-az", *rsh, *sources, f"{dest}/"), COLLECT_TIMEOUT_S,
                          "the bench rows"))
        if self.dry:
            t.status = "planned"
            return
        t.files = sorted(str(p.relative_to(self.dest)) for p in dest.rglob("*") if p.is_file())
        if not t.files:
            dest.rmdir()  # the empty folder this made
        rows_file = dest / "bench.json"
        if r.rc or not rows_file.is_file():
            if r.rc and (r.rc == 127 or not t.reason):  # a local tool or the transfer, not the host:
                t.status = "collect failed"             # no other host of the type is rented
                t.reason = f"rsync of the rows failed (exit {r.rc}): {output_tail(r.out)}" + (f"; {t.reason}" if t.reason else "")
                return
            t.reason = t.reason or f"no rows collected (rsync exit {r.rc}): {output_tail(r.out)}"
            return
        try:
            rows = json.loads(rows_file.read_text())["rows"]
        except (json.JSONDecodeError, KeyError, TypeError):
            t.reason = f"{rows_file}: not bench's JSON"
            return
        if rows and all(x.get("ok") for x in rows):
            t.status, t.reason = "done", ""
        else:  # the rows say why (a bad host, a failed check, the time limit)
            why = [json.loads(x["params"]).get("reason", "") if isinstance(x.get("params"), str) else ""
                   for x in rows if not x.get("ok")]
            t.status = "bad host" if any("bad host" in w for w in why) else "failed"
            t.reason = "; ".join(w for w in why if w) or t.reason or "bench rows not ok"

    def _teardown(self, d: Result, t: _Try, cmd: str) -> None:
        t.teardown = "ok" if d.rc == 0 else f"FAILED (exit {d.rc}): run `{cmd}` by hand"
        if d.rc:
            self.log(f"survey: WARNING {t.cluster}: teardown failed, still billing? run: {cmd}")
