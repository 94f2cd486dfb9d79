"""Redraw every committed data-driven figure from root/data: no measurement, works on a CPU.

    python -m fightlab figures                        # all of FIGURES, into figures/
    python -m fightlab figures --only factor_time --root /tmp/copy

    from fightlab import figures
    figures.draw(["train_curves"], root)             # {name: [written paths]}
    fig = figures.plot_factor_time(df)               # also used by notebook 03

Each figure reads only ``root/data/results/<experiment>.csv`` (and ``root/data/curves/``) and is
saved with :func:`fightlab.figures.style.savefig` as ``root/figures/<name>.png`` and ``.svg``. A figure
whose data file is absent or has no rows is skipped with a printed reason, not an error. A figure
whose data cannot be used (a header of another schema, a torn line, a byte that is not UTF-8, a
curve file that a listed row names but that is missing) is not drawn: the others are, then
`draw` raises :class:`DataFileError` naming the figures and the file.
Rows of several GPUs give one figure per GPU, named ``<name>_<gpu slug>``
(``profile_stages_nvidia-h200``); with one GPU the name stays plain.

Figures (:data:`FIGURES`):
  train_curves       every published training run (data/results/train.csv + data/curves/): each
                     body's headline group in colour, every other run grey, shared-GPU runs dotted
  profile_stages     kernel time and launches per physics step by stage (data/results/profile.csv,
                     the newest row per body and worlds), per GPU
  factor_time        mass-matrix factorization time per physics step: stock sparse, fightlab's
                     single launch, dense tile reference (data/results/factor.csv), per GPU
  factor_trajectory  joint-angle deviation from the stock run over the trajectories (pushed and
                     quiet; rows with traj_steps > 0 and their data/curves/<run_id>.csv.gz), per GPU
  primer_vector_sweep  time per call and effective bandwidth against vector length (notebook 00:
                     the newest data/results/primer.csv row with a data/curves/<run_id>.csv.gz), per
                     GPU
  graphs_split       seconds per training iteration (rollout, update, host rest) with and without
                     each graph (notebook 05: data/results/graphs.csv, the newest row per body,
                     worlds and setting), per GPU
  packing_throughput aggregate training iterations/s against K trainings at once, with and
                     without CUDA MPS (data/results/packing.csv), per GPU; where rows of several
                     GPUs exist, beside it the aggregate of all GPUs against the GPU count
  figure2_world_sweep  Figure 2: time to solve (iterations to solve from train rows × solo
                     seconds per iteration from data/results/sweep.csv) and env steps/s against
                     nworld, both bodies, the original's point marked, per GPU
  figure3_survey     Figure 3: cost per solve against time to solve, every machine of the
                     original's survey (data/survey/reference.csv) and fightlab's rows
                     (data/results/train.csv, packing.csv, backends.csv, bench.csv and the
                     rented hosts' data/survey/bench/) at the assumed price of its GPU
                     (fightlab.survey.cost.ASSUMED_PRICE_PER_HOUR; a rented host's offer
                     where recorded), both bodies
  learners_side_by_side  fightlab beside rsl_rl (notebook 08; figures/sidebyside), per GPU
  newton_time        graph time per physics step against nworld, MuJoCo Warp's solve vs the single
                     launch, per body (notebook 09: data/results/newton.csv; figures/newton), per GPU
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

if TYPE_CHECKING:  # pandas and the results module load on first use: the CLI parser imports FIGURES
    import pandas as pd

from fightlab.figures.names import gpu_slug, per_gpu_name
from fightlab.figures.trajectory import DEV_FLOOR_RAD, TRAJECTORY_LINES, plot_factor_trajectory
from fightlab.paths import REPO_ROOT

#: the figure names `draw` knows, in drawing order
FIGURES: tuple[str, ...] = ("train_curves", "profile_stages", "factor_time", "factor_trajectory",
                             "primer_vector_sweep", "graphs_split", "packing_throughput",
                             "stage_iterations", "learner_study", "figure2_world_sweep", "figure3_survey",
                             "learners_side_by_side", "newton_time")


def _per_gpu(df: pd.DataFrame, name: str) -> Iterator[tuple[str, pd.DataFrame, str]]:
    """(gpu, its rows, figure name) per GPU in ``df`` (:func:`per_gpu_name`)."""
    gpus = list(dict.fromkeys(df["gpu"]))
    for gpu in gpus:
        yield gpu, df[df["gpu"] == gpu], per_gpu_name(name, gpu, gpus)


class DataFileError(ValueError):
    """A data file exists but cannot be read under its experiment's schema (e.g. its header
    predates a schema change): the figure is not drawn, and the command fails after the others."""


def _rows(experiment: str, root: Path, name: str, log: Callable[[str], None]) -> pd.DataFrame | None:
    """The rows of ``experiment`` under ``root``, or None (after saying why ``name`` is skipped).
    Raises DataFileError when the file exists but does not match the schema."""
    from fightlab import results

    path = results.results_path(experiment, root)
    if not path.exists():
        log(f"figures: skip {name}: {path} is absent")
        return None
    try:
        df = results.read_rows(experiment, root)
    except ValueError as e:
        raise DataFileError(" ".join(str(e).split())) from None  # pandas: several lines
    if df.empty:
        log(f"figures: skip {name}: {path} has no rows")
        return None
    return df


def _require_curves(run_ids: Iterable[str], root: Path, name: str, rows: str) -> None:
    """Refuse figure ``name`` when a row it lists (``rows``: which, for the message) has no curve
    file: a figure drawn from fewer runs than its rows say would differ silently. Raises
    DataFileError naming the first missing file and how many are missing."""
    from fightlab import results

    missing = [results.curve_path(r, root) for r in dict.fromkeys(run_ids)
               if not results.curve_path(r, root).exists()]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise DataFileError(f"{missing[0]} is missing{more}: {rows} list a curve for each run "
                            "(restore it from git, or remove that run's row by hand)")


def _save(fig, name: str, root: Path, log: Callable[[str], None]) -> list[Path]:
    import matplotlib.pyplot as plt

    from fightlab.figures.style import savefig

    paths = savefig(fig, name, root=root)
    plt.close(fig)
    log(f"figures: {name}: " + ", ".join(str(p) for p in paths))
    return paths


def _save_per_gpu(df: pd.DataFrame | None, name: str, plot: Callable, root: Path,
                  log: Callable[[str], None]) -> list[Path]:
    """One figure per GPU in ``df`` (:func:`_per_gpu` names them; None: none): ``plot(gpu, rows,
    name)`` returns the Figure, or None to skip that GPU's (having said why). Returns the written
    paths."""
    if df is None:
        return []
    paths = []
    for gpu, rows, fig_name in _per_gpu(df, name):
        fig = plot(gpu, rows, fig_name)
        if fig is not None:
            paths += _save(fig, fig_name, root, log)
    return paths


# --- training -------------------------------------------------------------------------------

def train_curve_labels(runs: pd.DataFrame) -> list[str]:
    """One legend label per published run's group: body, factor setup and commit(s), the seeds of
    the group, and "shared GPU ×N" for runs that shared the GPU (not headline times). Runs of one
    group (:data:`fightlab.measure.report.SUMMARY_KEYS`, solo or shared alike) get the same label."""
    import pandas as pd

    from fightlab.measure.report import SUMMARY_KEYS

    def shared(r) -> str:
        if r.concurrent == 1:
            return ""
        mps = " MPS" if getattr(r, "mps", False) else ""
        return f" (shared GPU ×{'?' if pd.isna(r.concurrent) else int(r.concurrent)}{mps})"

    keys = [tuple(getattr(r, k) for k in SUMMARY_KEYS) + (shared(r),) for r in runs.itertuples()]
    seeds: dict[tuple, list[str]] = {}
    commits: dict[tuple, dict[str, None]] = {}  # a group may pool commits of the same training code
    for key, r in zip(keys, runs.itertuples()):
        seeds.setdefault(key, []).append(str(r.seed))
        commits.setdefault(key, {})[str(r.commit or "no commit")] = None
    labels = []
    for key, r in zip(keys, runs.itertuples()):
        ss = seeds[key]
        labels.append(f"{r.body}, {r.setup}, {'+'.join(commits[key])}: seed{'s' if len(ss) > 1 else ''} "
                      f"{', '.join(ss)}{key[-1]}")
    return labels


def plot_train_curves(runs: pd.DataFrame, root: Path | str,
                      log: Callable[[str], None] = print):
    """All runs of :func:`fightlab.measure.report.published_runs` drawn with
    :func:`fightlab.figures.training.plot_training`: each body's headline group on MuJoCo Warp
    and on the CPU backend (:func:`fightlab.measure.report.headline`) in colour, one legend
    entry per group (:func:`train_curve_labels`: the seeds listed); every other run (earlier
    code, learner studies, packed) thin and grey under them, one legend entry for all. Runs that
    shared the GPU dotted. Runs without a curve file under ``root/data/curves`` are left out
    (said through ``log``). Returns the Figure, or None when no run has a curve."""
    from fightlab import results
    from fightlab.figures.style import COLORS
    from fightlab.figures.training import plot_training
    from fightlab.measure.report import SUMMARY_KEYS, headline, solve_summary

    # legend order: per body, the groups in the order they first ran, seeds within a group
    keys = list(SUMMARY_KEYS)
    first = runs.groupby(keys, sort=False)["time"].transform("min")
    runs = runs.assign(_first=first).sort_values(["body", "_first", "seed"], kind="stable")
    have = [results.curve_path(r.run_id, root).exists() for r in runs.itertuples()]
    for r, ok in zip(runs.itertuples(), have):
        if not ok:
            log(f"figures: train_curves: run {r.run_id} ({r.body} seed {r.seed}) has no curve "
                f"{results.curve_path(r.run_id, root)}")
    runs = runs[have]
    heads: set[tuple] = set()
    if not runs.empty:
        summary = solve_summary(runs)
        for backend in ("gpu", "cpu"):
            heads |= set(headline(summary, backend=backend).index)
        if not heads:
            log("figures: train_curves: no headline group (no body has a solo solve of its default "
                "learner): every run grey")
    front, back, labelled = {}, {}, set()
    for label, r in zip(train_curve_labels(runs), runs.itertuples()):
        group = tuple(getattr(r, k) for k in SUMMARY_KEYS)
        curve = results.read_curve(r.run_id, root, need=results.TRAIN_CURVE_COLUMNS)
        ls = "-" if r.concurrent == 1 else ":"
        if group in heads and r.concurrent == 1:
            color = COLORS[sorted(heads).index(group) % len(COLORS)]
            front[r.run_id] = (curve, dict(color=color, lw=1.6, ls=ls, zorder=3,
                                           label=f"headline: {label}" if label not in labelled else "_nolegend_"))
            labelled.add(label)
        else:
            back[r.run_id] = (curve, dict(color="0.72", lw=0.7, ls=ls, alpha=0.7, zorder=1, label="_nolegend_"))
    if not front and not back:
        return None
    if back:  # one legend entry for every other run
        first_back = next(iter(back))
        back[first_back][1]["label"] = f"{len(back)} other runs (earlier code, learner studies, packed)"
    ordered = {**back, **front}  # the headline groups drawn last, on top
    gpus = ", ".join(dict.fromkeys(runs["gpu"]))
    return plot_training({k: c for k, (c, _) in ordered.items()},
                         title=f"published training runs, {gpus} (dotted: GPU shared)",
                         styles={k: st for k, (_, st) in ordered.items()})


def _train_curves(root: Path, log: Callable[[str], None]) -> list[Path]:
    return _from_train_runs("train_curves", root, log, lambda runs, _: plot_train_curves(runs, root, log),
                            "no published run has a curve in data/curves/")


# --- profile --------------------------------------------------------------------------------

def _profile_stages(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.figures import profile as stage_figures
    from fightlab.measure import profile

    def plot(gpu, rows, name):
        rows = profile.latest_rows(rows)  # MuJoCo Warp's solve, as notebook 02 draws it
        if rows.empty:
            log(f"{name}: skipped: {gpu} has profile rows of the single-launch solve only (notebook 09 shows them)")
            return None
        return stage_figures.plot_stages(rows, title=f"one physics step, {gpu}")

    return _save_per_gpu(_rows("profile", root, "profile_stages", log), "profile_stages", plot, root, log)


# --- factor kernel (notebook 03) --------------------------------------------------------------

def factor_param(df: pd.DataFrame, key: str, default=None) -> pd.Series:
    """One value of each ``factor`` row's ``params`` JSON (``default`` where it is absent)."""
    import json

    import pandas as pd

    return pd.Series([json.loads(p).get(key, default) for p in df["params"]], index=df.index)


def plot_factor_time(df: pd.DataFrame):
    """Factorization time per physics step (all worlds together) from ``factor`` rows: for each
    (body, nworld) row, bars for the stock sparse path, fightlab's single launch (the "global"
    variant, and the row's own variant when it is another, e.g. "shared"; ``params.variant``,
    "global" for rows from before the variants) and the dense tile reference, on a log axis (the
    dense reference is 10-100× the others). Each group is labelled with its row's commit; a bar
    the row did not measure (e.g. a row from before the shared variant) is marked "not measured"
    in place, and a note under the axis says which and why. Returns the Figure."""
    import math

    import matplotlib.pyplot as plt
    import pandas as pd

    from fightlab.figures import style as plots

    df = df.reset_index(drop=True)
    variant = factor_param(df, "variant", "global")
    calls = pd.to_numeric(df["factor_calls_per_step"], errors="coerce")
    glob_us = pd.to_numeric(df.get("tree_global_us_per_call", df["tree_us_per_call"]), errors="coerce")
    bars = [(df["stock_factor_ms_per_step"], "stock sparse (per level)"),
            (glob_us * calls * 1e-3, "single launch, global memory")]
    others = sorted(set(variant) - {"global"})
    for v in others:
        bars.append((df["tree_factor_ms_per_step"].where(variant == v), f"single launch, {v} memory"))
    bars.append((df["dense_factor_ms_per_step"], "dense tile reference"))
    labels = [f"{b}\n{n} worlds\n{c}" for b, n, c in zip(df["body"], df["nworld"], df["commit"])]
    x = range(len(df))
    missing: dict[str, list[int]] = {}
    with plots.use_style():
        fig, ax = plt.subplots(figsize=(max(6.4, 1.2 * len(df) + 1.5), 4.4))
        w = 0.8 / len(bars)
        for k, (values, name) in enumerate(bars):
            off = (k - (len(bars) - 1) / 2) * w
            v = pd.to_numeric(values, errors="coerce")
            ax.bar([i + off for i in x], v, width=w, label=name)
            for i in x:
                if not (isinstance(v[i], float) and math.isfinite(v[i]) and v[i] > 0):
                    missing.setdefault(name, []).append(i)
                    ax.text(i + off, 0.02, "not measured", transform=ax.get_xaxis_transform(),
                            rotation=90, ha="center", va="bottom", fontsize=7, color="0.45")
        ax.set_yscale("log")
        ax.set_xticks(list(x), labels, fontsize=9)
        ax.legend(fontsize=9)
        plots.label(ax, y="factorization time per physics step [ms]",
                    title=f"M factorization, {', '.join(dict.fromkeys(df['gpu']))}")
        if missing:
            notes = []
            for name, rows in missing.items():
                where = ", ".join(f"{df['body'][i]} ×{df['nworld'][i]}" for i in rows)
                commits = ", ".join(dict.fromkeys(str(df["commit"][i]) for i in rows))
                notes.append(f"{name}: not measured for {where} (newest row at that size: "
                             f"commit {commits}, which did not time it)")
            fig.text(0.01, 0.01, "\n".join(notes), fontsize=8, color="0.3", ha="left", va="bottom")
            fig.tight_layout(rect=(0, 0.035 * (len(notes) + 1), 1, 1))
        else:
            fig.tight_layout()
    return fig


def factor_curves(df: pd.DataFrame, root: Path | str,
                  log: Callable[[str], None] = print) -> list[tuple[pd.Series, pd.DataFrame]]:
    """(row, curve) pairs for the ``factor`` rows of ``df`` that ran the trajectory comparisons
    (``traj_steps > 0``; other rows have empty trajectory columns and no curve), with the curve
    read from ``root/data/curves/<run_id>.csv.gz``. A row whose curve file is missing is left out
    (said through ``log``)."""
    import pandas as pd

    from fightlab import results

    out = []
    steps = pd.to_numeric(df["traj_steps"], errors="coerce").fillna(0)
    for _, row in df[steps > 0].iterrows():
        path = results.curve_path(row["run_id"], root)
        if not path.exists():
            log(f"figures: factor_trajectory: row {row['run_id']} ({row['body']}) has no curve {path}")
            continue
        out.append((row, results.read_curve(row["run_id"], root)))
    return out


def _latest(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The newest row per ``keys`` (rows are appended in time order; ties keep file order)."""
    return df.sort_values("time", kind="stable").drop_duplicates(keys, keep="last").sort_index()


def _factor_time(root: Path, log: Callable[[str], None]) -> list[Path]:
    df = _rows("factor", root, "factor_time", log)
    if df is None:
        return []
    # the design point (64 threads per world); block-size sweeps are tables in notebook 03
    df = df[factor_param(df, "block_dim", 64).astype(int) == 64]
    latest = _latest(df, ["body", "nworld", "gpu"])
    # the trained body first, then the generated trees; world counts ascending within a body
    latest = latest.assign(_first=latest["body"] != "muscular-fast").sort_values(
        ["_first", "body", "nworld"], kind="stable").drop(columns="_first")
    return _save_per_gpu(latest, "factor_time",
                         lambda _, rows, __: plot_factor_time(rows.reset_index(drop=True)), root, log)


def _factor_trajectory(root: Path, log: Callable[[str], None]) -> list[Path]:
    import pandas as pd

    from fightlab import results

    df = _rows("factor", root, "factor_trajectory", log)
    if df is None:
        return []
    steps = pd.to_numeric(df["traj_steps"], errors="coerce").fillna(0)
    df = df[steps > 0]
    if df.empty:
        log(f"figures: skip factor_trajectory: no row of {results.results_path('factor', root)} "
            "ran the trajectories (traj_steps == 0 everywhere)")
        return []
    latest = _latest(df, ["body", "gpu"])
    _require_curves(latest["run_id"], root, "factor_trajectory",
                    "the trajectory rows of data/results/factor.csv")

    def plot(_, rows, name):
        pairs = factor_curves(rows, root, log)
        if not pairs:
            log(f"figures: skip {name}: its trajectory rows have no curve in data/curves/")
            return None
        return plot_factor_trajectory(pairs)

    return _save_per_gpu(latest, "factor_trajectory", plot, root, log)


def _primer_vector_sweep(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab import results
    from fightlab.figures import primer as primer_figures

    df = _rows("primer", root, "primer_vector_sweep", log)
    if df is None:
        return []
    # a primer row from before the sweep was kept has no curve: the newest row with one is drawn
    df = df[[results.curve_path(r, root).exists() for r in df["run_id"]]]
    if df.empty:
        log("figures: skip primer_vector_sweep: no primer row has its sweep in data/curves/")
        return []

    def plot(gpu, rows, _):
        return primer_figures.plot_sweep(results.read_curve(rows["run_id"].iloc[-1], root,
                                                            need=("device", "op", "n", "median_s", "gb_per_s")),
                                         title=f"vector sweep, {gpu}")

    return _save_per_gpu(_latest(df, ["gpu"]), "primer_vector_sweep", plot, root, log)


# --- graphs (notebook 05) ---------------------------------------------------------------------

def _graphs_split(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.figures import graphs as graph_figures

    return _save_per_gpu(_rows("graphs", root, "graphs_split", log), "graphs_split", lambda gpu, rows, _: graph_figures.plot_graphs(
        rows, title=f"one training iteration, {gpu}"), root, log)


def _packing_throughput(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.figures import packing as packing_figures

    return _save_per_gpu(_rows("packing", root, "packing_throughput", log), "packing_throughput", lambda gpu, rows, _: packing_figures.plot_packing(
        rows, title=f"packed trainings, {gpu}"), root, log)


def _from_train_runs(name: str, root: Path, log: Callable[[str], None], plot: Callable,
                     empty: str, stage_studies: bool = False) -> list[Path]:
    """Figure ``name`` from the published train runs (`measure.report.published_runs`, with the
    runs stopped after a stage when ``stage_studies``): ``plot(runs, gpus)`` (gpus: the runs'
    GPU names, joined) draws it, or returns None and the figure is skipped, said with
    ``empty``. Skipped too without train rows."""
    from fightlab.measure.report import published_runs

    if _rows("train", root, name, log) is None:
        return []
    runs = published_runs(root, stage_studies=stage_studies)
    _require_curves(runs["run_id"], root, name, "the rows of data/results/train.csv")
    fig = plot(runs, ", ".join(dict.fromkeys(runs["gpu"])))
    if fig is None:
        log(f"figures: skip {name}: {empty}")
        return []
    return _save(fig, name, root, log)


def _stage_iterations(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.config import TrainConfig
    from fightlab.figures.training import plot_stage_iterations
    from fightlab.measure.report import learner_labels, stage_table

    return _from_train_runs("stage_iterations", root, log, lambda runs, gpus: plot_stage_iterations(
        stage_table(runs, root), wait=TrainConfig().curriculum_wait, labels=learner_labels(runs),
        title=f"iterations per curriculum stage, solo solved runs, {gpus}"),
        "no solo solved run of the task has a curve in data/curves/")


def _learner_study(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.config import TrainConfig
    from fightlab.figures.training import plot_learner_study
    from fightlab.measure.report import variant_table

    c = TrainConfig()
    return _from_train_runs("learner_study", root, log, lambda runs, gpus: plot_learner_study(
        variant_table(runs, root), floor=len(c.curriculum_stages) * c.curriculum_wait,
        stage_floor=c.curriculum_wait,
        title=f"learner variants, runs packed and solo (solved, or stopped after stage 0), {gpus}"),
        "no solved run of the task has a curve in data/curves/", stage_studies=True)


def _figure2_world_sweep(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.figures import sweep as sweep_figures
    from fightlab.measure import sweep
    from fightlab.measure.report import published_runs

    df = _rows("sweep", root, "figure2_world_sweep", log)
    runs = published_runs(root) if df is not None else None  # no train rows: an empty table
    def draw(gpu, rows, _):
        table = sweep.time_to_solve_table(rows, runs)
        return sweep_figures.plot_world_sweep(table, title=sweep_figures.figure2_title(table, gpu))

    return _save_per_gpu(df, "figure2_world_sweep", draw, root, log)


def _figure3_survey(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.config import ConfigError
    from fightlab.figures import survey as survey_figures
    from fightlab.survey import cost

    path = cost.reference_path(root)
    if not path.exists():
        log(f"figures: skip figure3_survey: {path} is absent")
        return []
    try:
        s = cost.load_survey(root, log=log)
    except ConfigError as e:
        raise DataFileError(" ".join(str(e).split())) from None  # pandas: several lines
    fig = survey_figures.plot_survey(s.table, title=survey_figures.figure3_title(s.ours), note=s.price_note)
    return _save(fig, "figure3_survey", root, log)


def _learners_side_by_side(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.figures.sidebyside import draw_side_by_side

    return draw_side_by_side(root, log, _rows, _save, gpu_slug)


def _newton_time(root: Path, log: Callable[[str], None]) -> list[Path]:
    from fightlab.figures.newton import draw_newton_time

    return draw_newton_time(root, log, _rows, _save_per_gpu)


#: figure name -> its drawer ``_<name>(root, log)``, returning the written paths
_DRAW: dict[str, Callable[[Path, Callable[[str], None]], list[Path]]] = {n: globals()["_" + n] for n in FIGURES}


def check_names(only: Iterable[str] | None) -> list[str]:
    """The figure names to draw (all of :data:`FIGURES` for None or empty), in FIGURES order.
    Raises ConfigError for an unknown name (names it and the valid figures)."""
    from fightlab.config import ConfigError

    if not only:
        return list(FIGURES)
    chosen = list(dict.fromkeys(only))
    unknown = [n for n in chosen if n not in FIGURES]
    if unknown:
        raise ConfigError(f"unknown figure {', '.join(map(repr, unknown))}; valid figures: "
                          f"{', '.join(FIGURES)}")
    return [n for n in FIGURES if n in chosen]


def draw(only: Iterable[str] | None = None, root: Path | str | None = None,
         log: Callable[[str], None] = print) -> dict[str, list[Path]]:
    """Redraw figures from ``root/data`` into ``root/figures`` (default root: the repository).

    Args:
      only: figure names (:data:`FIGURES`), default all; root: the folder holding data/;
      log: where progress and skip reasons go (a line each).
    Returns:
      {name: written paths}; an empty list for a skipped figure (absent or empty data).
    Raises:
      ConfigError: an unknown figure name, or ``root`` is not a folder (before drawing anything).
      DataFileError: after drawing the others, when a data file could not be read, a listed
        curve file is missing, or a row holds a value of a type its figure cannot read (names the
        figures, and the file when it is one reason; every reason went to ``log``).
    """
    from fightlab.config import ConfigError

    names = check_names(only)
    if root is not None and not str(root).strip():
        raise ConfigError("--root must name a folder holding data/, got ''")
    root = Path(root) if root is not None else REPO_ROOT
    if not root.is_dir():
        raise ConfigError(f"--root {str(root)!r} is not a folder")
    from fightlab.results import MalformedRowError

    drawn, failed = {}, {}
    for name in names:
        try:
            drawn[name] = _DRAW[name](root, log)
        except (DataFileError, MalformedRowError) as e:  # a curve's torn line or bad byte too
            log(f"figures: cannot draw {name}: {e}")
            drawn[name] = []
            failed[name] = str(e)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
            # a hand-made row's value of a type the figure's reader does not expect (inside a
            # params section): this figure only, in one line (a full disk still stops them all)
            why = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
            log(f"figures: cannot draw {name}: a row under {root / 'data'} holds a value it cannot read ({why})")
            drawn[name] = []
            failed[name] = why
    if failed:
        reasons = dict.fromkeys(failed.values())
        raise DataFileError("not drawn: " + "; ".join(
            f"{', '.join(n for n, why in failed.items() if why == r)}: {r}" for r in reasons))
    return drawn


__all__ = ["DEV_FLOOR_RAD", "DataFileError", "factor_param", "FIGURES", "TRAJECTORY_LINES", "check_names", "draw", "per_gpu_name",
           "factor_curves", "gpu_slug", "plot_factor_time", "plot_factor_trajectory",
           "plot_train_curves", "train_curve_labels"]
