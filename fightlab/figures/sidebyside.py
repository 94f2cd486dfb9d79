"""Figure `learners_side_by_side` (notebook 08): fightlab's learner beside rsl_rl's per body, from
the committed rows only. Top: each run's time to solve (`measure.sidebyside`: train rows of the
side-by-side study; an unsolved run marked at its budget); bottom: seconds per iteration,
rollout and update stacked. Without side-by-side trainings yet, the seconds per iteration of
data/results/learner_speed.csv alone (said in the title and in one logged line)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import pandas as pd

from fightlab.figures import style as plots

__all__ = ["NAME", "draw_side_by_side", "figure_for", "plot_side_by_side"]

NAME = "learners_side_by_side"

_LEARNER_COLOR = {"fightlab": plots.COLORS[0], "rsl_rl": plots.COLORS[1]}


def _group_label(r) -> str:
    return f"{r.learner}\n{int(r.nworld)} worlds"


def _times(ax, runs: pd.DataFrame, table: pd.DataFrame) -> None:
    """Each run's time to solve at its group's x; unsolved runs at their budget (open triangle)."""
    for x, r in enumerate(table.itertuples()):
        g = runs[(runs["learner"] == r.learner) & (runs["learner_id"] == r.learner_id) & (runs["nworld"] == r.nworld)]
        c = _LEARNER_COLOR.get(r.learner, plots.COLORS[2])
        ok = g[g["run_solved"]]
        ax.scatter([x] * len(ok), ok["time_to_solve_s"], color=c, zorder=3,
                   label="solved run" if x == 0 else None)
        no = g[~g["run_solved"] & g["budget_s"].notna()]
        ax.scatter([x] * len(no), no["budget_s"], marker="^", facecolors="none", edgecolors=c, zorder=3,
                   label="unsolved: at its budget" if x == 0 else None)
        if math.isfinite(r.time_to_solve_s):
            ax.hlines(r.time_to_solve_s, x - 0.3, x + 0.3, color=c, lw=1.2)
    ax.set_xticks(range(len(table)), [f"{_group_label(r)}\n{r.solved}/{r.runs} solved" for r in table.itertuples()])
    ax.set_xlim(-0.6, len(table) - 0.4)
    ax.set_ylim(bottom=0)  # from zero: the ratio between groups is what the panel shows
    plots.label(ax, y="time to solve [s]")
    ax.legend(fontsize=8, loc="upper left")  # the fastest group sits first, low: room above it


def _speeds(ax, table: pd.DataFrame) -> None:
    """Seconds per iteration per group: rollout and update stacked, the rest of the iteration above."""
    x = range(len(table))
    roll, upd = table["rollout_s_per_iter"].to_numpy(float), table["update_s_per_iter"].to_numpy(float)
    rest = (table["s_per_iter"].to_numpy(float) - roll - upd).clip(min=0)
    ax.bar(x, roll, color=plots.COLORS[5], label="rollout")
    ax.bar(x, upd, bottom=roll, color=plots.COLORS[3], label="update")
    ax.bar(x, rest, bottom=roll + upd, color="0.8", label="rest of the iteration")
    ax.set_xticks(list(x), [_group_label(r) for r in table.itertuples()])
    plots.label(ax, y="seconds per iteration [s]")
    ax.legend(fontsize=8)


def plot_side_by_side(runs: pd.DataFrame, table: pd.DataFrame, title: str = ""):
    """Per body a column: time to solve of each run (``runs``: `measure.sidebyside.study_runs`)
    above seconds per iteration (``table``: its `side_by_side_table`, or `speed_table`).
    Without ``runs`` rows, the seconds per iteration only. Returns a matplotlib Figure."""
    import matplotlib.pyplot as plt

    bodies = sorted(set(table["body"]))
    top = not runs.empty
    with plots.use_style():
        fig, axes = plt.subplots(1 + top, len(bodies), figsize=(4.8 * len(bodies), 3.8 * (1 + top)), squeeze=False)
        for j, body in enumerate(bodies):
            t = table[table["body"] == body].sort_values(["learner", "nworld"]).reset_index(drop=True)
            if top:
                _times(axes[0, j], runs[runs["body"] == body], t)
                axes[0, j].set_title(body)
            _speeds(axes[-1, j], t)
            if not top:
                axes[-1, j].set_title(body)
        if title:
            fig.suptitle(title, fontsize=11)
        fig.tight_layout()
    return fig


def figure_for(train: pd.DataFrame, speed: pd.DataFrame, gpu: str):
    """The figure of card ``gpu`` from train rows (any; those of the side-by-side study count) and
    learner_speed rows, and a line saying what it was drawn from: (Figure or None, line)."""
    from fightlab.measure.sidebyside import side_by_side_table, speed_table, study_runs

    train = train[train["gpu"] == gpu] if len(train) else train
    speed = speed[speed["gpu"] == gpu] if len(speed) else speed
    runs = study_runs(train) if len(train) else pd.DataFrame(columns=["body"])
    if len(runs):
        return (plot_side_by_side(runs, side_by_side_table(train), title=f"fightlab beside rsl_rl, solo, {gpu}"),
                f"{len(runs)} side-by-side trainings on {gpu}")
    table = speed_table(speed)
    if not len(table):
        return None, f"no solo side-by-side training and no learner_speed study row on {gpu}"
    return (plot_side_by_side(runs, table, title="seconds per iteration (learner_speed.csv; no side-by-side "
                                                 f"trainings yet), {gpu}"),
            "no side-by-side training in data/results/train.csv yet: seconds per iteration from "
            "data/results/learner_speed.csv only")


def draw_side_by_side(root: Path, log: Callable[[str], None], rows: Callable, save: Callable,
                      slug: Callable) -> list[Path]:
    """The figure per card from ``root``'s train rows of the study and its learner_speed rows
    (``rows(experiment, root, name, log)``, ``save(fig, name, root, log)`` and ``slug(gpu)``:
    `fightlab.figures`' own); skipped, said in one line, where neither has a row."""
    from fightlab.measure.sidebyside import STUDY, study_cards

    quiet = lambda _: None  # noqa: E731
    empty = pd.DataFrame(columns=["gpu", "params"])
    train = rows("train", root, NAME, quiet)
    speed = rows("learner_speed", root, NAME, quiet)
    train, speed = (train if train is not None else empty), (speed if speed is not None else empty)
    gpus = list(dict.fromkeys([*study_cards(train), *speed["gpu"]]))
    if not gpus:
        log(f"figures: skip {NAME}: no side-by-side training (study {STUDY}) in data/results/train.csv and "
            "no data/results/learner_speed.csv row")
        return []
    paths = []
    for gpu in gpus:
        name = NAME if len(gpus) == 1 else f"{NAME}_{slug(gpu)}"
        fig, line = figure_for(train, speed, gpu)
        if fig is None:
            log(f"figures: skip {name}: {line}")
            continue
        if line.startswith("no "):
            log(f"figures: {name}: {line}")
        paths += save(fig, name, root, log)
    return paths
