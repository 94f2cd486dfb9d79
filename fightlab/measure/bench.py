"""``python -m fightlab bench``: what this machine does with fightlab.

On the machine it runs on, under one hard wall-clock limit for the whole job:

1. **Host check** (`host_check`): the GPU is visible to warp when a CUDA device is asked; the CUDA
   driver is not older than warp's CUDA toolkit; download bandwidth (only with a URL, else "not
   measured"). A failed check ends the job early: one line, and one row per body saying why.
2. Per body, **set-up phases timed apart**: install (``FIGHTLAB_INSTALL_S``, set by a launcher;
   empty otherwise), first kernel compile and capture (`compile_s`), first iteration
   (`first_iter_s`), then the **speed test** (`measure.sweep.time_point`: a short solo training,
   medians of its later iterations: s/iteration, rollout / update, env steps/s at the chosen or
   ``auto`` nworld).
3. **Bad host** (`bad_host`): the speed test's env steps/s below `BAD_HOST_FRACTION` of the
   expected (`expected_speed`: earlier rows of the same GPU name, body and nworld in the
   repository's data/) ends the job early. With none, the fallback (`bandwidth_check`): the
   primer's copy bandwidth (`probe_bandwidth`, once per job) against the card's published peak
   (`fightlab.hosts.PUBLISHED_BANDWIDTH_GB_S`, sources cited there); its launch latency is
   recorded but not judged (makers publish no per-card launch figure). A GPU the table does not
   know, or a CPU: "no reference" (no card figures are invented).
4. Per body, a **timed training** (default `TRAIN_S` = 120 s; `Trainer` with ``segment_s``).
5. One ``bench`` row per body (`results.EXPERIMENTS["bench"]`: GPU name, driver, warp /
   mujoco_warp / torch versions, commit in the metadata columns; CUDA driver / toolkit versions,
   CPU cores in metric columns; CPU model, the checks' lines and the estimate's source in
   params), written to ``--out`` as CSV (``<out>/data/results/bench.csv``) and JSON
   (``<out>/bench.json``); with ``--publish`` also to data/ (the rule
   before any work: `cli.publish_plans`).

**Estimated time to solve** = iterations to solve × the measured seconds per iteration of the
timed training (the speed test's where the training timed none); the iterations come from the
repository's data/results/train.csv (`estimate`, which says where in the row's params.estimate).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pandas as pd

from fightlab import hosts, meta, results
from fightlab.bodies import BODY_NAMES
from fightlab.config import ConfigError, TrainConfig, to_dict, validate_nworld, with_body
from fightlab.sizes import validate_size
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.rundir import atomic_write

#: the timed training per body [s] (the issue's 2 minutes)
TRAIN_S = 120.0
#: env steps/s below this fraction of the expected (earlier rows of the same GPU) is a bad host
BAD_HOST_FRACTION = 0.3
#: seconds a body needs besides its training, per size (compile, first iteration, speed test):
#: a --time-limit-s below bodies × (train_s + this) is refused
SETUP_ALLOWANCE_S = {"smoke": 20.0, "full": 120.0}
#: the speed test: iterations, and those left out of the medians (per size)
SPEED_ITERATIONS = {"smoke": (3, 1), "full": (12, 3)}
#: world counts when --nworld is not given
DEFAULT_NWORLD = {"smoke": 8, "full": 1024}
#: the smoke size's learner: a tiny rollout and update (CPU-sized)
SMOKE_PPO = dict(num_steps=4, num_minibatches=2, update_epochs=1)
#: the launcher's install time [s]
INSTALL_ENV = "FIGHTLAB_INSTALL_S"
#: bytes read at most from --bandwidth-url, and its timeout [s]
BANDWIDTH_BYTES, BANDWIDTH_TIMEOUT_S = 64 * 2**20, 30.0

ROOT = RUNS / "bench"


class TimeLimit(Exception):
    """The job's hard wall-clock limit passed."""


# --- the checks, pure parts ------------------------------------------------------------------

def cuda_version(v) -> float | None:
    """warp's CUDA version (an int such as 12080, or a tuple (12, 8)) as 12.8; None if unknown."""
    if isinstance(v, int) and v > 0:
        return v // 1000 + ((v % 1000) // 10) / 10
    if isinstance(v, tuple) and len(v) >= 2:
        return v[0] + v[1] / 10
    return None


def min_driver_cuda(toolkit: float) -> float:
    """The oldest driver CUDA version (e.g. 13.0) that runs warp built with CUDA toolkit
    ``toolkit`` (13.4): warp's own rule (warp/_src/context.py, ``Runtime.min_driver_version``)
    for builds with CUDA minor-version compatibility, as warp's PyPI wheels are: the toolkit's
    major version .0, and 11.4 for CUDA 11 (seen: warp 1.19.0, toolkit 13.4, on the H200's
    driver 13.0)."""
    major = int(toolkit)
    return float(major) if major > 11 else 11.4


def driver_check(driver: float | None, toolkit: float | None) -> str | None:
    """Why the CUDA driver cannot run warp's toolkit (a sentence), or None when it can (or when
    either version is unknown): the driver must support at least `min_driver_cuda` (toolkit)."""
    if driver is None or toolkit is None:
        return None
    need = min_driver_cuda(toolkit)
    if (int(driver), round(driver % 1 * 10)) < (int(need), round(need % 1 * 10)):
        return (f"CUDA driver {driver:.1f} is older than {need:.1f}, the oldest that runs warp's CUDA "
                f"toolkit {toolkit:.1f}: update the NVIDIA driver or install a warp built for an older CUDA")
    return None


def expected_speed(gpu: str, body: str, nworld: int, bench_rows: pd.DataFrame | None,
                   train_rows: pd.DataFrame | None) -> tuple[float | None, int]:
    """(median env steps/s of earlier rows of the same GPU name, body and nworld, their count):
    ``bench`` rows that passed their checks and solo ``train`` rows (concurrent 1 where the
    column is there); (None, 0) without any: "no reference"."""
    vals: list[float] = []
    for df, kind in ((bench_rows, "bench"), (train_rows, "train")):
        if df is None or df.empty:
            continue
        m = (df["gpu"] == gpu) & (df["body"] == body) & (df["nworld"] == nworld)
        if kind == "bench" and "ok" in df:
            m &= df["ok"] == True  # noqa: E712
        if kind == "train" and "concurrent" in df:
            m &= df["concurrent"] == 1
        vals += [float(v) for v in df.loc[m, "env_steps_per_s"] if v == v and v > 0]
    return (float(np.median(vals)), len(vals)) if vals else (None, 0)


def bad_host(measured: float, expected: float | None,
             fraction: float = BAD_HOST_FRACTION) -> tuple[bool | None, str]:
    """The bad-host rule: (False, why) when ``measured`` env steps/s is below ``fraction`` of
    ``expected``; (True, line) when not; (None, "no reference") without an expected value."""
    if expected is None or not expected > 0:
        return None, (f"speed: {measured:.0f} env steps/s; no reference (no earlier rows of this GPU, "
                      "body and nworld): not judged")
    ratio = measured / expected
    line = (f"speed: {measured:.0f} env steps/s = {ratio:.2f} × the expected {expected:.0f} "
            f"(bad host below {fraction:g} ×)")
    return (ratio >= fraction), ("bad host: " + line if ratio < fraction else line)


def bandwidth_check(gpu: str, copy_gb_per_s: float, launch_us: float | None = None,
                    fraction: float = BAD_HOST_FRACTION) -> tuple[bool | None, str, dict]:
    """The bad-host fallback without earlier rows: (False, line, info) when the measured
    device-to-device copy bandwidth [GB/s, bytes read + written per second] is below
    ``fraction`` of the card's published peak (`fightlab.hosts.published_bandwidth`), (True, …)
    when not, (None, …) for a GPU name the table does not know. ``launch_us`` (an empty kernel's
    launch + wait [µs]) goes into the line and ``info`` unjudged. ``info``: the figures, for
    the row's params."""
    pub = hosts.published_bandwidth(gpu)
    info = dict(copy_gb_per_s=copy_gb_per_s, launch_us=launch_us, published_gb_per_s=None, gpu_type=None)
    lat = "" if launch_us is None or launch_us != launch_us else f"; launch + wait {launch_us:.1f} µs (not judged)"
    if pub is None or not (copy_gb_per_s == copy_gb_per_s and copy_gb_per_s > 0):
        return None, (f"copy bandwidth {copy_gb_per_s:.0f} GB/s; no published figure for {gpu!r}: not "
                      f"judged{lat}"), info
    key, peak = pub
    ratio = copy_gb_per_s / peak
    info.update(published_gb_per_s=peak, gpu_type=key, ratio=ratio, source=hosts.BANDWIDTH_SOURCES[key])
    line = (f"copy bandwidth {copy_gb_per_s:.0f} GB/s = {ratio:.2f} × the {key}'s published "
            f"{peak:.0f} GB/s (bad host below {fraction:g} ×){lat}")
    return ratio >= fraction, ("bad host: " + line if ratio < fraction else line), info


def probe_bandwidth(device: str) -> dict:
    """The primer's probes on ``device`` (`primer.vector_sweep` at 2^26 floats, 256 MB per
    array): ``copy_gb_per_s`` (device-to-device copy, bytes read + written) and ``launch_us``
    (an empty kernel's launch + wait, median)."""
    from fightlab.measure.primer import vector_sweep

    df = vector_sweep([2**26], [device], repeats=10, warmup=2, include_numpy=False)
    copy = df[df["op"] == "copy"]["gb_per_s"]
    empty = df[df["op"] == "empty_kernel"]["median_s"]
    return dict(copy_gb_per_s=float(copy.iloc[0]) if len(copy) else float("nan"),
                launch_us=float(empty.iloc[0]) * 1e6 if len(empty) else None)


def estimate(body: str, s_per_iter: float, train_rows: pd.DataFrame, learner: str | None = None,
             nworld: int | None = None) -> tuple[float | None, float | None, dict]:
    """(iterations to solve, estimated time to solve [s], source) for ``body`` at ``s_per_iter``.

    The iterations, first found wins: (1) with ``learner`` (`report.learner_id`) and ``nworld``,
    the median iterations to solve of the committed solved runs of that body, learner and world
    count (`sweep.known_iterations`: any commit and packing); (2) between two committed world
    counts of that learner, interpolated in log2(nworld) (`sweep.interp_iterations`); (3) the
    committed headline group of ``body`` (`report.headline`: today's default learner, at its
    nworld). Time = iterations × ``s_per_iter``. (None, None, {"note": …}) when neither finds one
    (the note says whether the body has solo solves of other learners only, as right after its
    defaults change). ``train_rows``: `report.published_runs`. The source's ``basis`` says which."""
    from fightlab.measure.report import SUMMARY_KEYS, headline, no_headline_note, solve_summary
    from fightlab.measure.sweep import interp_iterations, known_iterations

    def timed(it):
        return it * s_per_iter if s_per_iter == s_per_iter and s_per_iter > 0 else None

    tail = " × this machine's seconds per iteration (read from the repository's data/results/train.csv)"
    if learner and nworld and not train_rows.empty:
        known = known_iterations(train_rows, body, learner)
        it = known.get(int(nworld), interp_iterations(int(nworld), known))  # NaN outside their range
        if it == it:
            basis = "learner and nworld" if int(nworld) in known else "learner, interpolated in log2(nworld)"
            return it, timed(it), dict(body=body, learner=learner, nworld=int(nworld), basis=basis,
                                       iterations_median=it,
                                       known_iterations={str(k): v for k, v in sorted(known.items())},
                                       note=f"estimated: the committed runs' median iterations to solve of this "
                                            f"{basis}" + tail)
    h = headline(solve_summary(train_rows)) if not train_rows.empty else pd.DataFrame()
    if h.empty or body not in h.index.get_level_values("body"):
        return None, None, dict(note=no_headline_note(body, train_rows))
    keys, r = next((k, r) for k, r in h.iterrows() if k[0] == body)
    src = dict(zip(SUMMARY_KEYS, keys), commit=r["commits"])
    it = float(r["iterations_median"])
    src.update(n_solo=int(r["n_solo"]), iterations_median=it, basis="headline",
               note="estimated: the headline's median iterations to solve" + tail
                    + ("" if not learner else "; no committed solve of this learner at or around this nworld"))
    return it, timed(it), src


def validate_bodies(bodies) -> list[str]:
    """bench's bodies, a sequence of names (``["simple", "muscular-fast"]``), as a list; the
    survey launcher checks its ``--bodies`` with this before it rents a host.

    Raises:
      ConfigError: none, an unknown body (listing the valid ones), a body named twice.
    """
    out: list[str] = []
    for b in list(bodies or []):
        if b not in BODY_NAMES:
            raise ConfigError(f"--bodies: unknown body {b!r}; valid: {', '.join(BODY_NAMES)}")
        if b in out:
            raise ConfigError(f"--bodies names {b} twice")
        out.append(b)
    if not out:
        raise ConfigError(f"--bodies must name one or more of {', '.join(BODY_NAMES)}, got {bodies!r}")
    return out


def min_time_limit(n_bodies: int, train_s: float, size: str) -> float:
    """The shortest --time-limit-s the job accepts: bodies × (train_s + `SETUP_ALLOWANCE_S`)."""
    return n_bodies * (train_s + SETUP_ALLOWANCE_S[size])


# --- the checks, on this machine -------------------------------------------------------------

def host_check(device: str, bandwidth_url: str | None = None) -> dict:
    """The checks before any measurement. Returns dict: ok (bool), lines (one per check),
    reason (the first failure, "" when ok), cuda_driver_version, cuda_toolkit_version (12.8 or
    None), bandwidth_mb_per_s (MB/s, 10^6 bytes, of reading up to `BANDWIDTH_BYTES` from
    ``bandwidth_url``, `hosts.download_mb_per_s`; None: not measured)."""
    import warp as wp

    out = dict(ok=True, lines=[], reason="", cuda_driver_version=None, cuda_toolkit_version=None,
               bandwidth_mb_per_s=None)

    def fail(why):
        out["lines"].append("FAILED " + why)
        if out["ok"]:
            out.update(ok=False, reason=why)

    try:
        out["cuda_toolkit_version"] = cuda_version(wp.get_cuda_toolkit_version())
        if wp.is_cuda_available():
            out["cuda_driver_version"] = cuda_version(wp.get_cuda_driver_version())
    except Exception:  # noqa: BLE001 - versions are for the row
        pass
    if str(device).startswith("cuda"):
        if not wp.is_cuda_available() or wp.get_cuda_device_count() == 0:
            fail(f"GPU not visible: warp sees no CUDA device (asked for {device})")
        else:
            out["lines"].append(f"GPU visible: {meta.gpu_name(device)}")
            why = driver_check(out["cuda_driver_version"], out["cuda_toolkit_version"])
            if why:
                fail(why)
            else:
                out["lines"].append(f"CUDA driver {out['cuda_driver_version']} runs warp's toolkit "
                                    f"{out['cuda_toolkit_version']} (needs >= "
                                    f"{min_driver_cuda(out['cuda_toolkit_version']):.1f})")
    else:
        out["lines"].append(f"device {device}: no GPU asked (GPU and driver checks not run)")
    if bandwidth_url:
        try:
            out["bandwidth_mb_per_s"] = hosts.download_mb_per_s(bandwidth_url, BANDWIDTH_BYTES,
                                                                BANDWIDTH_TIMEOUT_S)
            out["lines"].append(f"download bandwidth: {out['bandwidth_mb_per_s']:.1f} MB/s from {bandwidth_url}")
        except (OSError, ValueError) as e:
            fail(f"download from {bandwidth_url} failed: {e}")
    else:
        out["lines"].append("download bandwidth: not measured (no --bandwidth-url)")
    return out


# --- the job ---------------------------------------------------------------------------------

def install_s(environ=None) -> float | None:
    """The launcher's install seconds (`INSTALL_ENV`), or None when unset or not a number."""
    v = (os.environ if environ is None else environ).get(INSTALL_ENV, "").strip()
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) and x >= 0 else None


def _base_cfg(size: str) -> TrainConfig:
    base = TrainConfig()
    return dataclasses.replace(base, ppo=dataclasses.replace(base.ppo, **SMOKE_PPO)) if size == "smoke" else base


def _train(body: str, nworld: int, device: str, budget_s: float, run_dir: Path, base: TrainConfig,
           progress: bool) -> dict:
    """The timed training: a `Trainer` that stops at ``budget_s`` (segment_s)."""
    from fightlab.run.runner import Trainer

    cfg = dataclasses.replace(with_body(base, body), nworld=nworld, device=device, max_iterations=10**6,
                              checkpoint_every=0, run_dir=str(run_dir), stop_when_solved=False,
                              resume=None, segment_s=float(budget_s))
    t0 = time.perf_counter()
    with Trainer(cfg, progress=progress) as tr:
        tr.train()
        rows = tr.rows
    steady = rows[1:] if len(rows) > 1 else rows
    return dict(train_iterations=len(rows), train_wall_s=time.perf_counter() - t0,
                train_s_per_iter=float(np.median([r["wall_s"] for r in steady])) if steady else None)


COLUMNS = results.EXPERIMENTS["bench"]


def run_bench(bodies, device: str | None, nworld="auto", size: str = "full", train_s: float | None = TRAIN_S,
              time_limit_s: float | None = None, out: Path | str | None = None, publish: bool = False,
              bandwidth_url: str | None = None, root: Path | str = REPO_ROOT, progress: bool = True,
              log: Callable[[str], None] = print, point: Callable[..., dict] | None = None,
              train: Callable[..., dict] | None = None, check: Callable[..., dict] | None = None,
              probe: Callable[[str], dict] | None = None) -> list[dict]:
    """The bench job (module docstring). Returns the rows (one per body), also written to
    ``out`` (default runs/bench/<run id>) as CSV and JSON, and with ``publish`` to ``root``'s
    data/. As the command line gives them: ``device`` None = cuda:0 when there is one, else cpu;
    ``size`` "auto" (`sizes.resolve_size`); ``train_s`` None = by size; ``bodies`` a
    comma-separated text or a list; ``nworld`` text ("auto" or a count). ``point``, ``train``, ``check``, ``probe``: the speed test, the timed training, the
    host check and the bandwidth probe of the fallback (`probe_bandwidth`; tests pass fakes).

    Raises:
      ConfigError: a bad option, before anything runs: bodies, nworld ("auto" on a CPU device),
        size, train_s, a time limit shorter than `min_time_limit`.
    """
    from tqdm.auto import tqdm

    from fightlab.measure.report import published_runs
    from fightlab.measure.sweep import time_point
    from fightlab.rundir import check_location

    device, size, bodies, n_fixed, train_s, time_limit_s = _bench_options(
        bodies, device, nworld, size, train_s, time_limit_s, publish)
    root = Path(root)
    bench_id = meta.new_run_id()
    out = Path(out) if out is not None else ROOT / bench_id
    check_location(out)
    _check_out(out)
    it, skip = SPEED_ITERATIONS[size]
    t_job = time.perf_counter()
    # what every body's measurement shares (`_bench_body`); n: the body's nworld
    job = SimpleNamespace(device=device, root=root, out=out, log=log, base=_base_cfg(size), it=it, skip=skip,
                          point=point or time_point, train=train or _train, probe=probe or probe_bandwidth,
                          probed={}, train_s=float(train_s), deadline=t_job + time_limit_s,
                          train_rows=published_runs(root), bench_rows=results.read_rows("bench", root), n=None)
    inst = install_s()
    rows: list[dict] = []
    with _hard_limit(time_limit_s):
        job.bar = bar = tqdm(total=1 + 2 * len(bodies), desc="bench: host check", disable=not progress)
        try:
            hc = (check or host_check)(device, bandwidth_url)
            for line in hc["lines"]:
                log(f"bench: {line}")
            bar.update(1)
            stop = "" if hc["ok"] else f"host check failed: {hc['reason']}"
            for body in bodies:
                m: dict[str, Any] = dict.fromkeys(COLUMNS)
                m.update(ok=False, install_s=inst, cpu_cores=meta.cpu_count(), train_budget_s=float(train_s),
                         time_limit_s=float(time_limit_s), **{k: hc[k] for k in (
                             "cuda_driver_version", "cuda_toolkit_version", "bandwidth_mb_per_s")})
                info: dict[str, Any] = dict(size=size, device=device, cpu_model=meta.cpu_model(),
                                            host_check=hc["lines"], bench_id=bench_id,
                                            bad_host_fraction=BAD_HOST_FRACTION)
                job.n = n_fixed
                try:
                    if stop:
                        raise _Stop(stop)
                    _bench_body(job, body, m, info)
                except _Stop as e:
                    info["reason"] = str(e)
                    stop = str(e) if isinstance(e, _BadHost) else stop
                except TimeLimit:
                    stop = info["reason"] = f"hard time limit {time_limit_s:g} s reached"
                m["job_wall_s"] = time.perf_counter() - t_job
                row = {**results.run_metadata(body=body, nworld=job.n or 1, seed=0, params=info, device=device),
                       **m, "run_id": f"{bench_id}-{body}"}
                results.append_row("bench", row, out)
                if publish:
                    results.append_row("bench", row, root)
                rows.append(row)
                log(f"bench: {body}: " + (f"estimated time to solve {_fmt(m['estimated_time_to_solve_s'])} s "
                                          f"({_fmt(m['iterations_to_solve_reference'])} iterations × "
                                          f"{_fmt(m['train_s_per_iter'] or m['s_per_iter'])} s)" if m["ok"]
                                          else f"stopped: {info['reason']}"))
        finally:
            bar.close()
    atomic_write(out / "bench.json", json.dumps(dict(bench_id=bench_id, rows=rows), indent=1,
                                                default=str, allow_nan=True))
    log(f"bench: rows in {results.results_path('bench', out)} and {out / 'bench.json'}")
    return rows


def _check_out(out: Path) -> None:
    """Refuse an ``--out`` folder that holds files and is not an earlier bench's (no bench.json
    with a bench_id): bench writes bench.json, data/ and run folders there, and never over files
    fightlab did not write. Raises ConfigError, one line."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    try:
        doc = json.loads((out / "bench.json").read_text())
        earlier = isinstance(doc, dict) and "bench_id" in doc
    except (OSError, ValueError, TypeError):
        earlier = False
    if not earlier:
        raise ConfigError(f"--out {str(out)!r} refused: it is not empty and is not an earlier bench's folder "
                          "(no bench.json of fightlab's); choose a new or empty folder")


def _bench_options(bodies, device, nworld, size, train_s, time_limit_s, publish) -> tuple:
    """`run_bench`'s option rules, before anything runs: (device, size, bodies (a list), nworld
    (an int; None: auto), train_s, time_limit_s), the defaults filled in.

    Raises:
      ConfigError: as `run_bench` says, naming the value.
    """
    from fightlab import devices
    from fightlab.config import int_text
    from fightlab.sizes import resolve_size

    device = devices.pick_device(device)
    size = validate_size(resolve_size(size, device))
    if train_s is None:
        train_s = TRAIN_S if size == "full" else 3.0
    if isinstance(bodies, str):  # the command line's comma-separated list
        bodies = [b.strip() for b in bodies.split(",") if b.strip()] or bodies
    if isinstance(bodies, str):
        raise ConfigError(f"--bodies must name one or more bodies, got {bodies!r}")
    bodies = validate_bodies(bodies)
    if isinstance(nworld, str) and nworld.strip().lower() != "auto":
        if int_text(nworld) is None:
            raise ConfigError(f"--nworld must be a positive integer or auto, got {nworld!r}")
        nworld = int_text(nworld)
    if isinstance(train_s, bool) or not isinstance(train_s, (int, float)) or not (train_s > 0 and math.isfinite(train_s)):
        raise ConfigError(f"--train-s must be a positive number of seconds, got {train_s!r}")
    auto = isinstance(nworld, str) and nworld.strip().lower() == "auto"
    if auto and not str(device).startswith("cuda"):
        raise ConfigError("--nworld auto times a ramp on a GPU against the committed GPU sweep; on "
                          f"device {device!r} pass a number instead (e.g. --nworld {DEFAULT_NWORLD['smoke']})")
    n_fixed = None if auto else validate_nworld(DEFAULT_NWORLD[size] if nworld is None else nworld)
    need = min_time_limit(len(bodies), train_s, size)
    if time_limit_s is None:
        time_limit_s = 2 * need
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) or not time_limit_s > 0:
        raise ConfigError(f"--time-limit-s must be a positive number of seconds, got {time_limit_s!r}")
    if time_limit_s < need:
        raise ConfigError(f"--time-limit-s {time_limit_s:g} is too short for {len(bodies)} × (a {train_s:g} s "
                          f"training + {SETUP_ALLOWANCE_S[size]:g} s set-up and speed test) = {need:g} s; "
                          "give more time or a shorter --train-s")
    return device, size, bodies, n_fixed, train_s, time_limit_s


def _bench_body(job: SimpleNamespace, body: str, m: dict, info: dict) -> None:
    """One body of `run_bench`: nworld auto (when ``job.n`` is None; ``job.n`` then holds it),
    the speed test and its judgement, the timed training and the estimate, into the row's
    metrics ``m`` and params ``info``.

    Raises:
      _BadHost: the speed test judged this host bad; _Stop: no time is left for the training;
      TimeLimit: the job's hard limit passed.
    """
    from fightlab.measure.report import learner_id
    from fightlab.measure.sweep import auto_nworld

    base, bar, device = job.base, job.bar, job.device
    if job.n is None:
        bar.set_description(f"bench: {body} nworld auto")
        job.n, info["nworld_auto"] = auto_nworld(dataclasses.replace(with_body(base, body), device=device),
                                                 root=job.root, progress=False, log=job.log)
    n = job.n
    bar.set_description(f"bench: {body} speed test ×{n}")
    r = job.point(body, n, device, iterations=job.it, skip=job.skip,
                  run_dir=job.out / "runs" / f"{body}-{n}-speed", progress=False, base=base)
    bar.update(1)
    m.update(compile_s=r["compile_s"], first_iter_s=r.get("first_iter_s"),
             speed_iterations=r["iterations"], s_per_iter=r["s_per_iter"],
             rollout_s_per_iter=r["rollout_s_per_iter"], update_s_per_iter=r["update_s_per_iter"],
             env_steps_per_s=r["env_steps_per_s"])
    gpu = meta.gpu_name(device)
    exp, n_ref = expected_speed(gpu, body, n, job.bench_rows, job.train_rows)
    good, line = bad_host(r["env_steps_per_s"], exp)
    if exp is None and hosts.published_bandwidth(gpu) is not None:  # the fallback, probed once per job
        if not job.probed:
            job.probed.update(job.probe(device))
        good, bw_line, info["bandwidth_reference"] = bandwidth_check(
            gpu, job.probed["copy_gb_per_s"], job.probed.get("launch_us"))
        line = (f"speed: {r['env_steps_per_s']:.0f} env steps/s; no earlier rows of this GPU, body "
                f"and nworld: judged by the primer's probe: {bw_line}")
    job.log(f"bench: {body}: {line}")
    info.update(speed=line, reference_rows=n_ref)
    m.update(expected_env_steps_per_s=exp,
             speed_ratio_vs_expected=None if exp is None else r["env_steps_per_s"] / exp)
    if good is False:
        raise _BadHost(line)
    left = job.deadline - time.perf_counter() - 5.0
    if left < 1.0:
        raise _Stop("the time limit leaves no time for the training")
    budget = min(job.train_s, left)
    bar.set_description(f"bench: {body} training {budget:.0f} s")
    tr = job.train(body, n, device, budget, job.out / "runs" / f"{body}-{n}-train", base, False)
    bar.update(1)
    m.update(tr)
    s_it = tr.get("train_s_per_iter") or r["s_per_iter"]
    iters, t, src = estimate(body, s_it, job.train_rows, learner=learner_id(to_dict(with_body(base, body))),
                             nworld=n)
    m.update(iterations_to_solve_reference=iters, estimated_time_to_solve_s=t, ok=True)
    info["estimate"] = src


@contextlib.contextmanager
def _hard_limit(seconds: float):
    """Raise `TimeLimit` when ``seconds`` of wall clock pass (SIGALRM: in the main thread only)."""
    if not (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()):
        yield
        return

    def handler(signum, frame):
        raise TimeLimit()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class _Stop(Exception):
    """A body's measurement ends early (a failed check, the time limit): its row says why."""


class _BadHost(_Stop):
    """The speed test judged the host bad: the bodies after it are not measured."""


def _fmt(v) -> str:
    return "—" if v is None or v != v else f"{v:.4g}"


__all__ = ["TRAIN_S", "BAD_HOST_FRACTION", "SETUP_ALLOWANCE_S", "INSTALL_ENV", "TimeLimit",
           "cuda_version", "driver_check", "expected_speed", "bad_host", "bandwidth_check",
           "probe_bandwidth", "estimate", "min_time_limit", "host_check",
           "install_s", "run_bench"]
