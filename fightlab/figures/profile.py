"""Figure of the per-kernel profile (notebook 02): kernel time and launches per physics step,
stacked by stage, drawn from ``profile`` rows (:mod:`fightlab.measure.profile`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fightlab.figures import style as plots
from fightlab.measure.profile import STAGES, factor_table, stage_slug

__all__ = ["plot_stages"]


def plot_stages(df: pd.DataFrame, title: str = ""):
    """Stage chart from profile rows: kernel ms per physics step (stacked by stage) and launches
    per physics step (stacked by stage), one bar per (body, nworld). Untimed (CPU) rows leave the
    time panel empty with a note. Returns a matplotlib Figure."""
    import matplotlib.pyplot as plt

    # each bar names the mass-matrix factor path it ran (stock sparse per-level, dense tile, or
    # fightlab's single-launch tree kernel, which training uses for muscular-fast)
    paths = factor_table(df)["factor_path"].tolist() if "params" in df else [""] * len(df)
    labels = [f"{b} ×{n}" + (f" [{p}]" if p else "") for b, n, p in zip(df["body"], df["nworld"], paths)]
    y = np.arange(len(df))
    with plots.use_style():
        fig, axes = plt.subplots(1, 2, figsize=(12, 1.2 + 0.6 * max(1, len(df))), sharey=True)
        colors = plt.get_cmap("tab20").colors
        for ax, kind, xlabel in ((axes[0], "ms", "kernel time per physics step [ms]"),
                                 (axes[1], "launches", "kernel launches per physics step [count]")):
            left = np.zeros(len(df))
            for i, s in enumerate(STAGES):
                v = df[f"{stage_slug(s)}_{kind}_per_step"].to_numpy(dtype=float)
                v = np.nan_to_num(v)
                ax.barh(y, v, left=left, color=colors[i % len(colors)], label=s, height=0.6)
                left += v
            plots.label(ax, x=xlabel)
            ax.grid(axis="y", visible=False)
        if not np.isfinite(df["kernel_ms_per_step"].to_numpy(dtype=float)).any():
            axes[0].text(0.5, 0.5, "no kernel timing\n(CPU run)", transform=axes[0].transAxes,
                         ha="center", va="center", color="0.4")
        axes[0].set_yticks(y, labels)
        axes[0].invert_yaxis()
        axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    return fig
