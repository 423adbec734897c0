"""Does a fixed background cohort sharpen the vector signal? Measured, not shipped.

    python bench/cohort_norm.py ../shared/data/stsb-train/sts-train.csv \
        ../shared/data/jsts-train/train-v1.3.json [--cohort 150] [--seed 7]

e5's cosines sit in a narrow band whose level depends on the query: some questions score 0.80 with
every passage, others 0.74. One way to take that level out without looking at the store (recall's
relevance must not depend on what else the store holds) is a fixed cohort: N English and N Japanese
sentences (here drawn from the STS-B and JSTS train files given, never copied into the project),
embedded once as passages; a query's cosine with a fact is then compared with its cosines with the
cohort: z = (cos - mean) / std, or cos - the mean of its 20 best cohort cosines.

On the near-miss store (bench/data/near-miss/: 40 facts, 35 questions a fact answers, 65 unrelated
or near-miss ones; written by a tester, not dev data) it reports, for the raw cosine and each
normalisation: the AUC of the answering fact's score against the best score of an unrelated or
near-miss question, rank-1 hits, and the share of answered questions above the score that lets 3 %
of the unrelated ones through. Vector only: no keyword signal, no fit. Default embedder (e5-small-q4).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "near-miss"
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def read_tsv(path: Path) -> list[list[str]]:
    return [line.rstrip("\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line]


def cohort(stsb: Path, jsts: Path, size: int, seed: int) -> list[str]:
    english = [row[5] for row in read_tsv(stsb) if len(row) >= 7]
    japanese = [json.loads(line)["sentence1"] for line in jsts.read_text(encoding="utf-8").splitlines() if line.strip()]
    pick = random.Random(seed)
    return pick.sample(english, size) + pick.sample(japanese, size)


def separation(scores, questions, names) -> dict:
    import numpy as np

    answered, unrelated, first = [], [], 0
    for row, (category, _) in zip(scores, questions):
        if category.startswith("R:"):
            want = names.index(category[2:])
            answered.append(row[want])
            first += int(row.argmax() == want)
        elif category in ("U", "N"):
            unrelated.append(row.max())
    answered, unrelated = np.array(answered), np.array(unrelated)
    auc = float(np.mean([(a > u) + 0.5 * (a == u) for a in answered for u in unrelated]))
    bar = float(np.quantile(unrelated, 0.97))
    return {"auc": round(auc, 3), "first": f"{first}/{len(answered)}", "above_bar": round(float(np.mean(answered > bar)), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stsb", type=Path)
    parser.add_argument("jsts", type=Path)
    parser.add_argument("--cohort", type=int, default=150, help="sentences per language")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from memctl import embed
    from memctl.rindex import fact_vector_text

    facts = read_tsv(DATA / "facts.tsv")
    questions = [(row[0], row[1]) for row in read_tsv(DATA / "queries.tsv")]
    embedder = embed.choose(embed.settings_from(None)).embedder
    fact_vectors = embedder.embed([fact_vector_text(f[0], f[2]) for f in facts], "passage")
    cohort_vectors = embedder.embed(cohort(args.stsb, args.jsts, args.cohort, args.seed), "passage")
    query_vectors = embedder.embed([q for _, q in questions], "query")
    cosines, background = query_vectors @ fact_vectors.T, query_vectors @ cohort_vectors.T
    mean, spread = background.mean(1, keepdims=True), background.std(1, keepdims=True)
    best = background.copy()
    best.sort(1)
    names = [f[0] for f in facts]
    print(f"embedder {embed.label(embedder)}, cohort {args.cohort} + {args.cohort} sentences (seed {args.seed})")
    for label, scores in (("cosine", cosines), ("z", (cosines - mean) / spread),
                          ("cos - top20", cosines - best[:, -20:].mean(1, keepdims=True))):
        print(f"{label:12s} {json.dumps(separation(scores, questions, names))}")


if __name__ == "__main__":
    main()
