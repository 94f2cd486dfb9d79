"""The world-count sweep (notebook 04, Figure 2) and the rule behind `--nworld auto`.

Time to solve = iterations to solve × seconds per iteration: which world count solves soonest
on this GPU (the original study: 1024 on an RTX 5090, its Figure 2)? Two measurements:

- **Timing** (`run_sweep`, ``python -m fightlab sweep``): per (body, nworld) one short solo
  training (medians of iterations 4–12), one ``sweep`` row per point. Resumable: the folder
  ``runs/sweep/<sweep_id>/`` holds ``sweep.json`` (options, each point's status and run_id) and
  its own ``data/results/sweep.csv``, a row written as each point finishes; a rerun skips
  finished points, and an interrupted point runs again under its run_id.
- **Iterations to solve**: trainings to the solve criterion over world counts and seeds, a
  ``fightlab batch`` (`solve_batch_argv`, packed: packing changes wall time, not iterations)
  publishing ``train`` rows.

`measure.solvetime.time_to_solve_table` joins them (its names re-exported here); Figure 2 draws it.

**`--nworld auto`** (`auto_nworld`, `run.nworld.pick_nworld`): time a short ramp at a few world
counts on this GPU, predict time to solve(n) = iterations(n) × s_per_iter(n), iterations
interpolated in log2(nworld) between the committed world counts of the same body and learner
(at least two), and take the fewest worlds within `AUTO_TOLERANCE` of the minimum (no
extrapolation). No committed data, or a CPU device, is a ConfigError: pass a number.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shlex
from collections import Counter
from pathlib import Path
from textwrap import fill
from typing import Any, Callable

import numpy as np
import pandas as pd

from fightlab import meta, results
from fightlab.config import MAX_ITERATIONS, MAX_NWORLD, ConfigError, TrainConfig, int_text, to_dict, validate_body, with_body
from fightlab.measure.solvetime import (ORIGINAL_GPU, ORIGINAL_NWORLD, SUMMARY_WIDTH,  # noqa: F401
                                        auto_runs, auto_vs_sweep, findings, iterations_to_solve,
                                        known_iterations, packing_check, stage0_by_nworld, summary_lines,
                                        time_to_solve_table, warp_runs)
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.rundir import atomic_write
from fightlab.run.nworld import AUTO_TOLERANCE, interp_iterations, pick_nworld  # noqa: F401

#: the timing sweep's world counts (the issue's list)
NWORLDS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: world counts and seeds of the trainings to the solve criterion
SOLVE_NWORLDS: tuple[int, ...] = (256, 512, 1024, 4096)
SOLVE_SEEDS: tuple[int, ...] = (0, 1)
#: iterations a solve training may take before it stops unsolved (small nworld may need more)
SOLVE_MAX_ITERATIONS = 3000
#: `--nworld auto`'s ramp: world counts and iterations (medians of iterations skip+1 … iterations)
RAMP_NWORLDS: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
RAMP_ITERATIONS, RAMP_SKIP = 6, 2

SWEEP_ROOT = RUNS / "sweep"
STATE = "sweep.json"
LOCK = ".fightlab-sweep.lock"
FORMAT = "fightlab-sweep-1"
#: a sweep id: one folder name directly under runs/sweep/
SWEEP_ID_RULE = "[A-Za-z0-9][A-Za-z0-9._-]*"


def validate_sweep_id(sid, root: Path | str | None = None) -> Path:
    """``root`` (default runs/sweep)/``sid``; ConfigError unless ``sid`` matches `SWEEP_ID_RULE`,
    is not "." or "..", and resolves directly under ``root``."""
    root = Path(root) if root is not None else SWEEP_ROOT
    rule = (f"a sweep id is one folder name directly under {root}: it must match {SWEEP_ID_RULE} "
            "and not be '.' or '..'")
    if not (isinstance(sid, str) and re.fullmatch(SWEEP_ID_RULE, sid) and sid not in (".", "..")):
        raise ConfigError(f"--sweep-id {sid!r} refused: {rule}")
    folder = root / sid
    if folder.resolve().parent != root.resolve():
        raise ConfigError(f"--sweep-id {sid!r} refused: {rule} (it resolves to {folder.resolve()})")
    return folder


def parse_nworld_list(value, what: str = "--nworld-list") -> list[int]:
    """World counts from ``"128,256,512"`` or a list of ints, in the order given. ConfigError
    naming the bad item: not an integer, <= 0, above `config.MAX_NWORLD`, twice; or none."""
    example = "e.g. 128,256,512"
    out: list[int] = []
    for raw, n in _int_items(value, what, "world count", example):
        if n is None:
            raise ConfigError(f"{what}: {raw!r} is not an integer; world counts are positive "
                              f"integers ({example})")
        if n <= 0:
            raise ConfigError(f"{what}: {raw!r} is not a positive integer; world counts are "
                              f"positive integers ({example})")
        if n > MAX_NWORLD:
            raise ConfigError(f"{what}: {raw!r} is above the most worlds accepted ({MAX_NWORLD})")
        if n in out:
            raise ConfigError(f"{what}: {n} is listed twice; each world count is one point")
        out.append(n)
    return out


def parse_seed_list(value, what: str = "--seeds") -> list[int]:
    """Seeds from ``"0,1"`` or a list of ints: integers in [0, 2**31), each once (ConfigError
    naming the bad item, or an empty list)."""
    out: list[int] = []
    for raw, n in _int_items(value, what, "seed", "e.g. 0,1"):
        if n is None or not 0 <= n < 2**31:
            raise ConfigError(f"{what}: {raw!r} is not a seed (an integer in [0, 2**31)), e.g. 0,1")
        if n in out:
            raise ConfigError(f"{what}: {n} is listed twice")
        out.append(n)
    return out


def _int_items(value, what: str, noun: str, example: str) -> list[tuple[Any, int | None]]:
    """(item, its int or None) per item of ``value`` (text split at commas, or a list or tuple);
    ConfigError when ``value`` is neither, or holds no item."""
    if isinstance(value, str):
        items: list = [s.strip() for s in value.split(",")] if value.strip() else []
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"{what} must be comma-separated {noun}s ({example}), got {value!r}")
    if not items:
        raise ConfigError(f"{what} needs at least one {noun} ({example}), got {value!r}")
    return [(x, x if isinstance(x, int) and not isinstance(x, bool) else int_text(x)) for x in items]


def validate_timing(iterations, skip) -> None:
    """iterations > skip >= 0, integers, iterations at most a run's (ConfigError naming them)."""
    for name, v in (("iterations", iterations), ("skip", skip)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{name} must be an integer, got {v!r}")
    if iterations > MAX_ITERATIONS:
        raise ConfigError(f"iterations must be at most {MAX_ITERATIONS} (a run's most), got {iterations!r}")
    if not 0 <= skip < iterations:
        raise ConfigError(f"iterations must exceed skip >= 0, got iterations={iterations!r}, skip={skip!r}")


def time_point(body: str, nworld: int, device: str, iterations: int = 12, skip: int = 3,
               seed: int = 0, run_dir: Path | str | None = None, progress: bool = False,
               base: TrainConfig | None = None, **train_kw: Any) -> dict:
    """One short solo training at ``nworld`` worlds; medians over iterations skip+1 … iterations.
    ``run_dir``: default runs/sweep/points/<body>-<nworld>; ``base``: a TrainConfig whose learner
    the run keeps (default: the defaults); ``train_kw``: further TrainConfig fields.

    Returns a dict: s_per_iter, s_per_iter_min, s_per_iter_max, rollout_s_per_iter,
    update_s_per_iter [s]; env_steps_per_s [1/s]; host_reads_per_iter, graph_fallbacks,
    iterations (timed), num_steps, compile_s, first_iter_s (the untimed first iteration) [s];
    learner (`report.learner_id`); physics_engine (`StanceEnv.engine_solver`: the Newton solve
    that ran, `learners.solve_of`).
    """
    from fightlab.measure.report import learner_id
    from fightlab.run.runner import Trainer

    validate_timing(iterations, skip)
    cfg = point_config(body, nworld, device, iterations, seed, run_dir, base, **train_kw)
    with Trainer(cfg, progress=progress) as tr:
        tr.train()
        rows, compile_s, graph_fallbacks = tr.rows[skip:], tr.compile_s, max(r["graph_fallbacks"] for r in tr.rows)
        first_iter_s = float(tr.rows[0]["wall_s"])
        cfg, engine = tr.cfg, dict(tr.env.unwrapped.engine_solver)
    wall = [r["wall_s"] for r in rows]
    s_it = float(np.median(wall))
    med = lambda k: float(np.median([r[k] for r in rows]))  # noqa: E731
    return dict(s_per_iter=s_it, s_per_iter_min=float(min(wall)), s_per_iter_max=float(max(wall)),
                rollout_s_per_iter=med("rollout_s"), update_s_per_iter=med("update_s"),
                env_steps_per_s=cfg.nworld * cfg.ppo.num_steps / s_it,
                host_reads_per_iter=med("host_reads"), graph_fallbacks=int(graph_fallbacks),
                iterations=len(rows), num_steps=cfg.ppo.num_steps, compile_s=float(compile_s),
                first_iter_s=first_iter_s, learner=learner_id(to_dict(cfg)), physics_engine=engine)


def point_config(body: str, nworld: int, device: str, iterations: int = 12, seed: int = 0,
                 run_dir: Path | str | None = None, base: TrainConfig | None = None,
                 **train_kw: Any) -> TrainConfig:
    """The TrainConfig of one timing point (:func:`time_point`'s run), not yet through the gate."""
    run_dir = Path(run_dir or SWEEP_ROOT / "points" / f"{body}-{nworld}")
    return dataclasses.replace(with_body(base or TrainConfig(), body), nworld=nworld, device=device,
                               seed=seed, max_iterations=iterations, checkpoint_every=0,
                               run_dir=str(run_dir), stop_when_solved=False, resume=None,
                               segment_s=None, **train_kw)


def sweep_options(bodies, nworlds, device: str, iterations: int = 12, skip: int = 3,
                  seed: int = 0, size: str | None = None, **train_kw) -> dict:
    """The options that define a sweep, JSON-ready, each point's run through the gate
    (`run.launch.plan_run`) before anything is written. Raises ConfigError naming a bad value."""
    from fightlab.run.launch import plan_run

    if isinstance(bodies, str) or not bodies:
        raise ConfigError(f"bodies must be a non-empty list of body names, got {bodies!r}")
    bodies = [validate_body(b) for b in bodies]
    if len(set(bodies)) != len(bodies):
        raise ConfigError(f"bodies {bodies} name a body twice")
    validate_timing(iterations, skip)
    nworlds = parse_nworld_list(nworlds, "nworlds")
    for body in bodies:
        for n in nworlds:
            plan_run(point_config(body, n, device, iterations, seed, **train_kw))
    out = dict(bodies=bodies, nworlds=nworlds, device=device,
               iterations=iterations, skip=skip, seed=seed, size=size,
               train_kw={k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
                         for k, v in train_kw.items()})
    return json.loads(json.dumps(out))  # as sweep.json stores it (tuples are lists)


def sweep_id(options: dict, commit: str | None = None) -> str:
    """The default id of a sweep: its device and 8 hex characters of a hash of its options and
    ``commit`` (default `meta.git_commit`): the same command at the same commit continues it."""
    commit = meta.git_commit() if commit is None else commit
    key = json.dumps(dict(options=options, commit=commit), sort_keys=True, default=str)
    return f"{options['device'].replace(':', '')}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def read_state(folder: Path | str) -> dict | None:
    """A sweep folder's ``sweep.json`` (None when absent). Raises ConfigError when unreadable."""
    path = Path(folder) / STATE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
    except ValueError as e:
        raise ConfigError(f"{path}: not a readable sweep state ({e}); move it aside") from None
    if state.get("format") != FORMAT:
        raise ConfigError(f"{path}: format {state.get('format')!r}, not {FORMAT!r}")
    return state


def _write_state(folder: Path, state: dict) -> None:
    atomic_write(folder / STATE, json.dumps(state, indent=1, sort_keys=True))  # a kill never leaves half a state


@contextlib.contextmanager
def _claim(folder: Path):
    """One writer per sweep folder (flock on its lock file; released when the process dies)."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise ConfigError(f"sweep folder {folder} is in use by pid {pid}; wait for it, or use "
                              "another --sweep-id") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def sweep_folder(options: dict, sweep_dir: Path | str | None = None) -> Path:
    """The sweep's folder: ``sweep_dir`` or runs/sweep/<`sweep_id`>. A folder that is not a
    sweep's (no sweep.json) must be a place a run may use (`rundir.check_location`)."""
    from fightlab.rundir import check_location

    folder = Path(sweep_dir) if sweep_dir else SWEEP_ROOT / sweep_id(options)
    if not (folder / STATE).is_file():
        check_location(folder)
    return folder


def run_sweep(bodies, nworlds, device: str = "cpu", iterations: int = 12, skip: int = 3,
              seed: int = 0, sweep_dir: Path | str | None = None, publish: bool = False,
              root: Path | str = REPO_ROOT, size: str | None = None, progress: bool = False,
              log: Callable[[str], None] = print, point: Callable[..., dict] | None = None,
              **train_kw: Any) -> pd.DataFrame:
    """Time every (body, nworld) point not yet finished (see the module docstring); with
    ``publish`` every finished point's row also goes to ``root``'s data/ (`results.files.check_committed` as it writes;
    the command line refuses a publish before any work: `cli.publish_plans`). ``sweep_dir``: default runs/sweep/<sweep_id>; ``size``: recorded in the rows; ``point``: the
    timing function (default `time_point`); ``train_kw``: TrainConfig fields for every point.

    Returns the rows of every finished point, this run's and earlier.
    Raises ConfigError: a bad option, a publish the rule refuses at write time, a folder of another sweep or in use.
    """
    options = sweep_options(bodies, nworlds, device, iterations, skip, seed, size, **train_kw)
    folder = sweep_folder(options, sweep_dir)
    folder.mkdir(parents=True, exist_ok=True)
    point = point or time_point
    with _claim(folder):
        state = read_state(folder)
        if state is None:
            state = dict(format=FORMAT, sweep_id=folder.name, options=options, points={})
        elif state["options"] != options:
            diff = sorted(k for k in options if state["options"].get(k) != options[k])
            raise ConfigError(f"sweep folder {folder} holds a sweep with other options ({', '.join(diff)} "
                              "differ); use another --sweep-id, or the same options to continue it")
        _write_state(folder, state)
        todo = [(b, n) for b in options["bodies"] for n in options["nworlds"]]
        done = [k for k in (f"{b}/{n}" for b, n in todo) if state["points"].get(k, {}).get("status") == "done"]
        log(f"sweep {folder.name}: {folder} ({len(done)} of {len(todo)} points done"
            + (", skipped" if done else "") + "; rerun the same command to continue it)")
        stale = _other_commits(folder, state, done, meta.git_commit())
        if stale:
            log(f"sweep {folder.name}: {sum(stale.values())} points from commit "
                f"{', '.join(sorted(stale))} kept; pass a new --sweep-id to re-measure")
        for body, nworld in todo:
            entry = state["points"].setdefault(f"{body}/{nworld}", {})
            if entry.get("status") == "done":
                continue
            entry.setdefault("run_id", meta.new_run_id())
            entry.update(status="running", attempts=entry.get("attempts", 0) + 1)
            _write_state(folder, state)
            r = point(body, nworld, device, iterations=iterations, skip=skip, seed=seed,
                      run_dir=folder / "runs" / f"{body}-{nworld}", progress=progress, **train_kw)
            row = _row(body, nworld, seed, device, options, folder.name, r, entry["run_id"])
            results.append_row("sweep", row, folder)
            entry.update(status="done", commit=row["commit"])
            _write_state(folder, state)
            log(f"sweep {body} ×{nworld}: {r['s_per_iter']:.4f} s/iteration (rollout "
                f"{r['rollout_s_per_iter']:.4f} + update {r['update_s_per_iter']:.4f}), "
                f"{r['env_steps_per_s']:.0f} env steps/s")
        rows = results.read_rows("sweep", folder)
        ids = {e["run_id"] for e in state["points"].values() if e.get("status") == "done"}
        rows = rows[rows["run_id"].isin(ids)].reset_index(drop=True)
        if publish:
            for _, r in rows.iterrows():
                results.append_row("sweep", r.to_dict(), root)
            log(f"sweep {folder.name}: {len(rows)} rows in {results.results_path('sweep', root)}")
    return rows


def _other_commits(folder: Path, state: dict, done: list[str], commit: str) -> dict[str, int]:
    """{commit: points} of the finished points ``done`` measured at a commit other than
    ``commit`` (the point's entry in sweep.json, else its row's commit)."""
    by_run = {}
    if any("commit" not in state["points"][k] for k in done):
        rows = results.read_rows("sweep", folder)
        if not rows.empty:
            by_run = dict(zip(rows["run_id"], rows["commit"].astype(str)))
    at = (state["points"][k].get("commit") or by_run.get(state["points"][k].get("run_id")) for k in done)
    return dict(Counter(c for c in at if c and c != commit))


def _row(body, nworld, seed, device, options, sid, r: dict, run_id: str) -> dict:
    params = dict(sweep_id=sid, iterations=options["iterations"], skip=options["skip"],
                  num_steps=r["num_steps"], learner=r["learner"], **options["train_kw"],
                  **({"physics_engine": r["physics_engine"]} if "physics_engine" in r else {}))
    if options.get("size"):
        params["size"] = options["size"]
    row = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
    return {**row, "run_id": run_id, **{c: r[c] for c in results.EXPERIMENTS["sweep"]}}


def solve_batch_argv(bodies=("simple", "muscular-fast"), nworlds=SOLVE_NWORLDS, seeds=SOLVE_SEEDS,
                     concurrent: int = 4, max_iterations: int = SOLVE_MAX_ITERATIONS,
                     publish: bool = True, batch_dir: str | None = None) -> list[str]:
    """The ``python -m fightlab batch`` arguments of the trainings to the solve criterion: one
    ``train --publish`` job over body × nworld × seed, ``concurrent`` per GPU. Validated."""
    bodies = [validate_body(b) for b in bodies]
    nworlds = parse_nworld_list(nworlds if isinstance(nworlds, str) else list(nworlds), "solve nworlds")
    seeds = parse_seed_list(seeds if isinstance(seeds, str) else list(seeds))
    for flag, v in (("--concurrent", concurrent), ("--max-iterations", max_iterations)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{flag} must be a positive integer, got {v!r}")
    job = f"train --max-iterations {max_iterations} --no-progress" + (" --publish" if publish else "")
    argv = ["batch", "--job", job, "--grid", "body=" + ",".join(bodies),
            "--grid", "nworld=" + ",".join(map(str, nworlds)), "--grid", "seed=" + ",".join(map(str, seeds)),
            "--concurrent", str(concurrent)]
    return argv + (["--batch-dir", str(batch_dir)] if batch_dir else [])


def command_line(argv: list[str]) -> str:
    """``python -m fightlab`` + argv, quoted for a shell."""
    return "python -m fightlab " + shlex.join(argv)


def auto_nworld(cfg: TrainConfig, root: Path | str = REPO_ROOT, nworlds=RAMP_NWORLDS,
                iterations: int = RAMP_ITERATIONS, skip: int = RAMP_SKIP, allow_cpu: bool = False,
                progress: bool = False, log: Callable[[str], None] = print,
                point: Callable[..., dict] | None = None) -> tuple[int, dict]:
    """`--nworld auto` for a new training of ``cfg``: `known_iterations` of its body and learner
    in ``root``'s train rows, a ramp (`time_point`, runs/sweep/ramp/) at the ``nworlds`` inside
    their range, then `pick_nworld`; prints the ramp table and the choice.

    Returns (nworld, record for params.nworld_auto: rule, tolerance, ramp iterations / skip, the
    known iterations, the ramp table, the choice).
    Raises ConfigError: a CPU device (unless ``allow_cpu``), or what `pick_nworld` refuses (before
    any ramp when the committed data cannot support a choice).
    """
    from fightlab.measure.report import learner_id, published_runs

    if not str(cfg.device).startswith("cuda") and not allow_cpu:
        raise ConfigError("--nworld auto times a ramp on a GPU against the committed GPU sweep; on "
                          f"device {cfg.device!r} pass a number instead (e.g. --nworld 64)")
    learner = learner_id(to_dict(cfg))
    known = known_iterations(published_runs(Path(root)), cfg.body, learner)
    pick_nworld({n: 1.0 for n in known} or {1: 1.0}, known)  # refuses missing data before the ramp
    lo, hi = min(known), max(known)
    ramp_n = [n for n in parse_nworld_list(nworlds if isinstance(nworlds, str) else list(nworlds), "ramp nworlds") if lo <= n <= hi]
    if not ramp_n:
        raise ConfigError(f"--nworld auto: no ramp world count ({', '.join(map(str, nworlds))}) lies "
                          f"within the committed range {lo}–{hi}; pass --nworld N")
    point = point or time_point
    ramp = {}
    for n in ramp_n:
        r = point(cfg.body, n, cfg.device, iterations=iterations, skip=skip, seed=cfg.seed,
                  run_dir=SWEEP_ROOT / "ramp" / f"{cfg.body}-{n}", progress=progress, base=cfg)
        ramp[n] = r["s_per_iter"]
        log(f"nworld auto ramp: {cfg.body} ×{n}: {r['s_per_iter']:.4f} s/iteration")
    chosen, table = pick_nworld(ramp, known)
    log(table.to_string(index=False))
    log(f"nworld auto: {chosen} worlds (the fewest within {AUTO_TOLERANCE:.0%} of the fastest "
        f"predicted solve, {table.loc[table['chosen'], 'predicted_s'].iloc[0]:.1f} s)")
    record = dict(rule="min predicted time to solve = iterations(log2-interpolated, committed) × "
                       "ramp s_per_iter; fewest worlds within tolerance",
                  tolerance=AUTO_TOLERANCE, ramp_iterations=iterations, ramp_skip=skip,
                  learner=learner, known_iterations={str(k): v for k, v in sorted(known.items())},
                  ramp=table[["nworld", "s_per_iter", "iterations", "predicted_s"]].to_dict("records"),
                  chosen=chosen)
    return chosen, record


def command(*, summary: bool = False, solve: bool = False, run: bool = False, publish: bool = False,
            device: str | None = None, bodies=None, nworld_list: str | None = None, sweep_id: str | None = None,
            solve_nworld_list: str | None = None, seeds: str | None = None, concurrent: int = 4,
            max_iterations: int | None = None, iterations: int = 12, skip: int = 3, seed: int = 0,
            progress: bool = True, run_argv: Callable[[list[str]], int] | None = None,
            root: Path | None = None, log: Callable[[str], None] = print) -> int:
    """`python -m fightlab sweep`, its flags as given (None: not given): `summary` prints time to
    solve against nworld from `root`'s data/ (None: the repository's); `solve` prints the solve
    batch command and, with `run` on a GPU, hands it to `run_argv`; else `run_sweep`. Returns
    the exit code (130: interrupted, the finished points kept).

    Raises ConfigError: one line naming the flag: a flag --summary does not take, --run without
    a GPU, the GPU-sized default world counts on the CPU, a bad list, id, device or publish.
    """
    import sys

    from fightlab import devices, paths
    from fightlab.bodies import BODY_NAMES

    root = paths.REPO_ROOT if root is None else root  # read now: tests and FIGHTLAB_RUNS move them

    if summary:
        from fightlab.measure.report import published_runs

        given = [f for f, on in (("--solve", solve), ("--publish", publish), ("--device", device is not None),
                                 ("--body", bodies is not None), ("--nworld-list", nworld_list is not None),
                                 ("--sweep-id", sweep_id is not None)) if on]
        if given:
            raise ConfigError(f"sweep --summary only reads data/ (no measurement); it does not take "
                              f"{', '.join(given)}: run those without --summary")
        table = time_to_solve_table(results.read_rows("sweep", root), published_runs(root))
        if table.empty:
            log(f"sweep: no rows in {results.results_path('sweep', root)} yet")
            return 0
        log("\n".join(summary_lines(table)))
        for line in findings(table):
            log(fill(line, SUMMARY_WIDTH, subsequent_indent="  "))
        return 0
    bodies = [validate_body(b) for b in bodies or BODY_NAMES]  # a bad body first: the flags in order
    if solve:
        nw = SOLVE_NWORLDS if solve_nworld_list is None else solve_nworld_list
        argv = solve_batch_argv(bodies, parse_nworld_list(nw, "--solve-nworld-list"),
                                parse_seed_list(SOLVE_SEEDS if seeds is None else seeds),
                                concurrent=concurrent, publish=True,
                                max_iterations=SOLVE_MAX_ITERATIONS if max_iterations is None else max_iterations)
        gpu = devices.default_device() != "cpu"
        if run and not gpu:
            raise ConfigError("sweep --solve --run publishes train rows, which needs a GPU; this machine "
                              "has none (warp sees no CUDA device): run it on a GPU machine")
        log(command_line(argv))
        if not gpu:
            log("(for a GPU machine: its trainings --publish train rows, which needs a GPU, and this "
                "machine has none; run it there, then python -m fightlab sweep --summary)")
            return 0
        if not run or run_argv is None:
            log("(add --run to run it; then python -m fightlab sweep --summary)")
            return 0
        return run_argv(argv)
    validate_timing(iterations, skip)
    nworlds = parse_nworld_list(NWORLDS if nworld_list is None else nworld_list)
    device = devices.pick_device(device)
    if device == "cpu" and nworld_list is None:
        raise ConfigError(f"sweep on the CPU needs --nworld-list: the default list ("
                          f"{NWORLDS[0]} … {NWORLDS[-1]} worlds, {len(NWORLDS)} points "
                          "per body) is sized for a GPU; pass small counts, e.g. --nworld-list 4,8")
    sweep_dir = None if sweep_id is None else validate_sweep_id(sweep_id, paths.RUNS / "sweep")
    try:
        rows = run_sweep(bodies, nworlds, device=device, iterations=iterations, skip=skip, seed=seed,
                         publish=publish, progress=progress, sweep_dir=sweep_dir)
    except KeyboardInterrupt:
        print("fightlab: sweep interrupted; its finished points are kept: run the same command "
              "again to continue it", file=sys.stderr)
        return 130
    log(rows[["body", "nworld", "s_per_iter", "rollout_s_per_iter", "update_s_per_iter",
              "env_steps_per_s", "graph_fallbacks"]].round(4).to_string(index=False))
    return 0

