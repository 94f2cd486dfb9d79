"""Figure of packed trainings (`fightlab.measure.packing`): aggregate training iterations per
second of one GPU against K trainings at once, with and without CUDA MPS."""

from __future__ import annotations

import pandas as pd

from fightlab.figures import style as plots

__all__ = ["plot_packing"]


def plot_packing(df: pd.DataFrame, title: str = ""):
    """Aggregate iterations/s against K (``concurrent``), one line per (body, nworld, MPS), the
    newest row per point; the solo (K = 1) rate of the same body and nworld as a dotted line
    where there is one. Returns a matplotlib Figure."""
    import matplotlib.pyplot as plt

    df = df.sort_values("time").groupby(["body", "nworld", "concurrent", "mps"], sort=False).tail(1)
    with plots.use_style():
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for i, ((body, nworld, mps), g) in enumerate(df.groupby(["body", "nworld", "mps"], sort=True)):
            g = g.sort_values("concurrent")
            ax.plot(g["concurrent"], g["it_per_s_aggregate"], marker="o", color=plots.COLORS[i % len(plots.COLORS)],
                    label=f"{body} ×{nworld}, {'MPS' if mps else 'time-sliced'}")
        for (body, nworld), g in df[df["concurrent"] == 1].groupby(["body", "nworld"]):
            ax.axhline(g["it_per_s_aggregate"].iloc[-1], ls=":", color="0.5", lw=1)
        plots.label(ax, x="trainings at once on the GPU, K [count]",
                    y="training iterations per second, all K [1/s]")
        ax.legend(fontsize=8)
        if title:
            ax.set_title(title)
        fig.tight_layout()
    return fig
