"""Atomic writes, appends of whole lines, and the inter-process lock.

Every file memctl writes goes through here: a temp file in the same directory,
fsync, rename, fsync of the directory. A process killed at any point leaves
either the old file or the new one, never half of each.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

from .errors import LockTimeout


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


def atomic_write(path: Path, data: bytes | str) -> None:
    """Replace `path` with `data` atomically (temp file + fsync + rename)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    import tempfile  # noqa: PLC0415  (~5 ms of start-up; appends do not need it)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
    os.replace(src, dst)
    _fsync_dir(dst.parent)
    _fsync_dir(src.parent)


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` with one write(2) on an O_APPEND descriptor, then fsync.

    Callers hold the store lock; O_APPEND keeps even an unlocked writer from
    overwriting, and a single write keeps a record from being interleaved.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def file_lock(path: Path, timeout: float | None = None) -> Iterator[None]:
    """An exclusive flock on `path`, waiting up to `timeout` seconds.

    The kernel releases the lock when the holder dies, so a killed process
    never leaves the store locked.
    """
    if timeout is None:
        timeout = float(os.environ.get("MEMCTL_LOCK_TIMEOUT", "60"))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    deadline = time.monotonic() + timeout
    delay = 0.005
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
