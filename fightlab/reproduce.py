"""The main job: run the numbered notebooks with papermill into runs/notebooks/.

`reproduce(only=["06"], size="smoke", publish=False, device="cpu")`. Each notebook takes the
parameters `size` ("smoke": CPU-sized, seconds; "full": the GPU measurement), `device` and
`publish`; only with `publish` do notebooks write the committed data/ and figures/: the one
publish rule is checked for every chosen notebook before the first one starts, by the command
line (`cli.publish_plans` with `publish_plans` here), and again in each notebook's first cell. Executed copies go to runs/notebooks/<name>-<size>.ipynb (git-ignored);
notebooks run in notebooks/, as JupyterLab runs them (paths resolve from `fightlab.paths`).

The job's own measurement: one ``reproduce`` row per notebook (wall time, whether it ran, peak
GPU memory, figures drawn and how many differ from the committed ones) in
``<out_dir>/data/results/reproduce.csv``, with ``publish_times`` also in the repository's. Then
every figure the notebooks wrote under runs/ is compared with the committed one of the same name
(`figure_verdicts`; a differing PNG side by side in ``<out_dir>/compare/``; `report_figures`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from pathlib import Path

from fightlab import paths, results
from fightlab.config import ConfigError
from fightlab.sizes import resolve_size
from fightlab.hosts import GpuMemoryPeak
from fightlab.meta import new_run_id
from fightlab.paths import NOTEBOOKS as NOTEBOOK_DIR
from fightlab.paths import REPO_ROOT, RUNS
from fightlab.rundir import atomic_path, lock_file

OUT_DIR = RUNS / "notebooks"

#: notebooks whose `publish` writes a rendering (no GPU measurement): check_publish's gpu=False;
#: 07 only redraws Figure 3 from the committed tables, 08 the side-by-side figure
RENDER_ONLY = frozenset({"01", "07", "08"})


class NotebookError(RuntimeError):
    """A notebook's cell raised; the message names the notebook, the cell, the error and where
    the executed copy (with the traceback in its outputs) went."""


def notebooks() -> dict[str, Path]:
    """Numbered notebooks present: {"06": Path(".../06_train.ipynb"), ...}."""
    return {p.name[:2]: p for p in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))}


def chosen_notebooks(only: list[str] | None) -> tuple[list[str], dict[str, Path]]:
    """(the notebook numbers ``only`` chooses, default all, in order; every numbered notebook).
    Raises ConfigError naming a bad or unknown number."""
    nbs = notebooks()
    bad = [o for o in (only or []) if not (isinstance(o, str) and re.fullmatch(r"[0-9]+", o.strip()))]
    if bad:
        raise ConfigError(f"--only takes notebook numbers such as 06, got {bad[0]!r}; notebooks: "
                          f"{', '.join(nbs) or 'none'}")
    chosen = list(nbs) if not only else list(dict.fromkeys(o.strip().zfill(2) for o in only))
    unknown = [c for c in chosen if c not in nbs]
    if unknown:
        raise ConfigError(f"unknown notebook {', '.join(unknown)}; notebooks: {', '.join(nbs) or 'none'}")
    return chosen, nbs


def publish_plans(only: list[str] | None, size: str, publish: bool, device: str,
                  publish_times: bool = False) -> list[dict]:
    """What `reproduce` would publish, as `publish.check_publish`'s keywords: each chosen
    notebook's results (figures only for :data:`RENDER_ONLY`), then the job's own times."""
    chosen, nbs = chosen_notebooks(only)
    size = resolve_size(size, device)
    return [*(dict(publish=publish, device=device, size=size, gpu=key not in RENDER_ONLY,
                   what=f"notebook {nbs[key].stem}'s {'figures' if key in RENDER_ONLY else 'results'}")
              for key in chosen),
            dict(publish=publish_times, device=device, what="the main job's times", size=size,
                 flag="--publish-times")]


def reproduce(only: list[str] | None = None, size: str = "smoke", publish: bool = False,
              device: str = "cpu", out_dir: Path | None = None, extra: dict | None = None,
              log_output: bool = False, publish_times: bool = False) -> int:
    """Execute notebooks with papermill, time each, then compare the figures they drew.

    Args:
      only: notebook numbers ("06"), default all; size: "smoke", "full" or "auto" (full on a
        GPU device, smoke otherwise; the notebooks get it as given and say what it chose);
      publish: let the notebooks write data/ and figures/; device: "cpu"/"cuda:N";
      out_dir: where executed copies go (default runs/notebooks); extra: more parameters;
      log_output: stream the cells' output instead of a progress bar per notebook, and list
        every figure's comparison at smoke size too;
      publish_times: also write the job's rows into the repository's data/results/reproduce.csv.
    Returns:
      0 when every notebook ran. Raises ConfigError for an unknown notebook/size (before any
      notebook runs; a publish the rule refuses: the command line, `publish_plans`); NotebookError when a cell fails (its row,
      ``ok`` 0, is written first).
    """
    if (problem := paths.runs_problem()) is not None:
        raise ConfigError(f"{problem}: set {paths.RUNS_ENV} to a folder named runs, or unset it")
    given = size  # what the notebooks get ("auto" resolves there to the same size, and says so)
    size = resolve_size(size, device)
    chosen, nbs = chosen_notebooks(only)
    out = (Path(out_dir) if out_dir else OUT_DIR).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with one_job(paths.RUNS):
        # the row files are read now, so a torn one is said before the first notebook, not after it
        results.read_rows("reproduce", out)
        if publish_times:
            results.read_rows("reproduce", REPO_ROOT)
        return _run(chosen, nbs, size, given, publish, device, out, extra, log_output, publish_times)


def _run(chosen, nbs, size, given, publish, device, out, extra, log_output, publish_times) -> int:
    """`reproduce`'s notebooks, checked already: each run, timed, a row; then the figures."""
    import papermill as pm

    gpu_index = int(device.split(":")[1]) if re.fullmatch(r"cuda:[0-9]+", device) else None
    job, total = new_run_id(), 0.0  # the job's id, in each of its rows' params
    verdicts: dict[Path, tuple[str, str]] = {}  # every figure the job drew: (verdict, line)
    for key in chosen:
        src = nbs[key]
        dst = out / f"{src.stem}-{size}.ipynb"
        params = dict(size=given, device=device, publish=publish, **(extra or {}))
        t0_wall, t0 = time.time(), time.perf_counter()
        print(f"[reproduce] {src.name} size={size} device={device} publish={publish} -> {dst}",
              flush=True)
        stream = dict(stdout_file=sys.stdout, stderr_file=sys.stderr) if log_output else {}
        failure = None
        with GpuMemoryPeak(gpu_index) as mem:
            try:
                pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(NOTEBOOK_DIR),
                                    kernel_name="python3", log_output=False,
                                    progress_bar=False if log_output else dict(desc=src.stem, leave=True),
                                    **stream)
            except pm.PapermillExecutionError as e:
                failure = NotebookError(f"notebook {src.name} failed at In [{e.exec_count}] ({e.ename}: "
                                        f"{e.evalue}); the executed notebook, with the traceback, is {dst}")
        wall = time.perf_counter() - t0
        total += wall
        drawn = drawn_figures(since=t0_wall, until=time.time(), exclude=out)
        mine = dict(zip(drawn, figure_verdicts(drawn, out / "compare")))  # compared once, as drawn
        verdicts.update(mine)
        pngs = [p for p in drawn if p.suffix == ".png"]
        differ = [p for p in pngs if mine[p][0] in ("differs", "error")]
        meta = results.run_metadata(body="none", nworld=1, seed=0, device=device,
                                    params=dict(notebook=src.stem, size=size, publish=publish,
                                                job=job, extra=extra or {}))
        row = {**meta, "wall_s": round(wall, 2), "ok": failure is None,
               "gpu_mem_peak_mib": mem.peak_mib, "figures_drawn": len(pngs),
               "figures_differ": len(differ)}
        results.append_row("reproduce", row, out)
        if publish_times:
            results.append_row("reproduce", row, REPO_ROOT)
        if failure is not None:
            raise failure
        mem_s = f", peak GPU memory {mem.peak_mib:.0f} MiB" if mem.peak_mib is not None else ""
        print(f"[reproduce] {src.name} done in {wall:.1f} s{mem_s}: {dst}", flush=True)
    print(f"[reproduce] {len(chosen)} notebook(s) in {total:.1f} s; times in "
          f"{results.results_path('reproduce', out)}", flush=True)
    report_figures(verdicts, size, out / "compare", verbose=log_output)
    if publish:
        print("[reproduce] published figures were written over figures/: `git diff --stat figures/` "
              "shows which changed", flush=True)
    print(f"[reproduce] done: {len(chosen)} notebook(s) ran without error; executed copies in {out}", flush=True)
    return 0


def report_figures(verdicts: dict[Path, tuple[str, str]], size: str, compare_dir: Path,
                   verbose: bool = False) -> None:
    """Print the figure comparison: {figure: (verdict, line)} of `figure_verdicts`.

    At full size (or ``verbose``) one line per figure, then the counts. At smoke size the
    measured figures differ by design, so that is said once, first, then the counts and where
    the side-by-sides are; only figures that could not be compared get a line of their own.
    """
    if not verdicts:
        return
    smoke = size == "smoke"
    if smoke:
        print("[reproduce] at smoke size the measured figures differ from the committed ones by "
              "design (a check of the code path, not a measurement)", flush=True)
    for verdict, line in verdicts.values():
        if verbose or not smoke or verdict == "error":
            print(f"[reproduce] {line}", flush=True)
    count = {k: sum(v == k for v, _ in verdicts.values()) for k in VERDICTS}
    where = f"; side by side in {compare_dir}" if count["differs"] else ""
    more = ("; one line per figure: rerun with --log-output (runs the notebooks again)" if smoke and not verbose else "")
    lone = [p.name for p, (v, _) in verdicts.items() if v == "none"]
    twin = (f"; no committed twin: drawn by this run, but figures/ holds no figure of that name to compare "
            f"with (e.g. {lone[0]}), nothing wrong" if lone else "")
    print(f"[reproduce] figure files (PNG and SVG): {count['same']} the same as the committed ones, "
          f"{count['differs']} differ, {count['none']} have no committed twin, "
          f"{count['error']} could not be compared{where}{more}{twin}", flush=True)


@contextlib.contextmanager
def one_job(runs: Path):
    """One main job at a time per runs folder: its figures are found under it by time, and its
    executed notebooks and comparisons share fixed names. A second job is refused, naming the
    first's pid (the lock dies with its process, so a killed job leaves nothing to clear)."""
    runs.mkdir(parents=True, exist_ok=True)
    fd, pid = lock_file(runs / ".fightlab-reproduce.lock")
    if fd is None:
        raise ConfigError(f"another main job (pid {pid}) is running on the runs folder {runs}; wait "
                          f"for it, or give this one its own with FIGHTLAB_RUNS=/other/runs")
    try:
        yield
    finally:
        os.close(fd)


def drawn_figures(since: float, runs: Path | None = None, exclude: Path | None = None,
                  until: float | None = None) -> list[Path]:
    """The figures (``*/figures/*.png`` and ``.svg``) under ``runs`` (default `paths.RUNS`)
    modified between ``since`` and ``until`` (``time.time()``, 1 s of slack each side; ``until``
    default now: a file dated in the future, copied from a host whose clock runs ahead, was not
    drawn by this job), ``exclude`` and its contents left out; sorted by path."""
    until = time.time() if until is None else until
    skip = exclude.resolve() if exclude is not None else None
    return sorted(p for p in Path(runs or paths.RUNS).rglob("figures/*")
                  if p.suffix in (".png", ".svg") and p.is_file()
                  and since - 1 <= p.stat().st_mtime <= until + 1
                  and not (skip is not None and (p.resolve() == skip or skip in p.resolve().parents)))


def compare_figures(drawn: list[Path], compare_dir: Path, committed: Path | None = None) -> list[str]:
    """One line per figure in ``drawn`` against the committed figure of the same file name under
    ``committed`` (default the repository's figures/): `figure_verdicts` without the verdicts."""
    return [line for _, line in figure_verdicts(drawn, compare_dir, committed)]


#: `figure_verdicts`' verdicts, in the order the main job's summary line counts them
VERDICTS = ("same", "differs", "none", "error")


def figure_verdicts(drawn: list[Path], compare_dir: Path, committed: Path | None = None) -> list[tuple[str, str]]:
    """(verdict, line) per figure of `compare_figures`: "same", "differs", "none" (no committed
    figure of its name) or "error" (a damaged image: bytes that differ and cannot be shown). For
    each PNG that differs, the committed figure (left) and this run's (right) are written side by
    side to ``compare_dir/<name>.png`` (a file of that name replaced: this job's comparisons)."""
    out = []
    for p in drawn:
        ref, name = Path(committed or REPO_ROOT / "figures") / p.name, f"figures/{p.name}"
        try:
            if not ref.is_file():
                out.append(("none", f"{p}: no committed figure of this name"))
            elif p.stat().st_size == ref.stat().st_size and p.read_bytes() == ref.read_bytes():
                out.append(("same", f"{p}: same as the committed figure {name}"))
            elif p.suffix != ".png":
                out.append(("differs", f"{p}: differs from the committed figure {name}"))
            else:
                side = _side_by_side(ref, p, compare_dir / p.name)
                out.append(("differs", f"{p}: differs from the committed figure {name}; side by side: "
                                       f"{side}"))
        except (OSError, ValueError, SyntaxError) as e:  # PIL's errors for a damaged image
            out.append(("error", f"{p}: could not be compared with {name} ({type(e).__name__}: {e})"))
    return out


def _side_by_side(left: Path, right: Path, dst: Path) -> Path:
    """The committed figure and this run's, side by side on white, each captioned."""
    from PIL import Image, ImageDraw, ImageFont

    a, b = Image.open(left).convert("RGB"), Image.open(right).convert("RGB")
    try:
        font = ImageFont.load_default(size=max(14, a.width // 60))  # Pillow >= 10.1: a scalable font
    except TypeError:
        font = ImageFont.load_default()
    pad, cap = 20, max(28, a.width // 40)
    w, h = a.width + b.width + 3 * pad, max(a.height, b.height) + cap + 2 * pad
    img = Image.new("RGB", (w, h), "white")
    img.paste(a, (pad, pad + cap))
    img.paste(b, (2 * pad + a.width, pad + cap))
    d = ImageDraw.Draw(img)
    d.text((pad, pad // 2), f"committed: figures/{left.name}", fill="black", font=font)
    d.text((2 * pad + a.width, pad // 2), f"this run: {right}", fill="black", font=font)
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dst) as tmp:
        img.save(tmp, format="PNG")
    return dst


def job_times(root: Path | str = REPO_ROOT, gpu: str | None = None) -> "pd.DataFrame":
    """The main job's time on a GPU, notebook by notebook, from ``root``'s reproduce rows.

    Per GPU name (``gpu``: only that one), the newest full-size CUDA row of each notebook that
    ran (``ok`` 1), in notebook order, and a ``total`` row: wall_s summed, the largest
    ``gpu_mem_peak_mib``, ``notebooks`` counted (fewer than the job has: a partial job). One job's
    notebooks may come from several calls, so each row's commit and job are listed. Rows whose
    params lack a notebook, size or job (or hold other types) are not the main job's: left out.

    Returns:
      DataFrame with columns gpu, driver, notebook, commit, job, time, wall_s, gpu_mem_peak_mib,
      notebooks; empty when there are no such rows.
    """
    import json

    import pandas as pd

    cols = ["gpu", "driver", "notebook", "commit", "job", "time", "wall_s", "gpu_mem_peak_mib", "notebooks"]
    rows = results.read_rows("reproduce", root)
    if rows.empty:
        return pd.DataFrame(columns=cols)
    params = rows["params"].map(json.loads)
    text = lambda key: params.map(lambda p: p.get(key) if isinstance(p.get(key), str) else None)  # noqa: E731
    rows = rows.assign(notebook=text("notebook"), size=text("size"), job=text("job"),
                       stamp=pd.to_datetime(rows["time"], utc=True, errors="coerce"), notebooks=1)
    keep = (rows["size"] == "full") & (rows["ok"] == 1) & rows["notebook"].notna() & rows["job"].notna() \
        & rows["stamp"].notna() & ~rows["gpu"].isin(["", "cpu", "unknown"])
    if gpu is not None:
        keep &= rows["gpu"] == gpu
    rows = rows[keep].sort_values("stamp")
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for name, g in rows.groupby("gpu", sort=True):
        last = g.groupby("notebook").tail(1).sort_values("notebook")[cols]
        total = dict(gpu=name, driver=", ".join(sorted(set(last["driver"]))), notebook="total",
                     commit=", ".join(dict.fromkeys(last["commit"])), job=", ".join(dict.fromkeys(last["job"])),
                     time=last["time"].max(), wall_s=last["wall_s"].sum(),
                     gpu_mem_peak_mib=last["gpu_mem_peak_mib"].max(), notebooks=len(last))
        out += [last, pd.DataFrame([total])]
    return pd.concat(out, ignore_index=True)
