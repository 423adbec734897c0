"""The hosts whose transcripts `episode import` reads, and what the import needs to know of each.

Every host module only parses its records (`parse`); the rest of the import (reading, resuming,
redacting, appending) is the same for all of them (memctl/transcripts.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import Parsed, claude_code, codex, cursor, gemini, messages


def _any_first(first: Any) -> str:
    return ""  # every record names what it needs: no file-wide check


def _stem(path: Path, first: Any) -> str:
    return path.stem


@dataclass(frozen=True)
class Host:
    name: str
    parse: Callable[..., Parsed]  # (records, *, session, tools, modified) -> Parsed
    agent: str  # the `agent` column unless --agent or MEMCTL_AGENT says otherwise
    hint: str  # where the host writes its transcripts, for an error about a file
    check: Callable[[Any], str] = _any_first  # why a file whose first record is this cannot be read ('' if it can)
    session_of: Callable[[Path, Any], str] = _stem  # the session id, from the path and the first record
    whole: Callable[[Any], list] | None = None  # a `.json` file read whole, as records (Gemini before JSONL)
    timeless: bool = False  # the records carry no time: each turn gets the file's modification time

    @property
    def strict(self) -> bool:
        """The file's first record decides whether the file is read at all (a format check)."""
        return self.check is not _any_first


HOSTS: dict[str, Host] = {
    "claude-code": Host("claude-code", claude_code.parse, "claude-code",
                        "Claude Code writes ~/.claude/projects/<project>/<session-id>.jsonl"),
    "codex": Host("codex", codex.parse, "codex", "Codex CLI writes ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl",
                  codex.check, codex.session_of),
    "gemini": Host("gemini", gemini.parse, "gemini",
                   "Gemini CLI writes ~/.gemini/tmp/<project hash>/chats/session-*.jsonl (or .json)",
                   gemini.check, gemini.session_of, whole=gemini.whole),
    "cursor": Host("cursor", cursor.parse, "cursor",
                   "Cursor writes ~/.cursor/projects/<project>/agent-transcripts/<id>/<id>.jsonl",
                   cursor.check, cursor.session_of, timeless=True),
    "messages": Host("messages", messages.parse, "agent", "a transcript holds one JSON object per line"),
}
