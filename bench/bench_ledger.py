"""Ledger speed beside the coreutils pipelines it replaces, measured in the same run.

    python bench/bench_ledger.py [--strict] [--append-rows 100000] [--stats-rows 1000000]

Builds, in a temp dir, a store with a 100,000-row ledger (header, unique theme)
and a 1,000,000-row headerless ledger, then times real processes:

- `memctl ledger append NAME ... --unique theme --no-commit` against
  `grep -Fxq LINE FILE || printf '%s\\n' LINE >> FILE` plus `python -c pass`
  (budget: <= 250 ms wall and <= 2x that baseline);
- (for information) the same append in a git store with its commit, the default;
- `memctl ledger dups NAME theme` / `stats NAME --by platform` against
  `cut -fN FILE | sort | uniq -d` / `uniq -c` (budget: <= 3x), after checking
  that both print the same bytes.

Medians of wall time. The pipelines run with LC_ALL=C (byte order, the order
memctl prints, and sort's fastest collation). memctl runs with a bytecode cache
in the temp dir, as an installed package would (pip compiles .pyc files);
--no-bytecode-cache measures it with the environment as it is instead.
Prints a table with PASS/FAIL per budget; exits 1 on a miss only with --strict.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLATFORMS = ("zenn", "note", "qiita", "hatena", "devto")
APPEND_WALL_MS = 250.0
APPEND_RATIO = 2.0
COUNT_RATIO = 3.0


def memctl_command() -> list[str]:
    script = Path(sys.executable).with_name("memctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memctl"]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall(argv: list[str], env: dict[str, str], repeat: int, vary=None, stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """Median wall and CPU (user+sys, all child processes) ms of running argv `repeat` times.

    CPU time is reported beside wall time because on a shared machine a
    single process gets a smaller share of the CPUs than a 3-process pipeline.
    """
    walls, cpus = [], []
    for i in range(repeat):
        args = vary(i) if vary else argv
        cpu, start = _child_cpu(), time.perf_counter()
        proc = subprocess.run(args, env=env, stdout=stdout, stderr=subprocess.PIPE)
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((_child_cpu() - cpu) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"failed: {' '.join(args)[:200]}\n{proc.stderr.decode(errors='replace')}")
    return statistics.median(walls), statistics.median(cpus)


def write_rows(path: Path, rows: int, seed: int, header: str | None) -> None:
    rng = random.Random(seed)
    themes = max(1, rows * 6 // 10)  # some themes repeat, so dups has work to do
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        if header:
            handle.write(header + "\n")
        chunk = []
        for i in range(rows):
            chunk.append(
                f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}\t{rng.choice(PLATFORMS)}\tslug-{i}-{rng.randrange(100000)}"
                f"\tテーマ {rng.randrange(themes)} — MCPサーバーのテストとデバッグ \\t [draft]/*\n"
            )
            if len(chunk) == 10000:
                handle.write("".join(chunk))
                chunk.clear()
        handle.write("".join(chunk))


def commit_round(args, tmp: Path, env: dict[str, str], memctl: list[str]) -> tuple[float, float] | None:
    """The same append in a git store, committing as it does by default (git add hashes the whole file)."""
    if shutil.which("git") is None:
        return None
    root = tmp / "git-store"
    subprocess.run([*memctl, "init", str(root)], env=env, check=True, capture_output=True)
    base = [*memctl, "--root", str(root)]
    subprocess.run([*base, "ledger", "create", "themes", "--columns", "date,platform,slug,theme", "--unique", "theme"],
                   env=env, check=True, capture_output=True)
    write_rows(root / "ledgers" / "themes.tsv", args.append_rows, 1, header="date\tplatform\tslug\ttheme")
    subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost",
                    "commit", "-qam", "bench rows"], env=env, check=True)
    append = lambda i: [*base, "ledger", "append", "themes", "date=2026-10-01", "platform=zenn",  # noqa: E731
                        f"slug=bench-{i}", f"theme=新しいテーマ {i} / [x]*", "--unique", "theme"]
    return wall([], env, max(3, args.repeat // 3), vary=append)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when a budget is missed")
    parser.add_argument("--append-rows", type=int, default=100_000)
    parser.add_argument("--stats-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=15, help="runs per append measurement")
    parser.add_argument("--count-repeat", type=int, default=5, help="runs per dups/stats measurement")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="do not give memctl a .pyc cache")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-"))
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, tmp: Path) -> int:
    env = dict(os.environ)
    env.pop("MEMCTL_ROOT", None)
    if not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    pipe_env = dict(env, LC_ALL="C")
    memctl = memctl_command()
    root = tmp / "store"
    subprocess.run([*memctl, "init", "--no-git", str(root)], env=env, check=True, capture_output=True)
    base = [*memctl, "--root", str(root)]

    print(f"building ledgers in {tmp} ...", file=sys.stderr)
    subprocess.run([*base, "ledger", "create", "themes", "--columns", "date,platform,slug,theme", "--unique", "theme",
                    "--no-commit"], env=env, check=True, capture_output=True)
    themes = root / "ledgers" / "themes.tsv"
    write_rows(themes, args.append_rows, 1, header="date\tplatform\tslug\ttheme")
    big = root / "ledgers" / "big.tsv"
    write_rows(big, args.stats_rows, 2, header=None)
    subprocess.run([*base, "ledger", "adopt", str(big), "--columns", "date,platform,slug,theme", "--no-commit"],
                   env=env, check=True, capture_output=True)
    shell_copy = tmp / "shell-themes.tsv"
    shutil.copyfile(themes, shell_copy)

    results = []

    # --- append --unique on the 100k-row ledger
    wall([*base, "ledger", "list"], env, 2)  # warm the bytecode cache and the page cache
    append = lambda i: [*base, "ledger", "append", "themes", "date=2026-10-01", "platform=zenn",  # noqa: E731
                        f"slug=bench-{i}", f"theme=新しいテーマ {i} / [x]*", "--unique", "theme", "--no-commit"]
    ours = wall([], env, args.repeat, vary=append)
    shell = "grep -Fxq -- \"$1\" \"$2\" || printf '%s\\n' \"$1\" >> \"$2\""
    line = lambda i: f"2026-10-01\tzenn\tbench-{i}\t新しいテーマ {i} / [x]*"  # noqa: E731
    grep = wall([], pipe_env, args.repeat, vary=lambda i: ["sh", "-c", shell, "sh", line(i), str(shell_copy)])
    python = wall([sys.executable, "-c", "pass"], env, args.repeat)
    library = ("import sys; from memctl import ledger, store; "
               "ledger.append(store.open_store(sys.argv[1]), 'themes', [dict(date='2026-10-02', platform='zenn', "
               "slug='lib', theme='library ' + sys.argv[2])], unique='theme', commit_changes=False)")
    lib = wall([], env, args.repeat, vary=lambda i: [sys.executable, "-c", library, str(root), str(i)])
    baseline = (grep[0] + python[0], grep[1] + python[1])
    results.append((f"append --unique, {args.append_rows:,} rows: wall", ours, None, f"<= {APPEND_WALL_MS:.0f} ms",
                    ours[0] <= APPEND_WALL_MS))
    results.append(("append --unique vs grep -Fxq + printf + python -c pass", ours, baseline,
                    f"<= {APPEND_RATIO:.0f}x", ours[0] <= APPEND_RATIO * baseline[0]))
    results.append(("  (info) grep -Fxq + printf alone", grep, None, "", None))
    results.append(("  (info) python -c pass", python, None, "", None))
    results.append(("  (info) ledger.append from python -c, no CLI", lib, baseline, "", None))
    committed = commit_round(args, tmp, env, memctl)
    if committed is not None:
        results.append(("  (info) append --unique with its git commit (the default)", committed, None, "", None))

    # --- dups / stats on the 1M-row ledger: same bytes, then time
    for label, argv, column in (("dups theme", ["dups", "big", "theme"], "-f4 | sort | uniq -d"),
                                ("stats --by platform", ["stats", "big", "--by", "platform"], "-f2 | sort | uniq -c")):
        command = f"cut {column.split(' ', 1)[0]} {big} {column.split(' ', 1)[1]}"
        mine = subprocess.run([*base, "ledger", *argv], env=env, capture_output=True, check=True).stdout
        theirs = subprocess.run(["sh", "-c", command], env=pipe_env, capture_output=True, check=True).stdout
        if mine != theirs:
            raise SystemExit(f"ledger {label} differs from `{command}`")
        ours = wall([*base, "ledger", *argv], env, args.count_repeat)
        pipe = wall(["sh", "-c", command], pipe_env, args.count_repeat)
        results.append((f"{label}, {args.stats_rows:,} rows vs cut {column}", ours, pipe,
                        f"<= {COUNT_RATIO:.0f}x", ours[0] <= COUNT_RATIO * pipe[0]))

    print(f"memctl: {' '.join(memctl)}; bytecode cache: {'no' if args.no_bytecode_cache else 'yes'}; "
          f"cpus: {os.cpu_count()}; load: {os.getloadavg()[0]:.2f}")
    width = max(len(r[0]) for r in results)
    print(f"{'measurement':<{width}}  {'memctl ms':>9}  {'baseline ms':>11}  {'ratio':>6}  {'budget':>9}  {'result':<6}"
          f"  {'cpu ms':>7}  {'base cpu':>8}  {'cpu ratio':>9}")
    missed = 0
    for name, ours, theirs, budget, ok in results:
        verdict = "" if ok is None else ("PASS" if ok else "FAIL")
        missed += ok is False
        ratio = f"{ours[0] / theirs[0]:5.2f}x" if theirs else ""
        cpu_ratio = f"{ours[1] / theirs[1]:5.2f}x" if theirs and theirs[1] else ""
        print(f"{name:<{width}}  {ours[0]:9.1f}  {f'{theirs[0]:11.1f}' if theirs else '':>11}  {ratio:>6}  {budget:>9}  "
              f"{verdict:<6}  {ours[1]:7.1f}  {f'{theirs[1]:8.1f}' if theirs else '':>8}  {cpu_ratio:>9}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
