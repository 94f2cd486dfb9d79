"""House style for figures and one way to save them: ``figures/<name>.png`` and ``.svg``.

    from fightlab.figures import style as plots
    plots.use_style()                                 # for the rest of the session, or
    with plots.use_style():                           # only inside the block
        fig, ax = plt.subplots()
        ax.plot(t, r)
        plots.label(ax, x="wall time [s]", y="mean reward [-]")
        plots.savefig(fig, "figure2_world_sweep", root)   # -> [png, svg]

Colours: the Okabe-Ito palette (distinguishable with colour-vision deficiencies).
Source: M. Okabe & K. Ito, "Color Universal Design" (2002).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib as mpl
from cycler import cycler

from fightlab.rundir import atomic_path

__all__ = ["COLORS", "STYLE", "use_style", "label", "savefig"]

#: Okabe-Ito colours, in cycle order
COLORS: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)

#: matplotlib rcParams of the house style
STYLE: dict[str, Any] = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.frameon": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linestyle": "-",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=list(COLORS)),
    "lines.linewidth": 1.8,
    "svg.fonttype": "none",  # text stays text in SVG
    "svg.hashsalt": "fightlab",  # stable ids: re-saving an unchanged figure gives the same SVG
}


class _Style:
    """Applies :data:`STYLE` at once; as a context manager restores the keys it changed."""

    def __init__(self, **overrides: Any):
        new = {**STYLE, **overrides}
        self._saved = {k: mpl.rcParams[k] for k in new}
        mpl.rcParams.update(new)

    def __enter__(self) -> "_Style":
        return self

    def __exit__(self, *exc: Any) -> None:
        mpl.rcParams.update(self._saved)


def use_style(**overrides: Any) -> _Style:
    """Apply the house style now (``rcParams`` overrides win); as ``with use_style():`` undo it after
    (the returned context manager; ignoring it keeps the style for the rest of the session)."""
    return _Style(**overrides)


_UNIT = re.compile(r"\[[^\]]+\]")


def label(ax: Any, x: str | None = None, y: str | None = None, title: str | None = None,
          *, require_units: bool = True) -> Any:
    """Set axis labels (and title) on ``ax``; returns ``ax``. Labels name a unit in brackets:
    ``"wall time [s]"``, ``"env steps per second [1/s]"``, ``[-]`` for a dimensionless quantity,
    ``[count]`` for counts. Raises ValueError naming a label without ``[unit]`` while
    ``require_units``."""
    for axis, text, set_label in (("x", x, ax.set_xlabel), ("y", y, ax.set_ylabel)):
        if text is None:
            continue
        if require_units and not _UNIT.search(text):
            raise ValueError(f"{axis} label {text!r} has no unit: write it as 'quantity [unit]' "
                             "('[-]' for dimensionless, '[count]' for counts)")
        set_label(text)
    if title is not None:
        ax.set_title(title)
    return ax


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def savefig(fig: Any, name: str, root: Path | str, *, formats: tuple[str, ...] = ("png", "svg"),
            **kwargs: Any) -> list[Path]:
    """Save ``fig`` as ``root/figures/<name>.<fmt>`` per ``formats`` (creating ``figures/``); returns
    the written paths in ``formats`` order. Each file is written to ``<name>.<fmt>.tmp`` and
    renamed (`fightlab.rundir.atomic_path`).

    Args:
        name: file stem, letters/digits/``_.-`` without a suffix (e.g. ``"figure1_bodies"``).
        root: repository root (``fightlab.paths.REPO_ROOT``), or a run folder for smoke runs
            (``runs/<...>``); no default, so nothing lands under the current directory unasked.
        **kwargs: passed to ``Figure.savefig`` (dpi, bbox_inches ...).

    Raises:
        ValueError: ``name`` has a suffix (``.png``/``.svg``), a path separator or is empty;
        OSError: one line naming the file that could not be written (a full disk), its
            temporary removed.
    """
    if not isinstance(name, str) or not _NAME.match(name) or Path(name).suffix.lower() in (".png", ".svg", ".pdf"):
        raise ValueError(f"figure name must be a plain stem like 'figure1_bodies' (no folder, no "
                         f".png/.svg), got {name!r}")
    out = Path(root) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    # saved under the house style whatever the caller's rcParams (dpi, crop, svg ids and text):
    # the same figure gives the same files however and wherever it is drawn
    with use_style():
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            meta = {"Date": None} if fmt == "svg" else {"Software": None} if fmt == "png" else None
            with atomic_path(path) as tmp:  # a kill or a full disk leaves the old file, never a torn one
                fig.savefig(tmp, format=fmt, metadata=meta, **kwargs)
            paths.append(path)
    return paths
