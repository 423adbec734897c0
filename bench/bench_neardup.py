"""near-dup against the naive baseline, side by side in one run (issues 5 and 7).

    python bench/bench_neardup.py ../shared/data/jsts-train/train-v1.3.json \
        --model e5-small-q4 | st:PATH_OR_NAME | char-ngram \
        [--rows 10000] [--appends 3] [--big-rows 100000] [--queries 10] [--json OUT]

1. A store with a ledger of --rows Japanese rows (JSTS sentences as themes).
   After a warm-up that builds both caches, each round appends one row and
   times, as fresh processes, `memctl near-dup` and `bench/naive_neardup.py`
   (same model: loads it, and re-embeds every row because the count changed).
   Also times `python -c pass` as the floor of any Python command.
2. A ledger of --big-rows rows (the distinct JSTS sentences repeated: the
   matrix has that many rows, the embedding work is the distinct ones), its
   cache built by one in-process near-dup, an `embed-server` started and
   warmed, then --queries `memctl near-dup` calls timed one by one, and the
   same queries through one `--stdin` call. `--appends 0` skips round 1.

Every figure is measured in this run; ratios are computed, never assumed.
The data is read from the path given, never copied into the repository.
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


def jsts(path: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Distinct sentences in file order, and close pairs (label >= 4.5) for queries."""
    seen: dict[str, None] = {}
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            seen.setdefault(row["sentence1"])
            seen.setdefault(row["sentence2"])
            if float(row["label"]) >= 4.5:
                pairs.append((row["sentence1"], row["sentence2"]))
    return list(seen), pairs


def config_for(model: str) -> str:
    if model.startswith("st:"):
        return f'[embedding]\nbackend = "sentence-transformers"\nmodel = {json.dumps(model[3:])}\n'
    return f'[embedding]\nbackend = "{model}"\n'


def run(argv: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
    return time.perf_counter() - started, done


def memctl_argv(root: Path, *args: str) -> list[str]:
    """The installed `memctl` script beside this Python, as users run it (else `python -m memctl`)."""
    script = Path(sys.executable).with_name("memctl")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "memctl"]
    return [*command, "--root", str(root), *args]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def setup_store(root: Path, model: str):
    from memctl.store import init_store, open_store

    init_store(root, git=False)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write("\n" + config_for(model))
    return open_store(root)


def fill(store, name: str, texts: list[str]) -> None:
    from memctl import ledger

    ledger.create(store, name, ["date", "theme"], commit_changes=False)
    for start in range(0, len(texts), 20000):
        ledger.append(store, name, [{"date": "2026-01-01", "theme": t} for t in texts[start : start + 20000]], commit_changes=False)


def append_round(args, root: Path, store, env: dict[str, str], pool: list[str], queries: list[str]) -> dict:
    from memctl import ledger

    ledger_path = store.ledgers_dir / "bench.tsv"
    npy = root / "naive.npy"
    naive = [sys.executable, str(HERE / "naive_neardup.py"), str(ledger_path), "theme", "--model", args.model, "--npy", str(npy)]
    nd = ("near-dup", "--ledger", "bench", "--column", "theme", "--json")

    t_build, done = run(memctl_argv(root, *nd, queries[0]), env)
    built = json.loads(done.stdout)
    print(f"  memctl first build: {t_build:.1f}s ({built['embedded']} rows embedded, {built['embedder']})", flush=True)
    t_nbuild, _ = run(naive + [queries[0]], env)
    print(f"  naive first build:  {t_nbuild:.1f}s", flush=True)

    mem, nai, embedded, verdicts = [], [], [], []
    for k in range(args.appends):
        ledger.append(store, "bench", [{"date": "2026-01-02", "theme": pool[k]}], commit_changes=False)
        query = queries[(k + 1) % len(queries)]
        t, done = run(memctl_argv(root, *nd, query), env)
        data = json.loads(done.stdout)
        mem.append(t)
        embedded.append(data["embedded"])
        verdicts.append((done.returncode, data["hits"][0]["where"] if data["hits"] else None))
        t, _ = run(naive + [query], env)
        nai.append(t)
        print(f"  append {k + 1}: memctl {mem[-1]:.3f}s (embedded {embedded[-1]})   naive {nai[-1]:.2f}s", flush=True)
    return {
        "rows": args.rows, "memctl_build_s": t_build, "naive_build_s": t_nbuild,
        "memctl_append_s": mem, "naive_append_s": nai, "embedded_after_append": embedded,
        "memctl_median_s": median(mem), "naive_median_s": median(nai), "speedup": median(nai) / median(mem),
        "exit_codes": [v[0] for v in verdicts],
    }


def server_round(args, root: Path, store, env: dict[str, str], queries: list[str]) -> dict:
    from memctl.embed import server

    # Build the big cache in its own process first (the way `memctl cache rebuild` or the
    # first near-dup would): a server asked to embed 100k rows answers only when done, and a
    # client gives up after MEMCTL_SERVER_TIMEOUT. The server then loads it from disk.
    nd = ("near-dup", "--ledger", "big", "--column", "theme")
    t_cache, done = run(memctl_argv(root, *nd, "--json", queries[0]), {**env, "MEMCTL_NO_SERVER": "1"})
    if done.returncode not in (0, 1):
        raise SystemExit(f"building the big cache failed: {done.stderr}")
    built = json.loads(done.stdout)
    print(f"  cache build in one process: {t_cache:.1f}s ({built['rows']} rows, {built['embedded']} texts embedded)", flush=True)
    proc = subprocess.Popen(memctl_argv(root, "embed-server"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while server.hello(store) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"embed-server did not start: {proc.stderr.read()}")
            time.sleep(0.1)
        t_build, done = run(memctl_argv(root, *nd, "--json", queries[0]), env)
        data = json.loads(done.stdout)
        print(f"  first query (the server loads the {data['rows']}-row cache, {data['embedded']} rows embedded) "
              f"{t_build:.1f}s via {data['via']}", flush=True)
        run(memctl_argv(root, *nd, queries[1]), env)  # page cache and server warm
        times = []
        for q in queries[: args.queries]:
            t, done = run(memctl_argv(root, *nd, q), env)
            assert done.returncode in (0, 1), done.stderr
            times.append(t)
        batch = "\n".join(queries[: args.queries]) + "\n"
        t_stdin, done = run(memctl_argv(root, *nd, "--stdin"), env, stdin=batch)
        via = json.loads(run(memctl_argv(root, *nd, "--json", queries[0]), env)[1].stdout)["via"]
        return {
            "rows": data["rows"], "distinct_embedded": built["embedded"], "cache_build_s": t_cache,
            "first_query_s": t_build, "via": via,
            "query_s": times, "median_s": median(times), "max_s": max(times),
            "stdin_total_s": t_stdin, "stdin_per_query_s": t_stdin / args.queries,
        }
    finally:
        subprocess.run(memctl_argv(root, "embed-server", "--stop"), env=env, capture_output=True)
        proc.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsts", type=Path, help="train-v1.3.json from JGLUE JSTS")
    parser.add_argument("--model", default="e5-small-q4", help="e5-small-q4 | st:PATH_OR_NAME | char-ngram")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=3, help="0 skips the append round")
    parser.add_argument("--big-rows", type=int, default=100_000, help="0 skips the embed-server round")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    sentences, close = jsts(args.jsts)
    queries = [b for a, b in close if a in set(sentences[: args.rows])][: max(args.queries, args.appends + 1)]
    pool = sentences[args.rows : args.rows + args.appends]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMCTL_NO_COMMIT": "1", "MEMCTL_NO_SERVER": "1"}
    results: dict = {"model": args.model, "python": sys.version.split()[0]}

    with tempfile.TemporaryDirectory(prefix="memctl-bench-") as tmp:
        # Byte-compiled, as an installed package is (pip writes .pyc files), whatever
        # PYTHONDONTWRITEBYTECODE the caller has; the cache lives in the temp dir.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        root = Path(tmp) / "store"
        store = setup_store(root, args.model)
        t_pass = median([run([sys.executable, "-c", "pass"], env)[0] for _ in range(5)])
        t_help = median([run(memctl_argv(root, "--help"), env)[0] for _ in range(3)])
        results.update(python_pass_s=t_pass, memctl_help_s=t_help)
        print(f"python -c pass {t_pass * 1000:.0f} ms; memctl --help {t_help * 1000:.0f} ms", flush=True)

        if args.appends:
            print(f"[1] {args.rows} rows, one append then near-dup ({args.model})", flush=True)
            fill(store, "bench", sentences[: args.rows])
            results["append"] = append_round(args, root, store, env, pool, queries)
            a = results["append"]
            print(
                f"  median: memctl {a['memctl_median_s'] * 1000:.0f} ms, naive {a['naive_median_s']:.2f} s "
                f"-> memctl {a['speedup']:.0f}x faster; memctl / python -c pass = {a['memctl_median_s'] / t_pass:.1f}x",
                flush=True,
            )

        if args.big_rows:
            print(f"[2] {args.big_rows} rows, embed-server warm", flush=True)
            big = [sentences[i % len(sentences)] for i in range(args.big_rows)]
            fill(store, "big", big)
            server_env = {k: v for k, v in env.items() if k != "MEMCTL_NO_SERVER"}
            results["server"] = s = server_round(args, root, store, server_env, queries)
            print(
                f"  near-dup per call: median {s['median_s'] * 1000:.0f} ms, max {s['max_s'] * 1000:.0f} ms "
                f"(via {s['via']}); --stdin: {s['stdin_per_query_s'] * 1000:.0f} ms per query",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
