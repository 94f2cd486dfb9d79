"""Figure of the Newton solve (`fightlab.measure.newton_study`, notebook 09): graph time per
physics step against the world count, MuJoCo Warp's solve beside fightlab's single launch, one
panel per body; drawn from ``newton`` rows with a graph time (GPU rows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pandas as pd

from fightlab.figures import style as plots

__all__ = ["timed_rows", "plot_newton_time", "draw_newton_time"]


def timed_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows the figure draws: MuJoCo Warp's solve and the default single launch (variant
    "all") with a graph time, the newest per (body, nworld, solve, GPU)."""
    variant = pd.Series([json.loads(p).get("variant") for p in df["params"]], index=df.index)
    ms = pd.to_numeric(df["graph_ms_per_step"], errors="coerce")
    df = df[variant.isin(["mujoco_warp", "all"]) & ms.notna()]
    df = df.assign(single_launch=df["single_launch"].astype(float).astype(bool))
    return df.sort_values("time", kind="stable").drop_duplicates(
        ["body", "nworld", "single_launch", "gpu"], keep="last").reset_index(drop=True)


def plot_newton_time(df: pd.DataFrame, title: str = ""):
    """Graph time per physics step [ms] (all worlds) against nworld, log-log, one panel per body:
    MuJoCo Warp's solve and the single launch (:func:`timed_rows` of ``df``). Returns the Figure,
    or None when no row has a graph time."""
    import matplotlib.pyplot as plt

    rows = timed_rows(df)
    if rows.empty:
        return None
    bodies = list(dict.fromkeys(rows.sort_values("body")["body"]))
    with plots.use_style():
        fig, axes = plt.subplots(1, len(bodies), figsize=(5.2 * len(bodies), 4.0), squeeze=False)
        for ax, body in zip(axes[0], bodies):
            for i, (single, name) in enumerate(((False, "MuJoCo Warp's solve (38 launches)"),
                                                (True, "single-launch solve"))):
                g = rows[(rows["body"] == body) & (rows["single_launch"] == single)].sort_values("nworld")
                if not g.empty:
                    ax.plot(g["nworld"], g["graph_ms_per_step"], marker="o", color=plots.COLORS[i], label=name)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            plots.label(ax, x="worlds [count]", y="graph time per physics step [ms]", title=body)
            ax.legend(fontsize=8)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    return fig


def draw_newton_time(root: Path, log: Callable[[str], None], rows: Callable, save_per_gpu: Callable) -> list[Path]:
    """`python -m fightlab figures`' drawer of ``newton_time`` (``rows``, ``save_per_gpu``: the
    package's own helpers, handed in): one figure per GPU; skipped with a line without timed rows."""
    df = rows("newton", root, "newton_time", log)

    def plot(gpu, g, name):
        fig = plot_newton_time(g, title=f"the Newton solve, {gpu}")
        if fig is None:
            log(f"figures: skip {name}: no newton row of {gpu} has a graph time (GPU rows only)")
        return fig

    return save_per_gpu(df, "newton_time", plot, root, log)
