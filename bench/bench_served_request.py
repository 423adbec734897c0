"""The embed-server's share of a served recall over a kept store: its `recall` request, timed in process.

    python bench/bench_served_request.py /tmp/bdi-ja-100k [--baseline-src DIR] [--queries 20]

DIR is a store kept by `bench_docs_index.py --keep DIR` (DIR/store and DIR/queries.json). The request
is the one `memctl recall Q --source docs` sends (resident.recall_handlers, with the store's own model
loaded once and warm), timed per query as the best of --rounds; the medians of its steps are shown
beside it. With --baseline-src, the same is run with memctl imported from another source tree, in a
process of its own, and the answers of both (every query with the floor at 0: hits, scores, signals)
are compared: the table says whether they are identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

STEPS = (("rindex", "keyword", "keyword search (BM25)"), ("rindex", "chunk_coverages", "chunk coverages"),
         ("rindex", "coverages", "coverages"), ("recall", "_cosines", "cosines (the query's vector, the scan)"),
         ("recall", "factors", "factors"))


def measure(kept: Path, queries: int, rounds: int) -> dict:
    """In this process: the request's median (best of `rounds` per query), its steps, and a digest of the answers."""
    from memctl import neardup, recall, resident, rindex
    from memctl.store import open_store

    asked = json.loads((kept / "queries.json").read_text(encoding="utf-8"))[:queries]
    store = open_store(kept / "store")
    engine = neardup.engine_for(store, use_server=False)
    engine.embedder.embed(["warm up"], "query")
    spent: dict[str, list[float]] = defaultdict(list)
    modules = {"rindex": rindex, "recall": recall}
    for module, name, label in STEPS:
        if hasattr(modules[module], name):
            _timed(modules[module], name, spent[label])
    handle = resident.recall_handlers(store.root, engine.embedder)["recall"]

    def request(query: str, floor: float | None) -> dict:
        options = {"fact_type": None, "k": 10, "mode": None, "include_all": False, "min_score": floor}
        reply, _ = handle({"request": {"source": "docs", "queries": [query], "now": 1796237948.0, "since": None,
                                       "index": "docs", **options}})
        if "declined" in reply:
            raise SystemExit(f"the request was declined: {reply['declined']}")
        return reply

    answers = [request(q, 0.0)["results"] for q in asked]  # also loads the vectors
    for times in spent.values():
        times.clear()
    best: dict[int, float] = {}
    for _ in range(rounds):
        for i, query in enumerate(asked):
            started = time.perf_counter()
            request(query, None)
            best[i] = min(best.get(i, float("inf")), (time.perf_counter() - started) * 1000)
    digests = [hashlib.sha256(json.dumps(a, sort_keys=True).encode()).hexdigest()[:16] for a in answers]
    return {"median": statistics.median(best.values()), "steps": {k: statistics.median(v) for k, v in spent.items() if v},
            "answers": digests, "queries": asked, "load": os.getloadavg()[0]}


def _timed(module, name: str, into: list[float]) -> None:
    real = getattr(module, name)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            into.append((time.perf_counter() - started) * 1000)

    setattr(module, name, timed)


def run(src: Path, kept: Path, queries: int, rounds: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), MEMCTL_NO_COMMIT="1", HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, __file__, str(kept), "--child", "--queries", str(queries), "--rounds", str(rounds)],
                          env=env, capture_output=True, text=True, cwd="/")
    if done.returncode != 0:
        raise SystemExit(f"the run with {src} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", type=Path, help="a folder kept by bench_docs_index.py --keep")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, default=None, help="a memctl source tree to compare with")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.kept, args.queries, args.rounds)))
        return 0
    here = Path(__file__).resolve().parent.parent
    rows = {"this tree": run(here, args.kept, args.queries, args.rounds)}
    if args.baseline_src:
        rows["baseline"] = run(args.baseline_src.resolve(), args.kept, args.queries, args.rounds)
    print(f"the embed-server's recall request over {args.kept}/store, {args.queries} queries, best of {args.rounds} each (ms):")
    labels = list(dict.fromkeys(label for row in rows.values() for label in row["steps"]))
    print(f"  {'':44s}" + "".join(f"{name:>14s}" for name in rows))
    print(f"  {'request (median)':44s}" + "".join(f"{row['median']:14.1f}" for row in rows.values()))
    for label in labels:
        print(f"  {'  ' + label:44s}" + "".join(f"{row['steps'].get(label, float('nan')):14.1f}" for row in rows.values()))
    print(f"  {'load average':44s}" + "".join(f"{row['load']:14.2f}" for row in rows.values()))
    if "baseline" in rows:
        mine, base = rows["this tree"], rows["baseline"]
        differ = [q for q, a, b in zip(mine["queries"], mine["answers"], base["answers"]) if a != b]
        print(f"  this tree / baseline: {mine['median'] / base['median']:.2f}; answers at floor 0: "
              f"{len(mine['answers']) - len(differ)} of {len(mine['answers'])} queries identical")
        for query in differ:
            print(f"    differs: {query}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
