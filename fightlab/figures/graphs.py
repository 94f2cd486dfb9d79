"""Figure of notebook 05 (`fightlab.measure.graphs`): seconds per training iteration with and
without each graph, split into rollout, update and the host's rest, one panel per body."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fightlab.figures import style as plots

__all__ = ["latest_rows", "plot_graphs"]


def latest_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The newest ``graphs`` row per (gpu, body, nworld, setting), in the order of
    `fightlab.measure.graphs.SETTINGS`."""
    import json

    from fightlab.measure.graphs import SETTINGS

    df = df.assign(setting=[json.loads(p).get("setting", "?") for p in df["params"]])
    df = df.sort_values("time").groupby(["gpu", "body", "nworld", "setting"], sort=False).tail(1)
    order = {s: i for i, s in enumerate(SETTINGS)}
    return df.assign(_o=df["setting"].map(order)).sort_values(["body", "nworld", "_o"]).drop(columns="_o")


def plot_graphs(df: pd.DataFrame, title: str = ""):
    """Stacked bars per graph setting: rollout, update and the rest of the iteration (host:
    summary, curriculum, row), seconds per iteration; one panel per (body, nworld), the
    non-physics share of the rollout step (measured directly where the row has it, and by
    subtraction) and the host reads written beside each bar. Returns a matplotlib Figure."""
    import matplotlib.pyplot as plt

    df = latest_rows(df)
    groups = list(df.groupby(["body", "nworld"], sort=False))
    with plots.use_style():
        fig, axes = plt.subplots(len(groups), 1, figsize=(9, 0.9 + 0.55 * len(df) + 0.5 * len(groups)),
                                 squeeze=False)
        for ax, ((body, nworld), g) in zip(axes[:, 0], groups):
            y = np.arange(len(g))
            roll = g["rollout_s_per_iter"].to_numpy(float)
            upd = g["update_s_per_iter"].to_numpy(float)
            rest = np.clip(g["s_per_iter"].to_numpy(float) - roll - upd, 0.0, None)
            left = np.zeros(len(g))
            for v, name, c in ((roll, "rollout", plots.COLORS[0]), (upd, "update", plots.COLORS[1]),
                               (rest, "host rest", "0.75")):
                ax.barh(y, np.nan_to_num(v), left=left, color=c, height=0.6, label=name)
                left += np.nan_to_num(v)
            # one bar far longer than the rest (no graph at all: ~8×) is cut at the axis, so the
            # graphed settings stay readable; its label says so
            tops = np.sort(left)
            xmax = 1.9 * max(tops[-1], 1e-9)
            if len(tops) > 1 and tops[-1] > 3 * tops[-2]:
                xmax = 2.6 * max(tops[-2], 1e-9)
            # the label gives the measured iteration (host wall clock); the bars its parts (CUDA
            # events), which can add up to a little more
            for yi, tot, sub, direct, reads in zip(y, g["s_per_iter"], g["non_physics_share"],
                                                   g["measured_non_physics_share"], g["host_reads_per_iter"]):
                share = (f"non-physics {direct:.0%} (by subtraction {sub:.0%})" if np.isfinite(direct)
                         else f"non-physics by subtraction {sub:.0%}")
                cut = left[yi] > xmax
                ax.text(0.42 * xmax if cut else left[yi], yi,
                        f"  {tot:.3f} s{' (bar cut)' if cut else ''} · {share} · reads {reads:g}",
                        va="center", fontsize=8, color="white" if cut else "0.25")
            ax.set_yticks(y, g["setting"].tolist())
            ax.invert_yaxis()
            ax.set_xlim(0, xmax)
            plots.label(ax, x="seconds per training iteration [s]", title=f"{body} ×{nworld}")
            ax.grid(axis="y", visible=False)
        axes[0, 0].legend(loc="lower right", fontsize=8)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    return fig
