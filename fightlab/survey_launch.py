"""``python -m fightlab survey launch``: the GPU survey on rented machines (docs/survey.md says
who does what and why; `fightlab.survey.tries` runs one GPU type's tries through an injected runner).

    python -m fightlab survey launch --gpus RTX4090,L40S,RTX3090 [--infra vast] [--dry-run]
    python -m fightlab survey launch --gpus RTX4090 --picker vastai [--offers-json FILE] [--dry-run]

Every GPU type at once (a thread each), per type up to ``--tries`` hosts one after another, every
command from the repository root; the rows land in ``data/survey/bench/<survey id>/<gpu>-<try>/``.
SkyPilot's managed jobs (``sky jobs launch``) would retry and tear down by themselves, but retry
without a limit while no host answers, upload through a cloud bucket (Vast has none) and give no
SSH to collect the rows from: so the launcher gives up on a host itself (`options.GIVE_UP_S`) and
always tears it down, with autostop (``-i N --down``) as the net if this process dies.

Before anything is written or rented: every value (`fightlab.survey.options.make_options`), the
local tools (`check_tools`), the cloud access (`preflight`); a local SkyPilot API server this run
started is stopped at the end (``sky api stop``). Ctrl-C: every running step stopped, every host
torn down, the state says ``interrupted``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Sequence

from fightlab import meta
from fightlab.config import ConfigError
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.survey import offers
from fightlab.survey.bench_rows import survey_bench_path
from fightlab.survey.options import BANDWIDTH_URL, TRIES, SurveyOptions, cluster_name, make_options
from fightlab.survey.task import UPLOAD_LIMIT_BYTES, check_upload, read_task
from fightlab.survey.tries import (Call, DryRunner, Runner, SubprocessRunner, Survey, answer_json,
                                   output_json, output_tail, write_state)

__all__ = ["SURVEY_DATA", "TOOLS", "check_tools", "local_sky_server_up", "preflight", "run_survey", "format_plan",
           "no_offer", "summary_lines", "command"]

#: the collected rows: data/survey/bench/<survey id>/ (where the survey's cost reads them back)
SURVEY_DATA = survey_bench_path(REPO_ROOT)

#: the local binaries each picker's path runs
TOOLS = {"sky": ("sky", "rsync"), "vastai": ("vastai", "ssh", "rsync")}
_INSTALL = {"sky": "pip install 'skypilot[vast]==0.14.1'", "vastai": "pip install vastai-sdk",
            "rsync": "apt-get install rsync", "ssh": "apt-get install openssh-client"}


def check_tools(picker: str, which: Callable[[str], str | None] | None = None) -> None:
    """Every local binary ``picker``'s path runs (`TOOLS`) is on PATH; else ConfigError naming the
    missing ones and how to install them."""
    missing = [t for t in TOOLS[picker] if (which or shutil.which)(t) is None]
    if missing:
        raise ConfigError(f"not on PATH: {', '.join(missing)} (--picker {picker} runs "
                          f"{', '.join(TOOLS[picker])}); install: {'; '.join(_INSTALL[t] for t in missing)}; "
                          "see docs/survey.md")


def local_sky_server_up(timeout_s: float = 2.0) -> bool | None:
    """Whether SkyPilot's local API server answers (``/api/health`` on 127.0.0.1, port
    ``SKYPILOT_API_SERVER_PORT`` or 46580); None when ``SKYPILOT_API_SERVER_ENDPOINT`` names
    another server (not this run's to stop; one in ~/.sky/config.yaml refuses ``sky api stop``)."""
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
    """One cheap call that proves the picker's cloud access: ``sky check CLOUD -o json`` (CLOUD
    enabled), or ``vastai show user --raw`` (a key that works); else ConfigError saying the fix."""
    if o.picker == "sky":
        cloud = o.infra.split("/")[0]
        r = runner(Call("preflight", "check", ("sky", "check", cloud, "-o", "json"), 300.0,
                        f"SkyPilot's access to {cloud}"))
        if r.rc:
            raise ConfigError(f"`sky check {cloud}` failed (exit {r.rc}): {output_tail(r.out) or 'no output'}; "
                              f"set up {cloud}'s credentials (sky check {cloud}) before a survey")
        try:
            data = output_json(r.out)
        except ValueError:
            raise ConfigError(f"`sky check {cloud} -o json` printed no JSON: {output_tail(r.out) or 'no output'}") from None
        enabled = {str(c).lower() for ws in (data.values() if isinstance(data, dict) else [])
                   if isinstance(ws, dict) for c in ws}
        if cloud not in enabled:
            raise ConfigError(f"SkyPilot has no access to {cloud} (enabled: {', '.join(sorted(enabled)) or 'none'}): "
                              f"run `sky check {cloud}` and set up its credentials")
    else:
        r = runner(Call("preflight", "check", ("vastai", "show", "user", "--raw"), 120.0, "the Vast API key"))
        if not isinstance(answer_json(r), dict):
            raise ConfigError(f"`vastai show user` failed (exit {r.rc}): {output_tail(r.out) or 'no output'}; "
                              "set the key with `vastai set api-key KEY`")


def _wait_all(futures) -> None:
    """Waits in short steps, so that a Ctrl-C reaches this (the main) thread at once."""
    while wait(futures, timeout=0.5).not_done:
        pass


def run_survey(o: SurveyOptions, runner: Runner | None = None, dry_run: bool = False,
               data_dir: Path | str | None = None, log: Callable[[str], None] = print,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
               check: bool | None = None, sky_server_up: Callable[[], bool | None] | None = None) -> dict:
    """Run the survey (module docstring). Returns the state (``results``: per GPU type its tries,
    each with cluster, status, reason, offer, instance, files, teardown; ``interrupted``: a Ctrl-C
    stopped it, every teardown run), also ``data_dir/<survey id>/survey.json``.

    ``runner`` default: `SubprocessRunner` (logs in runs/survey/<id>/), or with ``dry_run`` a
    `DryRunner` (nothing runs or is written; the state's ``calls`` list every command).
    ``data_dir`` default `SURVEY_DATA`. ``check`` (default: ``runner`` None and not dry):
    `preflight`, and with ``--picker sky`` the local API server stopped at the end when
    ``sky_server_up`` (default `local_sky_server_up`) said False before the first call.

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
                log(f"survey: `sky api stop` failed (exit {r.rc}): {output_tail(r.out)}")


def _run(o, runner, dest, dry_run, log, task, sleep, clock) -> dict:
    if not dry_run:
        dest.mkdir(parents=True)
    s = Survey(o, runner, dest, dry_run, log, task, sleep=sleep, clock=clock)
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
        write_state(dest / "survey.json", s.state)
    if isinstance(runner, DryRunner):
        s.state["calls"] = runner.calls
    return s.state


def format_plan(o: SurveyOptions, calls: Sequence[Call], upload: tuple[int, int] | None = None,
                data_dir: Path | str | None = None, results: dict | None = None) -> str:
    """The ``--dry-run`` text: the survey's settings (what is checked, and where), then per GPU
    type every command of its first try (limit and why), teardown included, and what a failed try
    does, or "no offer passes: nothing would be rented" where ``results`` found none."""
    r = o.requirements
    dest = Path(data_dir if data_dir is not None else SURVEY_DATA) / o.survey_id
    vast = o.picker == "vastai"
    who = ("SkyPilot picks each host and launches it" if not vast
           else "fightlab picks each host (vastai SDK search, cheapest offer that passes) and rents it")
    where = "offer filter and host check" if vast else "host check"
    host = (f"timed on the host from {o.bandwidth_url}" if o.bandwidth_url
            else "not timed on the host (--bandwidth-url '')")
    down = ("download: not checked" if r.min_mbit_s is None
            else f"download >= {r.min_mbit_s:g} Mbit/s ({'offer filter; ' if vast else ''}{host})")
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
        lines += ["", f"[{g}] {cluster_name(o.survey_id, g, 1)}"]
        for c in mine:
            lim = "" if c.timeout_s is None else f"limit {c.timeout_s:g} s"
            lines += [f"  {c.what:<9} ({'; '.join(x for x in (lim, c.note) if x)})",
                      f"    $ {shlex.join(c.argv)}" + (f" < {c.stdin}" if c.stdin else "")]
        lines.append(f"  no offer passes: nothing would be rented ({first.get('reason', '')})"
                     if first.get("status") == "no offer" else
                     f"  a failed try (no answer, host check, bad host): the same again as "
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


def command(gpus: list[str], *, infra: str = "vast", picker: str = "sky", bodies=("simple", "muscular-fast"),
            tries=None, min_cuda=None, min_driver=None, min_mbit_s=None, max_price=None, bandwidth_url=None,
            time_limit_s=None, survey_id=None, offers_json=None, dry_run: bool = False) -> int:
    """`python -m fightlab survey launch`, its flags as given (text; None: not given): the options
    (`make_options`), then the plan printed (`dry_run`) or the survey run and its summary. Returns
    0 every type benched, 1 not, 2 a dry run that found no offer, 130 interrupted (the line says
    how to find clusters left running).

    Raises:
      ConfigError: one line naming the flag: --gpus given twice, a number that is not one, and
        `make_options`' refusals."""
    import sys

    if len(gpus) > 1:
        raise ConfigError(f"--gpus given twice ({' and '.join(map(repr, gpus))}): give one comma-separated "
                          "list, e.g. --gpus RTX4090,L40S")

    def num(flag, text, default=None, kind=float):  # argparse's type error would print its usage too
        if text is None:
            return default
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{flag} must be {'an integer' if kind is int else 'a number'}, "
                              f"got {text!r}") from None
    o = make_options(
        gpus[0], infra=infra, picker=picker, bodies=bodies, tries=num("--tries", tries, TRIES, int),
        min_cuda="warp" if min_cuda is None else min_cuda, min_driver=min_driver,
        min_mbit_s=num("--min-mbit-s", min_mbit_s, offers.MIN_MBIT_S),
        max_usd_per_h=num("--max-price", max_price),
        bandwidth_url=BANDWIDTH_URL if bandwidth_url is None else bandwidth_url,
        time_limit_s=num("--time-limit-s", time_limit_s), survey_id=survey_id, offers_json=offers_json)
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
