"""MEMORY.md within Claude Code's 200-line limit at scale (issue 13): what keeping the limit costs a write.

    python bench/bench_index.py [--facts 10000] [--runs 5] [--keep DIR]

Builds two throwaway stores (fixed seed) with the same N facts (English and
Japanese descriptions, five types, spread importance and dates), committed in
git: one with the default limits (200 lines, 25,000 bytes: the top facts stay
in MEMORY.md, the rest go to memory-index/<type>.md), and the baseline with the
limits set out of reach (one MEMORY.md line per fact, as before the limit was
kept). Then runs, as real subprocesses, `memctl remember` (a new fact each run:
index regeneration and its git commit included) and `memctl index --check`,
alternating the two stores run by run, and prints the medians with their ratio.
Information only: no budget, exit 0.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TYPES = ["user", "feedback", "project", "project", "reference"]
WORDS = ["deploy", "billing", "backup", "review", "release", "デプロイ", "請求", "バックアップ", "レビュー", "公開"]


def build_store(root: Path, n_facts: int, unlimited: bool, seed: int = 13) -> None:
    from memctl import fact as fact_mod, facts
    from memctl.store import init_store, open_store

    rng = random.Random(seed)
    init_store(root)
    if unlimited:
        config = root / "memctl.toml"
        text = config.read_text(encoding="utf-8")
        text = text.replace("max_index_lines = 200", "max_index_lines = 100000000").replace(
            "max_index_bytes = 25000", "max_index_bytes = 100000000000")
        config.write_text(text, encoding="utf-8")
    for i in range(n_facts):
        word = rng.choice(WORDS)
        desc = (f"{word}の手順その{i}: 公開前に台帳で重複を確認する" if rng.random() < 0.5
                else f"{word} rule {i}: check the ledger before publishing")
        meta = {"type": rng.choice(TYPES), "importance": rng.choice([0.3, 0.5, 0.6, 0.8, 0.9]),
                "updated": f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T09:00:00+09:00"}
        fact = fact_mod.Fact(f"fact-{i:05d}", {"name": f"fact-{i:05d}", "description": desc, "metadata": meta}, "body\n")
        (root / "memory" / f"fact-{i:05d}.md").write_text(fact_mod.render(fact), encoding="utf-8")
    facts.reindex(open_store(root))
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@b", "commit", "-qm", "facts"],
                   check=True)


def timed(root: Path, *args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"memctl {' '.join(args)} failed: {done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="memctl-bench-index-"))
    limited, unlimited = base / "limited", base / "unlimited"
    try:
        for root, flag in ((limited, False), (unlimited, True)):
            if not root.exists():
                build_store(root, args.facts, flag)
        lines = (limited / "memory" / "MEMORY.md").read_text(encoding="utf-8").count("\n")
        topics = sorted(p.name for p in (limited / "memory" / "memory-index").glob("*.md"))
        base_lines = (unlimited / "memory" / "MEMORY.md").read_text(encoding="utf-8").count("\n")
        print(f"{args.facts} facts: MEMORY.md {lines} lines + topic files {topics}; baseline MEMORY.md {base_lines} lines")
        results: dict[str, dict[str, list[float]]] = {"remember": {"limited": [], "unlimited": []},
                                                       "index --check": {"limited": [], "unlimited": []}}
        for run in range(args.runs):
            for label, root in (("limited", limited), ("unlimited", unlimited)):
                results["remember"][label].append(
                    timed(root, "remember", f"bench-{run}", "--description", f"ベンチの事実{run}: new fact {run}"))
                results["index --check"][label].append(timed(root, "index", "--check"))
        for what, by in results.items():
            new, old = statistics.median(by["limited"]), statistics.median(by["unlimited"])
            print(f"{what:14s} median of {args.runs}: {new * 1000:.0f} ms with the limit, "
                  f"{old * 1000:.0f} ms baseline (one line per fact): {new / old:.2f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
