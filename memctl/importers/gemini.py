"""Gemini CLI sessions (`~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.jsonl`, or `.json`).

The shape, from Gemini CLI's source (packages/core `ChatRecordingService`, `ConversationRecord`;
sessions of 0.6 to 0.61). The project hash is the SHA-256, in hex, of the project's absolute path
(`Storage.getProjectTempDir`). Two layouts:

- **`.jsonl`** (Gemini CLI from about 0.40): the first line is the session record (`sessionId`,
  `projectHash`, `startTime`, `lastUpdated`, `kind`), then one message a line, appended; a message
  that changes (its tool calls finish, its tokens are counted) is appended again with the same
  `id`, and `{"$set": {...}}` lines update the session record.
- **`.json`** (before): one object, the session record with all messages in `messages`, rewritten
  on every turn.

A message: `id`, `timestamp`, `type` (`user`, `gemini`, `info`, `error`, `warning`), `content` (a
string, or a list of parts `{"text": ...}`), and for `gemini` also `toolCalls` (`name`, `status`
`success` | `error` | `cancelled`, `error`). What becomes a turn (docs/TRANSCRIPTS.md): `user` ->
`prompt`, `gemini` -> `reply` (thought parts left out); with `tools`, each tool call -> `tool`
("tool: <name>") and each with `status: error` -> `error`. The last version read of a message
wins; `info`, `error` and `warning` messages (the CLI's own notices), thoughts, token counts and
`$set`/update lines are left out. A file whose first record is not a session record (no
`sessionId`) is in a format this importer does not know, and nothing of it is read.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable

from . import Parsed, Turn, clean, failed, objects, record_id, stamped, texts, turns

_KINDS = {"user": "prompt", "gemini": "reply"}


def project_hash(project: str) -> str:
    """The folder name Gemini CLI keeps a project's sessions under: SHA-256 of its absolute path."""
    return hashlib.sha256(project.encode("utf-8")).hexdigest()


def check(first: Any) -> str:
    if isinstance(first, dict) and isinstance(first.get("sessionId"), str) and first.get("type") in (None, "session_metadata"):
        return ""
    return ("not a Gemini CLI session in the format memctl reads: its first record is not the session record "
            "(`sessionId`; a Gemini CLI older than 0.6 or newer than this memctl)")


def session_of(path: Path, first: Any) -> str:
    sid = first.get("sessionId") if isinstance(first, dict) else None
    return sid.strip() if isinstance(sid, str) and sid.strip() else path.stem


def whole(data: Any) -> list[tuple[int, Any]]:
    """A `.json` session as records: the session record first (as line 1), then its messages."""
    messages = data.get("messages") if isinstance(data, dict) else None
    head = {k: v for k, v in data.items() if k != "messages"} if isinstance(data, dict) else data
    return [(1, head)] + [(n, m) for n, m in enumerate(messages if isinstance(messages, list) else [], 2)]


def _latest(records: Iterable[tuple[int, Any]], out: Parsed) -> list[tuple[int, dict]]:
    """The message records, each id once: at its first line, with its last version's content."""
    order: dict[Any, tuple[int, dict]] = {}
    plain: list[tuple[int, dict]] = []
    for line, record in objects(records, out):
        if "$set" in record or "$rewindTo" in record or "sessionId" in record or record.get("type") == "message_update":
            out.left_out += 1
            continue
        key = record.get("id")
        if isinstance(key, (str, int)) and not isinstance(key, bool):
            if key in order:
                out.left_out += 1  # an earlier version of this message: the later one is kept
                order[key] = (order[key][0], record)
            else:
                order[key] = (line, record)
        else:
            plain.append((line, record))
    return sorted([*order.values(), *plain], key=lambda item: item[0])


def parse(records: Iterable[tuple[int, Any]], *, session: str, tools: bool = False, modified: Any = None) -> Parsed:
    out = Parsed()
    for line, record in _latest(records, out):
        kind = record.get("type")
        if not isinstance(kind, str) or "content" not in record:
            out.skip(line, "no `type` or `content`")
            continue
        if kind not in _KINDS:
            out.left_out += 1
            continue
        when = stamped(out, line, record.get("timestamp"))
        if when is None:
            continue
        rid = record_id(record.get("id"), session, record.get("timestamp"), kind, line)
        found = []
        text = clean("\n\n".join(texts(record.get("content"))))
        if text:
            found.append(Turn(rid, session, when, _KINDS[kind], text, line))
        calls = record.get("toolCalls")
        if tools and isinstance(calls, list):
            for n, call in enumerate(calls):
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    continue
                found.append(Turn(f"{rid}.t{n}", session, when, "tool", f"tool: {clean(call['name'])}", line))
                if call.get("status") == "error":
                    detail = call.get("error") if isinstance(call.get("error"), str) else call.get("resultDisplay")
                    detail = clean(detail) if isinstance(detail, str) else ""
                    found.append(failed(f"{rid}.e{n}", session, when, detail, line))
        turns(out, found)
    return out
