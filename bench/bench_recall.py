"""Recall and context latency (issue 6), measured beside `grep -rl` and `python -c pass`.

    python bench/bench_recall.py [--facts 10000] [--episodes 50000] [--runs 10] [--strict]
                                 [--query "deploy schedule"] [--word deploy] [--keep] [--hybrid]
                                 [--watch] [--baseline-src DIR] [--installed]

Builds a throwaway git store: N fact files (half Japanese, half English
descriptions and bodies) written directly with memctl.fact.render and indexed
once by facts.reindex (N `remember` calls would take too long), and M episodes
appended to ledgers/episodes.tsv by one ledger.append. Runs every command once
to warm the caches (.memctl/facts.json, the page cache, the bytecode cache),
then times, interleaved so machine noise hits all alike:

  - python -c pass                                   (the floor: interpreter start-up)
  - memctl recall QUERY on an empty store            (memctl's own floor: imports, CLI; exits 1)
  - grep -rl WORD memory/ ledgers/                   (the same files, no ranking)
  - memctl recall QUERY --mode keyword --no-log                      (budget <= 100 ms)
  - memctl recall QUERY --source all --mode keyword --no-log         (budget <= 100 ms)
  - memctl context --query QUERY --mode keyword --no-log --budget 4000 (budget <= 120 ms)
  - with --watch: the three rows above again with `memctl embed-server` running for the store,
    whose watch of the fact folders spares each command its stat of every fact file (memctl/watch.py)
  - with --hybrid: memctl recall QUERY --mode hybrid --no-log, e5-small-q4 in-process
    (MEMCTL_NO_SERVER=1), after a warm-up run that fills the facts' vector cache, and the
    same with `memctl embed-server` running for the store (it answers the vector part
    with its model loaded and the vectors in memory)             (budget <= 150 ms, each)

Reports medians, minimums and ratios to grep and to python start-up, with
PASS/FAIL per budget (on the median wall time); --strict exits 1 on a miss.
Each row also has the median CPU time (user + system) of the process, which
other work on a shared machine disturbs much less than the wall time.
--baseline-src DIR times the same memctl commands a second time, interleaved,
with memctl imported from DIR (e.g. `git archive COMMIT memctl | tar -x -C DIR`), on
a copy of the store (so that two index versions do not rebuild each other's):
a before/after comparison under the same load. memctl runs with a bytecode
cache in the temp dir, as an installed package would (pip compiles .pyc
files); --no-bytecode-cache measures it with the environment as it is.
--installed times memctl as a user installs it: `pip install .`, not
editable, into a venv of its own (bench/installed.py; byte-compiled by pip), and
the `python -c pass` row with that venv's interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

BUDGETS_MS = {"memctl recall (facts)": 100.0, "memctl recall --source all": 100.0,
              "memctl context --query": 120.0, "memctl recall --mode hybrid (e5)": 150.0,
              "memctl recall --mode hybrid (e5, embed-server)": 150.0,
              "memctl recall (facts), watched": 100.0, "memctl recall --source all, watched": 100.0,
              "memctl context --query, watched": 120.0}
INSTALLED: list[Path] = []  # the venv of --installed
FACT_TYPES = ("user", "feedback", "project", "reference", "procedure")
EPISODE_TYPES = ("decision", "error", "success", "feedback", "conflict")
EN_WORDS = (
    "deploy schedule backup retry queue cache index migration release review report invoice budget "
    "latency timeout token quota webhook cron pipeline staging database replica snapshot rollback "
    "feature flag monitor alert dashboard article title draft publish editor image thumbnail upload "
    "customer ticket refund contract meeting agenda summary translation glossary style guide test "
    "coverage lint format branch merge conflict tag version changelog license audit secret rotation"
).split()
JA_WORDS = (
    "記事 公開 予約 投稿 見出し 画像 要約 翻訳 用語 校正 締切 会議 議事録 請求 予算 契約 顧客 "
    "問い合わせ 返金 障害 復旧 監視 通知 設定 更新 削除 移行 検証 試験 手順 担当 承認 申請 在庫 "
    "発注 配送 朝 夜 週末 月末 毎日 毎週 優先 重要 注意 確認 報告 共有 保存 整理 分類"
).split()
JA_TEMPLATES = (
    "{a}の{b}は{c}の前に行い、{d}を必ず確認する",
    "{a}と{b}の{c}は週に一度まとめて{d}する",
    "{a}で{b}が起きたら、まず{c}を止めて{d}を見る",
    "{a}の{b}は担当者が{c}してから{d}に回す",
)
EN_TEMPLATES = (
    "Run the {a} {b} before the {c}, and check the {d} first",
    "The {a} {b} waits for the {c} {d} to finish",
    "When the {a} fails, pause the {b} and look at the {c} {d}",
    "Keep every {a} {b} under the {c} limit unless the {d} says otherwise",
)


def memctl_command() -> list[str]:
    if INSTALLED:
        return [str(INSTALLED[0] / "bin" / "memctl")]
    script = Path(sys.executable).with_name("memctl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memctl"]


def _sentence(rng: random.Random, japanese: bool) -> str:
    words = JA_WORDS if japanese else EN_WORDS
    template = rng.choice(JA_TEMPLATES if japanese else EN_TEMPLATES)
    return template.format(**{key: rng.choice(words) for key in "abcd"})


def _stamp(now, rng: random.Random, max_days: int) -> str:
    return (now - timedelta(days=rng.uniform(0, max_days))).isoformat(timespec="seconds")


def write_facts(store, count: int, rng: random.Random) -> None:
    from memctl import clock, fact as fact_mod

    now = clock.now()
    for i in range(count):
        japanese = i % 2 == 1
        fact_type = FACT_TYPES[i % len(FACT_TYPES)]
        created = _stamp(now, rng, 730)
        metadata = {
            "type": fact_type,
            "importance": round(rng.uniform(0.3, 0.9), 2),
            "confidence": round(rng.uniform(0.5, 1.0), 2),
            "created": created,
            "updated": max(created, _stamp(now, rng, 365)),
            "tags": rng.sample(JA_WORDS if japanese else EN_WORDS, 2),
        }
        if i % 2000 == 0:
            metadata["pinned"] = True
        description = f"{_sentence(rng, japanese)}（規則{i}）" if japanese else f"Rule {i}: {_sentence(rng, japanese)}"
        body = "\n".join(_sentence(rng, japanese) + ("。" if japanese else ".") for _ in range(rng.randint(2, 6)))
        why = _sentence(rng, japanese)
        how = _sentence(rng, not japanese)
        name = f"fact-{i:05d}"
        fact = fact_mod.Fact(
            stem=name, front={"name": name, "description": description, "metadata": metadata},
            body=fact_mod.compose_body(body, why, how), path=store.memory_dir / f"{name}.md",
        )
        fact.path.write_text(fact_mod.render(fact), encoding="utf-8")


def episode_records(count: int, rng: random.Random) -> list[dict[str, str]]:
    from memctl import clock

    now = clock.now()
    records = []
    for i in range(count):
        japanese = rng.random() < 0.5
        kind = EPISODE_TYPES[i % len(EPISODE_TYPES)]
        when = now - timedelta(seconds=(count - i) * 600)  # one every ten minutes, oldest first
        records.append({
            "id": f"ep-{when:%Y%m%d%H%M%S}-{i:05x}", "ts": when.isoformat(timespec="seconds"),
            "agent": rng.choice(("claude", "codex", "cron", "human")), "type": kind,
            "description": _sentence(rng, japanese),
            "outcome": _sentence(rng, japanese) if rng.random() < 0.4 else "",
            "importance": format(round(rng.uniform(0.3, 1.0), 2), "g"),
            "tags": ",".join(rng.sample(JA_WORDS if japanese else EN_WORDS, 2)),
            "refs": f"fact-{rng.randrange(10000):05d}" if rng.random() < 0.2 else "",
        })
    return records


def build_store(root: Path, facts: int, episodes: int, env: dict[str, str]) -> None:
    from memctl import episodes as episodes_mod, facts as facts_mod, ledger
    from memctl.store import init_store, open_store

    rng = random.Random(6)
    init_store(root)
    store = open_store(root)
    write_facts(store, facts, rng)
    facts_mod.reindex(store, commit_changes=False)
    (store.state_dir / "STATE.md").write_text(
        "# State\n\n- 記事の予約投稿: 毎朝9時\n- deploy freeze until the release review\n", encoding="utf-8")
    if episodes:
        episodes_mod.ensure_ledger(store, commit_changes=False)
        ledger.append(store, episodes_mod.LEDGER, episode_records(episodes, rng), commit_changes=False)
    # gc.auto=0: no background repack racing the timed runs (or the copy of the store for --baseline-src)
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0"]
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "bench store"], check=True, env=env)


def time_once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall ms, CPU ms: user + system of the child) of one run."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and argv[0] != "grep" and not cwd.name.startswith("empty")):
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stderr.decode(errors='replace')}")
    return took, cpu


def start_server(memctl: list[str], env: dict[str, str], root: Path) -> subprocess.Popen:
    """`memctl embed-server` for the store, once it says it is ready."""
    proc = subprocess.Popen([*memctl, "embed-server"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (root / ".memctl" / "embed.sock").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"embed-server did not start: {proc.stderr.read() if proc.poll() is not None else 'timeout'}")
        time.sleep(0.05)
    return proc


def check_outputs(commands: dict[str, tuple[list[str], Path, dict[str, str]]]) -> dict[str, str]:
    """What each command found, so the table shows nothing is timed doing nothing."""
    seen = {}
    for name, (argv, cwd, env) in commands.items():
        if name == "python -c pass" or "empty store" in name:
            continue
        out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True).stdout
        if name.startswith("grep"):
            seen[name] = f"{len(out.splitlines())} files"
        elif name.startswith("memctl recall"):
            seen[name] = f"{len(out.splitlines())} hits"  # one TSV line a hit when piped
        else:
            bundle = json.loads(subprocess.run([*argv, "--json"], env=env, cwd=cwd, capture_output=True, text=True).stdout)
            parts = ", ".join(f"{section} {count}" for section, count in bundle["sections"].items())
            seen[name] = f"{bundle['tokens']} tokens: {parts}; {bundle['dropped']} parts dropped"
        if not out.strip():
            raise SystemExit(f"{name} printed nothing: pick another --query / --word")
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--episodes", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command (median)")
    parser.add_argument("--query", default="deploy schedule", help="what recall and context look for")
    parser.add_argument("--word", default=None, help="what grep looks for (default: the query's first word)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a budget is missed")
    parser.add_argument("--keep", action="store_true", help="keep the store (for profiling); its path is printed")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="do not give memctl a .pyc cache")
    parser.add_argument("--hybrid", action="store_true",
                        help="also time recall --mode hybrid with e5-small-q4 (the warm-up embeds every fact once)")
    parser.add_argument("--watch", action="store_true",
                        help="also time the keyword rows with `memctl embed-server` running, whose watch of the fact "
                             "folders (memctl/watch.py) spares each command its stat of every fact file")
    parser.add_argument("--installed", action="store_true",
                        help="time memctl installed by `pip install .` into a venv of its own (bench/installed.py)")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="also time every memctl command with memctl imported from this source tree")
    args = parser.parse_args()
    word = args.word or args.query.split()[0]

    if args.installed:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from installed import installed_venv

        INSTALLED.append(installed_venv())
    python = str(INSTALLED[0] / "bin" / "python") if INSTALLED else sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="memctl-bench-recall-"))
    env = dict(os.environ, MEMCTL_NO_COMMIT="1")
    env.pop("MEMCTL_ROOT", None)
    server = base_server = None
    if args.installed:  # pip compiled it into site-packages: a cache prefix would hide those .pyc files
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("PYTHONPYCACHEPREFIX", None)
    elif not args.no_bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    try:
        root = tmp / "store"
        print(f"building a store of {args.facts} facts and {args.episodes} episodes in {root} ...", file=sys.stderr)
        start = time.perf_counter()
        build_store(root, args.facts, args.episodes, env)
        print(f"built in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        memctl = [*memctl_command(), "--root", str(root)]
        empty = tmp / "empty"
        subprocess.run([*memctl_command(), "init", "--no-git", str(empty)], env=env, check=True, capture_output=True)
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "memctl recall, empty store": [*memctl_command(), "--root", str(empty), "recall", args.query, "--mode",
                                           "keyword", "--no-log"],
            f"grep -rl {word} memory/ ledgers/": ["grep", "-rl", word, "memory/", "ledgers/"],
            "memctl recall (facts)": [*memctl, "recall", args.query, "--mode", "keyword", "--no-log"],
            "memctl recall --source all": [*memctl, "recall", args.query, "--source", "all", "--mode", "keyword", "--no-log"],
            "memctl context --query": [*memctl, "context", "--query", args.query, "--mode", "keyword", "--no-log",
                                       "--budget", "4000"],
        }
        if args.hybrid:
            with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
                handle.write('\n[embedding]\nbackend = "e5-small-q4"\nfallback = "fail"\n')
            commands["memctl recall --mode hybrid (e5)"] = [*memctl, "recall", args.query, "--mode", "hybrid", "--no-log"]
            commands["memctl recall --mode hybrid (e5, embed-server)"] = commands["memctl recall --mode hybrid (e5)"]
        if args.watch:
            for name in ("memctl recall (facts)", "memctl recall --source all", "memctl context --query"):
                commands[f"{name}, watched"] = commands[name]
        budgets = {name: BUDGETS_MS[name] for name in commands if name in BUDGETS_MS}
        served = ("embed-server", "watched")
        runs = {name: (argv, empty if "empty" in name else root,
                       env if any(s in name for s in served) else dict(env, MEMCTL_NO_SERVER="1"))
                for name, argv in commands.items()}
        if args.hybrid or args.watch:
            server = start_server(memctl, env, root)
        for argv, cwd, run_env in runs.values():  # warm: the recall index, vector cache, page cache, bytecode cache
            time_once(argv, run_env, cwd)
        if args.baseline_src is not None:  # copied warm: the baseline reuses the vectors (by content hash)
            base_root, base_empty = tmp / "store-base", tmp / "empty-base"
            # The vector caches hard-linked: a copy would be a new inode, which the manifest's stamp
            # of vectors.npy rejects (re-embedding 10,000 facts); saves replace files by rename.
            shutil.copytree(root, base_root, symlinks=True, ignore=shutil.ignore_patterns("*.sock", "embed.pid"),
                            copy_function=lambda src, dst: (
                                os.link(src, dst) if f"{os.sep}vectors{os.sep}" in src else shutil.copy2(src, dst)))
            shutil.copytree(empty, base_empty, symlinks=True)
            base_env = dict(env, PYTHONPATH=str(args.baseline_src.resolve()))
            if args.hybrid or args.watch:  # the baseline's embed-server rows are answered by the baseline's own server
                base_server = start_server([*memctl_command(), "--root", str(base_root)], base_env, base_root)
            for name, argv in commands.items():
                if name.startswith("memctl"):
                    twin = [str(base_root) if a == str(root) else str(base_empty) if a == str(empty) else a for a in argv]
                    twin_env = base_env if any(s in name for s in served) else dict(base_env, MEMCTL_NO_SERVER="1")
                    runs[f"{name} [baseline]"] = (twin, base_empty if "empty" in name else base_root, twin_env)
                    time_once(twin, twin_env, base_empty if "empty" in name else base_root)
        found = check_outputs(runs)
        load_before = os.getloadavg()[0]
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for _ in range(args.runs):
            for name, (argv, cwd, run_env) in runs.items():
                samples[name].append(time_once(argv, run_env, cwd))
        if (root / "ledgers" / "access.tsv").exists():
            raise SystemExit("--no-log wrote ledgers/access.tsv")
    finally:
        if server is not None:
            subprocess.run([*memctl, "embed-server", "--stop"], env=env, capture_output=True)
            server.wait(timeout=60)
        if base_server is not None:
            subprocess.run([*memctl_command(), "--root", str(tmp / "store-base"), "embed-server", "--stop"],
                           env=dict(env, PYTHONPATH=str(args.baseline_src.resolve())), capture_output=True)
            base_server.wait(timeout=60)
        if args.keep:
            print(f"store kept in {tmp / 'store'}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    floor = statistics.median(w for w, _ in samples["python -c pass"])
    floor_cpu = statistics.median(c for _, c in samples["python -c pass"])
    grep = statistics.median(w for w, _ in samples[f"grep -rl {word} memory/ ledgers/"])
    missed = False
    width = max(len(name) for name in samples) + 1
    print(f"{'command':<{width}} {'median ms':>10} {'min ms':>8} {'x grep':>7} {'x python':>9} {'cpu ms':>7} "
          f"{'cpu x py':>8} {'budget':>7}  result  found")
    for name, values in samples.items():
        median = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        budget = budgets.get(name)
        verdict = ""
        if budget is not None:
            verdict = "PASS" if median <= budget else "FAIL"
            missed |= median > budget
        print(f"{name:<{width}} {median:>10.1f} {min(w for w, _ in values):>8.1f} {median / grep:>7.2f} "
              f"{median / floor:>9.2f} {cpu:>7.1f} {cpu / floor_cpu:>8.2f} {budget or '':>7}  {verdict:<6}  "
              f"{found.get(name, '')}")
    load = os.getloadavg()[0]
    print(f"({args.runs} interleaved runs each; {args.facts} facts, {args.episodes} episodes; query {args.query!r}; "
          f"warm caches; keyword path except the hybrid rows; 'watched': embed-server running; {os.cpu_count()} cores, load average "
          f"{load_before:.1f} before the timed runs, {load:.1f} after; "
          f"bytecode cache: {'no' if args.no_bytecode_cache else 'yes'}; memctl: "
          f"{'installed by pip into ' + str(INSTALLED[0]) if INSTALLED else ' '.join(memctl_command())})")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
