"""``python -m fightlab survey launch``: the GPU survey on rented machines.

    python -m fightlab survey launch --gpus RTX4090,L40S,RTX3090 [--infra vast] [--dry-run]
    python -m fightlab survey launch --gpus RTX4090 --picker vastai [--offers-json FILE] [--dry-run]

One cluster per GPU type, all at once (a thread each); per type up to ``--tries`` hosts one after
another (a host that fails its check, runs slow, or does not answer is torn down and the next
one tried). Every command runs from the repository root. Per try, with cluster name ``C``:

``--picker sky`` (default; ``--infra`` vast, runpod, lambda or aws, optionally ``/region``):
SkyPilot picks the host and launches it (the ``sky`` CLI, skypilot 0.14.1):

1. provision: ``sky launch -c C --infra I --gpus G:1 --disk-size D -i N --down -y`` (an empty
   task), given up after `GIVE_UP_S` (5 min): the host did not answer. (SkyPilot 0.14.1 itself
   waits for a Vast instance without a limit, ``sky/provision/vast/instance.py:run_instances``,
   and 10 min for its SSH, ``sky/provision/provisioner.py``.) The ``sky`` client only streams a
   request that SkyPilot's API server runs, so a stopped client (SIGINT) leaves it running and
   prints its id: ``sky api cancel ID -y`` follows, then the teardown.
2. task: ``sky launch -c C TASK_YAML ... --env K=V`` on that cluster: the workdir upload
   (`.skyignore`), ``setup`` = the host check (`fightlab.survey.hostcheck`: GPU type, driver's
   CUDA vs warp's toolkit, driver, download bandwidth; fails fast) and ``pip install -e .``,
   ``run`` = ``python -m fightlab bench``.
3. collect: ``rsync`` of bench.json and bench.csv into ``data/survey/bench/<survey id>/<gpu>-<try>/``
   (a folder this command makes; nothing it did not write is touched); a failed rsync after
   bench ran ends the GPU type ("collect failed": a local problem, not the host's).
4. finally, always: ``sky down C -y``. Autostop (``-i N --down``) is the safety net if this
   process dies: ``sky launch --down`` alone does not tear down when provisioning, sync or setup
   fails ("for debugging purposes", its --help).

``--picker vastai`` (``--infra vast`` only): fightlab picks the offer. SkyPilot's Vast backend
rents the first result of its own search (`fightlab.survey.offers`), so it cannot filter on
driver, CUDA or bandwidth, order by price, take a chosen offer, or move on to the next host (its
search would return the same top-scored machine again). Here the vastai SDK's CLI (``vastai``,
PyPI ``vastai-sdk`` / ``vastai`` 1.9.1) searches (``vastai search offers QUERY -o dph_total
--raw``, once per type), `offers.rank_offers` re-checks every offer, and the cheapest untried one
is rented (``vastai create instance``), waited for (SSH within 5 min), given the same upload
(``rsync`` with .skyignore as its filter, SkyPilot's rule), the task YAML's setup and run over
``ssh``, collected, and destroyed in ``finally`` (``vastai destroy instance ID -y``; no autostop
here: the survey's survey.json lists every rented instance before its task starts).

Before anything is written or rented: every value (`make_options`), the local tools
(`check_tools`), the cloud access (`preflight`: ``sky check CLOUD -o json`` / ``vastai show
user``); a local SkyPilot API server this run started is stopped at the end (``sky api stop``).
Ctrl-C: every running step stopped, every host torn down, the state says ``interrupted``.

The runner is injected (`Runner`: a `Call` in, a `Result` out): `SubprocessRunner` runs the
commands (logs under runs/survey/<id>/), `DryRunner` records them for ``--dry-run`` and tests.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from fightlab import meta
from fightlab.config import ConfigError
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.survey import hostcheck, offers
from fightlab.survey.cost import GPU_TYPES, gpu_type, survey_bench_path

__all__ = [
    "TASK_YAML", "SKYIGNORE", "UPLOAD_LIMIT_BYTES", "UPLOAD_DATA_FILES", "INFRAS", "PICKERS",
    "GIVE_UP_S", "AUTOSTOP_MIN", "TRIES", "SETUP_TIMEOUT_S", "BANDWIDTH_URL", "REMOTE_WORKDIR",
    "VAST_IMAGE", "SURVEY_DATA", "Call", "Result", "Runner", "DryRunner", "SubprocessRunner",
    "SurveyOptions", "parse_gpus", "validate_infra", "validate_cuda", "validate_url", "parse_bodies",
    "MAX_TRIES", "make_options", "accelerator", "cluster_name",
    "read_task", "task_envs", "task_script", "upload_set", "check_upload", "warp_cuda", "run_survey",
    "format_plan", "no_offer", "summary_lines", "check_tools", "preflight",
    "local_sky_server_up", "TOOLS",
]

#: the survey's SkyPilot task (workdir, disk, envs, setup, run)
TASK_YAML = REPO_ROOT / "fightlab" / "survey" / "bench.sky.yaml"
#: what the upload leaves out (replaces .gitignore for SkyPilot)
SKYIGNORE = REPO_ROOT / ".skyignore"
#: the upload's limit [bytes] (the study: 57 MB took 17 min to slow hosts; 1.4 MB fixed it)
UPLOAD_LIMIT_BYTES = 2 * 10**6
#: the only data/ files the upload may hold: the tables bench reads (headline, expected speed,
#: the auto-nworld sweep)
UPLOAD_DATA_FILES = ("data/results/train.csv", "data/results/bench.csv", "data/results/sweep.csv")
#: the infrastructures (SkyPilot clouds) the survey rents from: skypilot[vast], [runpod],
#: [lambda], [aws]
INFRAS = ("vast", "runpod", "lambda", "aws")
#: who picks the host: SkyPilot (any infra), or fightlab through the vastai SDK (vast only)
PICKERS = ("sky", "vastai")
#: a host that does not answer within this [s] is given up (the study lost $0.51 on one)
GIVE_UP_S = 300.0
#: autostop [min]: an idle cluster tears itself down (--down) after this
AUTOSTOP_MIN = 10
#: hosts tried per GPU type
TRIES = 2
#: setup's limit [s]: the host check, a venv, pip install -e . (torch's CUDA wheels included)
SETUP_TIMEOUT_S = 1200.0
#: rsync of the rows, and a teardown [s]
COLLECT_TIMEOUT_S, TEARDOWN_TIMEOUT_S = 180.0, 600.0
#: the download the host check times (Cloudflare's speed test endpoint; --bandwidth-url)
BANDWIDTH_URL = "https://speed.cloudflare.com/__down?bytes=100000000"
#: where SkyPilot puts the workdir on the host (sky/skylet/constants.py SKY_REMOTE_WORKDIR)
REMOTE_WORKDIR = "~/sky_workdir"
#: the image of a vastai-picked host: SkyPilot 0.14.1's default for Vast (sky/clouds/vast.py)
VAST_IMAGE = "vastai/base:0.0.2"
#: the collected rows: data/survey/bench/<survey id>/ (where the survey's cost reads them back)
SURVEY_DATA = survey_bench_path(REPO_ROOT)
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


# --- commands and runners ------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    """One command of the survey: the cluster it is for, its step (``provision``, ``task``,
    ``collect``, ``teardown``, ``search``, ``rent``, ``wait``, ``upload``), argv, its limit [s]."""

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
    """Records every `Call` (``calls``, in order per cluster) and answers as if it worked:
    placeholders stand for what a real command would print (``<INSTANCE>``, ``<SSH_HOST>``)."""

    def __init__(self, offers_found: list[dict] | None = None):
        self.calls: list[Call] = []
        self.offers_found = offers_found
        self._lock = threading.Lock()

    def __call__(self, call: Call) -> Result:
        with self._lock:
            self.calls.append(call)
        a = call.argv
        if a[:3] == ("vastai", "search", "offers"):
            return Result(0, json.dumps(self.offers_found or []))
        if a[:3] == ("vastai", "create", "instance"):
            return Result(0, json.dumps({"success": True, "new_contract": "<INSTANCE>"}))
        if a[:3] == ("vastai", "show", "instance"):
            return Result(0, json.dumps({"actual_status": "running", "ssh_host": "<SSH_HOST>",
                                         "ssh_port": "<SSH_PORT>"}))
        return Result(0, "")


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
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# --- options ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SurveyOptions:
    """A survey, validated by :func:`make_options`. gpus: GPU_TYPES names; infra: ``vast`` or
    ``aws/us-east-1``; picker: `PICKERS`; bodies: bench's; tries: hosts per GPU type; the
    requirements of a host (`offers.OfferRequirements`: min CUDA, driver, Mbit/s, $/h cap);
    bandwidth_url: what the host check downloads; time_limit_s: bench's hard limit [s];
    offers_found: recorded offers for the vastai picker instead of a search."""

    gpus: tuple[str, ...]
    survey_id: str
    infra: str = "vast"
    picker: str = "sky"
    bodies: tuple[str, ...] = ("simple", "muscular-fast")
    tries: int = TRIES
    requirements: offers.OfferRequirements = offers.OfferRequirements()
    bandwidth_url: str = BANDWIDTH_URL
    time_limit_s: float = 960.0
    give_up_s: float = GIVE_UP_S
    autostop_min: int = AUTOSTOP_MIN
    offers_found: tuple[dict, ...] | None = None


def parse_gpus(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"RTX4090,L40S"`` -> ``("RTX 4090", "L40S")`` (`GPU_TYPES` names, case and spaces ignored).

    Raises:
      ConfigError: empty, an unknown name (listing the valid ones), or a type named twice.
    """
    items = text.split(",") if isinstance(text, str) else list(text or [])
    items = [str(i).strip() for i in items if str(i).strip()]
    valid = ", ".join(g.replace(" ", "") for g in GPU_TYPES)
    if not items:
        raise ConfigError(f"--gpus must name one or more GPU types, comma-separated; valid: {valid}")
    out = []
    for i in items:
        try:
            g = gpu_type(i)
        except ConfigError:
            raise ConfigError(f"--gpus: unknown GPU type {i!r}; valid: {valid}") from None
        if g in out:
            raise ConfigError(f"--gpus names {g} twice")
        out.append(g)
    return tuple(out)


def validate_infra(infra: str) -> str:
    """``vast``, ``aws/us-east-1``, ``aws/us-east-1/us-east-1a``: a cloud of `INFRAS`,
    optionally ``/region`` and ``/zone``, each part non-empty.

    Raises:
      ConfigError: another cloud or a malformed value (naming it and the valid clouds).
    """
    s = str(infra or "").strip().lower()
    parts = s.split("/")
    if parts[0] not in INFRAS or len(parts) > 3 or \
            not all(re.fullmatch(r"[a-z0-9][a-z0-9._-]*", x) for x in parts[1:]):
        raise ConfigError(f"--infra must be one of {', '.join(INFRAS)}, optionally /region[/zone] with "
                          f"non-empty parts, got {infra!r}")
    return s


#: the most hosts tried per GPU type (--tries)
MAX_TRIES = 10


def _number(name: str, v, lo: float = 0.0, integer: bool = False, hi: float | None = None):
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > lo
    if ok and integer:
        ok = float(v).is_integer()
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        kind = "an integer" if integer else "a number"
        rng = f" in {lo + 1:g}..{hi:g}" if integer and hi is not None else (
            f" > {lo:g}" if hi is None else f" in ({lo:g}, {hi:g}]")
        raise ConfigError(f"{name} must be {kind}{rng}, got {v!r}")
    return int(v) if integer else float(v)


def _at_least(name: str, v, lo: float = 0.0) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo:
        raise ConfigError(f"{name} must be a number >= {lo:g}, got {v!r}")
    return float(v)


def validate_cuda(v: str, name: str = "--min-cuda") -> str:
    """A CUDA version ``x.y`` with x in 11..20 (``"13.0"``).

    Raises:
      ConfigError: naming ``name``, the value and the form.
    """
    m = re.fullmatch(r"([0-9]+)\.([0-9]+)", str(v).strip())
    if not m or not 11 <= int(m.group(1)) <= 20:
        raise ConfigError(f"{name} must be a CUDA version x.y with x in 11..20 (e.g. 13.0), or '' for not "
                          f"checked, got {v!r}")
    return f"{int(m.group(1))}.{int(m.group(2))}"


def validate_url(v: str, name: str = "--bandwidth-url") -> str:
    """``v`` when it is an http(s) URL with a host, or "" (not checked).

    Raises:
      ConfigError: anything else, naming ``name`` and the value.
    """
    from urllib.parse import urlsplit

    s = str(v or "").strip()
    if not s:
        return ""
    try:
        u = urlsplit(s)
        ok = u.scheme in ("http", "https") and bool(u.hostname) and not re.search(r"\s", s)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"{name} must be an http:// or https:// URL (or '' for no bandwidth check), got {v!r}")
    return s


def parse_bodies(bodies) -> tuple[str, ...]:
    """``"simple,muscular-fast"`` (or a sequence) -> a tuple of bench's bodies, checked by bench's
    own rule (`fightlab.measure.bench.validate_bodies`) before anything is rented.

    Raises:
      ConfigError: empty, an unknown body (listing the valid ones), or a body named twice.
    """
    from fightlab.measure.bench import validate_bodies

    items = bodies.split(",") if isinstance(bodies, str) else list(bodies or [])
    return tuple(validate_bodies([str(b).strip() for b in items if str(b).strip()]))


def make_options(gpus, infra: str = "vast", picker: str = "sky", bodies=("simple", "muscular-fast"),
                 tries: int = TRIES, min_cuda: str | None = "warp", min_driver: str | None = None,
                 min_mbit_s: float | None = offers.MIN_MBIT_S, max_usd_per_h: float | None = None,
                 bandwidth_url: str | None = BANDWIDTH_URL, time_limit_s: float | None = None,
                 survey_id: str | None = None, offers_json: Path | str | None = None,
                 give_up_s: float = GIVE_UP_S, autostop_min: int = AUTOSTOP_MIN) -> SurveyOptions:
    """Validated `SurveyOptions`; ``min_cuda`` ``"warp"`` = warp's CUDA toolkit (`warp_cuda`,
    read after every other value passed), None or "" = not checked; ``time_limit_s`` None = twice
    bench's shortest accepted limit for the bodies at full size
    (`fightlab.measure.bench.min_time_limit`, also the least accepted); ``bandwidth_url`` ""
    = the host's bandwidth is not timed.

    Raises:
      ConfigError: any bad value, naming its flag and the valid choices (GPU types, infra, picker,
        bodies, numbers, versions, a survey id that is not 1–16 of a-z 0-9, a --picker vastai
        outside Vast, --max-price or --offers-json without --picker vastai, an --offers-json that
        is not a list of offers).
    """
    from fightlab.measure import bench

    gpus = parse_gpus(gpus)
    infra = validate_infra(infra)
    if picker not in PICKERS:
        raise ConfigError(f"--picker must be one of {', '.join(PICKERS)}, got {picker!r}")
    if picker == "vastai" and infra.split("/")[0] != "vast":
        raise ConfigError(f"--picker vastai rents from Vast only; got --infra {infra!r} (use --infra vast)")
    if offers_json is not None and picker != "vastai":
        raise ConfigError("--offers-json is the vastai picker's recorded search: give --picker vastai")
    if max_usd_per_h is not None and picker != "vastai":
        raise ConfigError(f"--max-price {max_usd_per_h:g} needs --picker vastai: SkyPilot's Vast backend "
                          "cannot filter by price (it rents the first offer of its own search)")
    bodies = parse_bodies(bodies)
    tries = _number("--tries", tries, integer=True, hi=MAX_TRIES)
    if min_cuda not in (None, "", "warp"):
        min_cuda = validate_cuda(min_cuda)
    if min_driver not in (None, "") and hostcheck.version_tuple(min_driver) is None:
        raise ConfigError(f"--min-driver must be a driver version such as 580.65.06, or '' for not checked, "
                          f"got {min_driver!r}")
    min_mbit_s = _at_least("--min-mbit-s", min_mbit_s)
    if max_usd_per_h is not None:
        max_usd_per_h = _number("--max-price", max_usd_per_h)
    bandwidth_url = validate_url(bandwidth_url)
    need = bench.min_time_limit(len(bodies), bench.TRAIN_S, "full")
    if time_limit_s is None:
        time_limit_s = 2 * need
    time_limit_s = _number("--time-limit-s", time_limit_s)
    if time_limit_s < need:
        raise ConfigError(f"--time-limit-s {time_limit_s:g} is too short for bench of {len(bodies)} bod"
                          f"{'y' if len(bodies) == 1 else 'ies'}: at least {need:g} s "
                          f"(fightlab.measure.bench.min_time_limit)")
    req = offers.OfferRequirements(min_cuda=None if min_cuda in ("warp", "") else min_cuda,
                                   min_driver=min_driver or None, min_mbit_s=min_mbit_s,
                                   max_usd_per_h=max_usd_per_h)
    sid = survey_id if survey_id is not None else meta.new_run_id()
    if not re.fullmatch(r"[a-z0-9]{1,16}", str(sid)):
        raise ConfigError(f"--survey-id must be 1–16 characters of a-z and 0-9, got {sid!r}")
    if offers_json is not None and not str(offers_json).strip():
        raise ConfigError("--offers-json is empty: give the path of a recorded offer list (JSON)")
    found = None if offers_json is None else tuple(offers.read_offers(offers_json))
    if min_cuda == "warp":
        req = dataclasses.replace(req, min_cuda=warp_cuda())
    return SurveyOptions(gpus=gpus, survey_id=str(sid), infra=infra, picker=picker, bodies=bodies,
                         tries=tries, requirements=req, bandwidth_url=bandwidth_url,
                         time_limit_s=time_limit_s, give_up_s=_number("--give-up-s", give_up_s),
                         autostop_min=_number("--autostop-min", autostop_min, integer=True),
                         offers_found=found)


def warp_cuda() -> str | None:
    """The oldest driver CUDA version that runs this warp, as ``"13.0"`` (bench's rule,
    `fightlab.measure.bench.min_driver_cuda` of warp's CUDA toolkit), or None when warp does not
    say."""
    import warp as wp

    from fightlab.measure.bench import cuda_version, min_driver_cuda

    level, wp.config.log_level = wp.config.log_level, max(wp.config.log_level, wp.LOG_WARNING)
    try:  # no greeting: this reads a version, nothing runs on warp
        v = cuda_version(wp.get_cuda_toolkit_version())
    finally:
        wp.config.log_level = level
    return None if v is None else f"{min_driver_cuda(v):.1f}"


def accelerator(gpu: str) -> str:
    """SkyPilot's name of a GPU type: spaces dropped (``"RTX 4090"`` -> ``"RTX4090"``, as its Vast
    catalog spells them, sky/catalog/data_fetchers/fetch_vast.py). SkyPilot accepts unknown
    names, which is why `parse_gpus` checks them against `GPU_TYPES` first."""
    return gpu_type(gpu).replace(" ", "")


def cluster_name(survey_id: str, gpu: str, k: int) -> str:
    """``fl-<survey id>-<gpu>-<try>``, e.g. ``fl-1a2b3c-rtx4090-1`` (a valid SkyPilot and Vast name)."""
    return f"fl-{survey_id}-{accelerator(gpu).lower()}-{k}"


def read_task(path: Path | str = TASK_YAML) -> dict:
    """The task YAML as a dict (``workdir``, ``resources.disk_size``, ``envs``, ``setup``, ``run``).

    Raises:
      ConfigError: not a mapping, or no setup / run / disk_size.
    """
    import yaml

    task = yaml.safe_load(Path(path).read_text())
    if not isinstance(task, dict) or not task.get("setup") or not task.get("run") or \
            not isinstance(task.get("resources"), dict) or "disk_size" not in task["resources"]:
        raise ConfigError(f"{path}: a SkyPilot task with setup, run and resources.disk_size is expected")
    return task


def task_script(task: dict, envs: Sequence[tuple[str, str]]) -> str:
    """The bash script a vastai-picked host runs (``bash -s`` in its workdir): the task's envs
    with ``envs`` over them, its setup, then (when setup succeeded) its run; the exit status is
    setup's or run's, as ``sky launch`` runs them."""
    merged = {str(k): "" if v is None else str(v) for k, v in (task.get("envs") or {}).items()}
    merged.update(envs)
    lines = ["# fightlab survey task: fightlab/survey/bench.sky.yaml's envs, setup and run"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in merged.items()]
    for part, tag in (("setup", "FIGHTLAB_SETUP"), ("run", "FIGHTLAB_RUN")):
        lines += [f"bash <<'{tag}' || exit $?", task[part].rstrip("\n"), tag]
    return "\n".join(lines) + "\n"


# --- the upload ------------------------------------------------------------------------------

def _excluded(root: Path) -> set[str]:
    """SkyPilot 0.14.1's reading of .skyignore (sky/data/storage_utils.py
    get_excluded_files_from_skyignore): ``/x`` anchored at the root, any other line at every
    depth (``**/x``), globbed; relative paths."""
    import glob

    out: set[str] = set()
    ignore = root / ".skyignore"
    if not ignore.is_file():
        raise ConfigError(f"{ignore} is missing: without it SkyPilot uploads by .gitignore's rules")
    for line in ignore.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pat = "." + line if line.startswith("/") else "**/" + line
        for m in glob.glob(os.path.join(str(root), pat), recursive=True):
            out.add(os.path.relpath(m, root))
    return out


def upload_set(root: Path | str = REPO_ROOT) -> list[tuple[str, int]]:
    """(relative path, bytes) of every file the workdir upload holds: the walk SkyPilot 0.14.1
    zips (sky/data/storage_utils.py zip_files_and_folders), excluded folders not entered.

    Raises:
      ConfigError: no .skyignore in ``root``.
    """
    root = Path(root)
    excl = {os.path.join(str(root), e.rstrip("/")) for e in _excluded(root)}
    files = []
    for d, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(x for x in dirs if os.path.join(d, x) not in excl)
        for n in sorted(names):
            p = os.path.join(d, n)
            if p not in excl and not os.path.islink(p):
                files.append((os.path.relpath(p, root), os.path.getsize(p)))
    return files


def check_upload(root: Path | str = REPO_ROOT, limit: int = UPLOAD_LIMIT_BYTES) -> tuple[int, int]:
    """(files, bytes) of the upload; refuses one over ``limit`` or holding a run folder
    (``runs/``) or a data/ file bench does not read (`UPLOAD_DATA_FILES`).

    Raises:
      ConfigError: naming the size and the largest files, or the paths that do not belong.
    """
    files = upload_set(root)
    total = sum(s for _, s in files)
    odd = [p for p, _ in files if p.split(os.sep)[0] == "runs" or
           (p.split(os.sep)[0] == "data" and p.replace(os.sep, "/") not in UPLOAD_DATA_FILES)]
    if odd:
        raise ConfigError(f"the upload holds {len(odd)} file(s) bench does not need, e.g. "
                          f"{', '.join(odd[:3])}: add them to .skyignore")
    if total > limit:
        big = ", ".join(f"{p} ({s / 1e6:.2f} MB)" for p, s in sorted(files, key=lambda x: -x[1])[:3])
        raise ConfigError(f"the upload is {total / 1e6:.2f} MB, over the {limit / 1e6:g} MB limit; "
                          f"largest: {big}: add them to .skyignore")
    return len(files), total


# --- one GPU type ----------------------------------------------------------------------------

def task_envs(o: SurveyOptions, gpu: str) -> list[tuple[str, str]]:
    """The task's environment for ``gpu`` (``--env K=V`` each): every name is declared in
    the task YAML's ``envs``."""
    r = o.requirements
    return [("FIGHTLAB_SURVEY_ID", o.survey_id), ("FIGHTLAB_GPU", gpu),
            ("FIGHTLAB_BODIES", ",".join(o.bodies)), ("FIGHTLAB_MIN_CUDA", r.min_cuda or ""),
            ("FIGHTLAB_MIN_DRIVER", r.min_driver or ""),
            ("FIGHTLAB_MIN_MBIT_S", "" if r.min_mbit_s is None else f"{r.min_mbit_s:g}"),
            ("FIGHTLAB_BANDWIDTH_URL", o.bandwidth_url), ("FIGHTLAB_TIME_LIMIT_S", f"{o.time_limit_s:g}")]


def _task_timeout(o: SurveyOptions) -> float:
    return SETUP_TIMEOUT_S + o.time_limit_s + 120.0


def _remote_rows(o: SurveyOptions, prefix: str) -> list[str]:
    base = f"{prefix}runs/survey/{o.survey_id}"
    return [f"{base}/bench.json", f"{base}/data/results/bench.csv"]


def _json(out: str):
    """The JSON value a ``--raw`` command printed, past any warning lines before it (the
    runner keeps stdout and stderr together). Raises ValueError when there is none."""
    dec = json.JSONDecoder()
    for m in re.finditer(r"^[\[{]", out, re.M):
        try:
            return dec.raw_decode(out, m.start())[0]
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON in the output")


def _tail(out: str) -> str:
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

    def asdict(self) -> dict:
        return dataclasses.asdict(self)


class _Survey:
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
                tries[-1] = t.asdict()
            else:
                tries.append(t.asdict())
            if not self.dry:
                (self.dest / "survey.json").write_text(json.dumps(self.state, indent=1, default=str))

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
            if r.rc:
                t.status, t.reason = "error", f"vastai search failed (exit {r.rc}): {_tail(r.out)}"
                return None
            try:
                found = _json(r.out)
            except ValueError:
                t.status, t.reason = "error", f"vastai search printed no JSON: {_tail(r.out)}"
                return None
            if not isinstance(found, list):
                t.status, t.reason = "error", f"vastai search printed no list of offers: {_tail(r.out)}"
                return None
        ok, bad = offers.rank_offers(found, gpu, o.requirements)
        self.log(f"survey: {gpu}: {len(ok)} of {len(found)} offers pass ({q})")
        if not ok:
            why: dict[str, int] = {}
            for _, w in bad:
                why[w] = why.get(w, 0) + 1
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
        try:
            iid = str(_json(r.out)["new_contract"]) if r.rc == 0 else None
        except (ValueError, KeyError, TypeError):
            iid = None
        if iid is None:
            t.reason = f"vastai create instance failed (exit {r.rc}): {_tail(r.out)}"
            return
        t.instance = iid
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
            try:
                info = _json(r.out) if r.rc == 0 else {}
            except ValueError:
                info = {}
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
            t.status, t.reason = "error", _tail(r.out)
        else:
            t.reason = f"{step} failed (exit {r.rc}): {_tail(r.out)}"
        return True

    def _task_result(self, r: Result, t: _Try) -> None:
        if hostcheck.FAILED_MARK in r.out:
            t.status, t.reason = "host check failed", _tail(r.out)
        elif r.rc == 124:
            t.reason = f"setup + bench passed their {_task_timeout(self.o):g} s"
        elif r.rc:
            t.reason = f"setup or bench failed (exit {r.rc}): {_tail(r.out)}"

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
                t.reason = f"rsync of the rows failed (exit {r.rc}): {_tail(r.out)}" + (f"; {t.reason}" if t.reason else "")
                return
            t.reason = t.reason or f"no rows collected (rsync exit {r.rc}): {_tail(r.out)}"
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


# --- the survey ------------------------------------------------------------------------------

#: the local binaries each picker's path runs
TOOLS = {"sky": ("sky", "rsync"), "vastai": ("vastai", "ssh", "rsync")}
_INSTALL = {"sky": "pip install 'skypilot[vast]==0.14.1'", "vastai": "pip install vastai-sdk",
            "rsync": "apt-get install rsync", "ssh": "apt-get install openssh-client"}


def check_tools(picker: str, which: Callable[[str], str | None] | None = None) -> None:
    """Every local binary ``picker``'s path runs (`TOOLS`) is on PATH.

    Raises:
      ConfigError: naming the missing ones and how to install them.
    """
    missing = [t for t in TOOLS[picker] if (which or shutil.which)(t) is None]
    if missing:
        raise ConfigError(f"not on PATH: {', '.join(missing)} (--picker {picker} runs "
                          f"{', '.join(TOOLS[picker])}); install: {'; '.join(_INSTALL[t] for t in missing)}; "
                          "see docs/survey.md")


def local_sky_server_up(timeout_s: float = 2.0) -> bool | None:
    """Whether SkyPilot's local API server answers (``http://127.0.0.1:<port>/api/health``,
    port ``SKYPILOT_API_SERVER_PORT`` or 46580); None when ``SKYPILOT_API_SERVER_ENDPOINT``
    names another server (not this run's to stop). An endpoint set in ~/.sky/config.yaml is
    not read: a ``sky api stop`` then refuses a remote server, harmlessly."""
    import urllib.request

    if os.environ.get("SKYPILOT_API_SERVER_ENDPOINT"):
        return None
    port = os.environ.get("SKYPILOT_API_SERVER_PORT", "46580")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=timeout_s):
            return True
    except OSError:
        return False


def preflight(o: SurveyOptions, runner: Runner) -> None:
    """One cheap call that proves the picker's cloud access: ``sky check CLOUD -o json``
    (CLOUD enabled), or ``vastai show user --raw`` (an API key that works).

    Raises:
      ConfigError: one line naming the problem and the command to fix it.
    """
    if o.picker == "sky":
        cloud = o.infra.split("/")[0]
        r = runner(Call("preflight", "check", ("sky", "check", cloud, "-o", "json"), 300.0,
                        f"SkyPilot's access to {cloud}"))
        if r.rc:
            raise ConfigError(f"`sky check {cloud}` failed (exit {r.rc}): {_tail(r.out) or 'no output'}; "
                              f"set up {cloud}'s credentials (sky check {cloud}) before a survey")
        try:
            data = _json(r.out)
        except ValueError:
            raise ConfigError(f"`sky check {cloud} -o json` printed no JSON: {_tail(r.out) or 'no output'}") from None
        enabled = {str(c).lower() for ws in (data.values() if isinstance(data, dict) else [])
                   if isinstance(ws, dict) for c in ws}
        if cloud not in enabled:
            raise ConfigError(f"SkyPilot has no access to {cloud} (enabled: {', '.join(sorted(enabled)) or 'none'}): "
                              f"run `sky check {cloud}` and set up its credentials")
    else:
        r = runner(Call("preflight", "check", ("vastai", "show", "user", "--raw"), 120.0, "the Vast API key"))
        try:
            ok = r.rc == 0 and isinstance(_json(r.out), dict)
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"`vastai show user` failed (exit {r.rc}): {_tail(r.out) or 'no output'}; "
                              "set the key with `vastai set api-key KEY`")


def _wait_all(futures) -> None:
    """Waits in short steps, so that a Ctrl-C reaches this (the main) thread at once."""
    from concurrent.futures import wait

    while not all(f.done() for f in futures):
        wait(futures, timeout=0.5)


def run_survey(o: SurveyOptions, runner: Runner | None = None, dry_run: bool = False,
               data_dir: Path | str | None = None, log: Callable[[str], None] = print,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
               check: bool | None = None, sky_server_up: Callable[[], bool | None] | None = None) -> dict:
    """Run the survey (module docstring): every GPU type at once, each in its own thread.
    Returns the state (``results``: per GPU type its tries, each with cluster, status, reason,
    offer, instance, files, teardown; ``interrupted``: a Ctrl-C stopped it, every teardown run),
    also ``data_dir/<survey id>/survey.json``.

    ``runner`` default: `SubprocessRunner` (logs in runs/survey/<id>/), or with ``dry_run`` a
    `DryRunner` (nothing runs, nothing is written; the state's ``calls`` list every command).
    ``data_dir`` default `SURVEY_DATA`. ``check`` (default: when ``runner`` is None and not a dry
    run): `preflight` before anything is written or rented, and with ``--picker sky`` a local
    SkyPilot API server this run started (``sky_server_up``, default `local_sky_server_up`, False
    before the first call) is stopped (``sky api stop``) at the end.

    Raises:
      ConfigError: before anything runs: ``data_dir/<survey id>`` exists; not dry: recorded
        offers (``--offers-json``), the upload check (`check_upload`), a local tool not on PATH
        (`check_tools`), no cloud access (`preflight`).
    """
    dest = Path(data_dir if data_dir is not None else SURVEY_DATA) / o.survey_id
    if dest.exists():
        raise ConfigError(f"{dest} exists: a survey never writes into a folder it did not make; "
                          "give another --survey-id")
    if o.offers_found is not None and not dry_run:
        raise ConfigError("--offers-json is for --dry-run: a survey rents from a live search, never "
                          "from a recorded list")
    task = read_task()
    if check is None:
        check = runner is None and not dry_run
    if runner is None:
        if dry_run:
            runner = DryRunner(list(o.offers_found) if o.offers_found is not None else None)
        else:
            check_upload()
            check_tools(o.picker)
            runner = SubprocessRunner(RUNS / "survey" / o.survey_id)
    started_server = False
    if check and o.picker == "sky":
        started_server = (sky_server_up or local_sky_server_up)() is False
    try:
        if check:
            preflight(o, runner)
        return _run(o, runner, dest, dry_run, log, task, sleep, clock)
    finally:
        if started_server:
            r = runner(Call("preflight", "api-stop", ("sky", "api", "stop"), 120.0,
                            "the local SkyPilot API server this run started"))
            if r.rc:
                log(f"survey: `sky api stop` failed (exit {r.rc}): {_tail(r.out)}")


def _run(o, runner, dest, dry_run, log, task, sleep, clock) -> dict:
    if not dry_run:
        dest.mkdir(parents=True)
    s = _Survey(o, runner, dest, dry_run, log, task, sleep=sleep, clock=clock)
    with ThreadPoolExecutor(max_workers=len(o.gpus), thread_name_prefix="survey") as pool:
        pending: list = []  # a Ctrl-C while the threads start: held until every one has started
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, lambda *a: pending.append(a)) if main else None
        try:
            futures = [pool.submit(s.gpu, g) for g in o.gpus]
        finally:
            if main:
                signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)
        try:
            if pending:
                raise KeyboardInterrupt
            _wait_all(futures)
        except KeyboardInterrupt:
            log("survey: interrupted: stopping the running steps and tearing every cluster down")
            s.state["interrupted"] = True
            s.stop.set()
            _wait_all(futures)  # a second Ctrl-C goes up; the pool still waits for the teardowns
    for f, g in zip(futures, o.gpus):
        if f.exception() is not None:  # outside a try (a bug): said, the others' results kept
            s.state["results"][g].append(dict(cluster="", status="error", reason=repr(f.exception())))
    s.state["finished"] = meta.utc_now()
    if not dry_run:
        (dest / "survey.json").write_text(json.dumps(s.state, indent=1, default=str))
    if isinstance(runner, DryRunner):
        s.state["calls"] = runner.calls
    return s.state


def format_plan(o: SurveyOptions, calls: Sequence[Call], upload: tuple[int, int] | None = None,
                data_dir: Path | str | None = None, results: dict | None = None) -> str:
    """The ``--dry-run`` text: the survey's settings (what is checked, and where), then per GPU
    type every command of its first try in order (with its limit and why), teardown included,
    and what a failed try does; a type whose ``results`` (the dry run's state) found no offer
    says "no offer passes: nothing would be rented" with the reasons."""
    r = o.requirements
    dest = Path(data_dir if data_dir is not None else SURVEY_DATA) / o.survey_id
    vast = o.picker == "vastai"
    who = ("SkyPilot picks each host and launches it" if not vast
           else "fightlab picks each host (vastai SDK search, cheapest offer that passes) and rents it")
    where = "offer filter and host check" if vast else "host check"
    if r.min_mbit_s is None:
        down = "download: not checked"
    else:
        host = (f"timed on the host from {o.bandwidth_url}" if o.bandwidth_url
                else "not timed on the host (--bandwidth-url '')")
        down = f"download >= {r.min_mbit_s:g} Mbit/s ({'offer filter; ' if vast else ''}{host})"
    lines = [f"survey {o.survey_id} (dry run: nothing runs): {len(o.gpus)} GPU type(s) in parallel on "
             f"{o.infra}; {who}; up to {o.tries} host(s) per type",
             f"every command runs in {REPO_ROOT}",
             f"host requirements: CUDA >= {r.min_cuda or 'any'} ({where}), driver >= {r.min_driver or 'any'}"
             + (f" ({where})" if r.min_driver else "") + f", {down}"
             + (f", <= ${r.max_usd_per_h:g}/h (offer filter)" if r.max_usd_per_h is not None else "")
             + f"; bench {','.join(o.bodies)} under {o.time_limit_s:g} s",
             f"rows: {dest}/<gpu>-<try>/ (bench.json, bench.csv) and {dest}/survey.json"]
    if upload is not None:
        lines.append(f"upload: {upload[0]} files, {upload[1] / 1e6:.2f} MB (limit {UPLOAD_LIMIT_BYTES / 1e6:g} MB, "
                     ".skyignore)")
    for g in o.gpus:
        mine = [c for c in calls if c.cluster == cluster_name(o.survey_id, g, 1)]
        first = ((results or {}).get(g) or [{}])[0]
        lines.append("")
        lines.append(f"[{g}] {cluster_name(o.survey_id, g, 1)}")
        for c in mine:
            lim = "" if c.timeout_s is None else f"limit {c.timeout_s:g} s"
            lines.append(f"  {c.what:<9} ({'; '.join(x for x in (lim, c.note) if x)})")
            lines.append(f"    $ {shlex.join(c.argv)}" + (f" < {c.stdin}" if c.stdin else ""))
        if first.get("status") == "no offer":
            lines.append(f"  no offer passes: nothing would be rented ({first.get('reason', '')})")
            continue
        lines.append(f"  a failed try (no answer, host check, bad host): the same again as "
                     f"{cluster_name(o.survey_id, g, 2)}, up to {o.tries} tries")
    return "\n".join(lines)


def no_offer(state: dict) -> list[str]:
    """The GPU types whose first try found no offer that passes."""
    return [g for g, tries in state["results"].items() if tries and tries[0]["status"] == "no offer"]


def summary_lines(state: dict) -> list[str]:
    """One line per GPU type: its last try's status and reason, and the teardowns that failed."""
    out = []
    for g, tries in state["results"].items():
        last = tries[-1] if tries else dict(status="not run", reason="")
        out.append(f"{g}: {last['status']} after {len(tries)} try(s)" +
                   (f": {last['reason']}" if last.get("reason") else "") +
                   (f"; rows in {', '.join(last['files'])}" if last.get("files") else ""))
        out += [f"  WARNING {t['cluster']}: teardown {t['teardown']}" for t in tries
                if str(t.get("teardown", "")).startswith("FAILED")]
    return out


def _or(value, default):
    """`value` unless it was not given (None)."""
    return default if value is None else value


def command(gpus: list[str], *, infra: str = "vast", picker: str = "sky", bodies=("simple", "muscular-fast"),
            tries=None, min_cuda=None, min_driver=None, min_mbit_s=None, max_price=None, bandwidth_url=None,
            time_limit_s=None, survey_id=None, offers_json=None, dry_run: bool = False) -> int:
    """`python -m fightlab survey launch`, its flags as given (text, None: not given; `gpus` the
    --gpus values, one comma-separated list): the options (`make_options`), then the plan
    printed (`dry_run`) or the survey run (`run_survey`) and its summary. Returns the exit code:
    0 every type benched, 1 not, 2 a dry run that found no offer, 130 interrupted (the line says
    how to find clusters left running).

    Raises:
      ConfigError: one line naming the flag: --gpus given twice, a number that is not one, and
        `make_options`' refusals."""
    import sys

    if len(gpus) > 1:
        raise ConfigError(f"--gpus given twice ({' and '.join(map(repr, gpus))}): give one comma-separated "
                          "list, e.g. --gpus RTX4090,L40S")

    def num(flag, text, kind=float):  # argparse's own type error would print its usage too
        if text is None:
            return None
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{flag} must be {'an integer' if kind is int else 'a number'}, "
                              f"got {text!r}") from None
    o = make_options(
        gpus[0], infra=infra, picker=picker, bodies=bodies,
        tries=_or(num("--tries", tries, int), TRIES),
        min_cuda=_or(min_cuda, "warp"), min_driver=min_driver,
        min_mbit_s=_or(num("--min-mbit-s", min_mbit_s), offers.MIN_MBIT_S),
        max_usd_per_h=num("--max-price", max_price),
        bandwidth_url=_or(bandwidth_url, BANDWIDTH_URL), time_limit_s=num("--time-limit-s", time_limit_s),
        survey_id=survey_id, offers_json=offers_json)
    if dry_run:
        state = run_survey(o, dry_run=True, log=lambda s: None)
        print(format_plan(o, state["calls"], upload=check_upload(), results=state["results"]))
        return 2 if no_offer(state) else 0
    warn = (f"fightlab: survey interrupted; check for clusters left running: sky status "
            f"(or vastai show instances); {SURVEY_DATA / o.survey_id / 'survey.json'} lists them")
    try:
        state = run_survey(o)
    except KeyboardInterrupt:
        print(warn, file=sys.stderr)
        return 130
    print("\n".join(summary_lines(state)))
    if state.get("interrupted"):
        print(warn, file=sys.stderr)
        return 130
    return 0 if all(t and t[-1]["status"] == "done" for t in state["results"].values()) else 1
