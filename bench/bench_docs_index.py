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
5. peak memory (ru_maxrss);
6. with --served RUNS: `memctl recall Q --source docs` as a command, answered by a running
   `memctl embed-server` (its model loaded, the chunk vectors in its memory), and the same in
   keyword mode, each timed RUNS times interleaved with `python -c pass` (medians, ratios), and
   the server's memory (VmRSS, VmHWM).
The load average is printed with every figure. --keep DIR builds in DIR and leaves it; given a
DIR that holds a built store, only step 6 runs again on it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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
SYLLABLES = ("ka ri to ne mo su pa la ve di ro shi ku ma an el or in "
             "カ リ ト ネ モ ス パ ラ ベ ディ ロ シ ク マ ン エ オ イ").split()


def vocabulary(size: int = 20_000) -> list[str]:
    """Made-up words of two to four syllables, Latin and katakana: a vocabulary as wide as real notes',
    drawn Zipf-like (note()), so that a query word matches some of the chunks, not nearly all of them."""
    rng = random.Random(1)
    latin, kana = SYLLABLES[:18], SYLLABLES[18:]
    words = set()
    while len(words) < size:
        pool = latin if len(words) % 2 else kana
        words.add("".join(rng.choice(pool) for _ in range(rng.randint(2, 4))))
    ranked = sorted(words)
    rng.shuffle(ranked)  # the most frequent words of either script
    return ranked


VOCABULARY = vocabulary()
RANKS = [1 / (rank + 1) for rank in range(len(VOCABULARY))]


def note(i: int, rng: random.Random) -> str:
    """A heading and two paragraphs of 28 words: one word in ten from WORDS, the rest from VOCABULARY."""
    def paragraph() -> str:
        rare = iter(rng.choices(VOCABULARY, weights=RANKS, k=28))
        return " ".join(rng.choice(WORDS) if rng.random() < 0.1 else next(rare) for _ in range(28)) + "."
    return f"# Note {i}\n\n{paragraph()}\n\n{paragraph()}\n"


def query(rng: random.Random) -> str:
    """One word of WORDS and two of the middle of VOCABULARY's ranks."""
    return " ".join([rng.choice(WORDS), *rng.choices(VOCABULARY[100:2000], k=2)])


def japanese(path: Path) -> tuple:
    """(note, query) drawing on JSQuAD (read where it lies, never copied): a note is a heading and two
    paragraphs of three to five of its sentences drawn at random, a query one of its questions; real
    Japanese, whose particles and endings occur in most chunks (docs/SOURCES.md "At 100,000 chunks")."""
    import json

    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    sentences, questions = [], []
    for article in data:
        for paragraph in article["paragraphs"]:
            sentences += [s + "。" for s in paragraph["context"].split("。") if len(s) > 8 and "[SEP]" not in s]
            questions += [qa["question"] for qa in paragraph["qas"]]

    def ja_note(i: int, rng: random.Random) -> str:
        def paragraph() -> str:
            return "".join(rng.choices(sentences, k=rng.randint(3, 5)))
        return f"# ノート {i}\n\n{paragraph()}\n\n{paragraph()}\n"

    return ja_note, lambda rng: rng.choice(questions)


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--embedder", default="e5-small-q4", choices=("e5-small-q4", "test-model", "char-ngram", "none"))
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--served", type=int, default=0, metavar="RUNS",
                        help="also time recall --source docs as a command answered by an embed-server")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR", help="build in DIR and keep it")
    parser.add_argument("--japanese", type=Path, default=None, metavar="JSQUAD_JSON",
                        help="notes of JSQuAD's sentences and its questions as queries (japanese())")
    parser.add_argument("--stand-in-vectors", action="store_true",
                        help="fill the chunks' vector cache with random unit vectors under the model's own identity "
                             "(its encode rate is still measured on a sample): for the latency of recall at a scale "
                             "the model would take hours to embed; the rankings are then meaningless")
    args = parser.parse_args()
    if args.keep is not None and (args.keep / "store" / "memctl.toml").exists():
        asked = json.loads((args.keep / "queries.json").read_text(encoding="utf-8"))
        return served(args.keep / "store", args.served or 10, asked)
    make_note, make_query = japanese(args.japanese) if args.japanese else (note, query)
    from bench_docs import embedding_table

    from memctl import docindex, recall, rindex, sources, vcache
    from memctl.store import init_store, open_store

    rng = random.Random(0)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    asked = [make_query(random.Random(2 + i)) for i in range(args.queries)]
    if args.keep is not None:
        (args.keep / "queries.json").write_text(json.dumps(asked, ensure_ascii=False), encoding="utf-8")
    with contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "notes"
        folder.mkdir()
        for i in range(args.files):
            (folder / f"n{i:05d}.md").write_text(make_note(i, rng), encoding="utf-8")
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
            sample = texts[:64 if args.stand_in_vectors else 256]
            started = time.perf_counter()
            embedder.embed(sample, kind="passage")
            own = len(sample) / (time.perf_counter() - started)
            started = time.perf_counter()
            if args.stand_in_vectors:
                with docindex.reading(store) as conn:
                    done = len(recall.kind_vectors(store, conn, StandIn(embedder), "chunk")[0])
                print("the vectors below are random stand-ins under the model's identity: latency only")
            else:
                done = docindex.embed_chunks(store)
            spent = time.perf_counter() - started
            if args.stand_in_vectors:
                print(f"stand-in vectors for {done} chunks in {spent:.1f} s; the model's own encode rate on "
                      f"{len(sample)} of them: {own:.1f} chunks/s, so {done / own / 3600:.1f} h for all; {load()}")
            else:
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
            queries = asked
            recall.recall(store, queries[:1], source="docs", log=False)  # warm: vectors mapped, model loaded
            times = []
            for q in queries:
                started = time.perf_counter()
                recall.recall(store, [q], source="docs", log=False)
                times.append((time.perf_counter() - started) * 1000)
            print(f"warm recall --source docs over {len(texts)} chunks (in-process, hybrid): median "
                  f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms over {len(times)} queries; {load()}")
        print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        if args.served and embedder is not None:
            served(root, args.served, asked)
    return 0


class StandIn:
    """An embedder with `model`'s identity (backend, model, fingerprint) whose vectors are random unit
    vectors of the model's size: the cache it fills is the one recall reads for that model."""

    def __init__(self, model) -> None:
        import numpy as np

        self.backend, self.model, self.fingerprint = model.backend, model.model, model.fingerprint
        self.size = model.embed(["size"], kind="passage").shape[1]
        self.rng = np.random.default_rng(3)

    def embed(self, texts, kind: str = "query"):
        import numpy as np

        vectors = self.rng.standard_normal((len(texts), self.size)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def served(root: Path, runs: int, asked: list[str]) -> int:
    """Step 6: the command, answered by a running embed-server, beside python -c pass."""
    import subprocess

    from bench_recall import start_server

    def time_once(argv: list[str]) -> float:
        started = time.perf_counter()
        proc = subprocess.run(argv, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        took = (time.perf_counter() - started) * 1000
        if proc.returncode not in (0, 1):  # 1: nothing relevant, an answer too
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr.decode(errors='replace')}")
        return took

    env = dict(os.environ, MEMCTL_NO_COMMIT="1", HF_HUB_OFFLINE="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte-compiled, as an installed memctl is
    env["PYTHONPYCACHEPREFIX"] = str(root.parent / "pycache")
    memctl = [sys.executable, "-m", "memctl", "--root", str(root)]
    proc = start_server(memctl, env, root)
    try:
        started = time.perf_counter()
        warm = subprocess.run([*memctl, "recall", asked[0], "--source", "docs", "--no-log", "--json"], env=env,
                              capture_output=True, text=True)
        print(f"embed-server: first docs recall (loads the chunk vectors) {time.perf_counter() - started:.1f} s, "
              f"exit {warm.returncode}; {load()}")
        rows = {"python -c pass": lambda q: [sys.executable, "-c", "pass"],
                "memctl recall --source docs (hybrid, embed-server)": lambda q: [*memctl, "recall", q, "--source", "docs", "--no-log"],
                "memctl recall --source docs --mode keyword": lambda q: [*memctl, "recall", q, "--source", "docs", "--mode", "keyword", "--no-log"]}
        times: dict[str, list[float]] = {name: [] for name in rows}
        print(f"timing {runs} runs of each, interleaved; {load()}")
        for i in range(runs):
            for name, argv in rows.items():
                times[name].append(time_once(argv(asked[i % len(asked)])))
        base = statistics.median(times["python -c pass"])
        for name, took in times.items():
            print(f"  {name}: median {statistics.median(took):.1f} ms, min {min(took):.1f} ms "
                  f"({statistics.median(took) / base:.2f} x python -c pass)")
        status = Path(f"/proc/{proc.pid}/status")
        if status.exists():
            memory = {k: v.strip() for k, v in (line.split(":", 1) for line in status.read_text().splitlines())
                      if k in ("VmRSS", "VmHWM")}
            print(f"  embed-server memory: {memory}; {load()}")
    finally:
        subprocess.run([*memctl, "embed-server", "--stop"], env=env, capture_output=True)
        proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
