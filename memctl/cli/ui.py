"""ui: a read-only page on 127.0.0.1 to look at the store (docs/UI.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import output
from ..errors import BadInput
from .common import store_from
from .root import app


@app.command()
def ui(
    ctx: typer.Context,
    port: Annotated[Optional[int], typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).", metavar="N")] = None,
    no_open: Annotated[bool, typer.Option("--no-open", help="Do not open a browser (none is opened without a terminal and a display either).")] = False,
    root: Annotated[Optional[str], typer.Option("--root", help="Store directory (default: memctl's --root, MEMCTL_ROOT, else the nearest parent with memctl.toml, else this project's Claude Code memory directory).", metavar="DIR")] = None,
) -> None:
    """Serve a read-only page on 127.0.0.1 to look at facts, search, injected text, episodes,
    STATE.md over time, ledgers and conflicts; Ctrl-C stops it."""
    from ..ui import server

    if port is not None and not 1 <= port <= 65535:
        raise BadInput(f"--port must be from 1 to 65535, got {port}")
    if root is not None:
        ctx.find_root().obj = {**(ctx.find_root().obj or {}), "root": root}
    store = store_from(ctx)
    httpd = server.make(store, port or 0)
    address = server.url(httpd)
    try:  # a Ctrl-C as soon as the URL is printed stops it as cleanly as one later
        output.info(f"ui for {store.root} at {address} (read-only; Ctrl-C stops it)")
        if not no_open and server.can_open_browser():
            server.open_browser(address)
        server.run(httpd)
    except KeyboardInterrupt:
        httpd.server_close()
    output.info("ui stopped")
