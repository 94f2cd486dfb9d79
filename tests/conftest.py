"""The suite runs in temporary folders only: nothing it runs may write the user's runs/.

At import (before any test module imports fightlab) ``FIGHTLAB_RUNS`` is pointed at a fresh
temporary ``.../runs`` folder, so ``fightlab.paths.RUNS`` and every default run folder, in this
process and in what it starts (papermill's kernels, ``python -m fightlab`` subprocesses, batch jobs),
lands there. The real runs folders (the repository's ``runs/`` and a ``FIGHTLAB_RUNS`` the caller
had set) are snapshot at the session's start and compared at its end: anything the session
created, changed or removed there fails the session (exit code 1), its paths listed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV = "FIGHTLAB_RUNS"

if "fightlab.paths" in sys.modules:  # RUNS is read once, at import: too late to move it
    raise RuntimeError("fightlab was imported before tests/conftest.py could set FIGHTLAB_RUNS")

#: the runs folders that are the user's (never written by the suite)
REAL_RUNS = list(dict.fromkeys(
    [REPO_ROOT / "runs"] + ([REPO_ROOT / Path(os.environ[ENV]).expanduser()] if os.environ.get(ENV, "").strip() else [])))
_TMP = Path(tempfile.mkdtemp(prefix="fightlab-tests-"))
#: where the suite's run folders go (named runs: scratch clean-ups want a runs folder)
TEST_RUNS = _TMP / "runs"
TEST_RUNS.mkdir()
os.environ[ENV] = str(TEST_RUNS)


#: the suite's own temporary folders, never the user's even below a runs folder of theirs
OWN = [_TMP.resolve(), (Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}").resolve()]


def tree_state(root: Path, skip: list[Path] = ()) -> dict[str, tuple]:
    """{path relative to root: (kind, size, mtime_ns)} of everything under root (links not
    followed; a missing root is empty; folders in ``skip`` left out). What a write, a new file
    or a removal changes."""
    state = {}
    if not root.is_dir():
        return state
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if (Path(dirpath) / d).resolve() not in skip]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except FileNotFoundError:  # removed while walking: absent
                continue
            kind = "dir" if p.is_dir() and not p.is_symlink() else "file"
            state[str(p.relative_to(root))] = (kind, 0 if kind == "dir" else st.st_size,
                                               0 if kind == "dir" else st.st_mtime_ns)
    return state


def state_changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """One line per path created, changed or removed between two :func:`tree_state` results."""
    lines = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    lines += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    return lines


_BEFORE: dict[Path, dict[str, tuple]] = {}


def pytest_sessionstart(session):
    for root in REAL_RUNS:
        _BEFORE[root] = tree_state(root, OWN)


def pytest_sessionfinish(session, exitstatus):
    found = []
    for root, before in _BEFORE.items():
        found += [f"{root}: {line}" for line in state_changes(before, tree_state(root, OWN))]
    if found:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")

        def say(line: str) -> None:
            tr.write_line(line, red=True) if tr is not None else print(line)

        if tr is not None:
            tr.ensure_newline()

        say(f"FAILED: the user's runs folder changed: {len(found)} paths created, changed or removed "
            f"while the tests ran (the suite's run folders belong under {TEST_RUNS}; or something "
            "else wrote there meanwhile):")
        for line in found[:20]:
            say("  " + line)
        if len(found) > 20:
            say(f"  ... and {len(found) - 20} more")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def cpu_blocks(monkeypatch):
    """Run warp's CPU blocks as cooperative fibers (real barriers), restored afterwards."""
    import warp as wp

    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)


def newton_model(name: str):
    """(MuJoCo model, slots) of a fightlab body, or of "tree": the held-out contact tree
    (`fightlab.measure.newton_study.model_of`)."""
    from fightlab.measure.newton_study import MODELS, model_of

    return model_of(MODELS[0] if name == "tree" else name)


def pytest_unconfigure(config):
    shutil.rmtree(_TMP, ignore_errors=True)  # the suite's own temporary folder, made above
