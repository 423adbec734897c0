"""recall / context / hybrid recall, this code against another, side by side on a kept store.

    python bench/ab_recall.py STORE BASELINE_STORE BASELINE_SRC [--runs 7] [--query "deploy schedule"]

STORE: a store kept by `python bench/bench_recall.py --hybrid --keep` (its vector cache
filled). BASELINE_STORE: a copy of it whose .memctl/vectors is hard-linked (a copied
vectors.npy is a new inode, which its manifest rejects), e.g.
`cp -a STORE B && rm -r B/.memctl/vectors && cp -al STORE/.memctl/vectors B/.memctl/`.
BASELINE_SRC: a folder holding the other code's `memctl` package
(`git archive COMMIT memctl | tar -x -C DIR`), imported through PYTHONPATH.
Checks that both give the same output, then times each command interleaved
with `python -c pass`: wall and CPU (user + system) medians; CPU is what a
loaded machine disturbs least.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')[:500]}")
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("baseline_store", type=Path)
    parser.add_argument("baseline_src", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--query", default="deploy schedule")
    args = parser.parse_args()
    env = dict(os.environ, MEMCTL_NO_COMMIT="1", PYTHONPYCACHEPREFIX=str(args.store.parent / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("MEMCTL_ROOT", None)
    script = Path(sys.executable).with_name("memctl")
    memctl = [str(script)] if script.exists() else [sys.executable, "-m", "memctl"]
    commands = {"python -c pass": ([sys.executable, "-c", "pass"], env)}
    for tag, root, run_env in (("after", args.store, env),
                               ("before", args.baseline_store, dict(env, PYTHONPATH=str(args.baseline_src.resolve())))):
        base = [*memctl, "--root", str(root)]
        commands[f"recall keyword [{tag}]"] = ([*base, "recall", args.query, "--mode", "keyword", "--no-log"], run_env)
        commands[f"context --query [{tag}]"] = ([*base, "context", "--query", args.query, "--mode", "keyword",
                                                 "--no-log", "--budget", "4000"], run_env)
        commands[f"recall hybrid [{tag}]"] = ([*base, "recall", args.query, "--mode", "hybrid", "--no-log"], run_env)
    outputs = {}
    for name, (argv, run_env) in commands.items():
        once(argv, run_env)  # warm
        outputs[name] = once(argv, run_env)[2]
    for kind in ("recall keyword", "context --query", "recall hybrid"):
        print(f"{kind}: same output before and after: {outputs[f'{kind} [after]'] == outputs[f'{kind} [before]']}")
    load = os.getloadavg()[0]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (argv, run_env) in commands.items():
            samples[name].append(once(argv, run_env)[:2])
    floor = statistics.median(w for w, _ in samples["python -c pass"])
    floor_cpu = statistics.median(c for _, c in samples["python -c pass"])
    print(f"{'command':<26} {'wall ms':>8} {'min':>7} {'x py':>6} {'cpu ms':>7} {'cpu x py':>8}")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"{name:<26} {wall:>8.1f} {min(w for w, _ in values):>7.1f} {wall / floor:>6.2f} {cpu:>7.1f} {cpu / floor_cpu:>8.2f}")
    print(f"({args.runs} interleaved runs, medians; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
