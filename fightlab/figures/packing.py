"""Figure of packed trainings (`fightlab.measure.packing`): aggregate training iterations per
second of one GPU against K trainings at once, with and without CUDA MPS; beside it, where rows
of several GPUs exist, the aggregate of all GPUs against the GPU count."""

from __future__ import annotations

import pandas as pd

from fightlab.figures import style as plots

__all__ = ["plot_packing", "gpu_count"]


def gpu_count(df: pd.DataFrame) -> pd.Series:
    """Each row's GPU count: its ``gpus`` column, 1 where empty (rows from before it was
    recorded ran on one GPU) or absent."""
    if "gpus" not in df:
        return pd.Series(1, index=df.index)
    return pd.to_numeric(df["gpus"], errors="coerce").fillna(1).astype(int)


def plot_packing(df: pd.DataFrame, title: str = ""):
    """Aggregate iterations/s against K (``concurrent``), one line per (body, nworld, MPS), the
    newest one-GPU row per point; the solo (K = 1) rate of the same body and nworld as a dotted
    line where there is one. With rows of more than one GPU, a second panel: the aggregate of all
    GPUs against the GPU count per (body, nworld, K, MPS), the one-GPU point × N dashed (linear
    scaling) and × 0.9 N dotted (the goal). Returns a matplotlib Figure."""
    import matplotlib.pyplot as plt

    df = df.assign(gpus=gpu_count(df))
    multi = df[df["gpus"] > 1]
    df = df[df["gpus"] == 1]
    one = df.sort_values("time").groupby(["body", "nworld", "concurrent", "mps"], sort=False).tail(1)
    with plots.use_style():
        if multi.empty:
            fig, ax = plt.subplots(figsize=(7, 4.2))
        else:
            fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
            _plot_gpus(ax2, one, multi)
        for i, ((body, nworld, mps), g) in enumerate(one.groupby(["body", "nworld", "mps"], sort=True)):
            g = g.sort_values("concurrent")
            ax.plot(g["concurrent"], g["it_per_s_aggregate"], marker="o", color=plots.COLORS[i % len(plots.COLORS)],
                    label=f"{body} ×{nworld}, {'MPS' if mps else 'time-sliced'}")
        for (body, nworld), g in one[one["concurrent"] == 1].groupby(["body", "nworld"]):
            ax.axhline(g["it_per_s_aggregate"].iloc[-1], ls=":", color="0.5", lw=1)
        plots.label(ax, x="trainings at once on the GPU, K [count]",
                    y="training iterations per second, all K [1/s]")
        ax.legend(fontsize=8)
        if title:
            ax.set_title(title)
        fig.tight_layout()
    return fig


def _plot_gpus(ax, one: pd.DataFrame, multi: pd.DataFrame) -> None:
    """The GPU-count panel: per (body, nworld, K, MPS) the newest row per GPU count, joined to the
    one-GPU row of that key (its N × and 0.9 N × lines where there is one)."""
    rows = pd.concat([one, multi]).sort_values("time").groupby(
        ["body", "nworld", "concurrent", "mps", "gpus"], sort=False).tail(1)
    keys = multi[["body", "nworld", "concurrent", "mps"]].drop_duplicates().itertuples(index=False)
    for i, (body, nworld, k, mps) in enumerate(sorted(keys)):
        g = rows[(rows["body"] == body) & (rows["nworld"] == nworld) & (rows["concurrent"] == k)
                 & (rows["mps"] == mps)].sort_values("gpus")
        color = plots.COLORS[i % len(plots.COLORS)]
        ax.plot(g["gpus"], g["it_per_s_aggregate"], marker="o", color=color,
                label=f"{body} ×{nworld}, K={int(k)}{' MPS' if mps else ''}")
        base = g[g["gpus"] == 1]["it_per_s_aggregate"]
        if len(base):
            n = pd.Series(range(1, int(g["gpus"].max()) + 1))
            ax.plot(n, n * base.iloc[0], ls="--", color=color, lw=1)
            ax.plot(n, 0.9 * n * base.iloc[0], ls=":", color=color, lw=1)
    plots.label(ax, x="GPUs [count]", y="training iterations per second, all GPUs [1/s]")
    ax.legend(fontsize=8, title="dashed: N × one GPU; dotted: 0.9 N ×", title_fontsize=8)
