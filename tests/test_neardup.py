"""near-dup, scan, calibrate and the fact candidates (memctl/neardup.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memctl import embed, ledger, neardup, vcache
from memctl.errors import BadInput, NotFound
from memctl.store import open_store
from test_embed import TEST_MODEL, needs_st
from test_vcache import Counting



def make_ledger(store, rows: list[str], name: str = "themes") -> None:
    ledger.create(store, name, ["date", "theme"], commit_changes=False)
    ledger.append(store, name, [{"date": "2026-01-01", "theme": t} for t in rows], commit_changes=False)


def thousand() -> list[str]:
    return [f"記事テーマ {i}: {'ABCDEFGHIJ'[i % 10]}の話 #{i * 7919 % 1000}" for i in range(1000)]


def test_check_ranks_hits_with_score_overlap_and_place(store):
    source = neardup.items_source("t", [("a", "MCPサーバーのテストとデバッグ"), ("b", "Zenn投稿は1日1件まで"), ("c", "Rustで書くCLI")])
    report = neardup.check(store, ["MCPサーバーのデバッグ手法"], source, top=2, embedder=embed._ngram())
    (found,) = report.checks
    assert [h.id for h in found.hits][0] == "a" and len(found.hits) == 2
    assert found.hits[0].score > found.hits[1].score
    assert 0 < found.hits[0].overlap < 1 and found.hits[0].where == "a"
    assert report.embedder == "char-ngram" and report.rows == 3 and report.embedded == 3


def test_verdict_follows_the_threshold(store):
    source = neardup.items_source("t", [("a", "the same words here")])
    same = neardup.check(store, ["the same words here"], source, threshold=0.99, embedder=embed._ngram())
    assert same.duplicate and same.checks[0].best == pytest.approx(1.0, abs=1e-4)
    other = neardup.check(store, ["completely unrelated"], source, threshold=0.99, embedder=embed._ngram())
    assert not other.duplicate and other.threshold_origin == "--threshold"


def test_bad_top_and_threshold_are_refused(store):
    source = neardup.items_source("t", [("a", "x")])
    with pytest.raises(BadInput):
        neardup.check(store, ["x"], source, top=0, embedder=embed._ngram())
    with pytest.raises(BadInput):
        neardup.check(store, ["x"], source, threshold=3.0, embedder=embed._ngram())


def test_append_to_a_1000_row_ledger_embeds_exactly_one_text(store):
    make_ledger(store, thousand())
    emb = Counting()
    source = neardup.source_for(store, ledger="themes", column="theme")
    first = neardup.check(store, ["新しいテーマ"], source, embedder=emb)
    assert first.embedded == 1000 and first.rows == 1000
    emb.texts.clear()
    ledger.append(store, "themes", [{"date": "2026-01-02", "theme": "追加された一行"}], commit_changes=False)
    second = neardup.check(store, ["もう一つの新しいテーマ"], neardup.source_for(store, ledger="themes", column="theme"), embedder=emb)
    assert second.embedded == 1 and second.rows == 1001
    # exactly one text of the ledger, plus the query itself
    assert emb.texts == ["追加された一行", "もう一つの新しいテーマ"]
    (entry,) = vcache.entries(store)
    assert (entry.rows, entry.embedded_last) == (1001, 1)


def test_editing_one_row_re_embeds_exactly_that_row(store):
    make_ledger(store, thousand())
    emb = Counting()
    source = neardup.source_for(store, ledger="themes", column="theme")
    neardup.check(store, ["q"], source, embedder=emb)
    path = store.ledgers_dir / "themes.tsv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[500] = "2026-01-01\t手で直した行\n"
    path.write_text("".join(lines), encoding="utf-8")
    emb.texts.clear()
    report = neardup.check(store, ["q"], source, embedder=emb)
    assert report.embedded == 1 and emb.texts == ["手で直した行", "q"]


def test_deleting_the_cache_gives_the_same_scores(store):
    make_ledger(store, thousand())
    source = neardup.source_for(store, ledger="themes", column="theme")
    before = neardup.check(store, ["記事テーマ 42: Cの話"], source, embedder=embed._ngram()).checks[0]
    vcache.clear(store)
    after = neardup.check(store, ["記事テーマ 42: Cの話"], source, embedder=embed._ngram())
    assert after.embedded == 1000 and after.checks[0] == before


def test_hits_name_the_ledger_line(store):
    make_ledger(store, ["alpha beta gamma", "delta epsilon"])
    source = neardup.source_for(store, ledger="themes", column="theme")
    hit = neardup.check(store, ["delta epsilon"], source, embedder=embed._ngram()).checks[0].hits[0]
    assert (hit.where, hit.id, hit.text) == ("ledgers/themes.tsv:3", "3", "delta epsilon")


def test_sources_refuse_unknown_ledgers_and_columns(store):
    make_ledger(store, ["x"])
    with pytest.raises(NotFound):
        neardup.source_for(store, ledger="nope", column="theme")
    with pytest.raises(BadInput, match="no column"):
        neardup.source_for(store, ledger="themes", column="nope")
    with pytest.raises(BadInput, match="which column"):
        neardup.source_for(store, ledger="themes")
    with pytest.raises(BadInput, match="nothing to compare"):
        neardup.source_for(store)


def test_the_unique_column_is_the_default(store):
    ledger.create(store, "slugs", ["slug", "theme"], unique="theme", commit_changes=False)
    assert neardup.source_for(store, ledger="slugs").name == "ledger:slugs:theme"


@needs_st
def test_paraphrase_with_the_real_test_model(store):
    rows = ["A plane is taking off.", "A man is playing a flute.", "A woman is slicing an onion.", "Two dogs run on the beach."]
    make_ledger(store, rows)
    emb = embed.choose(embed.settings_from({"embedding": {"model": TEST_MODEL}})).embedder
    source = neardup.source_for(store, ledger="themes", column="theme")
    report = neardup.check(store, ["An airplane is taking off.", "The stock market fell sharply today."], source, embedder=emb, threshold=0.8)
    para, unrelated = report.checks
    assert para.duplicate and para.hits[0].text == "A plane is taking off."
    assert not unrelated.duplicate


# ---------------------------------------------------------------- scan


def test_pairs_above_matches_brute_force():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(300, 16)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    m[200] = m[3]
    found = neardup.pairs_above(m, 0.6, block=64)
    full = m @ m.T
    expected = {(i, j) for i in range(300) for j in range(i + 1, 300) if full[i, j] >= 0.6}
    assert {(i, j) for i, j, _ in found} == expected
    assert found[0][:2] == (3, 200)


def test_scan_lists_near_duplicate_pairs_in_a_ledger(store):
    make_ledger(store, ["MCPサーバーのテストとデバッグ", "Zenn投稿は1日1件まで", "MCPサーバーのテストとデバッグ手法", "Rustで書くCLI"])
    source = neardup.source_for(store, ledger="themes", column="theme")
    report = neardup.scan(store, source, threshold=0.7, embedder=embed._ngram())
    assert [(p.a.where, p.b.where) for p in report.pairs] == [("ledgers/themes.tsv:2", "ledgers/themes.tsv:4")]
    assert report.pairs[0].score >= 0.7 and report.rows == 4


# ---------------------------------------------------------------- calibrate


def test_sweep_and_recommendation():
    scores = np.array([0.95, 0.9, 0.85, 0.8, 0.5, 0.4, 0.82])
    labels = np.array([1, 1, 1, 1, 0, 0, 0])
    points = neardup.sweep(scores, labels)
    best, met = neardup.recommend(points)
    assert met and 0.82 < best.threshold <= 0.85 and best.precision == 1.0 and best.recall == 0.75
    at_half = next(p for p in points if p.threshold == 0.5)
    assert (at_half.tp, at_half.fp, at_half.fn, at_half.tn) == (4, 2, 0, 1)


def test_recommendation_when_precision_is_never_reached():
    points = neardup.sweep(np.array([0.9, 0.9, 0.1]), np.array([1, 0, 0]))
    best, met = neardup.recommend(points)
    assert not met and best.precision == 0.5


def test_read_pairs(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("text_a\ttext_b\tlabel\na\tb\t1\nc\\td\te\t0\n\n", encoding="utf-8")
    assert neardup.read_pairs(path) == [("a", "b", 1), ("c\td", "e", 0)]
    path.write_text("a\tb\t1\nc\td\tyes\n", encoding="utf-8")
    with pytest.raises(BadInput, match=":2: label"):
        neardup.read_pairs(path)
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(BadInput, match="fields"):
        neardup.read_pairs(path)
    with pytest.raises(NotFound):
        neardup.read_pairs(tmp_path / "missing.tsv")


def test_calibrate_and_save_per_model(store):
    pairs = [("MCPサーバーのテスト", "MCPサーバーのテスト手法", 1), ("猫が寝ている", "猫が寝ています", 1),
             ("猫が寝ている", "株価が下がった", 0), ("MCPサーバー", "Zenn投稿", 0)]
    result = neardup.calibrate(store, pairs, embedder=embed._ngram())
    assert result.pairs == 4 and result.positives == 2 and result.recommended.precision == 1.0
    line = neardup.save_threshold(store, result)
    assert line.startswith("char-ngram = ")
    saved = open_store(store.root)
    assert embed.threshold_for(embed.settings_for(saved), embed._ngram()) == (result.recommended.threshold, "memctl.toml")
    with pytest.raises(BadInput, match="both"):
        neardup.calibrate(store, pairs[:2], embedder=embed._ngram())


# ---------------------------------------------------------------- facts


def write_fact(store, stem: str, description: str) -> None:
    (store.memory_dir / f"{stem}.md").write_text(
        f"---\nname: {stem}\ndescription: {description}\nmetadata:\n  type: project\n---\nbody\n", encoding="utf-8"
    )


def test_fact_candidates_report_near_facts_and_skip_excluded(store, monkeypatch):
    write_fact(store, "mcp-debug", "MCPサーバーのテストとデバッグ")
    write_fact(store, "zenn", "Zenn投稿は1日1件まで")
    monkeypatch.setattr(embed, "choose", lambda settings: embed.Choice(Counting()))
    report = neardup.fact_candidates(store, "mcp-howto", "MCPサーバーのテストとデバッグ手法", threshold=0.5)
    assert [h.where for h in report.checks[0].hits] == ["memory/mcp-debug.md"]
    assert neardup.fact_candidates(store, "mcp-howto", "MCPサーバーのテストとデバッグ手法", exclude=["mcp-debug"], threshold=0.5).checks[0].hits == ()


def test_fact_candidates_need_a_vector_embedder(store, monkeypatch):
    write_fact(store, "mcp-debug", "MCPサーバーのテストとデバッグ")
    monkeypatch.setattr(embed, "choose", lambda settings: embed.Choice(embed._ngram()))
    assert neardup.fact_candidates(store, "mcp-howto", "MCPサーバーのテストとデバッグ") is None
    assert neardup.fact_candidates(store, "mcp-howto", "MCPサーバーのテストとデバッグ", allow_ngram=True, threshold=0.7).checks[0].hits[0].id == "mcp-debug"


def test_fact_candidates_never_fail(store, monkeypatch):
    def broken(settings):
        raise embed.ModelUnavailable("no model")

    monkeypatch.setattr(embed, "choose", broken)
    assert neardup.fact_candidates(store, "anything", "anything") is None


def test_saving_a_threshold_keeps_the_users_text(tmp_path):
    from memctl import config

    path = tmp_path / "memctl.toml"
    path.write_text('# mine\n[embedding.thresholds]\n"e5-small-q4" = 0.9  # tuned by hand\nother = 0.5\n\n[git]\ncommit = false\n', encoding="utf-8")
    config.save_threshold(path, "e5-small-q4", 0.951)
    config.save_threshold(path, "/models/x", 0.8)
    text = path.read_text(encoding="utf-8")
    assert text == '# mine\n[embedding.thresholds]\ne5-small-q4 = 0.951\nother = 0.5\n"/models/x" = 0.8\n\n[git]\ncommit = false\n'
    inline = tmp_path / "inline.toml"
    inline.write_text("[embedding]\nthresholds = { a = 1 }\n", encoding="utf-8")
    with pytest.raises(BadInput, match="cannot add") as caught:
        config.save_threshold(inline, "b", 0.5)
    assert caught.value.hint == "add it by hand"
    assert inline.read_text(encoding="utf-8") == "[embedding]\nthresholds = { a = 1 }\n"


@pytest.mark.parametrize("text", ["", "   ", "\u3000"])
def test_a_blank_text_is_bad_input_not_new(root, text):
    """`near-dup ""` answered "new" (exit 0): a job checking a theme before appending it stored a blank one."""
    from conftest import cli

    assert cli(root, "ledger", "create", "themes", "--columns", "date,theme").exit_code == 0
    done = cli(root, "near-dup", text, "--ledger", "themes", "--column", "theme")
    assert done.exit_code == 2 and "the text to check is empty" in done.stderr, done.stderr
