"""The index of document chunks: `.memctl/sources.sqlite`, derived from the declared sources.

It has the recall index's shape (rindex.py: the same tokens, BM25 and term
statistics), holding documents of kind `chunk`, so recall answers from it with
the same pipeline, the same absolute relevance and the same floor as for facts
(recall.answer); their vectors live in the embedding cache as `recall-chunks`,
keyed by content hash (vcache.py), so a chunk is embedded once whatever else
changes. Beside the chunks it keeps, per file, what the last run saw (size,
mtime, content hash, its chunks) and per source what was skipped and why.

An index run (`memctl source index`) is incremental: a file whose size and
mtime did not change is not read; one whose bytes did not change (same hash)
is not chunked again; the chunks of deleted files go. Work is committed every
second and at Ctrl-C, so a stopped run keeps what it did; the embedding step
after it keeps its finished batches the same way (vcache). Deleting the file
loses nothing: the next run rebuilds it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from . import chunking, rindex
from . import sources as sources_mod
from .fsutil import file_lock
from .store import Store

FILE = "sources.sqlite"
LOCK = "sources.lock"
KIND = "chunk"
SNIPPET_CHARS = 100
COMMIT_SECONDS = 1.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS src_files(path TEXT PRIMARY KEY, source TEXT, size INTEGER, mtime INTEGER, hash TEXT, docs TEXT);
CREATE INDEX IF NOT EXISTS src_files_source ON src_files(source);
CREATE TABLE IF NOT EXISTS src_skipped(source TEXT, path TEXT, reason TEXT);
CREATE TABLE IF NOT EXISTS src_runs(source TEXT PRIMARY KEY, config TEXT, description TEXT, finished REAL);
"""


class Report(NamedTuple):
    """One source's index run."""
    name: str
    files: int  # indexed files
    chunks: int  # their chunks
    changed: int  # files read and chunked again (new or edited)
    removed: int  # files whose chunks left (deleted, skipped now, or no longer matched)
    skipped: tuple[sources_mod.Skip, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.name, "files": self.files, "chunks": self.chunks, "changed": self.changed,
                "removed": self.removed, "skipped": [{"path": s.shown, "reason": s.reason} for s in self.skipped]}


class Status(NamedTuple):
    source: sources_mod.Source
    files: int
    chunks: int
    indexed: float | None  # when the last run finished (epoch seconds), None: never
    stale: int  # files new, edited or deleted since then (by size and mtime)
    skipped: tuple[sources_mod.Skip, ...]

    def to_dict(self) -> dict[str, Any]:
        s = self.source
        return {"source": s.name, "description": s.description, "kind": s.kind, "paths": list(s.paths),
                "exclude": list(s.exclude), "chunk_size": s.chunk_size, "overlap": s.overlap, "prompt": s.prompt,
                "files": self.files, "chunks": self.chunks, "indexed": self.indexed is not None, "stale": self.stale,
                "skipped": [{"path": k.shown, "reason": k.reason} for k in self.skipped]}


def path_of(store: Store) -> Path:
    return store.cache_dir / FILE


def _open(store: Store) -> sqlite3.Connection:
    """The index, created when missing or of another version (it is derived). Inside `_failing`."""
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    conn = rindex.connect_at(path_of(store))
    if conn is None:
        conn = rindex.create_at(path_of(store), _FULL_HINT)
    try:
        conn.executescript(_SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


_FULL_HINT = ("free some space (or raise `ulimit -f`), then run `memctl source index` again: what was indexed "
              "before is kept, and the next run indexes the rest")


def _failing(store: Store, *, writing: bool = True):
    """A full disk or a file size limit met while the index is written: one line naming it (OSFailure),
    not SQLite's traceback. What a run committed before stays; the next run goes on from there."""
    return rindex.failing_storage(path_of(store), hint=_FULL_HINT if writing else
                                  "free some space (or raise `ulimit -f`), then run the command again; the index is kept")


@contextlib.contextmanager
def reading(store: Store):
    """The index for queries, or None when no run has made one yet."""
    with _failing(store, writing=False):  # (a full disk where SQLite makes its -shm file: one line, not "nothing indexed")
        conn = rindex.connect_at(path_of(store))
    if conn is not None:
        try:
            conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError:
            conn.close()
            conn = None
    try:
        yield conn
    finally:
        if conn is not None:
            conn.close()


# ---------------------------------------------------------------- index runs

def _snippet(chunk: chunking.Chunk) -> str:
    lines = [line.strip() for line in chunk.text.split("\n") if line.strip()]
    if len(lines) > 1 and lines[0].lstrip("#").strip() == (chunk.heading[-1] if chunk.heading else None):
        lines = lines[1:]  # the heading line: the heading path shows it
    text = " ".join(lines)
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def _config(source: sources_mod.Source) -> str:
    """What the chunks of a source's files follow from: another value reads every file again."""
    return f"{source.kind}:{source.chunk_size}:{source.overlap}:{chunking.RULES}"


def _drop_file(conn: sqlite3.Connection, path: str) -> None:
    row = conn.execute("SELECT docs FROM src_files WHERE path=?", (path,)).fetchone()
    if row and row[0]:
        for doc in row[0].split(","):
            rindex.remove_doc(conn, int(doc))
    conn.execute("DELETE FROM src_files WHERE path=?", (path,))


def _add_file(conn: sqlite3.Connection, source: sources_mod.Source, found: sources_mod.Found, st: os.stat_result,
              digest: str, chunks: list[chunking.Chunk]) -> None:
    ids = []
    for c in chunks:
        key = sources_mod.passage_key(found.shown, c.start, c.end)
        ids.append(rindex.add_doc(conn, KIND, key, rindex.SEP.join(c.heading),
                                  _snippet(c) + rindex.SEP + source.description, c.indexed, key, source.name,
                                  st.st_mtime, c.text))
    conn.execute("INSERT OR REPLACE INTO src_files VALUES (?,?,?,?,?,?)",
                 (str(found.path), source.name, st.st_size, st.st_mtime_ns, digest, ",".join(map(str, ids))))


def index(store: Store, names: Sequence[str] | None = None, *, embed: bool = True) -> list[Report]:
    """Bring the chunks of the named sources (all when None) up to date with their files, then their
    vectors (with `embed`, when recall has an embedding model). Sources no longer declared are dropped."""
    declared = sources_mod.declared(store)
    chosen = [sources_mod.get(store, n) for n in names] if names else list(declared.values())
    trusted = sources_mod.trusted(store, [s.name for s in chosen])  # a source that came through git waits
    held = [s for s in chosen if s.name not in trusted]
    chosen = [s for s in chosen if s.name in trusted]
    reports = []
    with file_lock(store.cache_dir / LOCK) if store.cache_dir.is_dir() else _made_lock(store), _failing(store):
        conn = _open(store)
        try:
            gone = [r[0] for r in conn.execute("SELECT DISTINCT source FROM src_files")
                    if r[0] not in declared]
            if gone:
                _drop_sources(conn, gone)
            taken = {path: owner for path, owner in conn.execute("SELECT path, source FROM src_files")}
            for source in chosen:
                reports.append(_index_source(store, conn, source, taken))
        finally:
            conn.close()
    for source in held:  # its chunks (of what was approved before) stay; nothing new is read
        files, chunks = _counts_of(store, source.name)
        reports.append(Report(source.name, files, chunks, 0, 0, (sources_mod.Skip(
            "(every file)", "not read: its paths wait for approval on this machine (memctl trust)"),)))
    if embed:
        embed_chunks(store)
    return reports


@contextlib.contextmanager
def _made_lock(store: Store):
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(store.cache_dir / LOCK):
        yield


def _drop_sources(conn: sqlite3.Connection, names: Sequence[str]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for name in names:
            for (path,) in conn.execute("SELECT path FROM src_files WHERE source=?", (name,)).fetchall():
                _drop_file(conn, path)
            conn.execute("DELETE FROM src_skipped WHERE source=?", (name,))
            conn.execute("DELETE FROM src_runs WHERE source=?", (name,))
        rindex.renew(conn, KIND)
        conn.execute("COMMIT")
    except BaseException:
        rindex.rolled_back(conn)
        raise


def drop(store: Store, name: str) -> None:
    """Remove a source's chunks from the index (after `source remove`). On a full disk they stay, with a
    warning: the removal itself is done, and the next index run drops them (as a source no longer declared)."""
    from . import errors

    if not path_of(store).exists():
        return
    try:
        with file_lock(store.cache_dir / LOCK), _failing(store):
            conn = _open(store)
            try:
                _drop_sources(conn, [name])
            finally:
                conn.close()
    except errors.OSFailure as exc:
        errors.warn(f"the chunks of source {name!r} are still in the index: {exc.message}",
                    hint="free some space: the next `memctl source index` drops them")


def _index_source(store: Store, conn: sqlite3.Connection, source: sources_mod.Source, taken: dict[str, str]) -> Report:
    from . import errors

    skipped: list[sources_mod.Skip] = []
    found = list(sources_mod.walk(store, source, skipped))
    known = {path: (size, mtime, digest) for path, size, mtime, digest in
             conn.execute("SELECT path, size, mtime, hash FROM src_files WHERE source=?", (source.name,))}
    run = conn.execute("SELECT config, description, NULL, finished FROM src_runs WHERE source=?", (source.name,)).fetchone()
    changed = removed = 0
    moved = [0]  # chunks added, dropped or redescribed since the last renew(): only then a new generation
    present: set[str] = set()
    conn.execute("BEGIN IMMEDIATE")
    in_file = False
    last_commit = time.monotonic()
    try:
        if run is not None and run[0] != _config(source):  # another kind or chunk size: every file again
            for key in known:
                _drop_file(conn, key)
            moved[0] += len(known)
            known = {}
        elif run is not None and run[1] != source.description:  # the description is shown with every hit
            moved[0] += 1
            conn.execute("UPDATE docs SET description = substr(description, 1, instr(description, ?)) || ?"
                         " WHERE kind=? AND type=?", (rindex.SEP, source.description, KIND, source.name))
        conn.execute("INSERT OR REPLACE INTO src_runs VALUES (?,?,?,?)",
                     (source.name, _config(source), source.description, run[3] if run and len(run) > 3 else None))
        with errors.progress(len(found), f"indexing {source.name}") as advance:
            for item in found:
                advance(1)
                key = str(item.path)
                if taken.get(key, source.name) != source.name:
                    skipped.append(sources_mod.Skip(item.shown, f"{ALREADY}{taken[key]}"))
                    continue
                present.add(key)
                old = known.get(key)
                try:
                    st = os.stat(item.path, follow_symlinks=False)
                except FileNotFoundError:
                    present.discard(key)
                    skipped.append(sources_mod.Skip(item.shown, "deleted during indexing"))
                    continue
                if old and (old[0], old[1]) == (st.st_size, st.st_mtime_ns):
                    continue
                conn.execute("SAVEPOINT file")
                in_file = True
                try:
                    st, data, text = sources_mod.read(item.path)
                except sources_mod.Unreadable as exc:
                    present.discard(key)  # its chunks, if it had any, leave below with the files gone (counted once)
                    skipped.append(sources_mod.Skip(item.shown, str(exc)))
                else:
                    digest = chunking.content_hash(text)
                    if old and old[2] == digest:
                        conn.execute("UPDATE src_files SET size=?, mtime=? WHERE path=?", (st.st_size, st.st_mtime_ns, key))
                    else:
                        _drop_file(conn, key)
                        _add_file(conn, source, item, st, digest,
                                  chunking.chunk(text, source.kind, name=item.path.name, size=source.chunk_size,
                                                 overlap=source.overlap))
                        changed += 1
                        moved[0] += 1
                conn.execute("RELEASE file")
                in_file = False
                taken[key] = source.name
                if time.monotonic() - last_commit > COMMIT_SECONDS:  # a Ctrl-C keeps what is done
                    _renew(conn, moved)
                    conn.execute("COMMIT")
                    conn.execute("BEGIN IMMEDIATE")
                    last_commit = time.monotonic()
        for key in set(known) - present:
            _drop_file(conn, key)
            taken.pop(key, None)
            removed += 1
            moved[0] += 1
        conn.execute("DELETE FROM src_skipped WHERE source=?", (source.name,))
        conn.executemany("INSERT INTO src_skipped VALUES (?,?,?)", [(source.name, s.shown, s.reason) for s in skipped])
        conn.execute("INSERT OR REPLACE INTO src_runs VALUES (?,?,?,?)",
                     (source.name, _config(source), source.description, time.time()))
        _renew(conn, moved)
        conn.execute("COMMIT")
    except BaseException:
        _keep_done(conn, in_file)
        raise
    files, chunks = _counts(conn, source.name)
    return Report(source.name, files, chunks, changed, removed, tuple(skipped))


def _keep_done(conn: sqlite3.Connection, in_file: bool) -> None:
    """After a Ctrl-C or an error: what was done before it committed, the file being read rolled back.
    On a full disk SQLite may have rolled the transaction back itself (the index as the last commit left
    it: nothing to keep), and a COMMIT here may fail in turn: then it is rolled back, and the error
    that stopped the run is the one reported."""
    if not conn.in_transaction:
        return
    try:
        if in_file:
            conn.execute("ROLLBACK TO file")  # the file being read when stopped: as it was
            conn.execute("RELEASE file")
        rindex.renew(conn, KIND)  # (what the file rolled back had moved is not told apart: renewed anyway)
        conn.execute("COMMIT")
    except sqlite3.Error:
        rindex.rolled_back(conn)


def _renew(conn: sqlite3.Connection, moved: list[int]) -> None:
    """A new generation of the chunks (the vector cache's key, rindex.renew) when any moved since the
    last one, or when there is none yet: a run that changed nothing leaves the cache current, so the
    next recall neither hashes every chunk's text again nor makes a server reload its vectors."""
    if moved[0] or rindex.generation(conn, KIND) is None:
        rindex.renew(conn, KIND)
    moved[0] = 0


def _counts_of(store: Store, name: str) -> tuple[int, int]:
    with reading(store) as conn:
        return (0, 0) if conn is None else _counts(conn, name)


def _counts(conn: sqlite3.Connection, name: str) -> tuple[int, int]:
    files = conn.execute("SELECT count(*) FROM src_files WHERE source=?", (name,)).fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM docs WHERE kind=? AND type=?", (KIND, name)).fetchone()[0]
    return files, chunks


EMBED_LOCK = "sources-embed.lock"  # held while one `source index` embeds: a second one leaves it the work


def embed_chunks(store: Store) -> int:
    """The chunks' vectors brought up to date in the embedding cache (what recall would embed at its
    first query); the number of chunks with vectors, 0 without an embedding model. When another
    process is embedding them already (two scheduled runs overlapping), 0 and a note: the same texts
    were embedded twice, each run paying the whole cost."""
    from . import errors, recall

    embedder = recall.embedder_for(store)
    if embedder is None:
        return 0
    store.cache_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(store.cache_dir / EMBED_LOCK, timeout=0))
        except errors.LockTimeout:
            errors.inform("another memctl is embedding the chunks: left to it (a chunk it did not take, the next "
                          "`source index` embeds)")
            return 0
        with reading(store) as conn:
            if conn is None:
                return 0
            found = recall.kind_vectors(store, conn, embedder, KIND, embed=True)
    return 0 if found is None else len(found[0])


# ---------------------------------------------------------------- status

ALREADY = "already in source "  # a skip's reason: the file is another source's (its name follows)


def status(store: Store) -> list[Status]:
    """Each declared source: its files and chunks in the index, what was skipped and why, and how many
    files changed since (new, edited, deleted: by size and mtime, nothing is read). A file skipped as
    another source's, that source removed since, is one to index (changed), no longer skipped."""
    out = []
    with reading(store) as conn:
        declared = sources_mod.declared(store)
        for source in declared.values():
            if conn is None:
                out.append(Status(source, 0, 0, None, 0, ()))
                continue
            files, chunks = _counts(conn, source.name)
            run = conn.execute("SELECT finished FROM src_runs WHERE source=?", (source.name,)).fetchone()
            skipped = tuple(sources_mod.Skip(p, r) for p, r in
                            conn.execute("SELECT path, reason FROM src_skipped WHERE source=? ORDER BY rowid", (source.name,))
                            if not (r.startswith(ALREADY) and r[len(ALREADY):] not in declared))
            known = {path: (size, mtime) for path, size, mtime in
                     conn.execute("SELECT path, size, mtime FROM src_files WHERE source=?", (source.name,))}
            skipped_now = {s.shown for s in skipped}
            stale = 0
            seen = set()
            for item in sources_mod.walk(store, source, []):
                seen.add(str(item.path))
                try:
                    st = os.stat(item.path, follow_symlinks=False)
                except OSError:
                    continue
                old = known.get(str(item.path))
                if old is None:
                    stale += item.shown not in skipped_now
                elif old != (st.st_size, st.st_mtime_ns):
                    stale += 1
            stale += len(set(known) - seen)
            out.append(Status(source, files, chunks, run[0] if run else None, stale if run else 0, skipped))
    return out


# ---------------------------------------------------------------- queries

def answer(store: Store, queries: Sequence[str], *, source: str = "docs", **options: Any):
    """recall.answer over the chunks (`source`: docs, all, or one source's name); a corpus whose notes
    say so, and no hits, when nothing is indexed. A passage has no type, tag or agent: a filter by one
    is BadInput when documents alone are asked for, and leaves them out of `all`."""
    from . import recall
    from .errors import BadInput, NotFound

    name = None if source in ("docs", "all") else source
    if name is not None and name not in sources_mod.declared(store):  # not found (3), as `source index NAME` says
        raise NotFound(f"no source {source!r}", hint="facts, episodes, docs, all or a source's name (memctl source list)")
    filters = [label for key, label in (("fact_type", "type"), ("tag", "tag"), ("agent", "agent")) if options.pop(key, None) is not None]
    if filters and source != "all":
        raise BadInput(f"document passages have no {' or '.join(filters)}: the filter would leave every one out",
                       hint="recall facts or episodes with it, or drop the filter")
    floor = recall.min_score_for(store) if options.get("min_score") is None else options["min_score"]
    if filters:  # `all`: the filter is the facts' and episodes'
        return recall.Corpus(floor), [[] for _ in queries]
    with reading(store) as conn:
        if conn is None or not conn.execute("SELECT 1 FROM docs WHERE kind=? LIMIT 1", (KIND,)).fetchone():
            corpus = recall.Corpus(floor)
            if sources_mod.declared(store):
                corpus.notes.append("no document is indexed yet: `memctl source index` indexes the declared sources "
                                    "(`memctl source status` says what each one finds)")
            elif source != "all":  # documents asked for by name (`all` is facts and episodes too: no note)
                corpus.notes.append("no source is declared: `memctl source add NAME PATH` declares a folder of documents")
            return corpus, [[] for _ in queries]
        rindex.sync_uses(store, conn)  # a passage shown or used inside the store counts (its frequency factor)
        return recall.answered(store, conn, queries, index="docs", source="docs", fact_type=name, **options)


def bodies(store: Store, keys: Sequence[str]) -> dict[str, str]:
    """The text of the chunks named `path:start-end`, as indexed."""
    found: dict[str, str] = {}
    with reading(store) as conn:
        if conn is None:
            return found
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            found.update(conn.execute(f"SELECT key, body FROM docs WHERE kind=? AND key IN ({','.join('?' * len(part))})",
                                      [KIND, *part]).fetchall())
    return found
