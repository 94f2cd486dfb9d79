"""An iteration's row and a run's ``rows.csv``.

A row holds the learner's columns (losses, timing) and the task's (its iteration statistics:
whatever the task's `end_iteration` puts in extras["episode"] reaches ``rows.csv`` as it is).
``rows.csv`` takes a row per line; a row with other columns rewrites the file with the union of
both headers.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from fightlab.rl.ppo import STATS
from fightlab.rundir import atomic_write


def iteration_row(loop, episode: dict, stats, wall: float, rollout_s: float, update_s: float,
                  host_reads: int) -> dict:
    """The row of the iteration `loop` (a `fightlab.rl.loop.TrainLoop`) has just counted: the
    learner's columns (iteration, wall clock, env and physics steps per s, the mean reward, the
    update's `STATS`, the rollout / update split, host reads, graph fallbacks) and the task's
    (``episode``: `VecEnv.end_iteration`'s extras["episode"], every entry a column as it is).

    Args:
      stats: the update's `STATS`, then the mean reward (the learner's values of the read);
      wall, rollout_s, update_s: seconds; host_reads: of the iteration.
    """
    return learner_row(loop, episode, float(stats[len(STATS)]),
                       {k: float(v) for k, v in zip(STATS, stats[:len(STATS)])}, wall, rollout_s, update_s,
                       host_reads)


def learner_row(loop, episode: dict, reward: float, values: dict, wall: float, rollout_s: float,
                update_s: float, host_reads: int) -> dict:
    """`iteration_row` for any learner: ``reward`` (the rollout's mean reward) and ``values`` (the
    learner's own columns, name → number) in place of fightlab's `STATS`."""
    env = loop.env
    n_env = env.num_envs * loop.cfg.ppo.num_steps
    return dict(iteration=loop.iteration, wall_s=wall, elapsed_s=loop.elapsed_s,
                env_steps=loop.iteration * n_env, env_steps_per_s=n_env / wall,
                physics_steps_per_s=n_env * env.substeps / wall, **episode, reward=reward, **values,
                rollout_s=rollout_s, update_s=update_s, host_reads=host_reads,
                graph_fallbacks=loop.graph_fallbacks + env.graph_fallbacks)


def _rows_text(rows: list[dict]) -> str:
    """rows.csv's text for `rows` (the union of their fields, in order of appearance)."""
    fields = list(dict.fromkeys(k for r in rows for k in r))  # rows of another version too
    f = io.StringIO(newline="")
    w = csv.DictWriter(f, fieldnames=fields, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return f.getvalue()


def write_rows(path: Path, rows: list[dict]) -> None:
    """Write a run's rows.csv from its rows (atomically: `fightlab.rundir.atomic_write`)."""
    atomic_write(path, _rows_text(rows))


def rebuild_note(path: Path, rows: list[dict]) -> str | None:
    """The one line a resume prints when rewriting ``path`` (rows.csv) from its checkpoint's
    ``rows`` changes the file (missing, rows past the checkpoint, damaged or edited), naming
    the file and why; None when the file already holds exactly those rows."""
    text, n = _rows_text(rows), len(rows)
    if not path.exists():
        why = "was missing"
    else:
        old = path.read_bytes().decode("utf-8", errors="replace")
        if old == text:
            return None
        why = (f"held {old.count(chr(10)) - text.count(chr(10))} row(s) past the checkpoint "
               "(a segment that stopped before its next checkpoint)" if old.startswith(text)
               else "differed from the checkpoint's rows (damaged, torn or edited by hand)")
    return f"resume: {path} {why}: rebuilt from the checkpoint's {n} rows"


def truncate_rows(path: Path, n: int) -> None:
    """Keep the header and rows 1..n of a run's rows.csv (atomically): whole rows only, in
    iteration order, so rows of a killed segment past its checkpoint and a torn last line go."""
    with open(path, newline="") as f:
        recs = list(csv.reader(f))
    if not recs:
        return
    header, keep = recs[0], [recs[0]]
    col = header.index("iteration") if "iteration" in header else 0
    for rec in recs[1:]:
        if len(keep) > n or len(rec) != len(header) or rec[col] != str(len(keep)):
            break
        keep.append(rec)
    f = io.StringIO(newline="")
    csv.writer(f, lineterminator="\n").writerows(keep)
    atomic_write(path, f.getvalue())


def append_row(path: Path, row: dict):
    """Append one row to a run's rows.csv; a file written under other columns (an older
    fightlab's rows before a resume, or a row with a new summary field) is first rewritten with
    the union of both headers (the old header's order, then the row's new keys; fields a row
    lacks empty), so every line has the header's fields."""
    new = not path.exists() or not path.stat().st_size
    if not new:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != list(row):
            with open(path, newline="") as f:
                old = list(csv.DictReader(f))
            fields = list(dict.fromkeys([*header, *row]))
            write_rows(path, [{k: r.get(k, "") for k in fields} for r in [*old, row]])
            return
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row), lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow(row)
