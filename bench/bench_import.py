"""Transcript import speed (issue 18): `memctl episode import claude-code` of 10,000 records within 5 s.

    python bench/bench_import.py [--records 10000] [--runs 3] [--budget 5] [--episodes 0]

Writes a Claude Code transcript (fixed seed) of N records the way a long
session looks: user prompts, assistant replies in Japanese and English,
thinking blocks, tool calls and their results, a few sidechain records, and a
secret every 500 records. Each run imports it into a fresh store with git
(the commit included) as a real subprocess; no embedding happens (vectors are
built lazily by the next recall or `cache rebuild`). With --episodes M the
store already holds M episodes, to show the cost of reading the ledger for
what was imported before. Baseline, run side by side: a Python one-liner that
only parses every line as JSON. A second import of the same file (nothing to
add) is timed too. Prints PASS or FAIL; exits 1 on FAIL.
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

JA = ["本番デプロイは火曜日の午前に行う", "マイグレーションは users から先に流す", "キャッシュの期限を12時間にした",
      "テストが落ちた原因はフィクスチャの初期化漏れ", "週次レポートは月曜9時に送る", "ログの保存期間は30日"]
EN = ["Deploy to production on Tuesday mornings", "Run the migrations for users first", "The cache now expires after 12 hours",
      "The test failed because the fixture was not reset", "Send the weekly report on Mondays at nine"]
SECRET = "AKIA" + "Z7Q2M4N8P1R6T3V5"


def transcript(path: Path, count: int, seed: int = 18) -> dict[str, int]:
    rng = random.Random(seed)
    start = datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)
    session = "bench-session-0001"
    kinds: dict[str, int] = {}
    parent = None
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            ts = (start + timedelta(seconds=7 * i)).isoformat().replace("+00:00", "Z")
            uuid = f"rec-{i:08d}"
            roll = rng.random()
            text = f"{rng.choice(JA)}。{rng.choice(EN)} (step {i})"
            if i % 500 == 250:
                text += f" key {SECRET}"
            if roll < 0.25:
                kind, message = "user", {"role": "user", "content": text}
            elif roll < 0.55:
                kind, message = "assistant", {"role": "assistant", "content": [{"type": "text", "text": text * rng.randint(1, 4)}]}
            elif roll < 0.65:
                kind, message = "assistant", {"role": "assistant", "content": [{"type": "thinking", "thinking": text, "signature": "s"}]}
            elif roll < 0.82:
                kind, message = "assistant", {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": rng.choice(["Bash", "Read", "Edit", "Grep"]), "input": {"command": "ls -la"}}]}
            else:
                kind, message = "user", {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i - 1}", "content": "total 8\n" * rng.randint(1, 40), "is_error": rng.random() < 0.1}]}
            record = {"parentUuid": parent, "isSidechain": rng.random() < 0.02, "userType": "external", "cwd": "/home/dev/shop",
                      "sessionId": session, "version": "2.0.0", "type": kind, "message": message, "uuid": uuid, "timestamp": ts}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            parent = uuid
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def timed(argv: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def fresh_store(root: Path, episodes: int) -> None:
    from memctl import episodes as ep, ledger
    from memctl.store import init_store, open_store

    if root.exists():
        shutil.rmtree(root)
    init_store(root)
    if episodes:
        store = open_store(root)
        ep.ensure_ledger(store)
        rows = [{"id": f"ep-bench-{i:07d}", "ts": "2026-01-01T00:00:00+00:00", "agent": "bench", "type": "decision",
                 "description": f"older episode {i}", "outcome": "", "importance": "0.5", "tags": "",
                 "refs": f"session:old,record:old-{i}"} for i in range(episodes)]
        ledger.append(store, ep.LEDGER, rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=5.0, help="seconds")
    parser.add_argument("--episodes", type=int, default=0, help="episodes already in the store")
    args = parser.parse_args()

    env = {**os.environ, "MEMCTL_NO_SERVER": "1"}
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        path = tmp / "bench-session-0001.jsonl"
        kinds = transcript(path, args.records)
        print(f"transcript: {args.records:,} records ({', '.join(f'{k} {v:,}' for k, v in sorted(kinds.items()))}), "
              f"{path.stat().st_size / 1e6:.1f} MB")
        parse = [sys.executable, "-c", "import json,sys\nfor line in open(sys.argv[1], 'rb'): json.loads(line)", str(path)]
        baseline = [timed(parse, env)[0] for _ in range(args.runs)]
        runs, again = [], []
        for _ in range(args.runs):
            root = tmp / "store"
            fresh_store(root, args.episodes)
            wall, cpu, done = timed([sys.executable, "-m", "memctl", "--root", str(root), "episode", "import", "claude-code",
                                     str(path), "--json"], env)
            data = json.loads(done.stdout)
            runs.append((wall, cpu))
            again.append(timed([sys.executable, "-m", "memctl", "--root", str(root), "episode", "import", "claude-code",
                                str(path)], env)[0])
            shutil.rmtree(root / ".memctl" / "imports.json", ignore_errors=True)
        print(f"imported {data['imported']:,} episodes, {data['bad_records']} bad records, redacted {data['redacted']}, "
              f"into a store with {args.episodes:,} episodes")
        median = statistics.median(w for w, _ in runs)
        base = statistics.median(baseline)
        print("runs: " + ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c in runs)
              + f"; importing again (nothing new): median {statistics.median(again):.2f} s"
              + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"baseline (python: json.loads of every line): {base:.2f} s; import is {median / base:.1f}x that")
        verdict = "PASS" if median <= args.budget else "FAIL"
        print(f"{verdict}: episode import of {args.records:,} records took {median:.2f} s (median of {len(runs)} runs); "
              f"budget {args.budget:.1f} s")
        return 0 if verdict == "PASS" else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
