"""Transcripts into episodes (memctl/transcripts.py, memctl/importers/): real files, real git.

The fixture transcripts in tests/fixtures/claude-code/ were written for these
tests (two sessions of a made-up shop project, Japanese and English).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import REPO, git
from memctl import episodes, transcripts
from memctl.errors import BadInput, Refused
from memctl.importers import CUT_MARK, claude_code, lines, redact
from memctl.store import open_store

FIXTURES = REPO / "tests" / "fixtures" / "claude-code"
S1 = "5d0c6a1e-1111-4a7b-9c1d-000000000001"
S2 = "5d0c6a1e-2222-4a7b-9c1d-000000000002"


def fixture_copy(tmp_path: Path, session: str) -> Path:
    target = tmp_path / "transcripts" / f"{session}.jsonl"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(FIXTURES / f"{session}.jsonl", target)
    return target


def record(uuid: str, ts: str, kind: str, content, session: str = "s-1", **more) -> str:
    message = {"role": kind, "content": content}
    return json.dumps({"type": kind, "uuid": uuid, "timestamp": ts, "sessionId": session,
                       "isSidechain": False, "message": message, **more}, ensure_ascii=False) + "\n"


def ledger_text(root: Path) -> str:
    return (root / "ledgers" / "episodes.tsv").read_text(encoding="utf-8")


# ---------------------------------------------------------------- what becomes an episode


def test_fixture_sessions_become_prompts_and_replies_in_time_order(store, tmp_path):
    second = fixture_copy(tmp_path, S2)
    first = fixture_copy(tmp_path, S1)
    result = transcripts.import_files(store, "claude-code", [second, first])  # given out of order
    got = [(e.type, e.description[:8], e.refs) for e in episodes.list_episodes(store)]
    assert got == [
        ("prompt", "本番デプロイはい", (f"session:{S1}", "record:a1-0001")),
        ("reply", "過去90日の障害", (f"session:{S1}", "record:a1-0005")),
        ("prompt", "OK, deci", (f"session:{S1}", "record:a1-0006")),
        ("reply", "Noted. I", (f"session:{S1}", "record:a1-0007")),
        ("prompt", "DBマイグレーシ", (f"session:{S2}", "record:b2-0001")),
        ("reply", "はい。order", (f"session:{S2}", "record:b2-0002")),
        ("prompt", "決定: マイグレ", (f"session:{S2}", "record:b2-0003")),
        ("reply", "Rollback", (f"session:{S2}", "record:b2-0004")),
    ]
    first_ep = episodes.list_episodes(store)[0]
    assert first_ep.agent == "claude-code" and first_ep.importance == 0.5
    assert datetime.fromisoformat(first_ep.ts) == datetime(2026, 5, 11, 1, 0, 5, tzinfo=timezone.utc)
    assert first_ep.id.startswith("ep-20260511010005-")
    # left out: the meta caveat, thinking, tool call, tool result, sidechain (session 1); summary line and system record
    by_file = {Path(f.path).name: f for f in result.files}
    assert (by_file[f"{S1}.jsonl"].imported, by_file[f"{S1}.jsonl"].left_out) == (4, 8)
    assert (by_file[f"{S2}.jsonl"].imported, by_file[f"{S2}.jsonl"].left_out) == (4, 1)
    assert git(store.root, "log", "-1", "--format=%s").strip() == "ledger: append episodes (+8)"
    assert git(store.root, "status", "--porcelain") == ""
    assert "内部の考え" not in ledger_text(store.root) and "サブエージェント" not in ledger_text(store.root)


def test_tools_option_adds_tool_names_and_failed_results(store, tmp_path):
    result = transcripts.import_files(store, "claude-code", [fixture_copy(tmp_path, S1)], tools=True)
    kinds = [(e.type, e.description) for e in result.episodes if e.type in ("tool", "error")]
    assert kinds == [("tool", "tool: Bash"), ("tool", "tool: Read"), ("error", "tool error: File does not exist.")]
    assert "12 Fri" not in ledger_text(store.root)  # a successful tool result stays out


def test_tools_asked_for_after_a_plain_import_reads_the_transcript_again(store, tmp_path):
    """The resume point of a plain import is past the tool records it left out: `--tools` asked for
    later read from there and imported nothing (found by an exploratory test)."""
    path = fixture_copy(tmp_path, S1)
    plain = transcripts.import_files(store, "claude-code", [path])
    assert not any(e.type == "tool" for e in plain.episodes)
    tools = transcripts.import_files(store, "claude-code", [path], tools=True)
    assert [(e.type, e.description) for e in tools.episodes] == [
        ("tool", "tool: Bash"), ("tool", "tool: Read"), ("error", "tool error: File does not exist.")]
    assert tools.files[0].resumed_at == 0 and tools.files[0].already == 4
    again = transcripts.import_files(store, "claude-code", [path], tools=True)
    assert again.episodes == [] and again.files[0].resumed_at > 0  # read with tools: resumed from here on
    assert transcripts.import_files(store, "claude-code", [path]).files[0].resumed_at > 0  # plain: a subset


def test_a_transcript_with_a_run_of_nul_bytes_is_read_past_it(store, tmp_path):
    """A writer killed mid-append can leave a block of NUL bytes (the file's size was set, its data
    never written); the session then goes on. The import counts the NUL line as a bad record and
    imports what follows; it refused the whole file as binary, for good, on every later import."""
    path = tmp_path / "s-1.jsonl"
    path.write_text(record("u1", "2026-05-01T10:00:00Z", "user", "最初の質問"), encoding="utf-8")
    assert [e.refs[1] for e in transcripts.import_files(store, "claude-code", [path]).episodes] == ["record:u1"]
    with open(path, "ab") as handle:
        handle.write(b"\x00" * 4096)
    waiting = transcripts.import_files(store, "claude-code", [path])  # no LF yet: perhaps still being written
    assert waiting.episodes == [] and waiting.files[0].torn
    with open(path, "ab") as handle:
        handle.write(b"\n" + record("u2", "2026-05-01T10:05:00Z", "user", "続きの質問").encode())
    later = transcripts.import_files(store, "claude-code", [path])
    assert [e.refs[1] for e in later.episodes] == ["record:u2"] and later.files[0].bad == 1
    whole = tmp_path / "s-2.jsonl"  # the same, read whole for the first time
    whole.write_bytes(path.read_bytes())
    assert transcripts.import_files(store, "claude-code", [whole]).files[0].bad == 1


def test_importing_again_adds_nothing_even_without_the_resume_cache(store, tmp_path):
    files = [fixture_copy(tmp_path, S1), fixture_copy(tmp_path, S2)]
    transcripts.import_files(store, "claude-code", files)
    before, head = ledger_text(store.root), git(store.root, "rev-parse", "HEAD")
    again = transcripts.import_files(store, "claude-code", files)
    assert again.episodes == [] and again.commit is None
    assert [f.records for f in again.files] == [0, 0]  # read from where the last import stopped
    (store.cache_dir / "imports.json").unlink()
    full = transcripts.import_files(store, "claude-code", files)
    assert full.episodes == [] and [f.already for f in full.files] == [4, 4]
    assert ledger_text(store.root) == before and git(store.root, "rev-parse", "HEAD") == head


def test_a_grown_transcript_continues_and_a_torn_line_waits(store, tmp_path):
    path = tmp_path / "s-1.jsonl"
    path.write_text(
        record("u1", "2026-05-01T10:00:00Z", "user", "最初の質問: キャッシュの期限は？")
        + record("u2", "2026-05-01T10:00:30Z", "assistant", [{"type": "text", "text": "キャッシュは24時間で切れます。"}]),
        encoding="utf-8",
    )
    third = record("u3", "2026-05-01T10:01:00Z", "user", "では期限を12時間に短くしよう。")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(third[:25])  # the session is still writing this line
    first = transcripts.import_files(store, "claude-code", [path])
    assert [e.description for e in first.episodes] == ["最初の質問: キャッシュの期限は？", "キャッシュは24時間で切れます。"]
    assert first.files[0].torn and first.files[0].bad == 0
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(third[25:] + record("u4", "2026-05-01T10:01:20Z", "assistant", [{"type": "text", "text": "12時間に変更しました。"}]))
    second = transcripts.import_files(store, "claude-code", [path])
    assert [e.description for e in second.episodes] == ["では期限を12時間に短くしよう。", "12時間に変更しました。"]
    assert second.files[0].resumed_at > 0 and not second.files[0].torn
    assert [e.refs[1] for e in episodes.list_episodes(store)] == ["record:u1", "record:u2", "record:u3", "record:u4"]


def test_a_rewritten_transcript_is_read_again_from_the_start(store, tmp_path):
    path = tmp_path / "s-1.jsonl"
    path.write_text(record("u1", "2026-05-01T10:00:00Z", "user", "first question about caching"), encoding="utf-8")
    transcripts.import_files(store, "claude-code", [path])
    path.write_text(record("v1", "2026-05-02T10:00:00Z", "user", "a different first line, much longer than before")
                    + record("v2", "2026-05-02T10:00:05Z", "user", "and a second one"), encoding="utf-8")
    result = transcripts.import_files(store, "claude-code", [path])
    assert result.files[0].resumed_at == 0
    assert [e.refs[1] for e in result.episodes] == ["record:v1", "record:v2"]


def test_a_long_text_is_cut_with_a_marker_in_one_row(store, tmp_path):
    path = tmp_path / "s-1.jsonl"
    long = "ログの行です。" * 1000  # 7,000 characters
    path.write_text(record("u1", "2026-05-01T10:00:00Z", "user", long), encoding="utf-8")
    (episode,) = transcripts.import_files(store, "claude-code", [path]).episodes
    assert episode.description == long[:2000] + CUT_MARK.format(n=5000)
    assert ledger_text(store.root).count("\n") == 2  # header + one row


def test_the_messages_format(store, tmp_path):
    path = tmp_path / "chat.jsonl"
    rows = [
        {"role": "system", "content": "You are helpful.", "ts": "2026-06-01T09:00:00+09:00"},
        {"role": "user", "content": "週次レポートは月曜の朝に送る？", "ts": "2026-06-01T09:00:10+09:00", "id": "m1"},
        {"role": "assistant", "content": [{"type": "text", "text": "はい、月曜9時に送ります。"}], "ts": "2026-06-01T09:00:20+09:00"},
        {"role": "tool", "content": "send_mail", "ts": "2026-06-01T09:00:30+09:00"},
        {"role": "user", "content": "no timestamp here"},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    result = transcripts.import_files(store, "messages", [path], agent="my-agent")
    assert [(e.type, e.description, e.agent) for e in result.episodes] == [
        ("prompt", "週次レポートは月曜の朝に送る？", "my-agent"), ("reply", "はい、月曜9時に送ります。", "my-agent"),
    ]
    assert result.episodes[0].refs == ("session:chat", "record:m1")
    assert result.episodes[1].refs[1].startswith("record:line-")
    assert (result.files[0].bad, result.files[0].left_out) == (1, 2)
    assert transcripts.import_files(store, "messages", [path]).episodes == []


def test_records_dated_a_day_past_the_clock_are_imported_and_named(store, tmp_path, monkeypatch, caplog):
    """A transcript written on a machine whose clock ran months ahead was imported without a word: its
    records became the newest episodes (and "today's" on that date)."""
    from memctl import errors

    monkeypatch.setattr(errors, "_reporter", None)  # (a CLI test run before in this process set the CLI's)
    path = tmp_path / "chat.jsonl"
    rows = [{"role": "user", "content": f"質問 {i}", "ts": ts, "id": f"m{i}"}
            for i, ts in enumerate(["2026-06-01T09:00:00+09:00", "2026-06-02T10:00:00+09:00", "2026-09-01T09:00:00+09:00"])]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setenv("MEMCTL_NOW", "2026-06-01T12:00:00+09:00")  # the first record is 3 h old, the second 22 h ahead
    caplog.set_level("WARNING", logger="memctl")
    assert len(transcripts.import_files(store, "messages", [path], dry_run=True).episodes) == 3
    result = transcripts.import_files(store, "messages", [path])
    assert [e.description for e in result.episodes] == ["質問 0", "質問 1", "質問 2"]  # imported as dated
    warned = [r.getMessage() for r in caplog.records if r.name == "memctl"]
    assert len(warned) == 2 and all(w.startswith("1 new record(s) dated more than a day after this machine's clock, "
                                                 f"up to 2026-09-01T09:00:00+09:00 ({path}, line 3)") for w in warned), warned
    caplog.clear()
    monkeypatch.setenv("MEMCTL_NOW", "2026-09-01T09:00:00+09:00")
    path.write_text(path.read_text(encoding="utf-8") + json.dumps({"role": "user", "content": "次", "ts": "2026-09-01T10:00:00+09:00", "id": "m3"}) + "\n",
                    encoding="utf-8")
    assert len(transcripts.import_files(store, "messages", [path]).episodes) == 1
    assert not [r for r in caplog.records if r.name == "memctl"]  # an hour ahead is a clock's ordinary difference


# ---------------------------------------------------------------- secrets

AWS_ID = "AKIA" + "Z7Q2M4N8P1R6T3V5"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq8Hd0Lk3N"  # 40 characters
GH_TOKEN = "ghp_" + "R8kd93LmQ2xVn7Ws0Pa4Zt6Yb1Hc5Jf3Ge9D"
GL_TOKEN = "glpat-" + "x7Rk2Pq9Lm4Wn8Tz3Vb6"
SLACK = "xoxb-" + "482916305712-593017264813-Qw8Er7Ty6Ui5Op4As3Df2Gh1"
KEY_BODY = "MIIEowIBAAKCAQEA7Vq3" + "n9Xb2Lk4Jd8Rw1Zp6Ty0Hs5Mc3Qa"
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\nk2Lr8Vn4Pq7Wx1Zs5Ty9\n-----END RSA PRIVATE KEY-----"
DB_PASSWORD = "Sup3r-" + "s3cret-Pw!"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
INTERNAL = "社外秘-" + "20931"
SECRETS = [AWS_ID, AWS_SECRET, GH_TOKEN, GL_TOKEN, SLACK, KEY_BODY, DB_PASSWORD, STRIPE, INTERNAL, "k2Lr8Vn4Pq7Wx1Zs5Ty9"]


def test_a_transcript_that_starts_with_a_byte_order_mark_keeps_its_first_record(store, tmp_path):
    """A JSONL file saved by a Windows editor starts with a UTF-8 BOM: its first record was "not JSON"."""
    path = tmp_path / "bom.jsonl"
    rows = [{"role": "user", "content": "最初の質問", "ts": "2026-06-01T09:00:10+09:00"},
            {"role": "assistant", "content": "最初の答え", "ts": "2026-06-01T09:00:20+09:00"}]
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode())
    result = transcripts.import_files(store, "messages", [path])
    assert [e.description for e in result.episodes] == ["最初の質問", "最初の答え"] and result.files[0].bad == 0


def test_secrets_never_reach_the_ledger_or_git_history(root, tmp_path):
    path = root / "memctl.toml"
    path.write_text(path.read_text(encoding="utf-8") + '\n[import]\nredact_patterns = ["社外秘-\\\\d+"]\n', encoding="utf-8")
    git(root, "add", "memctl.toml")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "config")
    store = open_store(root)
    transcript = tmp_path / "s-secret.jsonl"
    transcript.write_text(
        record("u1", "2026-05-01T10:00:00Z", "user", f"AWSの鍵は {AWS_ID} です。設定して")
        + record("u2", "2026-05-01T10:00:10Z", "assistant", [{"type": "text", "text": f'aws_secret_access_key = "{AWS_SECRET}" を ~/.aws/credentials に書きました'}])
        + record("u3", "2026-05-01T10:00:20Z", "user", f"use {GH_TOKEN} for the GitHub API and {GL_TOKEN} for GitLab")
        + record("u4", "2026-05-01T10:00:30Z", "user", f"deploy key:\n{PRIVATE_KEY}\nthanks")
        + record("u5", "2026-05-01T10:00:40Z", "user", f"my .env:\nDB_HOST=db.internal\nDB_PASSWORD={DB_PASSWORD}\nexport STRIPE_API_KEY={STRIPE}\nDEBUG=1")
        + record("u6", "2026-05-01T10:00:50Z", "assistant", [{"type": "text", "text": f"Slack bot token {SLACK} は {INTERNAL} の件で使う"}]),
        encoding="utf-8",
    )
    result = transcripts.import_files(store, "claude-code", [transcript])
    assert len(result.episodes) == 6
    assert result.redacted == {"aws-access-key": 2, "github-token": 1, "gitlab-token": 1, "private-key": 1,
                               "env": 2, "slack-token": 1, "pattern": 1}
    text = ledger_text(root)
    history = git(root, "log", "-p", "--all")
    for secret in SECRETS:
        assert secret not in text and secret not in history, secret
    assert "DB_HOST=db.internal" in text and "DEBUG=1" in text  # what is not secret stays
    assert "[REDACTED:github-token] for the GitHub API" in text
    assert "deploy key:\\n[REDACTED:private-key]\\nthanks" in text


def test_without_detect_secrets_the_import_refuses(root, tmp_path):
    transcript = fixture_copy(tmp_path, S1)
    code = ("import sys; sys.modules['detect_secrets'] = None\n"  # as if the library were not installed
            "from memctl.cli import main; sys.argv = ['memctl'] + sys.argv[1:]; main()")
    run = subprocess.run([sys.executable, "-c", code, "--root", str(root), "episode", "import", "claude-code", str(transcript)],
                         capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == ("memctl: error: episode import needs the detect-secrets library to keep secrets out of the "
                          "ledger; nothing was imported (hint: reinstall memctl: pip install --force-reinstall memctl-memory, "
                          "or pip install . in a clone)\n")
    assert not (root / "ledgers" / "episodes.tsv").exists()


def test_redaction_leaves_ordinary_text_alone():
    redactor = redact.build()
    text = "commit 3f2a9c1e0b, uuid 123e4567-e89b-12d3-a456-426614174000, 本番デプロイは火曜日 10:00"
    assert redactor.redact(text) == text and redactor.counts == {}


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("content, message", [
    (b"just some notes\nnot json at all\n", "not a JSONL transcript (line 1: not JSON)"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a binary file, not a JSONL transcript"),
    (b'{"type": "user"}\n{"no": "type"}\n', "not a JSONL transcript (line 1: no valid `timestamp`)"),
    (b"\xff\xfe\xfa\n", "not a JSONL transcript (line 1: not UTF-8)"),
], ids=["text", "binary", "no-fields", "not-utf8"])
def test_a_file_that_is_not_a_transcript_is_one_error_and_nothing_is_written(store, tmp_path, content, message):
    good = fixture_copy(tmp_path, S1)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    head = git(store.root, "rev-parse", "HEAD")
    with pytest.raises(BadInput) as caught:
        transcripts.import_files(store, "claude-code", [good, bad])
    assert caught.value.message == f"{bad}: {message}"
    assert git(store.root, "rev-parse", "HEAD") == head and not (store.root / "ledgers" / "episodes.tsv").exists()


def test_bad_records_are_counted_and_skipped(store, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        record("u1", "2026-05-01T10:00:00Z", "user", "good one")
        + '{"type": "user", "message": {"role": "user", "content": "no timestamp"}}\n'
        + '{"message": "no type"}\n' + "{broken json\n" + "[1, 2]\n"
        + record("u2", "2026-05-01T10:00:10Z", "user", "good two"),
        encoding="utf-8",
    )
    result = transcripts.import_files(store, "claude-code", [path])
    assert [e.description for e in result.episodes] == ["good one", "good two"]
    assert (result.files[0].bad, result.files[0].first_bad) == (4, "line 2: no valid `timestamp`")


def test_a_transcript_over_the_size_limit_is_refused(root, tmp_path):
    path = root / "memctl.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n[import]\nmax_file_mb = 0.001\n", encoding="utf-8")
    store = open_store(root)
    with pytest.raises(BadInput, match=r"0 MB to read, more than \[import\] max_file_mb = 0.001"):
        transcripts.import_files(store, "claude-code", [fixture_copy(tmp_path, S1)])


def test_lines_yields_complete_lines_and_stops_at_a_torn_one():
    data = b'{"a": 1}\n\n{"b": 2}\n{"c": '
    assert list(lines(data)) == [(1, 9, {"a": 1}), (2, 10, None), (3, 19, {"b": 2})]
    assert list(lines(b'{"a": 1}')) == [(1, 8, {"a": 1})]  # complete, just without its LF


def test_parse_is_pure_and_keeps_record_ids():
    parsed = claude_code.parse([(1, {"type": "user", "timestamp": "2026-01-01T00:00:00Z", "uuid": "x1",
                                     "message": {"role": "user", "content": "hello"}})], session="s")
    (turn,) = parsed.turns
    assert (turn.record, turn.session, turn.type, turn.text) == ("x1", "s", "prompt", "hello")
