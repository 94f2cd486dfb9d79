"""Figure 2 (`fightlab.measure.sweep`, notebook 04): time to solve and env steps/s against the
number of worlds, both bodies, with the original study's point (1024 worlds, RTX 5090)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fightlab.figures import style as plots

__all__ = ["NOTE", "figure2_title", "plot_world_sweep"]

#: what the left panel's times are, written on the figure
NOTE = ("time to solve = median iterations to solve (trainings to the solve criterion, any packing) "
        "× solo seconds per iteration (short solo runs); bars: min–max iterations")


def figure2_title(table: pd.DataFrame, gpu: str) -> str:
    """Figure 2's title for ``table`` (`measure.sweep.time_to_solve_table` of one GPU): the card
    and the Newton solve(s) its points ran (``solve`` column)."""
    solves = " / ".join(dict.fromkeys(table["solve"]))
    return f"Figure 2: the world-count sweep, {gpu}" + (f", {solves} solve" if solves else "")


def plot_world_sweep(table: pd.DataFrame, title: str = ""):
    """Two panels against nworld (log2 axis), one line per body: time to solve [s]
    (``time_to_solve_s`` with min–max bars; points without solved trainings are left out and
    said so; the fastest world count marked when more than one has solves) and env steps/s; the original study's times to solve at its best world count
    (`measure.report.ORIGINAL_STUDY_S`, `measure.sweep.ORIGINAL_NWORLD`) marked for reference.

    Args:
      table: `fightlab.measure.sweep.time_to_solve_table` of one GPU.
    Returns:
      a matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    from fightlab.measure.report import ORIGINAL_STUDY_S
    from fightlab.measure.sweep import ORIGINAL_GPU, ORIGINAL_NWORLD

    with plots.use_style():
        fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(11, 4.4))
        empty = []
        for i, (body, g) in enumerate(table.sort_values("nworld").groupby("body", sort=True)):
            c = plots.COLORS[i % len(plots.COLORS)]
            ax_s.plot(g["nworld"], g["env_steps_per_s"], marker="o", color=c, label=body)
            t = g.dropna(subset=["time_to_solve_s"])
            if len(t):
                err = np.vstack([t["time_to_solve_s"] - t["time_to_solve_min_s"],
                                 t["time_to_solve_max_s"] - t["time_to_solve_s"]]).clip(min=0)
                ax_t.errorbar(t["nworld"], t["time_to_solve_s"], yerr=err, marker="o", color=c,
                              capsize=3, label=f"{body} (this GPU)")
                best = t.loc[t["time_to_solve_s"].idxmin()]
                # "fastest" compares world counts: with one solved count there is nothing to compare
                mark = f"fastest: {int(best['nworld'])}" if len(t) > 1 else "the only world count solved"
                ax_t.annotate(mark, (best["nworld"], best["time_to_solve_s"]),
                              textcoords="offset points", xytext=(8, 6), ha="left", fontsize=8, color=c)
            else:
                empty.append(body)
            orig = ORIGINAL_STUDY_S.get(body, {}).get("rtx5090")
            if orig is not None:
                ax_t.plot([ORIGINAL_NWORLD], [orig], marker="*", ms=12, ls="none", mfc="none", color=c,
                          label=f"{body}, original study ({ORIGINAL_GPU}, own bodies)")
        ticks = sorted(set(int(n) for n in table["nworld"]) | {ORIGINAL_NWORLD})
        for ax in (ax_t, ax_s):
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [str(n) for n in ticks], fontsize=8)
            ax.minorticks_off()
            ax.axvline(ORIGINAL_NWORLD, color="0.8", lw=1, ls=":", zorder=0)
        if empty:
            ax_t.text(0.02, 0.02, f"no solved trainings yet: {', '.join(empty)}", transform=ax_t.transAxes,
                      fontsize=8, color="0.4")
        plots.label(ax_t, x="worlds, nworld [count]", y="time to solve [s]", title="time to solve")
        plots.label(ax_s, x="worlds, nworld [count]", y="env steps per second [1/s]",
                    title="throughput, short solo runs")
        # room above the highest point or star for the legend, so it hides neither
        tops = [ln.get_ydata() for ln in ax_t.get_lines() if len(ln.get_ydata())]
        if tops:
            ax_t.set_ylim(0, 1.45 * float(np.nanmax(np.concatenate([np.asarray(y, float) for y in tops]))))
        ax_t.legend(fontsize=7, loc="upper right")
        ax_s.legend(fontsize=8)
        if title:
            fig.suptitle(title)
        fig.text(0.01, 0.01, NOTE, fontsize=7.5, color="0.3", ha="left", va="bottom")
        fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
