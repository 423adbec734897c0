"""Distillation (memctl/lifecycle/distill.py).

A real subprocess stands in for the LLM: a small Python script that reads the
prompt on stdin and prints fixed JSON. Episodes are clustered with
e5-small-q4 (multilingual: the episodes are English and Japanese); at
--similarity 0.9 it separates the two topics used here (within 0.96-0.99,
across at most 0.84).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest

from conftest import cli, git
from test_consolidate import e5
from memctl import episodes, facts, ledger
from memctl.errors import BadInput, GitError
from memctl.cli import hints
from memctl.lifecycle import distill as dist
from memctl.store import open_store

THEN = "2026-01-10T09:00:00+09:00"
NOW = "2026-04-10T09:00:00+09:00"  # 90 days later: freshness 0.1

PYTEST = [
    ("pytest failed because the database fixture was not reset between tests", "reset the fixture in teardown"),
    ("pytest failed again: the database fixture kept rows from the previous test", "added a teardown that truncates tables"),
    ("pytest failures traced to the database fixture not being reset", "fixture now resets per test"),
]
ZENN = [
    ("Zennの記事公開が失敗した。同じ日に2件公開しようとした", "1日1件に制限した"),
    ("Zennで同じ日に2件目を公開してデプロイが失敗した", "翌日に公開し直した"),
    ("Zennに1日2件公開しようとしてデプロイ失敗", "ロックファイルで1日1件に"),
]
LONERS = [("Chose SQLite over Postgres for the prototype", "decision"), ("The user asked for shorter commit messages", "feedback")]

ANSWERS = {
    "pytest": {"summary": "Reset the database fixture between tests, or pytest fails", "category": "error_pattern", "confidence": 0.9},
    "Zenn": {"summary": "Zennには1日1件まで公開する", "category": "decision_pattern", "confidence": 0.6},
}

FAKE_LLM = """\
import json, sys
prompt = sys.stdin.read()
with open(sys.argv[1], "a", encoding="utf-8") as log:
    log.write(prompt + "\\x1e")
answers = json.loads(sys.argv[2])
topic = "pytest" if "pytest" in prompt else "Zenn"
print(answers[topic] if isinstance(answers[topic], str) else json.dumps(answers[topic], ensure_ascii=False))
"""

@pytest.fixture(autouse=True)
def _no_server(monkeypatch):
    monkeypatch.setenv("MEMCTL_NO_SERVER", "1")


def llm(tmp_path: Path, answers: dict) -> tuple[str, Path]:
    """A command line running the fake LLM, and the file where it logs the prompts it got."""
    script = tmp_path / "fake_llm.py"
    script.write_text(FAKE_LLM, encoding="utf-8")
    log = tmp_path / "prompts.log"
    cmd = " ".join(shlex.quote(a) for a in (sys.executable, str(script), str(log), json.dumps(answers, ensure_ascii=False)))
    return cmd, log


def prompts(log: Path) -> list[str]:
    return [p for p in log.read_text(encoding="utf-8").split("\x1e") if p] if log.exists() else []


def seed(store, monkeypatch) -> dict[str, list[str]]:
    """Old episodes on two topics, two old loners, one fresh pytest episode; ids by topic."""
    monkeypatch.setenv("MEMCTL_NOW", THEN)
    ids = {"pytest": [], "Zenn": [], "loners": []}
    for text, outcome in PYTEST:
        ids["pytest"].append(episodes.add(store, text, "error", outcome=outcome).id)
    for text, outcome in ZENN:
        ids["Zenn"].append(episodes.add(store, text, "error", outcome=outcome).id)
    for text, kind in LONERS:
        ids["loners"].append(episodes.add(store, text, kind).id)
    monkeypatch.setenv("MEMCTL_NOW", "2026-04-01T09:00:00+09:00")  # 9 days before NOW: too fresh
    ids["fresh"] = [episodes.add(store, "pytest failed: the database fixture was not reset", "error").id]
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    return ids


def run(store, cmd, **kw):
    return dist.distill(store, cmd, similarity=0.9, embedder=e5(), **kw)


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize("text, reason", [
    ("", "the answer is empty"),
    ("Sure! The lesson is: reset fixtures.", "the answer is not JSON (Expecting value at line 1 column 1): 'Sure! The lesson is: reset fixtures.'"),
    ('["a"]', "the answer is a JSON list, not an object"),
    ('{"summary": "x", "category": "preference"}', "the answer has no 'confidence'"),
    ('{"summary": "x", "category": "preference", "confidence": 1, "why": "y"}', "the answer has unexpected keys: 'why'"),
    ('{"summary": " ", "category": "preference", "confidence": 1}', "summary must be a non-empty string"),
    ('{"summary": "a\\nb", "category": "preference", "confidence": 1}', "summary must be one line"),
    ('{"summary": "' + "x" * 301 + '", "category": "preference", "confidence": 1}', "summary is 301 characters; at most 300"),
    ('{"summary": "x", "category": "lesson", "confidence": 1}',
     "category 'lesson' is not one of decision_pattern, error_pattern, optimization, preference"),
    ('{"summary": "x", "category": "preference", "confidence": 1.5}', "confidence must be a number from 0 to 1, got 1.5"),
    ('{"summary": "x", "category": "preference", "confidence": "high"}', "confidence must be a number from 0 to 1, got 'high'"),
    ('{"summary": "x", "category": "preference", "confidence": true}', "confidence must be a number from 0 to 1, got True"),
    ('{"summary": "line1\nline2", "category": "preference", "confidence": 1}',
     "the answer is not JSON (Invalid control character at line 1 column 19): '{\"summary\": \"line1 line2\", "
     "\"category\": \"preference\", \"con...'"),
    ('{"summary": "bidi \\u202e \\u001b[2J", "category": "preference", "confidence": 1}',
     "summary holds a control character (U+202E)"),
    ('{"summary": "first", "summary": "second", "category": "preference", "confidence": 1}',
     "the answer has the key 'summary' twice"),
])
def test_a_bad_answer_says_exactly_what_is_wrong(text, reason):
    with pytest.raises(dist.BadAnswer) as caught:
        dist.parse_answer(text)
    assert caught.value.reason == reason


def test_a_good_answer_may_come_in_one_json_fence():
    plain = '{"summary": "Use uv", "category": "optimization", "confidence": 0.8}'
    assert dist.parse_answer(plain) == dist.Answer("Use uv", "optimization", 0.8)
    assert dist.parse_answer("```json\n" + plain + "\n```\n") == dist.Answer("Use uv", "optimization", 0.8)
    with pytest.raises(dist.BadAnswer):
        dist.parse_answer("Here you go:\n```json\n" + plain + "\n```")


def ep(i, ts="2026-01-10T09:00:00+09:00", kind="error", outcome="fixed"):
    return episodes.Episode(f"ep-{i}", ts, "", kind, f"thing {i} happened", outcome, 0.8)


def test_prompt_and_fact_from_a_cluster():
    cluster = dist.Cluster((ep(1), ep(2, outcome="")))
    assert dist.prompt(cluster) == (
        "You are distilling an AI agent's episodic memory into one durable lesson.\n"
        "Below are 2 related episodes: what happened, and how it turned out.\n"
        "Write the single lesson they teach, in the language of the episodes.\n"
        "Answer with only this JSON object (no prose, no code fence):\n"
        '{"summary": "<the lesson, one line, at most 300 characters>", '
        '"category": "decision_pattern | error_pattern | optimization | preference", '
        '"confidence": <0 to 1: how sure you are that the episodes support it>}\n'
        "\n"
        "Episodes:\n"
        "- [ep-1] 2026-01-10T09:00:00+09:00 error: thing 1 happened -> fixed\n"
        "- [ep-2] 2026-01-10T09:00:00+09:00 error: thing 2 happened\n"
    )
    spec = dist.fact_input(cluster, dist.Answer("Things happen", "preference", 0.95))
    assert spec == facts.FactInput(
        name=cluster.fact_name, description="Things happen", type="user",
        body="Distilled from 2 episodes (preference, model confidence 0.95):\n"
             "- ep-1 (error): thing 1 happened -> fixed\n- ep-2 (error): thing 2 happened",
        importance=0.8, confidence=0.7, tags=("distilled", "preference"), source="episodes:ep-1,ep-2",
    )
    assert cluster.fact_name == dist.Cluster((ep(2), ep(1))).fact_name != dist.Cluster((ep(1), ep(3))).fact_name


def test_only_old_undistilled_episodes_are_candidates():
    from memctl import clock

    now = clock.parse_date(NOW)
    old, fresh, done = ep(1), ep(2, ts="2026-03-01T09:00:00+09:00"), ep(3)  # 90, 40 and 90 days old
    assert dist.candidates([old, fresh, done], {"ep-3"}, now) == [old]


def test_clusters_keep_only_groups_of_min_cluster():
    eps = [ep(i) for i in range(5)]
    pairs = [("ep-0", "ep-1", 0.95), ("ep-0", "ep-2", 0.95), ("ep-1", "ep-2", 0.95), ("ep-3", "ep-4", 0.99)]
    assert [c.ids for c in dist.clusters(eps, pairs, 3)] == [["ep-0", "ep-1", "ep-2"]]
    assert [c.ids for c in dist.clusters(eps, pairs, 2)] == [["ep-0", "ep-1", "ep-2"], ["ep-3", "ep-4"]]


def test_a_command_that_fails_or_hangs_is_a_reason_not_a_crash(tmp_path):
    exe = sys.executable
    with pytest.raises(dist.BadAnswer, match=r"^the command exited with status 3: model overloaded$"):
        dist.run_command([exe, "-c", "import sys; print('x'); sys.stderr.write('model overloaded\\n'); sys.exit(3)"], "p", 10)
    with pytest.raises(dist.BadAnswer, match=r"^the command exited with status 1: last \\x1b\[31mred\\x1b\[0m err$"):
        dist.run_command([exe, "-c", "import sys; sys.stderr.write('last \\033[31mred\\033[0m err'); sys.exit(1)"], "p", 10)
    with pytest.raises(dist.BadAnswer, match=r"^the command did not answer within 0.5 s$"):
        dist.run_command([exe, "-c", "import time; time.sleep(10)"], "p", 0.5)
    assert dist.run_command([exe, "-c", "import sys; print(sys.stdin.read().upper())"], "prompt", 10) == "PROMPT\n"


@pytest.mark.parametrize("starts", ["sleep 30 &", "setsid sleep 30 &"], ids=["in-its-group", "own-session"])
def test_a_command_that_answers_and_exits_leaving_a_process_behind_is_taken_at_its_word(tmp_path, starts):
    """A command that printed its answer and exited 0, leaving `sleep 30 &` behind with its stdout: the
    answer was refused as "did not answer within N s" after waiting out the timeout; with `setsid`, memctl
    waited as long as the leftover lived (600 s for a 5 s timeout), closing a pipe another thread read."""
    script = tmp_path / "answers.sh"
    script.write_text(f'#!/bin/sh\ncat >/dev/null\n{starts}\necho $! > "{tmp_path}/left"\n'
                      'echo \'{"summary": "x"}\'\n', encoding="utf-8")
    script.chmod(0o755)
    try:
        assert dist.run_command([str(script)], "prompt", 10) == '{"summary": "x"}\n'
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "left").read_text()), signal.SIGKILL)


@pytest.mark.parametrize("cmd, message", [
    ("", "--llm-cmd is empty"),
    ("'claude -p", "--llm-cmd \"'claude -p\": No closing quotation"),
    ("no-such-llm-command -p", "--llm-cmd: command 'no-such-llm-command' not found on PATH"),
    ("/nonexistent/llm", "--llm-cmd: /nonexistent/llm is not an executable file"),
])
def test_a_command_that_cannot_run_is_bad_input(cmd, message):
    """The library names the argument (llm_cmd); the CLI words it as its option."""
    with pytest.raises(BadInput) as caught:
        dist.parse_command(cmd)
    assert caught.value.message == message.replace("--llm-cmd", "llm_cmd")
    assert hints.worded(caught.value)[0] == message
    assert caught.value.hint, "every way a command cannot run says what to do"


# ---------------------------------------------------------------- with a store and a real subprocess


def test_a_command_that_prints_without_end_is_killed_at_the_answer_limit():
    """`yes same` as a judge was read whole until the timeout: 3.3 GB in 12 s, and a MemoryError under a limit."""
    with pytest.raises(dist.BadAnswer, match=r"^the answer is over 65,536 bytes: a short answer was expected$"):
        dist.run_command(["yes", "same"], "p", 60)
    child = f"import sys, time; sys.stdout.write('x' * 70000); sys.stdout.flush(); time.sleep(60)"
    with pytest.raises(dist.BadAnswer, match=r"^the answer is over 65,536 bytes"):
        dist.run_command([sys.executable, "-c", child], "p", 60)
    assert dist.run_command([sys.executable, "-c", "import sys; sys.stderr.write('e' * 200000); print('ok')"], "p", 60) == "ok\n"


def test_a_command_that_times_out_is_not_asked_for_the_next_cluster(root, store, monkeypatch, tmp_path):
    """Each cluster asked a hung LLM command again, waiting the whole timeout each time."""
    seed(store, monkeypatch)
    log = tmp_path / "asked"
    script = tmp_path / "hung.py"
    script.write_text(f"import sys, time\nopen({str(log)!r}, 'a').write('x')\ntime.sleep(60)\n", encoding="utf-8")
    head = git(root, "rev-parse", "HEAD").strip()
    result = run(store, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", timeout=1)
    assert [(o.status, o.reason) for o in result.outcomes] == [
        ("rejected", "the command did not answer within 1 s"),
        ("rejected", "not asked: for an earlier cluster, the command did not answer within 1 s")]
    assert log.read_text() == "x" and git(root, "rev-parse", "HEAD").strip() == head


def test_distill_writes_lessons_with_provenance_once(root, store, monkeypatch, tmp_path):
    ids = seed(store, monkeypatch)
    cmd, log = llm(tmp_path, ANSWERS)
    head = git(root, "rev-parse", "HEAD").strip()

    result = run(store, cmd)
    assert result.plan.considered == 8  # the fresh one is not old enough
    assert [(o.status, o.cluster.ids) for o in result.outcomes] == [("created", ids["pytest"]), ("created", ids["Zenn"])]
    asked = prompts(log)
    assert len(asked) == 2 and all(f"[{i}]" in asked[0] for i in ids["pytest"]) and all(f"[{i}]" in asked[1] for i in ids["Zenn"])

    lesson = facts.find(store, result.outcomes[0].fact, archived=False)
    assert lesson.description == "Reset the database fixture between tests, or pytest fails"
    assert (lesson.type, lesson.tags, lesson.meta("confidence"), lesson.meta("importance")) == ("project", ["distilled", "error_pattern"], 0.7, 0.8)
    assert lesson.meta("source") == "episodes:" + ",".join(ids["pytest"])
    assert lesson.body.splitlines()[0] == "Distilled from 3 episodes (error_pattern, model confidence 0.9):"
    zenn = facts.find(store, result.outcomes[1].fact, archived=False)
    assert (zenn.description, zenn.meta("confidence"), zenn.meta("source")) == ("Zennには1日1件まで公開する", 0.6, "episodes:" + ",".join(ids["Zenn"]))

    rows = [(r.values["ts"], r.values["episode"], r.values["fact"]) for r in ledger.read_rows(store, dist.LEDGER)]
    assert rows == [(NOW, i, lesson.name) for i in ids["pytest"]] + [(NOW, i, zenn.name) for i in ids["Zenn"]]
    assert git(root, "rev-list", "--count", f"{head}..HEAD").strip() == "1"
    assert git(root, "log", "-1", "--format=%B").strip() == (
        "memory: distill 2 lessons from 6 episodes\n\n"
        f"{lesson.name} <- {', '.join(ids['pytest'])}\n{zenn.name} <- {', '.join(ids['Zenn'])}"
    )
    assert git(root, "status", "--porcelain") == ""

    again = run(store, cmd)
    assert again.outcomes == [] and again.plan.considered == 2 and again.commit is None
    assert len(prompts(log)) == 2  # the command was not even asked
    assert git(root, "rev-list", "--count", f"{head}..HEAD").strip() == "1"


def test_a_secret_in_a_lesson_is_redacted_with_a_warning_of_distill_and_no_way_around(root, store, monkeypatch, tmp_path, caplog):
    """helper-71: the warning was `remember: ... (hint: run it again with --allow-secrets ...)`, an option distill
    does not have."""
    from memctl import errors

    monkeypatch.setattr(errors, "_reporter", None)  # (a CLI test run before in this process set the CLI's)
    seed(store, monkeypatch)
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    cmd, _ = llm(tmp_path, {**ANSWERS, "pytest": {**ANSWERS["pytest"], "summary": f"Use token {token} for the fixture"}})
    result = run(store, cmd)
    assert [o.status for o in result.outcomes] == ["created", "created"]
    lesson = facts.find(store, result.outcomes[0].fact, archived=False)
    assert lesson.description == "Use token [REDACTED:github-token] for the fixture"
    warned = [r.getMessage() for r in caplog.records if r.name == "memctl" and "redacted" in r.getMessage()]
    assert warned == ["distill: 1 secret redacted before writing (github-token)"]  # no hint: no way around it here
    assert token not in git(root, "log", "-p", "--all")


def test_a_dry_run_says_what_the_run_would_refuse(root, store, monkeypatch, tmp_path):
    """One lesson for both clusters: the dry run planned two, the run wrote one and rejected the other
    ("the same description is already in ..."); the dry run now rejects it as the run does."""
    seed(store, monkeypatch)
    same = {"pytest": ANSWERS["pytest"], "Zenn": ANSWERS["pytest"]}
    cmd, _ = llm(tmp_path, same)
    head = git(root, "rev-parse", "HEAD").strip()
    planned = run(store, cmd, dry_run=True)
    assert git(root, "rev-parse", "HEAD").strip() == head and git(root, "status", "--porcelain") == ""
    done = run(store, cmd)
    shape = lambda result: [(o.status, o.reason.split(" in ")[0]) for o in result.outcomes]  # noqa: E731
    assert shape(planned) == [("planned", ""), ("rejected", "the same description is already")]
    assert shape(done) == [("created", ""), ("rejected", "the same description is already")]
    assert planned.outcomes[1].reason == done.outcomes[1].reason  # the same file named
    assert run(store, llm(tmp_path, {"pytest": ANSWERS["pytest"], "Zenn": ANSWERS["Zenn"]})[0], dry_run=True).outcomes[
        0].status == "planned"  # (distilled already: not asked; the other cluster plans)


def test_garbage_from_the_command_changes_nothing_and_says_why(root, store, monkeypatch, tmp_path):
    seed(store, monkeypatch)
    cmd, log = llm(tmp_path, {"pytest": "Sure! The lesson is: reset fixtures.", "Zenn": "{not json"})
    head = git(root, "rev-parse", "HEAD").strip()
    before = sorted(p.name for p in store.memory_dir.iterdir())

    result = run(store, cmd)
    assert [(o.status, o.reason) for o in result.outcomes] == [
        ("rejected", "the answer is not JSON (Expecting value at line 1 column 1): 'Sure! The lesson is: reset fixtures.'"),
        ("rejected", "the answer is not JSON (Expecting property name enclosed in double quotes at line 1 column 2): '{not json'"),
    ]
    assert result.commit is None and len(prompts(log)) == 2
    assert git(root, "rev-parse", "HEAD").strip() == head and git(root, "status", "--porcelain") == ""
    assert sorted(p.name for p in store.memory_dir.iterdir()) == before
    assert not (store.ledgers_dir / "distilled.tsv").exists()


def test_one_bad_answer_does_not_stop_the_good_one_and_is_asked_again(root, store, monkeypatch, tmp_path):
    ids = seed(store, monkeypatch)
    bad = {**ANSWERS, "Zenn": {"summary": "Zennは1日1件", "category": "lesson", "confidence": 0.6}}
    cmd, log = llm(tmp_path, bad)
    result = run(store, cmd)
    assert [(o.status, o.reason) for o in result.outcomes] == [
        ("created", ""),
        ("rejected", "category 'lesson' is not one of decision_pattern, error_pattern, optimization, preference"),
    ]
    assert dist.distilled_ids(store) == set(ids["pytest"])
    cmd, log = llm(tmp_path, ANSWERS)
    log.unlink()
    retry = run(store, cmd)
    assert [(o.status, o.cluster.ids) for o in retry.outcomes] == [("created", ids["Zenn"])]
    assert len(prompts(log)) == 1


def test_a_lesson_of_a_type_memctl_toml_does_not_declare_is_rejected(root, monkeypatch, tmp_path):
    """A lesson is a project fact (a user fact for a preference): where those are not declared, it is refused."""
    toml = root / "memctl.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace(
        'types = ["user", "feedback", "project", "reference", "procedure"]', 'types = ["feedback"]'), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "only feedback facts")
    store = open_store(root)
    seed(store, monkeypatch)
    cmd, _log = llm(tmp_path, ANSWERS)
    result = run(store, cmd)
    assert [(o.status, o.reason) for o in result.outcomes] == [
        ("rejected", "unknown fact type 'project'; the types are feedback")] * 2
    assert not dist.distilled_ids(store) and git(root, "status", "--porcelain") == ""


def test_dry_run_asks_and_validates_but_writes_nothing(root, store, monkeypatch, tmp_path):
    seed(store, monkeypatch)
    cmd, log = llm(tmp_path, ANSWERS)
    head = git(root, "rev-parse", "HEAD").strip()
    result = run(store, cmd, dry_run=True)
    assert [o.status for o in result.outcomes] == ["planned", "planned"]
    assert git(root, "rev-parse", "HEAD").strip() == head and git(root, "status", "--porcelain") == ""
    # the CLI's summary counts the lessons planned (it once said "0 lessons checked" on every dry run)
    done = cli(root, "distill", "--llm-cmd", cmd, "--dry-run", "--json")
    planned = sum(o["status"] == "planned" for o in json.loads(done.stdout)["outcomes"])
    assert done.exit_code == 0 and planned >= 1, done.stderr
    assert f"{planned} lesson{'s' if planned != 1 else ''} planned, " in done.stderr, done.stderr
    assert git(root, "rev-parse", "HEAD").strip() == head and git(root, "status", "--porcelain") == ""


def test_plan_without_a_command_lists_clusters_and_prompts(store, monkeypatch):
    ids = seed(store, monkeypatch)
    plan = dist.plan(store, similarity=0.9, embedder=e5())
    data = plan.to_dict()
    assert [[e["id"] for e in c["episodes"]] for c in data["clusters"]] == [ids["pytest"], ids["Zenn"]]
    assert data["clusters"][0]["episodes"][0] == {
        "id": ids["pytest"][0], "ts": THEN, "type": "error", "description": PYTEST[0][0], "outcome": PYTEST[0][1],
    }
    assert data["clusters"][1]["prompt"].endswith(f"- [{ids['Zenn'][2]}] {THEN} error: {ZENN[2][0]} -> {ZENN[2][1]}\n")
    since = dist.plan(store, since="2026-02-01", similarity=0.9, embedder=e5())
    assert since.clusters == [] and since.considered == 0


@pytest.mark.parametrize("kw, message", [
    ({"min_cluster": 1}, "--min-cluster must be 2 or more, got 1"),
    ({"similarity": 0.0}, "--similarity must be above 0 and at most 1, got 0"),
    ({"similarity": 1.5}, "--similarity must be above 0 and at most 1, got 1.5"),
    ({"since": "last week"}, "--since 'last week' is not an ISO date or timestamp"),
])
def test_bad_options_are_bad_input(store, kw, message):
    with pytest.raises(BadInput) as caught:
        dist.plan(store, **kw)
    assert caught.value.message == message.replace("--", "").replace("min-cluster", "min_cluster")
    assert hints.worded(caught.value)[0] == message


def test_episodes_distilled_meanwhile_are_refused_before_the_lesson_is_written(root, store, monkeypatch, tmp_path):
    """Another run distils an episode between our plan and our write: no orphan lesson file is left."""
    ids = seed(store, monkeypatch)
    cmd, _ = llm(tmp_path, ANSWERS)
    made = dist.plan(store, similarity=0.9, embedder=e5())
    assert [c.ids for c in made.clusters] == [ids["pytest"], ids["Zenn"]]
    ledger.create(store, dist.LEDGER, dist.COLUMNS, unique="episode", own=True)
    ledger.append(store, dist.LEDGER, [{"ts": NOW, "episode": ids["pytest"][1], "fact": "someone-else"}])
    monkeypatch.setattr(dist, "plan", lambda *a, **k: made)  # our plan predates their run

    result = run(store, cmd)
    assert [(o.status, o.reason if o.status == "rejected" else "") for o in result.outcomes] == [
        ("rejected", f"episode {ids['pytest'][1]} is already distilled"), ("created", "")]
    assert not (store.memory_dir / f"{made.clusters[0].fact_name}.md").exists()
    assert git(root, "status", "--porcelain") == ""


def test_a_failed_commit_undoes_every_lesson_and_ledger_row(root, store, monkeypatch, tmp_path):
    """The lessons are written under one store lock: when the commit fails, the whole is undone
    (no lesson without its ledger rows, nothing left uncommitted), and the error says so."""
    seed(store, monkeypatch)
    cmd, _ = llm(tmp_path, ANSWERS)
    head = git(root, "rev-parse", "HEAD").strip()
    before = sorted(p.name for p in (root / "memory").iterdir())
    hook = root / ".git" / "hooks" / "reference-transaction"  # refuses to move any ref: the commit fails
    hook.write_text('#!/bin/sh\n[ "$1" = prepared ] && { echo refused by the hook >&2; exit 1; }\nexit 0\n', encoding="utf-8")
    hook.chmod(0o755)
    with pytest.raises(GitError) as caught:
        run(store, cmd)
    assert caught.value.message.startswith("not committed, so the change was undone")
    assert git(root, "rev-parse", "HEAD").strip() == head
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert sorted(p.name for p in (root / "memory").iterdir()) == before
    hook.unlink()
    done = run(store, cmd)  # and nothing is left that stops the next run
    assert [o.status for o in done.outcomes] == ["created", "created"] and done.commit is not None


def test_a_cluster_whose_writes_fail_half_way_leaves_nothing_of_itself(root, store, monkeypatch, tmp_path):
    """The distilled ledger's last line is torn (no LF): each lesson's fact is written, then its
    ledger rows are refused. Each cluster's writes are undone together, so no lesson is left
    without its provenance, and nothing is committed."""
    ids = seed(store, monkeypatch)
    cmd, _ = llm(tmp_path, ANSWERS)
    dist._ensure_ledger(store, True)
    path = root / "ledgers" / f"{dist.LEDGER}.tsv"
    path.write_bytes(path.read_bytes() + b"2026-01-01T00:00:00+00:00\tep-x\tlesson-x")  # no LF
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a torn distilled ledger")
    head = git(root, "rev-parse", "HEAD").strip()
    before = sorted(p.name for p in (root / "memory").iterdir())
    result = run(store, cmd)
    assert [(o.status, o.cluster.ids) for o in result.outcomes] == [("rejected", ids["pytest"]), ("rejected", ids["Zenn"])]
    assert all("LF" in o.reason or "newline" in o.reason or "last line" in o.reason for o in result.outcomes), result.outcomes
    assert result.commit is None and git(root, "rev-parse", "HEAD").strip() == head
    assert sorted(p.name for p in (root / "memory").iterdir()) == before
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
