"""The .npy embedding cache: incremental, rebuildable, never wrong (memctl/vcache.py)."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memctl import errors, output, vcache
from memctl.embed import paced
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


def manifest_of(folder, source="s"):
    return folder / f"{vcache._name(source)}.manifest.json"


def vectors_of(folder, source="s"):
    """The matrix file the source's manifest names."""
    return folder / json.loads(manifest_of(folder, source).read_text())["npy"]["file"]


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
    meta = json.loads(manifest_of(result.folder).read_text())
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
        path = vectors_of(folder)
        data = bytearray(path.read_bytes())
        data[:6] = b"garbag"
        overwrite_in_place(path, bytes(data))

    assert "corrupt" in rebuilt_after(store, capsys, damage)


def test_a_store_copied_with_cp_a_keeps_its_cache(store, tmp_path, capsys):
    """New inodes (cp -a), a rewritten or touched file with the same bytes: the same vectors, trusted."""
    import subprocess

    from memctl.store import open_store

    emb = Counting()
    first = vcache.sync(store, "s", items(20), emb, key="k")
    path = vectors_of(first.folder)
    path.write_bytes(path.read_bytes())  # rewritten in place: a new mtime
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(store.root), str(copy)], check=True)
    copied = open_store(copy)
    capsys.readouterr()
    emb.texts.clear()
    again = vcache.sync(copied, "s", items(20), emb)
    assert again.embedded == 0 and emb.texts == [] and capsys.readouterr().err == ""
    assert vcache.current(copied, "s", emb, "query", "k") is not None
    assert vcache.entries(copied)[0].problem is None


def test_vectors_with_garbage_rows_are_rebuilt(store, capsys):
    def damage(folder):
        path = vectors_of(folder)
        data = bytearray(path.read_bytes())
        data[-64:] = b"\x7f" * 64  # the last row becomes NaN/huge; header intact
        overwrite_in_place(path, bytes(data))

    assert "unit vectors" in rebuilt_after(store, capsys, damage)


def test_manifest_for_another_model_is_rebuilt(store, capsys):
    def damage(folder):
        meta = json.loads(manifest_of(folder).read_text())
        meta["model"] = "some-other-model"
        manifest_of(folder).write_text(json.dumps(meta))

    assert "not by the embedder in use" in rebuilt_after(store, capsys, damage)


def test_truncated_manifest_is_rebuilt(store, capsys):
    def damage(folder):
        path = manifest_of(folder)
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])

    assert "truncated" in rebuilt_after(store, capsys, damage)


def test_a_replaced_vectors_file_is_rebuilt(store, capsys):
    def damage(folder):
        # Another valid file of the same shape: the manifest's digest of sampled rows does not vouch for it.
        matrix = np.load(vectors_of(folder))
        np.save(folder / "new.npy", matrix[::-1].copy())
        os.replace(folder / "new.npy", vectors_of(folder))

    assert "does not belong" in rebuilt_after(store, capsys, damage)


def test_missing_vectors_file_is_rebuilt(store, capsys):
    assert "missing" in rebuilt_after(store, capsys, lambda folder: vectors_of(folder).unlink())


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
    assert vcache.clear(store) == [store.rel(vcache.folder_for(store, emb, "query"))]
    after = vcache.sync(store, "s", items(30), emb)
    assert after.embedded == 30 and np.array_equal(np.asarray(after.matrix), before)
    assert vcache.clear(store, "nothing-here") == []


def test_entries_report_rows_and_last_update(store):
    emb = Counting()
    vcache.sync(store, "ledger:themes:theme", items(10), emb)
    vcache.sync(store, "ledger:themes:theme", items(11), emb)
    (entry,) = vcache.entries(store)
    assert (entry.source, entry.rows, entry.dim, entry.embedded_last, entry.embedded_total) == ("ledger:themes:theme", 11, 64, 1, 11)
    assert entry.problem is None and entry.folder == ".memctl/vectors/test--counting--query-" + vcache._tag("test\0counting\0query")


class Recorder:
    """A reporter (errors.set_reporter) that records the progress asked for."""

    def __init__(self):
        self.bars: list[list] = []

    def warn(self, message, hint=None):
        pass

    def info(self, message):
        pass

    def progress(self, total, what):
        import contextlib

        bar = [total, what, 0]
        self.bars.append(bar)
        return contextlib.nullcontext(lambda n: bar.__setitem__(2, bar[2] + n))


def test_progress_for_more_than_a_few_texts_counts_every_one(store):
    recorder = Recorder()
    errors.set_reporter(recorder)
    vcache.sync(store, "small", items(paced.PROGRESS_OVER), Counting())
    assert recorder.bars == []
    vcache.sync(store, "big", items(paced.PROGRESS_OVER + 1, "big"), Counting())
    assert recorder.bars == [[paced.PROGRESS_OVER + 1, "embedding with test (counting)", paced.PROGRESS_OVER + 1]]


def test_progress_shows_count_rate_and_time_left():
    assert output.pace(1200, 10000, 25.0) == "1,200/10,000, 48/s, about 3m left"
    assert output.pace(3, 10, 2.0) == "3/10, 1.5/s, about 4s left"
    assert output.pace(10, 10, 2.0) == "10/10, 5.0/s"
    assert output.pace(999, 1000, 10.0) == "999/1,000, 100/s, under 1s left"  # it said "about 0s left"


def test_embed_texts_keeps_the_callers_order_while_batching_by_length(monkeypatch):
    """Texts are embedded shortest first (less padding), but row i is always text i's vector."""
    monkeypatch.setattr(paced, "FIRST_CALL", 3)  # several calls
    monkeypatch.setattr(paced, "MAX_CALL", 3)
    texts = [("長い" * (17 - i)) if i % 2 else f"t{i}" for i in range(17)]
    emb = Counting()
    matrix = paced.embed_texts(emb, texts)
    assert emb.texts == sorted(texts, key=len)  # in length order, each once
    alone = np.stack([Counting().inner.embed([t])[0] for t in texts])
    assert np.allclose(matrix, alone / np.linalg.norm(alone, axis=1, keepdims=True), atol=1e-6)


# ---------------------------------------------------------------- one cache for every source, resumable


def test_sources_with_the_same_model_and_kind_share_vectors(store):
    """near-dup's facts and recall's facts are the same texts: whichever syncs second embeds nothing."""
    emb = Counting()
    vcache.sync(store, "facts", items(30), emb, kind="passage")
    emb.texts.clear()
    other = [(f"fact:{i}", text) for i, text in items(30)][::-1] + [("fact:new", "one more text")]
    result = vcache.sync(store, "recall-facts", other, emb, kind="passage")
    assert emb.texts == ["one more text"] and result.embedded == 1
    assert np.allclose(result.matrix, emb.inner.embed([t for _, t in other]), atol=1e-6)
    emb.texts.clear()
    assert vcache.sync(store, "facts", items(30), emb, kind="query").embedded == 30  # another kind: its own vectors


class Stopping(Counting):
    """Counting, and a Ctrl-C (or an error) after `after` texts, as a person or a broken model would."""

    def __init__(self, after: int, exc: BaseException = KeyboardInterrupt(), **kw):
        super().__init__(**kw)
        self.after, self.exc = after, exc

    def embed(self, texts, kind="query"):
        if len(self.texts) >= self.after:
            raise self.exc
        return super().embed(texts, kind)


def test_a_ctrl_c_keeps_what_was_embedded_and_the_next_sync_embeds_only_the_rest(store, monkeypatch):
    monkeypatch.setattr(paced, "MAX_CALL", 8)
    stopping = Stopping(after=40)
    with pytest.raises(errors.Interrupted) as stopped:
        vcache.sync(store, "s", items(100), stopping)
    done = len(stopping.texts)
    assert 40 <= done < 100 and stopped.value.exit_code == errors.INTERRUPTED
    assert stopped.value.message == (f"interrupted: {done} of 100 texts embedded and kept in the vector cache; "
                                     f"the next run embeds the other {100 - done}")
    folder = vcache.folder_for(store, stopping, "query")
    assert list(folder.glob("batch.*.npz")) and not list(folder.glob(".*.tmp"))
    again = Counting()
    result = vcache.sync(store, "s", items(100), again)
    assert len(again.texts) == 100 - done and not set(again.texts) & set(stopping.texts)
    assert np.allclose(result.matrix, again.inner.embed([t for _, t in items(100)]), atol=1e-6)
    assert not list(folder.glob("batch.*.npz"))  # all in the source's matrix now


@pytest.mark.parametrize("damage", ["cut-short", "garbage"])
def test_a_damaged_batch_file_is_left_out_and_the_rest_is_used(store, monkeypatch, damage):
    """Found by hand: a batch cut short or overwritten is a damaged zip, and np.load's BadZipFile went
    past the handler (OSError, ValueError, ...): remember, recall, near-dup and `cache status` failed
    with a traceback and only `cache clear` helped."""
    monkeypatch.setattr(paced, "MAX_CALL", 8)
    stopping = Stopping(after=40)
    with pytest.raises(errors.Interrupted):
        vcache.sync(store, "s", items(100), stopping)
    folder = vcache.folder_for(store, stopping, "query")
    batches = sorted(folder.glob("batch.*.npz"))
    assert batches
    last = batches[-1]
    lost = len(vcache._read_batch(last, vectors=False)[0])
    if damage == "cut-short":
        os.truncate(last, last.stat().st_size - 100)
    else:
        last.write_bytes(b"garbage\n")
    assert vcache.pending(store) == len(stopping.texts) - lost
    again = Counting()
    result = vcache.sync(store, "s", items(100), again)
    assert len(again.texts) == 100 - len(stopping.texts) + lost  # the damaged batch's texts, embedded again
    assert np.allclose(result.matrix, again.inner.embed([t for _, t in items(100)]), atol=1e-6)
    assert not list(folder.glob("batch.*.npz"))


def test_a_failing_embedder_keeps_what_it_finished(store, monkeypatch):
    monkeypatch.setattr(paced, "MAX_CALL", 8)
    failing = Stopping(after=24, exc=RuntimeError("the model broke"))
    with pytest.raises(RuntimeError):
        vcache.sync(store, "s", items(60), failing)
    again = Counting()
    vcache.sync(store, "s", items(60), again)
    assert len(again.texts) == 60 - len(failing.texts)


def test_batches_of_another_fingerprint_are_never_used(store, monkeypatch):
    monkeypatch.setattr(paced, "MAX_CALL", 8)
    with pytest.raises(errors.Interrupted):
        vcache.sync(store, "s", items(30), Stopping(after=8))
    changed = Counting(fingerprint="v2")
    assert vcache.sync(store, "s", items(30), changed).embedded == 30
    assert not list(vcache.folder_for(store, changed, "query").glob("batch.*.npz"))


class Slow(Counting):
    """Counting at `per_text` seconds a text; records how long each call took."""

    def __init__(self, per_text: float, **kw):
        super().__init__(**kw)
        self.per_text, self.calls = per_text, []

    def embed(self, texts, kind="query"):
        import time

        time.sleep(self.per_text * len(texts))
        self.calls.append(len(texts))
        return super().embed(texts, kind)


def test_calls_are_short_so_that_a_ctrl_c_lands_soon(store):
    slow = Slow(per_text=0.004)
    vcache.sync(store, "s", items(400), slow, quiet=True)
    # about CALL_SECONDS each (0.25 s: ~60 texts at 4 ms), never one call for everything
    assert max(slow.calls) * 0.004 <= 2 * paced.CALL_SECONDS and len(slow.calls) >= 5, slow.calls


def test_answer_within_returns_what_is_ready_and_finishes_in_the_background(store, monkeypatch):
    monkeypatch.setattr(paced, "SAVE_SECONDS", 0.1)
    slow = Slow(per_text=0.01)
    with vcache.answer_within(0.6):
        early = vcache.sync(store, "s", items(150), slow, key="k")
    assert early.waiting > 0 and len(early.present) + early.waiting == 150
    assert early.ids == [str(i) for i in early.present] and len(early.matrix) == len(early.present)
    assert np.allclose(early.matrix, slow.inner.embed([f"theme number {i}" for i in early.present]), atol=1e-6)
    for _ in range(100):  # a call while the thread runs answers at once, from what is ready
        started = time.monotonic()
        with vcache.answer_within(5.0):
            later = vcache.sync(store, "s", items(150), slow, key="k")
        assert time.monotonic() - started < 1.0
        if not later.waiting:
            break
        time.sleep(0.1)
    assert later.waiting == 0 and later.present is None and len(later.matrix) == 150
    assert sorted(slow.texts) == sorted(t for _, t in items(150))  # each text once
    # every row may be ready (saved in batches) while the thread still writes the matrix and its record
    for thread in threading.enumerate():
        if thread.name.startswith("memctl-embed-"):
            thread.join(30)
    assert vcache.current(store, "s", slow, "query", "k") is not None


def test_a_ctrl_c_during_a_save_waits_for_the_save_and_a_second_one_is_dropped(ctrl_c_reaches_us):
    import signal

    before = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt):
        with errors.stops_noted():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the save ...
            time.sleep(0.05)
            done.append("saved")  # ... which goes on to the end
    assert done == ["saved"]
    with errors.stops_noted(replay=False):  # stopping already: dropped
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    with pytest.raises(errors.Interrupted) as stopped:
        with errors.stops_noted():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
    assert stopped.value.exit_code == errors.TERMINATED
    assert signal.getsignal(signal.SIGINT) is before  # handlers are back


def test_a_cache_built_before_half_width_katakana_was_read_full_width_is_synced_once(store):
    """A review: recall's fast path (`current`, trusted by the index's generation) kept the vector of a
    half-width text embedded as written until something else changed. A record without the model's input
    version is not current: the next sync re-hashes, and embeds that text (only it) again."""
    emb = Counting()
    rows = [("1", "ﾃﾞﾌﾟﾛｲは金曜日に行わない"), ("2", "plain text")]
    vcache.sync(store, "s", rows, emb, key="k")
    assert vcache.current(store, "s", emb, "query", "k") is not None
    folder = vcache.folder_for(store, emb, "query")
    record = folder / f"{vcache._name('s')}.current.json"
    old = json.loads(record.read_text())
    del old["input"]  # as a memctl before 2026-12-06 wrote it
    record.write_text(json.dumps(old))
    manifest = json.loads(manifest_of(folder).read_text())
    manifest["hashes"] = "".join(vcache.blake2b(t.encode(), digest_size=8).hexdigest() for _, t in rows)  # hashed as written
    manifest_of(folder).write_text(json.dumps(manifest))
    assert vcache.current(store, "s", emb, "query", "k") is None
    emb.texts.clear()
    vcache.sync(store, "s", rows, emb, key="k")
    assert emb.texts == ["ﾃﾞﾌﾟﾛｲは金曜日に行わない"]  # (the model reads it full-width: embed.model_input)
    assert vcache.current(store, "s", emb, "query", "k") is not None


def test_the_stopped_line_says_terminated_for_sighup_as_for_sigterm():
    """A SIGHUP held during the save (errors.stops_noted holds it since this session) ended with
    "interrupted", which is Ctrl-C's word (helper-90)."""
    import signal

    assert paced.stopped_line(128 + signal.SIGHUP, 1, 2).startswith("terminated: 1 of 2 texts")
    assert paced.stopped_line(errors.TERMINATED, 2, 2).startswith("terminated: 2 of 2 texts")
    assert paced.stopped_line(errors.INTERRUPTED, 2, 2).startswith("interrupted: ")
