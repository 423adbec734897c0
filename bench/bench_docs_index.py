"""Index runs at scale (docs/SOURCES.md "Measured"): cold, unchanged, one file edited.

    python bench/bench_docs_index.py [--files 10000] [--embedder e5-small-q4|test-model|none] [--queries 20]

Writes FILES small markdown notes (generated here: a heading, two paragraphs of
mixed Japanese and English words, deterministic) into a temporary folder,
declares them as one source of a temporary store and runs `docindex.index` as
`memctl source index` does:

1. cold: chunking (seconds) and embedding (chunks a second), beside the model's
   own encode rate on the same chunk texts (embedder.embed on a sample, no cache);
2. nothing changed: the run's seconds (one stat per file, nothing read);
3. one file edited: the files re-read and the chunks that need a vector (what
   the embedding cache lacks: vcache.missing), against all chunks;
4. warm `recall --source docs` (in-process, hybrid, the model loaded), median ms;
5. peak memory (ru_maxrss).
The load average is printed with every figure.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

WORDS = ("deploy release backup canary rollback pager schedule freeze snapshot volume service review "
         "デプロイ リリース 障害 監視 会議室 予約 手順 設定 権限 担当 確認 作業").split()


def note(i: int, rng: random.Random) -> str:
    def paragraph() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(28)) + "."
    return f"# Note {i}\n\n{paragraph()}\n\n{paragraph()}\n"


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--embedder", default="e5-small-q4", choices=("e5-small-q4", "test-model", "char-ngram", "none"))
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    from bench_docs import embedding_table

    from memctl import docindex, recall, rindex, sources, vcache
    from memctl.store import init_store, open_store

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "notes"
        folder.mkdir()
        for i in range(args.files):
            (folder / f"n{i:05d}.md").write_text(note(i, rng), encoding="utf-8")
        root = Path(tmp) / "store"
        init_store(root, git=False)
        with open(root / "memctl.toml", "a", encoding="utf-8") as handle:  # char-ngram: no model, the real cache
            handle.write(embedding_table(args.embedder) if args.embedder != "char-ngram" else '\n[embedding]\nbackend = "char-ngram"\n')
        store = open_store(root)
        sources.add(store, sources.Source("notes", (str(folder / "*.md"),), description="notes"), commit_changes=False)
        store = open_store(root)
        sources.MAX_FILES = max(sources.MAX_FILES, args.files)

        started = time.perf_counter()
        (cold,) = docindex.index(store, embed=False)
        chunked = time.perf_counter() - started
        print(f"{args.files} files -> {cold.chunks} chunks: chunked in {chunked:.1f} s "
              f"({cold.chunks / chunked:.0f} chunks/s); {load()}")
        embedder = recall.embedder_for(store) if args.embedder != "none" else None
        with docindex.reading(store) as conn:
            texts = [t for _, _, t in rindex.vector_texts(conn, "chunk")]
        if embedder is not None:
            sample = texts[:256]
            started = time.perf_counter()
            embedder.embed(sample, kind="passage")
            own = len(sample) / (time.perf_counter() - started)
            started = time.perf_counter()
            done = docindex.embed_chunks(store)
            spent = time.perf_counter() - started
            print(f"cold embedding: {done} chunks in {spent:.1f} s = {done / spent:.0f} chunks/s; "
                  f"the model's own encode rate on {len(sample)} of them: {own:.0f} chunks/s "
                  f"(ratio {done / spent / own:.2f}); {load()}")

        started = time.perf_counter()
        (same,) = docindex.index(store, embed=embedder is not None)
        print(f"nothing changed: {time.perf_counter() - started:.2f} s, {same.changed} files read again; {load()}")

        edited = folder / "n00042.md"
        edited.write_text(edited.read_text(encoding="utf-8") + "\n## Added\n\nA new paragraph about the canary.\n",
                          encoding="utf-8")
        started = time.perf_counter()
        (one,) = docindex.index(store, embed=False)
        rechunk = time.perf_counter() - started
        line = f"one file edited: {one.changed} file read again in {rechunk:.2f} s"
        if embedder is not None:
            with docindex.reading(store) as conn:
                texts = [t for _, _, t in rindex.vector_texts(conn, "chunk")]
            need = vcache.missing(store, "recall-chunks", texts, embedder, "passage")
            started = time.perf_counter()
            docindex.embed_chunks(store)
            line += (f"; {need} of {len(texts)} chunks embedded again ({need / len(texts):.5f} of them), "
                     f"embedding + cache save {time.perf_counter() - started:.2f} s")
        print(f"{line}; {load()}")

        if embedder is not None:
            queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(args.queries)]
            recall.recall(store, queries[:1], source="docs", log=False)  # warm: vectors mapped, model loaded
            times = []
            for q in queries:
                started = time.perf_counter()
                recall.recall(store, [q], source="docs", log=False)
                times.append((time.perf_counter() - started) * 1000)
            print(f"warm recall --source docs over {len(texts)} chunks (in-process, hybrid): median "
                  f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms over {len(times)} queries; {load()}")
        print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
