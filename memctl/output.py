"""The only module that prints.

stdout carries data only: a rich table on a terminal, tab-separated lines when
piped (grep/cut-able, fields escaped like ledger values), JSON on request.
Warnings, hints and progress go to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterable, Sequence

from . import tsv
from .errors import OUTPUT


def stdout_is_tty() -> bool:
    if os.environ.get("MEMCTL_FORCE_TTY") == "1":
        return True
    return sys.stdout.isatty()


def terminal_width() -> int:
    """The terminal's width in cells (COLUMNS when set, as rich reads it; 80 when there is none)."""
    from rich.console import Console  # noqa: PLC0415

    return Console().width


def _escape(value: Any) -> str:
    text = "" if value is None else str(value)
    if isinstance(value, (list, tuple)):
        text = ",".join(str(v) for v in value)
    return tsv.escape(text)


def json_text(data: Any, indent: int | None = None) -> str:
    """`data` as JSON; a NaN or infinity (a hand-written `importance: .nan` in a fact's metadata) is null:
    NaN and Infinity are not JSON, and a strict parser fails on the whole answer."""
    import json  # noqa: PLC0415  (lazy, like every import not every command needs)

    try:
        text = json.dumps(data, ensure_ascii=False, indent=indent, default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(json_safe(data), ensure_ascii=False, indent=indent, default=str)
    return text if text.isascii() else valid_utf8(text)


def valid_utf8(text: str) -> str:
    """`text` with each lone surrogate (a byte that was not UTF-8, kept by surrogateescape: a Latin-1 comment
    in someone's crontab) as U+FFFD: JSON is UTF-8, and a parser fails on the whole answer at one such byte."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        import re  # noqa: PLC0415

        return re.sub("[\ud800-\udfff]", "\ufffd", text)


def json_safe(data: Any) -> Any:
    """`data` with every float that is not finite replaced by None (dicts, lists and tuples walked)."""
    if isinstance(data, float):
        return data if data == data and data not in (float("inf"), float("-inf")) else None
    if isinstance(data, dict):
        return {key: json_safe(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_safe(value) for value in data]
    return data


class _Printing:
    """Around a write to stdout: an OSError of it names the output (a full disk elsewhere names no file)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> None:
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = OUTPUT  # (errors.from_os_error words it so)


_printing = _Printing()


def emit_json(data: Any) -> None:
    with _printing:
        sys.stdout.write(json_text(data, 2 if stdout_is_tty() else None) + "\n")
        sys.stdout.flush()


def emit_ndjson(rows: Iterable[Any]) -> None:
    with _printing:
        for row in rows:
            sys.stdout.write(json_text(row) + "\n")
        sys.stdout.flush()


def emit_lines(lines: Iterable[str]) -> None:
    with _printing:
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()


def emit_text(text: str) -> None:
    with _printing:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
        sys.stdout.flush()


def emit_content(text: str) -> None:
    r"""Text read from the store or named in it (a fact file, STATE.md, a document's lines, the context
    bundle, a document's path): piped, as the file has it; on a terminal each control character but TAB
    and LF shown as `\x1b` and each bidi control as `\u202e`, as a table cell is, so what another clone
    pushed is shown, not obeyed. A CR before LF (a file saved on Windows) is a line end, kept."""
    if stdout_is_tty():
        text = "\r\n".join(tsv.visible(part, keep="\t\n") for part in text.split("\r\n"))
    emit_text(text)


# Past this many rows a terminal gets the header line and the piped lines: rich lays out ~4,000 rows a second.
TABLE_ROWS = 2000


def emit_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], plain: str | None = None) -> None:
    """A rich table with a header row on a terminal (nothing when there are no rows); otherwise
    `plain`, by default one TAB-separated line per row, no header."""
    terminal = stdout_is_tty()
    if terminal and len(rows) <= TABLE_ROWS and not _too_narrow(columns):
        _rich_table([[_cell(row.get(c)) for c in columns] for row in rows], columns)
        return
    if terminal and rows:
        emit_lines(["\t".join(columns)])  # the header still, above what a pipe gets
    if plain is not None:
        emit_text(plain)
    else:
        emit_lines("\t".join(_escape(row.get(c)) for c in columns) for row in rows)


WHOLE_CELL = 32  # characters: a table column whose cells are all one word this short is not wrapped
WRAPPED_MIN = 10  # columns: the least width left to each column that wraps beside them
NARROWEST = 4  # cells a column needs at least (frame aside), else a terminal gets the header and the lines


def _too_narrow(columns: Sequence[str]) -> bool:
    """Whether the terminal is narrower than a table's frame and NARROWEST cells a column: rich printed
    empty cells there (all of them at 20 columns) or headers in pieces (`ran` / `k` at 40)."""
    from rich.cells import cell_len  # noqa: PLC0415

    return terminal_width() < 1 + sum(3 + min(cell_len(column), NARROWEST) for column in columns)


EDGE_PADDING = 2  # cells: the space inside the table's left and right edges


def headers_fit(columns: Sequence[str]) -> bool:
    """Whether a terminal table of these columns has room for every header whole (frame aside)."""
    from rich.cells import cell_len  # noqa: PLC0415

    return sum(3 + cell_len(column) for column in columns) + 1 - EDGE_PADDING <= terminal_width()


def _rich_table(cells: list[list[str]], columns: Sequence[str]) -> None:
    if not cells:
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415  (cells as plain text: no markup is read in them)

    from rich.cells import cell_len  # noqa: PLC0415

    console = Console()
    widths = [max(cell_len(text) for text in (column, *(line[at] for line in cells))) for at, column in enumerate(columns)]
    # A column of ids, names, times, scores (no space, short) is not broken where the others can still wrap
    # beside it (each at least WRAPPED_MIN wide, or its header's width): copied, it must be whole. Where they
    # do not all fit, the widest of them fold first (a path before the name it holds), so the rest stay whole.
    folded = [min(width, max(WRAPPED_MIN, cell_len(column))) for width, column in zip(widths, columns)]
    whole = [all(" " not in line[at] and cell_len(line[at]) <= WHOLE_CELL for line in cells) for at in range(len(columns))]
    needed = 1 + sum(3 + (width if keep else least) for width, least, keep in zip(widths, folded, whole))
    # Too wide: the outer padding goes first (`│text │`: at 80 columns `audit` broke every timestamp for
    # want of one cell), then the widest whole columns fold (a path before the name it holds).
    edge = 0 if needed > console.width else EDGE_PADDING
    needed -= EDGE_PADDING - edge
    for at in sorted((at for at, keep in enumerate(whole) if keep), key=lambda at: -widths[at]):
        if needed <= console.width:
            break
        whole[at] = False
        needed -= widths[at] - folded[at]
    # Each column is given its width: rich, left to shrink a table itself, made it a cell wider than the
    # terminal at some widths (80 among them), which cut off its right edge.
    room = console.width - 1 - 3 * len(columns) + (EDGE_PADDING - edge)
    if needed <= console.width:  # the whole ones as they are, the others share what is left (none under its least)
        bending = [at for at, keep in enumerate(whole) if not keep]
        shares = list(widths)
        given = _shares([widths[at] for at in bending], [folded[at] for at in bending],
                        room - sum(width for width, keep in zip(widths, whole) if keep))
        for at, width in zip(bending, given):
            shares[at] = width
    else:  # folded to their least they still do not fit: each its share, its header whole where headers fit
        headers_fit = sum(cell_len(column) for column in columns) <= room
        shares = _shares(widths, [cell_len(column) if headers_fit else min(cell_len(column), NARROWEST) for column in columns], room)
    table = Table(show_lines=False, pad_edge=bool(edge))
    for column, keep, share in zip(columns, whole, shares):
        table.add_column(Text(column), overflow="fold", no_wrap=keep, width=share)
    for line in cells:
        table.add_row(*map(Text, line))
    with _printing:
        console.print(table)


def _shares(wanted: Sequence[int], least: Sequence[int], room: int) -> list[int]:
    """`room` cells shared out among columns that want `wanted` and need `least`: the narrowest get what
    they want, the rest an equal share of what is left, none under its least (a header kept whole)."""
    given = [0] * len(wanted)
    left = room
    order = sorted(range(len(wanted)), key=lambda at: wanted[at])
    for done, at in enumerate(order):
        reserved = sum(least[later] for later in order[done + 1:])
        fair = min(wanted[at], left // (len(wanted) - done), left - reserved)
        given[at] = max(least[at], fair, 1)
        left -= given[at]
    return given


def _cell(value: Any) -> str:
    r"""A table cell: a control character is printed as `\x1b`, as TSV escapes are (TAB and LF kept)."""
    text = ", ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else "" if value is None else str(value)
    return tsv.visible(text, keep="\t\n")


def _stderr_line(text: str) -> None:
    r"""One line on stderr, a terminal's or a log's: a line break in it is a space, and any other control
    character (an ESC in a fact name or a command's message another clone pushed) shows as `\x1b`."""
    sys.stderr.write(tsv.visible(text.replace("\r\n", " ").replace("\n", " "), keep="\t") + "\n")
    sys.stderr.flush()


def warn(message: str, hint: str | None = None) -> None:
    _stderr_line(f"memctl: warning: {message}" + (f" (hint: {hint})" if hint else ""))


def info(message: str) -> None:
    _stderr_line(f"memctl: {message}")


def error(message: str) -> None:
    _stderr_line(f"memctl: error: {message}")


def wants_json(argv: Sequence[str]) -> bool:
    """Whether a command line asks for JSON (then its errors are JSON too); `--` ends the options."""
    args = list(argv)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def failure(message: str, hint: str | None, exit_code: int, *, json: bool = False) -> None:
    """An error on stderr: one line `memctl: error: ... (hint: ...)`, or with --json one object
    `{"error", "hint", "exit_code"}` (docs/JSON.md)."""
    message = message.replace("\n", " ")
    if json:
        import json as json_mod  # noqa: PLC0415

        data = {"error": message, "hint": hint.replace("\n", " ") if hint else None, "exit_code": exit_code}
        sys.stderr.write(json_mod.dumps(data, ensure_ascii=False) + "\n")
        sys.stderr.flush()
        return
    error(message + (f" (hint: {hint})" if hint else ""))


# ---------------------------------------------------------------- JSON shapes (docs/JSON.md)

def fact_json(store, found, *, body: bool = True) -> dict[str, Any]:
    """A fact (`show`, `list`, `audit --never-shown`); `body` is null where bodies are not printed."""
    meta = found.front.get("metadata")
    status = "live"
    if found.archived:
        status = "superseded" if found.meta("superseded_by") else "archived"
    elif _expired(found.meta("expires")):
        status = "expired"  # as recall says of it (it said `live` here)
    from .values import unit_value  # noqa: PLC0415

    return {
        "name": found.name or found.stem, "path": store.rel(found.path), "type": found.type,
        "description": found.description, "status": status,
        "importance": unit_value(found.meta("importance")),
        "tags": list(found.tags), "metadata": dict(meta) if isinstance(meta, dict) else {},
        "body": found.body if body else None,
    }


def _expired(expires: Any) -> bool:
    from . import clock  # noqa: PLC0415  (only a fact's JSON needs the clock)

    return clock.expired(expires)


def hit_json(found, rank: int, explain: bool = False) -> dict[str, Any]:
    """A recall hit (`recall`, `recall --queries`, `episode recall`, the MCP server's recall)."""
    data = found.to_dict(explain)
    item = found.item
    episode = item.kind == "episode"
    data = {
        "rank": rank, "kind": item.kind, "name": item.key, "id": item.key if episode else None, "path": item.path,
        "type": item.type, "description": data["description"], "outcome": getattr(item, "outcome", "") if episode else None,
        **{k: v for k, v in data.items() if k not in ("kind", "name", "id", "path", "type", "description")},
    }
    return data


def hits_json(found, explain: bool = False) -> list[dict[str, Any]]:
    return [hit_json(h, rank, explain) for rank, h in enumerate(found, start=1)]


def audit_row_json(row: dict[str, Any]) -> dict[str, Any]:
    """An access-log row as `audit` prints it: the line number a number, the keys shown a list."""
    shown = row.get("shown", "")
    return {
        "line": int(row["line"]), "ts": row.get("ts", ""), "agent": row.get("agent", ""),
        "command": row.get("command", ""), "query": row.get("query", ""),
        "shown": [key for key in shown.split(",") if key] if isinstance(shown, str) else list(shown),
    }


def state_json(rel_path: str, snapshot) -> dict[str, Any]:
    """STATE.md as `state show` prints it; `state update` adds message and commit."""
    return {"path": rel_path, "updated": snapshot.updated, "generator": snapshot.generator,
            "numbers": dict(snapshot.numbers), "body": snapshot.body}


_PROGRESS = {"json": False, "log": False}  # see set_json and log_progress
LOG_SECONDS = 5.0  # how often a server's log gets a progress line


def set_json(on: bool) -> None:
    """The command prints JSON (--json): no progress bar on stderr either."""
    _PROGRESS["json"] = on


def log_progress() -> None:
    """Progress as a line every LOG_SECONDS on stderr, terminal or not: for a server whose stderr
    is its log (`memctl mcp`: the MCP client keeps it)."""
    _PROGRESS["log"] = True


def progress(total: int, what: str):
    """A context manager yielding advance(n): a transient bar on a terminal's stderr (count, rate,
    time left) and one line when done; log lines for a server (log_progress); else nothing
    (a pipe, --json)."""
    import contextlib  # noqa: PLC0415

    if _PROGRESS["log"]:
        return _progress_lines(total, what)
    if _PROGRESS["json"] or not sys.stderr.isatty():  # nothing on a pipe (issue 22.5)
        return contextlib.nullcontext(lambda n: None)
    return _progress_bar(total, what)


WAIT_SECONDS = 1.0  # a wait this long gets its line on a terminal


@contextlib.contextmanager
def waiting(what: str):
    """One line on a terminal's stderr (`memctl: waiting for ...`) once the block has taken WAIT_SECONDS:
    a remote that hangs is otherwise a silent terminal for up to MEMCTL_GIT_TIMEOUT. Nothing on a pipe or
    beside --json."""
    if _PROGRESS["json"] or not sys.stderr.isatty():
        yield
        return
    import threading  # noqa: PLC0415

    timer = threading.Timer(WAIT_SECONDS, _stderr_line, (f"memctl: waiting for {what} (Ctrl-C stops it)",))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def pace(done: int, total: int, seconds: float) -> str:
    """`1,200/10,000, 48/s, about 3m left`: how far a long step is and how long the rest takes."""
    from .clock import format_duration  # noqa: PLC0415

    rate = done / seconds if seconds > 0 else 0.0
    text = f"{done:,}/{total:,}, {rate:,.0f}/s" if rate >= 10 or rate == 0 else f"{done:,}/{total:,}, {rate:.1f}/s"
    if 0 < done < total and rate > 0:
        left = (total - done) / rate
        text += f", about {format_duration(left)} left" if left >= 1 else ", under 1s left"
    return text


def _progress_bar(total: int, what: str):
    import contextlib  # noqa: PLC0415
    import time  # noqa: PLC0415

    @contextlib.contextmanager
    def bar():
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import BarColumn, Progress, TextColumn  # noqa: PLC0415

        began, done = time.monotonic(), [0]
        columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[pace]}"))
        with Progress(*columns, console=Console(stderr=True), transient=True) as shown:
            task = shown.add_task(what, total=total, pace=pace(0, total, 0))

            def advance(n: int) -> None:
                done[0] += n
                shown.update(task, advance=n, pace=pace(done[0], total, time.monotonic() - began))

            yield advance
        if done[0]:
            info(f"{what}: {pace(done[0], total, time.monotonic() - began)}")

    return bar()


def _progress_lines(total: int, what: str):
    import contextlib  # noqa: PLC0415
    import time  # noqa: PLC0415

    @contextlib.contextmanager
    def lines():
        began = time.monotonic()
        state = {"done": 0, "said": began}
        info(f"{what}: {total:,} to do")

        def advance(n: int) -> None:
            state["done"] += n
            now = time.monotonic()
            if now - state["said"] >= LOG_SECONDS:
                state["said"] = now
                info(f"{what}: {pace(state['done'], total, now - began)}")

        yield advance
        info(f"{what}: {pace(state['done'], total, time.monotonic() - began)}, done")

    return lines()
