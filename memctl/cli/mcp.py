"""mcp: serve the store to MCP clients over stdio."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .root import app


@app.command()
def mcp(
    ctx: typer.Context,
    root: Annotated[Optional[str], typer.Option("--root", help="Store directory (default: memctl's --root, MEMCTL_ROOT, else the store found from the working directory, then CLAUDE_PROJECT_DIR, then --store).", metavar="DIR")] = None,
    store: Annotated[Optional[str], typer.Option("--store", help="The store to serve when none is found otherwise (written by `agent install --store`).", metavar="DIR")] = None,
) -> None:
    """Run the MCP server on stdin/stdout (tools: remember, recall, context, show, ...)."""
    from .fast import mcp_serve

    mcp_serve(root or (ctx.find_root().obj or {}).get("root"), store)
