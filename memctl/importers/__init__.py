"""Agent transcripts into episode rows: pure functions, records in, turns out (docs/TRANSCRIPTS.md).

Each format module (`claude_code`, `messages`) turns parsed JSON records into
`Turn`s; `lines` splits a transcript's bytes into records and knows where the
last complete line ends (a torn last line is left for the next import);
`redact` keeps secrets out. Reading files, resuming and writing the ledger
live in `memctl/transcripts.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Iterator

# Episode type and importance per kind of turn (docs/TRANSCRIPTS.md, "What becomes an episode").
TYPES = {"prompt": 0.5, "reply": 0.4, "tool": 0.3, "error": 0.6}
CUT_MARK = " […cut {n} chars]"


@dataclass(frozen=True)
class Turn:
    record: str  # the record's id (Claude Code's uuid); with a suffix for a record's tool calls
    session: str
    ts: datetime
    type: str  # a key of TYPES
    text: str  # as written: redaction runs on it before `label` is put in front
    line: int  # 1-based line in the transcript
    label: str = ""  # what the episode shows before the text (`tool error: `)


@dataclass
class Parsed:
    turns: list[Turn] = field(default_factory=list)
    records: int = 0  # complete lines read (empty lines excepted)
    bad: int = 0  # lines that are not a JSON object, or lack a field the format needs
    left_out: int = 0  # records read and deliberately not imported (tools, thinking, sidechains, ...)
    end: int = 0  # byte offset just past the last complete line
    first_bad: str = ""  # "line N: why", for the message

    def skip(self, line: int, why: str) -> None:
        self.bad += 1
        if not self.first_bad:
            self.first_bad = f"line {line}: {why}"


def lines(data: bytes, start: int = 0, first_line: int = 1) -> Iterator[tuple[int, int, Any]]:
    """(line number, offset after the line, parsed JSON or an error string) per complete line.

    A last line without its LF is yielded only when it parses (a writer that
    ended the file without one); otherwise it is torn and left for later.
    """
    pos, number = start, first_line
    size = len(data)
    while pos < size:
        newline = data.find(b"\n", pos)
        last = newline < 0
        stop = size if last else newline
        raw = data[pos:stop]
        end = stop if last else newline + 1
        value: Any
        if not raw.strip():
            value = None
        else:
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                value = "not UTF-8"
            except ValueError:
                if last:
                    return  # torn: the writer is still at it
                value = "not JSON"
        yield number, end, value
        pos, number = end, number + 1


def objects(records: Iterable[tuple[int, Any]], out: "Parsed") -> Iterator[tuple[int, dict]]:
    """The records that are JSON objects, as (line number, object); the others are counted in `out`
    (None: a blank line; a str: why the line could not be read)."""
    for line, record in records:
        if record is None:
            continue
        out.records += 1
        if isinstance(record, str):
            out.skip(line, record)
        elif not isinstance(record, dict):
            out.skip(line, "not a JSON object")
        else:
            yield line, record


def parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return when if when.tzinfo else when.astimezone()


def clean(text: str) -> str:
    """No NUL (a ledger field cannot hold one), no lone surrogates, no surrounding blank space."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.strip()


def cut(text: str, limit: int) -> str:
    """At most `limit` characters of text, then a marker saying how many were dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + CUT_MARK.format(n=len(text) - limit)
