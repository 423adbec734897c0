"""Start-up and listing budgets (issue 2), measured beside `python -c pass`.

    python bench/bench_startup.py [--facts 1000] [--runs 15] [--strict]

Builds a throwaway store of N facts (half Japanese), then times, in the same
run and interleaved so machine noise hits all alike:
  - python -c pass               (the floor: interpreter start-up)
  - memctl --help                (budget: <= 250 ms)
  - memctl list --json           (budget: <= 400 ms on 1,000 facts)
Reports medians and ratios to the floor. --strict exits 1 on a missed budget.
memctl runs byte-compiled, as an installed package does (pip writes .pyc
files), with its cache in the temp dir, whatever PYTHONDONTWRITEBYTECODE says.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGETS_MS = {"memctl --help": 250.0, "memctl list --json": 400.0}


def build_store(root: Path, count: int) -> None:
    from memctl import facts
    from memctl.store import init_store, open_store

    init_store(root)
    store = open_store(root)
    os.environ["MEMCTL_NO_COMMIT"] = "1"
    for i in range(count):
        if i % 2:
            desc = f"記事{i}の公開は朝9時に行い、タイトルは32文字以内に収める（ルール{i}）"
        else:
            desc = f"Rule {i}: deploy job {i} runs before the morning report and retries {i % 7} times"
        facts.remember(store, facts.FactInput(name=f"fact-{i:05d}", description=desc, type=("feedback", "project", "user")[i % 3], why=f"理由 {i}", how=f"how {i}"), force=True)
    del os.environ["MEMCTL_NO_COMMIT"]
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "bench store"], check=True)


def time_once(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a budget is missed")
    args = parser.parse_args()

    memctl = shutil.which("memctl", path=str(Path(sys.executable).parent)) or shutil.which("memctl")
    if memctl is None:
        print("memctl is not installed in this environment", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-"))
    try:
        root = tmp / "store"
        print(f"building a store of {args.facts} facts in {root} ...", file=sys.stderr)
        build_store(root, args.facts)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "memctl --help": [memctl, "--help"],
            "memctl list --json": [memctl, "--root", str(root), "list", "--json"],
        }
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        for argv in commands.values():  # warm the page cache and write the bytecode
            time_once(argv, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                samples[name].append(time_once(argv, env))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    floor = statistics.median(samples["python -c pass"])
    missed = False
    print(f"{'command':<22} {'median ms':>10} {'min ms':>8} {'x python':>9} {'budget':>8}  result")
    for name, values in samples.items():
        median = statistics.median(values)
        budget = BUDGETS_MS.get(name)
        verdict = ""
        if budget is not None:
            verdict = "PASS" if median <= budget else "FAIL"
            missed |= median > budget
        print(f"{name:<22} {median:>10.1f} {min(values):>8.1f} {median / floor:>9.2f} {budget or '':>8}  {verdict}")
    print(f"({args.runs} interleaved runs each, {args.facts} facts, {os.cpu_count()} cores)")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
