"""Run folders: created by fightlab, one writer at a time, and a fresh run deletes only what
fightlab wrote there.

A run folder holds a manifest, ``.fightlab-run.json`` (the files fightlab wrote, relative
paths), and a lock file, ``.fightlab-run.lock`` (the pid of the process writing the folder,
held with `lock_file`: a lock left by a killed process is stale and taken over).

    with RunDir("runs/train/simple-1024-s0", fresh=True) as rd:   # ConfigError if refused
        ...write rd.path / "rows.csv"...
        rd.add("rows.csv")                                          # recorded in the manifest

Refused (``RunDirError``, one line naming the folder and why): a path that is not a folder or a
protected place (`check_location`); a non-empty folder without a manifest; for a fresh run, a
folder holding run files (rows, checkpoints, result rows, curves) its manifest does not list; a
folder another live process holds.

Every file fightlab writes goes through `atomic_path` / `atomic_write`: a temporary beside it,
flushed to disk, renamed over it (``os.replace``), so a kill leaves the old file or the new one,
never a torn one; a failed write (a full disk) removes its temporary and raises one ``OSError``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
from pathlib import Path
from typing import Iterator

from fightlab.meta import utc_now
from fightlab.paths import REPO_ROOT
from fightlab.errors import ConfigError

MANIFEST = ".fightlab-run.json"
LOCK = ".fightlab-run.lock"
FORMAT = "fightlab-run-1"
#: a checkpoint's file name, ``ckpt_<iteration>.pt`` (`run.checkpoint.save_checkpoint`: six digits
#: or more, past iteration 999999); group 1 the iteration
CHECKPOINT_NAME = re.compile(r"^ckpt_(\d{6,})\.pt$")

__all__ = ["RunDir", "RunDirError", "MANIFEST", "LOCK", "CHECKPOINT_NAME", "check_location",
           "check_folder", "atomic_path", "atomic_write", "write_error", "lock_file",
           "listed_path"]


def write_error(e: BaseException, path: Path | str) -> OSError | None:
    """The one-line ``OSError`` naming ``path`` for a failed write ``e``: a full disk or quota
    (``OSError`` ENOSPC / EDQUOT, or torch's ``RuntimeError`` around it: "No space left on
    device", "file write failed") as ENOSPC naming ``path``, any other ``OSError`` as it is;
    None when ``e`` is not a write failure (a bug: let it raise as it is)."""
    said = ("No space left", "write failed", "Disk quota")
    full = e.errno in (errno.ENOSPC, errno.EDQUOT) if isinstance(e, OSError) else \
        isinstance(e, RuntimeError) and any(m in str(e) for m in said)
    if full:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return e if isinstance(e, OSError) else None  # an OSError's own message names its file


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem opens folders
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: Path | str, tmp: Path | str | None = None) -> Iterator[Path]:
    """Write ``path`` atomically (see the module docstring): yields the temporary to write
    (``tmp``, default ``<name>.tmp`` beside it), fsynced and renamed over ``path`` when the block
    ends without error; on an error it is removed and a failed write raised as `write_error`.

        with atomic_path(folder / "fig.png") as tmp:
            fig.savefig(tmp, format="png")
    """
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else path.with_name(path.name + ".tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        err = write_error(e, path) if isinstance(e, Exception) else None
        if err is not None and err is not e:
            raise err from None
        raise
    _fsync_dir(path.parent)


def atomic_write(path: Path | str, data: bytes | str, tmp: Path | str | None = None) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` through :func:`atomic_path`; returns it."""
    with atomic_path(path, tmp) as t:
        t.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def lock_file(path: Path | str) -> tuple[int | None, str]:
    """Take the exclusive ``flock`` of ``path`` (created) without waiting, the one-writer lock of a
    run folder, a batch folder and the main job: (descriptor, the pid text left there by an
    earlier holder, "" if none) with this process's pid written in its place, or (None, the live
    holder's pid, "?" if it wrote none). The kernel drops the lock when its holder dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        return None, holder
    old = os.pread(fd, 64, 0).decode(errors="replace").strip()
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd, old


class RunDirError(ConfigError):
    """A run folder that may not be used (not fightlab's, a protected place, or in use)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return True


def _inside(p: Path, folder: Path) -> bool:
    return p == folder or folder in p.parents


def listed_path(folder: Path, rel: str) -> Path | None:
    """Manifest entry ``rel`` as a path inside run folder ``folder`` (resolved), None when it
    points outside (absolute, ``..``, or through a link)."""
    p = folder / rel
    inside = not Path(rel).is_absolute() and ".." not in Path(rel).parts
    return p if inside and _inside(p.parent.resolve(), folder) else None


def check_location(path: Path | str) -> Path:
    """Resolve ``path`` and refuse places a run must never write into or clean up: the filesystem
    root, ``$HOME``, the repository or a folder above it, a folder holding ``.git`` (a checkout)
    or ``data/results`` without a run manifest (a results root), inside the repository anything
    but ``runs/``, a folder whose ``data/`` is a symbolic link. Returns the resolved path.

    Raises:
      RunDirError: naming the folder and the reason.
    """
    p = Path(path).expanduser().resolve()
    home = Path.home().resolve()
    repo = REPO_ROOT.resolve()
    why = None
    if p == Path(p.anchor):
        why = "it is the filesystem root"
    elif p == home:
        why = "it is $HOME"
    elif p == repo or p in repo.parents:
        why = "it is the repository root or a folder above it"
    elif (p / ".git").exists():
        why = "it holds .git (a checkout)"
    elif (p / "data" / "results").exists() and not (p / MANIFEST).is_file():
        why = "it holds data/results and is not a fightlab run folder (a results root)"
    elif _inside(p, repo) and not _inside(p, (repo / "runs").resolve()):
        why = "inside the repository, run folders live under runs/ (git-ignored)"
    elif any((p / sub).is_symlink() for sub in ("data", "data/results", "data/curves")):
        why = "its data/ (or data/results, data/curves) is a symbolic link: rows would land elsewhere"
    if why:
        raise RunDirError(f"run folder {str(path)!r} refused: {why}; choose a new folder, "
                          "e.g. under runs/")
    if p.exists() and not p.is_dir():
        raise RunDirError(f"run folder {str(path)!r} exists and is not a folder")
    return p


def _few(names: list[str]) -> str:
    """The first four of ``names`` for a message, "..." after them when there are more."""
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def _not_ours(path: Path, entries: list[str]) -> RunDirError:
    """The refusal of a non-empty folder fightlab did not make (no manifest), its first entries shown."""
    return RunDirError(f"run folder {str(path)!r} is not empty ({_few(entries)}) and was not made by "
                       f"fightlab (no {MANIFEST}): a run deletes only what it wrote; choose a new or "
                       "empty folder")


def _in_use(path: Path, holder: str) -> RunDirError:
    """The refusal of a folder whose lock a live process (pid ``holder``) holds."""
    who = "this process" if holder == str(os.getpid()) else "another fightlab process"
    return RunDirError(f"run folder {str(path)!r} is in use by {who} (pid {holder}); wait for it to "
                       "end or choose another folder")


def check_folder(run_dir: str | Path, fresh: bool, in_use: bool = True) -> Path:
    """Refuse ``run_dir`` as `RunDir` would, creating, writing and locking nothing (the gate's
    check before the run says anything): `check_location`, a non-empty folder fightlab did not
    make (``fresh``), with ``in_use`` a folder another live process holds. Returns the resolved path.

    Raises:
      RunDirError: one line naming the folder and the reason.
    """
    p = check_location(run_dir)
    if not p.is_dir():
        return p
    entries = sorted(e.name for e in p.iterdir() if e.name != LOCK)
    if fresh and entries and not (p / MANIFEST).is_file():
        raise _not_ours(p, entries)
    if not in_use or not (p / LOCK).is_file():
        return p
    fd = os.open(p / LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # only tried: a holder's lock is exclusive
    except BlockingIOError:
        raise _in_use(p, os.pread(fd, 64, 0).decode(errors="replace").strip() or "?") from None
    finally:
        os.close(fd)  # drops the shared lock tried above, never the holder's
    return p


class RunDir:
    """Claim a run folder for this process (see the module docstring).

    Args:
      path: the folder (created with its parents when missing).
      fresh: a new run: delete the files the manifest lists (an earlier run's, written by
        fightlab) and start an empty manifest; False (a resumed run) keeps them. A folder
        without a manifest may be resumed only when every file in it is a run's
        (:meth:`_foreign` finds none): those are adopted into a new manifest.
      resume: the checkpoint being resumed (its name may be anything; it is never listed).
    Attributes:
      path: resolved Path; removed: relative paths deleted by a fresh claim.
    Raises:
      RunDirError: the folder is refused (see the module docstring; in use: names the pid).
    """

    def __init__(self, path: Path | str, fresh: bool, resume: Path | str | None = None):
        self._fd: int | None = None
        self._resume = None if resume is None else Path(resume).name
        self.path = check_location(path)
        self.removed: list[str] = []
        self.stale_pid: int | None = None
        if self.path.exists():
            self._check_ours(allow_adopt=not fresh)
        lock_was_there = (self.path / LOCK).exists()
        # what this claim makes (folders, manifest, lock): `abandon` removes them after a failed start
        self._made = dict(folders=[d for d in (self.path, *self.path.parents) if not d.exists()],
                          manifest=not (self.path / MANIFEST).exists(), lock=not lock_was_there)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock()
        except OSError as e:
            raise RunDirError(f"run folder {str(path)!r} cannot be made or locked "
                              f"({type(e).__name__}: {e.strerror or e})") from None
        try:
            self._check_ours(allow_adopt=not fresh)  # again, now that we hold the lock
            manifest = self._read()
            if self._resume == "latest.pt" and not (self.path / "latest.pt").is_symlink() and (
                    manifest is None or "latest.pt" not in manifest["files"]):
                raise RunDirError(f"{str(self.path / 'latest.pt')!r} is not fightlab's link (a copied "
                                  "checkpoint?) and a run replaces its latest.pt: rename it, e.g. to "
                                  "start.pt, and resume that")
            if manifest is None:  # new folder, or adopting a pre-manifest one (only run files:
                # `_check_ours`) but for the resumed checkpoint, the user's, never listed
                files = [] if fresh else [r for r in self._run_files() if r != self._resume]
                manifest = dict(format=FORMAT, created=utc_now(), files=files)
            if fresh:
                unlisted = [r for r in self._run_files() if r not in manifest["files"]]
                if unlisted:
                    raise RunDirError(
                        f"run folder {str(self.path)!r} holds run files that its manifest does not "
                        f"list ({_few(unlisted)}): "
                        "fightlab did not write them, so a fresh run would mix with them; move "
                        "them aside or choose a new folder")
                self.removed = self._clean(manifest["files"])
                manifest = dict(format=FORMAT, created=utc_now(), files=[])
            manifest["pid"] = os.getpid()
            self._write(manifest)
        except BaseException:
            self.release()
            if not lock_was_there and not (self.path / MANIFEST).exists():
                (self.path / LOCK).unlink(missing_ok=True)  # a refused claim leaves nothing behind
            raise

    # -- ownership -----------------------------------------------------------------------------
    def _entries(self) -> list[str]:
        return sorted(p.name for p in self.path.iterdir() if p.name != LOCK)

    def _run_files(self) -> list[str]:
        """Files at the names a training writes (rows, checkpoints and their temporaries, its row
        and curve): a fresh run would overwrite or mix with any of them the manifest does not list."""
        pats = ("rows.csv", "rows.csv.tmp", "latest.pt", "latest.pt.tmp", "ckpt_*.pt", "ckpt_*.tmp",
                "data/results/train.csv", "data/curves/*.csv", "data/curves/*.csv.gz")
        return sorted({str(p.relative_to(self.path)) for pat in pats for p in self.path.glob(pat)
                       if (p.is_file() or p.is_symlink())
                       and (not p.name.startswith("ckpt_") or CHECKPOINT_NAME.match(p.with_suffix(".pt").name))})

    def _foreign(self) -> list[str]:
        """Files of a manifest-less folder that are not a fightlab run's: not at a name a training
        writes (:meth:`_run_files`), or not of its kind (a ``latest.pt`` that is no link, a
        ``rows.csv`` without the runner's header); the checkpoint being resumed is fine."""
        ours = set(self._run_files())
        out = []
        for p in sorted(self.path.rglob("*")):
            rel = str(p.relative_to(self.path))
            if p.is_dir() and not p.is_symlink() or rel in (LOCK, self._resume):
                continue
            if rel == "latest.pt" and not p.is_symlink():
                out.append(rel)
            elif rel == "rows.csv":
                with open(p, newline="") as f:
                    if not f.readline().startswith("iteration,"):
                        out.append(rel)
            elif rel not in ours:
                out.append(rel)
        return out

    def _check_ours(self, allow_adopt: bool) -> None:
        if (self.path / MANIFEST).is_file() or not self._entries():
            return
        if allow_adopt:
            foreign = self._foreign()
            if not foreign:
                return
            raise RunDirError(f"run folder {str(self.path)!r} has no {MANIFEST} and holds files "
                              f"that are not a fightlab run's ({_few(foreign)}): a resume there could "
                              "overwrite them; copy the checkpoint into a new, empty folder and "
                              "resume from there")
        raise _not_ours(self.path, self._entries())

    def _read(self) -> dict | None:
        p = self.path / MANIFEST
        if not p.exists():
            return None
        try:
            m = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise RunDirError(f"{p}: unreadable run manifest ({type(e).__name__}: {e}); move the "
                              "folder aside or choose a new one") from None
        if not (isinstance(m, dict) and m.get("format") == FORMAT and isinstance(m.get("files"), list)
                and all(isinstance(f, str) for f in m["files"])):
            raise RunDirError(f"{p}: not a fightlab run manifest (format {FORMAT!r} with a list "
                              "of files expected); move the folder aside or choose a new one")
        return m

    def _write(self, manifest: dict) -> None:
        atomic_write(self.path / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")

    def _clean(self, files: list[str]) -> list[str]:
        removed = []
        for rel in files:
            p = listed_path(self.path, rel)
            if p is None or not (p.exists() or p.is_symlink()) or (p.is_dir() and not p.is_symlink()):
                continue
            p.unlink()
            removed.append(rel)
            d = p.parent  # drop folders that the removal left empty, up to the run folder
            while d != self.path and d.is_dir() and not any(d.iterdir()):
                d.rmdir()
                d = d.parent
        return removed

    def add(self, *rel: str | Path) -> None:
        """Record files this run wrote (paths relative to the folder, or absolute inside it)."""
        m = self._read() or dict(format=FORMAT, created=utc_now(), files=[])
        for r in rel:
            r = Path(r)
            if r.is_absolute():
                try:
                    r = r.resolve().relative_to(self.path)
                except ValueError:
                    raise RunDirError(f"{r} is not inside the run folder {self.path} (a symbolic "
                                      "link?): not recorded") from None
            if str(r) not in m["files"]:
                m["files"].append(str(r))
        self._write(m)

    def claim(self, *rel: str) -> None:
        """`add` files this run is about to write, refusing (RunDirError, nothing written) when one
        exists at that name, is no link and the manifest does not list it: a file fightlab did not
        write (a copied checkpoint) is never replaced."""
        listed = set(self.files())
        theirs = [r for r in rel if r not in listed and (self.path / r).exists() and not (self.path / r).is_symlink()]
        if theirs:
            raise RunDirError(f"{str(self.path / theirs[0])!r} was not written by this run (not in its "
                              f"{MANIFEST}; a copied checkpoint?) and would be replaced: rename it, e.g. "
                              "to start.pt, and resume that")
        self.add(*rel)

    def abandon(self) -> None:
        """After a start that failed (out of memory, a refused restore): release the lock and, when
        none of the files the manifest lists exists (the run wrote nothing), remove the manifest,
        lock and folders this claim made; anything else in the folder stays."""
        self.release()
        made = getattr(self, "_made", None)
        if not made or not made["manifest"] or any((self.path / r).exists() for r in self.files()):
            return
        for name, mine in ((MANIFEST, True), (LOCK, made["lock"])):
            if mine:
                (self.path / name).unlink(missing_ok=True)
        for d in made["folders"]:  # innermost first; only the empty ones this claim made
            with contextlib.suppress(OSError):
                d.rmdir()

    def files(self) -> list[str]:
        """The files the manifest lists (relative paths: what fightlab wrote here)."""
        return list((self._read() or {}).get("files", []))

    def forget(self, *rel: str) -> None:
        """Drop files this run deleted from the manifest (a file later put at that name by
        someone else is then never taken for fightlab's)."""
        m = self._read()
        if m is not None:
            m["files"] = [f for f in m["files"] if f not in {str(r) for r in rel}]
            self._write(m)

    # -- lock ----------------------------------------------------------------------------------
    def _lock(self) -> None:
        fd, old = lock_file(self.path / LOCK)
        if fd is None:
            raise _in_use(self.path, old)
        if old.isdigit() and int(old) != os.getpid():
            self.stale_pid = int(old)  # its holder is gone: the kernel dropped its flock
            state = "not running" if not _pid_alive(self.stale_pid) else "no longer holding it"
            print(f"run folder {self.path}: taking over a stale lock of pid {old} ({state})", flush=True)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent). The lock file stays, empty: an empty or dead pid is free."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # drops the flock
            self._fd = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        self.release()
