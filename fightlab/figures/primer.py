"""The GPU primer's figures (notebook 00): the vector sweep and the Mandelbrot images, drawn from
:mod:`fightlab.measure.primer`'s rows, curves and images."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plot_sweep", "plot_mandelbrot"]


#: primer sweep lines: colour = operation (numpy's copy/add/saxpy share Warp's colours), line
#: style = implementation (Warp on the CPU, Warp on a GPU, numpy)
_SWEEP_OPS = {"copy": "copy", "numpy_copy": "copy", "vec_add": "vec_add", "numpy_add": "vec_add",
              "saxpy": "saxpy", "numpy_saxpy": "saxpy", "empty_kernel": "empty_kernel"}


def _sweep_style(dev: str) -> tuple[str, str]:
    """(line style, legend text) of a sweep's device column: "cpu", "numpy" or a GPU."""
    if dev == "cpu":
        return "-", "Warp on the CPU"
    if dev == "numpy":
        return ":", "numpy (CPU)"
    return "--", f"Warp on {dev}"


def plot_sweep(df: pd.DataFrame, title: str | None = None):
    """Two panels: time per call [us] and effective bandwidth [GB/s] against elements, log-log.

    ``df``: :func:`fightlab.measure.primer.vector_sweep`'s rows (or a primer run's curve, ``data/curves/<run_id>.csv.gz``):
    needs ``device, op, n, median_s, gb_per_s``. ``title``: optional figure title. Colour is the
    operation and line style the implementation, each with its own legend (so a CPU and a GPU
    line of one operation never share a legend entry). Drawn under the house style
    (:func:`fightlab.figures.style.use_style`). Returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from fightlab.figures import style as plots

    with plots.use_style():
        fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(11, 4.0))
        colour = {"copy": plots.COLORS[0], "vec_add": plots.COLORS[1], "saxpy": plots.COLORS[2],
                  "empty_kernel": plots.COLORS[3]}
        ops, devs = {}, {}
        for (dev, op), g in df.groupby(["device", "op"], sort=False):
            g = g.sort_values("n")
            ls, dev_text = _sweep_style(dev)
            family = _SWEEP_OPS.get(op, op)
            c = colour.get(family, plots.COLORS[4])
            ops.setdefault(family, c)
            devs.setdefault(dev_text, ls)
            kw = dict(ls=ls, color=c, marker="o", ms=3, label=f"{op} ({dev})")
            ax_t.plot(g.n, g.median_s * 1e6, **kw)
            if op != "empty_kernel":
                ax_bw.plot(g.n, g.gb_per_s, **kw)
        for ax in (ax_t, ax_bw):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
        plots.label(ax_t, x="elements n [count]", y="median time per call [us]",
                    title="tiny n: launch-bound (flat); large n: bandwidth-bound")
        plots.label(ax_bw, x="elements n [count]", y="effective bandwidth [GB/s]",
                    title="bytes read + written / time")
        ax_t.legend([Line2D([], [], color=c, lw=2) for c in ops.values()],
                    [op.replace("_", " ") for op in ops], title="operation", fontsize=8,
                    title_fontsize=8, loc="upper left")
        ax_bw.legend([Line2D([], [], color="0.25", ls=ls, lw=1.5) for ls in devs.values()], list(devs),
                     title="implementation", fontsize=8, title_fontsize=8, loc="upper left",
                     handlelength=4)
        if title:
            fig.suptitle(title, fontsize=10)
        fig.tight_layout()
    return fig


def plot_mandelbrot(images: dict[str, np.ndarray]):
    """The images side by side (iteration count [count]) and, last, |GPU - numpy| where a GPU ran."""
    import matplotlib.pyplot as plt

    names = list(images)
    diff_of = next((n for n in names if "cuda" in n), None)
    ncol = len(names) + (diff_of is not None)
    fig, axes = plt.subplots(1, ncol, figsize=(4.2 * ncol, 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        im = ax.imshow(images[name], cmap="magma", interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel("column [px]")
        ax.set_ylabel("row [px]")
        fig.colorbar(im, ax=ax, label="iterations [count]", shrink=0.8)
    if diff_of is not None:
        ax = axes[0][-1]
        d = np.abs(images[diff_of].astype(np.int64) - images["numpy"])
        im = ax.imshow(d, cmap="gray_r", interpolation="nearest")
        ax.set_title(f"|{diff_of} - numpy|")
        ax.set_xlabel("column [px]")
        ax.set_ylabel("row [px]")
        fig.colorbar(im, ax=ax, label="difference [count]", shrink=0.8)
    for ax in axes[0]:
        ax.grid(False)
    fig.tight_layout()
    return fig
