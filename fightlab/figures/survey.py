"""Figure 3: cost per solve against time to solve, every machine of the survey (notebook 07).

    from fightlab.figures import survey as survey_figures
    fig = survey_figures.plot_survey(table, title="Figure 3 ...")   # table: survey.cost.survey_table

Colour: the body. Marker: where the row comes from — the original's vast.ai GPUs (circles), its
EC2 GPUs (squares), its EC2 CPU machines (crosses), fightlab's solo rows (stars), fightlab's
packed rows (plus signs), fightlab's bench estimates (triangles: ``python -m fightlab bench``
rows, ours and rented hosts', `fightlab.survey.cost.bench_rows`), fightlab's CPU-backend rows
(diamonds). Hollow: the time to solve was estimated, not measured. Both axes log. A bench
estimate of a GPU type and body that fightlab solved is not drawn (measured beats estimate).
"""

from __future__ import annotations

import re

import pandas as pd

__all__ = ["MARKERS", "figure3_title", "marker_of", "plot_survey"]

#: (origin, group / mode) -> (marker, legend text)
MARKERS: dict[str, tuple[str, str]] = {
    "vast.ai GPU": ("o", "original: vast.ai GPU"),
    "EC2 GPU": ("s", "original: EC2 GPU"),
    "EC2 CPU": ("X", "original: EC2 CPU (contrast)"),
    "fightlab solo": ("*", "fightlab, solo"),
    "fightlab packed": ("P", "fightlab, packed K per GPU"),
    "fightlab bench": ("^", "fightlab bench estimate (bench rows)"),
    "fightlab CPU": ("D", "fightlab CPU backend (contrast)"),
}


def marker_of(row) -> str:
    """The :data:`MARKERS` key of a survey row."""
    if row["origin"] == "reference":
        return row["group"]
    if row["time_source"] == "bench estimate":
        return "fightlab bench"
    if row["kind"] == "cpu":
        return "fightlab CPU"
    return "fightlab solo" if row["mode"] == "solo" else "fightlab packed"


def _short(row) -> str:
    name = row["gpu"] if isinstance(row["gpu"], str) and row["gpu"] else str(row["machine"]).split(",")[0]
    if row["origin"] != "reference" and row["mode"] != "solo":
        name += " " + re.sub(r", (\d+) worlds$", r" \1w", row["mode"].replace("packed ", ""))  # "x4 MPS 512w"
    if row["origin"] != "reference" and row["provider"] not in ("fightlab", row["origin"]):
        name += f" {row['provider']}"  # a rented host's bench row
    return name


def plot_survey(table: pd.DataFrame, title: str | None = None, note: str | None = None):
    """Cost per solve [$] against time to solve [s], log-log, one point per survey row
    (:func:`fightlab.survey.cost.survey_table`), each labelled with its GPU (or CPU instance),
    but for bench estimates that a measured solo solve of the same GPU type and body supersedes
    (:func:`fightlab.survey.cost.superseded`, as the buying guide: one GPU type is not drawn
    twice, an older code's estimate beside today's solve). ``note`` goes under the axes (e.g.
    the assumed price of fightlab's GPU). Returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from fightlab.figures import style as plots
    from fightlab.survey.cost import superseded

    table = table[~superseded(table)]

    def plain(text: str | None) -> str | None:  # "$" is text here, not mathtext
        return None if text is None else text.replace("$", r"\$")

    title, note = plain(title), plain(note)
    bodies = sorted(set(table["body"]))
    colors = {b: plots.COLORS[i % len(plots.COLORS)] for i, b in enumerate(bodies)}
    with plots.use_style():
        fig, ax = plt.subplots(figsize=(11.5, 6.0))
        kinds = []
        for _, r in table.iterrows():
            key = marker_of(r)
            kinds.append(key)
            m, _ = MARKERS[key]
            c = colors[r["body"]]
            size = 150 if m == "*" else 55
            est = bool(r["time_estimated"])
            ax.scatter([r["time_to_solve_s"]], [r["cost_per_solve_usd"]], marker=m, s=size,
                       facecolors="none" if est else c, edgecolors=c,
                       linewidths=1.4, alpha=0.9 if est else 1.0, zorder=3)
            ax.annotate(_short(r), (r["time_to_solve_s"], r["cost_per_solve_usd"]),
                        textcoords="offset points", xytext=(5, 3), fontsize=7, color="0.25")
        ax.set_xscale("log")
        ax.set_yscale("log")
        plots.label(ax, x="time to solve [s]", y="cost per solve [$]", title=title)
        body_handles = [Line2D([], [], ls="", marker="o", color=colors[b], label=b) for b in bodies]
        present = [k for k in MARKERS if k in kinds]
        kind_handles = [Line2D([], [], ls="", marker=MARKERS[k][0], color="0.3", markersize=8,
                               label=MARKERS[k][1]) for k in present]
        if table["time_estimated"].astype(bool).any():
            kind_handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="none", color="0.3",
                                       label="hollow: time estimated"))
        first = ax.legend(handles=body_handles, loc="upper left", fontsize=9, title="body")
        ax.add_artist(first)
        # beside the axes: inside, the markers' legend covered the slowest points
        ax.legend(handles=kind_handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  borderaxespad=0.0)
        if note:
            fig.text(0.01, 0.005, note, fontsize=7.5, color="0.3", ha="left", va="bottom", wrap=True)
            fig.tight_layout(rect=(0, 0.05 * (note.count("\n") + 1), 1, 1))
        else:
            fig.tight_layout()
    return fig


def figure3_title(ours, assumed: bool = True) -> str:
    """Figure 3's title: the question, and fightlab's own machines' prices (``ours``: the survey's
    rows of ours, `fightlab.survey.cost.load_survey`'s ``ours``; provider "fightlab", since a
    rented host's rows carry their offer's price), said to be an assumption when ``assumed``
    (the default price, as the committed figure has it)."""
    own = ours[ours["provider"] == "fightlab"]
    price = ", ".join(f"{g} ${p:.2f}/h" for g, p in dict.fromkeys(zip(own["gpu"], own["usd_per_h"]))
                      if isinstance(g, str)) if not own.empty else ""
    return "Figure 3: cost per solve against time to solve" + (
        f"\n(fightlab: {price}{', an assumed price' if assumed else ''})" if price else "")
