"""The .npy embedding cache: incremental, rebuildable, never wrong (memctl/vcache.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memctl import errors, output, vcache
from memctl.embed.ngram import NgramEmbedder


@pytest.fixture(autouse=True)
def _warnings_on_stderr():
    """The library's warnings as the CLI shows them (errors.set_reporter), so capsys sees them."""
    before = errors._reporter
    errors.set_reporter(output)
    yield
    errors.set_reporter(before)


class Counting:
    """A test double: real (char n-gram) vectors, and a record of every text embedded."""

    backend = "test"

    def __init__(self, model: str = "counting", fingerprint: str = "v1", dim: int = 64):
        self.model = model
        self.fingerprint = fingerprint
        self.inner = NgramEmbedder(dim)
        self.texts: list[str] = []

    def embed(self, texts, kind="query"):
        self.texts.extend(texts)
        return self.inner.embed(texts, kind)


def items(n: int, prefix: str = "theme") -> list[tuple[str, str]]:
    return [(str(i), f"{prefix} number {i}") for i in range(n)]


def test_first_sync_embeds_everything_then_nothing(store):
    emb = Counting()
    first = vcache.sync(store, "s", items(50), emb)
    assert first.embedded == 50 and len(emb.texts) == 50
    assert first.matrix.shape == (50, 64) and first.matrix.dtype == np.float32
    again = vcache.sync(store, "s", items(50), emb)
    assert again.embedded == 0 and len(emb.texts) == 50
    assert np.array_equal(np.asarray(again.matrix), np.asarray(first.matrix))


def test_append_embeds_only_the_new_row_and_edit_only_the_edited_row(store):
    emb = Counting()
    rows = items(200)
    vcache.sync(store, "s", rows, emb)
    emb.texts.clear()
    rows.append(("200", "a brand new theme"))
    assert vcache.sync(store, "s", rows, emb).embedded == 1
    assert emb.texts == ["a brand new theme"]
    emb.texts.clear()
    rows[17] = ("17", "an edited theme")
    assert vcache.sync(store, "s", rows, emb).embedded == 1
    assert emb.texts == ["an edited theme"]


def test_removed_rows_are_dropped_and_duplicates_embedded_once(store):
    emb = Counting()
    rows = items(10) + [("10", "same text"), ("11", "same text")]
    result = vcache.sync(store, "s", rows, emb)
    assert result.embedded == 11 and emb.texts.count("same text") == 1
    emb.texts.clear()
    kept = rows[::2]
    result = vcache.sync(store, "s", kept, emb)
    assert result.embedded == 0 and result.ids == [i for i, _ in kept]
    assert np.allclose(result.matrix, emb.inner.embed([t for _, t in kept]), atol=1e-6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "d", "ab", "cd", "x y", "日本語", ""]), max_size=8), min_size=1, max_size=4))
def test_any_sequence_of_syncs_matches_embedding_from_scratch(store, versions):
    emb = Counting()
    vcache.clear(store)
    for texts in versions:
        rows = [(str(i), t) for i, t in enumerate(texts)]
        result = vcache.sync(store, "p", rows, emb, quiet=True)
        assert result.ids == [i for i, _ in rows]
        assert len(result.matrix) == len(texts)
        if texts:
            assert np.allclose(np.asarray(result.matrix), emb.inner.embed(texts), atol=1e-6)


def test_load_memory_maps_the_vectors(store):
    emb = Counting()
    vcache.sync(store, "s", items(5), emb)
    loaded = vcache.load(store, "s", emb)
    assert isinstance(loaded.matrix, np.memmap) and loaded.ids == [str(i) for i in range(5)]


def test_manifest_names_model_dimension_ids_and_hashes(store):
    emb = Counting()
    result = vcache.sync(store, "s", items(3), emb)
    meta = json.loads((result.folder / "manifest.json").read_text())
    assert (meta["backend"], meta["model"], meta["fingerprint"], meta["dim"], meta["count"]) == ("test", "counting", "v1", 64, 3)
    assert meta["ids"] == ["0", "1", "2"]
    assert meta["hashes"] == "".join(vcache.content_hash(t) for _, t in items(3))
    assert meta["embedded_last"] == 3


def test_each_model_and_kind_has_its_own_cache(store):
    a, b = Counting("model-a"), Counting("model-b")
    vcache.sync(store, "s", items(4), a)
    vcache.sync(store, "s", items(4), b)
    vcache.sync(store, "s", items(4), a, kind="passage")
    assert len(a.texts) == 8 and len(b.texts) == 4
    assert len(vcache.entries(store)) == 3


def rebuilt_after(store, capsys, damage, emb=None):
    emb = emb or Counting()
    first = vcache.sync(store, "s", items(20), emb)
    damage(first.folder)
    capsys.readouterr()
    emb.texts.clear()
    result = vcache.sync(store, "s", items(20), emb)
    err = capsys.readouterr().err
    assert result.embedded == 20 and len(emb.texts) == 20, "the cache was used instead of rebuilt"
    assert "rebuilding" in err
    assert np.allclose(result.matrix, first.matrix, atol=1e-6)
    assert vcache.sync(store, "s", items(20), emb).embedded == 0  # and the rebuilt cache is good
    return err


def overwrite_in_place(path, data: bytes) -> None:
    """Damage as bit rot would: same inode, size and mtime."""
    st = path.stat()
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_corrupt_vectors_file_is_rebuilt(store, capsys):
    def damage(folder):
        path = folder / "vectors.npy"
        data = bytearray(path.read_bytes())
        data[:6] = b"garbag"
        overwrite_in_place(path, bytes(data))

    assert "corrupt" in rebuilt_after(store, capsys, damage)


def test_a_touched_or_rewritten_vectors_file_is_not_trusted(store, capsys):
    def damage(folder):
        path = folder / "vectors.npy"
        path.write_bytes(path.read_bytes())

    assert "does not belong" in rebuilt_after(store, capsys, damage)


def test_vectors_with_garbage_rows_are_rebuilt(store, capsys):
    def damage(folder):
        path = folder / "vectors.npy"
        data = bytearray(path.read_bytes())
        data[-64:] = b"\x7f" * 64  # the last row becomes NaN/huge; header intact
        overwrite_in_place(path, bytes(data))

    assert "unit vectors" in rebuilt_after(store, capsys, damage)


def test_manifest_for_another_model_is_rebuilt(store, capsys):
    def damage(folder):
        meta = json.loads((folder / "manifest.json").read_text())
        meta["model"] = "some-other-model"
        (folder / "manifest.json").write_text(json.dumps(meta))

    assert "not by the embedder in use" in rebuilt_after(store, capsys, damage)


def test_truncated_manifest_is_rebuilt(store, capsys):
    def damage(folder):
        path = folder / "manifest.json"
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])

    assert "truncated" in rebuilt_after(store, capsys, damage)


def test_vectors_from_an_interrupted_save_are_rebuilt(store, capsys):
    def damage(folder):
        # Another valid file of the same shape (a new inode): the manifest no longer vouches for it.
        matrix = np.load(folder / "vectors.npy")
        np.save(folder / "new.npy", matrix[::-1].copy())
        os.replace(folder / "new.npy", folder / "vectors.npy")

    assert "does not belong" in rebuilt_after(store, capsys, damage)


def test_missing_vectors_file_is_rebuilt(store, capsys):
    assert "missing" in rebuilt_after(store, capsys, lambda folder: (folder / "vectors.npy").unlink())


def test_fingerprint_change_rebuilds(store, capsys):
    emb = Counting()
    vcache.sync(store, "s", items(5), emb)
    changed = Counting(fingerprint="v2")
    assert vcache.sync(store, "s", items(5), changed).embedded == 5
    assert "not by the embedder in use" in capsys.readouterr().err


def test_rebuild_on_request_re_embeds_without_a_warning(store, capsys):
    emb = Counting()
    vcache.sync(store, "s", items(5), emb)
    capsys.readouterr()
    assert vcache.sync(store, "s", items(5), emb, rebuild=True).embedded == 5
    assert "rebuilding" not in capsys.readouterr().err


def test_clearing_loses_nothing(store):
    emb = Counting()
    before = np.asarray(vcache.sync(store, "s", items(30), emb).matrix).copy()
    assert vcache.clear(store) == [".memctl/vectors/s"]
    after = vcache.sync(store, "s", items(30), emb)
    assert after.embedded == 30 and np.array_equal(np.asarray(after.matrix), before)
    assert vcache.clear(store, "nothing-here") == []


def test_entries_report_rows_and_last_update(store):
    emb = Counting()
    vcache.sync(store, "ledger:themes:theme", items(10), emb)
    vcache.sync(store, "ledger:themes:theme", items(11), emb)
    (entry,) = vcache.entries(store)
    assert (entry.source, entry.rows, entry.dim, entry.embedded_last, entry.embedded_total) == ("ledger:themes:theme", 11, 64, 1, 11)
    assert entry.problem is None and entry.folder.startswith(".memctl/vectors/ledger-themes-theme/")


def test_progress_message_only_for_large_batches(store, capsys):
    vcache.sync(store, "small", items(vcache.PROGRESS_OVER), Counting())
    assert capsys.readouterr().err == ""
    vcache.sync(store, "big", items(vcache.PROGRESS_OVER + 1), Counting())
    assert f"embedding {vcache.PROGRESS_OVER + 1} texts with test (counting)" in capsys.readouterr().err


def test_embed_texts_keeps_the_callers_order_while_batching_by_length(monkeypatch):
    """Texts are embedded shortest first (less padding), but row i is always text i's vector."""
    monkeypatch.setattr(vcache, "BATCH", 3)  # several batches
    texts = [("長い" * (17 - i)) if i % 2 else f"t{i}" for i in range(17)]
    emb = Counting()
    matrix = vcache.embed_texts(emb, texts)
    assert emb.texts == sorted(texts, key=len)  # in length order, each once
    alone = np.stack([Counting().inner.embed([t])[0] for t in texts])
    assert np.allclose(matrix, alone / np.linalg.norm(alone, axis=1, keepdims=True), atol=1e-6)
