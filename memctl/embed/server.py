"""The resident embedder: a model kept loaded behind a Unix socket in `.memctl/`.

`memctl embed-server` calls `serve()`; commands call `ask()` and fall back to
loading the model in-process when nothing answers (no server, a killed one
whose socket is stale, another configuration). The socket is mode 0600 and
the server also checks its peer's uid, so only the store's owner is served.
One server per store: it holds an flock on `.memctl/embed-server.lock` for as
long as it lives (the kernel drops it if the server is killed), taken before
the model is loaded, so `running()` is true from the start. `start()` launches
one detached (the SessionStart hook's resident embedder), which warms recall's
fact vectors first and exits after `idle` seconds without a request.

Wire format, both ways: a 4-byte big-endian length, a JSON object, and then
``obj["_blob"]`` raw bytes (float32 vectors for ``embed``). One request per
connection. Requests carry the client's configuration key; a server started
under another configuration answers ``mismatch`` and the client goes its own way.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

# The client's end is the C module itself: socket.py builds enums of every constant on import
# (~4 ms of each served command's start); only the server imports it.
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as _unix_socket

from .. import unixsock
from ..errors import BadInput, MemctlError, NotFound, Refused

if TYPE_CHECKING:  # pragma: no cover
    import socket

    import numpy as np

    from ..store import Store

LOCK = "embed-server.lock"
LOG = "embed-server.log"  # a detached server's stderr (start())
CONNECT_TIMEOUT = 1.0
# An idle server answers hello at once. One that is embedding a large new source
# for another client answers nothing until it is done: after this long, a
# command treats it as absent and loads its own embedder, instead of waiting.
HELLO_TIMEOUT = 2.0
MAX_FRAME = 1 << 30

Handler = Callable[[dict[str, Any]], "tuple[dict[str, Any], bytes]"]


def socket_path(store: "Store") -> Path:
    return store.embed_socket


# ---------------------------------------------------------------- framing


def _recv_exact(sock: "socket.socket", size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send(sock: "socket.socket", obj: dict[str, Any], blob: bytes = b"") -> None:
    body = json.dumps({**obj, "_blob": len(blob)}, ensure_ascii=False).encode("utf-8")
    sock.sendall(struct.pack(">I", len(body)) + body)
    if blob:
        sock.sendall(blob)


def receive(sock: "socket.socket") -> tuple[dict[str, Any], bytes]:
    (size,) = struct.unpack(">I", _recv_exact(sock, 4))
    if size > MAX_FRAME:
        raise ConnectionError("frame too large")
    obj = json.loads(_recv_exact(sock, size).decode("utf-8"))
    if not isinstance(obj, dict):
        raise ConnectionError("bad frame")
    blob_size = int(obj.pop("_blob", 0) or 0)
    if blob_size > MAX_FRAME:
        raise ConnectionError("blob too large")
    return obj, _recv_exact(sock, blob_size) if blob_size else b""


# ---------------------------------------------------------------- client


def _timeout() -> float:
    try:
        return float(os.environ.get("MEMCTL_SERVER_TIMEOUT", "300"))
    except ValueError:
        return 300.0


_ERRORS = {"BadInput": BadInput, "NotFound": NotFound, "Refused": Refused}


def ask(store: "Store", op: str, payload: dict[str, Any] | None = None, blob: bytes = b"", *, key: str | None = None,
        timeout: float | None = None) -> tuple[dict[str, Any], bytes] | None:
    """Send one request; None when no server for this store and configuration answers.

    A library error raised by the server (an unknown column, say) is raised
    here as the same error.
    """
    path = socket_path(store)
    if not path.exists():
        return None
    if key is None:
        from . import settings_for

        key = settings_for(store).key()
    try:
        with unixsock.address(path) as address, contextlib.closing(_unix_socket(AF_UNIX, SOCK_STREAM)) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(address)
            sock.settimeout(_timeout() if timeout is None else timeout)
            send(sock, {"op": op, "key": key, **(payload or {})}, blob)
            reply, data = receive(sock)
    except (OSError, ConnectionError, ValueError, struct.error):
        return None  # no server, a stale socket, or one that died mid-answer
    if reply.get("status") == "error":
        raise _ERRORS.get(reply.get("error_class", ""), MemctlError)(str(reply.get("message")), reply.get("hint"))
    if reply.get("status") != "ok":
        return None  # "mismatch": started under another configuration
    return reply, data


_UNANSWERED: dict[str, float] = {}  # socket path -> when a hello to it got no answer (this process)
UNANSWERED_SECONDS = 10.0  # ... which is not asked again for this long: one command waits once, not per step


def hello(store: "Store") -> dict[str, Any] | None:
    """The server's description, or None (no server, another configuration, or one too busy to answer).

    A server that did not answer within HELLO_TIMEOUT is passed over for UNANSWERED_SECONDS
    without asking again, so that a command that would ask several times (recall, then its
    in-process fallback; context's two sources) waits once.
    """
    import time

    path = str(socket_path(store))
    if time.monotonic() - _UNANSWERED.get(path, -1e9) < UNANSWERED_SECONDS:
        return None
    began = time.monotonic()
    answer = ask(store, "hello", timeout=HELLO_TIMEOUT)
    if answer is None and time.monotonic() - began >= HELLO_TIMEOUT * 0.9:
        _UNANSWERED[path] = time.monotonic()
    return answer[0] if answer else None


def stop(store: "Store") -> dict[str, Any] | None:
    """Ask the running server to stop; its hello, or None when none was running."""
    answer = ask(store, "stop", key="*")
    return answer[0] if answer else None


class RemoteEmbedder:
    """An Embedder that forwards to the resident server (same backend, model, fingerprint)."""

    def __init__(self, store: "Store", info: dict[str, Any]):
        self.store = store
        self.backend = str(info["backend"])
        self.model = str(info["model"])
        self._fingerprint = str(info["fingerprint"])
        self._local = None  # the model loaded here once the server stopped answering

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def embed(self, texts: Sequence[str], kind: str = "query") -> "np.ndarray":
        import numpy as np

        if self._local is None:
            from . import model_input  # (the server's model reads them so too: a server of an older memctl did not)

            answer = ask(self.store, "embed", {"texts": model_input(texts), "kind": kind})
            if answer is not None:
                reply, data = answer
                return np.frombuffer(data, dtype=np.float32).reshape(int(reply["n"]), int(reply["dim"])).copy()
            self._local = self._load_here()
        return self._local.embed(texts, kind)

    def _load_here(self):
        """The same model, loaded in this process: the server stopped answering (killed, say) mid-way.
        What it embedded so far is in the cache already; only a model other than the server's is refused."""
        from .. import errors
        from . import choose, settings_for

        choice = choose(settings_for(self.store))
        if choice.embedder.fingerprint != self._fingerprint:
            raise MemctlError("the embed server stopped answering, and this process has not its model",
                              hint="run the command again (it will load the model itself)")
        errors.warn("the embed server stopped answering: the model is loaded in this process to finish")
        return choice.embedder


def remote(store: "Store") -> RemoteEmbedder | None:
    info = hello(store)
    return RemoteEmbedder(store, info) if info else None


# ---------------------------------------------------------------- server


@contextlib.contextmanager
def single(store: "Store") -> Iterator[None]:
    """This process is the store's one embed server while inside (Refused when another one is)."""
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    lock = store.cache_dir / LOCK
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise Refused(f"an embed server is already running for this store (pid {pid})", hint="stop it first", kind="server-running") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def running(store: "Store") -> bool:
    """Whether an embed server holds this store's lock: serving, or still loading its model or warming."""
    try:
        fd = os.open(store.cache_dir / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing drops a shared lock taken here)
    return False


def start(store: "Store", idle_seconds: int) -> bool:
    """Launch `memctl embed-server --warm --idle SECONDS` for the store, detached (its own session,
    no terminal, stderr to `.memctl/embed-server.log`), unless one is running; never waits for it.
    True when one was launched."""
    import subprocess
    import sys

    if running(store):
        return False
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "memctl", "--root", str(store.root), "embed-server", "--warm",
            "--idle", str(int(idle_seconds))]
    with open(store.cache_dir / LOG, "ab") as log:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                         start_new_session=True, close_fds=True, cwd=str(store.root))
    return True


def serve(store: "Store", key: str, info: dict[str, Any], handlers: dict[str, Handler], *,
          ready: Callable[[Path], None] | None = None, idle: float | None = None,
          asked_elsewhere: Callable[[], float] | None = None) -> None:
    """Answer requests until asked to stop (or SIGTERM/SIGINT, or `idle` seconds without a request).
    `asked_elsewhere()`: the time.monotonic() of the last request the caller answers on another socket
    (the fact watch's stamps), which counts as one. Blocks. The caller holds `single(store)`."""
    import time
    path = socket_path(store)
    sock = unixsock.listening(path)  # a dead server's socket is replaced: we hold the lock
    sock.settimeout(idle)
    stopping = False

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        if ready:
            ready(path)
        while not stopping:
            try:
                conn, _ = sock.accept()
            except TimeoutError:  # nobody asked here for `idle` seconds
                quiet = time.monotonic() - asked_elsewhere() if asked_elsewhere else float("inf")
                if quiet >= idle:
                    break
                sock.settimeout(idle - quiet)  # asked there meanwhile: idle counts from that request
                continue
            sock.settimeout(idle)
            conn.settimeout(None)
            with conn:
                stopping = _answer(conn, key, info, handlers)
    except KeyboardInterrupt:
        pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _answer(conn: "socket.socket", key: str, info: dict[str, Any], handlers: dict[str, Handler]) -> bool:
    """Serve one connection; True when the server should stop."""
    conn.settimeout(10.0)
    try:
        if not unixsock.served_by_owner(conn):
            return False
        request, blob = receive(conn)
        op = request.get("op")
        if op == "stop":
            send(conn, {"status": "ok", **info})
            return True
        if request.get("key") != key:
            send(conn, {"status": "mismatch", **info})
            return False
        if op == "hello":
            send(conn, {"status": "ok", **info})
            return False
        handler = handlers.get(str(op))
        if handler is None:
            send(conn, {"status": "error", "error_class": "BadInput", "message": f"unknown request {op!r}"})
            return False
        conn.settimeout(None)
        try:
            reply, data = handler(request)
        except MemctlError as exc:
            send(conn, {"status": "error", "error_class": type(exc).__name__, "message": exc.message, "hint": exc.hint})
            return False
        except Exception as exc:  # noqa: BLE001 - a request the handler could not take: say so, keep serving
            send(conn, {"status": "error", "error_class": "MemctlError",
                        "message": f"the embed server could not answer {op!r}: {type(exc).__name__}: {exc}"})
            return False
        try:
            send(conn, {"status": "ok", **reply}, data)
        except TypeError as exc:  # a reply JSON cannot hold (nothing was sent: json.dumps comes first)
            send(conn, {"status": "error", "error_class": "MemctlError", "message": f"the embed server's reply to {op!r} "
                        f"could not be sent: {exc}"})
    except (OSError, ConnectionError, ValueError, struct.error):
        pass  # a client that went away or sent garbage: keep serving the others
    return False
