"""Atomic writes, appends of whole lines, the inter-process lock, and the undo log.

Every file memctl writes goes through here: a temp file in the same directory,
fsync, rename, fsync of the directory. A process killed at any point leaves
either the old file or the new one, never half of each; an append that fails
midway is cut back to the old length.

While the store lock is held (`undo_log`, opened by `Store.lock`), each write
first records how to undo it: the old file (a hard link), the old length of an
appended file, the two names of a move, a removed file. A command that fails before its commit
is undone on the spot; one that was killed is undone (or found committed) by the
next command that takes the lock. So a change is in git whole, or not at all.
See docs/RELIABILITY.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import time
from pathlib import Path
from typing import Iterator, NamedTuple

from .errors import BadInput, LockTimeout, MemctlError, Refused


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_name(path: Path) -> Path:
    # The pid in the name lets a later process tell a dead writer's leftover from a live one's.
    return path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def dead_temp(name: str) -> bool:
    """Whether `name` is a temp file of a writer that is gone (`.<file>.<pid>.<hex>.tmp`)."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    parts = name.rsplit(".", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def sweep_temps(folder: Path) -> list[Path]:
    """Remove dead writers' temp files in `folder` (a killed process cannot clean up after itself)."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if dead_temp(entry.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


def atomic_write(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` atomically (temp file + fsync + rename)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    _record("W", path, tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_move(src: Path, dst: Path) -> None:
    """Rename `src` to `dst` (same filesystem), making sure both dirs are synced."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    _record("M", src, dst)
    os.replace(src, dst)
    _fsync_dir(dst.parent)
    _fsync_dir(src.parent)


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` on an O_APPEND descriptor, then fsync; on any error cut the file back.

    Callers hold the store lock; O_APPEND keeps even an unlocked writer from
    overwriting. When a write fails (disk full, file size limit) the file is
    truncated to its old length, so it never holds part of a record.
    """
    _record("A", path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        before = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
                os.fsync(fd)
            raise
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- the store lock

def lock_timeout() -> float:
    """MEMCTL_LOCK_TIMEOUT in seconds (default 60); a value that is not a number >= 0 is bad input."""
    raw = os.environ.get("MEMCTL_LOCK_TIMEOUT", "")
    if not raw.strip():
        return 60.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise BadInput(f"MEMCTL_LOCK_TIMEOUT={raw!r} is not a number of seconds", hint="e.g. MEMCTL_LOCK_TIMEOUT=60 (0 or more)")
    return value


@contextlib.contextmanager
def file_lock(path: Path, timeout: float | None = None, *, shared: bool = False) -> Iterator[None]:
    """An exclusive flock on `path` (`shared`: one that only excludes exclusive holders, on a lock
    file that exists already), waiting up to `timeout` seconds.

    The kernel releases the lock when the holder dies, so a killed process
    never leaves the store locked.
    """
    if timeout is None:
        timeout = lock_timeout()
    if not shared:
        path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise MemctlError(f"the lock file {path} is not a regular file",
                          hint=f"remove it (rm -r {path}); memctl makes a new one")
    fd = os.open(path, (os.O_RDONLY if shared else os.O_RDWR | os.O_CREAT) | os.O_NOFOLLOW, 0o666)
    deadline = time.monotonic() + timeout
    delay = 0.005
    try:
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"store is locked by another process ({path})",
                        hint="wait for the other memctl command to finish, "
                        "or raise MEMCTL_LOCK_TIMEOUT",
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# ---------------------------------------------------------------- links out of the store

def escapes(root: Path, path: Path) -> Path | None:
    """Where `path` really is, when following links takes it out of `root`; None while it stays inside."""
    real = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    return None if real == base or real.is_relative_to(base) else real


def refuse_escape(root: Path, path: Path) -> None:
    """Refused when a link makes `path` (or a folder on the way to it) lead out of the store."""
    real = escapes(root, path)
    if real is not None:
        shown = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        raise Refused(f"{shown} leads outside the store (to {real}) through a symbolic link; memctl does not follow it",
                      hint="replace the link with the file or folder itself, or remove it")


# ---------------------------------------------------------------- the undo log

class _Log(NamedTuple):
    path: Path  # the log file (in .memctl/undo/)
    root: Path  # the store: writes outside it are refused, writes in `skip` are not logged (but `remove_logged`)
    skip: Path  # .memctl/: derived data, rebuilt rather than undone


_LOG: _Log | None = None


def _record(op: str, path: Path, other: Path | None = None) -> None:
    """Before a write under the store lock: refuse links out of the store, log how to undo it."""
    log = _LOG
    if log is None:
        return
    path = Path(path)
    refuse_escape(log.root, path)
    if op == "M":
        assert other is not None
        refuse_escape(log.root, other)
    if Path(os.path.abspath(path)).is_relative_to(log.skip):
        return
    if op == "W":
        # The old file survives the rename under a second name: keeping it costs no copy.
        backup = ""
        if path.exists():
            backup = str(log.path.parent / f"{os.getpid()}.{os.urandom(6).hex()}")
            try:
                os.link(path, backup)
            except OSError:
                import shutil  # noqa: PLC0415  (a file system without hard links)

                shutil.copy2(path, backup)
        fields = ("W", str(path), backup, str(other))
    elif op == "A":
        size = path.stat().st_size if path.exists() else -1
        fields = ("A", str(path), str(size), "")
    else:
        fields = ("M", str(path), str(other), "")
    _log_record(log, fields)


def _log_record(log: _Log, fields: tuple[str, ...]) -> None:
    record = b"".join(os.fsencode(f) + b"\0" for f in fields)
    fd = os.open(log.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, record)
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_logged(path: Path) -> None:
    """Remove `path`, which the undo log puts back if the change is undone, even in `.memctl/`
    (machine-local data that is not derived: the access rows being moved, access.py). The file
    goes into the log's folder (a rename: `.memctl/` is one file system) and stays there until
    the change is committed or undone."""
    log = _LOG
    if log is None:
        path.unlink()
        return
    refuse_escape(log.root, path)
    backup = log.path.parent / f"{os.getpid()}.{os.urandom(6).hex()}"
    _log_record(log, ("D", str(path), str(backup), ""))
    os.replace(path, backup)
    _fsync_dir(path.parent)
    _fsync_dir(backup.parent)


class Undo(NamedTuple):
    op: str  # W (replace), A (append), M (move), D (remove)
    path: str
    arg: str  # W, D: the old file's backup (W: "" = it did not exist); A: old size (-1 = new); M: where it went
    tmp: str  # W: the temp file


def read_undo(log_path: Path) -> list[Undo]:
    """The records of an undo log; a torn last record (its write never finished) is left out."""
    try:
        raw = log_path.read_bytes()
    except FileNotFoundError:
        return []
    fields = raw.split(b"\0")[:-1]  # each field ends with NUL: the part after the last one is torn
    return [Undo(*(os.fsdecode(f) for f in fields[i:i + 4])) for i in range(0, len(fields) - len(fields) % 4, 4)]


def touched(records: list[Undo]) -> list[Path]:
    """Every path an undo log's writes changed (both names of a move)."""
    paths: list[Path] = []
    for rec in records:
        paths.append(Path(rec.path))
        if rec.op == "M":
            paths.append(Path(rec.arg))
    return list(dict.fromkeys(paths))


def rollback(log_path: Path) -> list[Path]:
    """Undo the logged writes, newest first; return the paths put back. The log is then cleared."""
    records = read_undo(log_path)
    _undo(records)
    clear_undo(log_path)
    return touched(records)


def savepoint() -> int | None:
    """Where the active undo log stands (its size), for rollback_to; None when no write is logged."""
    if _LOG is None:
        return None
    try:
        return os.path.getsize(_LOG.path)
    except FileNotFoundError:
        return 0


def rollback_to(mark: int | None) -> None:
    """Undo the writes logged since `mark` (newest first) and drop them from the log: a write made
    inside another's lock that failed is undone as its own lock would have undone it, the outer
    write's earlier changes stay logged."""
    if _LOG is None or mark is None:
        return
    try:
        with open(_LOG.path, "rb") as handle:
            handle.seek(mark)
            tail = handle.read()
    except FileNotFoundError:
        return
    fields = tail.split(b"\0")[:-1]
    records = [Undo(*(os.fsdecode(f) for f in fields[i:i + 4])) for i in range(0, len(fields) - len(fields) % 4, 4)]
    _undo(records)
    for rec in records:  # their temp files; the backups were consumed putting the old files back
        if rec.op == "W" and rec.tmp:
            with contextlib.suppress(OSError):
                os.unlink(rec.tmp)
    fd = os.open(_LOG.path, os.O_WRONLY)
    try:
        os.ftruncate(fd, mark)
        os.fsync(fd)
    finally:
        os.close(fd)


def _undo(records: list[Undo]) -> None:
    for rec in reversed(records):
        path = Path(rec.path)
        if rec.op == "W":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(rec.tmp)
            if rec.arg:
                if os.path.exists(rec.arg):
                    os.replace(rec.arg, path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        elif rec.op == "A":
            size = int(rec.arg)
            if size < 0:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            elif path.exists() and path.stat().st_size > size:
                os.truncate(path, size)
        elif rec.op in ("M", "D"):
            if os.path.exists(rec.arg) and not path.exists():
                os.replace(rec.arg, path)
        _fsync_dir(path.parent)


def clear_undo(log_path: Path) -> None:
    """Forget the logged writes (they are committed, or kept on purpose), their backups and their temp files."""
    folder = log_path.parent
    for rec in read_undo(log_path):
        if rec.op == "W" and rec.tmp:  # a write killed before its rename: the path never changed
            with contextlib.suppress(OSError):
                os.unlink(rec.tmp)
    with contextlib.suppress(FileNotFoundError):
        log_path.unlink()
    if folder.is_dir():
        for leftover in folder.iterdir():
            with contextlib.suppress(OSError):
                leftover.unlink()


def written() -> list[Path]:
    """The paths the writes logged so far under the store lock changed (none outside it)."""
    return touched(read_undo(_LOG.path)) if _LOG is not None else []


def undoing() -> bool:
    """Whether the writes being made now are logged, so that an error undoes them."""
    return _LOG is not None


def settle() -> None:
    """The change so far is committed: it is no longer undone if the command fails later."""
    if _LOG is not None:
        clear_undo(_LOG.path)


@contextlib.contextmanager
def undo_log(log_path: Path, root: Path, skip: Path) -> Iterator[None]:
    """Log every write made inside, and undo them all if the block raises (see the module doc)."""
    global _LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _LOG = _Log(log_path, Path(os.path.abspath(root)), Path(os.path.abspath(skip)))
    try:
        yield
    except BaseException:
        _LOG = None
        rollback(log_path)
        raise
    finally:
        _LOG = None
    clear_undo(log_path)
