"""The sentence-transformers embedder: any model from local files, never the network.

`choose()` has already found the model on disk (a path, or a snapshot in the
Hugging Face cache), so loading sets HF_HUB_OFFLINE and loads that folder:
a missing model is reported before torch is even imported, instead of a
70-second hang on download retries.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

BATCH = 64
_LOADED: dict[str, Any] = {}  # one model per folder and process: a long-running server loads it once
_LOAD_LOCK = threading.Lock()  # a query's thread and a background embedding may both ask first (the MCP server)


class SentenceTransformerEmbedder:
    backend = "sentence-transformers"

    def __init__(self, model: str, path: Path, *, query_prefix: str = "", passage_prefix: str = ""):
        self.model = model
        self.path = Path(path)
        self.prefixes = {"query": query_prefix, "passage": passage_prefix}
        self._model: Any = None
        # Offline for good: the folder is local, so nothing may reach for the hub. Set here, in the
        # thread that chose the model, not when it loads (maybe in a thread, beside others): adding
        # a variable beside threads may crash getenv (early.settle_environment).
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            if os.environ.get(name) != "1":
                os.environ[name] = "1"

    @property
    def fingerprint(self) -> str:
        return f"prefix={self.prefixes['query']!r}/{self.prefixes['passage']!r}/normalized"

    def load(self) -> Any:
        with _LOAD_LOCK:
            return self._load()

    def _load(self) -> Any:
        if self._model is None:
            from .. import early

            for name, value in early.ENV_DEFAULTS:  # set by the CLI already: no write here, beside threads
                os.environ.setdefault(name, value)
            from sentence_transformers import SentenceTransformer

            key = str(self.path)
            if key not in _LOADED:
                _LOADED[key] = SentenceTransformer(key, device="cpu", local_files_only=True)
            self._model = _LOADED[key]
        return self._model

    def embed(self, texts: Sequence[str], kind: str = "query") -> "np.ndarray":
        import numpy as np

        from . import model_input

        prefix = self.prefixes.get(kind, "")
        model = self.load()
        vectors = model.encode(
            [prefix + t for t in model_input(texts)],
            batch_size=BATCH,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), -1)
