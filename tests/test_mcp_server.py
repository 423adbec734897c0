"""The resident recall data (memctl/resident.py, used by the MCP server), in-process, on real stores.

The server keeps recall's document vectors between calls and reads them again
only when the index changed; these tests hold it to "the same answer as a fresh
read" and to "nothing read again while nothing changed". The subprocess tests
through the SDK's client are in tests/cli/test_mcp_cli.py.
"""

from __future__ import annotations

import numpy as np

from memctl import episodes, facts, recall, resident
from memctl.integrations import mcp_server
from memctl.store import open_store


def _remember(root, name, description, **kw):
    facts.remember(open_store(root), facts.FactInput(name=name, description=description, **kw), commit_changes=False,
                   force=True)


def _seed(root):
    _remember(root, "deploy-friday", "Never deploy the payment service on Fridays", type="feedback")
    _remember(root, "zenn-limit", "Zenn投稿は1日1件まで。書籍CTAを全記事に含める", type="feedback")
    _remember(root, "tokyo-office", "東京オフィスの会議室は3階にある", type="project")
    _remember(root, "old-rule", "Deploys used to need two approvals", type="project")
    facts.forget(open_store(root), "old-rule", "one approval is enough now", commit_changes=False)


class Server:
    """The two resident parts `build` wires into the recall tool, called as the tool calls them."""

    def __init__(self, root):
        self.root = root
        self.query, self.own_write = mcp_server._recall_index(keep_synced=False)
        self.kept, _ = resident.kept_vectors()
        self.given: list = []  # what the kept vectors_for returned, per call

    def vectors_for(self, *args):
        found = self.kept(*args)
        self.given.append(found)
        return found

    def recall(self, text, **kw):
        s = open_store(self.root)
        _, (hits,) = self.query(s, lambda conn: recall.answer(s, conn, [text], vectors_for=self.vectors_for, **kw))
        return [(h.item.key, round(h.relevance, 6)) for h in hits]


def _fresh(root, text, **kw):
    _, (hits,) = recall.recall(open_store(root), [text], log=False, **kw)
    return [(h.item.key, round(h.relevance, 6)) for h in hits]


def test_kept_vectors_are_reused_while_nothing_changes(root, monkeypatch):
    from memctl import rindex

    # Files written within RACY_NS of a sync are read again by the next one (rindex._sync_facts), which
    # rightly makes the server look again; here every file is settled, so nothing may be read again.
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    _seed(root)
    server = Server(root)
    assert server.recall("deploy on Fridays") == _fresh(root, "deploy on Fridays")
    assert server.recall("payment service") == _fresh(root, "payment service")
    first, second = server.given
    assert second is first  # the same objects: nothing was read again
    ids, matrix, waiting = first
    assert waiting == 0 and len(ids) == 3 and isinstance(matrix, np.ndarray) and matrix.shape[0] == 3  # live facts only


def test_a_write_is_seen_and_the_kept_vectors_match_a_fresh_read(root):
    _seed(root)
    server = Server(root)
    server.recall("deploy")
    _remember(root, "kaigi", "会議は毎週月曜の朝10時から", type="project")
    assert server.recall("毎週月曜の会議") == _fresh(root, "毎週月曜の会議")
    assert server.recall("毎週月曜の会議")[0][0] == "kaigi"
    ids, matrix, _ = server.given[-1]
    s = open_store(root)
    from memctl import rindex

    with rindex.opened(s) as conn:
        embedder = recall._embedder(s, recall.Corpus(), required=True)
        want_ids, want, _ = recall.allowed_vectors(s, conn, embedder, ("fact",), {
            "kinds": ("fact",), "statuses": ("live",), "fact_type": None, "tag": None, "since": None, "agent": None})
    assert ids == want_ids and np.array_equal(matrix, np.asarray(want))


def test_filters_and_sources_each_get_their_own_answer(root):
    _seed(root)
    episodes.add(open_store(root), "Chose Fridays as the freeze day for deploys", "decision", commit_changes=False)
    server = Server(root)
    for kw in ({}, {"include_all": True}, {"source": "all"}, {"source": "episodes"}, {"fact_type": "project"},
               {"mode": "vector"}):
        assert server.recall("deploy freeze on Fridays", **kw) == _fresh(root, "deploy freeze on Fridays", **kw), kw
    assert [name for name, _ in server.recall("deploy approvals", include_all=True)].count("old-rule") == 1
    assert "old-rule" not in [name for name, _ in server.recall("deploy approvals")]


def _newest_fact(root):
    from memctl import rindex

    with rindex.opened(open_store(root)) as conn:
        return conn.execute("SELECT id, path FROM docs WHERE kind='fact' ORDER BY id DESC LIMIT 1").fetchone()


def test_an_edit_that_keeps_the_document_id_is_seen(root):
    """Editing the newest fact gives its index row the same id again: the texts are compared, not only ids."""
    _seed(root)
    server = Server(root)
    server.recall("conference room", include_all=True)
    doc, rel = _newest_fact(root)
    path = root / rel
    text = path.read_text(encoding="utf-8")
    description = facts.find(open_store(root), path.stem).description
    path.write_text(text.replace(description, "The Tokyo conference room is on floor 3"), encoding="utf-8")
    assert _newest_fact(root) == (doc, rel)  # re-indexed under the same id (what this test is about)
    assert server.recall("conference room", include_all=True) == _fresh(root, "conference room", include_all=True)
    assert server.recall("conference room", include_all=True)[0][0] == path.stem


def test_a_query_embedded_early_gives_the_same_answer_and_is_taken(root):
    """recall.embed_early (the server encodes the query beside the keyword search): same hits, nothing left behind."""
    _seed(root)
    s = open_store(root)
    for text in ("deploy on Fridays", "東京の会議室はどこ"):
        expected = _fresh(root, text, mode="hybrid")
        recall.embed_early(s, [text], "hybrid")
        assert len(recall._EARLY) == 1
        _, (hits,) = recall.recall(s, [text], mode="hybrid", log=False)
        assert [(h.item.key, round(h.relevance, 6)) for h in hits] == expected
        assert recall._EARLY == {}  # taken by the answer, not left for another query
    recall.embed_early(s, ["deploy"], "keyword")
    assert recall._EARLY == {}  # keyword mode embeds nothing
