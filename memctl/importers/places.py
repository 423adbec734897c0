"""Where each host keeps a project's transcripts (`episode import HOST --project DIR`; docs/TRANSCRIPTS.md).

DIR is either a folder of the host's transcript files, or the project's working directory, which
the host maps to its own folder: Claude Code and Cursor by an encoding of the path, Gemini CLI by
its SHA-256, Codex by date (then each rollout's `session_meta.cwd` says whose it is).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..claude_paths import project_folder
from ..errors import NotFound
from . import cursor, gemini

_HEAD_BYTES = 1024 * 1024  # a rollout's first line (its session_meta, with the instructions) is read up to this


def home(variable: str, default: str) -> Path:
    return Path(os.environ.get(variable) or str(Path.home() / default))


def _jsonl(folder: Path, pattern: str = "*.jsonl") -> list[Path]:
    return sorted(p for p in folder.glob(pattern) if p.is_file() and not p.is_symlink())


def project_transcripts(host: str, project: str | os.PathLike) -> list[Path]:
    """The transcript files of `project` for `host` (NotFound when there are none)."""
    folder = Path(project).expanduser()
    where: list[Path] = []
    if host in ("claude-code", "messages", "codex", "cursor"):
        mine = _jsonl(folder) if folder.is_dir() else []
        if mine:
            return mine
    absolute = str(folder.resolve())
    if host == "claude-code":
        kept = home("CLAUDE_CONFIG_DIR", ".claude") / "projects" / project_folder(absolute)
        where, found = [kept], _jsonl(kept)
    elif host == "codex":
        where, found = _codex(absolute)
    elif host == "gemini":
        where, found = _gemini(folder, absolute)
    elif host == "cursor":
        kept = Path.home() / ".cursor" / "projects" / cursor.project_folder(absolute) / "agent-transcripts"
        base = folder / "agent-transcripts" if (folder / "agent-transcripts").is_dir() else kept
        where, found = [base], _jsonl(base) + _jsonl(base, "*/*.jsonl")
    else:
        found = []
    if not found:
        places = " nor ".join(str(p) for p in [folder, *where])
        raise NotFound(f"no transcripts for {project}: neither {places} holds {host} transcripts",
                       hint="give the transcript files, or the project folder")
    return found


def _codex(absolute: str) -> tuple[list[Path], list[Path]]:
    """Every rollout under $CODEX_HOME/sessions whose `session_meta.cwd` is the project."""
    sessions = home("CODEX_HOME", ".codex") / "sessions"
    found = []
    for path in _jsonl(sessions, "**/rollout-*.jsonl"):
        try:
            with open(path, "rb") as handle:
                first = json.loads(handle.readline(_HEAD_BYTES).decode("utf-8"))
        except (OSError, ValueError):
            continue
        meta = first.get("payload") if isinstance(first, dict) else None
        if isinstance(meta, dict) and meta.get("cwd") == absolute:
            found.append(path)
    return [sessions], found


def _gemini(folder: Path, absolute: str) -> tuple[list[Path], list[Path]]:
    """`chats/` of DIR if it is a Gemini folder, else of ~/.gemini/tmp/<sha256 of DIR's absolute path>."""
    if folder.name == "chats" and folder.is_dir():
        chats = folder
    elif (folder / "chats").is_dir():
        chats = folder / "chats"
    else:
        chats = Path.home() / ".gemini" / "tmp" / gemini.project_hash(absolute) / "chats"
    found = sorted(_jsonl(chats, "session-*.json") + _jsonl(chats) + _jsonl(chats, "*/*.jsonl"))
    return [chats], found
