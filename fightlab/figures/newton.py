"""Figure of the Newton solve (`fightlab.measure.newton_study`, notebook 09): graph time per
physics step against the world count, MuJoCo Warp's solve beside fightlab's single launch, one
panel per body, from ``newton`` rows with a graph time; under it, where stage-clock rows exist,
the single launch's cycles per world's solve by stage for each kernel variant (GPU rows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pandas as pd

from fightlab.figures import style as plots
from fightlab.measure.newton_stages import NWARM_STANDING, variant_label

__all__ = ["timed_rows", "stage_rows", "variant_label", "plot_newton_time", "draw_newton_time"]


def timed_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows the figure draws: MuJoCo Warp's solve and the single launch as
    ``solver_loop=single_launch`` builds it (variant "default") with a graph time, the newest per
    (body, nworld, solve, GPU)."""
    variant = pd.Series([json.loads(p).get("variant") for p in df["params"]], index=df.index)
    ms = pd.to_numeric(df["graph_ms_per_step"], errors="coerce")
    df = df[variant.isin(["mujoco_warp", "default"]) & ms.notna()]
    df = df.assign(single_launch=df["single_launch"].astype(float).astype(bool))
    return df.sort_values("time", kind="stable").drop_duplicates(
        ["body", "nworld", "single_launch", "gpu"], keep="last").reset_index(drop=True)


#: stages of the stage clock drawn apart (the rest summed as "other")
_STAGE_GROUPS = {"LDLt": "LDLᵀ", "back solve": "LDLᵀ", "rank-1 update": "rank-1 update", "M.s J.s": "M·s, J·s",
                 "init": "init", "assemble M": "assemble H", "assemble JtDJ": "assemble H"}


def stage_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The GPU stage-clock rows (params ``stage_cycles`` in SM cycles; a CPU smoke's cycle counter
    is no measurement) of the standing state (``nwarm`` 10; the fallen state's rows, ``NWARM=300``,
    are notebook 09's table only), the newest per (body, nworld, variant, GPU),
    at each body's largest world count, with ``variant``, ``nfix`` (fixes built in) and one
    column per stage group (cycles per world's solve). A variant is named by its fixes where a
    row says "default" (the default build changes over time: :func:`variant_label`)."""
    params = [json.loads(p) for p in df["params"]]
    keep = [("stage_cycles" in p and p.get("cycles") == "SM cycles" and p.get("nwarm", NWARM_STANDING) == NWARM_STANDING) for p in params]
    if not any(keep):
        return pd.DataFrame()
    df = df[keep].assign(variant=[variant_label(p) for p, k in zip(params, keep) if k],
                         nfix=[len(p.get("fixes", [])) for p, k in zip(params, keep) if k],
                         cycles=[p["stage_cycles"] for p, k in zip(params, keep) if k])
    df = df.sort_values("time", kind="stable").drop_duplicates(["body", "nworld", "variant", "gpu"], keep="last")
    df = df[df["nworld"] == df.groupby("body")["nworld"].transform("max")]
    groups = list(dict.fromkeys([*_STAGE_GROUPS.values(), "other"]))
    sums = [{g: sum(v for s, v in c.items() if _STAGE_GROUPS.get(s, "other") == g) for g in groups}
            for c in df["cycles"]]
    return pd.concat([df.reset_index(drop=True), pd.DataFrame(sums)], axis=1).sort_values(["body", "nfix"])


def plot_newton_time(df: pd.DataFrame, title: str = ""):
    """Graph time per physics step [ms] (all worlds) against nworld, log-log, one panel per body:
    MuJoCo Warp's solve and the single launch (:func:`timed_rows` of ``df``); a row of panels
    under it with :func:`stage_rows`' cycles per world's solve by stage group for each kernel
    variant (stacked bars). Returns the Figure, or None when no row has either."""
    import matplotlib.pyplot as plt

    rows, stages = timed_rows(df), stage_rows(df)
    if rows.empty and stages.empty:
        return None
    bodies = sorted(set(rows.get("body", [])) | set(stages.get("body", [])))
    nrow = int(not rows.empty) + int(not stages.empty)
    with plots.use_style():
        fig, axes = plt.subplots(nrow, len(bodies), figsize=(5.6 * len(bodies), 4.0 * nrow), squeeze=False)
        if not stages.empty:
            _plot_stages(axes[-1], bodies, stages)
        for ax, body in zip(axes[0] if not rows.empty else [], bodies):
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


def _plot_stages(axes, bodies: list, stages: pd.DataFrame) -> None:
    """Stacked horizontal bars: a kernel variant per bar, k cycles per world's solve by group."""
    groups = [c for c in dict.fromkeys([*_STAGE_GROUPS.values(), "other"])]
    for ax, body in zip(axes, bodies):
        g = stages[stages["body"] == body]
        if g.empty:
            ax.set_axis_off()
            continue
        left = pd.Series(0.0, index=g.index)
        for i, grp in enumerate(groups):
            ax.barh(g["variant"], g[grp] / 1e3, left=left / 1e3, color=plots.COLORS[i % len(plots.COLORS)], label=grp)
            left = left + g[grp]
        plots.label(ax, x="stage clock per world's solve [k cycles]", y="kernel variant [-]",
                    title=f"{body}, {int(g['nworld'].iloc[0])} worlds")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(groups), frameon=False)


def draw_newton_time(root: Path, log: Callable[[str], None], rows: Callable, save_per_gpu: Callable) -> list[Path]:
    """`python -m fightlab figures`' drawer of ``newton_time`` (``rows``, ``save_per_gpu``: the
    package's own helpers, handed in): one figure per GPU; skipped with a line without timed or
    stage-clock rows."""
    df = rows("newton", root, "newton_time", log)

    def plot(gpu, g, name):
        fig = plot_newton_time(g, title=f"the Newton solve, {gpu}")
        if fig is None:
            log(f"figures: skip {name}: no newton row of {gpu} has a graph time or a stage clock (GPU rows only)")
        return fig

    return save_per_gpu(df, "newton_time", plot, root, log)
