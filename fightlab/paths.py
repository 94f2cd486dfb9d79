"""Where things live: every default path of fightlab resolves from the repository, never from the
current directory, so notebooks run the same from JupyterLab (whose kernels start in
``notebooks/``), papermill (``--cwd`` anything) and the command line (any directory).

    from fightlab.paths import REPO_ROOT, RUNS
    RUNS / "train"                    # the default training runs folder
    results.read_rows("train", REPO_ROOT)

Paths a user passes on the command line (``--run-dir foo``, a checkpoint) stay relative to their
current directory as usual; only fightlab's own defaults come from here.

``RUNS`` (default ``REPO_ROOT/runs``) can be moved for a process and everything it starts
(papermill's kernels, batch jobs) with the environment variable ``FIGHTLAB_RUNS``: read once, at
import; ``~`` expanded, a relative value taken from the repository root like every default. The
test suite points it at a temporary folder so that it never writes a user's ``runs/``. Keep the
folder named ``runs`` (or below one): clean-ups refuse scratch folders outside a ``runs`` folder.
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


#: git-ignored run folders (executed notebooks, checkpoints, unpublished rows); FIGHTLAB_RUNS moves it
RUNS = runs_folder()
#: the numbered notebooks
NOTEBOOKS = REPO_ROOT / "notebooks"

__all__ = ["NOTEBOOKS", "REPO_ROOT", "RUNS", "RUNS_ENV", "runs_folder"]
