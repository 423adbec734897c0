"""Within Claude Code's limits (issue 24, point 4): what a hook prints stays under 9,000 characters.

Claude Code saves hook output over 10,000 characters to a file and shows the model a 2 KB preview,
so the session-start bundle is cut by characters as well as by its token budget. The store: 1,000
facts written directly, 300 of them pinned with long bodies (English packs four characters into a
token, so the 4,000-token budget alone would print about 16,000), half the rest in Japanese, all old
enough to be listed as stale. Every path the model reads is under the store root stated once on top.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import PINNED_NOW, memctl

LIMIT = 9000


def _build(root: Path, count: int = 1000) -> None:
    from memctl import fact, facts
    from memctl.store import open_store

    store = open_store(root)
    for i in range(count):
        if i % 2:
            desc = f"記事{i}の公開は朝9時に行い、タイトルは32文字以内に収める（ルール{i}）"
        else:
            desc = f"Rule {i}: deploy job {i} runs before the morning report and retries {i % 7} times"
        meta = {"type": ("feedback", "project", "user", "reference")[i % 4],
                "created": "2025-01-01T09:00:00+00:00", "updated": "2025-01-01T09:00:00+00:00"}
        if i < 300:
            meta["pinned"] = True
        front = {"name": f"fact-{i:04d}", "description": desc, "metadata": meta}
        why = " ".join(["because the morning report reads what the job wrote"] * 4)
        body = fact.compose_body(None, why, f"check job {i} first")
        (store.memory_dir / f"fact-{i:04d}.md").write_text(fact.render(fact.Fact(f"fact-{i:04d}", front, body)),
                                                           encoding="utf-8")
    facts.reindex(store, commit_changes=False)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@localhost",
                    "commit", "-qm", "facts"], check=True)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Path:
    from memctl.store import init_store

    root = tmp_path_factory.mktemp("hooklimits") / "store"
    init_store(root)
    _build(root)
    return root


def test_session_start_on_1000_facts_stays_within_9000_characters(big_store):
    done = memctl(big_store, "hook", "session-start", input=json.dumps({"hook_event_name": "SessionStart"}),
                  env={"MEMCTL_NOW": PINNED_NOW, "MEMCTL_AGENT_CHECK": "1"})
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert 8000 < len(text) <= LIMIT, len(text)  # filled up to the limit, not past it
    lines = text.splitlines()
    assert lines[0] == "# memctl context"
    assert lines[1] == f"Store: {big_store.resolve()} (every path below is relative to it; the index's links are relative to memory/)"
    assert lines.count("## Pinned facts") == 1 and "### memory/fact-0000.md" in lines
    assert all((big_store / line[4:]).is_file() for line in lines if line.startswith("### "))
    links = [line.split("](", 1)[1].split(")", 1)[0] for line in lines if line.startswith("- [") and "](" in line]
    assert all((big_store / "memory" / link).is_file() for link in links)  # as the second line says


def test_the_prompt_hook_on_1000_facts_stays_within_9000_characters(big_store):
    prompt = "deploy job morning report retries 記事 公開 朝9時 タイトル " * 200
    done = memctl(big_store, "hook", "prompt", input=json.dumps({"prompt": prompt}),
                  env={"MEMCTL_NOW": PINNED_NOW, "MEMCTL_AGENT_CHECK": "1"})
    assert done.returncode == 0, done.stderr
    assert 0 < len(done.stdout) <= LIMIT
    paths = [line.rsplit("(", 1)[1].rstrip(")") for line in done.stdout.splitlines()[1:]]
    assert paths and all(Path(p).is_absolute() and Path(p).is_file() for p in paths)


def test_the_cut_keeps_whole_lines():
    from memctl.integrations.hooks import within

    text = "".join(f"line {i} 日本語の行\n" for i in range(2000))
    cut = within(text, LIMIT)
    assert len(cut) <= LIMIT and cut.endswith("\n") and text.startswith(cut)
    assert within("short\n", LIMIT) == "short\n"
