"""memctl.episodes: the episodes ledger, add/list, and the recall score."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

import pytest

from memctl import config as config_mod
from memctl import episodes, ledger
from memctl.episodes import Episode
from memctl.errors import BadInput
from memctl.store import open_store

from conftest import git

NOW = "2026-09-14T22:00:22+09:00"


def test_add_creates_and_declares_the_ledger(root, store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    monkeypatch.setenv("MEMCTL_AGENT", "writer")
    (root / "memory" / "feedback-zenn-rate-limit.md").write_text(
        "---\nname: feedback-zenn-rate-limit\ndescription: Zennは1日1件まで\n---\n", encoding="utf-8")  # the ref's fact
    episode = episodes.add(store, "  Zennに記事と書籍を同日公開した ", "error", outcome="rate limit", tags=["zenn", "publish"], refs=["feedback-zenn-rate-limit"])
    assert re.fullmatch(r"ep-20260914130022-[0-9a-f]{4}", episode.id)
    assert (episode.ts, episode.agent, episode.type, episode.importance) == (NOW, "writer", "error", 0.8)
    assert episode.description == "Zennに記事と書籍を同日公開した"
    path = root / "ledgers" / "episodes.tsv"
    assert path.read_text().splitlines() == [
        "id\tts\tagent\ttype\tdescription\toutcome\timportance\ttags\trefs",
        f"{episode.id}\t{NOW}\twriter\terror\tZennに記事と書籍を同日公開した\trate limit\t0.8\tzenn,publish\tfeedback-zenn-rate-limit",
    ]
    decl = config_mod.load(root / "memctl.toml").ledgers["episodes"]
    assert (decl.columns, decl.unique) == (episodes.COLUMNS, "id")
    assert git(root, "log", "-2", "--format=%s").splitlines()[0] == "ledger: create episodes (+1)"  # one commit: ledger and episode
    assert episodes.list_episodes(open_store(root)) == [
        Episode(episode.id, NOW, "writer", "error", "Zennに記事と書籍を同日公開した", "rate limit", 0.8,
                ("zenn", "publish"), ("feedback-zenn-rate-limit",), lineno=2)
    ]


@pytest.mark.parametrize("kind,expected", [("decision", 0.7), ("error", 0.8), ("success", 0.5), ("feedback", 0.9), ("conflict", 0.85), ("insight", 0.5)])
def test_default_importance_by_type(root, kind, expected):
    with open(root / "memctl.toml", "a", encoding="utf-8") as toml:
        toml.write('\n[episodes]\ntypes = ["insight"]\n')  # a declared type outside the defaults
    assert episodes.add(open_store(root), "something happened", kind, commit_changes=False).importance == expected


def test_add_rejects_bad_input_and_writes_nothing(root, store):
    for kwargs in ({"description": " ", "episode_type": "error"},
                   {"description": "x", "episode_type": "Bad Type"},
                   {"description": "x", "episode_type": "error", "importance": 1.5},
                   {"description": "x", "episode_type": "error", "tags": ["a,b"]}):
        with pytest.raises(BadInput):
            episodes.add(store, commit_changes=False, **kwargs)
    assert not (root / "ledgers" / "episodes.tsv").exists()


def test_multiline_and_tabbed_text_round_trips(store):
    text = "line one\nline\ttwo \\ done"
    added = episodes.add(store, text, "decision", outcome="ok\r\n", agent="", commit_changes=False)
    [back] = episodes.list_episodes(store)
    assert (back.description, back.outcome, back.id) == (text, "ok\r\n", added.id)


def test_list_filters(store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", "2026-09-10T10:00:00+09:00")
    episodes.add(store, "old decision", "decision", agent="a", commit_changes=False)
    monkeypatch.setenv("MEMCTL_NOW", "2026-09-14T10:00:00+09:00")
    episodes.add(store, "new error", "error", agent="b", commit_changes=False)
    episodes.add(store, "new decision", "decision", agent="a", commit_changes=False)
    describe = lambda found: [e.description for e in found]  # noqa: E731
    assert describe(episodes.list_episodes(store)) == ["old decision", "new error", "new decision"]
    assert describe(episodes.list_episodes(store, agent="a")) == ["old decision", "new decision"]
    assert describe(episodes.list_episodes(store, episode_type="error")) == ["new error"]
    assert describe(episodes.list_episodes(store, since="2026-09-12")) == ["new error", "new decision"]
    assert describe(episodes.list_episodes(store, agent="a", since="2026-09-14T09:59:59+09:00")) == ["new decision"]
    with pytest.raises(BadInput):
        episodes.list_episodes(store, since="last week")
    # --tail: the last N after the filters and the time order (the ledger's file order is not the time order here)
    monkeypatch.setenv("MEMCTL_NOW", "2026-09-01T10:00:00+09:00")
    episodes.add(store, "oldest, written last", "decision", agent="a", commit_changes=False)
    assert describe(episodes.list_episodes(store, tail=2)) == ["new error", "new decision"]
    assert describe(episodes.list_episodes(store, agent="a", tail=2)) == ["old decision", "new decision"]
    assert describe(episodes.list_episodes(store, tail=99)) == ["oldest, written last", "old decision", "new error", "new decision"]
    assert episodes.list_episodes(store, tail=0) == []
    with pytest.raises(BadInput):
        episodes.list_episodes(store, tail=-1)


def test_list_without_a_ledger_is_empty(store):
    assert episodes.list_episodes(store) == []
    assert not (store.ledgers_dir / "episodes.tsv").exists()


# ---------------------------------------------------------------- recall (recall.py ranks episodes)

def test_recall_reads_the_ledger(store, monkeypatch):
    from memctl import recall

    monkeypatch.setenv("MEMCTL_NOW", NOW)
    episodes.add(store, "Zennの投稿が失敗した", "error", commit_changes=False)
    episodes.add(store, "noteの記事を公開した", "success", commit_changes=False)
    episodes.add(store, "Zenn rate limit hit again", "feedback", agent="other", commit_changes=False)
    _, (found,) = recall.recall(store, ["zenn 投稿"], source="episodes", mode="keyword", log=False)
    relevance = {h.item.description: h.relevance for h in found}  # both are about Zenn; the note isn't
    assert set(relevance) == {"Zennの投稿が失敗した", "Zenn rate limit hit again"}
    assert relevance["Zennの投稿が失敗した"] > relevance["Zenn rate limit hit again"]  # it holds all of the query
    _, (found,) = recall.recall(store, ["投稿"], source="episodes", mode="keyword", log=False)
    assert [h.item.description for h in found] == ["Zennの投稿が失敗した"]
    _, (found,) = recall.recall(store, ["zenn"], source="episodes", agent="other", mode="keyword", log=False)
    assert [h.item.description for h in found] == ["Zenn rate limit hit again"]
    with pytest.raises(BadInput):
        recall.recall(store, ["zenn"], source="episodes", k=0, log=False)


def test_a_colliding_id_is_drawn_again(store, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    drawn = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(episodes, "_random_hex", lambda: next(drawn))
    first = episodes.add(store, "one", "decision", commit_changes=False)
    second = episodes.add(store, "two", "decision", commit_changes=False)
    assert (first.id, second.id) == ("ep-20260914130022-aaaa", "ep-20260914130022-bbbb")
    assert [r.values["id"] for r in ledger.read_rows(store, "episodes")] == [first.id, second.id]


@pytest.mark.parametrize(("change", "said"), [
    ({"id": "fake"}, "episode id 'fake' is not ep- and 1-64 ASCII letters, digits, _ . or -"),
    ({"id": "ep-a,b"}, "episode id 'ep-a,b' is not ep-"),
    ({"ts": "garbage"}, "episode ts 'garbage' is not an ISO 8601 time with its offset"),
    ({"ts": "2026-11-30T09:00:00"}, "is not an ISO 8601 time with its offset"),
    ({"importance": "99"}, "episode importance '99' is not a number from 0 to 1"),
    ({"importance": "高い"}, "episode importance '高い' is not a number from 0 to 1"),
    ({"description": "  "}, "an episode needs a description"),
])
def test_ledger_append_to_episodes_makes_the_checks_episode_add_makes(root, store, monkeypatch, change, said):
    """Found with the MCP Inspector: `ledger_append name=episodes` (and `ledger append episodes`) wrote any
    row; `episode list` and recall then showed an importance of 99 as 1.0, and a ts of "garbage"."""
    monkeypatch.setenv("MEMCTL_NOW", NOW)
    episodes.add(store, "最初のエピソード", "decision")
    row = {"id": "ep-20261130090000-0a1b", "ts": "2026-11-30T09:00:00+09:00", "agent": "me", "type": "decision",
           "description": "締め切りを金曜に決めた", "outcome": "", "importance": "0.7", "tags": "", "refs": ""}
    before = (root / "ledgers" / "episodes.tsv").read_bytes()
    with pytest.raises(BadInput) as raised:
        ledger.append(store, "episodes", [{**row, **change}])
    assert said in raised.value.message
    assert (root / "ledgers" / "episodes.tsv").read_bytes() == before
    ledger.append(store, "episodes", [row])  # a row of episode add's form goes in
    assert {e.id: e.description for e in episodes.list_episodes(open_store(root))}[row["id"]] == "締め切りを金曜に決めた"


def test_episode_tags_are_stored_as_fact_tags_are(root, store):
    """helper-80: `episode add --tag ""` was dropped without a word (a fact's empty tag is refused), and a
    full-width `ｚｅｎｎ` was stored as typed, so recall's tag filter (NFKC, as for facts) never found it."""
    with pytest.raises(BadInput, match="invalid tag ''"):
        episodes.add(store, "with an empty tag", episode_type="decision", tags=["ok", " "])
    added = episodes.add(store, "全角のタグ", episode_type="decision", tags=["ｚｅｎｎ", "zenn", "Ｒｅｌｅａｓｅ　ノート"])
    assert added.tags == ("zenn", "Release ノート")
    assert [e.tags for e in episodes.list_episodes(open_store(root))] == [("zenn", "Release ノート")]
