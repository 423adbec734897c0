"""The only module that prints.

stdout carries data only: a rich table on a terminal, tab-separated lines when
piped (grep/cut-able, fields escaped like ledger values), JSON on request.
Warnings, hints and progress go to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterable, NamedTuple, Sequence

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


def emit_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], plain: str | None = None,
               spare: Sequence[str] = ()) -> None:
    """A rich table with a header row on a terminal (nothing when there are no rows); otherwise
    `plain`, by default one TAB-separated line per row, no header. `spare` names the columns a terminal
    may leave out, least useful first, where the others would not fit beside a readable description."""
    terminal = stdout_is_tty()
    if terminal and len(rows) <= TABLE_ROWS and _rich_table([[_cell(row.get(c)) for c in columns] for row in rows],
                                                            columns, spare):
        return
    if terminal and rows:
        emit_lines(["\t".join(columns)])  # the header still, above what a pipe gets
    if plain is not None:
        emit_text(plain)
    else:
        emit_lines("\t".join(_escape(row.get(c)) for c in columns) for row in rows)


WHOLE_CELL = 32  # cells: a word this short (an id, a time, a name, a path, a number) is not broken
WRAPPED_MIN = 10  # cells: the least width left to each column that wraps beside whole ones
WRAPPED_ROOM = 20  # cells a column that wraps gets before a column the command can spare is left out
NARROWEST = 4  # cells a column needs at least (frame aside), else a terminal gets the header and the lines
EDGE_PADDING = 2  # cells: the space inside the table's left and right edges


def _rich_table(cells: list[list[str]], columns: Sequence[str], spare: Sequence[str] = ()) -> bool:
    """`cells` as a table no wider than the terminal; False, printing nothing, where the terminal is narrower
    than the frame of the columns it would show and NARROWEST cells each (rich printed empty cells there, all
    of them at 20 columns, or headers in pieces: `ran` / `k` at 40)."""
    if not cells:
        return True
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415  (cells as plain text: no markup is read in them)

    console = Console()
    columns = [_column(column, [line[at] for line in cells]) for at, column in enumerate(columns)]
    shown = _shown(columns, spare, console.width)
    if console.width < 1 + sum(3 + min(c.head, NARROWEST) for c in shown):
        return False
    shares, edge = _widths(shown, console.width)
    table = Table(show_lines=False, pad_edge=bool(edge))
    wrapped = []  # the width each column's cells are broken to here, or 0 where they are whole
    for column, share in zip(shown, shares):
        whole = column.whole and share >= column.want
        table.add_column(Text(column.name), overflow="fold", no_wrap=whole, width=share)
        wrapped.append(0 if whole else share)
    for at in range(len(cells)):
        table.add_row(*(Text(_broken(column.cells[at], width)) for column, width in zip(shown, wrapped)))
    with _printing:
        console.print(table)
    return True


def _broken(cell: str, width: int) -> str:
    """A cell's text in lines of `width` cells, broken as memctl breaks Japanese (linebreak: rich put `。`
    or `」` at the start of a line); as it is where it is whole, or holds a TAB (rich expands it)."""
    if not width or "\t" in cell:
        return cell
    from rich.cells import cell_len  # noqa: PLC0415

    from .linebreak import wrap  # noqa: PLC0415

    return "\n".join(wrap(cell, width, cell_len))


class _Column(NamedTuple):
    """A column's header and cells, measured in terminal cells (a kana or kanji is two): `want` is its widest
    line, `whole` whether every cell is one word up to WHOLE_CELL (ids, times, names, types, paths, numbers:
    copied, they must be whole), `word` its longest such word (a model's name in `e5-small-q4 (e5-small-q4)`)."""

    name: str
    cells: list[str]
    head: int
    want: int
    whole: bool
    word: int


def _column(name: str, cells: list[str]) -> _Column:
    """The column headed `name` holding `cells`, measured."""
    from rich.cells import cell_len  # noqa: PLC0415

    head = cell_len(name)
    words = [cell_len(word) for text in cells for word in text.split()]
    return _Column(name, cells, head, max([head] + [cell_len(line) for text in cells for line in text.split("\n")]),
                   all(text.split() in ([], [text]) for text in cells) and max(words, default=0) <= WHOLE_CELL,
                   max((width for width in words if width <= WHOLE_CELL), default=0))


def _least(columns: Sequence[_Column], room: int, words: bool = True) -> list[int]:
    """Each column's least width: a whole one all of it; the widest that wraps (the description) `room`
    cells, the others that wrap WRAPPED_MIN, none under its header nor, where `words`, its longest short
    word (nor over what it wants)."""
    widest = max((column for column in columns if not column.whole), key=lambda column: column.want, default=None)
    return [column.want if column.whole else min(column.want, max(room if column is widest else WRAPPED_MIN,
                                                                  column.head, column.word if words else 0))
            for column in columns]


def _needed(least: Sequence[int]) -> int:
    """The cells a table needs whose columns are `least` wide (its frame, the edges unpadded)."""
    return 1 + sum(3 + width for width in least) - EDGE_PADDING


def _shown(columns: list[_Column], spare: Sequence[str], width: int) -> list[_Column]:
    """The columns a terminal shows: not one whose every cell is empty (an episode's `agent` nobody set), nor
    the command's spare ones (least useful first) while the others leave the description less than
    WRAPPED_ROOM cells: at 80 columns `recall` gave it 13 and broke the path beside it."""
    shown = [column for column in columns if any(column.cells)] or columns
    for name in spare:
        if _needed(_least(shown, WRAPPED_ROOM)) <= width:
            break
        shown = [column for column in shown if column.name != name] or shown
    return shown


def _widths(columns: list[_Column], width: int) -> tuple[list[int], int]:
    """Each column's width and the padding inside the table's edges. Each column is given its width: rich,
    left to shrink a table itself, made it a cell wider than the terminal at some widths (80 among them)."""
    whole = [column.whole for column in columns]
    # What wraps narrows first: the description to WRAPPED_ROOM, then every column that wraps to WRAPPED_MIN
    # with its words whole (`e5-smal` / `l-q4`), then with them folded; then the space inside the outer edges
    # goes (`│text │`: at 80 columns `audit` broke every timestamp for want of one cell); then the widest
    # whole columns fold (a path before the name it holds) to their header or WRAPPED_MIN.
    for least in (_least(columns, WRAPPED_ROOM), _least(columns, WRAPPED_MIN), _least(columns, WRAPPED_MIN, False)):
        if _needed(least) <= width:
            break
    needed = _needed(least)
    edge = EDGE_PADDING if needed + EDGE_PADDING <= width else 0
    for at in sorted((at for at, keep in enumerate(whole) if keep), key=lambda at: -columns[at].want):
        if needed <= width:
            break
        whole[at] = False
        least[at] = min(columns[at].want, max(WRAPPED_MIN, columns[at].head))
        needed -= columns[at].want - least[at]
    room = width - 1 - 3 * len(columns) + (EDGE_PADDING - edge)
    if needed <= width:  # the whole ones as they are, the others share what is left (none under its least)
        bending = [at for at, keep in enumerate(whole) if not keep]
        shares = [column.want for column in columns]
        given = _shares([shares[at] for at in bending], [least[at] for at in bending],
                        room - sum(column.want for column, keep in zip(columns, whole) if keep))
        for at, share in zip(bending, given):
            shares[at] = share
        return shares, edge
    # Folded to their least they still do not fit: each its share, its header whole where headers fit.
    heads_fit = sum(column.head for column in columns) <= room
    return _shares([column.want for column in columns],
                   [column.head if heads_fit else min(column.head, NARROWEST) for column in columns], room), edge


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


def tty_note(message: str) -> None:
    """`memctl: MESSAGE` on stderr when it is a terminal (a person reads it); nothing on a pipe."""
    if sys.stderr.isatty():
        _stderr_line(f"memctl: {message}")


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


ECHO_ROOM = 2  # cells left free right of a progress bar: for the terminal's `^C` (see _progress_bar)


def _progress_bar(total: int, what: str):
    import contextlib  # noqa: PLC0415
    import time  # noqa: PLC0415

    @contextlib.contextmanager
    def bar():
        from rich.console import Console, ConsoleDimensions  # noqa: PLC0415
        from rich.progress import BarColumn, Progress, TextColumn  # noqa: PLC0415

        class Short(Console):
            """ECHO_ROOM cells short of the edge (measured at each frame, as rich does: a resize still
            counts). The terminal echoes Ctrl-C as `^C` after the bar; a bar as wide as the terminal
            made it wrap to the next line, which rich then cleared instead of the bar: its last frame
            stayed above the `interrupted` line (at 80 columns and narrower)."""

            @property
            def size(self) -> ConsoleDimensions:
                width, height = Console.size.fget(self)
                return ConsoleDimensions(max(width - ECHO_ROOM, 1), height)

        began, done = time.monotonic(), [0]
        columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[pace]}"))
        with Progress(*columns, console=Short(stderr=True), transient=True) as shown:
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
