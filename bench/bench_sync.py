"""`memctl sync` against a local bare remote, beside `git pull` + `git push` of the same change (issue 15).

    python bench/bench_sync.py [--facts 10000] [--new-facts 100] [--new-episodes 1000] [--runs 3] [--budget 2]

Builds a store of N facts (and as many episodes) in one commit, pushes it to a
bare remote, then makes the same kind of change on two clones: M new facts (files
and their MEMORY.md lines) and K new episodes each, one commit per side. The
remote gets one side's commit; the other clone is copied afresh for each run and
times, as subprocesses:
  - memctl: `memctl sync` (fetch, merge with the drivers, index regenerated from
    the merged facts, push), the drivers registered by `sync --setup` beforehand;
  - git: `git pull --no-rebase --no-edit` + `git push` in a copy whose
    `.git/info/attributes` says `* merge=union`, so that plain git also finishes
    without a human (without it the pull stops on MEMORY.md);
and the same two with nothing to do. Runs alternate memctl and git; medians are
compared. Prints PASS or FAIL against the budget (memctl <= budget x git, change
case); exits 1 on FAIL.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ID = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
      "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def sh(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, **ID}
    return subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def memctl(root: Path, *args: str) -> None:
    sh(sys.executable, "-m", "memctl", "--root", str(root), *args)


def write_facts(root: Path, names: list[str], rng: random.Random, stamp: str) -> None:
    from memctl import fact as fact_mod

    for name in names:
        desc = f"{name}: {rng.choice(['deploy', 'billing', 'デプロイ', '請求', 'backup'])} rule {rng.randint(0, 10**6)}"
        front = {"name": name, "description": desc,
                 "metadata": {"type": rng.choice(["project", "feedback", "reference"]), "importance": 0.6,
                              "confidence": 0.7, "created": stamp, "updated": stamp}}
        (root / "memory" / f"{name}.md").write_text(fact_mod.render(fact_mod.Fact(name, front, desc + "\n")), encoding="utf-8")


def regenerate_index(root: Path) -> None:
    from memctl import facts, index
    from memctl.store import open_store

    store = open_store(root)
    path = store.index_path
    path.write_text(index.regenerate(path.read_text(encoding="utf-8"), facts.live_facts(store, quiet=True)), encoding="utf-8")


def append_episodes(root: Path, count: int, tag: str, rng: random.Random, hour: int) -> None:
    rows = []
    for i in range(count):
        ts = f"2026-11-30T{hour:02d}:{(i // 60) % 60:02d}:{i % 60:02d}+00:00"
        rows.append(f"ep-{tag}-{i:05d}\t{ts}\t{tag}\tdecision\t{tag} 出来事 {i} {rng.randint(0, 10**6)}\t\t0.7\t\t\n")
    with open(root / "ledgers" / "episodes.tsv", "a", encoding="utf-8") as handle:
        handle.write("".join(rows))


def change(root: Path, tag: str, facts: int, episodes: int, seed: int, hour: int) -> None:
    rng = random.Random(seed)
    write_facts(root, [f"{tag}-new-{i:04d}" for i in range(facts)], rng, f"2026-11-30T{hour:02d}:00:00+00:00")
    regenerate_index(root)
    append_episodes(root, episodes, tag, rng, hour)
    sh("git", "add", "-A", cwd=root)
    sh("git", "commit", "-qm", f"{tag}: {facts} facts, {episodes} episodes", cwd=root)


def timed(argvs: list[list[str]], cwd: Path) -> float:
    env = {**os.environ, **ID}
    began = time.perf_counter()
    for argv in argvs:
        subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--new-facts", type=int, default=100)
    parser.add_argument("--new-episodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=2.0)
    args = parser.parse_args()
    from memctl.store import init_store

    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        base = work / "base"
        init_store(base)
        rng = random.Random(15)
        write_facts(base, [f"fact-{i:05d}" for i in range(args.facts)], rng, "2026-11-01T09:00:00+00:00")
        regenerate_index(base)
        memctl(base, "episode", "add", "seed", "--type", "decision")
        append_episodes(base, args.facts, "old", rng, 1)
        sh("git", "add", "-A", cwd=base)
        sh("git", "commit", "-qm", "a store of facts and episodes", cwd=base)
        remote = work / "remote.git"
        sh("git", "init", "-q", "--bare", str(remote))
        sh("git", "remote", "add", "origin", str(remote), cwd=base)
        memctl(base, "sync")
        branch = sh("git", "symbolic-ref", "--short", "HEAD", cwd=base).strip()
        other = work / "other"
        sh("git", "clone", "-q", str(remote), str(other))
        change(other, "other", args.new_facts, args.new_episodes, 1, 3)
        here = work / "here"
        sh("git", "clone", "-q", str(remote), str(here))
        memctl(here, "sync", "--setup")
        memctl(here, "list", "--json")  # the parse cache warm, as in a store in use
        idle_remote = work / "idle.git"
        shutil.copytree(remote, idle_remote)
        sh("git", "push", "-q", "origin", f"HEAD:{branch}", cwd=other)
        change(here, "here", args.new_facts, args.new_episodes, 2, 4)

        def copy(kind: str, run: int, remote_dir: Path, reset_to_origin: bool) -> Path:
            target = work / f"{kind}-{run}"
            shutil.copytree(here, target, symlinks=True)
            sh("git", "remote", "set-url", "origin", str(remote_dir), cwd=target)
            if reset_to_origin:
                sh("git", "fetch", "-q", "origin", cwd=target)
                sh("git", "reset", "-q", "--hard", f"origin/{branch}", cwd=target)
            # A copy has new inodes and times: refresh git's index now, not inside the timed commands.
            subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=target, capture_output=True)
            if kind == "git":
                (target / ".git" / "info" / "attributes").write_text("* merge=union\n")
                sh("git", "config", "--remove-section", "merge.memctl-index", cwd=target)
            return target

        mem_argv = [[sys.executable, "-m", "memctl", "sync"]]
        git_argv = [["git", "pull", "-q", "--no-rebase", "--no-edit", "origin", branch], ["git", "push", "-q", "origin", f"HEAD:{branch}"]]
        results: dict[str, dict[str, list[float]]] = {"change": {"memctl": [], "git": []}, "idle": {"memctl": [], "git": []}}
        for run in range(args.runs):
            for case in ("change", "idle"):
                for kind, argvs in (("memctl", mem_argv), ("git", git_argv)):
                    remote_copy = work / f"remote-{case}-{kind}-{run}.git"
                    shutil.copytree(remote if case == "change" else idle_remote, remote_copy)
                    if case == "idle":
                        # Nothing to do: the remote already has this clone's commit.
                        target = copy(kind, run, remote_copy, reset_to_origin=False)
                        sh("git", "push", "-q", "origin", f"HEAD:{branch}", cwd=target)
                    else:
                        target = copy(kind, run, remote_copy, reset_to_origin=False)
                    if kind == "memctl":
                        memctl(target, "list", "--json")  # copied caches point at the old paths: warm them
                    results[case][kind].append(timed(argvs, target))
                    if case == "change":
                        files = sh("git", "ls-files", cwd=target).count("\n")
                        merged = sh("git", "log", "-1", "--format=%P", cwd=target).count(" ") == 1
                        assert merged and files > args.facts, "the run did not merge"
                    shutil.rmtree(target)
                    shutil.rmtree(remote_copy)
        ok = True
        print(f"store: {args.facts} facts + {args.facts} episodes; each side: {args.new_facts} new facts, "
              f"{args.new_episodes} new episodes; {args.runs} runs, medians")
        for case, label in (("idle", "nothing to do"), ("change", "change on both sides")):
            mem = statistics.median(results[case]["memctl"])
            git = statistics.median(results[case]["git"])
            ratio = mem / git
            line = f"{label:22s} memctl sync {mem * 1000:8.0f} ms   git pull + git push {git * 1000:8.0f} ms   {ratio:.2f}x"
            if case == "change":
                ok = ratio <= args.budget
                line += f"   (budget <= {args.budget}x)"
            print(line)
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
