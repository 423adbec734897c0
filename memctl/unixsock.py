"""The two Unix sockets' shared details (embed/server.py's, watch.py's): their address, their peer.

Light on purpose: a command that asks a resident a question imports this and `_socket`
(the C module), never socket.py, which builds enums of every constant on import.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def address(path: Path) -> Iterator[str]:
    """A path short enough for sun_path (108 bytes): via /proc/self/fd when needed (Linux)."""
    text = str(path)
    if len(text.encode()) < 100 or not Path("/proc/self/fd").is_dir():
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY | getattr(os, "O_PATH", 0))
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def listening(path: Path) -> Any:
    """A socket listening at `path`, mode 0600 from its creation; a file left at `path` (a dead
    resident's socket: the caller is the store's one resident) is replaced."""
    import socket

    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        with address(path) as where:
            sock.bind(where)
    finally:
        os.umask(old_mask)
    os.chmod(path, 0o600)
    sock.listen(16)
    return sock


def peer_uid(conn: Any) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where the OS does not say)."""
    import socket

    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def served_by_owner(conn: Any) -> bool:
    """Whether the peer may be answered: the store's owner (this process's uid) or root."""
    uid = peer_uid(conn)
    return uid is None or uid in (os.getuid(), 0)
