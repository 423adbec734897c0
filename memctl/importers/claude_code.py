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

from typing import Any, Iterable

from . import Parsed, Turn, clean, objects, record_id, stamped, texts, tool_blocks, turns

_COMMAND_ECHO = ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>")


def parse(records: Iterable[tuple[int, Any]], *, session: str, tools: bool = False, modified: Any = None) -> Parsed:
    """Turns from (line number, parsed JSON) pairs; `session` is used when a record names none
    (`modified`, the file's time, is not needed: every record has its own)."""
    out = Parsed()
    for line, record in objects(records, out):
        kind = record.get("type")
        if not isinstance(kind, str) or not kind:
            out.skip(line, "no `type`")
            continue
        if kind not in ("user", "assistant"):
            out.left_out += 1
            continue
        when = stamped(out, line, record.get("timestamp"))
        if when is None:
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            out.skip(line, "no `message` object")
            continue
        if record.get("isSidechain") or record.get("isMeta") or record.get("isApiErrorMessage"):
            out.left_out += 1
            continue
        sid = record.get("sessionId") if isinstance(record.get("sessionId"), str) and record.get("sessionId") else session
        uuid = record.get("uuid")
        rid = record_id(uuid if isinstance(uuid, str) else None, sid, record.get("timestamp"), line)
        content = message.get("content")
        found = []
        text = clean("\n\n".join(texts(content)))
        if text and not text.startswith(_COMMAND_ECHO):
            found.append(Turn(rid, sid, when, "prompt" if kind == "user" else "reply", text, line))
        if tools:
            found += tool_blocks(content, rid, sid, when, line)
        turns(out, found)
    return out
