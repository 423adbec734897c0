"""A generic JSONL transcript, for agents other than Claude Code (docs/TRANSCRIPTS.md).

One JSON object a line: `role` (`user`, `assistant`; `tool` is a tool call
and `error` a failed one, both imported only with `tools`; `system` is left
out), `content` (a string, or a list of `{"type": "text", "text": ...}`
blocks), `ts` (ISO-8601), and optionally `id` (kept as the record's id) and
`session`. A line without `role`, `content` or a valid `ts` is a bad record.
"""

from __future__ import annotations

from typing import Any, Iterable

from . import Parsed, Turn, clean, objects, record_id, stamped, texts

_ROLES = {"user": "prompt", "assistant": "reply", "tool": "tool", "error": "error"}


def parse(records: Iterable[tuple[int, Any]], *, session: str, tools: bool = False, modified: Any = None) -> Parsed:
    out = Parsed()
    for line, record in objects(records, out):
        role = record.get("role")
        if not isinstance(role, str) or "content" not in record:
            out.skip(line, "no `role` or `content`")
            continue
        when = stamped(out, line, record.get("ts"), "ts")
        if when is None:
            continue
        kind = _ROLES.get(role)
        text = clean("\n\n".join(texts(record["content"])))
        if kind is None or not text or (kind in ("tool", "error") and not tools):
            out.left_out += 1
            continue
        sid = record.get("session") if isinstance(record.get("session"), str) and record.get("session") else session
        rid = record_id(record.get("id"), sid, record.get("ts"), role, text)
        out.turns.append(Turn(rid, sid, when, kind, text, line))
    return out
