"""Cursor agent transcripts (`~/.cursor/projects/<project>/agent-transcripts/<id>/<id>.jsonl`).

The shape, from what Cursor writes and the hooks it documents (Cursor 2.x and 3.x, `cursor-agent`;
`transcript_path` in its hook input): one JSON object a line, `{"role": "user" | "assistant",
"message": {"content": [...]}}` with Anthropic-style blocks (`text`, `thinking`, `tool_use`,
`tool_result`). `<project>` is the project's absolute path without its leading `/`, every other
character that is not a letter or a digit as `-` (`/home/me/shop` -> `home-me-shop`); older
Cursor kept `<id>.jsonl` (or plain-text `.txt` transcripts, not read) directly in `agent-transcripts/`.
The records carry no time and no id: each turn gets the file's modification time (so the turns
of one import keep their line order) and an id from the session, the line and the text.

What becomes a turn (docs/TRANSCRIPTS.md): a user record's text -> `prompt` (only what is inside
`<user_query>` when the text has that tag: the rest is context Cursor adds), an assistant
record's `text` blocks -> `reply`; with `tools`, each `tool_use` block -> `tool`
("tool: <name>") and each `tool_result` with `is_error` -> `error`. Left out: thinking blocks,
successful tool results, other roles. A file whose first record has no `role` and `message` is
in a format this importer does not know, and nothing of it is read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from . import Parsed, Turn, clean, objects, record_id, texts, tool_blocks, turns

_QUERY = re.compile(r"<user_query>(.*?)(?:</user_query>|\Z)", re.S)
_KINDS = {"user": "prompt", "assistant": "reply"}


def project_folder(project: str) -> str:
    """The folder name Cursor keeps a project's transcripts under (`/home/me/shop` -> `home-me-shop`)."""
    return re.sub(r"[^A-Za-z0-9]", "-", project.lstrip("/\\"))


def check(first: Any) -> str:
    if isinstance(first, dict) and isinstance(first.get("role"), str) and isinstance(first.get("message"), dict):
        return ""
    return ("not a Cursor agent transcript in the format memctl reads: its first line has no `role` and "
            "`message` (plain-text .txt transcripts and newer formats are not read)")


def session_of(path: Path, first: Any) -> str:
    return path.stem


def _prompt(content: Any) -> str:
    text = "\n\n".join(texts(content))
    if "<user_query>" in text:
        text = "\n\n".join(m.strip() for m in _QUERY.findall(text))
    return clean(text)


def parse(records: Iterable[tuple[int, Any]], *, session: str, tools: bool = False, modified: Any = None) -> Parsed:
    """Turns from (line number, parsed JSON) pairs, each at `modified` (the file's time)."""
    out = Parsed()
    for line, record in objects(records, out):
        role, message = record.get("role"), record.get("message")
        if not isinstance(role, str) or not isinstance(message, dict):
            out.skip(line, "no `role` or `message` object")
            continue
        if role not in _KINDS or modified is None:
            out.left_out += 1
            continue
        content = message.get("content")
        text = _prompt(content) if role == "user" else clean("\n\n".join(texts(content)))
        rid = record_id(None, session, line, role, text)
        found = [Turn(rid, session, modified, _KINDS[role], text, line)] if text else []
        if tools:
            found += tool_blocks(content, rid, session, modified, line)
        turns(out, found)
    return out
