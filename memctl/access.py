"""The access log: what recall and context showed, and what was used.

One TSV with the ledger format (docs/FORMAT.md), columns `ts agent command
query shown`. Reading never dirties the work tree:

- in a memctl store the log is the ledger `ledgers/access.tsv`, committed; reads
  append their rows to `.memctl/access/pending.tsv` (machine-local, git-ignored),
  and `move_pending` (run by `maintain`, `sync` and `ledger commit access`, under
  the store lock, before their commit) moves them into the ledger;
- in a Claude Code memory directory the log is `.memctl/access.tsv` itself, never
  committed (so that a read creates no file beside the user's memories; `.memctl/`
  ignores itself).

`rows()` reads the ledger, then the rows being moved, then the pending ones: each
row once, numbered as it is (or will be, once moved) in the ledger.

Appends, moves and reads exclude each other by `.memctl/access.lock`: appends and
moves hold it alone, reads share it. An append is one write of whole lines on
O_APPEND. A move (1) renames pending.tsv to `moving-<n>.tsv`, (2) appends the
moving files to the ledger and removes them, both recorded in the store's undo
log (fsutil), and (3) is committed by its caller. Killed after (1): the moving file
is read as pending, and the next move takes it first. Killed in (2), or before the
commit: the next command that takes the store lock undoes both, so the rows are
pending again. Killed after the commit: found committed. So no row is lost or
counted twice (docs/RELIABILITY.md).

A row is a *use* when its command is `show`, `used`, or starts with `used:`
(`used:mcp` for the MCP tools); every other row (`recall`, `context`, a hook)
records a display. Only uses feed recall's frequency and recency factors:
what is merely shown must not be shown more because it was shown
(docs/RECALL.md, "Use, not display").
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence

from .store import Store

FILE = "access.tsv"
LEDGER = "access"  # its name as a ledger, in a memctl store
COLUMNS = ("ts", "agent", "command", "query", "shown")
# A query is logged cut to this many characters (at most 16 KiB in UTF-8: a ledger's field may hold
# 64 KiB): `used -q` took 100,000, which `maintain` then committed.
QUERY_LIMIT = 4096
USE_COMMANDS = ("show", "used")
PENDING_DIR = "access"  # in .memctl/: rows not in the ledger yet
PENDING = "pending.tsv"
LOCK = "access.lock"  # in .memctl/


def path_for(store: Store) -> Path:
    """Where this store's access log lives (in a memctl store, the ledger: pending rows are apart)."""
    if store.layout == "claude":
        return store.cache_dir / FILE
    return store.ledgers_dir / FILE


def pending_path(store: Store) -> Path:
    """Where reads append their rows in a memctl store (machine-local until moved into the ledger)."""
    return store.cache_dir / PENDING_DIR / PENDING


def is_use(command: str) -> bool:
    return command in USE_COMMANDS or command.startswith("used:")


def _moving_number(name: str) -> int | None:
    number = name[len("moving-"):-len(".tsv")]
    return int(number) if name.startswith("moving-") and name.endswith(".tsv") and number.isdigit() else None


def pending_files(store: Store) -> list[Path]:
    """The rows not in the log yet, in order: those being moved (`moving-<n>.tsv`), then pending.tsv.
    None in a Claude Code directory, whose log is machine-local as a whole."""
    if store.layout == "claude":
        return []
    folder = pending_path(store).parent
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    moving = sorted((n for n in names if _moving_number(n) is not None), key=_moving_number)
    return [folder / n for n in moving] + ([folder / PENDING] if PENDING in names else [])


def has_pending(store: Store) -> bool:
    """Whether rows wait to be moved into the ledger (a few stat calls: sync's fast path asks)."""
    for path in pending_files(store):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size:
                return True
    return False


@contextlib.contextmanager
def reading(store: Store, wait: float | None = None) -> Iterator[None]:
    """Hold off appends and moves while the log's files are read (a shared lock, waited for up to
    `wait` seconds, default MEMCTL_LOCK_TIMEOUT). Where nothing was ever appended there is no lock
    file, and nothing to hold off (a read-only store too)."""
    lock = store.cache_dir / LOCK
    if not lock.exists():
        yield
        return
    from .fsutil import file_lock

    with file_lock(lock, wait, shared=True):
        yield


def _writing(store: Store):
    from .fsutil import file_lock, refuse_link

    refuse_link(store.root, store.cache_dir / PENDING_DIR)
    return file_lock(store.cache_dir / LOCK)


def _continued(path: Path, payload: bytes, header: bytes = b"") -> bytes:
    """`payload` as it must be appended to `path`: after `header` on a new file, after a LF when
    the last line lacks one (a torn line stays a line of its own)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    if size == 0:
        return header + payload
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        return payload if handle.read(1) == b"\n" else b"\n" + payload


def _header_line() -> bytes:
    return ("\t".join(COLUMNS) + "\n").encode("utf-8")


def append(store: Store, command: str, rows: Sequence[tuple[str, Sequence[str]]], *, agent: str | None = None,
           query_chars: int | None = None) -> Path:
    """One row per (query, keys), in one write of whole lines; returns the file written.

    A memctl store's rows go to pending.tsv (no header), a Claude Code directory's to its log.
    The one place a query is written: it is stored redacted (a prompt may hold a key the log
    must not commit), then cut to `query_chars`.
    """
    from . import clock
    from .fsutil import append_bytes
    from .secrets import scrub
    from .tsv import format_record

    who = agent or os.environ.get("MEMCTL_AGENT", "") or "unknown"
    stamp = clock.stamp()
    limit = min(query_chars or QUERY_LIMIT, QUERY_LIMIT)
    queries = [query[:limit] for query in scrub([query for query, _ in rows], "", quiet=True)]
    payload = "".join(format_record([stamp, who, command, query, ",".join(keys)]) + "\n"
                      for query, (_, keys) in zip(queries, rows)).encode("utf-8")
    claude = store.layout == "claude"
    path = path_for(store) if claude else pending_path(store)
    with _writing(store):
        path.parent.mkdir(parents=True, exist_ok=True)
        append_bytes(path, _continued(path, payload, _header_line() if claude else b""))
    return path


def move_pending(store: Store) -> int:
    """Move the pending rows into the ledger (the caller commits it); returns how many were moved.

    Under the store lock: its undo log puts the rows back where they were if the change is
    not committed (see the module doc).
    """
    from .fsutil import append_bytes, remove_logged, undoing

    if store.layout == "claude" or not pending_path(store).parent.is_dir():
        return 0
    assert undoing(), "move_pending runs under the store lock"
    with _writing(store):
        pending = pending_path(store)
        if pending.exists() and pending.stat().st_size:
            taken = [_moving_number(p.name) or 0 for p in pending_files(store)]
            os.replace(pending, pending.with_name(f"moving-{max(taken, default=0) + 1:06d}.tsv"))
        moving = [p for p in pending_files(store) if p.name != PENDING]
        if not moving:
            return 0
        data = b"".join(_whole_lines(p.read_bytes()) for p in moving)
        ledger = path_for(store)
        if data:
            ledger.parent.mkdir(parents=True, exist_ok=True)
            append_bytes(ledger, _continued(ledger, data, _header_line()))
        for path in moving:
            remove_logged(path)
    return data.count(b"\n")


def _whole_lines(data: bytes) -> bytes:
    return data + b"\n" if data and not data.endswith(b"\n") else data


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


def _opened(store: Store) -> tuple[int, list[tuple[BinaryIO, int, tuple[str, ...], bool]]]:
    """Every file of the log, opened with its size at this moment under the shared lock (what is read
    afterwards is this moment's log, whatever a move does meanwhile): (handle, size, columns, header);
    and the lines before the first row: 1 while the ledger is missing or empty, for the header line
    that the move writes first."""
    from .fsutil import refuse_link

    found = []
    log = path_for(store)
    refuse_link(store.root, log)  # never read through a link (docs/RELIABILITY.md)
    with reading(store):
        for path in [log, *pending_files(store)]:
            try:
                handle = open(path, "rb")
            except FileNotFoundError:
                continue
            size = os.fstat(handle.fileno()).st_size
            found.append((handle, size, *(header(path) if path == log else (COLUMNS, False))))
    new_log = not found or found[0][0].name != str(log) or found[0][1] == 0
    return (1 if new_log else 0), found


def rows(store: Store) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, values) of every row: the ledger's, then the pending ones, in order, each
    numbered as its line in the ledger (once moved). A line over the ledger limit is refused
    (fsutil.TooBig, ledger.lines)."""
    from .ledger import lines, parse_record

    lineno, opened = _opened(store)
    try:
        for handle, size, columns, has_header in opened:
            left = size
            for number, raw in lines(handle, store.rel(Path(handle.name))):
                if left <= 0:
                    break
                raw, left = raw[:left], left - len(raw)
                lineno += 1
                if number == 1 and has_header:
                    continue
                yield lineno, parse_record(raw.rstrip(b"\n").decode("utf-8", "replace"), columns)
    finally:
        for handle, *_ in opened:
            handle.close()
