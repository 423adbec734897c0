"""The only module that prints.

stdout carries data only: a rich table on a terminal, tab-separated lines when
piped (grep/cut-able, fields escaped like ledger values), JSON on request.
Warnings, hints and progress go to stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Sequence

from . import tsv


def stdout_is_tty() -> bool:
    if os.environ.get("MEMCTL_FORCE_TTY") == "1":
        return True
    return sys.stdout.isatty()


def _escape(value: Any) -> str:
    text = "" if value is None else str(value)
    if isinstance(value, (list, tuple)):
        text = ",".join(str(v) for v in value)
    return tsv.escape(text)


def emit_json(data: Any) -> None:
    import json  # noqa: PLC0415  (lazy, like every import not every command needs)

    indent = 2 if stdout_is_tty() else None
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=indent, default=str) + "\n")
    sys.stdout.flush()


def emit_ndjson(rows: Iterable[Any]) -> None:
    import json  # noqa: PLC0415

    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def emit_lines(lines: Iterable[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def emit_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()


def emit_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], title: str | None = None) -> None:
    """A rich table on a TTY; otherwise one TAB-separated line per row, no header."""
    if stdout_is_tty():
        from rich.console import Console  # noqa: PLC0415
        from rich.table import Table  # noqa: PLC0415

        table = Table(title=title, show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(_cell(row.get(c)) for c in columns))
        Console().print(table)
        return
    emit_lines("\t".join(_escape(row.get(c)) for c in columns) for row in rows)


def _cell(value: Any) -> str:
    from rich.markup import escape  # noqa: PLC0415

    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    return escape("" if value is None else str(value))


def warn(message: str, hint: str | None = None) -> None:
    text = f"memctl: warning: {message}"
    if hint:
        text += f" (hint: {hint})"
    sys.stderr.write(text.replace("\n", " ") + "\n")
    sys.stderr.flush()


def info(message: str) -> None:
    sys.stderr.write(f"memctl: {message}\n")
    sys.stderr.flush()


def error(message: str) -> None:
    sys.stderr.write(f"memctl: error: {message}\n")
    sys.stderr.flush()


def progress(total: int, what: str):
    """A context manager yielding advance(n): a transient bar on a terminal's stderr, else nothing."""
    import contextlib  # noqa: PLC0415

    if not sys.stderr.isatty():
        return contextlib.nullcontext(lambda n: None)

    @contextlib.contextmanager
    def bar():
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import Progress  # noqa: PLC0415

        with Progress(console=Console(stderr=True), transient=True) as shown:
            task = shown.add_task(what, total=total)
            yield lambda n: shown.advance(task, n)

    return bar()
