"""Fusion variants for conversation recall on LoCoMo, compared in-process (docs/RECALL.md "Variants").

    python bench/locomo_variants.py [PATH/TO/locomo-dev.json] --embedder test-model|e5-small-q4 [--only NAME,...] [--floor 0.35]

What bench/locomo.py measures end to end through the CLI, this script measures
for many ranking rules at once: it builds each conversation's store as
bench/locomo.py does, takes memctl's own signals for every (question, turn)
pair (keyword coverage from rindex.coverage over the index's tokens and idf;
the cosine of the embedder's query and passage vectors through
recall.calibration_for; hybrid = the weighted mean recall shipped before its fitted combination: keyword share 0.5, 0.2 for kana/kanji),
then ranks ALL turns of the conversation by each rule and prints recall@10
(every evidence turn in the top 10; categories 1-4, evidence as published),
and, for three rules whose value is a relevance, how many evidence and other
turns reach the floor.
Differences from the CLI: no candidate cut (recall scores the best 200 per
signal and the turns around them), no five-factor score (on LoCoMo's 2023
dates recency is ~0 and importance constant, so the order is the relevance's).
The shipped rule (c5_mean) is re-measured end to end by bench/locomo.py.

Rules (own = a turn's own hybrid relevance; windows never cross a session):
  single               own only, no windows
  pairs_max09          max(own, 0.9 x best window of two neighbouring turns)  (shipped before)
  pairs_rrf            reciprocal rank fusion (k 60) of own and best-pair rankings
  rrf4_pairs           RRF of keyword, vector, keyword-of-best-pair, vector-of-best-pair rankings
  rrf_kv_single        RRF of the keyword and the vector rankings, no windows (vs the mean: single)
  rrf_kv_pairsmax      RRF of keyword and vector rankings, each max-fused with its best pair
  cN_max09             max(own, 0.9 x the window of N turns centred on the turn)
  cN_rrf               RRF of own and centred-window-N rankings
  cN_mean[_aS]         (1 - S) x own + S x centred window of N turns (S 0.5 unless named)   (c5_mean shipped)
  cN_member_mean       mean of own and the best window of N turns that holds the turn
  max(own,c5_mean)     never below own
  multi_1_3_5[_9]      mean of own and the centred windows of 3, 5 (and 9) turns
  c5_mean+Ssess        c5_mean + S x the session's relevance (session = all its turns as one text)
  rrf(c5_mean,sess)    RRF of c5_mean and session rankings
  c5_mean_prf          Rocchio pseudo-relevance feedback: query vector + 0.5 x mean of the top-3 turns' vectors, then c5_mean
  c5_mean+entity0.05   +0.05 for a turn holding a capitalised name or a year of the question
Nothing is tuned per question; the held-out conversations are not for this script.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo  # noqa: E402


def embedded(conv, embedder_name: str, root: Path):
    """The conversation's store (as bench/locomo.py builds it): its turns' ids, docs and tokens, the
    embedder, the turns' passage vectors and the questions' query vectors."""
    from memctl import embed, rindex
    from memctl.store import open_store

    locomo.make_store(root, conv, embedder_name)
    store = open_store(root)
    with rindex.opened(store) as conn:
        rows = rindex.vector_texts(conn, "episode")
        ids = [d for d, _, _ in rows]
        found = rindex.docs(conn, ids)
        toks = rindex.tokens_of(conn, ids)
    embedder = embed.choose(embed.settings_for(store)).embedder
    vectors = np.asarray(embedder.embed([t for _, _, t in rows], kind="passage"), dtype=np.float64)
    queries = np.asarray(embedder.embed([q.text for q in conv.questions], kind="query"), dtype=np.float64)
    return ids, found, toks, embedder, vectors, queries


def signals(conv, embedder_name: str, root: Path) -> dict:
    from memctl import recall, rindex, textnorm

    ids, found, toks, embedder, vectors, queries = embedded(conv, embedder_name, root)
    questions = []
    for q in conv.questions:
        terms, idf = rindex.query_terms(q.text)  # fixed term weights since issue 25
        questions.append({"text": q.text, "cat": q.category, "ev": q.evidence, "terms": terms, "idf": idf})
    ts = [found[d].ts for d in ids]
    same = np.array([ts[i] == ts[i + 1] for i in range(len(ids) - 1)], dtype=bool)
    c = {"refs": [conv.refs[found[d].key] for d in ids], "tokens": [toks.get(d, []) for d in ids], "questions": questions,
         "V": vectors, "Q": queries, "calib": recall.calibration_for(embedder), "n": len(ids),
         "sess": np.cumsum(np.r_[0, ~same]), "cache": {}}
    c["cos"] = queries @ vectors.T
    c["share"] = np.array([0.2 if textnorm.has_cjk(q["text"]) else 0.5 for q in questions])[:, None]  # the old mean's shares
    c["cov1"] = np.array([[rindex.coverage(t, q["terms"], q["idf"]) for t in c["tokens"]] for q in questions])
    return c


def cal(cos, calib):
    centre, slope = calib
    return 1 / (1 + np.exp(-slope * (cos - centre)))


def own(c):
    vec = cal(c["cos"], c["calib"])
    return c["cov1"], vec, c["share"] * c["cov1"] + (1 - c["share"]) * vec


def centred(c, size):
    n, sess, h = c["n"], c["sess"], size // 2
    out = []
    for i in range(n):
        lo, hi = max(0, i - h), min(n, i - h + size)
        while sess[lo] != sess[i]:
            lo += 1
        while sess[hi - 1] != sess[i]:
            hi -= 1
        out.append((lo, hi))
    return out


def pairs(c):
    return [(i, i + 2) for i in range(c["n"] - 1) if c["sess"][i] == c["sess"][i + 1]]


def window_signals(c, wins, tag):
    """(keyword, vector, hybrid) relevance of each window, one row per question."""
    from memctl import rindex

    if tag not in c["cache"]:
        kw = np.array([[rindex.coverage([t for j in range(a, b) for t in c["tokens"][j]], q["terms"], q["idf"])
                        for a, b in wins] for q in c["questions"]])
        summed = np.array([c["V"][a:b].sum(0) for a, b in wins])
        vec = cal((c["Q"] @ summed.T) / np.linalg.norm(summed, axis=1), c["calib"])
        c["cache"][tag] = (kw, vec, c["share"] * kw + (1 - c["share"]) * vec)
    return c["cache"][tag]


def member_best(c, wins, rel):
    best = np.zeros((rel.shape[0], c["n"]))
    for w, (a, b) in enumerate(wins):
        best[:, a:b] = np.maximum(best[:, a:b], rel[:, w:w + 1])
    return best


def ranks(score):
    order = np.argsort(-score, axis=1, kind="stable")
    r = np.empty_like(order)
    r[np.arange(score.shape[0])[:, None], order] = np.arange(1, score.shape[1] + 1)
    return r


def rrf(*scores, k=60):
    return sum(1.0 / (k + ranks(s)) for s in scores)


def session(c):
    if "sess" not in c["cache"]:
        sess, ns = c["sess"], int(c["sess"].max()) + 1
        stoks = [set() for _ in range(ns)]
        for i, t in enumerate(c["tokens"]):
            stoks[sess[i]].update(t)
        kw = np.array([[sum(q["idf"][t] for t in q["terms"] if t in st) / max(1e-9, sum(q["idf"].values())) for st in stoks]
                       for q in c["questions"]])  # share of the query's idf present (no length normalisation)
        summed = np.array([c["V"][sess == s].sum(0) for s in range(ns)])
        vec = cal((c["Q"] @ summed.T) / np.linalg.norm(summed, axis=1), c["calib"])
        c["cache"]["sess"] = (c["share"] * kw + (1 - c["share"]) * vec)[:, sess]
    return c["cache"]["sess"]


def c_mean(size, s=0.5):
    return lambda c: (1 - s) * own(c)[2] + s * window_signals(c, centred(c, size), f"c{size}")[2]


def rules() -> dict:
    def pairs_best(c, part=2):
        wins = pairs(c)
        return member_best(c, wins, window_signals(c, wins, "pair")[part])

    def c_max(size):
        return lambda c: np.maximum(own(c)[2], 0.9 * window_signals(c, centred(c, size), f"c{size}")[2])

    def c_rrf(size):
        return lambda c: rrf(own(c)[2], window_signals(c, centred(c, size), f"c{size}")[2])

    def c_member(size):
        def f(c):
            wins = centred(c, size)
            return (own(c)[2] + member_best(c, wins, window_signals(c, wins, f"c{size}")[2])) / 2
        return f

    def multi(*sizes):
        return lambda c: sum([own(c)[2]] + [window_signals(c, centred(c, s), f"c{s}")[2] for s in sizes]) / (1 + len(sizes))

    def prf(c, beta=0.5, top=3):
        best = np.argsort(-c_mean(5)(c), axis=1, kind="stable")[:, :top]
        q2 = c["Q"] + beta * c["V"][best].mean(1)
        q2 /= np.linalg.norm(q2, axis=1)[:, None]
        mix = lambda kw, cos: c["share"] * kw + (1 - c["share"]) * cal(cos, c["calib"])  # noqa: E731
        wins = centred(c, 5)
        kw5 = window_signals(c, wins, "c5")[0]
        summed = np.array([c["V"][a:b].sum(0) for a, b in wins])
        return (mix(c["cov1"], q2 @ c["V"].T) + mix(kw5, (q2 @ summed.T) / np.linalg.norm(summed, axis=1))) / 2

    def entity(c, boost=0.05):
        s = c_mean(5)(c).copy()
        for qi, q in enumerate(c["questions"]):
            want = {w.lower() for w in re.findall(r"(?<!^)\b([A-Z][a-z]+)", q["text"])} | set(re.findall(r"\b(?:19|20)\d\d\b", q["text"]))
            for j, t in enumerate(c["tokens"]):
                if want & set(t):
                    s[qi, j] += boost
        return s

    table = {
        "single": lambda c: own(c)[2],
        "pairs_max09": lambda c: np.maximum(own(c)[2], 0.9 * pairs_best(c)),
        "pairs_rrf": lambda c: rrf(own(c)[2], pairs_best(c)),
        "rrf4_pairs": lambda c: rrf(own(c)[0], own(c)[1], pairs_best(c, 0), pairs_best(c, 1)),
        "rrf_kv_single": lambda c: rrf(own(c)[0], own(c)[1]),
        "rrf_kv_pairsmax": lambda c: rrf(np.maximum(own(c)[0], 0.9 * pairs_best(c, 0)), np.maximum(own(c)[1], 0.9 * pairs_best(c, 1))),
    }
    for size in (3, 5):
        table[f"c{size}_max09"] = c_max(size)
        table[f"c{size}_rrf"] = c_rrf(size)
    for size in (3, 5, 7, 9):
        table[f"c{size}_mean"] = c_mean(size)
    table["c5_mean_a0.3"] = c_mean(5, 0.3)
    table["c5_mean_a0.7"] = c_mean(5, 0.7)
    table["c3_member_mean"] = c_member(3)
    table["c5_member_mean"] = c_member(5)
    table["max(own,c5_mean)"] = lambda c: np.maximum(own(c)[2], c_mean(5)(c))
    table["multi_1_3_5"] = multi(3, 5)
    table["multi_1_3_5_9"] = multi(3, 5, 9)
    table["c5_mean+0.1sess"] = lambda c: c_mean(5)(c) + 0.1 * session(c)
    table["c5_mean+0.2sess"] = lambda c: c_mean(5)(c) + 0.2 * session(c)
    table["rrf(c5_mean,sess)"] = lambda c: rrf(c_mean(5)(c), session(c))
    table["c5_mean_prf"] = prf
    table["c5_mean+entity0.05"] = entity
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--embedder", default="test-model", choices=("test-model", "e5-small-q4"))
    parser.add_argument("--only", default="", help="comma-separated rule names (default: all)")
    parser.add_argument("--floor", type=float, default=0.35, help="relevance floor for the last table (default 0.35)")
    args = parser.parse_args()
    data = json.loads(args.data.read_text(encoding="utf-8"))
    convs = [locomo.build_conversation(i, conv, {}) for i, conv in enumerate(data)]
    tmp = Path(tempfile.mkdtemp(prefix="memctl-variants-"))
    prepared = []
    for conv in convs:
        prepared.append(signals(conv, args.embedder, tmp / conv.sample_id))
        print(f"{conv.sample_id}: {prepared[-1]['n']} turns, {len(conv.questions)} questions", file=sys.stderr, flush=True)
    chosen = {n: f for n, f in rules().items() if not args.only or n in args.only.split(",")}
    print(f"LoCoMo {args.data.name}, {args.embedder}: recall@10 over all turns (hybrid signals)")
    print(f"{'rule':<20} {'all':>6} {'multi':>6} {'temp':>6} {'open':>6} {'single':>6}")
    for name, rule in chosen.items():
        found, cats = [], []
        for c in prepared:
            top = np.argsort(-rule(c), axis=1, kind="stable")[:, :10]
            for qi, q in enumerate(c["questions"]):
                found.append(set(q["ev"]) <= {c["refs"][j] for j in top[qi]})
                cats.append(q["cat"])
        found, cats = np.array(found), np.array(cats)
        print(f"{name:<20} {found.mean():>6.3f}" + "".join(f" {found[cats == k].mean():>6.3f}" for k in (1, 2, 3, 4)), flush=True)
    print(f"\nat the floor {args.floor:g}: share of evidence turns at or above it; other turns at or above it per question")
    for name in ("single", "pairs_max09", "c5_mean"):
        rule, above, evidence, wrong, asked = rules()[name], 0, 0, 0, 0
        for c in prepared:
            relevance = rule(c)
            for qi, q in enumerate(c["questions"]):
                mask = np.array([ref in q["ev"] for ref in c["refs"]])
                above += int((relevance[qi][mask] >= args.floor).sum())
                evidence += int(mask.sum())
                wrong += int((relevance[qi][~mask] >= args.floor).sum())
                asked += 1
        print(f"{name:<20} {above / evidence:>6.3f} {wrong / asked:>6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
