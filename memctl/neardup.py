"""Near-duplicates: check texts against a source, scan a source, calibrate a threshold.

Vector search proposes candidates; the caller decides. So every hit carries
its score, its text, where it lives (ledger line or fact file) and a lexical
overlap figure (Jaccard over words and kana/kanji bigrams): a high score with
a high overlap is a rewording, a high score with a low overlap is a paraphrase
or the same topic with another detail.

A source is a lazily read list of (id, text, where) rows: a ledger column, the
live facts' descriptions, or any list given by Python code. Its vectors come
from `vcache` (only new texts are embedded). When a resident `embed-server`
is running for this store and configuration, `check` asks it instead, so a
call costs no model load and no numpy import.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from . import embed, textnorm, tsv
from .errors import BadInput, MemctlError, NotFound, Refused
from .values import env_on

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from . import vcache  # imported where used: a near-dup answered by the embed server never needs it

    from .store import Store

DEFAULT_TOP = 5
# near-dup compares like with like, both sides embedded as passages (e5's "passage: " prefix),
# as recall embeds stored texts: then a fact has one vector (of `name: description`, fact_rows),
# shared through vcache by recall, near-dup --facts, remember's check and consolidate, and a
# first remember on a cold store embeds nothing that the next recall embeds again. On JSTS and
# STS-B pairs passages score as queries do (docs/EMBEDDINGS.md, "Thresholds shipped").
KIND = "passage"


# ---------------------------------------------------------------- sources


@dataclass(frozen=True)
class Row:
    id: str
    text: str
    where: str


@dataclass
class Source:
    """What texts are compared with: `rows()` reads them, `stamp()` says cheaply whether they changed."""

    name: str
    read: Callable[[], list[Row]]
    stamp: Callable[[], Any] = lambda: None
    spec: dict[str, str] | None = None  # how a server can open the same source
    kind: str = KIND  # how both sides are embedded

    def rows(self) -> list[Row]:
        return self.read()


def items_source(name: str, items: Iterable[tuple[str, str]], kind: str = KIND) -> Source:
    """A source over plain (id, text) pairs, for Python callers and tests."""
    rows = [Row(str(i), t, str(i)) for i, t in items]
    return Source(name, lambda: rows, kind=kind)


def fact_rows(store: "Store", found: Iterable[Any]) -> list[Row]:
    """The facts with a description as rows: each one's text is what recall embeds for it
    (rindex.fact_vector_text, `name: description`), so both use one vector per fact."""
    from .rindex import fact_vector_text

    return [Row(f.stem, fact_vector_text(f.name or f.stem, f.description), store.rel(f.path)) for f in found if f.description]


def facts_source(store: "Store") -> Source:
    from . import facts

    def read() -> list[Row]:
        return fact_rows(store, facts.live_facts(store, quiet=True))

    def stamp() -> Any:
        folder = store.memory_dir
        if not folder.is_dir():
            return ()
        return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in folder.glob("*.md")))

    return Source("facts", read, stamp, {"kind": "facts"})


def ledger_source(store: "Store", name: str, column: str | None = None) -> Source:
    """A ledger column (default: the ledger's unique column, else its only column); `where` is `ledgers/x.tsv:LINE`."""
    from . import ledger as ledger_mod

    led = ledger_mod.open_ledger(store, name)
    column = column or led.unique or (led.columns[0] if len(led.columns) == 1 else None)
    if not column:
        raise BadInput(f"which column of {name}?", hint=f"name the column (one of {', '.join(led.columns)})",
                       kind="which-column", columns=", ".join(led.columns))
    if column not in led.columns:
        raise BadInput(f"ledger {name} has no column {column!r}", hint=f"columns: {', '.join(led.columns)}")
    rel = store.rel(led.path)

    def read() -> list[Row]:
        rows = []
        for row in ledger_mod.iter_rows(led):
            text = row.values.get(column, "")
            if text.strip():
                rows.append(Row(str(row.lineno), text, f"{rel}:{row.lineno}"))
        return rows

    def stamp() -> Any:
        try:
            st = led.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    return Source(f"ledger:{name}:{column}", read, stamp, {"kind": "ledger", "name": name, "column": column})


def source_for(store: "Store", *, ledger: str | None = None, column: str | None = None, facts: bool = False) -> Source:
    """The source named by CLI-style options: --ledger NAME [--column COL], or --facts."""
    if facts and ledger:
        raise BadInput("give either facts or ledger, not both", kind="facts-or-ledger")
    if column and not ledger:  # (it read as narrowing: the whole cache was cleared or rebuilt)
        raise BadInput("a column is a ledger's: name the ledger too", kind="column-without-ledger")
    if facts:
        return facts_source(store)
    if ledger:
        return ledger_source(store, ledger, column)
    raise BadInput("nothing to compare with", hint="name a ledger and its column, or the facts", kind="no-source")


def source_from_spec(store: "Store", spec: dict[str, str]) -> Source:
    if spec.get("kind") == "facts":
        return facts_source(store)
    if spec.get("kind") == "ledger":
        return ledger_source(store, spec["name"], spec["column"])
    raise BadInput(f"unknown source {spec!r}")


# ---------------------------------------------------------------- results


NEW, SIMILAR, DUPLICATE = "new", "similar", "near-duplicate"  # the verdicts, weakest first
RANK = {NEW: 0, SIMILAR: 1, DUPLICATE: 2}
JUDGE_ANSWERS = {"same": DUPLICATE, "different": NEW}  # a judge's answer, as a verdict


def band(score: float, threshold: float, similar: float | None) -> str:
    """The verdict a score alone gives: near-duplicate at or above the threshold, similar in
    [similar, threshold), new below."""
    if score >= threshold:
        return DUPLICATE
    return SIMILAR if similar is not None and score >= similar else NEW


@dataclass(frozen=True)
class Hit:
    score: float
    overlap: float  # Jaccard of word / kana-kanji bigram sets
    id: str
    text: str
    where: str
    judge: str | None = None  # None: not asked; "same", "different", or "failed" (the threshold decides)


@dataclass(frozen=True)
class Check:
    text: str
    hits: tuple[Hit, ...]
    threshold: float
    similar: float | None = None  # the similar band's lower edge (None: no band)

    @property
    def best(self) -> float:
        return self.hits[0].score if self.hits else 0.0

    def hit_verdict(self, hit: Hit) -> str:
        return JUDGE_ANSWERS.get(hit.judge or "") or band(hit.score, self.threshold, self.similar)

    @property
    def judged(self) -> bool:
        return any(h.judge is not None for h in self.hits)

    @property
    def verdict(self) -> str:
        """A judge's answers decide for the hits it was asked about (a failed one falls back to
        its score); without a judge, the best score's band."""
        hits = [h for h in self.hits if h.judge is not None] if self.judged else list(self.hits[:1])
        return max((self.hit_verdict(h) for h in hits), key=RANK.__getitem__, default=NEW)

    @property
    def duplicate(self) -> bool:
        return self.verdict == DUPLICATE

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        return {
            "text": self.text,
            "verdict": self.verdict,
            "best": round(self.best, 4),
            "threshold": self.threshold,
            "similar": self.similar,
            "hits": [{**asdict(h), **({"verdict": self.hit_verdict(h)} if explain else {})} for h in self.hits],
        }


@dataclass
class Report:
    """The answer to `check`: one Check per text, and who answered."""

    source: str
    embedder: str  # label: backend (model)
    backend: str
    model: str
    threshold: float
    threshold_origin: str
    checks: list[Check]
    embedded: int = 0  # texts of the source embedded by this call
    rows: int = 0
    notes: list[str] = field(default_factory=list)
    via: str = "in-process"  # or "embed-server"
    similar: float | None = None
    judge: str | None = None  # the judge command asked (memctl/judge.py)

    @property
    def duplicate(self) -> bool:
        return any(c.duplicate for c in self.checks)

    @property
    def verdict(self) -> str:
        """The strongest verdict of any check."""
        return max((c.verdict for c in self.checks), key=RANK.__getitem__, default=NEW)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "embedder": self.embedder,
            "backend": self.backend,
            "model": self.model,
            "threshold": self.threshold,
            "threshold_origin": self.threshold_origin,
            "similar": self.similar,
            "judge_cmd": self.judge,
            "rows": self.rows,
            "embedded": self.embedded,
            "via": self.via,
            "notes": self.notes,
            "checks": [c.to_dict() for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Report":
        checks = [
            Check(c["text"], tuple(Hit(**h) for h in c["hits"]), float(c["threshold"]), c.get("similar"))
            for c in data["checks"]
        ]
        return cls(
            data["source"], data["embedder"], data["backend"], data["model"], float(data["threshold"]),
            data["threshold_origin"], checks, int(data.get("embedded", 0)), int(data.get("rows", 0)),
            list(data.get("notes", [])), data.get("via", "in-process"), data.get("similar"),
        )


def overlap(a: str, b: str) -> float:
    return round(textnorm.jaccard(set(textnorm.tokens(a)), set(textnorm.tokens(b))), 4)


# ---------------------------------------------------------------- the engine


@dataclass
class Engine:
    """An embedder with its threshold, resolved once per command (or kept warm by the server)."""

    embedder: embed.Embedder
    threshold: float
    threshold_origin: str
    notes: list[str] = field(default_factory=list)
    similar: float | None = None  # the similar band's lower edge

    @property
    def label(self) -> str:
        return embed.label(self.embedder)


def _server_allowed() -> bool:
    return not env_on("MEMCTL_NO_SERVER")


def engine_for(store: "Store", embedder: embed.Embedder | None = None, threshold: float | None = None, *,
               use_server: bool = True, similar: float | None = None) -> Engine:
    """The embedder for this store (the resident server's when one answers), its threshold and band."""
    settings = embed.settings_for(store)
    notes: list[str] = []
    if embedder is None and use_server and _server_allowed():
        from .embed import server

        embedder = server.remote(store)
    if embedder is None:
        choice = embed.choose(settings)
        embedder, notes = choice.embedder, (list(choice.notes) if choice.degraded else [])
    value, origin = _thresholds(settings, embedder, threshold)
    return Engine(embedder, value, origin, notes, _band_edge(settings, embedder, value, similar))


def _thresholds(settings: embed.Settings, embedder: embed.Embedder, given: float | None) -> tuple[float, str]:
    return (given, "--threshold") if given is not None else embed.threshold_for(settings, embedder)


def _band_edge(settings: embed.Settings, embedder: embed.Embedder, threshold: float, given: float | None) -> float | None:
    """The similar band's lower edge: given, else the model's; none when it is not below the threshold."""
    edge = given if given is not None else embed.similar_for(settings, embedder)
    return edge if edge is not None and edge < threshold else None


def _vectors(store: "Store", source: Source, engine: Engine, rows: list[Row], *, rebuild: bool = False, quiet: bool = False) -> vcache.Vectors:
    from . import vcache  # noqa: PLC0415
    return vcache.sync(store, source.name, [(r.id, r.text) for r in rows], engine.embedder, kind=source.kind, rebuild=rebuild, quiet=quiet)


def _with_vectors(rows: list[Row], vectors: vcache.Vectors) -> list[Row]:
    """The rows the vectors are of: all, but inside a server's deadline (vcache.answer_within)
    those whose vectors were ready (the rest is embedded in the background)."""
    return rows if vectors.present is None else [rows[i] for i in vectors.present]


def rank(matrix: "np.ndarray", queries: "np.ndarray", top: int) -> list[list[tuple[int, float]]]:
    """For each query row, the `top` best (row, score) pairs of `matrix`, best first."""
    import numpy as np

    if len(matrix) == 0 or top <= 0:
        return [[] for _ in range(len(queries))]
    scores = np.asarray(matrix @ queries.T, dtype=np.float32).T  # (queries, rows)
    k = min(top, scores.shape[1])
    out = []
    for row in scores:
        idx = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        idx = idx[np.argsort(-row[idx], kind="stable")]
        out.append([(int(i), float(row[i])) for i in idx])
    return out


def check_local(
    store: "Store",
    texts: Sequence[str],
    source: Source,
    engine: Engine,
    *,
    top: int = DEFAULT_TOP,
    exclude: Iterable[str] = (),
    rows: list[Row] | None = None,
    vectors: vcache.Vectors | None = None,
) -> Report:
    """Compare each text with every row of `source`, in this process."""
    if rows is None:
        rows = source.rows()
    if vectors is None:
        vectors = _vectors(store, source, engine, rows)
    rows = _with_vectors(rows, vectors)
    excluded = set(exclude)
    queries = engine.embedder.embed(list(texts), source.kind) if texts else None
    checks = []
    if queries is not None:
        # Ask for extra rows so that excluded ones can be dropped afterwards.
        ranked = rank(vectors.matrix, queries, top + len(excluded))
        for text, hits in zip(texts, ranked):
            chosen = []
            for index, score in hits:
                row = rows[index]
                if row.id in excluded:
                    continue
                chosen.append(Hit(round(score, 4), overlap(text, row.text), row.id, row.text, row.where))
            checks.append(Check(text, tuple(chosen[:top]), engine.threshold, engine.similar))
    return Report(
        source.name, engine.label, engine.embedder.backend, engine.embedder.model, engine.threshold,
        engine.threshold_origin, checks, vectors.embedded, len(rows), list(engine.notes), similar=engine.similar,
    )


def check(
    store: "Store",
    texts: Sequence[str],
    source: Source,
    *,
    top: int = DEFAULT_TOP,
    threshold: float | None = None,
    embedder: embed.Embedder | None = None,
    use_server: bool = True,
    similar: float | None = None,
    judge_cmd: str | None = None,
) -> Report:
    """`memctl near-dup`: the top hits for each text, and whether each is new, similar or a
    near-duplicate (`similar`: the band's lower edge, instead of the model's). A judge command
    (`judge_cmd`, else `[neardup] judge_cmd`: memctl/judge.py) decides for the top hits."""
    if any(not t.strip() for t in texts):  # "new" for a blank text let a check-then-append job store it
        raise BadInput("the text to check is empty", hint="give the text to compare, e.g. a theme or a fact's description")
    if top < 1:
        raise BadInput("top must be at least 1", hint="ask for one candidate or more", arg="top")
    for name, value in (("threshold", threshold), ("similar", similar)):
        if value is not None and not -1.0 <= value <= 1.0:
            raise BadInput(f"{name} must be between -1 and 1", hint="a cosine similarity, e.g. 0.9", arg=name)
    from . import judge  # noqa: PLC0415

    command = judge.command_for(store, judge_cmd)
    report = None
    if embedder is None and use_server and source.spec is not None and _server_allowed():
        report = _ask_server(store, list(texts), source.spec, top=top, threshold=threshold, similar=similar)
    if report is None:
        engine = engine_for(store, embedder, threshold, use_server=False, similar=similar)
        report = check_local(store, texts, source, engine, top=top)
    if command:
        report.checks = judge.judge_checks(store, report.checks, command)
        report.judge = command
    return report


def _ask_server(store: "Store", texts: list[str], spec: dict[str, str], *, top: int, threshold: float | None,
                similar: float | None) -> Report | None:
    from .embed import server

    if server.hello(store) is None:  # none, or one busy with other work (a client that left it mid-way): not waited for
        return None
    answer = server.ask(store, "check", {"texts": texts, "source": spec, "top": top, "threshold": threshold, "similar": similar})
    if answer is None:
        return None
    report = Report.from_dict(answer[0]["report"])
    report.via = "embed-server"
    return report


class Warm:
    """The embed server's side: the engine stays loaded, each source's vectors stay in memory.

    A source whose stamp (the ledger file's inode, size and mtime) has not
    changed since the last request is not read again, so a warm query costs one
    embedding and one matrix product.
    """

    def __init__(self, store: "Store", engine: Engine):
        self.store = store
        self.engine = engine
        self.hot: dict[str, tuple[Any, list[Row], vcache.Vectors]] = {}

    def handlers(self) -> dict[str, Any]:
        return {"check": self.check, "embed": self.embed}

    def embed(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        import numpy as np

        texts = [str(t) for t in request.get("texts", [])]
        kind = str(request.get("kind", "query"))
        vectors = np.ascontiguousarray(self.engine.embedder.embed(texts, kind), dtype=np.float32)
        return {"n": int(vectors.shape[0]), "dim": int(vectors.shape[1]) if vectors.ndim == 2 else 0}, vectors.tobytes()

    def check(self, request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        import numpy as np

        from .store import open_store

        store = open_store(self.store.root)  # re-read memctl.toml: thresholds may have been saved since
        settings, embedder = embed.settings_for(store), self.engine.embedder
        given = {k: None if request.get(k) is None else float(request[k]) for k in ("threshold", "similar")}
        value, origin = _thresholds(settings, embedder, given["threshold"])
        engine = Engine(embedder, value, origin, list(self.engine.notes), _band_edge(settings, embedder, value, given["similar"]))
        source = source_from_spec(store, dict(request["source"]))
        stamp = source.stamp()
        hot = self.hot.get(source.name)
        embedded, notes = 0, []
        if hot is not None and stamp is not None and hot[0] == stamp:
            _, rows, vectors = hot
        else:
            rows = source.rows()
            vectors = _vectors(store, source, engine, rows)  # progress on the server's terminal
            embedded = vectors.embedded
            if vectors.rebuilt:
                notes.append(f"vector cache rebuilt: {vectors.rebuilt}")
            vectors.matrix = np.array(vectors.matrix)  # into memory: no page faults on the next query
            self.hot[source.name] = (stamp, rows, vectors)
        texts = [str(t) for t in request.get("texts", [])]
        report = check_local(store, texts, source, engine, top=int(request.get("top", DEFAULT_TOP)), rows=rows, vectors=vectors)
        report.embedded = embedded
        report.notes += notes
        report.via = "embed-server"
        return {"report": report.to_dict()}, b""


def fact_candidates(
    store: "Store",
    name: str,
    description: str,
    exclude: Iterable[str] = (),
    *,
    top: int = 3,
    threshold: float | None = None,
    allow_ngram: bool = False,
) -> Report | None:
    """Live facts near the fact `name` with `description` would be (for `memctl remember`):
    compared as recall embeds facts, `name: description`, like with like.

    Returns a Report whose single Check lists at most `top` hits at or above
    the similar band (the threshold when the model has none); `exclude` holds fact stems to leave out (the fact being
    updated). Returns None when no vector embedder is available (only the
    character n-gram fallback, unless `allow_ngram`) or the model cannot be
    used: `remember` has its own lexical check and must never fail for this.
    """
    from .rindex import fact_vector_text

    text = fact_vector_text(name, description)
    try:
        engine = engine_for(store, None, threshold)
        if engine.embedder.backend == "char-ngram" and not allow_ngram:
            return None
        excluded = set(exclude)
        report = check(store, [text], facts_source(store), top=top + len(excluded), threshold=threshold, embedder=engine.embedder,
                       judge_cmd="")  # no judge at write time: remember reports, it asks no model
    except MemctlError:
        return None
    floor = report.threshold if report.similar is None else report.similar
    hits = tuple(h for h in report.checks[0].hits if h.id not in excluded and h.score >= floor)[:top]
    report.checks = [Check(text, hits, report.threshold, report.similar)]
    return report


def remember_check(store: "Store"):
    """The embedding check `remember` adds to its keyword one (a facts.VectorCheck), or None.

    [facts] vector_check = "auto" (default) skips it when the only embedder is
    sentence-transformers loaded in-process (seconds per write) and no
    embed-server is running; "always" and "never" do what they say.
    """
    mode = str(store.config.raw.get("facts", {}).get("vector_check", "auto"))
    if mode == "never":
        return None
    from . import facts
    from .embed import server

    if mode == "auto":
        choice = embed.choose(embed.settings_for(store))
        if choice.embedder.backend == "char-ngram":
            return None
        if choice.embedder.backend == "sentence-transformers" and server.hello(store) is None:
            return None

    def check(name: str, description: str, exclude: set[str]) -> list[facts.Similar]:
        report = fact_candidates(store, name, description, exclude)
        if report is None or not report.checks:
            return []
        by_stem = {f.stem: f for f in facts.live_facts(store, quiet=True)}
        found = report.checks[0]
        return [  # a hit in the similar band is reported, never refused (near=False)
            facts.Similar(by_stem[h.id], round(h.score, 3), 0, False, report.embedder, found.hit_verdict(h) == DUPLICATE)
            for h in found.hits if h.id in by_stem
        ]

    return check


# ---------------------------------------------------------------- scan


@dataclass(frozen=True)
class Pair:
    score: float
    overlap: float
    a: Row
    b: Row

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "overlap": self.overlap, "a": asdict(self.a), "b": asdict(self.b)}


@dataclass
class ScanReport:
    source: str
    embedder: str
    threshold: float
    threshold_origin: str
    rows: int
    embedded: int
    pairs: list[Pair]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "embedder": self.embedder, "threshold": self.threshold,
            "threshold_origin": self.threshold_origin, "rows": self.rows, "embedded": self.embedded,
            "notes": self.notes, "pairs": [p.to_dict() for p in self.pairs],
        }


def pairs_above(matrix: "np.ndarray", threshold: float, block: int = 1024) -> list[tuple[int, int, float]]:
    """Every (i, j, score) with i < j and score >= threshold, computed block by block."""
    import numpy as np

    found: list[tuple[int, int, float]] = []
    n = len(matrix)
    for start in range(0, n, block):
        stop = min(start + block, n)
        scores = np.asarray(matrix[start:stop], dtype=np.float32) @ np.asarray(matrix[start:], dtype=np.float32).T
        ii, jj = np.nonzero(scores >= threshold)
        for i, j in zip(ii.tolist(), jj.tolist()):
            if start + i < start + j:
                found.append((start + i, start + j, float(scores[i, j])))
    found.sort(key=lambda p: (-p[2], p[0], p[1]))
    return found


EXACT_UP_TO = 20_000  # rows; beyond, nearest_pairs searches clusters (approximate)


def nearest_pairs(matrix: "np.ndarray", k: int, floor: float, *, block: int = 1024,
                  exact_up_to: int = EXACT_UP_TO) -> "tuple[np.ndarray, np.ndarray, np.ndarray]":
    """Each row's `k` most similar other rows scoring at least `floor`, as pairs (i < j, score).

    A pair is kept when either side has the other among its k nearest. Up to
    `exact_up_to` rows the search is exact, in blocks of rows (one matrix
    product per block; rows tied with the k-th score are kept too). Beyond, rows are
    grouped into about sqrt(n) clusters (spherical k-means on a sample, fixed
    seed) and each row is compared with the rows of the clusters whose
    centroids are nearest to it: an approximate search (docs/CONSOLIDATION.md,
    "At scale").
    Returns three arrays sorted by (i, j).
    """
    import numpy as np

    m = np.ascontiguousarray(matrix, dtype=np.float32)
    n = len(m)
    k = min(k, n - 1)
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    if k < 1:
        return empty
    if n <= exact_up_to:
        everyone = np.arange(n)
        found = [_top_in(m, everyone[start:start + block], everyone, k, floor) for start in range(0, n, block)]
    else:
        found = [_top_in(m, r, c, k, floor) for r, c in _clusters(m)]
    rows = np.concatenate([f[0] for f in found])
    cols = np.concatenate([f[1] for f in found])
    scores = np.concatenate([f[2] for f in found])
    if not len(rows):
        return empty
    if n > exact_up_to:  # a row's best k from each cluster it probed: keep its best k overall
        rows, cols, scores = _keep_top(rows, cols, scores, k)
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    codes, first = np.unique(lo * n + hi, return_index=True)
    return codes // n, codes % n, scores[first]


def _best_of(tile: "np.ndarray", rows: "np.ndarray", cols: "np.ndarray", k: int, floor: float):
    """Each tile row's best k entries at or above floor (ties with the k-th kept), as (row, col, score).

    The k-th best of any subset of a row's scores is at most the k-th best of
    the whole row, so the k-th best of every tenth column is a safe cut: only
    what passes it (about 10 k entries a row) is sorted. Partitioning a tenth
    of the tile costs a tenth of partitioning all of it.
    """
    import numpy as np

    width = tile.shape[1]
    sample = tile[:, :: max(1, width // max(16 * k, width // 10))] if width > 16 * k else tile
    if sample.shape[1] > k:
        cut = np.partition(sample, sample.shape[1] - k, axis=1)[:, sample.shape[1] - k]
        keep = tile >= np.maximum(cut, floor)[:, None]
    else:
        keep = tile >= floor
    r, c = np.nonzero(keep)
    r, c, score = _keep_top(r, c, tile[r, c], k)
    return rows[r], cols[c], score


def _top_in(m: "np.ndarray", rows: "np.ndarray", candidates: "np.ndarray", k: int, floor: float):
    """(row, candidate, score) for each row's k best candidates other than itself, at or above floor."""
    import numpy as np

    scores = m[rows] @ m[candidates].T
    scores[rows[:, None] == candidates[None, :]] = -np.inf  # a row is never its own neighbour
    return _best_of(scores, rows, candidates, k, floor)


def _clusters(m: "np.ndarray", *, probes: int = 0, seed: int = 0, rounds: int = 6):
    """(rows that probe a cluster, the cluster's rows) for every cluster of `m`.

    Each row probes the `probes` clusters whose centroids are nearest to it
    (its own among them), so a row near a cluster's border looks on both sides.
    """
    import numpy as np

    n = len(m)
    count = max(2, int(round(np.sqrt(n))))
    probes = min(count, probes or max(8, count // 40))
    rng = np.random.default_rng(seed)
    centroids = m[rng.choice(n, count, replace=False)].copy()
    sample = m[rng.choice(n, min(n, 40 * count), replace=False)]
    for _ in range(rounds):
        owner = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, owner, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        moved = norms[:, 0] > 0
        centroids[moved] = sums[moved] / norms[moved]
    chosen, homes = [], []
    for s in range(0, n, 4096):
        sims = m[s:s + 4096] @ centroids.T
        homes.append(np.argmax(sims, axis=1))
        chosen.append(np.argpartition(-sims, probes - 1, axis=1)[:, :probes] if probes < count else
                      np.broadcast_to(np.arange(count), sims.shape))
    probe = np.concatenate(chosen)  # (n, probes)
    home = np.concatenate(homes)
    members = [np.flatnonzero(home == c) for c in range(count)]
    flat = probe.ravel()
    askers = np.repeat(np.arange(n), probes)
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(count + 1))
    for c in range(count):
        rows = askers[order[bounds[c]:bounds[c + 1]]]
        if len(rows) and len(members[c]):
            yield rows, members[c]


def _keep_top(rows: "np.ndarray", cols: "np.ndarray", scores: "np.ndarray", k: int):
    """Of (row, col, score) triples, each row's k best (ties with its k-th kept)."""
    import numpy as np

    order = np.lexsort((-scores, rows))
    rows, cols, scores = rows[order], cols[order], scores[order]
    first = np.searchsorted(rows, rows, side="left")
    place = np.arange(len(rows)) - first
    last = np.minimum(first + k - 1, np.searchsorted(rows, rows, side="right") - 1)
    chosen = (place < k) | (scores >= scores[last])
    return rows[chosen], cols[chosen], scores[chosen]


def scan(store: "Store", source: Source, *, threshold: float | None = None, embedder: embed.Embedder | None = None) -> ScanReport:
    """`memctl near-dup scan`: every pair of rows at or above the threshold."""
    engine = engine_for(store, embedder, threshold)
    rows = source.rows()
    vectors = _vectors(store, source, engine, rows)
    rows = _with_vectors(rows, vectors)
    pairs = [
        Pair(round(score, 4), overlap(rows[i].text, rows[j].text), rows[i], rows[j])
        for i, j, score in pairs_above(vectors.matrix, engine.threshold)
    ]
    return ScanReport(source.name, engine.label, engine.threshold, engine.threshold_origin, len(rows), vectors.embedded, pairs, list(engine.notes))


# ---------------------------------------------------------------- calibrate


@dataclass(frozen=True)
class Point:
    threshold: float
    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int
    tn: int


@dataclass
class Calibration:
    embedder: str
    backend: str
    model: str
    pairs: int
    positives: int
    points: list[Point]
    recommended: Point | None
    target_met: bool  # precision >= MIN_PRECISION was reachable
    notes: list[str] = field(default_factory=list)

    def grid(self, every: float = 0.01) -> list[Point]:
        """The points on a coarser grid (what is printed), plus the recommended one."""
        ticks = round(1 / every)
        return [p for p in self.points if abs(p.threshold * ticks - round(p.threshold * ticks)) < 1e-6 or p == self.recommended]

    def to_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder, "backend": self.backend, "model": self.model, "pairs": self.pairs,
            "positives": self.positives, "min_precision": MIN_PRECISION, "target_met": self.target_met,
            "recommended": asdict(self.recommended) if self.recommended else None,
            "notes": self.notes, "points": [asdict(p) for p in self.grid()],
        }


MIN_PRECISION = 0.9


def read_pairs(path: Path) -> list[tuple[str, str, int]]:
    """PAIRS.tsv: text_a TAB text_b TAB label (1 duplicate, 0 not); a header line is skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise NotFound(f"no such file: {path}", hint="check the path (relative to the current folder)") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8") from None
    pairs = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise BadInput(f"{path}:{number}: expected text_a<TAB>text_b<TAB>label, got {len(fields)} fields")
        label = fields[2].strip()
        if label not in ("0", "1"):
            if number == 1:
                continue  # a header
            raise BadInput(f"{path}:{number}: label must be 1 (duplicate) or 0 (not), got {label!r}")
        pairs.append((tsv.unescape(fields[0]), tsv.unescape(fields[1]), int(label)))
    if not pairs:
        raise BadInput(f"{path} has no pairs")
    return pairs


def pair_scores(embedder: embed.Embedder, pairs: Sequence[tuple[str, str, int]]) -> "np.ndarray":
    import numpy as np

    from .embed import paced

    unique = list(dict.fromkeys([a for a, _, _ in pairs] + [b for _, b, _ in pairs]))
    index = {t: i for i, t in enumerate(unique)}
    vectors = paced.embed_texts(embedder, unique, KIND)
    a = vectors[[index[p[0]] for p in pairs]]
    b = vectors[[index[p[1]] for p in pairs]]
    return np.einsum("ij,ij->i", a, b)


def sweep(scores: "np.ndarray", labels: "np.ndarray", step: float = 0.001) -> list[Point]:
    """Precision, recall and F1 when `score >= t` means duplicate, for t = 0, step, ..., 1."""
    import numpy as np

    labels = np.asarray(labels).astype(bool)
    order = np.sort(scores)
    pos = np.sort(scores[labels])
    thresholds = np.round(np.arange(0.0, 1.0 + step / 2, step), 4)
    # counts of scores >= t, by binary search instead of one pass per threshold
    at_or_above = len(order) - np.searchsorted(order, thresholds - 1e-9, side="left")
    tps = len(pos) - np.searchsorted(pos, thresholds - 1e-9, side="left")
    points = []
    total_pos = int(labels.sum())
    total_neg = len(labels) - total_pos
    for t, predicted, tp in zip(thresholds.tolist(), at_or_above.tolist(), tps.tolist()):
        fp = predicted - tp
        fn = total_pos - tp
        tn = total_neg - fp
        precision = tp / predicted if predicted else 1.0
        recall = tp / total_pos if total_pos else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        points.append(Point(float(t), round(precision, 4), round(recall, 4), round(f1, 4), int(tp), int(fp), int(fn), int(tn)))
    return points


def recommend(points: list[Point]) -> tuple[Point | None, bool]:
    """Best F1 among thresholds with precision >= 0.9; else the best F1 overall (target not met).

    Ties (a plateau of equal F1) go to the middle of the plateau, the choice
    least sensitive to scores moving a little.
    """
    eligible = [p for p in points if p.precision >= MIN_PRECISION and p.tp > 0]
    met = bool(eligible)
    pool = eligible or [p for p in points if p.tp > 0]
    if not pool:
        return None, False
    best = max(p.f1 for p in pool)
    ties = [p for p in pool if p.f1 == best]
    return ties[len(ties) // 2], met


def calibrate(store: "Store | None", pairs: Sequence[tuple[str, str, int]], *, embedder: embed.Embedder | None = None) -> Calibration:
    """`memctl near-dup calibrate`: precision/recall/F1 across thresholds, and a recommendation."""
    import numpy as np

    notes: list[str] = []
    if embedder is None:
        if store is None:
            raise BadInput("calibrate needs a store or an embedder")
        choice = embed.choose(embed.settings_for(store))
        embedder, notes = choice.embedder, (list(choice.notes) if choice.degraded else [])
    labels = np.array([p[2] for p in pairs], dtype=bool)
    if labels.all() or not labels.any():
        raise BadInput("PAIRS.tsv needs both duplicates (label 1) and non-duplicates (label 0)")
    scores = pair_scores(embedder, pairs)
    points = sweep(scores, labels)
    best, met = recommend(points)
    if not met:
        notes.append(f"no threshold reaches precision {MIN_PRECISION}; recommending the best F1 instead")
    return Calibration(embed.label(embedder), embedder.backend, embedder.model, len(pairs), int(labels.sum()), points, best, met, notes)


def save_threshold(store: "Store", result: Calibration, *, commit_changes: bool = True) -> str:
    """`calibrate --save`: the recommended threshold into memctl.toml, keyed by the model, committed."""
    from . import config
    from .store import commit, config_committable

    if result.recommended is None:
        raise BadInput("no threshold to save: no pair scored as a duplicate at any threshold")
    if not result.target_met:
        best = result.recommended
        raise Refused(f"no threshold reaches precision {MIN_PRECISION} on these pairs; the best F1 ({best.threshold:g}, "
                      f"precision {best.precision:.3f}) is not saved: near-dup, remember and consolidate go by it",
                      hint=f"add labelled pairs; or, to take it anyway, [embedding.thresholds] \"{result.model}\" = "
                           f"{best.threshold:g} in memctl.toml", kind="calibration-target-missed")
    with store.lock(commits=commit_changes):
        with_config = config_committable(store, commit_changes, "the threshold")
        line = config.save_threshold(store.config_path, result.model, result.recommended.threshold)
        commit(store, [store.config_path], f"embedding: threshold {line}", enabled=commit_changes and with_config)
    return line


# ---------------------------------------------------------------- cache and server


def cache_status(store: "Store") -> dict[str, Any]:
    from . import vcache  # noqa: PLC0415
    from dataclasses import asdict as _asdict

    using = embed.describe(embed.settings_for(store))
    info = None
    if _server_allowed():
        from .embed import server

        info = server.hello(store)
    if info:
        using = {**using, "backend": info["backend"], "model": info["model"], "label": info["label"], "via": f"embed-server (pid {info['pid']})"}
    return {"embedder": using, "caches": [_asdict(e) for e in vcache.entries(store)], "pending": vcache.pending(store)}


def _source_named(store: "Store", name: str) -> Source | None:
    if name == "facts":
        return facts_source(store)
    parts = name.split(":")
    if len(parts) == 3 and parts[0] == "ledger":
        try:
            return ledger_source(store, parts[1], parts[2])
        except (BadInput, NotFound):
            return None  # the ledger or column is gone: nothing to rebuild
    return None


def rebuild(store: "Store", source: Source | None = None, *, embedder: embed.Embedder | None = None,
            more: Callable[["Store"], list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """`cache rebuild`: re-embed one source from scratch; or, with none, build every cache from
    nothing but what a stopped run kept (the facts, each ledger cached before, and what
    `more(store)` builds: recall's), each text once (the sources share their vectors), also on
    a store that has no cache yet."""
    from . import vcache  # noqa: PLC0415
    engine = engine_for(store, embedder)
    with vcache.saving_is_the_job():
        return _rebuild(store, source, engine, more)


def _rebuild(store: "Store", source: Source | None, engine: Engine,
             more: Callable[["Store"], list[dict[str, Any]]] | None) -> list[dict[str, Any]]:
    from . import vcache  # noqa: PLC0415
    if source is not None:
        rows = source.rows()
        _vectors(store, source, engine, rows, rebuild=True)
        return [{"source": source.name, "rows": len(rows), "embedder": engine.label}]
    # The sources to build are noted before the caches go: a run stopped by Ctrl-C cleared them all,
    # and the next run, finding no cache of a ledger, forgot it (what the stopped run embedded is kept).
    import json  # noqa: PLC0415

    from .fsutil import atomic_write  # noqa: PLC0415

    pending = vcache.root_dir(store) / REBUILD_PENDING
    names = [e.source for e in vcache.entries(store)] + _pending_sources(pending)
    cached = [s for s in (_source_named(store, name) for name in dict.fromkeys(names)) if s is not None]
    sources = list({s.name: s for s in [facts_source(store), *cached]}.values())
    pending.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(pending, json.dumps([s.name for s in sources], ensure_ascii=False) + "\n")
    vcache.clear(store, batches=False)  # (what a rebuild stopped by Ctrl-C kept is used again)
    done = []
    for src in sources:
        rows = src.rows()
        _vectors(store, src, engine, rows)
        done.append({"source": src.name, "rows": len(rows), "embedder": engine.label})
    done += more(store) if more else []
    pending.unlink(missing_ok=True)
    return done


REBUILD_PENDING = "rebuild-pending.json"  # in .memctl/vectors/: the sources a `cache rebuild` under way builds


def _pending_sources(path: Path) -> list[str]:
    import json  # noqa: PLC0415

    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [name for name in found if isinstance(name, str)] if isinstance(found, list) else []


def clear_cache(store: "Store", source: Source | None = None) -> list[str]:
    from . import vcache  # noqa: PLC0415
    return vcache.clear(store, source.name if source else None)


def stop_server(store: "Store") -> dict[str, Any] | None:
    from .embed import server

    return server.stop(store)


def run_server(store: "Store", *, ready: Callable[[dict[str, Any]], None] | None = None,
               more: Callable[[Any], dict[str, Any]] | None = None, warm: Callable[[Any], None] | None = None,
               idle: float | None = None) -> None:
    """`memctl embed-server`: load the embedder once, then answer until stopped.

    `more(embedder)`: further request handlers, built on the loaded embedder (resident.recall_handlers);
    `warm(embedder)`: run before serving (resident.warm: recall's fact vectors); `idle`: seconds
    without a request after which the server exits. The store's server lock is taken first, so a
    second server refuses before loading anything.
    """
    from . import watch
    from .embed import server

    settings = embed.settings_for(store)
    with server.single(store):
        engine = engine_for(store, use_server=False)
        engine.embedder.embed(["warm up"], "query")  # load the model before saying ready
        if warm is not None:
            warm(engine.embedder)
        info = {
            "pid": os.getpid(),
            "backend": engine.embedder.backend,
            "model": engine.embedder.model,
            "fingerprint": engine.embedder.fingerprint,
            "label": engine.label,
            "notes": engine.notes,
        }
        handlers = {**Warm(store, engine).handlers(), **(more(engine.embedder) if more else {})}
        with watch.serving(store) as watching:  # the fact folders' stamp: commands skip their stat of every file
            info["watch"] = watching is not None
            server.serve(store, settings.key(), info, handlers,
                         ready=(lambda path: ready({**info, "socket": store.rel(path)})) if ready else None, idle=idle,
                         asked_elsewhere=(lambda: watching.asked) if watching else None)
