"""Where things live: every default path of fightlab resolves from the repository, never from the
current directory, so notebooks run the same from JupyterLab (whose kernels start in
``notebooks/``), papermill (``--cwd`` anything) and the command line (any directory).

    from fightlab.paths import REPO_ROOT, RUNS
    RUNS / "train"                    # the default training runs folder
    results.read_rows("train", REPO_ROOT)

Paths a user passes on the command line (``--run-dir foo``, a checkpoint) stay relative to their
current directory as usual. ``RUNS`` is moved for a process and everything it starts (papermill's
kernels, batch jobs; the test suite, to a temporary folder) by ``FIGHTLAB_RUNS``, read once at
import (`runs_folder`, `runs_problem`).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the source tree: the repository root when fightlab is installed editable or run from a checkout
REPO_ROOT = Path(__file__).resolve().parent.parent
#: the environment variable that moves :data:`RUNS` (unset or empty: the repository's runs/)
RUNS_ENV = "FIGHTLAB_RUNS"


def runs_folder(value: str | None = None) -> Path:
    """The runs folder for ``value`` (default: ``$FIGHTLAB_RUNS``): ``REPO_ROOT/runs`` when unset
    or empty, else that path with ``~`` expanded, a relative one from ``REPO_ROOT``."""
    value = os.environ.get(RUNS_ENV, "") if value is None else value
    if not value.strip():
        return REPO_ROOT / "runs"
    return REPO_ROOT / Path(value).expanduser()  # an absolute path replaces REPO_ROOT


def runs_problem(path: Path | None = None) -> str | None:
    """Why ``path`` (default :data:`RUNS`) cannot be the runs folder, one clause naming
    ``FIGHTLAB_RUNS`` and the value, or None (the command line and the main job refuse to start on
    one). A runs folder is a folder (or not there yet) named ``runs`` or below one (clean-ups
    refuse scratch folders elsewhere), inside the repository only as its ``runs/``, never the
    filesystem root, ``$HOME`` or a folder holding the repository."""
    path = Path(RUNS if path is None else path)
    said = f"{RUNS_ENV}={os.environ.get(RUNS_ENV, '')!r} ({path})"
    resolved, repo = path.resolve(), REPO_ROOT.resolve()
    if resolved.exists() and not resolved.is_dir():
        return f"{said} is a file, not a folder"
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve() or resolved in repo.parents \
            or resolved == repo:
        return f"{said} is the filesystem root, $HOME or a folder holding the repository"
    if repo in resolved.parents and not (resolved == repo / "runs" or (repo / "runs") in resolved.parents):
        return f"{said} is inside the repository's source tree (only its runs/ may hold runs)"
    if "runs" not in resolved.parts:
        return f"{said} is not a folder named runs nor inside one"
    return None


#: git-ignored run folders (executed notebooks, checkpoints, unpublished rows); FIGHTLAB_RUNS moves it
RUNS = runs_folder()
#: the numbered notebooks
NOTEBOOKS = REPO_ROOT / "notebooks"

__all__ = ["NOTEBOOKS", "REPO_ROOT", "RUNS", "RUNS_ENV", "runs_folder", "runs_problem"]
