"""Agent transcripts into episode rows: pure functions, records in, turns out (docs/TRANSCRIPTS.md).

Each format module (`claude_code`, `codex`, `gemini`, `cursor`, `messages`)
only parses its host's records into `Turn`s, with the helpers here (`texts`,
`record_id`, `turns`); `hosts` names them with what else the import needs to
know about each host (its session id, its format check, where its files are:
`places`). `lines` splits a transcript's bytes into records and knows where
the last complete line ends (a torn last line is left for the next import);
`redact` keeps `<private>` text and secrets out. Reading files, resuming and
writing the ledger, the same for every host, live in `memctl/transcripts.py`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Iterator

# Episode type and importance per kind of turn (docs/TRANSCRIPTS.md, "What becomes an episode").
TYPES = {"prompt": 0.5, "reply": 0.4, "tool": 0.3, "error": 0.6}
CUT_MARK = " […cut {n} chars]"
MAX_LINE_BYTES = 32 * 1024 * 1024  # a longer transcript line is a bad record, not parsed (docs/FORMAT.md, Limits)
MAX_TEXT_BYTES = 32_000  # an episode's text, cut there: even escaped (\n -> \\n) it fits a 64 KiB ledger field


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
        if len(raw) > MAX_LINE_BYTES:
            if last:
                return  # perhaps torn: the next import sees it whole
            value = f"{len(raw) / 1048576:.0f} MB, more than the {MAX_LINE_BYTES >> 20} MiB a transcript line may hold"
        elif not raw.strip():
            value = None
        else:
            try:
                value = json.loads(raw.decode("utf-8-sig" if pos == 0 else "utf-8"))  # a BOM: Windows editors write one
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


def stamped(out: Parsed, line: int, value: Any, key: str = "timestamp") -> datetime | None:
    """The record's time, or None after counting the record as bad (no valid `key`)."""
    when = parse_ts(value)
    if when is None:
        out.skip(line, f"no valid `{key}`")
    return when


def clean(text: str) -> str:
    """No NUL (a ledger field cannot hold one), no lone surrogates, no surrounding blank space."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.strip()


def cut(text: str, limit: int, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """At most `limit` characters and `max_bytes` UTF-8 bytes of text, then a marker saying how many
    characters were dropped (the bytes keep a row's field under the ledger's 64 KiB, escapes included)."""
    keep = min(len(text), limit)
    if len(text[:keep].encode("utf-8")) > max_bytes:
        keep = len(text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore"))
    if keep >= len(text):
        return text
    return text[:keep] + CUT_MARK.format(n=len(text) - keep)


def texts(content: Any, kinds: tuple[str, ...] = ("text",)) -> list[str]:
    """The texts of a message's content: a string, or the `text` of its blocks whose `type` is one of `kinds`
    (a block without `type` counts when its `text` is a string and it is not a thought: Gemini's parts)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return []
    found = []
    for block in content:
        if isinstance(block, str):
            found.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            kind = block.get("type")
            if kind in kinds or (kind is None and not block.get("thought")):
                found.append(block["text"])
    return found


def record_id(value: Any, *parts: Any) -> str:
    """`value` when it can stand in a ref (a non-empty string or number without spaces or commas); else
    `line-<16 hex>` from `parts`, so the same record always gets the same id and a re-import adds nothing."""
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) \
            and not any(c in str(value) for c in ",\t\n "):
        return str(value)
    return "line-" + hashlib.sha1("\n".join(map(str, parts)).encode()).hexdigest()[:16]


def turns(out: Parsed, found: list[Turn]) -> None:
    """Add a record's turns to `out`, or count the record as left out when it gave none."""
    if found:
        out.turns.extend(found)
    else:
        out.left_out += 1


def failed(rid: str, session: str, when: datetime, detail: str, line: int) -> Turn:
    """A failed tool call's turn: its text redacted as written, then labelled `tool error: `."""
    return Turn(rid, session, when, "error", detail, line, label="tool error:" + " " * bool(detail))


def tool_blocks(content: Any, rid: str, session: str, when: datetime, line: int) -> list[Turn]:
    """Anthropic-style blocks (Claude Code, Cursor): each `tool_use` -> `tool`, each `tool_result` with `is_error` -> `error`."""
    found = []
    for n, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            found.append(Turn(f"{rid}.t{n}", session, when, "tool", f"tool: {clean(block['name'])}", line))
        elif block.get("type") == "tool_result" and block.get("is_error"):
            found.append(failed(f"{rid}.e{n}", session, when, clean("\n".join(texts(block.get("content")))), line))
    return found
