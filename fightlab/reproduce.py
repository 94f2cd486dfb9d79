"""The main job: run the numbered notebooks with papermill into runs/notebooks/.

`reproduce(only=["06"], size="smoke", publish=False, device="cpu")`. Each notebook takes the
parameters `size` ("smoke": CPU-sized, seconds; "full": the GPU measurement), `device` and
`publish`; only with `publish` do notebooks write the committed data/ and figures/, and the one
publish rule (`fightlab.config.check_publish`: full size on a GPU; notebook 01's rendering needs
no GPU) is checked for every chosen notebook before the first one starts. Executed copies go to
runs/notebooks/<name>-<size>.ipynb (git-ignored). Notebooks run in notebooks/, as JupyterLab
runs them: every path in them resolves from the repository (`fightlab.paths`).

Each notebook shows a progress bar over its cells; `log_output=True` streams the cells' output
(a training's own progress bar included) instead.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from fightlab.config import ConfigError, check_publish, validate_size
from fightlab.paths import NOTEBOOKS as NOTEBOOK_DIR
from fightlab.paths import RUNS

OUT_DIR = RUNS / "notebooks"

#: notebooks whose `publish` writes a rendering (no GPU measurement): check_publish(gpu=False);
#: 07 only redraws Figure 3 from the committed tables
RENDER_ONLY = frozenset({"01", "07"})


class NotebookError(RuntimeError):
    """A notebook's cell raised; the message names the notebook, the cell, the error and where
    the executed copy (with the traceback in its outputs) went."""


def notebooks() -> dict[str, Path]:
    """Numbered notebooks present: {"06": Path(".../06_train.ipynb"), ...}."""
    return {p.name[:2]: p for p in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))}


def reproduce(only: list[str] | None = None, size: str = "smoke", publish: bool = False,
              device: str = "cpu", out_dir: Path | None = None, extra: dict | None = None,
              log_output: bool = False) -> int:
    """Execute notebooks with papermill.

    Args:
      only: notebook numbers ("06"), default all; size: "smoke" or "full"; publish: let the
        notebooks write data/ and figures/ (config.check_publish: full size on a GPU, or a
        rendering at full size); device: "cpu"/"cuda:N";
      out_dir: where executed copies go (default runs/notebooks); extra: more parameters;
      log_output: stream the cells' output instead of a progress bar per notebook.

    Returns:
      0 when every notebook ran. Raises ConfigError for an unknown notebook/size or a publish
      the rule refuses (before any notebook runs); NotebookError when a cell fails.
    """
    import papermill as pm

    size = validate_size(size)
    nbs = notebooks()
    bad = [o for o in (only or []) if not (isinstance(o, str) and re.fullmatch(r"[0-9]+", o.strip()))]
    if bad:
        raise ConfigError(f"--only takes notebook numbers such as 06, got {bad[0]!r}; notebooks: "
                          f"{', '.join(nbs) or 'none'}")
    chosen = list(nbs) if not only else list(dict.fromkeys(o.strip().zfill(2) for o in only))
    unknown = [c for c in chosen if c not in nbs]
    if unknown:
        raise ConfigError(f"unknown notebook {', '.join(unknown)}; notebooks: {', '.join(nbs) or 'none'}")
    for key in chosen:  # every refusal before the first notebook starts
        check_publish(publish, device, f"notebook {nbs[key].stem}'s results", size,
                      gpu=key not in RENDER_ONLY)
    out = (Path(out_dir) if out_dir else OUT_DIR).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for key in chosen:
        src = nbs[key]
        dst = out / f"{src.stem}-{size}.ipynb"
        params = dict(size=size, device=device, publish=publish, **(extra or {}))
        t0 = time.perf_counter()
        print(f"[reproduce] {src.name} size={size} device={device} publish={publish} -> {dst}",
              flush=True)
        stream = dict(stdout_file=sys.stdout, stderr_file=sys.stderr) if log_output else {}
        try:
            pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(NOTEBOOK_DIR),
                                kernel_name="python3", log_output=False,
                                progress_bar=False if log_output else dict(desc=src.stem, leave=True),
                                **stream)
        except pm.PapermillExecutionError as e:
            raise NotebookError(f"notebook {src.name} failed at In [{e.exec_count}] ({e.ename}: "
                                f"{e.evalue}); the executed notebook, with the traceback, is "
                                f"{dst}") from None
        print(f"[reproduce] {src.name} done in {time.perf_counter() - t0:.1f} s: {dst}", flush=True)
    return 0
