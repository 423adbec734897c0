"""Consolidation at scale: nearest neighbours instead of all pairs, numbers normalised, conflicts grouped.

The embedder here is the character n-gram one (memctl/embed/ngram.py): a real
embedder that needs no model, so 500 facts embed in a second. The plan from
each fact's nearest neighbours is compared with the plan from every pair.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from memctl import neardup, numerals, textnorm
from memctl.embed.ngram import NgramEmbedder
from memctl.lifecycle import consolidate as cons
from memctl.store import open_store

KANA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワ"
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
JA_TEMPLATES = [
    ("{s}は毎日{n}時に再起動する", "毎日{n}時に{s}を再起動する"),
    ("{s}のログは{n}日間保存する", "{s}のログの保存期間は{n}日間"),
    ("{s}の担当は{n}人で回す", "{n}人で{s}の担当を回す"),
    ("{s}の締切は毎月{n}日", "毎月{n}日が{s}の締切"),
]
EN_TEMPLATES = [
    ("{s} runs every {n} minutes", "Every {n} minutes {s} runs"),
    ("{s} expires after {n} days", "After {n} days {s} expires"),
]
KANJI = {2: "二", 3: "三", 5: "五", 7: "七", 10: "十", 12: "十二", 24: "二十四", 30: "三十"}


def subject(rng: random.Random, ja: bool) -> str:
    """A made-up name of a few words: groups share templates, never subjects."""
    if ja:
        return "・".join("".join(rng.choice(KANA) for _ in range(4)) for _ in range(3))
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(6))


def facts_text(rng: random.Random, count: int) -> list[str]:
    """Groups of a statement, a rewording of it, a kanji-numeral twin, and one with another number."""
    out: list[str] = []
    while len(out) < count:
        ja = rng.random() < 0.6
        name = subject(rng, ja)
        first, second = rng.choice(JA_TEMPLATES if ja else EN_TEMPLATES)
        n, other = rng.sample(sorted(KANJI), 2)
        group = [first.format(s=name, n=n), second.format(s=name, n=n), first.format(s=name, n=other)]
        if ja:
            group.append(first.format(s=name, n=KANJI[n]))
        out.extend(group)
    return out[:count]


def write_facts(root, texts: list[str]) -> None:
    memory = root / "memory"
    for i, text in enumerate(texts):
        (memory / f"f{i:04d}.md").write_text(
            f"---\nname: f{i:04d}\ndescription: {text}\nmetadata:\n  type: project\n  confidence: 0.7\n"
            f"  created: 2026-01-01T00:00:{i % 60:02d}+00:00\n---\nbody\n",
            encoding="utf-8",
        )


def summary(plan: cons.Plan):
    return (
        sorted((m.survivor.stem, tuple(f.stem for f in m.absorbed)) for m in plan.merges),
        sorted((c.a, c.b, c.differs) for c in plan.conflicts),
    )


def test_the_neighbour_plan_equals_the_all_pairs_plan_on_500_facts(root, monkeypatch):
    monkeypatch.setenv("MEMCTL_NO_SERVER", "1")
    write_facts(root, facts_text(random.Random(18), 500))
    # A wide topic margin (topic threshold 0.1) puts most pairs above the search's floor, as
    # e5's high baseline similarity does: the neighbour search then really leaves pairs out.
    (root / "memctl.toml").write_text((root / "memctl.toml").read_text() + "\n[consolidate]\ntopic_margin = 0.6\n")
    store = open_store(root)
    embedder = NgramEmbedder()
    plan = cons.plan(store, embedder=embedder)
    assert plan.facts == 500 and len(plan.merges) > 50 and len(plan.conflicts) > 100  # the data has both

    live = cons.facts_mod.live_facts(store)
    matrix = embedder.embed([row.text for row in neardup.fact_rows(store, live)])  # the texts plan embeds
    floor = min(plan.rules.threshold, plan.rules.topic_threshold)
    every_pair = [(live[i].stem, live[j].stem, s) for i, j, s in neardup.pairs_above(matrix, floor)]
    assert len(every_pair) > 20 * 500  # far more pairs than the neighbour search looks at
    assert summary(plan) == summary(cons.build(live, every_pair, plan.rules))

    # The cluster search (used beyond 20,000 facts) finds the same plan on these facts too.
    ii, jj, ss = neardup.nearest_pairs(matrix, cons.NEIGHBOURS, floor, exact_up_to=0)
    clustered = [(live[i].stem, live[j].stem, s) for i, j, s in zip(ii.tolist(), jj.tolist(), ss.tolist())]
    assert summary(cons.build(live, clustered, plan.rules)) == summary(plan)


def test_nearest_pairs_is_each_rows_top_k():
    rng = np.random.default_rng(3)
    m = rng.standard_normal((300, 16)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    ii, jj, ss = neardup.nearest_pairs(m, 5, -1.0, block=64)
    full = m @ m.T
    np.fill_diagonal(full, -np.inf)
    expected = set()
    for i in range(300):
        for j in np.argsort(-full[i])[:5]:
            expected.add((min(i, int(j)), max(i, int(j))))
    assert set(zip(ii.tolist(), jj.tolist())) == expected
    assert np.allclose(ss, [full[i, j] for i, j in zip(ii, jj)], atol=1e-5)
    ii, jj, _ = neardup.nearest_pairs(m, 5, 0.5)  # the floor drops weaker pairs
    assert all(full[i, j] >= 0.5 for i, j in zip(ii, jj))


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize("a, b", [
    ("二頭のシマウマが草原を歩いている", "２頭のシマウマが草原を歩いている"),
    ("二頭のシマウマが草原を歩いている", "2頭のシマウマが草原を歩いている"),
    ("The budget is 1,000 dollars", "The budget is 1000 dollars"),
    ("参加費は1,000円", "参加費は千円"),
    ("ログは三十日間保存する", "ログは30日間保存する"),
    ("予算は3万円まで", "予算は30,000円まで"),
    ("二〇二六年に移行する", "2026年に移行する"),
])
def test_the_same_number_written_differently_is_no_difference(a, b):
    assert cons.differences(a, b) == []


@pytest.mark.parametrize("a, b, differs", [
    ("二頭のシマウマが草原を歩いている", "三頭のシマウマが草原を歩いている", "number 2 / 3"),
    ("The budget is 1,000 dollars", "The budget is 1,500 dollars", "number 1000 / 1500"),
    ("ログは三十日間保存する", "ログは31日間保存する", "number 30 / 31"),
])
def test_different_numbers_still_differ(a, b, differs):
    assert cons.differences(a, b) == [differs]


@pytest.mark.parametrize("text, expected", [
    ("二十五人", "25人"), ("三百五十", "350"), ("一万円", "10000円"), ("二〇二六年", "2026年"), ("十人", "10人"),
    ("一つ目", "1つ目"), ("1,234,567", "1234567"), ("3万", "30000"), ("1.5万人", "15000人"),
    # words that hold a numeral character stay words
    ("統一する", "統一する"), ("一緒に", "一緒に"), ("十分です", "十分です"), ("万一の時", "万一の時"),
    ("千葉", "千葉"), ("百貨店", "百貨店"), ("1,2,3", "1,2,3"), ("12,34", "12,34"),
])
def test_numerals_normalize(text, expected):
    assert numerals.normalize(textnorm.normalize(text)) == expected


# ---------------------------------------------------------------- conflicts


def pair(a: str, b: str, score: float, overlap: float) -> cons.Judged:
    return cons.Judged(a, b, score, overlap, "conflict", ("number 1 / 2",), f"text {a}", f"text {b}")


def test_conflicts_are_grouped_by_fact_and_ranked():
    hub = [pair("deadline", f"other{i}", 0.80 + i / 100, 0.5) for i in range(4)]
    lone = pair("coffee-a", "coffee-b", 0.95, 0.9)
    groups = cons.grouped(hub + [lone])
    assert [(g.fact, [(c.a, c.b) for c in g.pairs]) for g in groups] == [
        ("coffee-a", [("coffee-a", "coffee-b")]),  # strength 0.925: first
        ("deadline", [("deadline", "other3"), ("deadline", "other2"), ("deadline", "other1"), ("deadline", "other0")]),
    ]
    assert cons.strength(lone) == 0.925
    assert [(g.fact, c.b) for g, c in cons.ranked(hub + [lone], 3)] == [
        ("coffee-a", "coffee-b"), ("deadline", "other3"), ("deadline", "other2")]
    assert len(cons.ranked(hub + [lone], 0)) == 5
