"""Calibrate near-dup thresholds on JGLUE JSTS (and optionally STS-B) for each embedder.

    python bench/calibrate_jsts.py ../shared/data/jsts-train/train-v1.3.json \
        [--stsb ../shared/data/stsb-train/sts-train.csv] \
        [--embedder char-ngram --embedder e5-small-q4 --embedder st:PATH_OR_NAME] [--limit N] [--json OUT]

Pairs: a similarity label >= 4.0 is a positive (same meaning), <= 2.0 a
negative; the middle is left out. For each embedder it prints the threshold
memctl recommends (best F1 among thresholds with precision >= 0.9), precision
and recall there, the best F1 at any threshold, P / R / F1 at the shipped
threshold and at the similar band's lower edge (scores at or above it), and the
highest threshold that keeps recall >= 0.95 (the rule the band was set by). With `--overlap`, also the
best F1 when the verdict is `score + w * overlap >= t` (overlap: near-dup's Jaccard of words and kana/kanji
bigrams) for several w: whether the lexical overlap near-dup shows beside the score would be a second signal.
The data is read from the path given; nothing is copied into the repository.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

from memctl import embed, neardup

POSITIVE, NEGATIVE = 4.0, 2.0


def jsts_pairs(path: Path) -> list[tuple[str, str, int]]:
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            label = float(row["label"])
            if label >= POSITIVE or label <= NEGATIVE:
                pairs.append((row["sentence1"], row["sentence2"], int(label >= POSITIVE)))
    return pairs


def stsb_pairs(path: Path) -> list[tuple[str, str, int]]:
    pairs = []
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) < 7:
                continue
            label = float(row[4])
            if label >= POSITIVE or label <= NEGATIVE:
                pairs.append((row[5], row[6], int(label >= POSITIVE)))
    return pairs


def make_embedder(spec: str) -> embed.Embedder:
    if spec == "char-ngram":
        return embed._ngram()
    if spec == "e5-small-q4":
        return embed._e5q4()
    if spec.startswith("st:"):
        model = spec[3:]
        settings = embed.Settings(backend="sentence-transformers", model=model)
        path, why = embed.local_model_path(model)
        if path is None:
            raise SystemExit(why)
        return embed._st(settings, path)
    raise SystemExit(f"unknown embedder {spec!r}: char-ngram, e5-small-q4 or st:MODEL")


def sample(pairs: list, limit: int | None, seed: int = 0) -> list:
    if not limit or limit >= len(pairs):
        return pairs
    return random.Random(seed).sample(pairs, limit)


def overlap_sweep(pairs: list, scores) -> list[dict]:
    """Best F1 of `score + w * overlap >= t` over t, for each w (w = 0: the score alone)."""
    import numpy as np

    overlaps = np.array([neardup.overlap(a, b) for a, b, _ in pairs])
    labels = np.array([label for *_, label in pairs], dtype=bool)
    rows = []
    for weight in (0.0, 0.02, 0.05, 0.1, 0.2, 0.3):
        best = max(neardup.sweep(np.clip(scores + weight * overlaps, 0, None) / (1 + weight), labels), key=lambda p: p.f1)
        rows.append({"weight": weight, "threshold": round(best.threshold * (1 + weight), 3),
                     "precision": best.precision, "recall": best.recall, "f1": best.f1})
        print(f"  score + {weight:g} * overlap: best F1 {best.f1} (P {best.precision} R {best.recall})", flush=True)
    return rows


def run(name: str, pairs: list, specs: list[str], with_overlap: bool = False) -> list[dict]:
    results = []
    for spec in specs:
        embedder = make_embedder(spec)
        started = time.perf_counter()
        cal = neardup.calibrate(None, pairs, embedder=embedder)
        seconds = time.perf_counter() - started
        best_any = max(cal.points, key=lambda p: p.f1)
        at80 = [p for p in cal.points if p.precision >= 0.8 and p.tp > 0]
        p80 = max(at80, key=lambda p: p.f1) if at80 else None
        rec = cal.recommended
        band = embed.similar_for(embed.Settings(), embedder)
        shipped, _ = embed.threshold_for(embed.Settings(), embedder)
        at = {round(p.threshold, 3): p for p in cal.points}
        edge = max((p.threshold for p in cal.points if p.recall >= 0.95), default=None)  # how the band was chosen
        row = {
            "data": name, "embedder": cal.embedder, "model": cal.model, "pairs": cal.pairs, "positives": cal.positives,
            "threshold": rec.threshold if rec else None, "precision": rec.precision if rec else None,
            "recall": rec.recall if rec else None, "f1": rec.f1 if rec else None, "target_met": cal.target_met,
            "best_f1": best_any.f1, "best_f1_threshold": best_any.threshold,
            "best_f1_precision": best_any.precision, "best_f1_recall": best_any.recall,
            "p80_threshold": p80.threshold if p80 else None, "p80_precision": p80.precision if p80 else None,
            "p80_recall": p80.recall if p80 else None, "p80_f1": p80.f1 if p80 else None,
            "seconds": round(seconds, 1),
            "shipped": shipped, "shipped_point": asdict(at[round(shipped, 3)]) if round(shipped, 3) in at else None,
            "similar": band, "similar_point": asdict(at[round(band, 3)]) if band is not None and round(band, 3) in at else None,
            "recall_095_edge": edge,
        }
        results.append(row)
        print(
            f"{name}\t{cal.embedder}\tpairs {cal.pairs} (+{cal.positives})\t"
            f"threshold {row['threshold']}\tP {row['precision']}\tR {row['recall']}\tF1 {row['f1']}\t"
            f"(best F1 {best_any.f1} at {best_any.threshold}: P {best_any.precision} R {best_any.recall})\t"
            f"(precision >= 0.8: {row['p80_threshold']} P {row['p80_precision']} R {row['p80_recall']} F1 {row['p80_f1']})"
            f"{'' if cal.target_met else ' precision 0.9 not reached'}\t{seconds:.0f}s",
            flush=True,
        )
        for what, value in (("shipped threshold", shipped), ("similar band from", band)):
            point = at.get(round(value, 3)) if value is not None else None
            if point is not None:
                print(f"  {what} {value:g}: P {point.precision} R {point.recall} F1 {point.f1}", flush=True)
        print(f"  highest threshold with recall >= 0.95: {edge}", flush=True)
        if with_overlap:
            row["overlap"] = overlap_sweep(pairs, neardup.pair_scores(embedder, pairs))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsts", type=Path, help="train-v1.3.json from JGLUE JSTS")
    parser.add_argument("--stsb", type=Path, help="sts-train.csv from the STS Benchmark (English)")
    parser.add_argument("--embedder", action="append", help="char-ngram | e5-small-q4 | st:MODEL (repeatable)")
    parser.add_argument("--limit", type=int, help="use a random sample of this many pairs (seed 0)")
    parser.add_argument("--no-jsts", action="store_true", help="only the --stsb pairs")
    parser.add_argument("--overlap", action="store_true", help="also sweep score + w * overlap (a second signal?)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    specs = args.embedder or ["char-ngram", "e5-small-q4"]
    results = [] if args.no_jsts else run("jsts", sample(jsts_pairs(args.jsts), args.limit), specs, args.overlap)
    if args.stsb:
        results += run("stsb", sample(stsb_pairs(args.stsb), args.limit), specs, args.overlap)
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
