"""`<private>…</private>` never reaches the store (memctl/private.py; issue 26 point 5).

Every way text gets in, driven as a user or an agent drives it, in real processes on a real git
repository: `remember` and `remember --update`, `episode add`, `ledger append` (the fast path and
Typer's), `state update --note`, `episode import` of each host's transcript, the prompt hook (whose
query the access log keeps), and the MCP server's `remember`. Then no private word may be anywhere
in the store's files, in `.memctl/`, or in `git log -p`; `[private]` stands where each span was.
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO, git, mcp_calls, memctl
from memctl.private import hide
from test_secrets import stored_text

NOW = {"MEMCTL_NOW": "2026-05-01T10:00:00+09:00"}
# (text, what stays): closed, nested, upper case, multiline, unclosed (to the end), Japanese around it
CASES = [
    ("本番は<private>秘密の合言葉は青い鳥-PRIV1</private>で確認する", "本番は[private]で確認する"),
    ("outer <private>a <private>PRIV2 inner</private> still PRIV2b</private> after", "outer [private] after"),
    ("case <PRIVATE>PRIV3 loud</Private > done", "case [private] done"),
    ("lines <private>\nPRIV4 one\nPRIV4 two\n</private>\nend", "lines [private]\nend"),
    ("開いたまま <private>PRIV5 最後まで隠れる\n次の行も", "開いたまま [private]"),
]
WORDS = ["PRIV1", "青い鳥", "PRIV2", "inner", "PRIV3", "loud", "PRIV4", "PRIV5", "最後まで隠れる", "次の行も"]


@pytest.mark.parametrize("text, kept", CASES)
def test_hide_replaces_each_span(text, kept):
    assert hide(text)[0] == kept


def test_a_stray_closing_tag_is_dropped_and_plain_text_is_left_alone():
    assert hide("a </private> b") == ("a  b", 0)
    assert hide("<privateer> and private notes") == ("<privateer> and private notes", 0)


def test_no_private_text_reaches_the_store_or_git_history(root, tmp_path):
    env = {**NOW, "MEMCTL_AGENT": "tester"}
    texts = [text for text, _ in CASES]
    joined = "\n".join(texts)
    runs = [
        memctl(root, "remember", "deploy-rule", "--description", f"デプロイ規則 {texts[0]}", "--body", joined,
               "--why", texts[2], "--tag", "ops", env=env),
        memctl(root, "remember", "deploy-rule", "--update", "--body", f"更新 {texts[3]}", "--how", texts[4], env=env),
        memctl(root, "remember", "kept-as-given", "--description", "allowed", "--body", joined, "--allow-secrets", env=env),
        memctl(root, "episode", "add", joined, "--type", "decision", "--outcome", texts[1], env=env),
        memctl(root, "ledger", "create", "notes", "--columns", "date,text", env=env),
        memctl(root, "ledger", "append", "notes", "date=2026-05-01", f"text={joined}", env=env),
        memctl(root, "ledger", "append", "notes", "date=2026-05-02", f"text={joined}", env={**env, "MEMCTL_NO_FAST": "1"}),
        memctl(root, "ledger", "append", "notes", "date=2026-05-03", f"text={joined}", "--allow-secrets",
               env={**env, "MEMCTL_NO_FAST": "1"}),
        memctl(root, "state", "update", "--note", texts[0], env=env),
    ]
    # each host's transcript, the private text in a prompt and in a reply
    fixtures = REPO / "tests" / "fixtures"
    for host, src in (("claude-code", fixtures / "claude-code" / "5d0c6a1e-1111-4a7b-9c1d-000000000001.jsonl"),
                      ("codex", next((fixtures / "codex").glob("rollout-*.jsonl"))),
                      ("gemini", next((fixtures / "gemini").glob("session-*.jsonl"))),
                      ("cursor", next((fixtures / "cursor").glob("*/*.jsonl")))):
        path = tmp_path / host / src.name
        path.parent.mkdir()
        path.write_text(_with_private(host, src.read_text(encoding="utf-8"), texts), encoding="utf-8")
        runs.append(memctl(root, "episode", "import", host, str(path), "--tools", env=env))
    runs.append(memctl(root, "hook", "prompt", input=json.dumps({"prompt": f"デプロイ規則 {joined}"}), env=env))
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert not any(word in run.stderr for word in WORDS), run.stderr

    mcp_calls(root, env, [("remember", dict(name="mcp-note", description=f"MCP {texts[0]}", body=joined, tags=["ops"]))])
    assert memctl(root, "ledger", "commit", "access", env=env).returncode == 0
    text = stored_text(root)
    for word in WORDS:
        assert word not in text, word
    assert git(root, "status", "--porcelain") == ""
    for _, kept in CASES:  # what is around each span stays
        assert kept.replace("\n", "\\n") in text or kept in text, kept
    assert text.count("[private]") >= 40 and "\thook-prompt\t" in text


def _with_private(host: str, data: str, texts: list[str]) -> str:
    """The transcript with every private case added to its first prompt and to a reply."""
    lines = data.splitlines()
    said = "\n".join(texts)
    marks = {"claude-code": ("本番デプロイはいつにするのが安全？", "過去90日の障害"), "codex": ("在庫同期ジョブ", "原因は倉庫API"),
             "gemini": ("決済のWebhook", "イベントIDで冪等"), "cursor": ("リリース前のチェックリスト", "リリース前チェックリスト:")}[host]
    for mark in marks:
        at = next(i for i, line in enumerate(lines) if mark in line)
        lines[at] = lines[at].replace(mark, json.dumps(said + " " + mark, ensure_ascii=False)[1:-1], 1)
    return "\n".join(lines) + "\n"


def test_private_words_in_a_prompt_neither_find_a_fact_nor_hide_one(root):
    """The prompt hook ranks the prompt without its private spans: what it adds is what the same
    prompt without them gets, and a fact only a private word names is not added."""
    env = {**NOW, "MEMCTL_HOOK_RESIDENT": "0"}
    for name, description in (("zenn-rate", "Zenn投稿は1日1件まで"), ("blue-bird", "合言葉は青い鳥 passphrase rotation")):
        assert memctl(root, "remember", name, "--description", description, env=env).returncode == 0

    def hooked(prompt: str) -> str:
        done = memctl(root, "hook", "prompt", input=json.dumps({"prompt": prompt}), env=env)
        assert done.returncode == 0 and "nothing added" not in done.stderr, done.stderr
        return done.stdout

    plain = hooked("Zenn投稿について")
    assert "zenn-rate" in plain
    long_secret = " ".join(["合言葉は青い鳥 passphrase rotation"] * 12)
    assert hooked(f"Zenn投稿 <private>{long_secret}</private> について") == plain
    assert hooked(f"Zenn投稿について <private>{long_secret}") == plain  # unclosed: to the end
    assert hooked(f"<private>{long_secret}</private>") == ""
