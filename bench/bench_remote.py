"""Issue 29 (a shared remote is untrusted input): the figures table re-run, and every hostile-remote case.

    python bench/bench_remote.py [--kills 93] [--disk-full 30] [--writers 6] [--ops 546] [--mcp-calls 1600]
                                 [--only faults|remote] [--seed 29]

Part 1, faults (real processes, real git, in temp stores; each count is what was measured):
- kill -9 of the command (`pid`) or of its whole process group (`pgroup`, git children included) at a
  random point of a random writing command, --kills times each; after each kill the next command must
  succeed, `git status` must be clean and `doctor` pass;
- a real full disk (a 2 MiB tmpfs: needs root and mount), --disk-full writing commands: each must fail in
  one line and change nothing, its retry (space freed) must succeed;
- --writers processes writing in parallel (--ops commands in all) beside an outside `git commit` loop;
- --mcp-calls calls to one `memctl mcp` server (the SDK's stdio client) while two CLI writers load the store.
Counted: kills, ops (commands that exited 0), lost (a command that exited 0 whose commit is not in
`git log`), torn (a failed `ledger check`, `doctor` or `git fsck`, a work tree not clean after recovery, a
file changed by a command that failed), tracebacks (in any stderr).

Part 2, hostile-remote cases: each is a test of tests/ that builds a real bare remote, a victim clone and
a second clone acting as the attacker (pushing whatever git allows), and runs real `memctl`
subprocesses with a timeout; this script runs each with pytest and reports its verdict and time.

Prints one table (case, what happened, time, verdict: held / FAILED) and the load average before and
after; exits 1 when any case FAILED. Takes ~15-20 min with the defaults on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = 4096


class Counts(collections.Counter):
    def text(self, *keys: str) -> str:
        return ", ".join(f"{self[k]} {k}" for k in keys)


# ---------------------------------------------------------------- running memctl and git

def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_") and k != "XDG_CONFIG_HOME"}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", HF_HUB_OFFLINE="1", MEMCTL_HOOK_RESIDENT="0",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    return env


ENV: dict[str, str] = {}


def memctl(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=ENV).stdout


def new_store(path: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "memctl", "init", str(path)], capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    toml = path / "memctl.toml"  # no model: the keyword-and-n-gram embedder, no vector check on remember
    text = toml.read_text(encoding="utf-8").replace("[facts]\n", '[facts]\nvector_check = "never"\n', 1)
    toml.write_text(text + '\n[embedding]\nbackend = "char-ngram"\n', encoding="utf-8")
    git(path, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "bench: no model")
    for argv in (("remember", "alpha", "--description", "アルファの事実: 東京は日本の首都", "--type", "project"),
                 ("remember", "beta", "--description", "beta fact about deploys", "--type", "project"),
                 ("ledger", "create", "orders", "--columns", "k,v", "--unique", "k"),
                 ("episode", "add", "初めてのエピソード", "--type", "decision"), ("state", "update")):
        done = memctl(path, *argv)
        assert done.returncode == 0, (argv, done.stderr)
    return path


def writers(i: int) -> list[tuple[tuple[str, ...], str]]:
    """Every writing command, as (argv, the commit subject it makes)."""
    return [
        (("remember", f"new{i}", "--description", f"新しい事実 number {i} と詳細", "--type", "project"), f"memory: remember new{i}"),
        (("remember", "alpha", "--update", "--description", f"アルファ更新 {i}"), "memory: update alpha"),
        (("ledger", "append", "orders", f"k=order-{i}", f"v=注文 {i} " + "x" * 80), "ledger: append orders (+1)"),
        (("episode", "add", f"エピソード {i}", "--type", "success"), "ledger: append episodes (+1)"),
        (("state", "update"), "state: update"),
    ]


def lost(root: Path, expected: list[str]) -> int:
    """Commands that exited 0 whose commit subject is not in the log (by count)."""
    subjects = git(root, "log", "--format=%s").splitlines()  # `state: update <path> (<numbers>)`: by its start
    have = collections.Counter("state: update" if s.startswith("state: update ") else s for s in subjects)
    want = collections.Counter(expected)
    return sum(max(0, n - have[subject]) for subject, n in want.items())


def torn(root: Path) -> int:
    """Failed checks of the whole store: ledger check, doctor, git fsck, a work tree not clean."""
    bad = 0
    bad += memctl(root, "ledger", "check").returncode != 0
    bad += memctl(root, "doctor").returncode != 0
    bad += subprocess.run(["git", "-C", str(root), "fsck", "--no-dangling"], capture_output=True, env=ENV).returncode != 0
    bad += git(root, "status", "--porcelain", "--untracked-files=all").strip() != ""
    return bad


def tally(c: Counts, expected: list[str], done: subprocess.CompletedProcess, subject: str, failed: str) -> None:
    """Count one command: an op whose commit must be in the log, or `failed`; and its traceback. A `state
    update` that found STATE.md as the last one left it (the same numbers within the same second) says
    "unchanged" and has nothing to commit: counted as `unchanged`, no commit expected."""
    c["tracebacks"] += "Traceback" in done.stderr
    if done.returncode == 0:
        c["ops"] += 1
        if "memctl: unchanged: " in done.stderr:
            c["unchanged"] += 1
        else:
            expected.append(subject)
    else:
        c[failed] += 1


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.relative_to(root).parts[0] not in (".git", ".memctl")}


# ---------------------------------------------------------------- part 1: faults

def kill_run(tmp: Path, mode: str, kills: int, rng: random.Random) -> tuple[str, bool]:
    root = new_store(tmp / f"kill-{mode}")
    c = Counts()
    expected: list[str] = []
    lasted: dict[str, float] = {}
    i = 0
    while c["kills"] < kills:
        i += 1
        argv, subject = rng.choice(writers(i))
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), *argv], env=ENV, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(rng.uniform(0.02, lasted.get(argv[0], 0.9)))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL) if mode == "pgroup" else os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        c["tracebacks"] += "Traceback" in err
        if proc.returncode == 0:
            c["ops"] += 1
            lasted[argv[0]] = max(0.05, time.monotonic() - started)
            expected.append(subject)
            continue
        if proc.returncode != -signal.SIGKILL:
            c["failed"] += 1
            continue
        c["kills"] += 1
        argv, subject = writers(100_000 + i)[i % 5]  # the next command must succeed
        tally(c, expected, memctl(root, *argv), subject, "stuck")
        c["torn"] += git(root, "status", "--porcelain", "--untracked-files=all").strip() != ""
        c["torn"] += memctl(root, "doctor").returncode != 0
    c["lost"] = lost(root, expected)
    c["torn"] += torn(root)
    ok = c["lost"] == c["torn"] == c["tracebacks"] == c["stuck"] == c["failed"] == 0
    return c.text("kills", "ops", "lost", "torn", "tracebacks", "stuck", "failed"), ok


def disk_full_run(tmp: Path, count: int) -> tuple[str, bool]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return "not run: mounting a tmpfs needs root and mount(8)", False
    disk = tmp / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode != 0:
        return f"not run: {mounted.stderr.strip()}", False
    c = Counts()
    expected: list[str] = []
    try:
        root = new_store(disk / "store")
        for i in range(count):
            argv, subject = writers(i)[i % 5]
            before, head = snapshot(root), git(root, "rev-parse", "HEAD")
            fill(disk)
            done = memctl(root, *argv)
            shutil.rmtree(disk / "filler", ignore_errors=True)
            c["attempts"] += 1
            c["tracebacks"] += "Traceback" in done.stderr
            errors = [line for line in done.stderr.splitlines() if line.startswith("memctl: error:")]
            c["refused in one line"] += done.returncode == 1 and len(errors) == 1
            c["torn"] += (snapshot(root), git(root, "rev-parse", "HEAD")) != (before, head)
            again = memctl(root, *argv)
            c["tracebacks"] += "Traceback" in again.stderr
            if again.returncode == 0:
                c["retried"] += 1
                expected.append(subject)
            c["torn"] += git(root, "status", "--porcelain", "--untracked-files=all").strip() != ""
        c["lost"] = lost(root, expected)
        c["torn"] += torn(root)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    ok = c["refused in one line"] == c["retried"] == count and c["lost"] == c["torn"] == c["tracebacks"] == 0
    return c.text("attempts", "refused in one line", "retried", "lost", "torn", "tracebacks"), ok


def fill(disk: Path) -> None:
    folder = disk / "filler"
    folder.mkdir(exist_ok=True)
    for n in range(100_000):
        try:
            with open(folder / str(n), "wb") as handle:
                handle.write(b"f" * PAGE)
        except OSError:
            with contextlib.suppress(OSError):
                (folder / str(n)).unlink()
            return


def writers_run(tmp: Path, processes: int, ops: int) -> tuple[str, bool]:
    root = new_store(tmp / "writers")
    stop = tmp / "stop-loop"
    loop = subprocess.Popen(
        ["sh", "-c", f"while [ ! -e {stop} ]; do date +%s%N > outside.txt; git add outside.txt 2>/dev/null && "
         "git -c user.name=o -c user.email=o@o commit -qm outside 2>/dev/null; done"],
        cwd=root, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = Counts()
    expected: list[str] = []
    guard = threading.Lock()

    def worker(w: int) -> None:
        for n in range(ops // processes + (w < ops % processes)):
            i = w * 10_000 + n
            argv, subject = writers(i)[(n + w) % 5]
            done = memctl(root, *argv)
            with guard:
                c["not committed"] += "not committed" in done.stderr
                tally(c, expected, done, subject, "failed")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(processes)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.touch()
        loop.wait(timeout=120)
    subjects = git(root, "log", "--format=%x00%s", "--name-only").split("\0")[1:]
    c["outside commits"] = sum(1 for entry in subjects if entry.strip().split("\n")[0] == "outside")
    c["taken"] = sum(1 for entry in subjects if entry.strip().split("\n")[0] == "outside"
                     and [f for f in entry.strip().split("\n")[1:] if f] != ["outside.txt"])
    c["lost"] = lost(root, expected)
    c["torn"] = sum((  # not torn(): the loop's own outside.txt may be left modified, which is not memctl's
        memctl(root, "ledger", "check").returncode != 0, memctl(root, "doctor").returncode != 0,
        git(root, "status", "--porcelain", "--untracked-files=all", "--", "memory", "ledgers", "state").strip() != ""))
    ok = c["ops"] == ops and c["lost"] == c["torn"] == c["tracebacks"] == c["taken"] == c["not committed"] == 0
    return c.text("ops", "failed", "unchanged", "outside commits", "taken", "lost", "torn", "tracebacks"), ok


def mcp_run(tmp: Path, calls: int) -> tuple[str, bool]:
    import anyio
    import mcp

    root = new_store(tmp / "mcp")
    stop = threading.Event()
    c = Counts()
    expected: list[str] = []
    guard = threading.Lock()

    def load(w: int) -> None:  # two CLI writers beside the server
        n = 0
        while not stop.is_set():
            n += 1
            argv, subject = writers(w * 100_000 + n)[(0, 2)[n % 2]]
            done = memctl(root, *argv)
            with guard:
                c["tracebacks"] += "Traceback" in done.stderr
                c["load ops"] += done.returncode == 0
                c["load failed"] += done.returncode != 0
                if done.returncode == 0:
                    expected.append(subject)

    def plan(n: int) -> tuple[str, dict]:
        return [
            ("remember", {"name": f"mcp{n}", "description": f"MCPで覚えた事実 {n}: deploys on weekday {n}", "type": "project"}),
            ("recall", {"query": "デプロイ deploys weekday", "k": 5}),
            ("recall", {"query": "東京 首都", "k": 3, "source": "all"}),
            ("context", {"query": "deploy"}),
            ("show", {"name": "alpha"}),
            ("ledger_append", {"name": "orders", "records": [{"k": f"mcp-{n}", "v": f"注文 {n}"}]}),
            ("episode_add", {"description": f"MCPのエピソード {n}", "type": "success"}),
            ("state_show", {}),
        ][n % 8]

    async def client() -> None:
        params = mcp.StdioServerParameters(command=sys.executable, args=["-m", "memctl", "mcp", "--root", str(root)], env=ENV)
        with open(tmp / "mcp-stderr.log", "w", encoding="utf-8") as errlog:
            async with mcp.stdio_client(params, errlog=errlog) as (read, write), mcp.ClientSession(read, write) as session:
                await session.initialize()
                for n in range(calls):
                    tool, arguments = plan(n)
                    result = await session.call_tool(tool, arguments)
                    c["calls"] += 1
                    if result.is_error:
                        c["tool errors"] += 1
                    elif tool == "remember":
                        expected.append(f"memory: remember mcp{n}")
                    elif tool in ("ledger_append", "episode_add"):
                        expected.append(f"ledger: append {'orders' if tool == 'ledger_append' else 'episodes'} (+1)")

    threads = [threading.Thread(target=load, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    try:
        anyio.run(client)
    finally:
        stop.set()
        for t in threads:
            t.join()
    c["tracebacks"] += (tmp / "mcp-stderr.log").read_text(encoding="utf-8").count("Traceback")
    c["lost"] = lost(root, expected)
    c["torn"] = torn(root)
    ok = c["calls"] == calls and c["tool errors"] == c["lost"] == c["torn"] == c["tracebacks"] == c["load failed"] == 0
    return c.text("calls", "tool errors", "load ops", "load failed", "lost", "torn", "tracebacks"), ok


# ---------------------------------------------------------------- part 2: hostile-remote cases (tests/)

CASES = [
    ("pushed .memctl/undo/log, then git pull", "the next write refuses in one line; doctor --fix untracks it; outside files byte-identical",
     ["tests/test_hostile_remote.py::test_a_pushed_undo_log_is_refused_after_git_pull_and_nothing_outside_changes"]),
    ("pushed .memctl/undo/log, merged by memctl sync", "sync warns; writes succeed or refuse in one line; nothing outside changes",
     ["tests/test_hostile_remote.py::test_a_pushed_undo_log_merged_by_memctl_sync_never_acts_outside",
      "tests/test_hostile_remote.py::test_an_undo_folder_pushed_as_a_link_out_of_the_store_is_refused",
      "tests/test_hostile_remote.py::test_an_undo_log_naming_a_place_outside_the_store_is_discarded_with_a_warning"]),
    ("store copied with cp -a mid-change", "the copy settles its own change; the original byte-identical",
     ["tests/test_hostile_remote.py::test_a_store_copied_in_the_middle_of_a_change_never_acts_on_the_original"]),
    ("pushed job script=/bin/sh (sync and git pull)", "run-job refuses in one line, marker never written; doctor: untrusted; runs after memctl trust",
     ["tests/test_trust.py::test_a_job_pushed_by_another_clone_never_runs_until_approved_here",
      "tests/test_trust.py::test_a_changed_job_waits_again_and_the_approval_is_kept_outside_git"]),
    ("symlinked conflict copy, resolve --keep remote, sync", "resolve refuses (exit 3); the outside file is never committed nor pushed",
     ["tests/test_links.py::test_resolve_and_sync_never_commit_or_push_what_a_link_names",
      "tests/test_links.py::test_no_reader_prints_what_a_link_names"]),
    ("symlinked state/**/STATE.md and MEMORY.md: context, SessionStart, MCP", "left out or refused; MCP resources return an error, never the text",
     ["tests/test_links.py::test_a_linked_memory_md_is_never_read_nor_served",
      "tests/test_links.py::test_writers_refuse_a_link_and_change_nothing_outside"]),
    ("YAML alias bomb in a fact's frontmatter", "every reader answers at once; the file named as damaged in one line",
     ["tests/test_bounded_input.py::test_an_alias_bomb_hangs_no_reader_and_is_reported_as_damaged_in_one_line"]),
    ("catastrophic-backtracking redact_patterns", "left out until trusted; once trusted, the import stops in one line within the limit",
     ["tests/test_trust.py::test_a_pattern_and_an_embedder_from_another_clone_are_left_out_until_approved",
      "tests/test_trust.py::test_a_catastrophic_redaction_pattern_cannot_hang_an_import"]),
    ("20 MB fact file; 120,000-line MEMORY.md", "skipped unread / refused in one line naming the limit; doctor names them",
     ["tests/test_bounded_input.py::test_a_fact_file_over_its_limit_is_skipped_unread_and_never_written",
      "tests/test_bounded_input.py::test_index_files_over_their_limit_are_refused_by_writers_and_named_by_doctor",
      "tests/test_bounded_input.py::test_a_ledger_line_over_its_limit_is_refused_naming_the_file_and_line"]),
    ("MCP near_dup 10 MB; NUL in MCP recall, then doctor", "a tool error within 5 s; nothing logged, no NUL stored; doctor names no NUL afterwards",
     ["tests/test_bounded_input.py::test_mcp_inputs_over_their_limit_or_with_a_nul_get_an_error_at_once",
      "tests/test_bounded_input.py::test_a_nul_from_stdin_is_refused_and_one_in_the_access_log_does_not_fail_doctor"]),
    ("push declined after sync's merge commit; index overflow; sync killed in its merge",
     "the next sync converges, nothing lost, no raw git command",
     ["tests/cli/test_sync_stuck.py"]),
    ("disk full during sync", "one line, nothing lost, the next sync completes",
     ["tests/test_faults.py::test_a_sync_on_a_full_disk_fails_in_one_line_loses_nothing_and_the_next_sync_completes"]),
    ("forget --policies killed", "memctl.toml as it was or committed with its ledger",
     ["tests/test_forget_killed.py"]),
    ("four clones in parallel past the index overflow, syncs killed", "every clone converges, nothing lost, doctor passes",
     ["tests/test_sync_simulation.py::test_four_clones_in_parallel_past_the_index_overflow_with_killed_syncs_never_stay_stuck"]),
]


def run_case(nodes: list[str]) -> tuple[str, float, bool]:
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_TEST_FULL"}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *nodes], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return "no answer within 1200 s", time.monotonic() - started, False
    took = time.monotonic() - started
    summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1].strip("= ")
    if done.returncode != 0:
        failure = next((line for line in done.stdout.splitlines() if line.startswith("E ")), summary)
        return f"{summary}; {failure[:160]}", took, False
    return summary, took, True


# ---------------------------------------------------------------- the table

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=93)
    parser.add_argument("--disk-full", type=int, default=30)
    parser.add_argument("--writers", type=int, default=6)
    parser.add_argument("--ops", type=int, default=546)
    parser.add_argument("--mcp-calls", type=int, default=1600)
    parser.add_argument("--only", choices=("faults", "remote"))
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows: list[tuple[str, str, float, bool]] = []

    def row(case: str, what: str, took: float, ok: bool) -> None:
        rows.append((case, what, took, ok))
        print(f"  {'held  ' if ok else 'FAILED'} {took:7.1f} s  {case}: {what}", flush=True)

    with tempfile.TemporaryDirectory(prefix="memctl-bench-remote-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        ENV.update(environment(tmp / "home"))
        if args.only != "remote":
            for case, run in (
                (f"kill -9, pid mode ({args.kills})", lambda: kill_run(tmp, "pid", args.kills, rng)),
                (f"kill -9, process-group mode ({args.kills})", lambda: kill_run(tmp, "pgroup", args.kills, rng)),
                (f"disk full, 2 MiB tmpfs ({args.disk_full})", lambda: disk_full_run(tmp, args.disk_full)),
                (f"{args.writers} writers + outside git commit loop ({args.ops} ops)", lambda: writers_run(tmp, args.writers, args.ops)),
                (f"MCP calls under load ({args.mcp_calls})", lambda: mcp_run(tmp, args.mcp_calls)),
            ):
                started = time.monotonic()
                try:
                    what, ok = run()
                except Exception as exc:  # a broken run is a failed case, reported as such
                    what, ok = f"the run broke: {type(exc).__name__}: {exc}"[:200], False
                row(case, what, time.monotonic() - started, ok)
        if args.only != "faults":
            for case, promise, nodes in CASES:
                summary, took, ok = run_case(nodes)
                row(case, f"{promise} ({summary})" if ok else summary, took, ok)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\n| case | what happened | time | verdict |\n|---|---|---|---|")
    for case, what, took, ok in rows:
        print(f"| {case} | {what} | {took:.0f} s | {'held' if ok else 'FAILED'} |")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
