"""Where LoCoMo recall went after the issue-25 fit: the parts measured apart, in-process (docs/RECALL.md).

    python bench/locomo_attribution.py [PATH/TO/locomo-dev.json] --embedder test-model|e5-small-q4
        [--cache /tmp/locomo-attr-E.pkl] [--floor 0.35] [--fit-rows ROWS.json ...] [--fit-json OUT]

Like bench/locomo_variants.py it builds each conversation's store as bench/locomo.py does and ranks
ALL turns of a conversation for each of its questions by a rule over memctl's own signals (no
candidate cut, no five-factor score), reporting recall@10 (every evidence turn in the top 10) and
how many evidence and other turns reach the floor. `--cache` keeps the turns' tokens and the
embeddings (a file outside the repository), so later runs skip building stores and embedding.

The signals: keyword coverage (rindex.counted_coverage, term weights rindex.term_weight, or the
conversation's idf for the rows named "idf"), the calibrated cosine, both for a turn's own text and
for its window (recall.WINDOW_RADIUS turns either side in the same session, scored as one text).
The parts:

  coverage  term_weight (store-independent, shipped) or idf (the store's, shipped before)
  speaker   the "<speaker>:" prefix of every turn counted as a term or not (dropped from the
            turn's tokens; the name still counts where the text says it)
  fusion    mean (0.5 / 0.2 x coverage + the rest x vector, shipped before the fit) or fit
            (recall.combine, shipped)
  windows   none; mixp = the mean of the own and the window relevance (shipped); mixs = the mean
            of their signals (coverage, and the vector's logit), through the model once

With --fit-rows (the pair sets' rows from bench/fit_relevance.py --collect-only) the hybrid model is
refitted with LoCoMo's rows taken from these signals with windows (mixs: the mixed signals of every
turn, evidence relevant) instead of fit_relevance's own LoCoMo rows (single turns), the pair sets
unchanged, every set weighing the same (fit_relevance.logistic, balanced samples, seed 0).
Nothing is tuned per question; the held-out conversations are not for this script.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import locomo  # noqa: E402


def prepare(conv, embedder_name: str, root: Path) -> dict:
    from locomo_variants import embedded
    from memctl import rindex

    ids, found, toks, embedder, vectors, queries = embedded(conv, embedder_name, root)
    ts = [found[d].ts for d in ids]
    speaker = {r["id"]: r["agent"] for r in conv.records}
    return {"refs": [conv.refs[found[d].key] for d in ids], "tokens": [toks.get(d, []) for d in ids],
            "speakers": [rindex.search_tokens(speaker[found[d].key]) for d in ids],
            "questions": [{"text": q.text, "cat": q.category, "ev": q.evidence} for q in conv.questions],
            "V": vectors, "Q": queries, "ts": ts, "model": getattr(embedder, "model", ""),
            "backend": getattr(embedder, "backend", "")}


def windows_of(c: dict) -> list[tuple[int, int]]:
    """The centred window of each turn, within its session (same ts), as recall._window_of reads it."""
    from memctl import recall

    n, r, ts = len(c["ts"]), recall.WINDOW_RADIUS, c["ts"]
    out = []
    for i in range(n):
        lo, hi = i, i + 1
        while lo > 0 and i - lo < r and ts[lo - 1] == ts[i]:
            lo -= 1
        while hi < n and hi - 1 - i < r and ts[hi] == ts[i]:
            hi += 1
        out.append((lo, hi))
    return out


def signals(c: dict, calibration, *, coverage: str, speaker: bool) -> dict:
    """Per question x turn: own coverage, own vector logit, window coverage, window vector logit, cjk."""
    from memctl import rindex, textnorm

    tokens = c["tokens"] if speaker else [t[len(s):] if t[:len(s)] == s else t for t, s in zip(c["tokens"], c["speakers"])]
    wins = windows_of(c)
    n = len(tokens)
    df: dict[str, int] = {}
    for t in tokens:
        for term in set(t):
            df[term] = df.get(term, 0) + 1
    centre, slope = calibration
    vlog = slope * (c["Q"] @ c["V"].T - centre)
    summed = np.array([c["V"][a:b].sum(0) for a, b in wins])
    wlog = slope * ((c["Q"] @ summed.T) / np.linalg.norm(summed, axis=1) - centre)
    counts = [None] * n
    own, win, cjk = [], [], []
    for q in c["questions"]:
        terms = list(dict.fromkeys(rindex.search_tokens(q["text"])))
        if coverage == "idf":
            weights = {t: math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}
        else:
            weights = {t: rindex.term_weight(t) for t in terms}
        counts = [rindex.term_counts(t, terms) for t in tokens]
        own.append([rindex.counted_coverage(tf, len(t), weights) for tf, t in zip(counts, tokens)])
        row = []
        for a, b in wins:
            tf: dict[str, int] = {}
            for j in range(a, b):
                for term, k in counts[j].items():
                    tf[term] = tf.get(term, 0) + k
            row.append(rindex.counted_coverage(tf, sum(len(tokens[j]) for j in range(a, b)), weights))
        win.append(row)
        cjk.append(textnorm.has_cjk(q["text"]))
    single = np.array([b - a == 1 for a, b in wins])
    return {"kw": np.array(own), "v": np.clip(vlog, -12, 12), "wkw": np.array(win), "wv": np.clip(wlog, -12, 12),
            "cjk": np.array(cjk, dtype=float)[:, None], "single": single}


def sig(x):
    return 1 / (1 + np.exp(-x))


def model(kw, v, cjk, fit):
    b = fit
    return sig(b[0] + b[1] * kw + b[2] * v + cjk * (b[3] + b[4] * kw + b[5] * v))


def relevance(s: dict, fusion: str, windows: str, fit, share: float = 0.5):
    from memctl import recall

    if fusion == "mean":
        w = np.where(s["cjk"] > 0, 0.2, 0.5)
        f = lambda kw, v: w * kw + (1 - w) * sig(v)  # noqa: E731
        own = f(s["kw"], s["v"])
        if windows == "none":
            return own
        return np.where(s["single"], own, (1 - share) * own + share * f(s["wkw"], s["wv"]))
    if fusion in ("keyword", "vector"):  # one signal: keyword mode's fit (0 for no coverage), the calibrated cosine
        b = recall.KEYWORD_FIT
        one = ((lambda kw, v: np.where(kw > 0, sig(b[0] + b[1] * kw + s["cjk"] * (b[2] + b[3] * kw)), 0.0))
               if fusion == "keyword" else (lambda kw, v: sig(v)))
        own = one(s["kw"], s["v"])
        if windows == "none":
            return own
        if windows == "mixp":
            return np.where(s["single"], own, (1 - share) * own + share * one(s["wkw"], s["wv"]))
        return np.where(s["single"], own, one((1 - share) * s["kw"] + share * s["wkw"], (1 - share) * s["v"] + share * s["wv"]))
    own = model(s["kw"], s["v"], s["cjk"], fit)
    if windows == "none":
        return own
    if windows == "mixp":
        return np.where(s["single"], own, (1 - share) * own + share * model(s["wkw"], s["wv"], s["cjk"], fit))
    mixed = model((1 - share) * s["kw"] + share * s["wkw"], (1 - share) * s["v"] + share * s["wv"], s["cjk"], fit)
    assert recall  # the fit's constants come from recall
    return np.where(s["single"], own, mixed)


def evaluate(prepared, sigs, rel_of, floor):
    found, cats, above, evidence, wrong, asked = [], [], 0, 0, 0, 0
    for c, s in zip(prepared, sigs):
        rel = rel_of(s)
        top = np.argsort(-rel, axis=1, kind="stable")[:, :10]
        for qi, q in enumerate(c["questions"]):
            found.append(set(q["ev"]) <= {c["refs"][j] for j in top[qi]})
            cats.append(q["cat"])
            mask = np.array([ref in q["ev"] for ref in c["refs"]])
            above += int((rel[qi][mask] >= floor).sum())
            evidence += int(mask.sum())
            wrong += int((rel[qi][~mask] >= floor).sum())
            asked += 1
    found, cats = np.array(found), np.array(cats)
    return found.mean(), [found[cats == k].mean() for k in (1, 2, 3, 4)], above / evidence, wrong / asked


def locomo_fit_rows(prepared, sigs) -> list[list]:
    """fit_relevance-style rows for LoCoMo with the windows' mixed signals (cosine given back through the
    calibration so fit_relevance.features reads the same logit), coverage fixed (no term counts)."""
    rows = []
    for ci, (c, s) in enumerate(zip(prepared, sigs)):
        for qi, q in enumerate(c["questions"]):
            for j, ref in enumerate(c["refs"]):
                kw = s["kw"][qi, j] if s["single"][j] else 0.5 * (s["kw"][qi, j] + s["wkw"][qi, j])
                v = s["v"][qi, j] if s["single"][j] else 0.5 * (s["v"][qi, j] + s["wv"][qi, j])
                rows.append([float(v), float(kw), int(ref in q["ev"]), f"loc{ci}-{qi}", int(s["cjk"][qi, 0]), None, 32, {}, []])
    return rows


def refit(prepared, sigs, calibration, pair_files: list[Path]):
    import fit_relevance as fr

    sets = {}
    for path in pair_files:
        for name, rows in json.loads(path.read_text(encoding="utf-8")).items():
            if name != "locomo":
                sets[name] = rows
    fr.recompute_coverage(sets, None)
    # the LoCoMo rows hold the logit itself: a calibration of (0, 1) makes features() read it unchanged
    sets["locomo"] = locomo_fit_rows(prepared, sigs)
    xs, ys, ws = [], [], []
    for name, rows in sets.items():
        sample = fr.balanced(rows)
        cal = (0.0, 1.0) if name == "locomo" else calibration
        for r in sample:
            xs.append(fr.features(r, cal, False))
            ys.append(r[2])
            ws.append(1.0 / len(sample))
    beta = fr.logistic(np.array(xs), np.array(ys, dtype=float), np.array(ws))
    return tuple(round(float(b), 3) for b in beta)


def main() -> int:
    from memctl import recall

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--embedder", default="test-model", choices=("test-model", "e5-small-q4"))
    parser.add_argument("--cache", type=Path, help="tokens and embeddings kept here (outside the repository)")
    parser.add_argument("--floor", type=float, default=recall.DEFAULT_MIN_SCORE)
    parser.add_argument("--no-table", action="store_true", help="only the refit (with --fit-rows)")
    parser.add_argument("--fit-rows", type=Path, action="append", default=[],
                        help="fit_relevance --rows file(s) holding the pair sets: refit with windowed LoCoMo rows")
    args = parser.parse_args()
    if args.cache and args.cache.exists():
        prepared = pickle.loads(args.cache.read_bytes())
    else:
        data = json.loads(args.data.read_text(encoding="utf-8"))
        convs = [locomo.build_conversation(i, conv, {}) for i, conv in enumerate(data)]
        tmp = Path(tempfile.mkdtemp(prefix="memctl-attr-"))
        prepared = []
        for conv in convs:
            prepared.append(prepare(conv, args.embedder, tmp / conv.sample_id))
            print(f"{conv.sample_id}: {len(prepared[-1]['refs'])} turns, {len(conv.questions)} questions", file=sys.stderr, flush=True)
        if args.cache:
            args.cache.write_bytes(pickle.dumps(prepared))

    class E:  # calibration_for reads the model / backend names only
        model = prepared[0]["model"]
        backend = prepared[0]["backend"]
    calibration = recall.calibration_for(E)
    cache: dict = {}

    def sigs(coverage, speaker):
        if (coverage, speaker) not in cache:
            cache[(coverage, speaker)] = [signals(c, calibration, coverage=coverage, speaker=speaker) for c in prepared]
        return cache[(coverage, speaker)]

    fit = recall.HYBRID_FIT
    print(f"LoCoMo {args.data.name}, {args.embedder}: recall@10 over all turns; at the floor {args.floor:g}: "
          "share of evidence turns at or above it, other turns at or above it per question")
    print(f"{'coverage':<9} {'speaker':<8} {'fusion':<7} {'windows':<8} {'all':>6} {'multi':>6} {'temp':>6} {'open':>6} {'single':>6}"
          f" {'ev>=fl':>7} {'wrong':>6}")

    def line(coverage, speaker, fusion, windows, fitted=fit, label=None):
        r10, cats, ev, wrong = evaluate(prepared, sigs(coverage, speaker), lambda s: relevance(s, fusion, windows, fitted), args.floor)
        print(f"{coverage:<9} {'kept' if speaker else 'dropped':<8} {label or fusion:<7.7} {windows:<8} {r10:>6.3f}"
              + "".join(f" {x:>6.3f}" for x in cats) + f" {ev:>7.3f} {wrong:>6.1f}", flush=True)

    for coverage in () if args.no_table else ("idf", "weight"):
        for speaker in (True, False):
            line(coverage, speaker, "mean", "none")
            line(coverage, speaker, "mean", "mixp")
            for windows in ("none", "mixp", "mixs"):
                line(coverage, speaker, "fit", windows)
    for fusion in () if args.no_table else ("keyword", "vector"):
        for windows in ("none", "mixp", "mixs"):
            line("weight", True, fusion, windows)
    if args.fit_rows:
        for speaker in (True, False):
            fitted = refit(prepared, sigs("weight", speaker), calibration, args.fit_rows)
            print(f"refit (speaker {'kept' if speaker else 'dropped'}, LoCoMo rows with mixed window signals): {fitted}")
            for windows in ("none", "mixp", "mixs"):
                line("weight", speaker, "fit", windows, fitted, "refit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
