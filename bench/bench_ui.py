"""`memctl ui` on a big store (issue 28): start-up and each view's warm answer time.

    python bench/bench_ui.py [--facts 10000] [--episodes 50000] [--runs 9] [--starts 5] [--keep] [--strict]
                             [--store DIR]   (a store kept by an earlier --keep: not built again)

Builds a throwaway git store the way bench/bench_recall.py does (N fact files,
half Japanese, written directly and indexed once; M episodes by one ledger
append), then commits a month of STATE.md updates (one a day, each under its own
pinned clock). Then:

  - python -c pass                                  (the floor: interpreter start-up)
  - `memctl ui --no-open` until it prints its URL    (budget < 1 s), then Ctrl-C
  - each view of one running `memctl ui`, asked once to warm it, then RUNS times
    in turn (interleaved, so machine noise hits all alike)    (budget <= 200 ms)
  - `memctl recall "deploy schedule" --mode keyword --no-log` beside them: the same
    search from the command line (bench/bench_recall.py's row), so that figures taken
    on a loaded machine can be read against it

Reports medians and minimums in ms, the ratio to `python -c pass`, PASS/FAIL per
budget, and the load average before and after; --strict exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import build_store  # noqa: E402  (the same big store)

START_BUDGET_MS = 1000.0
VIEW_BUDGET_MS = 200.0
VIEWS = {
    "facts (list by type)": "/",
    "search, English (keyword)": "/?q=" + quote("deploy schedule"),
    "search, Japanese (keyword)": "/?q=" + quote("記事の公開"),
    "a fact's page": "/fact?name=fact-00042",
    "injected text (session start + prompt)": "/inject?prompt=" + quote("deploy schedule for the release"),
    "episodes (timeline, charts)": "/episodes",
    "episodes, type error, agent codex": "/episodes?type=error&agent=codex",
    "STATE.md charts (30 commits)": "/state",
    "ledger counts (episodes)": "/ledgers?name=episodes",
    "conflicts (merge copies)": "/conflicts",
}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def month_of_state(root: Path, env: dict[str, str]) -> None:
    start = datetime(2026, 3, 1, 9, tzinfo=timezone.utc)
    for day in range(30):
        stamp = (start + timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ")
        subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "state", "update", "--from-json", "-"],
                       input=f'{{"completed": {day * 3}, "pending": {90 - day * 2}}}', text=True, check=True,
                       capture_output=True,
                       env={**env, "MEMCTL_NOW": stamp, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
                            "MEMCTL_NO_COMMIT": "0"})


def start_ui(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str, float]:
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "ui", "--no-open"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    took = (time.perf_counter() - began) * 1000
    found = re.search(r"http://127\.0\.0\.1:\d+/", line)
    if not found:
        proc.kill()
        raise SystemExit(f"memctl ui did not start: {line}{proc.stderr.read()}")
    return proc, found.group(0).rstrip("/"), took


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    if proc.returncode != 0:
        raise SystemExit(f"memctl ui exited {proc.returncode} on Ctrl-C")


def fetch(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as answer:
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"{url}: {answer.status}")
    return (time.perf_counter() - began) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--store", type=Path, help="a store an earlier --keep left (its size is not checked)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-ui-"))
    env = dict(os.environ, MEMCTL_NO_COMMIT="1", MEMCTL_HOOK_RESIDENT="0", MEMCTL_NO_SERVER="1")
    env.pop("MEMCTL_ROOT", None)
    env.pop("MEMCTL_NOW", None)
    root = args.store or tmp / "store"
    try:
        print(f"load average before: {load()}", flush=True)
        if args.store is None:
            began = time.perf_counter()
            build_store(root, args.facts, args.episodes, env)
            month_of_state(root, env)
            print(f"store: {args.facts} facts, {args.episodes} episodes, 30 STATE.md commits "
                  f"(built in {time.perf_counter() - began:.1f} s)", flush=True)
        else:
            print(f"store: {root} (kept by an earlier run)", flush=True)
        floor = []
        starts = []
        for _ in range(args.starts):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
            floor.append((time.perf_counter() - t) * 1000)
            proc, _, took = start_ui(root, env)
            stop(proc)
            starts.append(took)
        proc, base, _ = start_ui(root, env)
        try:
            for path in VIEWS.values():  # warm: each view once (the index, the parse cache, the ledger reads)
                fetch(base + path)
            times: dict[str, list[float]] = {name: [] for name in VIEWS}
            cli: list[float] = []
            recall = [sys.executable, "-m", "memctl", "--root", str(root), "recall", "deploy schedule", "--mode",
                      "keyword", "--no-log"]
            for _ in range(args.runs):
                for name, path in VIEWS.items():
                    times[name].append(fetch(base + path))
                t = time.perf_counter()
                subprocess.run(recall, env=env, stdout=subprocess.DEVNULL, check=True)
                cli.append((time.perf_counter() - t) * 1000)
        finally:
            stop(proc)
        py = statistics.median(floor)
        misses = 0
        print(f"\n| what | median ms | min ms | × python -c pass ({py:.1f} ms) | budget |")
        print("|---|---|---|---|---|")
        start_median = statistics.median(starts)
        ok = start_median < START_BUDGET_MS
        misses += not ok
        print(f"| `memctl ui` until its URL is printed ({args.starts} starts) | {start_median:.1f} | {min(starts):.1f} "
              f"| {start_median / py:.2f} | < {START_BUDGET_MS:.0f}: {'PASS' if ok else 'FAIL'} |")
        for name, values in times.items():
            median = statistics.median(values)
            ok = median <= VIEW_BUDGET_MS
            misses += not ok
            print(f"| {name} | {median:.1f} | {min(values):.1f} | {median / py:.2f} | ≤ {VIEW_BUDGET_MS:.0f}: "
                  f"{'PASS' if ok else 'FAIL'} |")
        cli_median = statistics.median(cli)
        print(f"| baseline: `memctl recall \"deploy schedule\" --mode keyword --no-log` (a process) | {cli_median:.1f} "
              f"| {min(cli):.1f} | {cli_median / py:.2f} | |")
        print(f"\nruns: {args.runs} per view (interleaved), after one warm-up each; load average after: {load()}")
        return 1 if misses and args.strict else 0
    finally:
        if args.keep or args.store:
            print(f"kept: {root}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
