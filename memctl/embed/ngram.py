"""The character n-gram embedder: no model, numpy only.

Each text is normalised (NFKC, case-folded, spaces collapsed), padded with a
space, cut into character 2- and 3-grams, and each gram is hashed (CRC-32,
stable across processes and machines) into one of DIM signed buckets. The
sublinear counts are L2-normalised, so a dot product is a cosine. A text is
read up to EMBED_CHARS characters, as a model's is.

What it catches: rewordings that keep most characters (word order, particles,
punctuation, width, case, a word added or dropped). What it cannot: paraphrases
that share meaning but not characters (synonyms, another script, another
language); see docs/EMBEDDINGS.md.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from typing import TYPE_CHECKING, Sequence

from ..textnorm import normalize

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

DIM = 1024
NGRAMS = (2, 3)


def grams(text: str) -> Counter[str]:
    padded = f" {normalize(text)} "
    out: Counter[str] = Counter()
    for n in NGRAMS:
        out.update(padded[i : i + n] for i in range(len(padded) - n + 1))
    return out


class NgramEmbedder:
    backend = "char-ngram"
    model = "char-ngram"

    def __init__(self, dim: int = DIM):
        self.dim = dim
        self._buckets: dict[str, tuple[int, float]] = {}

    @property
    def fingerprint(self) -> str:
        return f"char{min(NGRAMS)}-{max(NGRAMS)}/crc32-signed/sublinear/d{self.dim}/v1"

    def _bucket(self, gram: str) -> tuple[int, float]:
        hit = self._buckets.get(gram)
        if hit is None:
            h = zlib.crc32(gram.encode("utf-8"))
            hit = (h % self.dim, 1.0 if (h // self.dim) & 1 else -1.0)
            if len(self._buckets) < 1_000_000:
                self._buckets[gram] = hit
        return hit

    def embed(self, texts: Sequence[str], kind: str = "query") -> "np.ndarray":
        import numpy as np

        from . import model_input

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(model_input(texts)):
            vec = out[row]
            for gram, count in grams(text).items():
                col, sign = self._bucket(gram)
                vec[col] += sign * (1.0 + math.log(count))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
