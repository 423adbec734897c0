"""Uninstall leaves no trace (issue 24, point 7): after `agent install` then `agent uninstall`, every file
memctl touched is byte-identical to before, and what it created (files, .claude/) is gone. One test
per scope, each with the files as Claude Code or a person left them: Claude Code's two-space JSON
without a final newline, a hand-written file with four spaces, tabs and Japanese, and none at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import memctl


def _snapshot(home: Path, project: Path) -> dict[str, bytes | None]:
    """Claude Code's places: every file (its bytes) and folder (None) of ~/.claude, ~/.claude.json and the project."""
    seen: dict[str, bytes | None] = {}
    for place in (home / ".claude", home / ".claude.json", project):
        for path in [place, *(sorted(place.rglob("*")) if place.is_dir() else [])]:
            if path.exists():
                seen[str(path)] = path.read_bytes() if path.is_file() else None
    return seen


def _claude_code_json(doc: dict) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=2)  # JSON.stringify(doc, null, 2): no final newline


HAND_SETTINGS = '{\n\t"model": "opus",\n\t"permissions": {\n\t\t"allow": [\n\t\t\t"Bash(git status)"\n\t\t]\n\t},\n\t"env": {\n\t\t"NOTE": "日本語のメモ"\n\t}\n}\n'
FOUR_SPACES = json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
    {"type": "command", "command": "./check.sh"}]}]}, "theme": "ダーク"}, ensure_ascii=False, indent=4) + "\n"


def _prepare(scope: str, home: Path, project: Path) -> None:
    if scope == "project":
        return  # nothing there: every file and folder install writes is new
    if scope == "local":  # Claude Code's ~/.claude.json, with this project's entry as Claude Code writes it
        doc = {"numStartups": 4, "projects": {str(project.resolve()): {
            "allowedTools": [], "mcpServers": {}, "hasTrustDialogAccepted": True}}, "userID": "abc"}
        (home / ".claude.json").write_text(_claude_code_json(doc), encoding="utf-8")
        (project / ".claude").mkdir()
        (project / ".claude" / "settings.json").write_text(HAND_SETTINGS, encoding="utf-8")
        return
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(FOUR_SPACES, encoding="utf-8")


@pytest.mark.parametrize("scope", ["project", "local", "user"])
def test_install_then_uninstall_leaves_no_trace(tmp_path, monkeypatch, scope, root):
    home = Path(os.environ["HOME"])
    project = tmp_path / "プロジェクト"
    project.mkdir()
    _prepare(scope, home, project)
    before = _snapshot(home, project)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    done = memctl(None, "agent", "install", "claude-code", "--scope", scope, "--project", str(project),
                  "--store", str(root))
    assert done.returncode == 0, done.stderr
    assert _snapshot(home, project) != before  # it did install something
    done = memctl(None, "agent", "uninstall", "claude-code", "--scope", scope, "--project", str(project))
    assert done.returncode == 0, done.stderr

    assert _snapshot(home, project) == before
