"""mcp: serve the store to MCP clients over stdio."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .root import app


@app.command()
def mcp(
    ctx: typer.Context,
    root: Annotated[Optional[str], typer.Option("--root", help="Store directory (default: memctl's --root, MEMCTL_ROOT, the Claude Code memory directory of CLAUDE_PROJECT_DIR, else the nearest store).", metavar="DIR")] = None,
) -> None:
    """Run the MCP server on stdin/stdout (tools: remember, recall, context, show, ...)."""
    from ..integrations import mcp_server

    mcp_server.serve(root or (ctx.find_root().obj or {}).get("root"))
