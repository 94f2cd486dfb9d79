"""Where things live: every default path of fightlab resolves from the repository, never from the
current directory, so notebooks run the same from JupyterLab (whose kernels start in
``notebooks/``), papermill (``--cwd`` anything) and the command line (any directory).

    from fightlab.paths import REPO_ROOT, RUNS
    RUNS / "train"                    # the default training runs folder
    results.read_rows("train", REPO_ROOT)

Paths a user passes on the command line (``--run-dir foo``, a checkpoint) stay relative to their
current directory as usual; only fightlab's own defaults come from here.
"""

from __future__ import annotations

from pathlib import Path

#: the source tree: the repository root when fightlab is installed editable or run from a checkout
REPO_ROOT = Path(__file__).resolve().parent.parent
#: git-ignored run folders (executed notebooks, checkpoints, unpublished rows)
RUNS = REPO_ROOT / "runs"
#: the numbered notebooks
NOTEBOOKS = REPO_ROOT / "notebooks"

__all__ = ["NOTEBOOKS", "REPO_ROOT", "RUNS"]
