"""Figures of training runs (notebook 06): ``train_curves`` (reward, curriculum amplitude, fall
rate and episode length against training wall time, from per-iteration curves; the reward by
term for notebook 06's own run) and ``stage_iterations`` (iterations spent in each curriculum
stage, by learner)."""

from __future__ import annotations

from fightlab.figures.style import label, use_style

__all__ = ["plot_training", "plot_stage_iterations"]


def plot_training(curves: dict, title: str = "", styles: dict | None = None, reward_terms: bool = False):
    """Reward, amplitude, fall rate and episode length against training wall time; with
    `reward_terms`, below them each reward term's mean per env step.

    Args:
      curves: {label: DataFrame of per-iteration rows (columns elapsed_s, reward, amplitude,
        window_fall_rate, window_episode_s; for the terms iteration, env_steps and the
        ``reward_<term>`` sums of `fightlab.envs.rewards.REWARD_KEYS`)} — e.g. read from
        data/curves/<run_id>.csv.gz (`fightlab.results.read_curve`).
      styles: optional {label: keyword arguments of ``Axes.plot``} (colour, line style) per curve;
        a ``label`` there replaces the curve's legend entry ("_nolegend_": none, e.g. for the
        other seeds of a group).
      reward_terms: add the per-term panel (drawn only when a curve has ``reward_<term>``
        columns): a term's sum over an iteration divided by the iteration's env steps; the terms
        add up to the reward panel's curve but for one env step of the 32 (the rollout buffer's
        rewards lag the env's sums by one step: up to 7 % apart early in a run, seen on the H200).
    Returns the matplotlib Figure (2×2 axes, every one with its tick labels, and the per-term
    panel across the bottom; with more than 6 legend entries the legend sits below them).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from fightlab.figures.style import COLORS

    terms = list(dict.fromkeys(c for df in curves.values() for c in df.columns
                               if c.startswith("reward_"))) if reward_terms else []
    with use_style():
        styles = styles or {}
        if terms:
            fig, ax = plt.subplot_mosaic([[0, 1], [2, 3], [4, 4]], figsize=(11, 10.5), sharex=True)
            axes, term_ax = np.array([[ax[0], ax[1]], [ax[2], ax[3]]]), ax[4]
        else:
            fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
        panels = [("reward", "mean reward per env step [-]"),
                  ("amplitude", "rhythm amplitude a [-]"),
                  ("window_fall_rate", "fall rate, last W iterations [-]"),
                  ("window_episode_s", "mean episode length, last W iterations [s]")]
        for ax, (col, ylab) in zip(axes.flat, panels):
            for name, df in curves.items():
                if col in df:
                    ax.plot(df["elapsed_s"], df[col], **{"label": name, **styles.get(name, {})})
            label(ax, x="training wall time [s]", y=ylab)
            ax.tick_params(labelbottom=True)  # sharex hides the top row's labels otherwise
        axes[0, 1].set_ylim(0, 1.05)
        axes[1, 0].axhline(0.05, color="k", lw=0.8, ls="--")
        axes[1, 1].axhline(9.5, color="k", lw=0.8, ls="--")
        if terms:
            for j, (name, df) in enumerate(curves.items()):
                per_iteration = df["env_steps"] / df["iteration"]  # nworld × rollout steps
                for k, col in enumerate(c for c in terms if c in df):
                    term_ax.plot(df["elapsed_s"], df[col] / per_iteration, color=COLORS[k % len(COLORS)],
                                 ls=("-", "--", ":", "-.")[j % 4],
                                 label=col.removeprefix("reward_") + ("" if len(curves) == 1 else f", {name}"))
            term_ax.axhline(0.0, color="k", lw=0.8)
            label(term_ax, x="training wall time [s]", y="mean reward per env step, by term [-]")
            term_ax.legend(fontsize=8, ncol=3)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        handles, labels = axes[0, 0].get_legend_handles_labels()
        if len(labels) > 6:  # a long legend would cover the curves: put it under the panels
            fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8)
        elif labels:
            axes[0, 0].legend(fontsize=8)
    return fig


def _distinct_colors(names: list[str], palette) -> dict[str, str]:
    """One colour per name, none repeated: ``palette`` without black (black marks today's
    defaults), then the hues of matplotlib's Dark2 it lacks (purple, green, brown, grey), then
    tab20's (its light hues first) when there are more names than that."""
    import matplotlib

    base = [c for c in palette if c.lower() not in ("#000000", "k", "black")]
    dark2 = matplotlib.colormaps["Dark2"].colors
    tab20 = matplotlib.colormaps["tab20"].colors
    extra = [matplotlib.colors.to_hex(dark2[i]) for i in (2, 4, 6, 7)] + [
        matplotlib.colors.to_hex(tab20[i]) for i in [*range(1, 20, 2), *range(0, 20, 2)]]  # light hues first
    pool = base + [c for c in extra if c not in base]
    return {nm: pool[i % len(pool)] for i, nm in enumerate(dict.fromkeys(names))}


def plot_stage_iterations(table, wait: int | None = None, title: str = "", labels: dict | None = None):
    """Iterations per curriculum stage: one panel per body, grouped bars per learner (median over
    its runs, the bar's whisker min–max), the stage's amplitude on the x axis.

    Args:
      table: ``fightlab.measure.report.stage_table`` (columns body, learner, run_id, stage,
        amplitude, iterations; with ``nworld``, a learner's runs at several world counts are
        one bar group per count, named with it: iterations depend on the world count too).
      wait: the curriculum wait W, drawn as the floor a stage cannot go under (dashed).
      labels: optional (body, learner id) or learner id → legend text (``report.learner_labels``:
        the fields changed from today's defaults); a learner without one is named by its id.
    Returns the matplotlib Figure, or None when ``table`` is empty.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from fightlab.figures.style import COLORS

    labels = labels or {}
    if table.empty:
        return None
    bodies = list(dict.fromkeys(table["body"]))
    with use_style():
        # one body a row, its legend at its right: the learners' names are long
        fig, axes = plt.subplots(len(bodies), 1, figsize=(14.0, 3.6 * len(bodies)), squeeze=False)
        for ax, body in zip(axes[:, 0], bodies):
            t = table[table["body"] == body]
            many = "nworld" in t and t["nworld"].nunique() > 1
            key = list(zip(t["learner"], t["nworld"] if many else [None] * len(t)))
            t = t.assign(_key=key)
            learners = list(dict.fromkeys(key))
            stages = sorted(t["stage"].unique())
            width = 0.8 / len(learners)
            base = [(labels.get((body, lr)) or labels.get(lr) or f"learner {lr}") for lr, _ in learners]
            names = [nm if nw is None else f"{nm}, {int(nw)} worlds" for nm, (_, nw) in zip(base, learners)]
            today = {nm for nm, b in zip(names, base) if b == "defaults"}
            colors = _distinct_colors([nm for nm in names if nm not in today], COLORS)
            for j, (lr, name) in enumerate(zip(learners, names)):
                sel = t["_key"].map(lambda k, lr=lr: k == lr).astype(bool)
                g = t[sel].groupby("stage")["iterations"]
                med, lo, hi = (g.median().reindex(stages), g.min().reindex(stages), g.max().reindex(stages))
                x = np.arange(len(stages)) + (j - (len(learners) - 1) / 2) * width
                n = t.loc[sel, "run_id"].nunique()
                ax.bar(x, med, width, color="k" if name in today else colors[name],
                       yerr=[med - lo, hi - med], capsize=2, ecolor="0.4",
                       label=f"{name.replace('defaults', 'defaults (today)', 1) if name in today else name}: {n} runs")
            amp = t.groupby("stage")["amplitude"].first().reindex(stages)
            ax.set_xticks(np.arange(len(stages)), [f"{a:g}" for a in amp])
            if wait:
                ax.axhline(wait, color="k", lw=0.8, ls="--", label=f"the wait W = {wait}")
            label(ax, x="curriculum stage: amplitude a [-]", y="iterations in the stage [count]",
                  title=body)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    return fig


def plot_learner_study(variants, title: str = "", floor: int | None = None, stage_floor: int | None = None):
    """A learner study: per body, one horizontal bar per learner variant, its median stage-0
    iterations (the first stage, a = 0.1) and, behind it, its median iterations to solve (none
    for a variant of runs stopped after stage 0), the whiskers min–max over its runs, the best
    variant at the top.

    Args:
      variants: ``fightlab.measure.report.variant_table`` (body, changes, n, n_solved,
        stage0_*, iterations_*).
      floor: the curriculum's floor (stages × wait) drawn dashed: no learner solves in fewer;
      stage_floor: a stage's floor (the wait W), dotted: stage 0 cannot pass in fewer.
    Returns the matplotlib Figure, or None when ``variants`` is empty.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from fightlab.figures.style import COLORS

    if variants.empty:
        return None
    bodies = list(dict.fromkeys(variants["body"]))
    counts = [int((variants["body"] == b).sum()) for b in bodies]
    with use_style():
        # one panel per body, stacked: the variants' names are long, so the bars get the width
        fig, axes = plt.subplots(len(bodies), 1, figsize=(13, 1.6 + 0.3 * sum(counts) + 0.9 * len(bodies)),
                                 squeeze=False, gridspec_kw=dict(height_ratios=[max(c, 1) for c in counts]))
        for ax, body in zip(axes[:, 0], bodies):
            v = variants[variants["body"] == body].sort_values(["iterations_median", "stage0_median"], ascending=False,
                                                               na_position="first")
            y = np.arange(len(v))
            for col, color, lab in (("iterations", COLORS[1], "iterations to solve"),
                                    ("stage0", COLORS[0], "stage-0 iterations (a = 0.1)")):
                med = v[f"{col}_median"].to_numpy(float)
                err = [med - v[f"{col}_min"].to_numpy(float), v[f"{col}_max"].to_numpy(float) - med]
                ax.barh(y, med, 0.7 if col == "iterations" else 0.45, xerr=err, color=color,
                        capsize=2, label=lab)
            solved = v["n_solved"] if "n_solved" in v else v["n"]
            ax.set_yticks(y, [f"{c} ({n} runs)" if k == n else f"{c} ({n} runs, {k} solved)"
                              for c, n, k in zip(v["changes"], v["n"], solved)], fontsize=7)
            if floor:
                ax.axvline(floor, color="k", lw=0.8, ls="--", label=f"fewest iterations to solve ({floor})")
            if stage_floor:
                ax.axvline(stage_floor, color="k", lw=0.8, ls=":", label=f"fewest in a stage ({stage_floor})")
            label(ax, x="iterations [count]", y=None, title=body)
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, names, fontsize=8, loc="lower center", ncol=len(names), frameon=False)
        fig.suptitle((title + "\n" if title else "")
                     + "each variant named by the fields it changes from today's defaults", fontsize=10)
        fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
