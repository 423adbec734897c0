"""The shipped relevance fit against the figures bench/fit_relevance.py measured with it (issue 25, point 1).

The dev data (../shared/data) may not be copied into the repository, and re-embedding it takes minutes,
so the suite reads the report the bench wrote (`python bench/fit_relevance.py --rows ROWS.json --json
bench/results/fit_relevance.json`, docs/RECALL.md) and checks that it is the report of the coefficients
and term weights recall ships, and that its figures meet the issue's properties. A refit that breaks a
property, or coefficients changed without a new report, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memctl import recall, rindex

REPORT = Path(__file__).resolve().parent.parent / "bench" / "results" / "fit_relevance.json"
SETS = ("locomo", "jsts", "stsb", "jsquad")


@pytest.fixture(scope="module")
def report() -> dict:
    return json.loads(REPORT.read_text(encoding="utf-8"))


def test_the_report_is_of_the_shipped_fit(report):
    assert not report["split"] and report["embedder"] == "e5-small-q4" and report["form"] == "base"
    assert tuple(report["fit"]["hybrid"]) == recall.HYBRID_FIT
    assert tuple(report["fit"]["keyword"]) == recall.KEYWORD_FIT
    assert report["term_weights"] == {t: rindex.term_weight(t) for t in report["term_weights"]}
    assert report["floor"] == recall.DEFAULT_MIN_SCORE and set(report["ranking"]) == set(SETS)


@pytest.mark.parametrize("name", SETS)
@pytest.mark.parametrize("k", [1, 10])
def test_hybrid_is_never_below_the_better_single_signal_by_more_than_a_hundredth(report, name, k):
    modes = report["ranking"][name]
    better = max(modes["keyword"][f"r@{k}"], modes["vector"][f"r@{k}"])
    assert modes["hybrid"][f"r@{k}"] >= better - 0.01, (name, k, modes)


def test_jsquad_questions_find_something_at_the_floor_and_hybrid_keeps_up_with_bm25(report):
    jsquad = report["ranking"]["jsquad"]
    assert jsquad["hybrid"]["none_at_floor"] <= 0.10
    assert jsquad["hybrid"]["r@5"] >= jsquad["bm25"]["r@5"]
