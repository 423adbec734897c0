"""A resident watch over the fact folders, so that a command need not stat every fact file.

Every command that reads the recall index first checks it against the files: one
stat per fact file (rindex._sync_facts), about 45 ms at 10,000 facts on a slow
VM, which no folder mtime can replace (an in-place write does not move it). The
embed-server (`memctl embed-server`, which the SessionStart hook starts) also
keeps an inotify(7) watch on `memory/` and `memory/archive/` and answers, on
`.memctl/watch.sock`, a stamp: its own nonce and how many changes to fact files
the kernel has reported. A command asks for the stamp before its check, and
skips the stat of every file when the index was last checked at the same stamp.

Why that sees every write made before the command: the kernel queues an inotify
event inside the write, rename or unlink itself, and the watch reads its whole
queue before it answers. A change made after the answer moves the next stamp,
and the check that follows the answer sees everything before it.

What inotify does not report (a write through a hard link from outside the
folder, through a shared mmap, or by another machine on a network file system)
is caught by the watch's own check of every file's stat every RECHECK_SECONDS,
which moves the stamp. Where there is no inotify (macOS, BSD) nothing is
watched and every command checks every file, as without a server.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

# The client's end is the C module itself (see embed/server.py): only the watch imports socket.py.
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as _unix_socket

from . import unixsock
from .values import env_on

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

SOCKET = "watch.sock"  # in .memctl/
ASK_TIMEOUT = 0.5  # a watch that has not answered by then is passed over: the command checks every file
RECHECK_SECONDS = 30.0

# inotify(7)
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR, IN_DONT_FOLLOW, IN_ISDIR = 0x1000000, 0x2000000, 0x40000000
_ASKED = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
          | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED  # the watched folder itself


def socket_path(store: "Store") -> Path:
    return store.cache_dir / SOCKET


def stamp(store: "Store") -> str | None:
    """The stamp of the store's fact folders from its running watch; None when none answers for them.

    Equal stamps mean no fact file changed between the two answers (see the module's docstring)."""
    path = socket_path(store)
    if not os.path.exists(path) or env_on("MEMCTL_NO_SERVER"):
        return None  # no watch (one stat, nothing imported), or asked to use no resident
    data = b""
    try:
        with unixsock.address(path) as address, contextlib.closing(_unix_socket(AF_UNIX, SOCK_STREAM)) as sock:
            sock.settimeout(ASK_TIMEOUT)
            sock.connect(address)
            while len(data) < 8192:
                chunk = sock.recv(8192)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None  # a stale socket (a killed server), or one too busy to answer in time
    text, _, folder = data.partition(b"\0")
    if not text or text == b"-" or os.fsdecode(folder) != os.path.realpath(store.memory_dir):
        return None  # no watch for these folders (another memory/ since the server started, or it went away)
    return text.decode("ascii", "replace")


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _counts(name: str) -> bool:
    """Whether a change to `name` in a watched folder is a change to a fact file (rindex._fact_stats's choice)."""
    return name.endswith(".md") and name != "MEMORY.md" and not name.startswith(".")


class FactWatch:
    """inotify watches on memory/ and memory/archive/, and the changes to fact files they reported."""

    def __init__(self, store: "Store"):
        import ctypes

        self.store = store
        self.archive_name = store.archive_dir.name
        self.folder = os.path.realpath(store.memory_dir)  # what a client's store names, through any link above it
        self.nonce = os.urandom(6).hex()
        self.changes = 0
        self.gone = False  # memory/ itself was removed or moved: no stamp until it is watched again
        self.blind = False  # the archive is there but could not be watched (inotify's limit, its mode): no stamp
        self.asked = time.monotonic()  # when a command last asked for the stamp (the server's idle clock reads it)
        self._libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(self._libc, "inotify_init1"):
            raise OSError("no inotify on this system")
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        # (dev, inode) before the watch: a folder replaced in between is then seen as replaced, not missed
        self.identity = _identity(store.memory_dir)
        self.memory_wd = self._add(store.memory_dir)
        if self.memory_wd < 0:
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"cannot watch {store.memory_dir}")
        self.archive_wd = self._add_archive()
        self.digest = self._digest()

    def _add(self, folder: Path) -> int:
        return self._libc.inotify_add_watch(self.fd, os.fsencode(folder), _ASKED)

    def _add_archive(self) -> int:
        """The archive's watch, or -1: none there (fine), or one that cannot be watched (`blind`)."""
        import ctypes
        import errno

        wd = self._add(self.store.archive_dir)
        self.blind = wd < 0 and ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR)
        return wd

    def _replaced(self) -> bool:
        """Whether memory/ is not the folder watched: the kernel holds back its delete event while anything
        still has the old one open (a shell in it, an open file), and the new one's writes report nothing."""
        return _identity(self.store.memory_dir) != self.identity

    def _digest(self) -> str:
        from . import rindex

        return rindex._facts_digest(rindex._fact_stats(self.store))

    def drain(self) -> None:
        """Take every event the kernel has queued."""
        import struct

        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            at = 0
            while at + 16 <= len(data):
                wd, mask, _, size = struct.unpack_from("iIII", data, at)
                name = data[at + 16:at + 16 + size].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                at += 16 + size
                self._take(wd, mask, name)

    def _take(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.changes += 1  # events were lost: whatever they were, the next command checks every file
        elif wd == self.memory_wd:
            if mask & _GONE:
                self.gone = True
            elif mask & IN_ISDIR and name == self.archive_name:  # the archive made, removed or moved
                if self.archive_wd >= 0:
                    self._libc.inotify_rm_watch(self.fd, self.archive_wd)
                self.archive_wd = self._add_archive()
                self.changes += 1
            elif _counts(name):
                self.changes += 1
        elif wd == self.archive_wd and wd >= 0:
            if mask & _GONE:
                if not mask & IN_IGNORED:
                    self._libc.inotify_rm_watch(self.fd, wd)
                self.archive_wd = -1
                self.changes += 1
            elif _counts(name):
                self.changes += 1

    def recheck(self) -> None:
        """Compare every fact file's stat with the last recheck's: what inotify does not report moves the stamp too.
        A memory/ that was gone and is back is watched again."""
        self.drain()
        if self.gone or self.blind or self._replaced():
            self._watch_again()
            return
        digest = self._digest()
        if digest != self.digest:
            self.digest, self.changes = digest, self.changes + 1

    def _watch_again(self) -> None:
        """memory/ is back (moved away and back, or made anew): watched afresh under a new nonce, so that
        no index checked at a stamp of before counts as checked (inotify gives the same folder its old wd)."""
        self.gone = True
        identity = _identity(self.store.memory_dir)
        memory_wd = self._add(self.store.memory_dir)
        if memory_wd < 0:
            return
        archive_wd = self._add_archive()
        for old in (self.memory_wd, self.archive_wd):
            if old >= 0 and old not in (memory_wd, archive_wd):
                self._libc.inotify_rm_watch(self.fd, old)
        self.memory_wd, self.archive_wd = memory_wd, archive_wd
        self.identity = identity
        self.folder = os.path.realpath(self.store.memory_dir)
        self.nonce, self.changes, self.gone = os.urandom(6).hex(), 0, False
        self.digest = self._digest()

    def answer(self) -> bytes:
        self.asked = time.monotonic()
        self.drain()
        if self.gone or self._replaced():  # (one stat) watched afresh now, under a new nonce
            self._watch_again()
        if self.gone or self.blind:
            return b"-"
        return f"{self.nonce}:{self.changes}".encode() + b"\0" + os.fsencode(self.folder)

    def close(self) -> None:
        os.close(self.fd)


@contextlib.contextmanager
def serving(store: "Store", recheck_seconds: float = RECHECK_SECONDS) -> Iterator[FactWatch | None]:
    """While inside, a thread answers stamps on `.memctl/watch.sock`; yields the watch (None where
    inotify is missing or memory/ cannot be watched: commands then check every file). The caller is the
    store's one resident (it holds the embed-server lock), so a socket left at the path is a dead one's."""
    import threading

    try:
        watch = FactWatch(store)
    except (OSError, AttributeError):
        yield None
        return
    path = socket_path(store)
    listener = unixsock.listening(path)
    wake_r, wake_w = os.pipe()
    thread = threading.Thread(target=_answer_all, args=(watch, listener, wake_r, recheck_seconds),
                              name="memctl-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        os.write(wake_w, b"x")
        thread.join(timeout=5)
        listener.close()
        for fd in (wake_r, wake_w):
            os.close(fd)
        watch.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _answer_all(watch: FactWatch, listener, wake: int, recheck_seconds: float) -> None:
    """The watch's thread: drain events as they come, answer each asker, recheck every file now and then."""
    import select

    due = time.monotonic() + recheck_seconds
    while True:
        ready, _, _ = select.select([listener, watch.fd, wake], [], [], max(0.0, due - time.monotonic()))
        if wake in ready:
            return
        if watch.fd in ready:
            watch.drain()
        if listener in ready:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                with conn:
                    conn.settimeout(1.0)
                    if unixsock.served_by_owner(conn):
                        conn.sendall(watch.answer())
        if time.monotonic() >= due:
            with contextlib.suppress(OSError):
                watch.recheck()
            due = time.monotonic() + recheck_seconds
