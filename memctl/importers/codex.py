"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl`).

The shape, from Codex CLI's source (codex-rs/protocol: `RolloutLine`, `SessionMeta`, `ResponseItem`;
rollouts of 0.46 to 0.171): one JSON object a line, `{"timestamp", "type", "payload"}`. The first
line is `type: session_meta` (`payload.id` is the session id, `payload.cwd` the working directory,
`payload.cli_version`); a file whose first line is not one is in a format this importer does not
know (Codex before the `payload` wrapper, or a newer one) and nothing of it is read. What becomes
a turn (docs/TRANSCRIPTS.md):

- `response_item` with `payload.type: message`: `role: user` -> `prompt` (its `input_text`
  blocks, without the context Codex sends as user text: `<environment_context>`,
  `<user_instructions>`, `# AGENTS.md instructions`, ...), `role: assistant` -> `reply` (its
  `output_text` blocks);
- with `tools`: `function_call`, `custom_tool_call`, `local_shell_call` -> `tool`
  ("tool: <name>"), and a call's output that failed (`success: false`, or a non-zero
  `metadata.exit_code` in the JSON Codex writes for a command) -> `error`.

Left out: `developer` and `system` messages, reasoning, `event_msg` (it repeats the messages),
`turn_context`, `compacted`, ghost snapshots and every other type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from . import Parsed, Turn, clean, failed, objects, record_id, stamped, texts, turns

_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>",
            "<developer_instructions>", "<user_shell_command>", "<turn_aborted>")
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def check(first: Any) -> str:
    """Why a rollout whose first record is `first` cannot be read ('' when it can)."""
    if isinstance(first, dict) and first.get("type") == "session_meta" and isinstance(first.get("payload"), dict):
        return ""
    return ("not a Codex rollout in the format memctl reads: its first line is not a `session_meta` record "
            "(a Codex CLI older than 0.44 or newer than this memctl)")


def session_of(path: Path, first: Any) -> str:
    """The session id: the `session_meta` record's, else the uuid ending the file's name, else the name."""
    meta = first.get("payload") if isinstance(first, dict) else None
    sid = meta.get("id") if isinstance(meta, dict) else None
    if isinstance(sid, str) and sid.strip():
        return sid.strip()
    found = _UUID.search(path.stem)
    return found.group(0) if found else path.stem


def cwd_of(first: Any) -> str | None:
    meta = first.get("payload") if isinstance(first, dict) else None
    cwd = meta.get("cwd") if isinstance(meta, dict) else None
    return cwd if isinstance(cwd, str) else None


def _prompt(content: Any) -> str:
    kept = [t for t in texts(content, ("input_text", "text")) if not t.lstrip().startswith(_CONTEXT)]
    return clean("\n\n".join(kept))


def _failed(output: Any) -> str | None:
    """The text of a failed call's output, or None when it did not fail (or cannot be told)."""
    if isinstance(output, str) and output.startswith("{"):
        try:
            output = json.loads(output)
        except ValueError:
            return None
    if not isinstance(output, dict):
        return None
    meta = output.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    if output.get("success") is False or (isinstance(code, int) and not isinstance(code, bool) and code != 0):
        body = output.get("content", output.get("output", ""))
        return clean(body if isinstance(body, str) else "\n".join(texts(body, ("input_text", "output_text", "text"))))
    return None


def parse(records: Iterable[tuple[int, Any]], *, session: str, tools: bool = False, modified: Any = None) -> Parsed:
    """Turns from a rollout's (line number, parsed JSON) pairs; `session` is `session_of` the file."""
    out = Parsed()
    for line, record in objects(records, out):
        kind, payload = record.get("type"), record.get("payload")
        if not isinstance(kind, str) or not isinstance(payload, dict):
            out.skip(line, "no `type` or `payload` object")
            continue
        item = payload.get("type")
        if kind != "response_item" or not (item == "message" or (tools and item in _CALLS + _OUTPUTS)):
            out.left_out += 1
            continue
        when = stamped(out, line, record.get("timestamp"))
        if when is None:
            continue
        rid = record_id(payload.get("id"), session, record.get("timestamp"), line)
        found = []
        role = payload.get("role")
        if item == "message" and role == "user":
            text = _prompt(payload.get("content"))
            if text:
                found.append(Turn(rid, session, when, "prompt", text, line))
        elif item == "message" and role == "assistant":
            text = clean("\n\n".join(texts(payload.get("content"), ("output_text", "text"))))
            if text:
                found.append(Turn(rid, session, when, "reply", text, line))
        elif item in _CALLS:
            name = payload.get("name") if item != "local_shell_call" else "shell"
            if isinstance(name, str) and name.strip():
                found.append(Turn(f"{rid}.t", session, when, "tool", f"tool: {clean(name)}", line))
        elif item in _OUTPUTS:
            detail = _failed(payload.get("output"))
            if detail is not None:
                found.append(failed(f"{rid}.e", session, when, detail, line))
        turns(out, found)
    return out
