"""Options shared by every command, and the store they act on."""

from __future__ import annotations

from typing import Annotated

import typer

from ..store import Store, load_store

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (for agents and scripts).")]
NoCommitOpt = Annotated[
    bool, typer.Option("--no-commit", help="Write files but do not commit (also MEMCTL_NO_COMMIT=1).")
]


def store_from(ctx: typer.Context) -> Store:
    root = (ctx.find_root().obj or {}).get("root")
    return load_store(root)
