"""What a long-running process keeps between recall calls: the vectors, and the index connection.

Two residents answer recall: the MCP server (integrations/mcp_server.py) and the
embed-server (`memctl embed-server`), which answers the vector and hybrid
modes of the commands' `recall` (recall.served) as well as embedding. Both keep
the documents' vectors in memory (kept_vectors); the embed-server also keeps a
connection to the recall index (recall_handlers), which its clients sync
before they ask, so the answer sees every change made before the call.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime
from typing import Any

from . import recall as recall_mod
from . import rindex

ANSWERS_KEPT = 4  # filter combinations whose allowed vectors are kept at once
# A recall request that would first embed more changed texts than this is declined: the client
# brings the cache up to date itself (in batches, with progress), instead of waiting on one request.
SERVED_EMBED_LIMIT = 64


def kept_vectors():
    """recall's document vectors kept in memory between calls: (`vectors_for` for recall.answer, refresh).

    Without it each call re-reads every document's text from the index, hashes
    them against the embedding cache's manifest, maps the .npy and lists the
    documents that pass the filters (at 10,000 facts several times the cost of
    the query). What is kept is valid for one index connection and its `PRAGMA
    data_version`, which changes whenever another connection commits: any sync
    of the index, by this process or by another. While both are the same
    nothing is read. When they changed, the documents that pass the filters are
    listed again; a kind whose generation (rindex.generation: it changes with
    any of its documents) is the kept one keeps its vectors; otherwise they are
    loaded again as recall.kind_vectors does (the cache, when current for that
    generation; else synced, embedding exactly the changed texts). The
    embedder's model stays loaded in its own module (embed/e5q4.py, st.py).
    """
    kinds_kept: dict[str, tuple] = {}  # kind -> (identity, generation, (doc ids, matrix) or None)
    answers: dict[tuple, tuple] = {}  # (identity, kinds, filters) -> allowed_vectors' result
    seen: list = [None, None]  # the connection and data_version `answers` hold for
    last: list = []  # the last call's (store, embedder, kinds, filters)
    lock = threading.Lock()

    def identity(s, embedder) -> tuple:
        return (str(s.cache_dir), embedder.backend, embedder.model, embedder.fingerprint)

    def vectors_of(s, conn, embedder, kind: str):
        import numpy as np

        ident = identity(s, embedder)
        generation = rindex.generation(conn, kind)
        held = kinds_kept.get(kind)
        if held is not None and held[0] == ident and generation is not None and held[1] == generation:
            return held[2]
        # Keyed by the generation: a cache already current for it loads without rehashing any text.
        found = recall_mod.kind_vectors(s, conn, embedder, kind)
        if found is not None:  # in memory, not a map of a file that a later save replaces
            found = (found[0], np.array(found[1], dtype=np.float32), found[2])
        if found is None or not found[2]:  # (not while some are still being embedded in the background)
            kinds_kept[kind] = (ident, generation, found)
        return found

    def vectors_for(s, conn, embedder, kinds, filters: dict[str, Any]):
        version = conn.execute("PRAGMA data_version").fetchone()[0]  # read first: a commit after it rereads next time
        key = (identity(s, embedder), tuple(kinds), tuple(sorted(filters.items())))
        with lock:
            last[:] = [s, embedder, kinds, filters]
            if seen[0] is not conn or seen[1] != version:
                answers.clear()
                seen[:] = [conn, version]
            if key in answers:
                return answers[key]
            found = recall_mod.allowed_vectors(s, conn, embedder, kinds, filters, vectors_of)
            if not found[2]:  # complete: kept until the index changes
                if len(answers) >= ANSWERS_KEPT:
                    answers.pop(next(iter(answers)))
                answers[key] = found
            return found

    def refresh(conn) -> None:
        """After a background sync: bring the last call's vectors up to date before the next call asks."""
        if last:
            s, embedder, kinds, filters = last
            vectors_for(s, conn, embedder, kinds, filters)

    return vectors_for, refresh


def recall_handlers(root, embedder) -> dict[str, Any]:
    """The embed-server's `recall` request: recall.answer over a kept index connection and kept vectors.

    The client (recall.served) synced the index just before asking and checked the arguments;
    this answers with the server's model (`embedder`), or declines ({"declined": why}: the client
    answers in-process) when that model is the n-gram fallback of a configuration that asked for
    another. The request names its index: recall's (facts and episodes) or the documents'
    (docindex.py; their chunk vectors are then kept as well). A connection is opened again when its
    index file was replaced (a rebuild).
    """
    import sqlite3

    from . import docindex
    from .store import open_store

    vectors_for, _ = kept_vectors()
    held: dict[str, tuple[int, sqlite3.Connection]] = {}  # index -> (inode of its file, connection)

    def connection(store, index: str):
        path = docindex.path_of(store) if index == "docs" else store.cache_dir / rindex.FILE
        ino = os.stat(path).st_ino  # the client synced or read it: it exists
        if index not in held or held[index][0] != ino:
            if index in held:
                held[index][1].close()
            held[index] = (ino, sqlite3.connect(path, timeout=30, isolation_level=None))
        return held[index][1]

    def recall(request: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        from . import embed

        try:
            asked = dict(request["request"])
            queries, now = asked.pop("queries"), datetime.fromtimestamp(float(asked.pop("now"))).astimezone()
            wall = asked.pop("wall", None)  # the client's wall clock (a bare expiry date ends in its zone)
            wall = float(wall) if wall is not None else None
            index = "docs" if asked.pop("index", "recall") == "docs" else "recall"
            store = open_store(root)  # memctl.toml read again: weights and the floor may have changed
            if embedder.backend == "char-ngram" and embed.settings_for(store).backend != "char-ngram":
                return {"declined": "this server has no sentence-embedding model"}, b""
            conn = connection(store, index)
            stale = _to_embed(store, conn, embedder, asked.get("source", "facts"))
            if stale > SERVED_EMBED_LIMIT:
                return {"declined": f"{stale} texts to embed first"}, b""
            recall_mod.embed_early(store, queries, asked.get("mode"), embedder)  # overlaps the keyword search
            corpus, results = recall_mod.answer(store, conn, queries, vectors_for=vectors_for, embedder=embedder,
                                                now=now, wall=wall, **asked)
        except Exception as exc:  # noqa: BLE001 - the client answers in-process, and reports any error as its own
            return {"declined": f"{type(exc).__name__}: {exc}"}, b""
        return {"corpus": recall_mod.corpus_to_wire(corpus),
                "results": [[recall_mod.hit_to_wire(h) for h in hits] for hits in results]}, b""

    return {"recall": recall}


def _to_embed(store, conn, embedder, source: str) -> int:
    """How many texts answering `source` would embed first (0 while each kind's cache is current)."""
    from . import vcache

    total = 0
    for kind in recall_mod.kinds_of(source):
        name = f"recall-{kind}s"
        with rindex.snapshot(conn):
            if vcache.is_current(store, name, embedder, "passage", rindex.generation(conn, kind)):
                continue
            texts = [text for _, _, text in rindex.vector_texts(conn, kind)]
        total += vcache.missing(store, name, texts, embedder, "passage")
    return total


def warm(root, embedder) -> None:
    """Bring recall's fact vectors up to date with `embedder` before a detached server answers
    (so the prompt hook's first served recall is not declined for texts to embed). A store whose
    configuration asks for a model this machine does not have is left to the commands: the server
    would only serve n-grams, which recall does not use."""
    from . import embed
    from .store import open_store

    store = open_store(root)
    if embedder.backend == "char-ngram" and embed.settings_for(store).backend != "char-ngram":
        from .errors import MemctlError

        raise MemctlError("no sentence-embedding model here, so no resident embedder is kept",
                          hint="install the embedder (docs/EMBEDDINGS.md); the hooks rank by keywords meanwhile")
    with rindex.opened(store) as conn:
        recall_mod.kind_vectors(store, conn, embedder, "fact")
