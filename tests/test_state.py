"""memctl.state: the STATE.md format, summaries, commits, history from git, staleness."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memctl import episodes, ledger, state
from memctl.errors import BadInput, NotFound
from memctl.store import open_store

from conftest import git

NOW = "2026-10-26T09:00:00+09:00"


def configure(root: Path, text: str):
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n" + text)
    return open_store(root)


# ---------------------------------------------------------------- durations

@pytest.mark.parametrize("text, seconds", [("24h", 86400), ("90m", 5400), ("1d12h", 129600), ("1w", 604800),
                                           ("30s", 30), ("1h 30m", 5400), ("2D", 172800), (3600, 3600)])
def test_parse_duration(text, seconds):
    assert state.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["24", "h", "24x", "-1h", "0h", "", "1.5h", True, 0, "yesterday"])
def test_parse_duration_refuses(text):
    with pytest.raises(BadInput):
        state.parse_duration(text, "--max-age")


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"),
                                           (90000, "25h"), (91800, "25h30m"), (259200, "3d"), (273600, "3d4h")])
def test_format_duration_reads_back(seconds, text):
    assert state.format_duration(seconds) == text
    if seconds:
        assert state.parse_duration(text) <= seconds


# ---------------------------------------------------------------- the file

SNAPSHOT = """\
---
updated: 2026-10-26T09:00:00+09:00
generator: memctl state update
numbers:
  completed: 48
  ratio: 0.5
  ledger.article-themes.rows: 2
  完了: 3
---
# STATE

## Numbers
- completed: 48
"""


def test_render_and_parse_are_inverse():
    snap = state.parse(SNAPSHOT)
    assert snap == state.Snapshot(
        "2026-10-26T09:00:00+09:00",
        {"completed": 48, "ratio": 0.5, "ledger.article-themes.rows": 2, "完了": 3},
        "# STATE\n\n## Numbers\n- completed: 48\n",
        "memctl state update",
    )
    assert state.render(snap) == SNAPSHOT


OLD_STYLE = """\
---
updated: 2026-10-26T09:00:00+09:00
generator: memctl state update
---
# STATE

## Tasks
- completed: 48
- in progress: 0

## Ledgers
- article-themes: 2 rows
"""


def test_parse_reads_an_old_snapshot_without_numbers_from_its_body():
    snap = state.parse(OLD_STYLE)
    assert snap.updated == "2026-10-26T09:00:00+09:00"
    assert snap.numbers == {"completed": 48, "in_progress": 0}


def test_parse_without_frontmatter():
    snap = state.parse("# STATE\nnothing here\n")
    assert snap.updated is None and snap.numbers == {} and snap.body == "# STATE\nnothing here\n"


# ---------------------------------------------------------------- input

def test_check_numbers_keeps_order_and_numbers():
    assert list(state.check_numbers({"b": 1, "a": 2.5})) == ["b", "a"]


@pytest.mark.parametrize("data, fragment", [
    ([1, 2], "expected a JSON object of numbers, got list"),
    ({"a": "48"}, "'a' must be a number, not str"),
    ({"a": {"b": 1}}, "'a' must be a number, not object"),
    ({"a": [1]}, "'a' must be a number, not array"),
    ({"a": True}, "'a' must be a number, not bool"),
    ({"a": None}, "'a' must be a number, not NoneType"),
    ({"a": float("inf")}, "'a' must be a finite number, not inf"),
    ({"a": float("nan")}, "'a' must be a finite number, not nan"),
    ({"has space": 1}, "invalid key 'has space'"),
    ({"a:b": 1}, "invalid key 'a:b'"),
    *[({key: 1}, f"invalid key {key!r}") for key in ("e\u2028f", "e\x85f", "完了\u3000件数", "a\u00a0b", "a\u200bb")],
    # (a line separator in a key broke `state history` for good; none of them shows)
    ({"facts": 1}, "key 'facts' is reserved"),
    ({"ledger.x.rows": 1}, "key 'ledger.x.rows' is reserved"),
    ({f"k{i}": i for i in range(101)}, "101 numbers; at most 100"),
])
def test_check_numbers_refuses(data, fragment):
    with pytest.raises(BadInput) as info:
        state.check_numbers(data, "stdin")
    assert fragment in info.value.message


def test_parse_numbers_json_names_the_place():
    with pytest.raises(BadInput) as info:
        state.parse_numbers_json('{"completed": 48,', "stdin")
    assert info.value.message.startswith("stdin: invalid JSON: ")
    assert "(line 1, column 18)" in info.value.message


def test_commit_message_template():
    from datetime import datetime

    now = datetime.fromisoformat(NOW)
    numbers = {"completed": 48, "in_progress": 0, "facts": 3}
    template = "auto: STATE.md 自動更新 (日付:{date} 完了:{completed} 進行中:{in_progress} 承認待ち:{approvals})"
    assert state.commit_message(template, rel="state/STATE.md", now=now, numbers=numbers, key_numbers=(), given={}) == \
        "auto: STATE.md 自動更新 (日付:2026-10-26 完了:48 進行中:0 承認待ち:-)"
    default = state.DEFAULT_MESSAGE
    assert state.commit_message(default, rel="state/STATE.md", now=now, numbers=numbers, key_numbers=(),
                                given={"completed": 48, "in_progress": 0}) == \
        "state: update state/STATE.md (date:2026-10-26 completed:48 in_progress:0)"
    assert state.commit_message(default, rel="state/x/STATE.md", now=now, numbers={}, key_numbers=(), given={}) == \
        "state: update state/x/STATE.md (date:2026-10-26)"
    assert state.commit_message(default, rel="s", now=now, numbers=numbers, key_numbers=("facts", "missing"), given={}) == \
        "state: update s (date:2026-10-26 facts:3)"


# ---------------------------------------------------------------- configuration

def test_config_defaults(store):
    cfg = state.state_config(store)
    assert (cfg.title, cfg.max_age, cfg.message, cfg.summaries) == ("STATE", 86400, state.DEFAULT_MESSAGE, None)


def test_scope_config_inherits_and_overrides(root):
    store = configure(root, '[state]\nmax_age = "2d"\n[[state.summaries]]\nkind = "facts"\n'
                            '[state.scopes.blog]\nmax_age = "6h"\n')
    blog = state.state_config(store, "blog")
    assert (blog.title, blog.max_age, blog.summaries) == ("STATE (blog)", 21600, (state.Summary(kind="facts"),))
    assert state.state_config(store, "other").max_age == 172800


@pytest.mark.parametrize("text, fragment", [
    ('[state]\nmax_agee = "1h"\n', "[state] has an unknown key 'max_agee'"),
    ('[state]\nmax_age = "soon"\n', "memctl.toml: [state] max_age: 'soon' is not a duration"),
    ('[[state.summaries]]\nkind = "tweets"\n', "[[state.summaries]] #1 kind = 'tweets' must be one of facts, ledger, episodes"),
    ('[[state.summaries]]\nkind = "ledger"\n', "[[state.summaries]] #1 needs ledger = \"NAME\""),
    ('[[state.summaries]]\nkind = "ledger"\nledger = "../x"\n', "invalid ledger name '../x'"),
    ('[[state.summaries]]\nkind = "facts"\nby = "type"\n', "key 'by' applies only to kind = \"ledger\""),
    ('[[state.summaries]]\nkind = "ledger"\nledger = "x"\nnewest = 1000\n', "newest = 1000 must be a whole number from 0 to 100"),
    ('[state.scopes."a/b"]\n', "invalid state scope [state.scopes.a/b]"),
])
def test_config_errors_name_the_key(root, text, fragment):
    store = configure(root, text)
    with pytest.raises(BadInput) as info:
        state.state_config(store)
    assert fragment in info.value.message


@pytest.mark.parametrize("scope", ["a/b", "..", "", "x" * 81, "a b"])
def test_bad_scope(store, scope):
    with pytest.raises(BadInput):
        state.state_path(store, scope)


# ---------------------------------------------------------------- update

LEDGER_CONFIG = """\
[state]
json_title = "Tasks"

[[state.summaries]]
kind = "ledger"
ledger = "themes"
by = "platform"
newest = 2
columns = ["date", "slug"]

[[state.summaries]]
kind = "facts"

[[state.summaries]]
kind = "episodes"
"""


def test_update_renders_summaries_and_commits(root, store, monkeypatch):
    ledger.create(store, "themes", ["date", "platform", "slug"])
    ledger.append(store, "themes", [{"date": "2026-10-24", "platform": "zenn", "slug": "a"},
                                    {"date": "2026-10-25", "platform": "note", "slug": "b"},
                                    {"date": "2026-10-26", "platform": "zenn", "slug": "c"}])
    store = configure(root, LEDGER_CONFIG)
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    episodes.add(store, "chose the morning slot", "decision")
    done = state.update(store, numbers={"completed": 48, "in_progress": 0}, note="all quiet")
    text = (root / "state" / "STATE.md").read_text(encoding="utf-8")
    assert text == """\
---
updated: 2026-10-26T09:00:00+09:00
generator: memctl state update
numbers:
  completed: 48
  in_progress: 0
  ledger.themes.rows: 3
  facts: 0
  facts.changed_today: 0
  episodes.today: 1
  episodes.today.decision: 1
---
# STATE

## Tasks
- completed: 48
- in_progress: 0

## Ledger themes
- rows: 3
- by platform:
  - zenn: 2
  - note: 1
- newest 2:
  - 2026-10-26 · c
  - 2026-10-25 · b

## Facts
- total: 0
- changed today: 0

## Episodes today
- total: 1
- decision: 1

## Note
all quiet
"""
    assert done.message == "state: update state/STATE.md (date:2026-10-26 completed:48 in_progress:0)"
    assert git(root, "log", "-1", "--format=%s").strip() == done.message
    assert git(root, "show", "--stat", "--format=", "HEAD").split("|")[0].strip() == "state/STATE.md"
    assert done.commit == git(root, "rev-parse", "HEAD").strip()

    ledger.append(store, "themes", [{"date": "2026-10-27", "platform": "qiita", "slug": "d"}])
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-27T09:00:00+09:00")
    again = state.update(store)
    assert again.snapshot.numbers["ledger.themes.new"] == 1
    assert "- new since last update: 1\n" in again.snapshot.body
    assert again.snapshot.numbers["episodes.today"] == 0  # yesterday's episode is not today's
    assert again.message == "state: update state/STATE.md (date:2026-10-27 ledger.themes.rows:4 facts:0 episodes.today:0)"


def test_update_default_summaries_cover_facts_ledgers_and_episodes(root, store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    ledger.create(store, "log", ["ts", "what"])
    done = state.update(store, scope="blog")
    assert done.path == root / "state" / "blog" / "STATE.md"
    assert [line for line in done.snapshot.body.splitlines() if line.startswith("#")] == \
        ["# STATE (blog)", "## Facts", "## Ledger log", "## Episodes today"]


def test_update_same_second_changes_nothing_and_commits_nothing(root, store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    first = state.update(store)
    second = state.update(store)
    assert first.commit is not None and second.commit is None


def test_update_refuses_before_writing(root, store):
    with pytest.raises(BadInput):
        state.update(store, numbers={"a": "x"})
    with pytest.raises(BadInput):
        state.update(store, scope="a/b")
    store = configure(root, '[[state.summaries]]\nkind = "ledger"\nledger = "missing"\n')
    with pytest.raises(NotFound):
        state.update(store)
    assert not (root / "state" / "STATE.md").exists()


def test_update_unknown_column_in_summary(root, store):
    ledger.create(store, "themes", ["date", "slug"])
    store = configure(root, '[[state.summaries]]\nkind = "ledger"\nledger = "themes"\nby = "platform"\n')
    with pytest.raises(BadInput) as info:
        state.update(store)
    assert "no column 'platform'" in info.value.message


# ---------------------------------------------------------------- history

def test_history_reads_numbers_back_from_git(root, store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    state.update(store, numbers={"completed": 1})
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-26T09:01:00+09:00")
    state.update(store, numbers={"completed": 2})
    found = state.history(store)
    assert [(v.updated, v.numbers["completed"]) for v in found] == [
        ("2026-10-26T09:00:00+09:00", 1), ("2026-10-26T09:01:00+09:00", 2)]
    assert found[1].commit == git(root, "rev-parse", "HEAD").strip()
    with pytest.raises(NotFound):
        state.history(store, "never")


def test_history_reads_past_a_commit_subject_with_a_line_separator(root, store, monkeypatch):
    """A commit subject holding U+2028 or U+0085 (a key written so by an older memctl, or any commit a
    remote pushed) was split in two by str.splitlines(): `state history` failed on every run after it."""
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    state.update(store, numbers={"completed": 1})
    path = root / "state" / "STATE.md"
    path.write_text(path.read_text(encoding="utf-8").replace("completed: 1", "completed: 2"), encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "state: e\u2028f and g\x85h")
    found = state.history(store)
    assert [v.numbers["completed"] for v in found] == [1, 2]


# ---------------------------------------------------------------- staleness

def _set_mtime(path: Path, hours_ago: float) -> None:
    then = time.time() - hours_ago * 3600
    os.utime(path, (then, then))


def test_check_fresh_then_stale_by_updated(root, store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    state.update(store)
    assert [f.stale for f in state.check(store)] == [False]
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-27T10:00:00+09:00")
    [found] = state.check(store)
    assert found.line() == "STALE: state/STATE.md (updated 2026-10-26T09:00:00+09:00, 25h ago)"
    assert (found.source, found.age, found.max_age, found.stale) == ("updated", 90000, 86400, True)
    assert state.check(store, max_age=26 * 3600)[0].stale is False


@pytest.mark.file_times
def test_check_without_updated_uses_mtime_when_uncommitted(root, store):
    path = root / "state" / "blog" / "STATE.md"
    path.parent.mkdir(parents=True)
    path.write_text("# STATE\n", encoding="utf-8")
    assert state.check(store)[0].stale is False
    _set_mtime(path, 25)
    [found] = state.check(store)
    assert (found.path, found.source, found.stale) == ("state/blog/STATE.md", "mtime", True)
    assert found.line().startswith("STALE: state/blog/STATE.md (updated ") and found.line().endswith(", 25h ago)")


def test_check_without_updated_uses_the_last_commit(root, store):
    path = root / "state" / "STATE.md"
    path.write_text("# STATE\n", encoding="utf-8")
    git(root, "add", "state/STATE.md")
    old = "2026-01-01T00:00:00+00:00"
    env_commit = ["-c", "user.name=t", "-c", "user.email=t@t"]
    import subprocess

    subprocess.run(["git", "-C", str(root), *env_commit, "commit", "-qm", "old state"], check=True,
                   env={**os.environ, "GIT_AUTHOR_DATE": old, "GIT_COMMITTER_DATE": old})
    # The mtime is fresh, but the commit dates the content: stale.
    [found] = state.check(store)
    assert (found.source, found.updated, found.stale) == ("commit", old, True)


def test_check_scope_max_age_and_problems(root, monkeypatch):
    store = configure(root, '[state.scopes.fast]\nmax_age = "1h"\n')
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    state.update(store)
    state.update(store, scope="fast")
    monkeypatch.setenv("MEMCTL_NOW", "2026-10-26T11:00:00+09:00")
    assert [(f.path, f.stale) for f in state.check(store)] == [("state/STATE.md", False), ("state/fast/STATE.md", True)]
    [problem] = state.problems(store)
    assert (problem.path, problem.code, problem.severity) == ("state/fast/STATE.md", "state-stale", "error")
    assert problem.message.startswith("stale: updated 2026-10-26T09:00:00+09:00, 2h ago (limit 1h;")


def test_problems_report_bad_config(root):
    store = configure(root, '[state]\nmax_age = "soon"\n')
    [problem] = state.problems(store)
    assert (problem.path, problem.code) == ("memctl.toml", "state-config")


def test_a_fact_updated_today_in_another_time_zone_counts_as_changed_today(root, store, monkeypatch):
    """`facts.changed_today` compared the text of `updated`: a fact an agent in a UTC container updated at
    20:00Z on 03-11 (05:00 on 03-12 in Tokyo) did not count on 03-12 in Tokyo, while the episodes section
    (and `recall --since`) compare times."""
    from memctl import facts

    monkeypatch.setenv("MEMCTL_NOW", "2026-03-11T20:00:00+00:00")
    facts.remember(store, facts.FactInput(name="utc-fact", description="nightly builds run in a UTC container"))
    monkeypatch.setenv("MEMCTL_NOW", "2026-03-10T12:00:00+00:00")
    facts.remember(store, facts.FactInput(name="old-fact", description="an older fact about the release train"))
    store = configure(root, '[[state.summaries]]\nkind = "facts"\n')
    monkeypatch.setenv("MEMCTL_NOW", "2026-03-12T09:00:00+09:00")
    state.update(store)
    text = (root / "state" / "STATE.md").read_text(encoding="utf-8")
    assert "facts.changed_today: 1" in text and "utc-fact" in text and "old-fact" not in text, text
