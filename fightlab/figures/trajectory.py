"""Figure of the factor kernel's trajectories (notebook 03, ``factor_trajectory``): joint-angle
deviation from the stock run, the single launch beside a one-ulp start (re-exported by
:mod:`fightlab.figures`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pandas loads on first use: the CLI parser imports fightlab.figures
    import pandas as pd

__all__ = ["DEV_FLOOR_RAD", "TRAJECTORY_LINES", "plot_factor_trajectory"]

#: smallest deviation drawn on the log axis [rad] (exact agreement would be log(0))
DEV_FLOOR_RAD = 1e-12


#: factor_trajectory's lines: (curve column, what it compares, line style)
TRAJECTORY_LINES: tuple[tuple[str, str, str], ...] = (
    ("dev_tree_rad", "pushed: single launch vs stock", "-"),
    ("dev_ulp_rad", "pushed: stock, 1-ulp start", "--"),
    ("dev_quiet_tree_rad", "quiet: single launch vs stock", "-"),
    ("dev_quiet_ulp_rad", "quiet: stock, 1-ulp start", "--"),
)


def plot_factor_trajectory(rows_with_curves: Iterable[tuple[pd.Series, pd.DataFrame]]):
    """Maximum joint-angle deviation from the stock run against simulated time, log scale: per
    (row, curve) pair (:func:`fightlab.figures.factor_curves`) the pushed and the quiet comparisons, each with the
    stock run started one float32 ulp away (the rounding scale the kernel must not exceed).
    Columns missing from a curve (older curves without the quiet run) are not drawn. Returns the
    Figure (a note instead of lines when there is no pair)."""
    import matplotlib.pyplot as plt

    from fightlab.figures import style as plots

    pairs = list(rows_with_curves)
    with plots.use_style():
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for row, c in pairs:
            for col, what, ls in TRAJECTORY_LINES:
                if col in c:
                    ax.semilogy(c["time_s"], c[col].clip(lower=DEV_FLOOR_RAD), ls,
                                label=f"{row['body']}, {what}")
        if pairs:
            ax.legend(fontsize=9)
            gpus = ", ".join(dict.fromkeys(str(r["gpu"]) for r, _ in pairs))
            title = f"trajectory deviation from stock, {gpus}"
        else:
            ax.text(0.5, 0.5, "no trajectory rows", transform=ax.transAxes, ha="center",
                    va="center", color="0.4")
            title = None
        plots.label(ax, x="simulated time [s]", y="max joint-angle deviation [rad]", title=title)
        fig.tight_layout()
    return fig
