"""Reading and locking the data files under data/: UTF-8 text (gzip by name), CSV records checked
line by line, the one cross-process lock of a data/ folder, whether a path is the repository's."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import gzip
import io
import os
import threading
import zlib
from pathlib import Path

from fightlab.paths import REPO_ROOT


class MalformedRowError(ValueError):
    """A results file with a torn or malformed line (the message names the file and line)."""


def read_text(path: Path | str) -> str:
    """The UTF-8 text of a data file (results, curves, tables under data/; a name ending in
    ``.gz`` is decompressed). Raises MalformedRowError naming the file, the line and the byte of
    the first one that is not UTF-8 (a hand edit in another encoding, a damaged copy), or naming a
    ``.gz`` file that is not whole gzip, never UnicodeDecodeError or a gzip error."""
    path = Path(path)
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError; a cut file: EOFError
            if not data.startswith(b"\x1f\x8b"):  # no gzip at all: plain text under a .gz name, say
                raise MalformedRowError(f"{path}: not gzip (plain text under a .gz name?): compress it with "
                                        f"`gzip -n` or rename it to {path.name[:-3]}") from None
            raise MalformedRowError(f"{path}: not a whole gzip file ({type(e).__name__}: {e}); a torn "
                                    "copy? Restore it from git") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise MalformedRowError(f"{path}:{line}: byte {data[e.start]:#04x} at offset {e.start} is not "
                                "UTF-8; fix or remove that line by hand (fightlab writes its data files as UTF-8)") from None


def _header(path: Path) -> list[str]:
    return next(csv.reader(io.StringIO(read_text(path), newline="")), [])


_LOCKS: dict[str, list] = {}  # resolved data/ folder -> [fd, depth]: the lock is reentrant
_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def publish_lock(root: Path | str):
    """Hold the one cross-process lock of ``root/data`` (``fcntl.flock`` on the folder) while
    writing its results and curves: processes publishing side by side (jobs on several GPUs,
    packed trainings) write one at a time, and a row replacement reads and rewrites its file
    without another writer in between. Reentrant within a process. Creates ``root/data``."""
    d = Path(root) / "data"
    d.mkdir(parents=True, exist_ok=True)
    key = str(d.resolve())
    with _LOCKS_GUARD:
        take = key not in _LOCKS  # this process's first holder takes the flock
        if take:
            _LOCKS[key] = [os.open(d, os.O_RDONLY), 0]
        entry = _LOCKS[key]
        entry[1] += 1
    try:
        if take:
            fcntl.flock(entry[0], fcntl.LOCK_EX)
        yield d
    finally:
        with _LOCKS_GUARD:
            entry[1] -= 1
            if entry[1] == 0:
                os.close(entry[0])  # releases the flock
                del _LOCKS[key]


def _in_repo_data(path: Path, repo: Path | None = None) -> bool:
    """True when ``path`` (resolved, symbolic links followed) lies in the repository's own data/
    (``repo``, default :data:`~fightlab.paths.REPO_ROOT`), or is a hard link of the repository
    file at the same place below data/."""
    data = (Path(repo or REPO_ROOT) / "data").resolve()
    p = path.resolve()
    if p == data or data in p.parents:
        return True
    twin = data / path.parent.name / path.name  # data/results/<x>.csv, data/curves/<id>.csv.gz
    try:
        return p.exists() and twin.exists() and os.path.samefile(p, twin)
    except OSError:
        return False


def check_committed(path: Path, what: str, device, backend: str = "gpu", size: str | None = "full",
                    training=None, repo: Path | None = None) -> None:
    """The publish rule (`fightlab.publish.check_publish`) for a write to ``path`` where it lies in
    the repository's own data/ (:func:`_in_repo_data`, ``repo`` its root); elsewhere nothing is
    checked. The one place the results and the curves apply it, at write time. Raises
    ConfigError, one line."""
    from fightlab.publish import check_publish

    if _in_repo_data(path, repo):
        check_publish(True, device, what, size=size, backend=backend, training=training)


def _records(path: Path, ncols: int, need_id: bool = True,
             text: str | None = None) -> tuple[list[str], list[str], bool]:
    """The lines of ``path`` (header first; ``text``: its text when already read), each checked
    to be one CSV record of ``ncols`` fields with a non-empty ``run_id``; the rows' first fields
    (run_ids); and whether the file ends with a newline.

    Raises:
      MalformedRowError: naming the file and the first bad line (a torn or hand-broken row).
    """
    text = read_text(path) if text is None else text
    lines = text.splitlines()
    ids = []
    for n, line in enumerate(lines[1:], start=2):
        rec = next(csv.reader([line]), [])
        if len(rec) != ncols or (need_id and not rec[0]):
            what = "is empty" if not line.strip() else f"has {len(rec)} fields, not {ncols}"
            if len(rec) == ncols:
                what = "has an empty run_id"
            raise MalformedRowError(f"{path}:{n}: malformed row ({what}); a torn write? Fix or "
                                    "remove that line by hand (nothing is read or appended past it)")
        ids.append(rec[0])
    return lines, ids, text.endswith("\n") or not text
