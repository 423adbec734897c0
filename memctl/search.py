"""BM25 over token lists. Pure: no I/O, no knowledge of facts or ledgers.

Tokens come from textnorm.tokens (words, and bigrams over kana/kanji runs), so
Japanese and English share one index.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class Bm25:
    postings: dict[str, list[tuple[int, int]]]  # token -> [(doc, term frequency)]
    lengths: list[int]
    avg_length: float

    @property
    def size(self) -> int:
        return len(self.lengths)


def build(docs: list[list[str]]) -> Bm25:
    postings: dict[str, list[tuple[int, int]]] = {}
    lengths = []
    for doc_id, tokens in enumerate(docs):
        lengths.append(len(tokens))
        for token, count in Counter(tokens).items():
            postings.setdefault(token, []).append((doc_id, count))
    avg = sum(lengths) / len(lengths) if lengths else 0.0
    return Bm25(postings, lengths, avg)


def idf(index: Bm25, token: str) -> float:
    df = len(index.postings.get(token, ()))
    return math.log(1 + (index.size - df + 0.5) / (df + 0.5))


def scores(index: Bm25, query: list[str]) -> dict[int, float]:
    """BM25 score per matching document (documents that share no token are absent)."""
    result: dict[int, float] = {}
    avg = index.avg_length or 1.0
    for token in set(query):
        posting = index.postings.get(token)
        if not posting:
            continue
        weight = idf(index, token)
        for doc_id, tf in posting:
            norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * index.lengths[doc_id] / avg))
            result[doc_id] = result.get(doc_id, 0.0) + weight * norm
    return result


def normalised(raw: dict[int, float]) -> dict[int, float]:
    """Scores scaled into [0, 1] by the best one (the best match gets 1.0)."""
    if not raw:
        return {}
    top = max(raw.values())
    return {doc: (value / top if top > 0 else 0.0) for doc, value in raw.items()}
