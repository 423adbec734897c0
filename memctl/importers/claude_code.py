"""Claude Code session transcripts (`~/.claude/projects/<encoded-path>/<session-id>.jsonl`).

One JSON object a line: `type` (user, assistant, summary, system, ...),
`message.role`, `message.content` (a string, or a list of `text`, `thinking`,
`tool_use`, `tool_result` blocks), `uuid`, `timestamp`, `sessionId`,
`isSidechain`. What becomes a turn (docs/TRANSCRIPTS.md):

- a user record's text (a string, or its `text` blocks joined) -> `prompt`;
- an assistant record's `text` blocks, joined -> `reply`;
- with `tools`: each `tool_use` block -> `tool` ("tool: <name>"), each
  `tool_result` block with `is_error` -> `error` ("tool error: <text>").

Left out: thinking blocks, tool calls and results (unless `tools`),
sidechain records (sub-agents), meta records and local command echoes,
API error notices, and every other record type (summary, system, ...).
A user or assistant record without a `timestamp`, or any record without
`type`, is a bad record: counted, not imported.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from . import Parsed, Turn, clean, objects, parse_ts

_COMMAND_ECHO = ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _record_id(record: dict, raw_line: int, session: str) -> str:
    uuid = record.get("uuid")
    if isinstance(uuid, str) and uuid and all(c not in uuid for c in ",\t\n "):
        return uuid
    # No usable uuid: the same record always gets the same id, so a re-import still adds nothing.
    digest = hashlib.sha1(f"{session}\n{record.get('timestamp')}\n{raw_line}".encode()).hexdigest()
    return f"line-{digest[:16]}"


def parse(records: Iterable[tuple[int, Any]], *, session: str, tools: bool = False) -> Parsed:
    """Turns from (line number, parsed JSON) pairs; `session` is used when a record names none."""
    out = Parsed()
    for line, record in objects(records, out):
        kind = record.get("type")
        if not isinstance(kind, str) or not kind:
            out.skip(line, "no `type`")
            continue
        if kind not in ("user", "assistant"):
            out.left_out += 1
            continue
        when = parse_ts(record.get("timestamp"))
        if when is None:
            out.skip(line, "no valid `timestamp`")
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            out.skip(line, "no `message` object")
            continue
        if record.get("isSidechain") or record.get("isMeta") or record.get("isApiErrorMessage"):
            out.left_out += 1
            continue
        sid = record.get("sessionId") if isinstance(record.get("sessionId"), str) and record.get("sessionId") else session
        rid = _record_id(record, line, sid)
        content = message.get("content")
        found = []
        text = clean("\n\n".join(_texts(content)))
        if text and not text.startswith(_COMMAND_ECHO):
            found.append(Turn(rid, sid, when, "prompt" if kind == "user" else "reply", text, line))
        if tools and isinstance(content, list):
            for n, block in enumerate(content):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                    found.append(Turn(f"{rid}.t{n}", sid, when, "tool", f"tool: {clean(block['name'])}", line))
                elif block.get("type") == "tool_result" and block.get("is_error"):
                    detail = clean("\n".join(_texts(block.get("content"))))
                    found.append(Turn(f"{rid}.e{n}", sid, when, "error", detail, line, label="tool error:" + " " * bool(detail)))
        if found:
            out.turns.extend(found)
        else:
            out.left_out += 1
    return out
