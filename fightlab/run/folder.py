"""A run folder's refusals at the gate (`run.launch.plan_run`), before the run says anything.

`rundir.RunDir` claims the folder when the run starts and refuses it there too; checking the
same rules at the gate first means a refused command prints its one line and nothing before it
(the task warning, a compile notice). Nothing is created, written or locked here.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from fightlab.rundir import LOCK, MANIFEST, RunDirError, check_location

__all__ = ["check_run_folder"]


def check_run_folder(run_dir: str | Path, fresh: bool) -> None:
    """Refuse ``run_dir`` as `rundir.RunDir` would: a place no run may use
    (`rundir.check_location`), a non-empty folder fightlab did not make (a fresh run), a folder
    another live process holds.

    Raises:
      RunDirError: one line naming the folder and the reason.
    """
    p = check_location(run_dir)
    if not p.is_dir():
        return
    entries = sorted(e.name for e in p.iterdir() if e.name != LOCK)
    if fresh and entries and not (p / MANIFEST).is_file():
        shown = ", ".join(entries[:4]) + (", ..." if len(entries) > 4 else "")
        raise RunDirError(f"run folder {str(p)!r} is not empty ({shown}) and was not made by fightlab "
                          f"(no {MANIFEST}): a run deletes only what it wrote; choose a new or empty folder")
    if not (p / LOCK).is_file():
        return
    fd = os.open(p / LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # only tried: a holder's lock is exclusive
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        who = "this process" if holder == str(os.getpid()) else "another fightlab process"
        raise RunDirError(f"run folder {str(p)!r} is in use by {who} (pid {holder}); wait for it to "
                          "end or choose another folder") from None
    finally:
        os.close(fd)  # drops the shared lock tried above, never the holder's
