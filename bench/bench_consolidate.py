"""Consolidation at scale (issue 18): `memctl consolidate --dry-run` with the vectors cached.

    python bench/bench_consolidate.py ../shared/data/jsts-train/train-v1.3.json \
        [--stsb ../shared/data/stsb-train/sts-train.csv] [--facts 10000] [--model char-ngram|e5-small-q4|st:PATH]
        [--runs 3] [--budget 5] [--recall-sample 1000] [--keep DIR]

Builds a throwaway store (no git) whose facts are the distinct sentences of
JGLUE JSTS (Japanese image captions: many near-paraphrases, numbers in kanji
and digits) and, with --stsb, STS-B (English); beyond the distinct sentences,
a sentence is reused with a counter added (`…（2回目）`, `… (take 2)`), which
makes same-topic, different-number facts. The first run embeds every
description into the vector cache (timed separately, not in the budget); the
budget applies to the median of the warm runs, as in bench_forget.py: the
real command as a subprocess, start-up, reading 10k fact files (parse cache
warm), neighbour search, judging and printing included. Beside it, the same
store's plan is computed once more in-process with every pair above the floor
compared (the old way) when the store is small enough (--all-pairs-up-to, and
at most 5M pairs above the floor), and the two plans are compared; beyond,
the true k nearest of --recall-sample facts (an exact search) are looked up
in what the cluster search found. Prints PASS or FAIL; exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def sentences(jsts: Path, stsb: Path | None) -> list[str]:
    seen: dict[str, None] = {}
    with open(jsts, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            seen.setdefault(row["sentence1"].strip())
            seen.setdefault(row["sentence2"].strip())
    if stsb is not None:
        with open(stsb, encoding="utf-8") as handle:
            for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(row) >= 7:
                    seen.setdefault(row[5].strip())
                    seen.setdefault(row[6].strip())
    return [s for s in seen if s and "\n" not in s and len(s) <= 300]


def texts_for(base: list[str], count: int) -> list[str]:
    out = []
    for i in range(count):
        text = base[i % len(base)]
        round_ = i // len(base) + 1
        if round_ > 1:
            ascii_only = all(ord(c) < 128 for c in text)
            text = f"{text} (take {round_})" if ascii_only else f"{text}（{round_}回目）"
        out.append(text)
    return out


def build_store(root: Path, texts: list[str], model: str) -> None:
    from memctl import fact as fact_mod
    from memctl.store import init_store

    init_store(root, git=False)
    backend = {"char-ngram": 'backend = "char-ngram"', "e5-small-q4": 'backend = "e5-small-q4"'}.get(model)
    if backend is None and model.startswith("st:"):
        backend = f'backend = "sentence-transformers"\nmodel = "{model[3:]}"'
    if backend is None:
        raise SystemExit(f"unknown --model {model}")
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write(f"\n[embedding]\n{backend}\nfallback = \"fail\"\n")
    for i, text in enumerate(texts):
        name = f"fact-{i:06d}"
        meta = {"type": "project", "importance": 0.6, "confidence": 0.7,
                "created": "2026-01-01T00:00:00+00:00", "updated": "2026-01-01T00:00:00+00:00"}
        fact = fact_mod.Fact(name, {"name": name, "description": text, "metadata": meta}, f"{text}\n")
        (root / "memory" / f"{name}.md").write_text(fact_mod.render(fact), encoding="utf-8")


def run_once(memctl: list[str], root: Path, env: dict, *args: str) -> tuple[float, float, str, str]:
    """(wall seconds, CPU seconds, stdout, stderr) of one run of the real command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(memctl + ["--root", str(root), "consolidate", "--dry-run", *args], env=env, check=True,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout, done.stderr


def all_pairs_check(root: Path, data: dict) -> str:
    """The plan again, from every pair at or above the floor (blocked, as near-dup scan does)."""
    from memctl import facts as facts_mod, neardup
    from memctl.lifecycle import consolidate as cons
    from memctl.store import open_store

    store = open_store(root)
    engine = neardup.engine_for(store, use_server=False)
    rules = cons.rules_for(store, engine.threshold, engine.threshold_origin)
    live = facts_mod.live_facts(store, quiet=True)
    rows = [neardup.Row(f.stem, f.description, "") for f in live if f.description]
    vectors = neardup._vectors(store, neardup.facts_source(store), engine, rows, quiet=True)
    start = time.perf_counter()
    floor = min(rules.threshold, rules.topic_threshold)
    import numpy as np

    m = np.asarray(vectors.matrix, dtype=np.float32)
    above = sum(int(np.count_nonzero(np.triu(m[i:i + 1024] @ m.T, k=i + 1) >= floor)) for i in range(0, len(m), 1024))
    if above > 5_000_000:
        return (f"all pairs: {above:,} pairs at or above the floor {floor:.2f}: too many to judge one by one "
                f"(counted in {time.perf_counter() - start:.1f} s); no comparison")
    pairs = neardup.pairs_above(vectors.matrix, floor)
    plan = cons.build(live, ((rows[i].id, rows[j].id, s) for i, j, s in pairs), rules)
    took = time.perf_counter() - start
    merges = sorted((m["survivor"], tuple(a["name"] for a in m["absorbed"])) for m in data["merges"])
    theirs = sorted((m.survivor.stem, tuple(f.stem for f in m.absorbed)) for m in plan.merges)
    mine_c = {(c["a"], c["b"]) for c in data["conflicts"]}
    theirs_c = {(c.a, c.b) for c in plan.conflicts}
    return (f"all pairs ({len(pairs):,} at or above {floor:.2f}), in-process: {took:.1f} s; merges "
            f"{'equal' if merges == theirs else 'DIFFER'} ({len(theirs)}); conflicts: {len(theirs_c):,} from all pairs, "
            f"{len(mine_c):,} from neighbours, {len(mine_c & theirs_c):,} in both")


def neighbour_recall(root: Path, k: int, sample: int) -> str:
    """Beyond the exact search: how many of each sampled fact's true k nearest the cluster search found."""
    import numpy as np

    from memctl import facts as facts_mod, neardup
    from memctl.lifecycle import consolidate as cons
    from memctl.store import open_store

    store = open_store(root)
    engine = neardup.engine_for(store, use_server=False)
    rules = cons.rules_for(store, engine.threshold, engine.threshold_origin)
    live = facts_mod.live_facts(store, quiet=True)
    rows = [neardup.Row(f.stem, f.description, "") for f in live if f.description]
    m = np.asarray(neardup._vectors(store, neardup.facts_source(store), engine, rows, quiet=True).matrix, dtype=np.float32)
    floor = min(rules.threshold, rules.topic_threshold)
    start = time.perf_counter()
    ii, jj, _ = neardup.nearest_pairs(m, k, floor)
    took = time.perf_counter() - start
    found = set(zip(ii.tolist(), jj.tolist()))
    picked = np.random.default_rng(0).choice(len(m), sample, replace=False)
    wanted = hit = 0
    for i in picked.tolist():
        scores = m @ m[i]
        scores[i] = -np.inf
        for j in np.argsort(-scores, kind="stable")[:k].tolist():
            if scores[j] >= floor:
                wanted += 1
                hit += (min(i, j), max(i, j)) in found
    return (f"neighbour search in-process: {took:.1f} s; of the true {k} nearest of {sample:,} sampled facts, "
            f"{hit:,} of {wanted:,} found ({hit / max(1, wanted):.1%})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsts", type=Path, help="JGLUE JSTS train-v1.3.json")
    parser.add_argument("--stsb", type=Path, help="STS-B sts-train.csv (English sentences)")
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--model", default="char-ngram", help="char-ngram | e5-small-q4 | st:PATH")
    parser.add_argument("--runs", type=int, default=3, help="timed runs after the first (embedding) one")
    parser.add_argument("--budget", type=float, default=None, help="seconds (default 5 up to 10k facts, else 60)")
    parser.add_argument("--all-pairs-up-to", type=int, default=10_000,
                        help="compare with the all-pairs plan up to N facts (skipped above 5M pairs)")
    parser.add_argument("--recall-sample", type=int, default=1000,
                        help="above --all-pairs-up-to: check the neighbours of N sampled facts against an exact search")
    parser.add_argument("--keep", type=Path, help="build the store here and keep it (reused when it exists)")
    args = parser.parse_args()
    budget = args.budget if args.budget is not None else (5.0 if args.facts <= 10_000 else 60.0)

    memctl = [sys.executable, "-m", "memctl"]
    env = {**os.environ, "MEMCTL_NO_COMMIT": "1", "MEMCTL_NO_SERVER": "1", "HF_HUB_OFFLINE": "1"}
    tmp = None
    if args.keep:
        root = args.keep
    else:
        tmp = tempfile.mkdtemp(prefix="bench-consolidate-")
        root = Path(tmp) / "store"
    try:
        if not (root / "memctl.toml").exists():
            start = time.perf_counter()
            base = sentences(args.jsts, args.stsb)
            build_store(root, texts_for(base, args.facts), args.model)
            print(f"built {args.facts:,} facts from {len(base):,} distinct sentences in {time.perf_counter() - start:.1f} s ({root})")
        first = run_once(memctl, root, env)
        print(f"first run (parse cache and vector cache filled, {args.model}): {first[0]:.1f} s wall, {first[1]:.1f} s CPU",
              flush=True)
        warm = [run_once(memctl, root, env) for _ in range(args.runs)]
        median = statistics.median(w for w, *_ in warm)
        data = json.loads(run_once(memctl, root, env, "--json")[2])
        merged = sum(len(m["absorbed"]) for m in data["merges"])
        print(f"plan: {len(data['merges']):,} merges ({merged:,} facts to supersede), {len(data['conflicts']):,} conflicts "
              f"among {data['facts']:,} facts; threshold {data['threshold']} ({data['embedder']})")
        for note in data["notes"]:
            print(f"note: {note}")
        print("warm runs: " + ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c, *_ in warm)
              + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
        verdict = "PASS" if median <= budget else "FAIL"
        print(f"{verdict}: consolidate --dry-run on {args.facts:,} facts took {median:.2f} s "
              f"(median of {len(warm)} warm runs); budget {budget:.0f} s", flush=True)
        if args.facts <= args.all_pairs_up_to:
            print(all_pairs_check(root, data))
        elif args.recall_sample:
            print(neighbour_recall(root, data.get("neighbours", 10), args.recall_sample))
        return 0 if verdict == "PASS" else 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
