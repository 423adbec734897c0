"""Fit hybrid and keyword relevance (recall.HYBRID_FIT, recall.KEYWORD_FIT) on the dev data (docs/RECALL.md).

    python bench/fit_relevance.py [--data ../shared/data] [--embedder e5-small-q4] [--pairs 1000]
        [--questions 1000] [--rows ROWS.json ...] [--sets locomo,jsts,stsb,jsquad] [--collect-only] [--json OUT]
        [--form base|length|...|chunk-cjk] [--weights shipped|prior|flat|hiragana] [--split] [--shipped]
        [--chunk-rows CHUNKS.json ...] [--fit-chunks] [--length-bound 2] [--chunk-reference N]
        [--chunk-coverage presence|facts]

Signals come from memctl itself (recall.answer, floor 0, windows off, in-process), per
(query, candidate) pair, from the four dev sets under --data (read there, never copied):

- LoCoMo dev: questions of categories 1-4 against the turns of their conversation (evidence relevant);
- JSTS train / STS-B train: pairs scored >= 4 relevant, <= 2 not; the first sentence asked, the
  second stored as a fact among the other sampled second sentences (--pairs of each);
- JSQuAD dev: the paragraphs stored one per fact, --questions questions asked (their paragraph relevant).

Each set gives a balanced sample (every positive, as many negatives, seed 0), and every set weighs
the same. Two logistic regressions (Newton's method) are fitted on the union:

    hybrid  : relevant ~ 1, keyword, logit(vector), cjk, cjk x keyword, cjk x logit(vector)
    keyword : relevant ~ 1, keyword, cjk, cjk x keyword

where keyword is the coverage (rindex.coverage), logit(vector) = slope x (cosine - centre) of the
model's cosine calibration and cjk = 1 for a query with kana/kanji. It prints the coefficients that
recall.py ships, then precision and recall (balanced) at floors 0.25-0.50 for every set and mode, and
the share of questions with a relevant candidate at or above the floor; then R@1, R@5, R@10 per set for
BM25, keyword, vector, the mean shipped before and the fitted hybrid. Nothing is tuned per question.
`--rows` caches the signals (a JSON file outside the repository) so a refit skips the embedding.

Document chunks (issue 27): `--chunk-rows` reads the rows bench/bench_docs.py --rows wrote (sets
`chunks<size>`: the questions of the JSQuAD articles against their chunks; `probe<size>`: questions of
articles that are not indexed, so every candidate is irrelevant) and reports them as that bench counts
(R@1, R@5, answered by nothing; for a probe, the share answered by anything). `--fit-chunks` fits on
them too: with the base form, as more sets; with a chunk form (FORMS: `chunk`, `chunk-cjk`, ...), only
the chunk terms, on the chunk sets and their probes, the facts' coefficients fixed. In hybrid mode a chunk asked in kana/kanji is measured by
rindex.chunk_coverages (`--chunk-coverage presence`, as recall does; `facts`: the facts' coverage, as
before). With `--split` the
chunk sets are split by article: fitted on the even-numbered articles' questions, reported on the odd.
docs/SOURCES.md ("Measured") has what was tried.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
FLOORS = [0.25, 0.30, 0.35, 0.40, 0.45, 0.50]


def new_store(root: Path, spec: str):
    from calibrate_recall import embedding_table
    from memctl.store import init_store, open_store

    init_store(root, git=False)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(embedding_table(spec) + "\n[recall]\nwindows = false\n")
    return open_store(root)


TOKENS: dict[str, list[str]] = {}  # item key -> its indexed tokens, of the store hits_of last read


def hits_of(store, queries: list[str], source: str) -> list[list]:
    from memctl import recall, rindex

    with rindex.opened(store) as conn:
        _, results = recall.answer(store, conn, queries, k=10_000, source=source, mode="hybrid", min_score=0.0)
        TOKENS.clear()
        TOKENS.update((key, text.split()) for key, text in
                      conn.execute("SELECT d.key, f.tokens FROM fts f JOIN docs d ON d.id = f.rowid"))
    return results


def row(query: str, hit, relevant: bool, qid: str) -> list:
    """(cosine or None, keyword coverage, relevant, question id, 1 for a query with kana/kanji, BM25 or None,
    the item's length in tokens, how often it holds each query term): the last two let coverage()
    recompute the keyword signal under another term weight without embedding again."""
    from memctl import recall, rindex, textnorm

    terms = list(dict.fromkeys(rindex.search_tokens(query)))
    tokens = TOKENS.get(hit.item.key, [])
    return [hit.cosine, hit.keyword, int(relevant), qid, int(textnorm.has_cjk(query)), hit.bm25, len(tokens),
            rindex.term_counts(tokens, terms), terms]


def store_facts(store, texts: list[str]) -> None:
    """One fact file per text, named d00000..., written directly and indexed once (as bench/bench_recall.py
    does: hundreds of `remember` calls would take too long)."""
    from memctl import fact as fact_mod
    from memctl import facts

    for n, text in enumerate(texts):
        name = f"d{n:05d}"
        fact = fact_mod.Fact(stem=name, front={"name": name, "description": " ".join(text.split()),
                                               "metadata": {"type": "reference"}},
                             body="", path=store.memory_dir / f"{name}.md")
        fact.path.write_text(fact_mod.render(fact), encoding="utf-8")
    facts.reindex(store, commit_changes=False)


def locomo_rows(path: Path, spec: str, tmp: Path) -> list[list]:
    import locomo
    from memctl import episodes, ledger

    rows = []
    for i, raw in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        conv = locomo.build_conversation(i, raw, {})
        store = new_store(tmp / f"locomo-{conv.sample_id}", spec)
        episodes.ensure_ledger(store, commit_changes=False)
        ledger.append(store, episodes.LEDGER, conv.records, commit_changes=False)
        for q, hits in zip(conv.questions, hits_of(store, [q.text for q in conv.questions], "episodes")):
            rows += [row(q.text, h, conv.refs[h.item.key] in q.evidence, q.qid) for h in hits]
        print(f"  locomo {conv.sample_id}: {len(conv.questions)} questions", file=sys.stderr, flush=True)
    return rows


def pair_rows(pairs: list[tuple[str, str, int]], name: str, spec: str, tmp: Path, count: int) -> list[list]:
    rng = random.Random(0)
    pos = [p for p in pairs if p[2]]
    neg = [p for p in pairs if not p[2]]
    chosen = rng.sample(pos, min(count // 2, len(pos))) + rng.sample(neg, min(count // 2, len(neg)))
    store = new_store(tmp / name, spec)
    store_facts(store, [second for _, second, _ in chosen])
    rows = []
    for n, ((first, _, label), hits) in enumerate(zip(chosen, hits_of(store, [f for f, _, _ in chosen], "facts"))):
        rows += [row(first, h, h.item.key == f"d{n:05d}" and label, f"{name}{n}") for h in hits]
    print(f"  {name}: {len(chosen)} pairs", file=sys.stderr, flush=True)
    return rows


def jsts_pairs(path: Path) -> list[tuple[str, str, int]]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if float(r["label"]) >= 4.0 or float(r["label"]) <= 2.0:
            pairs.append((r["sentence1"], r["sentence2"], int(float(r["label"]) >= 4.0)))
    return pairs


def stsb_pairs(path: Path) -> list[tuple[str, str, int]]:
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for cols in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(cols) >= 7 and (float(cols[4]) >= 4.0 or float(cols[4]) <= 2.0):
                pairs.append((cols[5], cols[6], int(float(cols[4]) >= 4.0)))
    return pairs


def jsquad_items(path: Path) -> tuple[list[str], list[tuple[str, int]]]:
    """The paragraphs (title prefix and [SEP] kept as the text), and (question, its paragraph)."""
    paragraphs, questions = [], []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for p in article["paragraphs"]:
            paragraphs.append(p["context"].replace(" [SEP] ", ": ", 1))
            questions += [(qa["question"], len(paragraphs) - 1) for qa in p["qas"]]
    return paragraphs, questions


def jsquad_rows(path: Path, spec: str, tmp: Path, count: int) -> list[list]:
    paragraphs, questions = jsquad_items(path)
    asked = random.Random(0).sample(questions, min(count, len(questions)))
    store = new_store(tmp / "jsquad", spec)
    store_facts(store, paragraphs)
    rows = []
    for n, ((q, p), hits) in enumerate(zip(asked, hits_of(store, [q for q, _ in asked], "facts"))):
        rows += [row(q, h, h.item.key == f"d{p:05d}", f"jsquad{n}") for h in hits]
    print(f"  jsquad: {len(asked)} questions over {len(paragraphs)} paragraphs", file=sys.stderr, flush=True)
    return rows


FORMS = {  # the hybrid model's inputs beyond 1, keyword, v, cjk, cjk x keyword, cjk x v
    "base": (),
    "length": ("L", "L kw", "L v"),  # L = length_input(the item's length in tokens)
    "length-slopes": ("L kw", "L v"),  # the length changes the signals' weights only, not the prior
    "length-cjk": ("L", "L kw", "L v", "cjk L", "cjk L kw", "cjk L v"),
    # document chunks (rows of bench/bench_docs.py --rows; chunk = 1 for a chunk): the chunk's own terms,
    # fitted on the chunk sets alone with the facts' coefficients fixed (--chunk-rows, --fit-chunks)
    "chunk": ("chunk", "chunk kw", "chunk v"),
    "chunk-cjk": ("chunk cjk", "chunk cjk kw", "chunk cjk v"),
    "chunk-length": ("chunk L", "chunk L kw", "chunk L v"),
    "chunk-cjk-slopes": ("chunk cjk kw", "chunk cjk v"),
    "chunk-cjk-hybrid": ("chunk cjk", "chunk cjk kw", "chunk cjk v"),  # keyword mode without chunk terms (shipped)
}
KEYWORD_EXTRA = {"chunk": ("chunk", "chunk kw"), "chunk-cjk": ("chunk cjk", "chunk cjk kw"),
                 "chunk-length": ("chunk L", "chunk L kw"), "chunk-cjk-slopes": ("chunk cjk kw",)}  # keyword mode's terms of the same forms
LENGTH_BOUND = [2.0]  # --length-bound
CHUNK_COVERAGE = ["presence"]  # --chunk-coverage: "presence" as recall measures chunks asked in kana/kanji in hybrid mode, "facts" as before
CHUNK_REFERENCE = [None]  # --chunk-reference: the coverage's reference length for chunks (None: rindex's)
SAMPLE_TERMS = ("deploy", "db", "postgresql", "デプ", "京", "16", "のバ", "って", "です")  # the --json report shows their weights
FORM = ["base"]  # the form fitted (--form); recall.combine ships "chunk-cjk-hybrid": "base" for all but chunks asked in kana/kanji


def _hiragana_weight(term: str) -> float:
    """A hiragana-only term (particles, endings: はど, すか) weighs 0.25, the rest as rindex.term_weight."""
    from memctl import rindex

    if term and all("\u3041" <= c <= "\u309f" for c in term):
        return 0.25 if len(term) > 1 else 0.125
    return rindex.term_weight(term)


def _prior_weight(term: str) -> float:
    """The chunks' prior of the language (rindex.chunk_term_weight: question forms 0, hiragana bigrams 0.25,
    a bigram crossing from hiragana 0.5) for facts and episodes too: shipped on 2026-12-06, withdrawn the
    same day (docs/RECALL.md, "The language prior for facts: tried, withdrawn")."""
    from memctl import rindex

    return rindex.chunk_term_weight(term)


WEIGHTS = {"shipped": None, "flat": lambda t: 1.0, "hiragana": _hiragana_weight,  # coverage's term weight (--weights);
           "prior": _prior_weight}  # None: rindex.term_weight


def length_input(ntok: int) -> float:
    """L: the item's length in index tokens, log2(tokens / rindex.REFERENCE_LENGTH) within +-2."""
    from memctl import rindex

    bound = LENGTH_BOUND[0]
    return max(-bound, min(bound, math.log2(max(ntok, 1) / rindex.REFERENCE_LENGTH)))


def features(r: list, calibration: tuple[float, float], keyword_only: bool) -> list[float]:
    cjk = float(r[4])
    chunk = float(len(r) > 9 and r[9])
    values = {"L": length_input(r[6]), "kw": r[1], "cjk": cjk, "chunk": chunk}
    if keyword_only:
        extra = []
        for name in KEYWORD_EXTRA.get(FORM[0], ()):
            product = 1.0
            for part in name.split():
                product *= values[part]
            extra.append(product)
        return [1.0, r[1], cjk, cjk * r[1], *extra]
    centre, slope = calibration
    kw = values["kw"] = hybrid_coverage(r)
    v = max(-12.0, min(12.0, slope * ((r[0] if r[0] is not None else -1.0) - centre)))  # recall.LOGIT_BOUND
    values["v"] = v
    extra = []
    for name in FORMS[FORM[0]]:
        product = 1.0
        for part in name.split():
            product *= values[part]
        extra.append(product)
    return [1.0, kw, v, cjk, cjk * kw, cjk * v, *extra]


def hybrid_coverage(r: list) -> float:
    """The coverage hybrid mode measures a candidate by: a chunk asked in kana/kanji has its own
    (rindex.chunk_coverages, in r[10] once recompute_coverage ran), the rest the facts' (r[1])."""
    return r[10] if len(r) > 10 else r[1]


def recompute_coverage(sets: dict, weight) -> None:
    """Each row's keyword coverage again from its term counts and length, under `weight` (a term's weight)."""
    from memctl import rindex

    weight = weight or rindex.term_weight
    for rows in sets.values():
        for r in rows:
            weights = rindex.chunk_term_weights(r[8]) if weight is _prior_weight else {t: weight(t) for t in r[8]}
            if len(r) > 9 and r[9] and CHUNK_REFERENCE[0] is not None:
                reference, rindex.REFERENCE_LENGTH = rindex.REFERENCE_LENGTH, CHUNK_REFERENCE[0] or max(r[6], 1)
                try:
                    r[1] = rindex.counted_coverage(r[7], r[6], weights)
                finally:
                    rindex.REFERENCE_LENGTH = reference
            else:
                r[1] = rindex.counted_coverage(r[7], r[6], weights)
            del r[10:]
            if len(r) > 9 and r[9] and r[4] and CHUNK_COVERAGE[0] == "presence":  # rindex.chunk_coverages
                chunk_weights = rindex.chunk_term_weights(r[8])
                whole = sum(chunk_weights.values())
                r.append(sum(chunk_weights[t] for t in r[7]) / whole if whole else 0.0)


def logistic(x, y, w, l2: float = 1e-3, offset=0.0):
    """Weighted logistic regression by Newton's method (a small ridge keeps it finite); `offset`: a fixed
    part of each row's logit."""
    import numpy as np

    beta = np.zeros(x.shape[1])
    for _ in range(200):
        p = 1 / (1 + np.exp(-(x @ beta + offset)))
        g = x.T @ (w * (p - y)) + l2 * beta
        h = (x * (w * p * (1 - p))[:, None]).T @ x + l2 * np.eye(x.shape[1])
        step = np.linalg.solve(h, g)
        step *= min(1.0, 2.0 / max(np.abs(step).max(), 1e-300))  # a damped step: far from the optimum Newton can overshoot
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return beta


def balanced(rows: list, seed: int = 0) -> list:
    pos = [r for r in rows if r[2]]
    neg = [r for r in rows if not r[2]]
    return pos + random.Random(seed).sample(neg, min(len(neg), len(pos)))


def relevance(r: list, mode: str, fitted: dict, calibration) -> float:
    """A candidate's relevance in `mode` (bm25: raw BM25, for ordering only)."""
    from memctl import recall

    if mode == "bm25":
        return r[5] if r[5] is not None else -1.0
    if mode == "vector":
        return recall.calibrated(r[0], calibration) if r[0] is not None else 0.0
    if mode == "mean":  # the rule shipped before the fit: keyword share 0.5, 0.2 for kana/kanji
        share = 0.2 if r[4] else 0.5
        return share * r[1] + (1 - share) * relevance(r, "vector", fitted, calibration)
    if mode == "keyword" and r[1] <= 0:
        return 0.0
    f = features(r, calibration, mode == "keyword")
    return 1 / (1 + math.exp(-sum(b * v for b, v in zip(fitted[mode], f))))


def ranking(sets: dict, fitted: dict, calibration, floor: float | None) -> dict:
    """R@1, R@5, R@10 per set and mode over the questions that have a relevant candidate: a question is
    found at k when all its relevant candidates are in its top k (ranked by relevance), at floor 0 and at
    the floor; and the share of questions with no candidate at or above the floor."""
    from memctl import recall

    floor = recall.DEFAULT_MIN_SCORE if floor is None else floor
    report: dict = {}
    print(f"\n{'set':>7} {'mode':>8} {'R@1':>6} {'R@5':>6} {'R@10':>6} | at floor {floor:.2f}: {'R@1':>6} {'R@5':>6} {'R@10':>6} {'none':>6}")
    for name, rows in sets.items():
        by_q: dict[str, list] = {}
        for r in rows:
            by_q.setdefault(r[3], []).append(r)
        for mode in ("bm25", "keyword", "vector", "mean", "hybrid"):
            found = {(f, k): 0 for f in (0.0, floor) for k in (1, 5, 10)}
            scored = none = 0
            for rs in by_q.values():
                rel = [(relevance(r, mode, fitted, calibration), r[2]) for r in rs]
                if mode == "bm25":
                    rel = [(v, y) for v, y in rel if v > -1.0]
                if mode != "bm25" and not any(v >= floor and v > 0 for v, _ in rel):
                    none += 1
                wanted = sum(y for _, y in rel)
                if not any(r[2] for r in rs):
                    continue
                scored += 1
                order = [y for _, y in sorted(rel, key=lambda p: -p[0])]
                passing = sorted([p for p in rel if p[0] >= floor and p[0] > 0], key=lambda p: -p[0])
                for k in (1, 5, 10):
                    found[(0.0, k)] += wanted > 0 and sum(order[:k]) == wanted
                    found[(floor, k)] += wanted > 0 and sum(y for _, y in passing[:k]) == wanted
            share = {key: value / scored for key, value in found.items()}
            report.setdefault(name, {})[mode] = {"questions": scored, "none_at_floor": none / len(by_q),
                                                 **{f"r@{k}" + ("" if f == 0 else "_floor"): share[(f, k)] for f, k in share}}
            at = " ".join(f"{share[(floor, k)]:>6.3f}" for k in (1, 5, 10)) if mode != "bm25" else " " * 20
            print(f"{name:>7} {mode:>8} " + " ".join(f"{share[(0.0, k)]:>6.3f}" for k in (1, 5, 10))
                  + f" | {'':>14}{at} {none / len(by_q) if mode != 'bm25' else float('nan'):>6.3f}")
    return report


def is_chunks(name: str) -> bool:
    """A set of document chunks (bench/bench_docs.py --rows): `chunks<size>`, or `probe<size>` (questions of
    documents that are not indexed: every candidate irrelevant)."""
    return name.startswith(("chunks", "probe"))


def chunk_report(sets: dict, fitted: dict, calibration, floor: float | None) -> dict:
    """Per chunk set and mode, as bench/bench_docs.py counts: R@1 and R@5 (a right chunk first, or among the
    first five, of those at or above the floor; BM25 without a floor) and the share of questions answered by
    nothing; for a probe set, the share answered by anything (should be 0)."""
    from memctl import recall

    floor = recall.DEFAULT_MIN_SCORE if floor is None else floor
    report: dict = {}
    for name, rows in sets.items():
        if not is_chunks(name):
            continue
        by_q: dict[str, list] = {}
        for r in rows:
            by_q.setdefault(r[3], []).append(r)
        for mode in ("bm25", "keyword", "vector", "hybrid"):
            r1 = r5 = none = 0
            for rs in by_q.values():
                rel = [(relevance(r, mode, fitted, calibration), r[2], hybrid_coverage(r) if mode == "hybrid" else r[1],
                        r[0] or 0.0) for r in rs]
                passing = [p for p in rel if (p[0] > -1.0 if mode == "bm25" else p[0] >= floor and p[0] > 0)]
                passing.sort(key=lambda p: (-p[0], -p[2], -p[3]))
                none += not passing
                r1 += bool(passing) and bool(passing[0][1])
                r5 += any(p[1] for p in passing[:5])
            n = len(by_q)
            report.setdefault(name, {})[mode] = {"questions": n, "r@1": r1 / n, "r@5": r5 / n, "nothing": none / n}
            if name.startswith("probe"):
                print(f"{name:>9} {mode:>8} answered (should be nothing) {1 - none / n:.3f} of {n}")
            else:
                print(f"{name:>9} {mode:>8} R@1 {r1 / n:.3f} R@5 {r5 / n:.3f} nothing {none / n:.3f} of {n}")
    return report


HARD = [0]  # --hard K: the chunk terms are fitted on each question's K best irrelevant candidates


def hardest(rows: list, calibration, keyword_only: bool, beta, k: int) -> list:
    """Each question's relevant candidates and its `k` best irrelevant ones by the facts' model (`beta`):
    the candidates the floor meets, not a random sample of them."""
    by_q: dict[str, list] = {}
    for r in rows:
        by_q.setdefault(r[3], []).append(r)
    kept = []
    for rs in by_q.values():
        kept += [r for r in rs if r[2]]
        wrong = [r for r in rs if not r[2]]
        wrong.sort(key=lambda r: -sum(b * v for b, v in zip(beta, features(r, calibration, keyword_only))))
        kept += wrong[:k]
    return kept


def stacked(sets: list[list], calibration, keyword_only: bool):
    """Features, labels and weights of each set's balanced sample, every set weighing the same."""
    import numpy as np

    x, y, w = [], [], []
    for rows in sets:
        sample = balanced(rows)
        x += [features(r, calibration, keyword_only) for r in sample]
        y += [r[2] for r in sample]
        w += [1.0 / len(sample)] * len(sample)
    return np.array(x), np.array(y, dtype=float), np.array(w) * len(w) / len(sets)


def fit_all(fit_sets: dict, calibration, fit_chunks: bool) -> dict:
    """The hybrid and keyword coefficients: the base form on the fact sets (each weighing the same, with the
    chunk sets as more sets when `fit_chunks` and the form has no chunk terms); a chunk form's own terms then
    on the chunk sets alone, the facts' coefficients fixed (so facts score exactly as before). A chunk set
    `chunks<size>` is fitted with its probe `probe<size>` (questions whose documents are not indexed: no
    relevant candidate, as half of JSTS's and STS-B's queries have none)."""
    import numpy as np

    fitted = {}
    chunk_form = any(name.startswith("chunk") for name in FORMS[FORM[0]])
    for mode in ("hybrid", "keyword"):
        keyword_only = mode == "keyword"
        base_sets = [rows for name, rows in fit_sets.items()
                     if not is_chunks(name) or (fit_chunks and not chunk_form and name.startswith("chunks"))]
        x, y, w = stacked(base_sets, calibration, keyword_only)
        width = 4 if keyword_only else 6
        if not chunk_form:
            width = x.shape[1]
        beta = logistic(x[:, :width], y, w)
        if chunk_form and x.shape[1] > width:
            extra = np.zeros(x.shape[1] - width)
            chunk_sets = [rows + fit_sets.get("probe" + name[len("chunks"):], []) for name, rows in fit_sets.items()
                          if name.startswith("chunks")] if fit_chunks else []  # a size's questions and its probe's
            if chunk_sets:
                if HARD[0]:
                    chunk_sets = [hardest(rows, calibration, keyword_only, beta, HARD[0]) for rows in chunk_sets]
                xc, yc, wc = stacked(chunk_sets, calibration, keyword_only)
                extra = logistic(xc[:, width:], yc, wc, offset=xc[:, :width] @ beta)
            beta = np.concatenate([beta, extra])
        fitted[mode] = [round(float(b), 3) for b in beta]
        print(f"{mode} fit: {fitted[mode]}")
    return fitted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--embedder", default="e5-small-q4")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--rows", type=Path, action="append",
                        help="signals cache: read if every one given exists, else the first is written")
    parser.add_argument("--sets", default="locomo,jsts,stsb,jsquad", help="the sets to collect (comma-separated)")
    parser.add_argument("--collect-only", action="store_true", help="write the --rows cache and stop")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--floor", type=float, help="the floor for the ranking table (default: recall.DEFAULT_MIN_SCORE)")
    parser.add_argument("--form", default="base", choices=sorted(FORMS), help="the hybrid model's inputs (FORMS)")
    parser.add_argument("--weights", default="shipped", choices=sorted(WEIGHTS), help="coverage's term weight")
    parser.add_argument("--split", action="store_true", help="fit on half of each set's questions, report on the other")
    parser.add_argument("--chunk-rows", type=Path, action="append",
                        help="chunk sets written by bench/bench_docs.py --rows (reported; fitted with --fit-chunks)")
    parser.add_argument("--fit-chunks", action="store_true", help="fit on the chunk sets too (a chunk form: its terms)")
    parser.add_argument("--hard", type=int, default=0, help="fit chunk terms on each question's K best irrelevant candidates")
    parser.add_argument("--length-bound", type=float, default=2.0, help="L is log2(tokens / 32) within +- this")
    parser.add_argument("--chunk-coverage", default="presence", choices=("presence", "facts"),
                        help="hybrid coverage of a chunk asked in kana/kanji: rindex.chunk_coverages (shipped) or the facts'")
    parser.add_argument("--shipped", action="store_true",
                        help="no fit: report recall's coefficients as shipped (HYBRID_FIT, with CHUNK_FIT for a chunk form; KEYWORD_FIT)")
    parser.add_argument("--chunk-reference", type=int, default=None,
                        help="the coverage's reference length for chunks in tokens (0: the chunk's own length)")
    args = parser.parse_args()
    LENGTH_BOUND[0] = args.length_bound
    HARD[0] = args.hard
    CHUNK_REFERENCE[0] = args.chunk_reference
    CHUNK_COVERAGE[0] = args.chunk_coverage
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["MEMCTL_NO_COMMIT"] = "1"
    import numpy as np

    from memctl import recall

    if args.rows and all(path.exists() for path in args.rows):
        sets = {}
        for path in args.rows:  # several files: the sets collected by separate runs (--sets), merged
            sets.update(json.loads(path.read_text(encoding="utf-8")))
    else:
        readers = {
            "locomo": lambda t: locomo_rows(args.data / "locomo-dev" / "locomo-dev.json", args.embedder, t),
            "jsts": lambda t: pair_rows(jsts_pairs(args.data / "jsts-train" / "train-v1.3.json"), "jsts", args.embedder, t,
                                        args.pairs),
            "stsb": lambda t: pair_rows(stsb_pairs(args.data / "stsb-train" / "sts-train.csv"), "stsb", args.embedder, t,
                                        args.pairs),
            "jsquad": lambda t: jsquad_rows(args.data / "jsquad-dev" / "jsquad-valid-first30.json", args.embedder, t,
                                            args.questions),
        }
        with tempfile.TemporaryDirectory(prefix="memctl-fit-") as tmp:
            sets = {name: readers[name](Path(tmp)) for name in args.sets.split(",")}
        if args.rows:
            args.rows[0].write_text(json.dumps(sets), encoding="utf-8")
        if args.collect_only:
            return 0
    for path in args.chunk_rows or []:
        for name, rows in json.loads(path.read_text(encoding="utf-8")).items():
            sets.setdefault(name, []).extend([*r[:9], 1] for r in rows)  # chunk = 1; two probes of a size merge
    calibration = recall.VECTOR_CALIBRATION[args.embedder] if args.embedder in recall.VECTOR_CALIBRATION else (0.0, 1.0)
    FORM[0] = args.form
    recompute_coverage(sets, WEIGHTS[args.weights])
    fit_sets = sets
    if args.split:  # fit on one half of each set's questions, report on the other
        import zlib

        def fitted_on(name: str, qid: str) -> bool:  # chunks: the questions of the even-numbered articles
            return int(qid[1:3]) % 2 == 0 if is_chunks(name) else zlib.crc32(qid.encode()) % 2 == 0

        fit_sets = {name: [r for r in rows if fitted_on(name, r[3])] for name, rows in sets.items()}
        sets = {name: [r for r in rows if not fitted_on(name, r[3])] for name, rows in sets.items()}
        print("fitted on one half of each set's questions (chunks: of the even-numbered articles); the tables are the other half")
    if args.shipped:  # e.g. a new term weight measured under the coefficients it ships with
        chunk_form = any(name.startswith("chunk") for name in FORMS[FORM[0]])
        fitted = {"hybrid": list(recall.HYBRID_FIT + (recall.CHUNK_FIT if chunk_form else ())),
                  "keyword": list(recall.KEYWORD_FIT)}
        print(f"shipped coefficients, not refitted: {fitted}")
    else:
        fitted = fit_all(fit_sets, calibration, args.fit_chunks)
    from memctl import rindex

    report = {"fit": fitted, "form": FORM[0], "split": args.split, "embedder": args.embedder,
              "term_weights": {t: (WEIGHTS[args.weights] or rindex.term_weight)(t) for t in SAMPLE_TERMS},
              "floor": recall.DEFAULT_MIN_SCORE if args.floor is None else args.floor, "floors": {}}
    print(f"\n{'set':>7} {'mode':>8} {'floor':>6} {'P bal':>6} {'R':>6} {'q hit':>6} {'q none':>7}")
    for name, rows in sets.items():
        if is_chunks(name):
            continue
        sample = balanced(rows)
        y = np.array([r[2] for r in sample], dtype=bool)
        qids = sorted({r[3] for r in rows})
        index = {q: i for i, q in enumerate(qids)}
        q_of = np.array([index[r[3]] for r in rows])
        y_all = np.array([r[2] for r in rows], dtype=bool)
        for mode in ("keyword", "vector", "hybrid"):
            rel_sample = np.array([relevance(r, mode, fitted, calibration) for r in sample])
            rel_all = np.array([relevance(r, mode, fitted, calibration) for r in rows])
            for floor in FLOORS:
                tp = int(np.sum(y & (rel_sample >= floor)))
                fp = int(np.sum(~y & (rel_sample >= floor)))
                passing = (rel_all >= floor) & (rel_all > 0)
                hit = len(set(q_of[passing & y_all])) / len(qids)
                none = 1 - len(set(q_of[passing])) / len(qids)
                p = tp / (tp + fp) if tp + fp else float("nan")
                report["floors"].setdefault(name, []).append(
                    {"mode": mode, "floor": floor, "precision": p, "recall": tp / y.sum(), "questions_hit": hit,
                     "questions_none": none})
                print(f"{name:>7} {mode:>8} {floor:>6.2f} {p:>6.3f} {tp / y.sum():>6.3f} {hit:>6.3f} {none:>7.3f}", flush=True)
    report["ranking"] = ranking({n: rows for n, rows in sets.items() if not is_chunks(n)}, fitted, calibration, args.floor)
    if any(is_chunks(n) for n in sets):
        print()
        report["chunks"] = chunk_report(sets, fitted, calibration, args.floor)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
