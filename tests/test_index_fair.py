"""An index that keeps every kind of memory in sight (issue 24, point 3).

300 facts over four types, of very different sizes and default importance: MEMORY.md stays within
200 lines and 25 KB, pinned facts are in it, every type keeps lines in proportion to its size (none
drops to zero), the facts written or used lately stay in, the rest go to the topic files, each fact
listed exactly once; the same facts in any order give the same bytes.
"""

from __future__ import annotations

import random

from memctl import fact, index
from memctl.config import Config

SIZES = {"feedback": 130, "project": 70, "reference": 75, "user": 25}


def _facts() -> list[fact.Fact]:
    made = []
    for kind, count in SIZES.items():
        for i in range(count):
            stem = f"{kind}_{i:03d}"
            meta = {"type": kind, "updated": f"2026-0{1 + i % 9}-1{i % 10}T09:00:00+00:00"}
            if kind == "feedback" and i < 3:
                meta["pinned"] = True
            title = f"デプロイ規則 {i}" if i % 2 else f"Rule {i} of {kind}"
            made.append(fact.Fact(stem, {"name": title, "description": f"{kind} fact {i}, keep the report short", **meta},
                                  "body\n"))
    return made


RECENT = {"reference_070.md", "user_024.md", "project_069.md", "feedback_129.md", "reference_074.md"}


def _layout(facts):
    cfg = Config()
    return index.build_layout("# Memory index\n", facts, limit_lines=cfg.max_index_lines,
                              limit_bytes=cfg.max_index_bytes, rank=index.rank_key(cfg.importance_for), recent=RECENT)


def test_every_type_keeps_its_share_within_200_lines():
    facts = _facts()
    layout = _layout(facts)
    memory = layout.memory
    assert memory.count("\n") <= 200 and len(memory.encode("utf-8")) <= 25_000
    listed = [line.target for line in index.parse_lines(memory) if not index.is_topic_link(line.target)]
    assert len(listed) > 150  # the limit is used, not left empty
    counts = {kind: sum(t.startswith(kind + "_") for t in listed) for kind in SIZES}
    pinned = 3
    for kind, size in SIZES.items():
        expected = (len(listed) - pinned) * size / sum(SIZES.values())
        assert counts[kind] > 0 and abs(counts[kind] - expected) <= pinned + len(SIZES) + 1, (kind, counts)
    assert {"feedback_000.md", "feedback_001.md", "feedback_002.md"} <= set(listed)  # pinned
    assert RECENT <= set(listed)  # written or used lately

    topics = [line.target for rel, text in layout.topics.items() if text
              for line in index.parse_lines(text, rel)]
    assert sorted(listed + topics) == sorted(f.file_name for f in facts)  # each fact exactly once


def test_the_same_facts_in_any_order_give_the_same_index():
    facts = _facts()
    first = _layout(facts)
    shuffled = facts[:]
    random.Random(7).shuffle(shuffled)
    assert _layout(shuffled) == first


def test_a_small_type_keeps_its_line_even_in_a_tiny_index():
    facts = _facts()
    cfg = Config()
    layout = index.build_layout("# Memory index\n", facts, limit_lines=20, limit_bytes=cfg.max_index_bytes,
                                rank=index.rank_key(cfg.importance_for))
    listed = [line.target for line in index.parse_lines(layout.memory) if not index.is_topic_link(line.target)]
    assert {t.split("_")[0] for t in listed} == set(SIZES)

