"""The world-count sweep (notebook 04, Figure 2) and the rule behind `--nworld auto`.

Time to solve = iterations to solve × seconds per iteration. The curriculum sets most of the
iterations, so more worlds mostly make each iteration longer; the question is which world count
solves soonest on this GPU (the original study: 1024 on an RTX 5090, its Figure 2).

Two measurements, kept apart:

- **Timing** (`run_sweep`, ``python -m fightlab sweep``): per (body, nworld) one short solo
  training (default 12 iterations, medians of iterations 4–12, as `measure.graphs` times them):
  seconds per iteration (rollout / update), env steps/s, host reads, graph fallbacks; one
  ``sweep`` row per point (`results.EXPERIMENTS["sweep"]`). Resumable: the sweep's folder
  ``runs/sweep/<sweep_id>/`` holds ``sweep.json`` (options, each point's status and run_id) and
  its own ``data/results/sweep.csv``; each point's row is written the moment it finishes, and a
  rerun (same command, or ``--sweep-id``) skips finished points. An interrupted point runs again
  under the same run_id (its row, if any, is replaced: one row per point).
- **Iterations to solve**: ordinary trainings to the solve criterion over a grid of world counts
  and seeds, run as a ``fightlab batch`` (`solve_batch_argv`: packed K at once; packing changes
  wall time, not iterations — `packing_check` compares a point run both ways) that publishes
  ``train`` rows.

`time_to_solve_table` joins them: per (GPU, body, learner, nworld), the median iterations to
solve of the train rows of the same body, learner and nworld (any packing, commit and GPU: the
iterations are the learner's and the curriculum's, as for `--nworld auto`; the commits pooled
are listed) × the solo seconds per iteration of the newest sweep row of that GPU. Figure 2
(`fightlab.figures.sweep`) draws it.

**The `--nworld auto` rule** (`pick_nworld`, `auto_nworld`): time a short ramp of solo
iterations at a few world counts on the machine at hand, predict time to solve(n) =
iters_to_solve(n) × s_per_iter(n) with iters_to_solve interpolated linearly in log2(nworld)
between the committed world counts of the same body and learner (solved runs of the task,
``data/results/train.csv``; at least two world counts), and take the smallest n whose predicted
time is within `AUTO_TOLERANCE` of the minimum. Ramp points outside the committed range are shown
but never picked (no extrapolation); no committed data, or a CPU device, is a ConfigError telling
the user to pass a number.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import math
import os
import re
import shlex
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from fightlab import results
from fightlab.config import MAX_NWORLD, ConfigError, TrainConfig, int_text, to_dict, validate_body, with_body
from fightlab import meta
from fightlab.meta import new_run_id
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.rundir import atomic_write
from fightlab.run.nworld import AUTO_TOLERANCE, interp_iterations, pick_nworld  # noqa: F401  (the rule)

#: the timing sweep's world counts (the issue's list)
NWORLDS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: world counts and seeds of the trainings to the solve criterion
SOLVE_NWORLDS: tuple[int, ...] = (256, 512, 1024, 4096)
SOLVE_SEEDS: tuple[int, ...] = (0, 1)
#: iterations a solve training may take before it stops unsolved (small nworld may need more)
SOLVE_MAX_ITERATIONS = 3000
#: the original study's best world count and card (its Figure 2), drawn for reference
ORIGINAL_NWORLD = 1024
ORIGINAL_GPU = "RTX 5090"
#: `--nworld auto`'s ramp: world counts and iterations (medians of iterations skip+1 … iterations)
RAMP_NWORLDS: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
RAMP_ITERATIONS, RAMP_SKIP = 6, 2

SWEEP_ROOT = RUNS / "sweep"
STATE = "sweep.json"
LOCK = ".fightlab-sweep.lock"
FORMAT = "fightlab-sweep-1"
#: a sweep id: one folder name directly under runs/sweep/
SWEEP_ID_RULE = "[A-Za-z0-9][A-Za-z0-9._-]*"


# --- input -----------------------------------------------------------------------------------

def validate_sweep_id(sid, root: Path | str | None = None) -> Path:
    """The folder of sweep id ``sid``: ``root`` (default runs/sweep)/<sid>. Raises ConfigError
    (one line naming the id and the rule) unless ``sid`` matches `SWEEP_ID_RULE`, is not "." or
    "..", and the resolved folder sits directly under ``root``."""
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
    """World counts from ``"128,256,512"`` or a list of ints, in the order given.

    Raises:
      ConfigError: one line naming the bad item: not an integer ("1.5", "lots", True), <= 0,
        above `config.MAX_NWORLD`, listed twice, or an empty list.
    """
    example = "e.g. 128,256,512"
    if isinstance(value, str):
        items = [s.strip() for s in value.split(",")]
        if items == [""]:
            items = []
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"{what} must be comma-separated world counts ({example}), got {value!r}")
    if not items:
        raise ConfigError(f"{what} needs at least one world count ({example}), got {value!r}")
    out: list[int] = []
    for raw in items:
        n = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            n = raw
        elif isinstance(raw, str):
            n = int_text(raw)
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
    naming the bad item)."""
    items = [s.strip() for s in value.split(",")] if isinstance(value, str) else list(value)
    out = []
    for raw in items:
        n = raw if isinstance(raw, int) and not isinstance(raw, bool) else int_text(raw)
        if n is None or not 0 <= n < 2**31:
            raise ConfigError(f"{what}: {raw!r} is not a seed (an integer in [0, 2**31)), e.g. 0,1")
        if n in out:
            raise ConfigError(f"{what}: {n} is listed twice")
        out.append(n)
    if not out:
        raise ConfigError(f"{what} needs at least one seed, e.g. 0,1")
    return out


def validate_timing(iterations, skip) -> None:
    """iterations > skip >= 0, both integers (ConfigError naming the values)."""
    for name, v in (("iterations", iterations), ("skip", skip)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{name} must be an integer, got {v!r}")
    if not 0 <= skip < iterations:
        raise ConfigError(f"iterations must exceed skip >= 0, got iterations={iterations!r}, skip={skip!r}")


# --- one point -------------------------------------------------------------------------------

def time_point(body: str, nworld: int, device: str, iterations: int = 12, skip: int = 3,
               seed: int = 0, run_dir: Path | str | None = None, progress: bool = False,
               base: TrainConfig | None = None, **train_kw: Any) -> dict:
    """One short solo training at ``nworld`` worlds; medians over iterations skip+1 … iterations.

    Args:
      body, nworld, device, seed: the run; iterations (> skip), skip: as in `measure.graphs`;
      run_dir: its run folder (default runs/sweep/points/<body>-<nworld>); base: a TrainConfig
        whose learner (ppo, env, graphs) the run keeps (default: the defaults); train_kw: further
        TrainConfig fields (e.g. ppo=PPOConfig(num_steps=4) for a smoke run).

    Returns:
      dict: s_per_iter, s_per_iter_min, s_per_iter_max, rollout_s_per_iter, update_s_per_iter
      [s]; env_steps_per_s [1/s] (nworld × num_steps / s_per_iter); host_reads_per_iter,
      graph_fallbacks, iterations (timed), num_steps, compile_s [s], first_iter_s [s] (the
      first, untimed iteration's wall clock); learner (the run's
      `report.learner_id`).
    """
    from fightlab.measure.report import learner_id
    from fightlab.run.runner import Trainer

    validate_timing(iterations, skip)
    run_dir = Path(run_dir or SWEEP_ROOT / "points" / f"{body}-{nworld}")
    cfg = dataclasses.replace(with_body(base or TrainConfig(), body), nworld=nworld, device=device,
                              seed=seed, max_iterations=iterations, checkpoint_every=0,
                              run_dir=str(run_dir), stop_when_solved=False, resume=None,
                              segment_s=None, **train_kw)
    with Trainer(cfg, progress=progress) as tr:
        tr.train()
        rows, compile_s, graph_fallbacks = tr.rows[skip:], tr.compile_s, max(r["graph_fallbacks"] for r in tr.rows)
        first_iter_s = float(tr.rows[0]["wall_s"])
        cfg = tr.cfg
    wall = [r["wall_s"] for r in rows]
    s_it = float(np.median(wall))
    med = lambda k: float(np.median([r[k] for r in rows]))  # noqa: E731
    return dict(s_per_iter=s_it, s_per_iter_min=float(min(wall)), s_per_iter_max=float(max(wall)),
                rollout_s_per_iter=med("rollout_s"), update_s_per_iter=med("update_s"),
                env_steps_per_s=cfg.nworld * cfg.ppo.num_steps / s_it,
                host_reads_per_iter=med("host_reads"), graph_fallbacks=int(graph_fallbacks),
                iterations=len(rows), num_steps=cfg.ppo.num_steps, compile_s=float(compile_s),
                first_iter_s=first_iter_s, learner=learner_id(to_dict(cfg)))


# --- the sweep: state, resume ----------------------------------------------------------------

def _jsonable(v):
    return dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v


def sweep_options(bodies, nworlds, device: str, iterations: int = 12, skip: int = 3,
                  seed: int = 0, size: str | None = None, **train_kw) -> dict:
    """The options that define a sweep (validated): bodies, nworlds, device, iterations, skip,
    seed, size, train_kw (JSON-ready). Raises ConfigError naming a bad value."""
    if isinstance(bodies, str) or not bodies:
        raise ConfigError(f"bodies must be a non-empty list of body names, got {bodies!r}")
    bodies = [validate_body(b) for b in bodies]
    if len(set(bodies)) != len(bodies):
        raise ConfigError(f"bodies {bodies} name a body twice")
    validate_timing(iterations, skip)
    out = dict(bodies=bodies, nworlds=parse_nworld_list(nworlds, "nworlds"), device=device,
               iterations=iterations, skip=skip, seed=seed, size=size,
               train_kw={k: _jsonable(v) for k, v in train_kw.items()})
    return json.loads(json.dumps(out))  # as sweep.json stores it (tuples are lists)


def sweep_id(options: dict, commit: str | None = None) -> str:
    """The default id of a sweep: its device and 8 hex characters of a hash of its options and
    the code's commit (``commit``, default `meta.git_commit`), so the same command at the same
    commit finds (and continues) the same sweep folder, and a code change measures afresh."""
    commit = meta.git_commit() if commit is None else commit
    key = json.dumps(dict(options=options, commit=commit), sort_keys=True, default=str)
    return f"{options['device'].replace(':', '')}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def point_key(body: str, nworld: int) -> str:
    return f"{body}/{nworld}"


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
    """Time every (body, nworld) point not yet finished; one ``sweep`` row per point, written
    as it finishes to the sweep folder's data/results/sweep.csv and, with ``publish``, to
    ``root``'s (the repository: `publish.check_publish`, a CUDA device).

    Resumable: finished points (in sweep.json) are skipped; an interrupted point runs again under
    its run_id. A folder holding a sweep of other options is refused. With ``publish``, finished
    points of an earlier unpublished run of the same sweep are published too.

    Args:
      bodies, nworlds (list or "128,256"), device, iterations, skip, seed: the sweep;
      sweep_dir: its folder (default runs/sweep/<sweep_id>); size: recorded in the rows
      (notebooks); point: the timing function (default `time_point`; tests pass a fake);
      train_kw: TrainConfig fields for every point (e.g. a tiny PPOConfig at smoke size).

    Returns:
      the sweep's rows (every finished point, this run's and earlier), a DataFrame.

    Raises:
      ConfigError: a bad option, a publish the rule refuses, a folder of another sweep or in use.
    """
    from fightlab.publish import check_publish

    options = sweep_options(bodies, nworlds, device, iterations, skip, seed, size, **train_kw)
    check_publish(publish, device, "sweep rows", size=size)
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
        done = [k for k in (point_key(b, n) for b, n in todo) if state["points"].get(k, {}).get("status") == "done"]
        log(f"sweep {folder.name}: {folder} ({len(done)} of {len(todo)} points done"
            + (", skipped" if done else "") + "; rerun the same command to continue it)")
        stale = _other_commits(folder, state, done, meta.git_commit())
        if stale:
            log(f"sweep {folder.name}: {sum(stale.values())} points from commit "
                f"{', '.join(sorted(stale))} kept; pass a new --sweep-id to re-measure")
        for body, nworld in todo:
            key = point_key(body, nworld)
            entry = state["points"].setdefault(key, {})
            if entry.get("status") == "done":
                continue
            entry.setdefault("run_id", new_run_id())
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
    out: dict[str, int] = {}
    for k in done:
        e = state["points"][k]
        c = e.get("commit") or by_run.get(e.get("run_id"))
        if c and c != commit:
            out[c] = out.get(c, 0) + 1
    return out


def _row(body, nworld, seed, device, options, sid, r: dict, run_id: str) -> dict:
    params = dict(sweep_id=sid, iterations=options["iterations"], skip=options["skip"],
                  num_steps=r["num_steps"], learner=r["learner"], **options["train_kw"])
    if options.get("size"):
        params["size"] = options["size"]
    meta = results.run_metadata(body=body, nworld=nworld, seed=seed, params=params, device=device)
    meta["run_id"] = run_id
    return {**meta, **{c: r[c] for c in results.EXPERIMENTS["sweep"]}}


# --- the solve trainings (a fightlab batch) ---------------------------------------------------

def solve_batch_argv(bodies=("simple", "muscular-fast"), nworlds=SOLVE_NWORLDS, seeds=SOLVE_SEEDS,
                     concurrent: int = 4, max_iterations: int = SOLVE_MAX_ITERATIONS,
                     publish: bool = True, batch_dir: str | None = None) -> list[str]:
    """The ``python -m fightlab batch`` arguments of the trainings to the solve criterion: one
    ``train`` job over the grid body × nworld × seed, ``concurrent`` at once per GPU (CUDA MPS;
    every row records its packing), ``--publish`` train rows. Validated (ConfigError)."""
    bodies = [validate_body(b) for b in bodies]
    nworlds = parse_nworld_list(nworlds if isinstance(nworlds, str) else list(nworlds), "solve nworlds")
    seeds = parse_seed_list(seeds if isinstance(seeds, str) else list(seeds))
    if isinstance(concurrent, bool) or not isinstance(concurrent, int) or concurrent < 1:
        raise ConfigError(f"--concurrent must be a positive integer, got {concurrent!r}")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise ConfigError(f"--max-iterations must be a positive integer, got {max_iterations!r}")
    job = f"train --max-iterations {max_iterations} --no-progress" + (" --publish" if publish else "")
    argv = ["batch", "--job", job, "--grid", "body=" + ",".join(bodies),
            "--grid", "nworld=" + ",".join(map(str, nworlds)), "--grid", "seed=" + ",".join(map(str, seeds)),
            "--concurrent", str(concurrent)]
    return argv + (["--batch-dir", str(batch_dir)] if batch_dir else [])


def command_line(argv: list[str]) -> str:
    """``python -m fightlab`` + argv, quoted for a shell."""
    return "python -m fightlab " + shlex.join(argv)


# --- iterations × seconds per iteration ------------------------------------------------------

def _params(df: pd.DataFrame) -> list[dict]:
    return [json.loads(p) if isinstance(p, str) and p else {} for p in df["params"]]


def warp_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The train rows of MuJoCo Warp trainings: CPU-backend rows (MuJoCo's C engine;
    `report.physics_backend`) left out, so the sweep's curve and `--nworld auto`'s iterations
    are GPU-backend trainings only (rows from before the CPU backend name none: MuJoCo Warp)."""
    from fightlab.measure.report import physics_backend

    if runs.empty:
        return runs
    return runs[[physics_backend(p) == "gpu" for p in _params(runs)]]


def iterations_to_solve(runs: pd.DataFrame) -> pd.DataFrame:
    """Iterations to solve per (body, learner, nworld) from MuJoCo Warp train rows of the task
    (`report.published_runs`, `warp_runs`; any packing: packing changes wall time, not
    iterations; any commit and GPU: the iterations are the learner's and the curriculum's, as
    `known_iterations` has them for `--nworld auto`).

    Returns:
      DataFrame with body, learner, nworld, n_runs, n_solved, seeds (solved, text), commits (of
      the solved runs, oldest first, text), iterations_median / _min / _max (solved runs only;
      NaN when none solved), packed (the packings seen, text such as "1,4").
    """
    from fightlab.config import DEFAULT_TASK
    from fightlab.measure.report import commits_in, learner_id

    cols = ["body", "learner", "nworld", "n_runs", "n_solved", "seeds", "commits", "iterations_median",
            "iterations_min", "iterations_max", "packed"]
    runs = warp_runs(runs)
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = runs.assign(learner=[learner_id(p) for p in _params(runs)])
    if "task" in runs:
        runs = runs[runs["task"] == DEFAULT_TASK]
    out = []
    for (body, learner, nworld), g in runs.groupby(["body", "learner", "nworld"], sort=True):
        s = g[g["solved"] == True]  # noqa: E712
        conc = pd.to_numeric(g.get("concurrent", pd.Series(1, index=g.index)), errors="coerce")
        out.append(dict(body=body, learner=learner, nworld=int(nworld), n_runs=len(g),
                        n_solved=len(s), seeds=",".join(str(x) for x in sorted(s["seed"])),
                        commits=commits_in(s, sep=","),
                        iterations_median=s["iterations"].median() if len(s) else math.nan,
                        iterations_min=s["iterations"].min() if len(s) else math.nan,
                        iterations_max=s["iterations"].max() if len(s) else math.nan,
                        packed=",".join(str(int(c)) if c == c else "?" for c in sorted(set(conc)))))
    return pd.DataFrame(out, columns=cols)


def latest_sweep_rows(sweep: pd.DataFrame) -> pd.DataFrame:
    """The newest ``sweep`` row per (gpu, learner, body, nworld), with a ``learner`` column
    (from params; "" for rows without one): a point measured again, at the same or a later
    commit, replaces the older measurement."""
    if sweep.empty:
        return sweep.assign(learner=pd.Series(dtype=object))
    sweep = sweep.assign(learner=[p.get("learner", "") for p in _params(sweep)])
    return (sweep.sort_values("time", kind="stable")
            .drop_duplicates(["gpu", "learner", "body", "nworld"], keep="last")
            .sort_values(["gpu", "body", "nworld"], kind="stable").reset_index(drop=True))


def time_to_solve_table(sweep: pd.DataFrame, runs: pd.DataFrame, learner: str | None = "newest") -> pd.DataFrame:
    """Predicted time to solve against nworld: per sweep point (gpu, learner, body, nworld; the
    newest row, `latest_sweep_rows`), the median iterations to solve of the train rows of the same
    body, learner and nworld (`iterations_to_solve`: any packing, commit and GPU) × the point's
    solo seconds per iteration (CPU-backend train rows left out: `warp_runs`). With ``learner="newest"`` (the default) only the points of the
    learner of the newest sweep row per (gpu, body) are kept, so a curve never mixes learners
    (Figure 2, `findings`, `auto_vs_sweep`); a learner id keeps that learner's; None keeps all.

        time_to_solve_s     = iterations_median × s_per_iter                      [s]
        time_to_solve_min_s = iterations_min × s_per_iter; _max_s likewise         [s]

    Args:
      sweep: ``sweep`` rows (`results.read_rows("sweep", root)`); runs: train rows
        (`report.published_runs(root)`).
    Returns:
      DataFrame, one row per sweep point: gpu, commit (the sweep row's), learner, body, nworld,
      s_per_iter, rollout_s_per_iter, update_s_per_iter, env_steps_per_s, n_runs, n_solved,
      seeds, commits (the train rows'), iterations_median / _min / _max, packed,
      time_to_solve_s / _min_s / _max_s (NaN where no train row of that point solved).
    """
    pts = latest_sweep_rows(sweep)
    if not pts.empty and learner == "newest":
        newest = pts.sort_values("time", kind="stable").groupby(["gpu", "body"])["learner"].last()
        pts = pts[[newest[(g, b)] == lrn for g, b, lrn in zip(pts["gpu"], pts["body"], pts["learner"])]]
    elif not pts.empty and learner is not None:
        pts = pts[pts["learner"] == learner]
    keep = ["gpu", "commit", "learner", "body", "nworld", "s_per_iter", "rollout_s_per_iter",
            "update_s_per_iter", "env_steps_per_s"]
    pts = pts[keep].reset_index(drop=True) if not pts.empty else pd.DataFrame(columns=keep)
    its = iterations_to_solve(runs)
    out = pts.merge(its, on=["body", "learner", "nworld"], how="left")
    out["n_runs"] = out["n_runs"].fillna(0).astype(int)
    out["n_solved"] = out["n_solved"].fillna(0).astype(int)
    for suffix, col in (("", "iterations_median"), ("_min", "iterations_min"), ("_max", "iterations_max")):
        out[f"time_to_solve{suffix}_s"] = pd.to_numeric(out[col], errors="coerce") * out["s_per_iter"].astype(float)
    return out


#: columns of the printed summary (`summary_lines`), a terminal's width
SUMMARY_WIDTH = 100


def summary_lines(table: pd.DataFrame, width: int = SUMMARY_WIDTH) -> list[str]:
    """`time_to_solve_table` as short lines (``sweep --summary``), at most ``width`` columns:
    per (gpu, body) a heading (the sweep row's commit and learner), one line per world count
    (solo seconds per iteration, env steps/s, runs solved of run, iterations to solve median and
    min–max, the estimated time to solve, iterations × the solo seconds per iteration, median and
    min–max, the packings), and the train rows' commits."""
    import textwrap

    def num(x, fmt):
        return "-" if pd.isna(x) else format(float(x), fmt)

    def span(med, lo, hi, fmt):
        return "-" if pd.isna(med) else f"{num(med, fmt)} ({num(lo, fmt)}–{num(hi, fmt)})"

    lines = []
    for (gpu, body), rows in table.groupby(["gpu", "body"], sort=False):
        heads = ", ".join(dict.fromkeys(f"sweep commit {c}, learner {lrn}"
                                        for c, lrn in zip(rows["commit"], rows["learner"])))
        lines += textwrap.wrap(f"{body} on {gpu} ({heads})", width)
        lines.append(f"{'nworld':>7} {'s/iter':>7} {'env steps/s':>11} {'solved':>7}  "
                     f"{'iterations (min–max)':<22} {'est. solve s (min–max)':<26} packed")
        for r in rows.itertuples():
            line = (f"{int(r.nworld):>7} {num(r.s_per_iter, '.4f'):>7} {num(r.env_steps_per_s, ',.0f'):>11} "
                    f"{f'{r.n_solved}/{r.n_runs}':>7}  "
                    f"{span(r.iterations_median, r.iterations_min, r.iterations_max, 'g'):<22} "
                    f"{span(r.time_to_solve_s, r.time_to_solve_min_s, r.time_to_solve_max_s, '.1f'):<26} "
                    f"{'-' if pd.isna(r.packed) else r.packed}")
            lines.append(line.rstrip()[:width])
        commits = ", ".join(dict.fromkeys(c for cs in rows["commits"].dropna() for c in str(cs).split(",") if c))
        lines += textwrap.wrap(f"train rows of commits: {commits or '-'}", width, subsequent_indent="  ")
        lines.append("")
    return lines


def packing_check(runs: pd.DataFrame) -> pd.DataFrame:
    """Points run both solo and packed (MuJoCo Warp train rows of the same body, nworld, seed,
    commit, learner, solved both ways): iterations of each, and their difference. Packing should change wall time only.

    Returns a DataFrame: body, nworld, seed, commit, iterations_solo, iterations_packed,
    concurrent (the packed run's K), iterations_diff (packed − solo)."""
    from fightlab.measure.report import learner_id

    cols = ["body", "nworld", "seed", "commit", "iterations_solo", "iterations_packed", "concurrent",
            "iterations_diff"]
    runs = warp_runs(runs)
    if runs.empty:
        return pd.DataFrame(columns=cols)
    runs = runs[runs["solved"] == True]  # noqa: E712
    runs = runs.assign(learner=[learner_id(p) for p in _params(runs)])
    out = []
    for (body, nworld, seed, commit, _), g in runs.groupby(["body", "nworld", "seed", "commit", "learner"]):
        solo, packed = g[g["concurrent"] == 1], g[g["concurrent"] > 1]
        if len(solo) and len(packed):
            a, b = int(solo["iterations"].iloc[-1]), int(packed["iterations"].iloc[-1])
            out.append(dict(body=body, nworld=int(nworld), seed=int(seed), commit=commit,
                            iterations_solo=a, iterations_packed=b,
                            concurrent=int(packed["concurrent"].iloc[-1]), iterations_diff=b - a))
    return pd.DataFrame(out, columns=cols)


def stage0_by_nworld(runs: pd.DataFrame, root: Path | str | None = None) -> pd.DataFrame:
    """Where the iterations go at each world count: per (body, learner, nworld), over the
    solved train rows of the task with curves (`report.run_stages`, packed runs included:
    packing changes wall time, not iterations), the first stage's iterations (a = 0.1, where the
    policy first learns to stand through pushes) and the later stages', and the first stage in
    world-iterations (nworld × its iterations: samples / num_steps), any commit.

    Returns:
      DataFrame body, learner, nworld, n, seeds (text), stage0_median / _min / _max, later_median
      (iterations of stages 1 …), iterations_median (total), stage0_world_iterations_median;
      sorted by body, learner, nworld. Empty (same columns) without such runs.
    """
    from fightlab.measure.report import run_stages

    cols = ["body", "learner", "nworld", "n", "seeds", "stage0_median", "stage0_min", "stage0_max",
            "later_median", "iterations_median", "stage0_world_iterations_median"]
    per_run = run_stages(warp_runs(runs), Path(root) if root else None)
    if per_run.empty:
        return pd.DataFrame(columns=cols)
    per_run["later"] = per_run["iterations"] - per_run["stage0"]
    out = []
    for (body, learner, nworld), g in per_run.groupby(["body", "learner", "nworld"], sort=True):
        out.append(dict(body=body, learner=learner, nworld=int(nworld), n=len(g),
                        seeds=",".join(str(x) for x in sorted(g["seed"])),
                        stage0_median=g["stage0"].median(), stage0_min=g["stage0"].min(),
                        stage0_max=g["stage0"].max(), later_median=g["later"].median(),
                        iterations_median=g["iterations"].median(),
                        stage0_world_iterations_median=float(nworld) * g["stage0"].median()))
    return pd.DataFrame(out, columns=cols)


#: the original study's iterations to solve, "about 350–500 on any machine" at any world count
#: (data/reference/original-study.md, "Task and solve criterion")
ORIGINAL_ITERATIONS = (350, 500)


def findings(table: pd.DataFrame, tolerance: float = AUTO_TOLERANCE) -> list[str]:
    """Lines a notebook prints about the curve (`time_to_solve_table`), per (gpu, body): the
    fastest measured point and its time (said as the only one when one world count has solves),
    against the original's point (1024 worlds); how
    iterations to solve change from the fewest to the most worlds with solves, each world count's
    median against the original's 350–500 at any count; and the world counts whose time to solve
    is within ``tolerance`` (a fraction) of the fastest (the flat bottom of the curve, the set
    `--nworld auto` chooses the fewest of). Empty without solved points."""
    def its(x) -> str:  # a median of an even count may end in .5: said as it is, not rounded
        return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"

    lines = []
    t = table.dropna(subset=["time_to_solve_s"])
    for (gpu, body), g in t.groupby(["gpu", "body"], sort=True):
        g = g.sort_values("nworld")
        best = g.loc[g["time_to_solve_s"].idxmin()]
        at = g[g["nworld"] == ORIGINAL_NWORLD]
        ref = (f"; at {ORIGINAL_NWORLD} worlds (the original's best, {ORIGINAL_GPU}) "
               f"{at['time_to_solve_s'].iloc[0]:.1f} s" if len(at) else "")
        where = (f"fastest solve at {int(best['nworld'])} worlds" if len(g) > 1 else
                 f"solved at {int(best['nworld'])} worlds only (no other world count to compare)")
        lines.append(f"{body} on {gpu}: {where}, "
                     f"{best['time_to_solve_s']:.1f} s = {its(best['iterations_median'])} iterations (median) × "
                     f"{best['s_per_iter']:.3f} s (the sweep's solo s/iteration){ref}")
        lo, hi = g.iloc[0], g.iloc[-1]
        if len(g) > 1:
            lines.append(f"{body} on {gpu}: iterations to solve {its(lo['iterations_median'])} at "
                         f"{int(lo['nworld'])} worlds, {its(hi['iterations_median'])} at {int(hi['nworld'])} "
                         f"({hi['iterations_median'] / lo['iterations_median']:.2f}×); seconds per "
                         f"iteration {lo['s_per_iter']:.3f} → {hi['s_per_iter']:.3f} s "
                         f"({hi['s_per_iter'] / lo['s_per_iter']:.2f}×)")
            a, b = ORIGINAL_ITERATIONS
            per = ", ".join(f"{int(r.nworld)}: {its(r.iterations_median)}" for r in g.itertuples())
            outside = [int(r.nworld) for r in g.itertuples() if not a <= r.iterations_median <= b]
            lines.append(f"{body} on {gpu}: median iterations to solve by nworld {per} (the original: "
                         f"{a}–{b} at any world count; outside that here: "
                         f"{', '.join(map(str, outside)) or 'none'})")
            within = g["time_to_solve_s"] <= best["time_to_solve_s"] * (1.0 + tolerance)
            flat = g[within]
            others = ", ".join(f"{int(r.nworld)}: +{r.time_to_solve_s / best['time_to_solve_s'] - 1:.1%}"
                               for r in g[~within].itertuples())
            lines.append(f"{body} on {gpu}: within {tolerance:.0%} of the fastest: "
                         f"{', '.join(str(int(n)) for n in flat['nworld'])} worlds; the others "
                         f"{others or 'none'}")
    return lines


# --- the --nworld auto rule --------------------------------------------------------------------

def known_iterations(runs: pd.DataFrame, body: str, learner: str) -> dict[int, float]:
    """{nworld: median iterations to solve} of the solved MuJoCo Warp train rows of the task for
    ``body`` and ``learner`` (`report.learner_id`; `warp_runs`), any commit and packing
    (iterations are the learner's and the curriculum's, not the code's)."""
    from fightlab.config import DEFAULT_TASK
    from fightlab.measure.report import learner_id

    runs = warp_runs(runs)
    if runs.empty:
        return {}
    lrn = [learner_id(p) for p in _params(runs)]
    r = runs[(runs["body"] == body) & (runs["solved"] == True)  # noqa: E712
             & (pd.Series(lrn, index=runs.index) == learner)]
    if "task" in r:
        r = r[r["task"] == DEFAULT_TASK]
    return {int(n): float(g["iterations"].median()) for n, g in r.groupby("nworld")}


def auto_nworld(cfg: TrainConfig, root: Path | str = REPO_ROOT, nworlds=RAMP_NWORLDS,
                iterations: int = RAMP_ITERATIONS, skip: int = RAMP_SKIP, allow_cpu: bool = False,
                progress: bool = False, log: Callable[[str], None] = print,
                point: Callable[..., dict] | None = None) -> tuple[int, dict]:
    """`--nworld auto` for a new training of ``cfg`` (its body, device and learner): the
    committed iterations to solve of that body and learner (``root``'s train rows,
    `known_iterations`), a ramp of short solo trainings at the ``nworlds`` inside their range
    (`time_point`, run folders under runs/sweep/ramp/), then `pick_nworld`. Prints the ramp table
    and the choice.

    Returns:
      (nworld, record): the record (for the row's params.nworld_auto) holds the rule, tolerance,
      ramp iterations / skip, the known iterations, the ramp table (nworld, s_per_iter,
      iterations, predicted_s) and the choice.
    Raises:
      ConfigError: a CPU device (unless ``allow_cpu``: tests), or what `pick_nworld` refuses —
        before any ramp when the committed data cannot support a choice.
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


def auto_vs_sweep(table: pd.DataFrame, tolerance: float = AUTO_TOLERANCE) -> pd.DataFrame:
    """The auto rule applied to the measured sweep itself, per (gpu, body): the sweep's s_per_iter
    as the ramp and its solved points' iterations as the known curve, against the measured
    best. Returns a DataFrame gpu, body, auto_nworld, auto_predicted_s, best_nworld,
    best_time_to_solve_s, note (the refusal's reason where the rule cannot choose)."""
    out = []
    for (gpu, body), g in table.groupby(["gpu", "body"], sort=True):
        known = dict(zip(g["nworld"], g["iterations_median"]))
        ramp = dict(zip(g["nworld"], g["s_per_iter"]))
        solved = g.dropna(subset=["time_to_solve_s"])
        best = solved.loc[solved["time_to_solve_s"].idxmin()] if len(solved) else None
        row = dict(gpu=gpu, body=body, auto_nworld=pd.NA, auto_predicted_s=math.nan,
                   best_nworld=int(best["nworld"]) if best is not None else pd.NA,
                   best_time_to_solve_s=float(best["time_to_solve_s"]) if best is not None else math.nan,
                   note="")
        try:
            n, t = pick_nworld(ramp, known, tolerance)
            row.update(auto_nworld=n, auto_predicted_s=float(t.loc[t["chosen"], "predicted_s"].iloc[0]))
        except ConfigError as e:
            row["note"] = str(e)
        out.append(row)
    return pd.DataFrame(out, columns=["gpu", "body", "auto_nworld", "auto_predicted_s", "best_nworld",
                                      "best_time_to_solve_s", "note"])


def auto_runs(sweep_rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The acceptance of `--nworld auto`: each MuJoCo Warp training at `--nworld auto`'s pick (a train row
    with params.nworld_auto) against the sweep's best point of its GPU, body and learner, computed
    without the auto runs (`time_to_solve_table` of ``sweep_rows`` and the other train rows, all
    of them as committed now: an auto run never judges itself, but a later solve can move the
    best point). The best point's spread is its solved seeds' iterations min … max × the
    sweep's solo s/iteration there. The run passes (``ok``) when it solved the default task, ran
    solo (concurrent 1: a packed time is not a time to solve) and its time to solve (the
    training's, the ramp's seconds not included) is at most that spread's top; faster than its
    bottom passes too.

    Returns:
      DataFrame, one row per auto run: run_id, gpu, body, commit, seed, auto_nworld, predicted_s
      (the ramp's prediction at the pick) [s], iterations, time_to_solve_s [s], concurrent,
      best_nworld, best_time_to_solve_s, best_min_s, best_max_s [s], verdict (text), ok (bool).
    """
    from fightlab.config import DEFAULT_TASK
    from fightlab.measure.report import learner_id, task_of

    cols = ["run_id", "gpu", "body", "commit", "seed", "auto_nworld", "predicted_s", "iterations",
            "time_to_solve_s", "concurrent", "best_nworld", "best_time_to_solve_s", "best_min_s",
            "best_max_s", "verdict", "ok"]
    runs = warp_runs(runs)
    if runs.empty:
        return pd.DataFrame(columns=cols)
    params = _params(runs)
    is_auto = pd.Series([isinstance(p.get("nworld_auto"), dict) for p in params], index=runs.index)
    table = time_to_solve_table(sweep_rows, runs[~is_auto], learner=None)
    out = []
    for (_, r), p in zip(runs.iterrows(), params):
        rec = p.get("nworld_auto")
        if not isinstance(rec, dict):
            continue
        chosen = [x for x in rec.get("ramp") or [] if isinstance(x, dict) and x.get("nworld") == rec.get("chosen")]
        conc = pd.to_numeric(pd.Series([r["concurrent"] if "concurrent" in r
                                        else results.packing_of(p, default_concurrent=math.nan)["concurrent"]]),
                             errors="coerce").iloc[0]
        t = pd.to_numeric(pd.Series([r.get("time_to_solve_s")]), errors="coerce").iloc[0]
        row = dict(run_id=r["run_id"], gpu=r["gpu"], body=r["body"], commit=r["commit"], seed=r["seed"],
                   auto_nworld=int(r["nworld"]),
                   predicted_s=float(chosen[0].get("predicted_s", math.nan)) if chosen else math.nan,
                   iterations=r["iterations"], time_to_solve_s=float(t), concurrent=conc,
                   best_nworld=pd.NA, best_time_to_solve_s=math.nan, best_min_s=math.nan,
                   best_max_s=math.nan, verdict="", ok=False)
        g = table[(table["gpu"] == r["gpu"]) & (table["body"] == r["body"])
                  & (table["learner"] == learner_id(p))].dropna(subset=["time_to_solve_s"])
        if g.empty:
            row["verdict"] = "no solved sweep point of this GPU, body and learner"
            out.append(row)
            continue
        b = g.loc[g["time_to_solve_s"].idxmin()]
        lo, hi = float(b["time_to_solve_min_s"]), float(b["time_to_solve_max_s"])
        row.update(best_nworld=int(b["nworld"]), best_time_to_solve_s=float(b["time_to_solve_s"]),
                   best_min_s=lo, best_max_s=hi)
        if task_of(p) != DEFAULT_TASK:
            row["verdict"] = f"another task ({task_of(p)}): not a solve of the task"
        elif r["solved"] != True:  # noqa: E712
            row["verdict"] = "not solved"
        elif t != t:
            row["verdict"] = "solved, but no time to solve recorded"
        elif conc != conc:
            row["verdict"] = "packing not recorded: not known to be a solo time to solve"
        elif conc != 1:
            row["verdict"] = f"packed (concurrent {conc:g}): not a solo time to solve"
        elif t < lo:
            row.update(verdict=f"faster than the best point's fastest seed ({lo:.1f} s)", ok=True)
        elif t <= hi:
            row.update(verdict=f"within the best point's spread ({lo:.1f}–{hi:.1f} s)", ok=True)
        else:
            row["verdict"] = f"slower than the best point's slowest seed ({hi:.1f} s): +{t / hi - 1:.1%}"
        out.append(row)
    return pd.DataFrame(out, columns=cols)


__all__ = ["SUMMARY_WIDTH", "summary_lines", "NWORLDS", "SOLVE_NWORLDS", "SOLVE_SEEDS", "ORIGINAL_NWORLD", "ORIGINAL_GPU", "RAMP_NWORLDS",
           "AUTO_TOLERANCE", "parse_nworld_list", "parse_seed_list", "time_point", "sweep_options",
           "sweep_id", "validate_sweep_id", "int_text", "read_state", "sweep_folder", "run_sweep", "solve_batch_argv", "command_line",
           "iterations_to_solve", "latest_sweep_rows", "time_to_solve_table", "packing_check", "stage0_by_nworld",
           "findings", "interp_iterations", "pick_nworld", "known_iterations", "auto_nworld",
           "auto_vs_sweep", "auto_runs", "warp_runs", "command"]


def command(*, summary: bool = False, solve: bool = False, run: bool = False, publish: bool = False,
            device: str | None = None, bodies=None, nworld_list: str | None = None, sweep_id: str | None = None,
            solve_nworld_list: str | None = None, seeds: str | None = None, concurrent: int = 4,
            max_iterations: int | None = None, iterations: int = 12, skip: int = 3, seed: int = 0,
            progress: bool = True, run_argv: Callable[[list[str]], int] | None = None,
            root: Path | None = None, log: Callable[[str], None] = print) -> int:
    """`python -m fightlab sweep`, its flags as given (None: not given): `summary` prints time to
    solve against nworld from `root`'s data/ (`time_to_solve_table`, `findings`); `solve` prints
    the solve trainings as a `fightlab batch` command (`solve_batch_argv`) and, with `run` on a
    GPU, hands it to `run_argv` (the command line's main); else the sweep itself (`run_sweep`),
    its table printed. `root`: the folder holding data/ (None: the repository's). Returns the exit code (130: interrupted, the finished points kept).

    Raises:
      ConfigError: one line naming the flag: a flag --summary does not take, --run without a GPU,
        the GPU-sized default world counts on the CPU, a bad list, id, device or publish.
    """
    import sys
    import textwrap

    from fightlab import devices, paths
    from fightlab.bodies import BODY_NAMES
    from fightlab.publish import check_publish

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
            log(textwrap.fill(line, SUMMARY_WIDTH, subsequent_indent="  "))
        return 0
    bodies = bodies or list(BODY_NAMES)
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
    nworlds = parse_nworld_list(list(NWORLDS) if nworld_list is None else nworld_list)
    device = devices.pick_device(device)
    if device == "cpu" and nworld_list is None:
        raise ConfigError(f"sweep on the CPU needs --nworld-list: the default list ("
                          f"{NWORLDS[0]} … {NWORLDS[-1]} worlds, {len(NWORLDS)} points "
                          "per body) is sized for a GPU; pass small counts, e.g. --nworld-list 4,8")
    check_publish(publish, device, "sweep rows")
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

