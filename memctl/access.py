"""The access log: what recall and context showed, and what was used.

One TSV with the ledger format (docs/FORMAT.md), columns `ts agent command
query shown`. Where it lives depends on the layout: `ledgers/access.tsv` in a
memctl store, `.memctl/access.tsv` in a Claude Code memory directory (so that
a read command creates no file beside the user's memories; `.memctl/` ignores
itself).

A row is a *use* when its command is `show`, `used`, or starts with `used:`
(`used:mcp` for the MCP tools); every other row (`recall`, `context`, a hook)
records a display. Only uses feed recall's frequency and recency factors:
what is merely shown must not be shown more because it was shown
(docs/RECALL.md, "Use, not display").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Sequence

from . import clock
from .store import Store

FILE = "access.tsv"
COLUMNS = ("ts", "agent", "command", "query", "shown")
USE_COMMANDS = ("show", "used")


def path_for(store: Store) -> Path:
    """Where this store's access log lives."""
    if store.layout == "claude":
        return store.cache_dir / FILE
    return store.ledgers_dir / FILE


def is_use(command: str) -> bool:
    return command in USE_COMMANDS or command.startswith("used:")


def append(store: Store, command: str, rows: Sequence[tuple[str, Sequence[str]]], *, agent: str | None = None) -> Path:
    """One row per (query, keys), with one write under the store lock; the header on a new file."""
    from .fsutil import append_bytes
    from .ledger import format_record

    who = agent or os.environ.get("MEMCTL_AGENT", "") or "unknown"
    stamp = clock.stamp()
    lines = [format_record([stamp, who, command, query, ",".join(keys)]) for query, keys in rows]
    path = path_for(store)
    payload = "".join(line + "\n" for line in lines).encode("utf-8")
    with store.lock():
        path.parent.mkdir(parents=True, exist_ok=True)
        size = path.stat().st_size if path.exists() else 0
        if size == 0:
            payload = ("\t".join(COLUMNS) + "\n").encode("utf-8") + payload
        else:
            with open(path, "rb") as handle:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    payload = b"\n" + payload  # a torn last line stays a line of its own
        append_bytes(path, payload)
    return path


def header(path: Path) -> tuple[tuple[str, ...], bool]:
    """The file's columns and whether its first line is a header (an old file may lack one)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline().rstrip(b"\n").decode("utf-8", "replace")
    except FileNotFoundError:
        return COLUMNS, True
    if first.split("\t")[:2] == ["ts", "agent"]:
        return tuple(first.split("\t")), True
    return COLUMNS, False


def rows(store: Store) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, values) of every row, in file order."""
    from .fsutil import refuse_link
    from .ledger import parse_record

    path = path_for(store)
    refuse_link(store.root, path)  # never read through a link (docs/RELIABILITY.md)
    if not path.exists():
        return
    columns, has_header = header(path)
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, 1):
            if lineno == 1 and has_header:
                continue
            yield lineno, parse_record(raw.rstrip(b"\n").decode("utf-8", "replace"), columns)
