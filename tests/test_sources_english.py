"""English chunking and recall on bench/data/docs-en (docs/SOURCES.md "English documents").

The set is the documentation of a fictional task runner, written for memctl's tests (not copied
from anywhere), with questions.json: questions a user would ask, each with the file and line range
holding its answer. Keyword mode only: no model is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memctl import chunking, docindex, recall, sources
from memctl.store import open_store

SET = Path(__file__).resolve().parent.parent / "bench" / "data" / "docs-en"
QUESTIONS = json.loads((SET / "questions.json").read_text(encoding="utf-8"))
FILES = sorted(p for p in SET.glob("*.md") if p.name != "README.md")
# Measured at the defaults (300 / 60), keyword mode, 2026-12-02: R@1 0.583, R@5 0.817, nothing 0.8 %.
KEYWORD_R5_FLOOR = 0.78


def _structure(lines: list[str]) -> tuple[list[tuple[int, int]], list[tuple[str, ...]]]:
    """The fences (first, last line, 1-based) and the heading path in force at each line, read independently."""
    fences, headings, path, opened = [], [()], [], None
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            if opened is None:
                opened = n
            else:
                fences.append((opened, n))
                opened = None
        elif opened is None and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            path = path[: level - 1] + [line[level:].strip()]
        headings.append(tuple(path))
    assert opened is None
    return fences, headings


@pytest.mark.parametrize("size", [200, 300, 500])
def test_english_chunks_keep_fences_whole_lines_true_and_headings_right(size):
    fenced = 0
    for file in FILES:
        text = file.read_text(encoding="utf-8")
        lines = text.split("\n")
        fences, headings = _structure(lines)
        chunks = chunking.chunk(text, "markdown", size=size, overlap=chunking.DEFAULT_OVERLAP)
        assert chunks, file
        covered = set()
        for c in chunks:
            for first, last in fences:  # a fence is wholly inside the chunk or wholly outside it
                assert last < c.start or first > c.end or (c.start <= first and last <= c.end), (file.name, c)
                fenced += c.start <= first and last <= c.end
            assert c.text.count("```") % 2 == 0, (file.name, c)
            assert c.heading == headings[c.end], (file.name, c)  # the section the chunk's lines are in
            for line in c.text.split("\n"):  # the text comes from its own lines
                assert line.strip() in "\n".join(lines[c.start - 1 : c.end]), (file.name, c, line)
            covered.update(range(c.start, c.end + 1))
        prose = {n for n, line in enumerate(lines, 1) if line.strip() and not line.startswith("#")}
        assert prose <= covered, (file.name, sorted(prose - covered)[:5])  # nothing left out
    assert fenced >= sum(len(_structure(f.read_text(encoding="utf-8").split("\n"))[0]) for f in FILES)


def _overlaps(hit: dict, answer: dict) -> bool:
    """A hit is right when it is in the answer's file and its lines overlap the answer's."""
    return hit["file"].endswith("/" + answer["file"]) and hit["start"] <= answer["end"] and answer["start"] <= hit["end"]


def test_keyword_recall_on_the_english_set_finds_the_answer_passage(root, pinned_clock):
    sources.add(open_store(root), sources.Source("brindle", (str(SET / "*.md"),), ("**/README.md",),
                                                 description="Brindle documentation"), commit_changes=False)
    store = open_store(root)
    (report,) = docindex.index(store, embed=False)
    assert report.files == len(FILES) == 10
    _, rows = recall.recall(store, [q["question"] for q in QUESTIONS], k=5, source="docs", mode="keyword", log=False)
    hits = [[h.to_dict() for h in row] for row in rows]
    r5 = sum(any(_overlaps(h, q) for h in row) for row, q in zip(hits, QUESTIONS)) / len(QUESTIONS)
    nothing = sum(not row for row in hits) / len(QUESTIONS)
    assert r5 >= KEYWORD_R5_FLOOR, r5
    assert nothing <= 0.02, nothing
    assert all(row[0]["source"] == "brindle" and row[0]["source_description"] == "Brindle documentation"
               for row in hits if row)

    known = {  # question -> the heading path of the section holding its answer
        "How do I start the cache server on port 7480?": ["Setting up a shared remote cache", "Running the server"],
        "Which exit code means a task timed out?": ["Command-line reference", "Exit codes"],
        "Can I change the zstd compression level?": ["Configuration reference", "[cache]"],
        "How do I convert my old brindle.yml?": ["Release notes", "2.0.0"],
        "What is .brindle/hashes.db for?": ["How Brindle works", "Cache keys", "Hashing files"],
    }
    by_question = {q["question"]: (q, row) for q, row in zip(QUESTIONS, hits)}
    for question, heading in known.items():
        answer, row = by_question[question]
        assert row and _overlaps(row[0], answer), (question, [h["path"] for h in row])
        assert row[0]["heading"] == heading, (question, row[0]["heading"])
        assert row[0]["path"] == f"{row[0]['file']}:{row[0]['start']}-{row[0]['end']}"



def test_an_ascii_bang_or_question_mark_inside_english_or_code_ends_no_sentence():
    text = ("A glob that starts with `!` removes files, so `!src/**/*.snap` drops snapshots. Is `a?b` a glob? "
            "Yes! 紛失したら連絡すること!再発行は?いいえ。")
    parts = [u.text for u in chunking._sentences(chunking._Unit(text, 1, 1, 0), 100)]
    assert parts == ["A glob that starts with `!` removes files, so `!src/**/*.snap` drops snapshots.",
                     "Is `a?b` a glob?", "Yes!", "紛失したら連絡すること!", "再発行は?", "いいえ。"]
