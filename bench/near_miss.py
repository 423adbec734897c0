"""Unrelated and near-miss questions against a small team's store: what passes recall's floor.

    python bench/near_miss.py [--weights shipped|prior] [--show] [--json OUT]

Builds a throwaway store of bench/data/near-miss/facts.tsv (40 facts, Japanese and English) and asks
every question of queries.tsv with `recall` in hybrid and keyword mode (keyword is what the per-prompt
hook falls back to without an embed-server), at the default floor, with the default embedder. It reports:
- false positives: unrelated (U) and near-miss (N) questions that get any hit at all;
- for the related questions (R:<fact>): the fact among the hits, the fact first, nothing at all.

`--weights prior` scores facts with the chunks' prior of the language (rindex.chunk_term_weight) in place
of rindex.term_weight: what shipped on 2026-12-06 and was withdrawn (docs/RECALL.md). The data were written
for memctl by a tester, not taken from ../shared/data, so that the choices made on the dev sets are
checked on text they were not made on. The clock is pinned; nothing here depends on today's date.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "near-miss"
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["MEMCTL_NO_SERVER"] = "1"
os.environ["MEMCTL_NOW"] = "2026-12-06T12:00:00+00:00"


def read_tsv(name: str) -> list[list[str]]:
    return [line.rstrip("\n").split("\t") for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line]


def build_store(folder: Path):
    import memctl

    store = memctl.init_store(folder / "store")
    for name, type_, description, why, how in read_tsv("facts.tsv"):
        memctl.remember(store, name, description, type=type_, why=why, how=how, vector_check=False, commit=False)
    return store


def measure(store, questions: list[list[str]], mode: str) -> dict:
    from memctl import recall

    _, answers = recall.recall(store, [q for _, q in questions], mode=mode, log=False)
    unrelated, related, persons = [], [], []
    for (category, question), hits in zip(questions, answers):
        names = [h.item.key for h in hits]
        top = f"{names[0]} {hits[0].relevance:.3f}" if hits else None
        if category in ("U", "N"):
            unrelated.append({"question": question, "category": category, "top": top})
        elif category == "P":
            persons.append({"question": question, "top": top})
        else:
            want = category.split(":", 1)[1]
            related.append({"question": question, "fact": want, "found": want in names,
                            "first": bool(names) and names[0] == want, "nothing": not names, "top": top})
    passed = [u for u in unrelated if u["top"]]
    return {
        "unrelated": len(unrelated), "false_positives": len(passed), "false_positive_rate": round(len(passed) / len(unrelated), 3),
        "persons_answered": sum(1 for p in persons if p["top"]), "persons": len(persons),
        "related": len(related), "found": sum(r["found"] for r in related), "first": sum(r["first"] for r in related),
        "nothing": sum(r["nothing"] for r in related),
        "passed": passed, "missed": [r for r in related if not r["found"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", choices=("shipped", "prior"), default="shipped",
                        help="the facts' term weight: rindex.term_weight (shipped) or the chunks' prior")
    parser.add_argument("--show", action="store_true", help="print each false positive and each miss")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    from memctl import rindex

    if args.weights == "prior":  # the facts' query terms weighed as a chunk's (recall reads rindex.query_terms)
        rindex.query_terms = lambda query: (terms := list(dict.fromkeys(rindex.search_tokens(query))),
                                            rindex.chunk_term_weights(terms))
    questions = [row[:2] for row in read_tsv("queries.tsv")]
    with tempfile.TemporaryDirectory() as folder:
        store = build_store(Path(folder))
        report = {"weights": args.weights, "modes": {mode: measure(store, questions, mode) for mode in ("hybrid", "keyword")}}
    print(f"facts' term weights: {args.weights}; floor {__import__('memctl.recall').recall.DEFAULT_MIN_SCORE}")
    for mode, m in report["modes"].items():
        print(f"{mode:7s}  unrelated answered {m['false_positives']}/{m['unrelated']} ({m['false_positive_rate']:.1%}), "
              f"person off-topic {m['persons_answered']}/{m['persons']}; related: found {m['found']}/{m['related']}, "
              f"first {m['first']}, nothing {m['nothing']}")
        if args.show:
            for p in m["passed"]:
                print(f"    passed  [{p['category']}] {p['question']} -> {p['top']}")
            for r in m["missed"]:
                print(f"    missed  {r['question']} (want {r['fact']}) -> {r['top'] or 'nothing'}")
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
