"""Codex, Gemini CLI and Cursor sessions into episodes (memctl/importers/{codex,gemini,cursor}.py; issue 26 point 4).

Real files, real git. The fixtures (tests/fixtures/<host>/, each with a README naming the client
version its shape comes from) were written by hand from each format's documentation and source:
one session of the made-up shop project per host, Japanese and English, each with a `<private>` span.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import REPO, cli, git
from memctl import episodes, importers, transcripts
from memctl.errors import BadInput

FIX = REPO / "tests" / "fixtures"
CODEX = FIX / "codex" / "rollout-2026-05-12T09-00-00-7f3c2a10-3333-4a7b-9c1d-000000000003.jsonl"
GEMINI = FIX / "gemini" / "session-2026-05-13T10-00-8d4e5f60.jsonl"
GEMINI_JSON = FIX / "gemini" / "session-2025-11-20T08-30-1a2b3c4d.json"
S6 = "9e5f6a70-6666-4a7b-9c1d-000000000006"
CURSOR = FIX / "cursor" / S6 / f"{S6}.jsonl"
CURSOR_TIME = 1778650000  # 2026-05-13T05:26:40Z: the fixture's modification time, set by each test
PRIVATE = ("Tanaka-san", "090-1234-5678", "Sato", "rotating", "4471", "pager PIN")


def copy(src: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (name or src.name)
    shutil.copy(src, target)
    os.utime(target, (CURSOR_TIME, CURSOR_TIME))
    return target


def rows(store) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(e.agent, e.type, e.description, e.refs) for e in episodes.list_episodes(store)]


# ---------------------------------------------------------------- what becomes an episode, per host


def test_codex_rollout_becomes_prompts_and_replies_without_codex_context(store, tmp_path):
    path = copy(CODEX, tmp_path)
    result = transcripts.import_files(store, "codex", [path])
    got = [(a, t, d[:12]) for a, t, d, _ in rows(store)]
    assert got == [("codex", "prompt", "在庫同期ジョブが夜中に失"), ("codex", "reply", "原因は倉庫APIのタイム"),
                   ("codex", "prompt", "OK, use 120 "), ("codex", "reply", "Done: sync t")]
    # the session is the session_meta id; AGENTS.md, <environment_context>, developer text, events, reasoning: left out
    assert {e.refs[0] for e in episodes.list_episodes(store)} == {"session:7f3c2a10-3333-4a7b-9c1d-000000000003"}
    assert result.files[0].left_out == 12 and result.files[0].bad == 0
    assert "[private]" in rows(store)[2][2] and result.redacted == {"private": 1}


def test_codex_tools_are_calls_and_failed_commands_only(store, tmp_path):
    transcripts.import_files(store, "codex", [copy(CODEX, tmp_path)], tools=True)
    tools = [(t, d) for _, t, d, _ in rows(store) if t in ("tool", "error")]
    assert tools == [("tool", "tool: shell"), ("error", "tool error: error: connection to warehouse API timed out after 30s"),
                     ("tool", "tool: shell")]  # the second command succeeded: no error


def test_gemini_jsonl_keeps_the_last_version_of_a_message_and_leaves_notices_out(store, tmp_path):
    result = transcripts.import_files(store, "gemini", [copy(GEMINI, tmp_path)], tools=True)
    got = [(t, d[:10], r[1]) for _, t, d, r in rows(store)]
    assert got == [("prompt", "決済のWebhook", "record:g4-0001"), ("reply", "イベントIDで冪等に", "record:g4-0002"),
                   ("tool", "tool: run_", "record:g4-0002.t0"), ("error", "tool error", "record:g4-0002.e0"),
                   ("prompt", "Decided: d", "record:g4-0004"), ("reply", "Noted: web", "record:g4-0005")]
    assert rows(store)[4][2] == "Decided: dedupe webhooks by event id, keep ids 30 days. [private]"
    # the session record, the earlier version of g4-0002, `$set`, the `info` notice
    assert result.files[0].left_out == 4 and rows(store)[0][3][0] == "session:8d4e5f60-4444-4a7b-9c1d-000000000004"


def test_gemini_json_sessions_before_jsonl_are_read_whole_every_time(store, tmp_path):
    path = copy(GEMINI_JSON, tmp_path)
    first = transcripts.import_files(store, "gemini", [path])
    assert [(t, d) for _, t, d, _ in rows(store)] == [("prompt", "ステージング環境のURLは？"),
                                                     ("reply", "staging.shop.internal です。VPN が必要です。")]
    data = json.loads(path.read_text(encoding="utf-8"))  # Gemini rewrites the file with the next turn
    data["messages"].append({"id": "g5-0004", "timestamp": "2025-11-20T08:32:00.000Z", "type": "user", "content": "ありがとう"})
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    again = transcripts.import_files(store, "gemini", [path])
    assert (first.files[0].imported, again.files[0].imported, again.files[0].already) == (2, 1, 2)
    assert again.files[0].resumed_at == 0 and rows(store)[-1][2] == "ありがとう"


def test_cursor_takes_the_user_query_and_the_file_time(store, tmp_path):
    transcripts.import_files(store, "cursor", [copy(CURSOR, tmp_path)], tools=True)
    got = [(t, d[:14]) for _, t, d, _ in rows(store)]
    assert got == [("prompt", "リリース前のチェックリストを"), ("reply", "リリース前チェックリスト: "), ("tool", "tool: Write"),
                   ("error", "tool error: EA"), ("prompt", "Add: releases "), ("reply", "Added: release")]
    assert "<user_info>" not in ledger(store) and "Workspace Path" not in ledger(store)
    assert rows(store)[4][2] == "Add: releases only Tuesday to Thursday. [private]"
    when = datetime.fromtimestamp(CURSOR_TIME, tz=timezone.utc).astimezone().isoformat(timespec="seconds")
    assert {e.ts for e in episodes.list_episodes(store)} == {when}  # the file's time: Cursor writes none


def ledger(store) -> str:
    return (store.root / "ledgers" / "episodes.tsv").read_text(encoding="utf-8")


# ---------------------------------------------------------------- again, later, in pieces


@pytest.mark.parametrize("host, src", [("codex", CODEX), ("gemini", GEMINI), ("cursor", CURSOR)])
def test_each_host_imports_once_and_resumes_a_growing_session(store, tmp_path, host, src):
    whole = transcripts.import_files(store, host, [copy(src, tmp_path / "one")], dry_run=True)
    lines = src.read_bytes().splitlines(keepends=True)
    grown = copy(src, tmp_path / "two")
    grown.write_bytes(b"".join(lines[:5]))
    os.utime(grown, (CURSOR_TIME, CURSOR_TIME))
    first = transcripts.import_files(store, host, [grown])
    with open(grown, "ab") as handle:
        handle.write(b"".join(lines[5:]))
    os.utime(grown, (CURSOR_TIME, CURSOR_TIME))
    second = transcripts.import_files(store, host, [grown])
    third = transcripts.import_files(store, host, [grown])
    assert second.files[0].resumed_at == len(b"".join(lines[:5]))  # read from where the first stopped
    assert len(first.episodes) + len(second.episodes) == len(whole.episodes) and third.episodes == []
    assert [(e.type, e.description, e.refs) for e in episodes.list_episodes(store)] == \
        [(e.type, e.description, e.refs) for e in whole.episodes]  # same sessions, same records as in one go
    assert git(store.root, "status", "--porcelain") == ""


# ---------------------------------------------------------------- --project


def test_project_finds_each_hosts_sessions_for_a_working_directory(root, tmp_path, monkeypatch):
    home = Path(os.environ["HOME"])
    project = tmp_path / "shop"
    project.mkdir()
    absolute = str(project.resolve())
    codex = copy(CODEX, home / ".codex" / "sessions" / "2026" / "05" / "12")
    text = codex.read_text(encoding="utf-8").replace('"cwd": "/home/dev/shop"', json.dumps({"cwd": absolute})[1:-1], 1)
    codex.write_text(text, encoding="utf-8")
    copy(CODEX, home / ".codex" / "sessions" / "2026" / "05" / "13", "rollout-2026-05-13T00-00-00-other.jsonl")  # /home/dev/shop's
    copy(GEMINI, home / ".gemini" / "tmp" / hashlib.sha256(absolute.encode()).hexdigest() / "chats")
    cursor_dir = home / ".cursor" / "projects" / absolute.lstrip("/").replace("/", "-").replace("_", "-").replace(".", "-")
    copy(CURSOR, cursor_dir / "agent-transcripts" / S6)
    for host, count in (("codex", 4), ("gemini", 4), ("cursor", 4)):
        r = cli(root, "episode", "import", host, "--project", str(project), "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["imported"] == count and len(json.loads(r.stdout)["files"]) == 1, host
    r = cli(root, "episode", "import", "gemini", "--project", str(tmp_path / "elsewhere"))
    assert r.exit_code == 3 and r.stderr.startswith(f"memctl: error: no transcripts for {tmp_path / 'elsewhere'}: ")


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("host, first, why", [
    ("codex", {"id": "s", "timestamp": "2025-05-01T00:00:00Z", "instructions": None},
     "not a Codex rollout in the format memctl reads: its first line is not a `session_meta` record"),
    ("gemini", {"version": 3, "session": {"id": "s"}},
     "not a Gemini CLI session in the format memctl reads: its first record is not the session record"),
    ("cursor", {"kind": "turn", "parts": []}, "not a Cursor agent transcript in the format memctl reads"),
])
def test_a_session_in_an_unknown_format_version_is_one_line_and_nothing_is_imported(store, tmp_path, host, first, why):
    src = {"codex": CODEX, "gemini": GEMINI, "cursor": CURSOR}[host]
    good = copy(src, tmp_path / "good")
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps(first) + "\n" + src.read_text(encoding="utf-8").split("\n", 1)[1], encoding="utf-8")
    head = git(store.root, "rev-parse", "HEAD")
    with pytest.raises(BadInput) as caught:
        transcripts.import_files(store, host, [good, odd])
    assert caught.value.message.startswith(f"{odd}: {why}") and caught.value.message.endswith("; nothing imported from it")
    assert "\n" not in caught.value.message and git(store.root, "rev-parse", "HEAD") == head
    assert not (store.root / "ledgers" / "episodes.tsv").exists()
    skipped = transcripts.import_files(store, host, [good, odd], skip_bad_files=True)  # --project: the others go in
    assert skipped.files[-1].problem.startswith(f"{odd}: {why}") and len(skipped.episodes) == 4


def test_a_symlink_is_refused_and_nothing_is_imported(store, tmp_path):
    real = copy(CODEX, tmp_path / "real")
    link = tmp_path / "link.jsonl"
    link.symlink_to(copy(CODEX, tmp_path / "elsewhere"))
    with pytest.raises(BadInput) as caught:
        transcripts.import_files(store, "codex", [real, link])
    assert caught.value.message == f"{link}: a symbolic link; a transcript is not read through a link"
    assert not (store.root / "ledgers" / "episodes.tsv").exists()


def test_bad_lines_and_huge_lines_are_counted_and_the_rest_imported(store, tmp_path, monkeypatch):
    monkeypatch.setattr(importers, "MAX_LINE_BYTES", 4096)
    path = copy(GEMINI, tmp_path)
    body = path.read_text(encoding="utf-8").splitlines()
    huge = json.dumps({"id": "g4-big", "timestamp": "2026-05-13T01:00:30Z", "type": "user", "content": "長" * 3000})
    path.write_text("\n".join(body[:3] + ["{not json", huge, "[1, 2]"] + body[3:]) + "\n", encoding="utf-8")
    result = transcripts.import_files(store, "gemini", [path])
    assert (result.files[0].bad, len(result.episodes)) == (3, 4)
    assert result.files[0].first_bad == "line 4: not JSON"
    assert "g4-big" not in ledger(store) and "長長" not in ledger(store)


def test_a_long_japanese_text_is_cut_to_fit_a_ledger_field(store, tmp_path):
    (store.root / "memctl.toml").write_text((store.root / "memctl.toml").read_text(encoding="utf-8")
                                            + "\n[import]\nmax_chars = 60000\n", encoding="utf-8")
    path = copy(CURSOR, tmp_path)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"role": "assistant", "message": {"content": [{"type": "text", "text": "長い説明。\n" * 12000}]}},
                                ensure_ascii=False) + "\n")
    result = transcripts.import_files(store, "cursor", [path], commit_changes=False)
    last = result.episodes[-1].description
    assert len(last.encode("utf-8")) <= importers.MAX_TEXT_BYTES + 40 and last.endswith("chars]")


def test_cli_imports_a_codex_session_and_names_a_bad_one_in_one_line(root, tmp_path):
    path = copy(CODEX, tmp_path)
    r = cli(root, "episode", "import", "codex", str(path))
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith("memctl: imported 4 episodes from 1 transcript (commit ") and r.stderr.endswith(
        "; 1 private span hidden\n")
    odd = tmp_path / "rollout-old.jsonl"
    odd.write_text('{"id": "s", "timestamp": "2025-05-01T00:00:00Z"}\n', encoding="utf-8")
    r = cli(root, "episode", "import", "codex", str(odd))
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "nothing imported from it" in r.stderr


@pytest.mark.parametrize("host, src", [("codex", CODEX), ("gemini", GEMINI), ("cursor", CURSOR)])
def test_hook_imports_the_transcript_a_hosts_hook_input_names(root, tmp_path, host, src):
    # Codex, Gemini CLI and Cursor hand their hooks `transcript_path` (and `cwd`) on stdin, as Claude Code does.
    path = copy(src, tmp_path)
    hook_input = json.dumps({"session_id": "s", "transcript_path": str(path), "cwd": str(root), "hook_event_name": "SessionEnd"})
    r = cli(root, "episode", "import", host, "--hook", input=hook_input)
    assert (r.exit_code, r.stdout) == (0, "") and r.stderr.startswith("memctl: imported 4 episodes from 1 transcript"), r.stderr
    assert cli(root, "episode", "import", host, "--hook", input=hook_input).stderr == "memctl: imported 0 episodes from 1 transcript\n"
