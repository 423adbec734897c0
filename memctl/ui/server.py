"""The ui's HTTP server: standard library, loopback only, read-only.

Safety (docs/UI.md, "Safety"): it binds 127.0.0.1; a request whose Host is not
127.0.0.1:PORT or localhost:PORT, or whose Origin is not one of those, is refused
(403), so a web page that rebinds its own domain to 127.0.0.1 reads nothing; only
GET and HEAD are answered (any other method: 405), and no route writes; the
only paths are the views' routes and the stylesheet, never a file path, so
nothing outside the store (or in it) is served as a file; every parameter is
checked (known names only, one value each, bounded, no control characters) and
names again by the store's own rules in views.py. Every page carries a
Content-Security-Policy that allows no script at all and styles only from /ui.css.
"""

from __future__ import annotations

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .. import errors
from ..errors import BadInput, MemctlError, NotFound
from ..store import Store
from . import html, views

HOST = "127.0.0.1"
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Resource-Policy": "same-origin",
}
MAX_PARAM = 4000  # characters of one parameter (the prompt hook itself looks at the first 2,000)
MAX_TARGET = 16_000  # characters of the request target

# path -> (the parameters it takes, the view)
ROUTES = {
    "/": (("q", "mode"), lambda s, p: views.facts_view(s, p.get("q"), _mode(p.get("mode")))),
    "/fact": (("name",), lambda s, p: views.fact_view(s, _required(p, "name"))),
    "/inject": (("prompt",), lambda s, p: views.inject_view(s, p.get("prompt"))),
    "/episodes": (("type", "agent"), lambda s, p: views.episodes_view(s, p.get("type"), p.get("agent"))),
    "/state": (("scope",), lambda s, p: views.state_view(s, p.get("scope"))),
    "/ledgers": (("name",), lambda s, p: views.ledgers_view(s, p.get("name"))),
    "/conflicts": (("topic",), lambda s, p: views.conflicts_view(s, p.get("topic") == "1")),
}


def _mode(value: str | None) -> str | None:
    if value and value not in views.MODES:
        raise BadInput(f"unknown mode {value!r}", hint=" | ".join(views.MODES))
    return value or None


def _required(params: dict[str, str], name: str) -> str:
    if not params.get(name):
        raise BadInput(f"the parameter {name!r} is missing")
    return params[name]


def check_params(query: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query string's parameters: each a known name given once, bounded, without control characters
    (a prompt may hold line breaks and tabs). Empty values count as absent."""
    try:
        parsed = parse_qs(query, keep_blank_values=True, strict_parsing=False, errors="strict", max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"the query string cannot be read: {exc}") from None
    params = {}
    for name, values in parsed.items():
        if name not in allowed:
            raise BadInput(f"unknown parameter {name!r}", hint="this page takes " + (", ".join(allowed) or "none"))
        if len(values) != 1:
            raise BadInput(f"the parameter {name!r} is given {len(values)} times")
        value = values[0]
        if len(value) > MAX_PARAM:
            raise BadInput(f"the parameter {name!r} is over {MAX_PARAM} characters")
        if any(ord(c) < 32 and c not in "\n\r\t" or ord(c) == 127 for c in value):
            raise BadInput(f"the parameter {name!r} holds a control character")
        if value:
            params[name] = value
    return params


class Handler(BaseHTTPRequestHandler):
    server_version = "memctl-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds a connection may stay silent: an idle or trickling client does not hold a thread for good
    store: Store  # set on the subclass make() builds

    def log_message(self, format: str, *args) -> None:  # noqa: A002  (no line per request on stderr)
        pass

    def _allowed_host(self) -> bool:
        port = self.server.server_address[1]
        local = {f"{HOST}:{port}", f"localhost:{port}"} | ({HOST, "localhost"} if port == 80 else set())
        host = self.headers.get("Host", "").lower()  # a host name is case-insensitive (RFC 9110 4.2.3)
        origin = self.headers.get("Origin")
        origin = origin if origin is None else origin.lower()
        return host in local and (origin is None or origin in {f"http://{h}" for h in local})

    def _send(self, status: int, body: bytes, content_type: str, head: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in HEADERS.items():
            self.send_header(name, value)
        if status == 405:
            self.send_header("Allow", "GET, HEAD")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _page(self, status: int, title: str, body: str, head: bool, active: str = "") -> None:
        text = html.page(title, body, active=active, store_label=str(self.store.root))
        self._send(status, text.encode("utf-8"), "text/html; charset=utf-8", head)

    def _answer(self, head: bool) -> None:
        if not self._allowed_host():
            self._send(403, b"refused: not a request to this machine's memctl ui\n", "text/plain; charset=utf-8", head)
            return
        if len(self.path) > MAX_TARGET:
            self._send(414, b"request target too long\n", "text/plain; charset=utf-8", head)
            return
        target = urlsplit(self.path)
        if target.path == "/ui.css":
            self._send(200, html.CSS.encode("utf-8"), "text/css; charset=utf-8", head)
            return
        route = ROUTES.get(target.path)
        if route is None:
            self._page(404, "Not found", "<p>no such page</p>", head)
            return
        allowed, view = route
        try:
            params = check_params(target.query, allowed)
            title, body = view(self.store, params)
        except NotFound as exc:
            self._page(404, "Not found", f'<p class="err">{html.esc(exc.one_line())}</p>', head, target.path)
        except MemctlError as exc:
            status = 400 if isinstance(exc, BadInput) else 500
            self._page(status, "Error", f'<p class="err">{html.esc(exc.one_line())}</p>', head, target.path)
        except Exception as exc:  # noqa: BLE001  (one page fails, the server goes on)
            errors.warn(f"ui: {target.path}: {type(exc).__name__}: {exc}")
            self._page(500, "Error", f'<p class="err">{html.esc(type(exc).__name__)}: {html.esc(exc)}</p>', head)
        else:
            self._page(200, title, body, head, target.path)

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass  # the browser went away (a reload, a closed tab): nothing to answer, no traceback to print

    def do_GET(self) -> None:  # noqa: N802
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _refuse(self) -> None:
        self.close_connection = True
        self._send(405, b"read-only: GET and HEAD only\n", "text/plain; charset=utf-8", False)

    def __getattr__(self, name: str):
        """Every other method (POST, PUT, PROPFIND, ...): refused (405 with Allow), not answered by
        http.server's 501 without an Allow header."""
        if name.startswith("do_"):
            return self._refuse
        raise AttributeError(name)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # SO_REUSEADDR on Linux: the port of a `memctl ui` stopped a moment ago (its connections in
    # TIME_WAIT for a minute) can be taken again; a port another program listens on is still refused
    # (EADDRINUSE). Not on BSD and macOS, where it lets 127.0.0.1 bind beside a program on 0.0.0.0.
    allow_reuse_address = sys.platform.startswith("linux")


def make(store: Store, port: int = 0) -> Server:
    """A server for `store` bound to 127.0.0.1:`port` (0: a free port), not yet serving."""
    handler = type("StoreHandler", (Handler,), {"store": store})
    try:
        return Server((HOST, port), handler)
    except OSError as exc:
        import errno  # noqa: PLC0415

        if exc.errno == errno.EADDRINUSE:
            raise errors.Refused(f"port {port} on {HOST} is in use by another program", kind="port-in-use",
                                 hint="choose another port, or leave it out to take a free one") from None
        raise errors.OSFailure(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None


def url(server: Server) -> str:
    return f"http://{HOST}:{server.server_address[1]}/"


def run(server: Server) -> None:
    """Serve until Ctrl-C (or SIGTERM, turned into the same), then close the socket."""
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def can_open_browser() -> bool:
    """A person is there to see a browser: stderr is a terminal and, on Linux and BSD, a display is set
    (cron, CI and ssh sessions without one get only the URL)."""
    if not sys.stderr.isatty():
        return False
    if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def open_browser(address: str) -> None:
    """Open `address` in the default browser, in the background (never holds up the server)."""
    import webbrowser

    threading.Thread(target=webbrowser.open, args=(address,), daemon=True).start()
