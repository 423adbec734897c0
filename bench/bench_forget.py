"""Forgetting by policy at scale (issue 8): `memctl forget --policies --dry-run` within 5 s.

    python bench/bench_forget.py [--facts 10000] [--episodes 100000] [--imported] [--runs 3] [--budget 5] [--keep DIR]

Builds a throwaway store (fixed seed) of N facts and M episodes spread over
400 days, with an access history, then runs the real command as a subprocess
(start-up, reading, planning and printing the plan included; stdout goes to
/dev/null). With --imported the episodes look like imported Claude Code
transcripts (issue 18): prompts and replies of up to 2,000 characters, agent
claude-code, refs `session:<id>,record:<uuid>`, a session every 40 turns.
The budget applies to the median of the warm runs, the steady state of a
store in use; the cold run, which also rebuilds the fact parse
cache (.memctl/facts.json, as after a fresh clone), is printed beside it. Wall
and CPU seconds are both printed: on a busy machine the two part ways. Prints
PASS or FAIL; exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

NOW = datetime(2026, 9, 14, 12, 0, tzinfo=timezone.utc)
TOPICS = ["deploy", "billing", "backup", "review", "release", "oncall", "schema", "cache", "デプロイ", "請求"]


def _ago(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat(timespec="seconds")


def _turn(rng: random.Random, i: int) -> dict[str, str]:
    """An episode as `episode import claude-code` writes it."""
    kind = "prompt" if i % 2 == 0 else "reply"
    words = [rng.choice(TOPICS) for _ in range(rng.randint(5, 60))]
    text = f"turn {i}: " + " ".join(words) + " です。" * rng.randint(0, 30)
    return {"agent": "claude-code", "type": kind, "description": text[:2000], "outcome": "",
            "importance": "0.5" if kind == "prompt" else "0.4", "tags": "",
            "refs": f"session:s-{i // 40:06d},record:{rng.getrandbits(64):016x}-{i}"}


def build_store(root: Path, n_facts: int, n_episodes: int, seed: int = 8, imported: bool = False) -> None:
    from memctl import episodes, fact as fact_mod, ledger, recall
    from memctl.store import init_store, open_store

    rng = random.Random(seed)
    init_store(root, git=False)
    store = open_store(root)
    names = []
    for i in range(n_facts):
        age = rng.uniform(0, 400)
        meta = {
            "type": rng.choice(["user", "feedback", "project", "project", "reference"]),
            "importance": rng.choice([0.05, 0.08, 0.3, 0.6, 0.9]),
            "confidence": rng.choice([0.3, 0.5, 0.7, 1.0]),
            "created": _ago(age), "updated": _ago(rng.uniform(0, age)),
        }
        if rng.random() < 0.3:
            meta["tags"] = rng.sample(["ops", "misc", "draft", "security", "money"], k=rng.choice([1, 2]))
        if rng.random() < 0.05:
            meta["expires"] = (NOW - timedelta(days=rng.uniform(2, 50))).date().isoformat()
        name = f"fact-{i:05d}"
        names.append(name)
        fact = fact_mod.Fact(name, {"name": name, "description": f"Fact {i} about the {rng.choice(TOPICS)} routine", "metadata": meta},
                             f"Details of fact {i}.\n**Why:** generated\n**How to apply:** read it\n")
        (root / "memory" / f"{name}.md").write_text(fact_mod.render(fact), encoding="utf-8")
    rows = []
    ids = []
    for i, age in enumerate(sorted((rng.uniform(0, 400) for _ in range(n_episodes)), reverse=True)):
        ep_id = f"ep-bench-{i:06d}"
        ids.append(ep_id)
        if imported:
            rows.append({"id": ep_id, "ts": _ago(age), **_turn(rng, i)})
            continue
        rows.append({
            "id": ep_id, "ts": _ago(age), "agent": "bench",
            "type": rng.choices(["decision", "error", "success", "feedback", "conflict"], weights=[3, 3, 3, 1, 1])[0],
            "description": f"Episode {i} during {rng.choice(TOPICS)}", "outcome": "resolved" if rng.random() < 0.5 else "",
            "importance": str(rng.choice([0.1, 0.2, 0.3, 0.4, 0.6, 0.8])),
            "tags": "security" if rng.random() < 0.05 else "", "refs": "",
        })
    episodes.ensure_ledger(store, commit_changes=False)
    ledger.append(store, episodes.LEDGER, rows, commit_changes=False)
    keys = names + ids
    access = [{"ts": _ago(rng.uniform(0, 400)), "agent": "bench", "command": "recall", "query": "q",
               "shown": ",".join(rng.sample(keys, 3))} for _ in range(n_episodes // 5)]
    recall.ensure_access_ledger(store)
    ledger.append(store, recall.ACCESS_LEDGER, access, commit_changes=False)


def run_once(memctl: list[str], root: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of the real command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(memctl + ["--root", str(root), "forget", "--policies", "--dry-run"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs after the first (cold) one")
    parser.add_argument("--budget", type=float, default=5.0, help="seconds")
    parser.add_argument("--keep", type=Path, help="build the store here and keep it")
    parser.add_argument("--imported", action="store_true", help="episodes shaped like imported transcripts")
    args = parser.parse_args()

    memctl = [sys.executable, "-m", "memctl"]
    env = {**os.environ, "MEMCTL_NOW": NOW.isoformat(), "MEMCTL_NO_COMMIT": "1"}
    tmp = None
    if args.keep:
        root = args.keep
    else:
        tmp = tempfile.mkdtemp(prefix="bench-forget-")
        root = Path(tmp) / "store"
    try:
        start = time.perf_counter()
        build_store(root, args.facts, args.episodes, imported=args.imported)
        print(f"built {args.facts:,} facts and {args.episodes:,} {'imported transcript ' if args.imported else ''}episodes in {time.perf_counter() - start:.1f} s ({root})")
        plan = subprocess.run(memctl + ["--root", str(root), "forget", "--policies", "--dry-run", "--json"], env=env,
                              check=True, capture_output=True, text=True)
        data = json.loads(plan.stdout)
        print(f"plan: {data['summary']}; {len(data['kept']):,} kept by never-forget classes")
        shutil.rmtree(root / ".memctl", ignore_errors=True)  # the --json run filled the parse cache
        cold = run_once(memctl, root, env)
        warm = [run_once(memctl, root, env) for _ in range(args.runs)]
        median = statistics.median(w for w, _ in warm)
        print(f"cold run (parse cache rebuilt): {cold[0]:.2f} s wall, {cold[1]:.2f} s CPU")
        print("warm runs: " + ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c in warm)
              + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        verdict = "PASS" if median <= args.budget else "FAIL"
        print(f"{verdict}: forget --policies --dry-run took {median:.2f} s (median of {len(warm)} warm runs); budget {args.budget:.1f} s")
        return 0 if verdict == "PASS" else 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
