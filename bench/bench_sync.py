"""`memctl sync` against a local bare remote, beside `git pull` + `git push` of the same change (issue 15).

    python bench/bench_sync.py [--facts 10000] [--new-facts 100] [--new-episodes 1000] [--runs 3]
                               [--idle-repeats 5] [--budget 2] [--no-bytecode] [--breakdown] [--installed]

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
and the same with nothing to do (the remote already at the clone's commit), where
memctl is timed twice: as shipped (its fast path, memctl/sync_fast.py) and with
MEMCTL_NO_FAST=1 (the full path). Runs alternate memctl and git; medians are
compared, of wall time and of the CPU time (user + system) of the processes run,
which the machine's load disturbs less. memctl runs byte-compiled, as an installed
package does (--no-bytecode: as the caller's environment says). --breakdown times
the parts of a sync with nothing to do. --installed times the memctl that
bench/installed.py installs (`pip install .` into a venv of its own, as pipx or
uv tool leave it: no editable finder, no other project's .pth files at start-up,
byte-compiled by pip) for every memctl run, set-up included (the merge drivers
name that venv's python), and its python for the `python -c pass` row; by
default, this interpreter's `python -m memctl` (a checkout's development venv).
Prints which memctl it timed, then PASS or FAIL against the budget (memctl <=
budget x git wall time, both cases); exits 1 on FAIL.
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
from typing import NamedTuple

ID = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
      "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def sh(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, **ID}
    return subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


# The memctl every run of the bench calls, and the python beside it: this interpreter's
# `python -m memctl` unless --installed names the console script of an installed venv.
MEMCTL: list[str] = [sys.executable, "-m", "memctl"]
PYTHON = sys.executable


def memctl(root: Path, *args: str) -> None:
    sh(*MEMCTL, "--root", str(root), *args)


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


class Sample(NamedTuple):
    wall: float  # seconds
    cpu: float  # user + system seconds of the processes run (the machine's load counts less)


def timed(argvs: list[list[str]], cwd: Path, extra: dict[str, str] | None = None) -> Sample:
    env = {**os.environ, **ID, **(extra or {})}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    for argv in argvs:
        subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Sample(wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def median(samples: list[Sample], what: str) -> float:
    return statistics.median(getattr(s, what) for s in samples)


def describe(samples: list[Sample]) -> str:
    return (f"{median(samples, 'wall') * 1000:6.0f} ms ({min(s.wall for s in samples) * 1000:4.0f}); "
            f"cpu {median(samples, 'cpu') * 1000:4.0f} ms")


def breakdown(work: Path, here: Path, remote: Path, branch: str) -> None:
    """Where a sync with nothing to do spends its time: the interpreter, memctl's imports, each git command."""
    target, remote_copy = work / "breakdown", work / "breakdown.git"
    shutil.copytree(here, target, symlinks=True)
    shutil.copytree(remote, remote_copy)
    sh("git", "remote", "set-url", "origin", str(remote_copy), cwd=target)
    sh("git", "push", "-q", "origin", f"HEAD:{branch}", cwd=target)
    memctl(target, "sync")
    from memctl import sync_fast
    from memctl.store import open_store

    store = open_store(target)
    parts = {
        "python -c pass": [[PYTHON, "-c", "pass"]],
        "python: import the fast path's modules": [[PYTHON, "-c", "import memctl.cli.fast, memctl.cli.fastsync, "
                                                    "memctl.sync_fast, memctl.store, select, shlex"]],
        "git config --get-regexp": [["git", "config", "-z", "--get-regexp", sync_fast.CONFIG_KEYS]],
        "git status (the fast path's: -unormal)": [["git", *sync_fast.FAST_STATUS]],
        "git status (the full path's: paths, -uall)": [["git", *sync_fast._status_args(store, target)]],
        "git ls-remote": [["git", "ls-remote", "--heads", "origin", f"refs/heads/{branch}"]],
        "memctl sync (fast path)": [[*MEMCTL, "sync"]],
        "git fetch (the full path's)": [["git", "fetch", "-q", "--no-tags", "origin", f"refs/heads/{branch}"]],
        "git pull": [["git", "pull", "-q", "--no-rebase", "--no-edit", "origin", branch]],
        "git push": [["git", "push", "-q", "origin", f"HEAD:{branch}"]],
    }
    times: dict[str, list[Sample]] = {name: [] for name in parts}
    for _ in range(15):
        for name, argvs in parts.items():
            times[name].append(timed(argvs, target))
    print("where the time goes, nothing to do (15 runs each, interleaved):")
    for name, samples in times.items():
        print(f"  {name:42s} {describe(samples)}")
    shutil.rmtree(target)
    shutil.rmtree(remote_copy)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--new-facts", type=int, default=100)
    parser.add_argument("--new-episodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--idle-repeats", type=int, default=5, help="timings per run of the nothing-to-do case")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE as given (memctl compiled from source at each start)")
    parser.add_argument("--breakdown", action="store_true", help="also time the parts of a sync with nothing to do")
    parser.add_argument("--installed", action="store_true",
                        help="time memctl installed by bench/installed.py (pip install ., a venv of its own)")
    args = parser.parse_args()
    from memctl.store import init_store

    global MEMCTL, PYTHON
    if args.installed:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from installed import installed_venv

        venv = installed_venv("")
        MEMCTL, PYTHON = [str(venv / "bin" / "memctl")], str(venv / "bin" / "python")
        which = f"{MEMCTL[0]} (pip install ., a venv of its own)"
    else:
        which = f"{sys.executable} -m memctl (this interpreter's environment)"
    print(f"memctl timed: {which}")
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    if args.installed:
        # pip byte-compiled the package into site-packages; a PYTHONPYCACHEPREFIX would hide those
        # .pyc files, and PYTHONDONTWRITEBYTECODE does not matter to files already there.
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
    elif not args.no_bytecode:
        # As an installed package is: byte-compiled (the cache in the temp dir, whatever the caller's
        # PYTHONDONTWRITEBYTECODE says); the warm-up runs below write it.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
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

        def copy(kind: str, run: int, remote_dir: Path, reset_to_origin: bool, name: str = "") -> Path:
            target = work / f"{name or kind}-{run}"
            shutil.copytree(here, target, symlinks=True)
            sh("git", "remote", "set-url", "origin", str(remote_dir), cwd=target)
            if reset_to_origin:
                sh("git", "fetch", "-q", "origin", cwd=target)
                sh("git", "reset", "-q", "--hard", f"origin/{branch}", cwd=target)
            # A copy has new inodes and times: refresh git's index now, not inside the timed commands.
            subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=target, capture_output=True)
            subprocess.run(["git", "status", "--porcelain"], cwd=target, capture_output=True)  # and its untracked cache
            if kind == "git":
                (target / ".git" / "info" / "attributes").write_text("* merge=union\n")
                sh("git", "config", "--remove-section", "merge.memctl-index", cwd=target)
            return target

        mem_argv = [[*MEMCTL, "sync"]]
        git_argv = [["git", "pull", "-q", "--no-rebase", "--no-edit", "origin", branch], ["git", "push", "-q", "origin", f"HEAD:{branch}"]]
        kinds = {"memctl": (mem_argv, {}), "full": (mem_argv, {"MEMCTL_NO_FAST": "1"}), "git": (git_argv, {})}
        results: dict[str, dict[str, list[Sample]]] = {"change": {"memctl": [], "git": []},
                                                       "idle": {k: [] for k in kinds}}
        for run in range(args.runs):
            for kind in ("memctl", "git"):  # change on both sides: a fresh copy and remote per run
                remote_copy = work / f"remote-change-{kind}-{run}.git"
                shutil.copytree(remote, remote_copy)
                target = copy(kind, run, remote_copy, reset_to_origin=False)
                if kind == "memctl":
                    memctl(target, "list", "--json")  # copied caches point at the old paths: warm them
                results["change"][kind].append(timed(kinds[kind][0], target))
                files = sh("git", "ls-files", cwd=target).count("\n")
                merged = sh("git", "log", "-1", "--format=%P", cwd=target).count(" ") == 1
                assert merged and files > args.facts, "the run did not merge"
                shutil.rmtree(target)
                shutil.rmtree(remote_copy)
            # Nothing to do: the remote already has this clone's commit. One copy per kind, timed
            # --idle-repeats times, the kinds interleaved (a sync with nothing to do leaves nothing behind).
            targets = {}
            for kind in kinds:
                remote_copy = work / f"remote-idle-{kind}-{run}.git"
                shutil.copytree(idle_remote, remote_copy)
                targets[kind] = copy(kind if kind == "git" else "memctl", run, remote_copy, reset_to_origin=False, name=f"idle-{kind}")
                sh("git", "push", "-q", "origin", f"HEAD:{branch}", cwd=targets[kind])
                if kind != "git":
                    memctl(targets[kind], "list", "--json")
            for _ in range(args.idle_repeats):
                for kind, (argvs, extra) in kinds.items():
                    results["idle"][kind].append(timed(argvs, targets[kind], extra))
            for kind, target in targets.items():
                assert sh("git", "status", "--porcelain", cwd=target) == "", "an idle sync changed the clone"
                assert sh("git", "rev-parse", "HEAD", cwd=target) == sh("git", "rev-parse", branch, cwd=work / f"remote-idle-{kind}-{run}.git")
                shutil.rmtree(target)
                shutil.rmtree(work / f"remote-idle-{kind}-{run}.git")
        ok = True
        print(f"store: {args.facts} facts + {args.facts} episodes; each side: {args.new_facts} new facts, "
              f"{args.new_episodes} new episodes; memctl {'installed' if args.installed else 'byte-compiled' if not args.no_bytecode else 'compiled at each start'}; "
              f"{args.runs} runs (nothing to do: x{args.idle_repeats} each), medians; load average {os.getloadavg()[0]:.1f}")
        print("  wall ms median (min); cpu ms (user+sys of the processes) median")
        for case, label in (("idle", "nothing to do"), ("change", "change on both sides")):
            git = results[case]["git"]
            for kind in [k for k in ("memctl", "full") if k in results[case]]:
                mem = results[case][kind]
                ratio = median(mem, "wall") / median(git, "wall")
                name = "memctl sync" if kind == "memctl" else "memctl sync, MEMCTL_NO_FAST=1"
                line = (f"{label:21s} {name:31s} {describe(mem)}   git pull + git push {describe(git)}   "
                        f"{ratio:.2f}x (cpu {median(mem, 'cpu') / median(git, 'cpu'):.2f}x)")
                if kind == "memctl":
                    ok = ok and ratio <= args.budget
                    line += f"   (budget <= {args.budget}x)"
                print(line)
        if args.breakdown:
            breakdown(work, here, idle_remote, branch)
        print(("PASS" if ok else "FAIL") + f" (memctl timed: {'installed, pip install . in a venv of its own' if args.installed else 'python -m memctl of ' + sys.executable})")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
