"""The survey's task on a rented host (``bench.sky.yaml``: workdir, disk, envs, setup = the host
check and ``pip install -e .``, run = bench; the same as one bash script for a vastai-picked host),
and the workdir upload as SkyPilot builds it from ``.skyignore`` (checked before anything is rented).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Sequence

from fightlab.config import ConfigError
from fightlab.paths import REPO_ROOT

__all__ = ["TASK_YAML", "SKYIGNORE", "UPLOAD_LIMIT_BYTES", "UPLOAD_DATA_FILES", "REMOTE_WORKDIR", "read_task",
           "task_script", "upload_set", "check_upload"]

#: the survey's SkyPilot task (workdir, disk, envs, setup, run)
TASK_YAML = REPO_ROOT / "fightlab" / "survey" / "bench.sky.yaml"
#: what the upload leaves out (replaces .gitignore for SkyPilot)
SKYIGNORE = REPO_ROOT / ".skyignore"
#: the upload's limit [bytes] (the study: 57 MB took 17 min to slow hosts; 1.4 MB fixed it). Most
#: of the upload is data/results/train.csv, which grows ≈ 2.8 kB a training row (622 kB at 224)
UPLOAD_LIMIT_BYTES = 3 * 10**6
#: the only data/ files the upload may hold: the tables bench reads (headline, expected speed,
#: the auto-nworld sweep)
UPLOAD_DATA_FILES = ("data/results/train.csv", "data/results/bench.csv", "data/results/sweep.csv")
#: where SkyPilot puts the workdir on the host (sky/skylet/constants.py SKY_REMOTE_WORKDIR)
REMOTE_WORKDIR = "~/sky_workdir"


def read_task(path: Path | str = TASK_YAML) -> dict:
    """The task YAML as a dict (``workdir``, ``resources.disk_size``, ``envs``, ``setup``, ``run``).
    Raises ConfigError: not a mapping, or no setup / run / disk_size."""
    import yaml

    task = yaml.safe_load(Path(path).read_text())
    if not isinstance(task, dict) or not task.get("setup") or not task.get("run") or \
            not isinstance(task.get("resources"), dict) or "disk_size" not in task["resources"]:
        raise ConfigError(f"{path}: a SkyPilot task with setup, run and resources.disk_size is expected")
    return task


def task_script(task: dict, envs: Sequence[tuple[str, str]]) -> str:
    """The bash script a vastai-picked host runs (``bash -s`` in its workdir): the task's envs
    with ``envs`` over them, its setup, then (when setup succeeded) its run; the exit status is
    setup's or run's, as ``sky launch`` runs them."""
    merged = {str(k): "" if v is None else str(v) for k, v in (task.get("envs") or {}).items()}
    merged.update(envs)
    lines = ["# fightlab survey task: fightlab/survey/bench.sky.yaml's envs, setup and run"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in merged.items()]
    for part, tag in (("setup", "FIGHTLAB_SETUP"), ("run", "FIGHTLAB_RUN")):
        lines += [f"bash <<'{tag}' || exit $?", task[part].rstrip("\n"), tag]
    return "\n".join(lines) + "\n"


def _excluded(root: Path) -> set[str]:
    """SkyPilot 0.14.1's reading of .skyignore (sky/data/storage_utils.py
    get_excluded_files_from_skyignore): ``/x`` anchored at the root, any other line at every
    depth (``**/x``), globbed; relative paths."""
    import glob

    out: set[str] = set()
    ignore = root / ".skyignore"
    if not ignore.is_file():
        raise ConfigError(f"{ignore} is missing: without it SkyPilot uploads by .gitignore's rules")
    for line in ignore.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pat = "." + line if line.startswith("/") else "**/" + line
        for m in glob.glob(os.path.join(str(root), pat), recursive=True):
            out.add(os.path.relpath(m, root))
    return out


def upload_set(root: Path | str = REPO_ROOT) -> list[tuple[str, int]]:
    """(relative path, bytes) of every file the workdir upload holds: the walk SkyPilot 0.14.1
    zips (sky/data/storage_utils.py zip_files_and_folders). Raises ConfigError: no .skyignore."""
    root = Path(root)
    excl = {os.path.join(str(root), e.rstrip("/")) for e in _excluded(root)}
    files = []
    for d, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(x for x in dirs if os.path.join(d, x) not in excl)
        for n in sorted(names):
            p = os.path.join(d, n)
            if p not in excl and not os.path.islink(p):
                files.append((os.path.relpath(p, root), os.path.getsize(p)))
    return files


def check_upload(root: Path | str = REPO_ROOT, limit: int = UPLOAD_LIMIT_BYTES) -> tuple[int, int]:
    """(files, bytes) of the upload. Raises ConfigError: over ``limit`` (naming the largest files),
    or holding a run folder (``runs/``) or a data/ file bench does not read (`UPLOAD_DATA_FILES`)."""
    files = upload_set(root)
    total = sum(s for _, s in files)
    odd = [p for p, _ in files if p.split(os.sep)[0] == "runs" or
           (p.split(os.sep)[0] == "data" and p.replace(os.sep, "/") not in UPLOAD_DATA_FILES)]
    if odd:
        raise ConfigError(f"the upload holds {len(odd)} file(s) bench does not need, e.g. "
                          f"{', '.join(odd[:3])}: add them to .skyignore")
    if total > limit:
        big = ", ".join(f"{p} ({s / 1e6:.2f} MB)" for p, s in sorted(files, key=lambda x: -x[1])[:3])
        raise ConfigError(f"the upload is {total / 1e6:.2f} MB, over the {limit / 1e6:g} MB limit; "
                          f"largest: {big}: add them to .skyignore")
    return len(files), total
