"""An iteration's row and a run's ``rows.csv``.

A row holds the iteration's counters, rates and ratios of the env's summary, the curriculum
window's, the losses and the timing; every further summary field (one outside
`SUMMARY_INPUTS`) is a column of its own name, so what an env adds to its summary reaches
``rows.csv`` as it is. ``rows.csv`` takes a row per line; a row with other columns rewrites the
file with the union of both headers.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from fightlab.rl.curriculum import ratio
from fightlab.rl.ppo import STATS
from fightlab.rundir import atomic_write

#: summary fields that rows show only through a derived column (or not at all)
SUMMARY_INPUTS = frozenset({"falls", "timeouts", "overflow_worlds", "overflow_distinct_worlds",
                            "episode_s_sum", "return_sum", "track_num", "track_den",
                            "track_num_survived", "track_den_survived"})


def iteration_row(loop, summary: dict, stats, event: str, wall: float, rollout_s: float,
                  update_s: float, host_reads: int) -> dict:
    """The row of the iteration `loop` (a `fightlab.rl.loop.TrainLoop`) has just counted.

    Args:
      summary: the env's `read_summary` without "extra"; stats: the update's `STATS`, then the
        mean reward (the summary's extra values); event: the curriculum's; wall, rollout_s,
        update_s: seconds; host_reads: of the iteration.
    """
    cfg, cur, n = loop.cfg, loop.curriculum, summary["episodes"]
    n_env = cfg.nworld * cfg.ppo.num_steps
    # a widening clears the window: its row reports the window that passed
    ws = cur.widened_on if event == "widen" and cur.widened_on is not None else cur.window_stats()
    per_episode = lambda k: summary[k] / n if n else math.nan  # noqa: E731
    row = dict(
        iteration=loop.iteration, wall_s=wall, elapsed_s=loop.elapsed_s,
        env_steps=loop.iteration * n_env, env_steps_per_s=n_env / wall,
        physics_steps_per_s=n_env * loop.env.substeps / wall,
        amplitude=cur.amplitude if event != "widen" else cfg.curriculum_stages[cur.stage - 1],
        stage=cur.stage, event=event,
        episodes=n, fall_rate=per_episode("falls"), mean_episode_s=per_episode("episode_s_sum"),
        tracking=ratio(summary["track_num"], summary["track_den"]),
        tracking_survived=ratio(summary["track_num_survived"], summary["track_den_survived"]),
        window_fall_rate=ws["fall_rate"], window_tracking=ws["tracking"],
        window_tracking_survived=ws["tracking_survived"], window_episode_s=ws["mean_episode_s"],
        reward=float(stats[len(STATS)]), episode_return=per_episode("return_sum"),
        **{k: float(v) for k, v in zip(STATS, stats[:len(STATS)])},
        overflow_count=summary["overflow_worlds"], nefc_overflow=summary["nefc_overflow"],
        contact_overflow=summary["contact_overflow"], nan_resets=summary["nan_resets"],
        solver_iter_hits=summary["solver_iter_hits"], solver_ls_hits=summary["solver_ls_hits"],
        contact_falls=summary["contact_falls"], tilt_falls=summary["tilt_falls"],
        rollout_s=rollout_s, update_s=update_s, host_reads=host_reads,
        graph_fallbacks=loop.graph_fallbacks + loop.env.graph_fallbacks,
    )
    row.update((k, v) for k, v in summary.items() if k not in row and k not in SUMMARY_INPUTS)
    return row


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
    """Append one row to a run's rows.csv; a file written under other columns (rows of an older
    fightlab before a resume, or a row with a new summary field) is first rewritten with the union of both headers (old rows'
    new fields empty), so every line has the header's fields."""
    if path.exists() and path.stat().st_size:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != list(row):
            with open(path, newline="") as f:
                old = list(csv.DictReader(f))
            write_rows(path, _union_rows(header, old, row))
            return
    new = not path.exists() or not path.stat().st_size
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row), lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow(row)


def _union_rows(header: list[str], old: list[dict], row: dict) -> list[dict]:
    """`old` rows (read under `header`) and `row`, each with every field of both (empty where a
    row lacks one); the first row carries the field order: the old header, then row's new keys."""
    fields = list(dict.fromkeys([*header, *row]))
    return [{k: r.get(k, "") for k in fields} for r in [*old, row]]


