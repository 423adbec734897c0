"""`memctl sync` with nothing to do takes the fast path (memctl/sync_fast.py, memctl/cli/fastsync.py):
same output, exit code and --json as the full path, and it falls through to the full path whenever
there is work or a question. Real processes and real git; GIT_TRACE tells which git commands ran."""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli, git, memctl
from test_sync_cli import ID, _unchanged, pair  # noqa: F401  (pair is a fixture)

FULL = {"MEMCTL_NO_FAST": "1"}
QUIET = "memctl: origin/master: 0 commits in (0 files), nothing to push\n"


def traced(root: Path, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run `memctl sync ARGS` as a subprocess; also the git commands it ran (their first word), in order."""
    log = root.parent / f"trace-{root.name}.log"
    log.unlink(missing_ok=True)
    done = memctl(root, "sync", *args, env={"GIT_TRACE": str(log), **(env or {})})
    ran = [line.split("trace: built-in: git ", 1)[1].split(" ", 1)[0]
           for line in (log.read_text(encoding="utf-8") if log.exists() else "").splitlines() if "trace: built-in: git " in line]
    return done, [name for name in ran if name not in ("upload-pack", "receive-pack", "rev-list", "maintenance",
                                                        "pack-objects", "index-pack", "unpack-objects", "gc")]


def both(root: Path, *args: str, env: dict | None = None):
    """(fast, full): the same command line with the fast paths on, then off; each with its git commands."""
    return traced(root, *args, env=env), traced(root, *args, env={**FULL, **(env or {})})


def remote_head(remote: Path) -> str:
    return subprocess.run(["git", "-C", str(remote), "rev-parse", "master"], capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("args", [[], ["--json"], ["--no-push"], ["--remote", "origin"], ["--remote=origin", "--no-push", "--json"]])
def test_nothing_to_do_gives_the_full_paths_output_with_three_git_commands_and_no_fetch(pair, args):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0  # b's sync --setup commit goes out first
    for root in (a, b):  # b tracks origin/master; a (the first machine) has its upstream unset by hand
        assert cli(root, "sync").exit_code == 0
        if root == a:
            git(a, "branch", "--unset-upstream")
        same = _unchanged(root)
        (fast, fast_git), (full, full_git) = both(root, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
        assert fast.returncode == 0
        if "--json" in args:
            assert json.loads(fast.stdout) == {
                "remote": "origin", "branch": "master", "incoming": 0, "outgoing": 0, "pushed": False, "files_in": [],
                "resolved": [], "conflicts": [], "duplicates": [], "merge_commit": None, "attempts": 1, "setup": []}
            assert fast.stderr == ""
        else:
            assert (fast.stdout, fast.stderr) == ("", QUIET)
        # The fast path: one config, one status, one ls-remote (and a rev-parse of the remote-tracking
        # ref where no upstream says where it is); the full path fetches.
        upstream = root == b
        assert sorted(fast_git) == sorted(["config", "status", "ls-remote"] + ([] if upstream else ["rev-parse"]))
        assert "fetch" in full_git and "ls-remote" not in full_git
        assert same()


def test_the_fast_path_imports_neither_typer_nor_the_merge_machinery(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    probe = ("import sys\nsys.argv = ['memctl'] + sys.argv[1:]\nfrom memctl.cli import main\ntry:\n    main()\n"
             "except SystemExit as e:\n    code = e.code\n"
             "print('LOADED:' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('typer', 'click', 'rich', 'yaml', 'git', 'numpy') or m in ('memctl.merge', 'memctl.sync', 'memctl.cli.root'))))\n")
    for env, expect_heavy in (({}, False), (FULL, True)):
        done = subprocess.run([sys.executable, "-c", probe, "--root", str(b), "sync"], capture_output=True, text=True,
                              env={**__import__("os").environ, **env})
        loaded = done.stdout.rsplit("LOADED:", 1)[1].strip()
        assert done.stderr == QUIET
        if expect_heavy:  # the probe can see them: with the fast paths off, Typer and sync.py are loaded
            assert "typer" in loaded.split(",") and "memctl.sync" in loaded.split(",")
        else:
            assert loaded == ""


def test_a_remote_that_moved_falls_through_and_merges(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0 and cli(a, "sync").exit_code == 0
    assert cli(a, "remember", "from-a", "-d", "Aで覚えたこと").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    done, ran = traced(b)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "memctl: origin/master: 1 commit in (2 files), nothing to push\n"
    assert "fetch" in ran and git(b, "rev-parse", "HEAD").strip() == remote_head(remote)
    assert "Aで覚えたこと" in (b / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    done, ran = traced(b)
    assert (done.returncode, done.stderr, "fetch" in ran) == (0, QUIET, False)  # and now there is nothing to do


def test_a_clone_ahead_falls_through_and_pushes_or_with_no_push_says_so(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    before = remote_head(remote)
    assert cli(b, "remember", "local", "-d", "written on b").exit_code == 0
    done, ran = traced(b, "--no-push")
    assert (done.returncode, done.stderr) == (0, "memctl: origin/master: 0 commits in (0 files), 1 commit not pushed (--no-push)\n")
    assert "fetch" in ran and "push" not in ran and remote_head(remote) == before
    done, ran = traced(b)
    assert (done.returncode, done.stderr) == (0, "memctl: origin/master: 0 commits in (0 files), 1 commit pushed\n")
    assert "push" in ran and remote_head(remote) == git(b, "rev-parse", "HEAD").strip()


def test_a_stale_remote_tracking_ref_falls_through_so_the_fetch_moves_it(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0 and cli(a, "sync").exit_code == 0
    for root in (a, b):  # b: the upstream's ahead/behind says so; a: the ref read beside the status
        git(root, "update-ref", "refs/remotes/origin/master", "HEAD~1")
        done, ran = traced(root)
        assert (done.returncode, done.stderr) == (0, QUIET) and "fetch" in ran
        assert git(root, "rev-parse", "refs/remotes/origin/master") == git(root, "rev-parse", "HEAD")


def test_hand_edits_untracked_facts_and_appended_rows_fall_through(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    (b / "memory" / "MEMORY.md").write_text("# hand edit\n", encoding="utf-8")
    (fast, _), (full, _) = both(b)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr) == (
        1, "memctl: error: memory/MEMORY.md has uncommitted changes; nothing was fetched or merged "
           f"(hint: commit or discard them first (git -C {shlex.quote(str(b))} status), then memctl sync)\n")
    git(b, "checkout", "--", "memory/MEMORY.md")
    (b / "memory" / "手書き.md").write_text("---\nname: 手書き\ndescription: x\n---\n", encoding="utf-8")
    (fast, _), (full, _) = both(b)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
    assert fast.returncode == 1 and fast.stderr.startswith("memctl: error: memory/手書き.md has uncommitted changes")
    (b / "memory" / "手書き.md").unlink()
    assert memctl(b, "ledger", "append", "themes", "host=b", "theme=季節", "--no-commit").returncode == 0
    done, ran = traced(b)  # rows appended without a commit are committed first, then pushed
    assert (done.returncode, done.stderr) == (0, "memctl: origin/master: 0 commits in (0 files), 1 commit pushed\n")
    assert "fetch" in ran and git(b, "status", "--porcelain") == ""


def test_no_remote_a_missing_one_an_unreachable_one_and_two_remotes_match_the_full_path(pair, tmp_path):
    a, b, remote = pair
    lone = tmp_path / "記憶"
    assert cli(None, "init", str(lone), env={"GIT_AUTHOR_DATE": "2001-01-01T00:00:00+0000",
                                             "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+0000"}).exit_code == 0
    (fast, _), (full, _) = both(lone)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr) == (
        3, "memctl: error: no git remote is configured for this store "
           f"(hint: add one: git -C {shlex.quote(str(lone))} remote add origin URL (docs/SYNC.md))\n")
    (fast, _), (full, _) = both(b, "--remote", "nope")
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
    assert fast.returncode == 3 and fast.stderr.startswith("memctl: error: no git remote named 'nope' (remotes: origin)")
    git(lone, "remote", "add", "origin", str(tmp_path / "missing.git"))
    assert cli(lone, "sync", "--setup").exit_code == 0
    (fast, fast_git), (full, _) = both(lone)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert fast.returncode == 1 and fast.stderr.startswith("memctl: error: cannot fetch from origin: ")
    assert "fetch" not in fast_git  # the fast path's own ls-remote failed: the remote is not tried twice
    git(b, "remote", "add", "second", str(remote))
    git(b, "branch", "--unset-upstream")
    (fast, _), (full, _) = both(b)  # origin is still the default among two remotes
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr) == (0, QUIET)
    git(b, "remote", "rename", "origin", "first")
    git(b, "branch", "--unset-upstream")  # the full sync above set it again
    (fast, _), (full, _) = both(b)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
    assert fast.returncode == 2 and "several remotes (first, second)" in fast.stderr


def test_an_unfinished_merge_falls_through_to_the_full_paths_note_and_refusal(pair):
    a, b, remote = pair
    for root, text in ((a, "from a\n"), (b, "from b\n")):
        (root / "notes.txt").write_text(text)
        git(root, "add", "notes.txt")
        git(root, *ID, "commit", "-qm", "notes")
    git(a, "push", "-q", "origin", "HEAD:master")
    subprocess.run(["git", "-C", str(b), *ID, "pull", "--no-rebase", "-q", "origin", "master"], capture_output=True)
    assert (b / ".git" / "MERGE_HEAD").exists()
    (fast, fast_git), (full, _) = both(b)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert fast.returncode == 1 and "a git merge is unfinished in this store; nothing was written" in fast.stderr
    assert "ls-remote" not in fast_git


def test_a_clone_not_set_up_falls_through_and_is_set_up(pair, tmp_path):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    c = tmp_path / "c"
    subprocess.run(["git", "clone", "-q", str(remote), str(c)], check=True)
    done, ran = traced(c, "--json")
    assert done.returncode == 0 and "fetch" in ran
    assert json.loads(done.stdout)["setup"] == [f"merge.memctl-{k}.driver" for k in ("index", "topic", "state", "ledger", "fact", "archive")] + [
        "core.untrackedCache", "info/attributes"]
    done, ran = traced(c, "--json")
    assert (done.returncode, json.loads(done.stdout)["setup"], "fetch" in ran) == (0, [], False)


def test_the_fast_path_waits_for_the_store_lock_like_every_write(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom memctl.fsutil import file_lock\nfrom pathlib import Path\n"
        f"with file_lock(Path({str(b / '.memctl' / 'lock')!r})):\n    print('held', flush=True)\n    time.sleep(30)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        (fast, fast_git), (full, _) = both(b, env={"MEMCTL_LOCK_TIMEOUT": "0.2"})
        assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
        assert fast.returncode == 4 and fast.stderr.startswith(f"memctl: error: store is locked by another process (pid {holder.pid}) (")
        # before the lock, only the read-only status, config and ls-remote started with the imports
        # (memctl/early.py): the status's answer is not used unless HEAD is still where it saw it
        assert sorted(fast_git) == ["config", "ls-remote", "status"]
    finally:
        holder.kill()
        holder.wait()


def test_a_japanese_branch_and_store_path_take_the_fast_path(tmp_path):
    remote = tmp_path / "遠隔.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "記憶-a"
    assert cli(None, "init", str(a)).exit_code == 0
    git(a, "checkout", "-q", "-b", "メモ")
    git(a, "remote", "add", "origin", str(remote))
    assert cli(a, "remember", "deadline", "-d", "締め切りは金曜").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    b = tmp_path / "記憶-b"
    subprocess.run(["git", "clone", "-q", "-b", "メモ", str(remote), str(b)], check=True)
    assert cli(b, "sync", "--setup").exit_code == 0 and cli(b, "sync").exit_code == 0
    for root in (a, b):
        (fast, fast_git), (full, _) = both(root, "--json")
        assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
        assert json.loads(fast.stdout)["branch"] == "メモ" and "fetch" not in fast_git and "ls-remote" in fast_git


def test_a_claude_code_memory_directory_takes_the_fast_path_too(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a = tmp_path / "a"
    a.mkdir()
    (a / "MEMORY.md").write_text("# Memory\n\n- [Role](role.md) — データ分析者\n", encoding="utf-8")
    (a / "role.md").write_text("---\nname: role\ndescription: データ分析者\ntype: user\n---\nx\n", encoding="utf-8")
    git(a, "init", "-q")
    git(a, "add", "-A")
    git(a, *ID, "commit", "-qm", "a Claude Code memory directory")
    git(a, "remote", "add", "origin", str(remote))
    assert cli(a, "sync").exit_code == 0
    (fast, fast_git), (full, _) = both(a)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert fast.returncode == 0 and "fetch" not in fast_git and "ls-remote" in fast_git
    # a new fact file at the top is Claude Code's own write: the sync takes it in (docs/CLAUDE_CODE.md) and pushes it
    (a / "notes.md").write_text("---\nname: notes\ndescription: 手で書いた\n---\n", encoding="utf-8")
    fast, fast_git = traced(a)
    assert (fast.returncode, fast.stderr) == (0, "memctl: origin/master: 0 commits in (0 files), 1 commit pushed\n")
    assert git(a, "log", "-1", "--format=%an", "--", "notes.md").strip() == "claude-code"
    (fast, fast_git), (full, _) = both(a)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert fast.returncode == 0 and "fetch" not in fast_git
    # a person's draft in MEMORY.md's prose is nobody's to commit: both paths refuse alike
    index = a / "MEMORY.md"
    index.write_text(index.read_text(encoding="utf-8").replace("# Memory\n", "# Memory\n\n下書き\n"), encoding="utf-8")
    (fast, fast_git), (full, _) = both(a)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
    assert fast.returncode == 1 and "MEMORY.md has uncommitted changes" in fast.stderr and "ls-remote" in fast_git


def test_setup_turns_the_untracked_cache_on_unless_someone_chose(pair, tmp_path):
    a, b, remote = pair
    for root in (a, b):  # init and sync --setup both set it
        assert git(root, "config", "--local", "core.untrackedCache").strip() == "true"
    c = tmp_path / "c"
    subprocess.run(["git", "clone", "-q", str(remote), str(c)], check=True)
    git(c, "config", "core.untrackedCache", "false")  # the user's choice stays
    r = cli(c, "sync", "--setup")
    assert r.exit_code == 0 and "core.untrackedCache" not in r.stderr
    assert git(c, "config", "core.untrackedCache").strip() == "false"
    done, ran = traced(c)  # set up all the same: the fast path, without the cache
    assert (done.returncode, done.stderr, "fetch" in ran) == (0, QUIET, False)


def test_a_clone_set_up_before_the_untracked_cache_takes_the_full_path_once(pair):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    git(b, "config", "--unset", "core.untrackedCache")  # as `sync --setup` left a clone before
    done, ran = traced(b, "--json")
    assert done.returncode == 0 and "fetch" in ran and json.loads(done.stdout)["setup"] == ["core.untrackedCache"]
    assert git(b, "config", "core.untrackedCache").strip() == "true"
    done, ran = traced(b)
    assert (done.returncode, done.stderr, "fetch" in ran) == (0, QUIET, False)


@pytest.mark.parametrize("where", ["memory/手書き.md", "memory/notes/新しい.md", "memory/archive/old.md", "state/note.md"])
def test_an_untracked_hand_added_file_is_refused_with_the_untracked_cache_warm(pair, where):
    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    for _ in range(2):  # git status writes the cache into the index; the second run reads it
        done, ran = traced(b)
        assert (done.returncode, done.stderr, "fetch" in ran) == (0, QUIET, False)
    index = (b / ".git" / "index").read_bytes()
    assert b"UNTR" in index  # the untracked cache is in git's index: status trusts it for unchanged folders
    path = b / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("手で足した\n", encoding="utf-8")
    (fast, fast_git), (full, _) = both(b)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
    assert fast.returncode == 1 and fast.stderr.startswith(f"memctl: error: {where} has uncommitted changes"), fast.stderr
    assert "fetch" not in fast_git


def test_a_store_in_a_folder_of_a_larger_repository_counts_only_its_own_paths(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("a project\n", encoding="utf-8")
    git(repo, "add", "README")
    git(repo, *ID, "commit", "-qm", "a project")
    store = repo / "記憶"
    assert cli(None, "init", str(store)).exit_code == 0
    git(repo, "remote", "add", "origin", str(remote))
    assert cli(store, "sync").exit_code == 0
    # Outside memctl's paths (the project's files, the store's launchd/ folder): not hand edits to memctl.
    (repo / "README").write_text("changed\n", encoding="utf-8")
    (repo / "scratch").mkdir()
    (repo / "scratch" / "メモ.txt").write_text("x\n", encoding="utf-8")
    (store / "launchd" / "note.txt").write_text("x\n", encoding="utf-8")
    (fast, fast_git), (full, _) = both(store)
    assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr) == (0, "", QUIET)
    assert "fetch" not in fast_git
    # Inside them, an untracked folder (git status shows it as a folder): a hand edit, as the full path says.
    (store / "state" / "下書き").mkdir()
    (store / "state" / "下書き" / "a.md").write_text("x\n", encoding="utf-8")
    (fast, fast_git), (full, _) = both(store)
    assert (fast.returncode, fast.stderr) == (full.returncode, full.stderr)
    assert fast.returncode == 1 and fast.stderr.startswith("memctl: error: state/下書き/a.md has uncommitted changes"), fast.stderr


def test_a_commit_after_the_early_status_is_not_taken_for_nothing_to_do(pair):
    """`memctl sync` starts its `git status` before the store lock (memctl/early.py). When a commit
    lands between that status and the lock, the status's HEAD is stale: the fast path must not say
    "nothing to push" from it. It reads HEAD again under the lock and leaves the case to sync()."""
    import os
    import time

    from memctl import early, sync_fast
    from memctl.store import open_store

    a, b, remote = pair
    assert cli(b, "sync").exit_code == 0
    early.start_sync_status(["--root", str(b), "sync"])
    pid = next(started[0] for (_, args), started in early._STARTED.items() if args == early.FAST_STATUS)
    deadline = time.monotonic() + 30
    while open(f"/proc/{pid}/stat").read().split(") ", 1)[1][0] != "Z":  # its answer is in the pipe, HEAD as it was
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert cli(b, "remember", "late", "-d", "committed after the status looked").exit_code == 0  # HEAD moves
    try:
        assert sync_fast.nothing_to_do(open_store(b)) is None  # took the early status, saw HEAD had moved
        assert early._STARTED == {}
    finally:
        early.discard()
    before = remote_head(remote)
    done = memctl(b, "sync")
    assert done.returncode == 0 and "1 commit pushed" in done.stderr, done.stderr
    assert remote_head(remote) != before == git(b, "rev-parse", "HEAD~1").strip()
    assert not os.path.exists(f"/proc/{pid}")


def _store_with_a_hanging_ssh(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose remote is reached through an ssh that writes its pid to the file returned, then hangs."""
    store = tmp_path / "store"
    assert cli(None, "init", str(store)).exit_code == 0
    pids = tmp_path / "ssh-pids"
    ssh = tmp_path / "hanging-ssh"
    ssh.write_text(f'#!/bin/sh\ncase "$1" in -G) exit 0;; esac\necho $$ >> {pids}\nexec sleep 600\n')
    ssh.chmod(0o755)
    git(store, "remote", "add", "origin", "ssh://unreachable.example/x.git")
    git(store, "config", "core.sshCommand", str(ssh))
    return store, pids


def _still_running(pids: list[int]) -> list[int]:
    """Those of `pids` still running 10 s on (each then killed): the kill is sent, its delivery is the kernel's."""
    import os
    import signal
    import time

    left = []
    for pid in pids:
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            left.append(pid)
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("work", ["a-commit-to-push", "memctl-toml-edited"])
def test_a_remote_that_hangs_holds_an_unattended_sync_no_longer_than_its_timeout_and_leaves_no_ssh(tmp_path, work):
    """helper-53, as cron runs it (no terminal): with work to do, the `git ls-remote` started early was
    waited for without a bound (45 s for MEMCTL_GIT_TIMEOUT=5 against a remote that hangs 40 s), and
    each git stopped at the timeout left its ssh running, which a job every 15 minutes piles up."""
    import os

    store, pids = _store_with_a_hanging_ssh(tmp_path)
    if work == "a-commit-to-push":
        assert memctl(store, "remember", "pending", "-d", "a commit to push").returncode == 0
    else:  # refused before any fetch: the early ls-remote is never taken (it held the refusal for 154 s)
        with (store / "memctl.toml").open("a", encoding="utf-8") as handle:
            handle.write("# an edit not committed\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    env.update(MEMCTL_GIT_TIMEOUT="3", HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(store), "sync"], env=env, text=True,
                              stdin=subprocess.DEVNULL, capture_output=True, start_new_session=True, timeout=240)
    finally:
        started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
        left = _still_running(started)
    if work == "a-commit-to-push":
        assert done.returncode == 1 and "got no answer within 3 s" in done.stderr, done.stderr
    else:
        assert done.returncode == 1 and "memctl.toml" in done.stderr, done.stderr
    assert started and not left, f"ssh processes left running: {left}"


@pytest.mark.parametrize("said", ["ssh: Could not resolve hostname nohost.invalid: Name or service not known",
                                  "git@github.com: Permission denied (publickey).", "Host key verification failed."])
def test_an_ssh_remote_that_fails_is_named_by_ssh_s_own_line(tmp_path, said):
    """helper-53: a cron log said only "fatal: Could not read from remote repository."; the cause a
    reader acts on (no key, no known_hosts, no such host) was ssh's line before it, left out."""
    store = tmp_path / "store"
    assert cli(None, "init", str(store)).exit_code == 0
    ssh = tmp_path / "failing-ssh"
    ssh.write_text(f'#!/bin/sh\ncase "$1" in -G) exit 0;; esac\necho "{said}" >&2\nexit 255\n')
    ssh.chmod(0o755)
    git(store, "remote", "add", "origin", "ssh://nohost.invalid/x.git")
    git(store, "config", "core.sshCommand", str(ssh))
    for extra in ({}, FULL):
        done = memctl(store, "sync", env=extra)
        [line] = done.stderr.splitlines()
        assert done.returncode == 1 and "Could not read from remote repository" in line and said in line, line


def test_a_sync_whose_process_group_is_ended_leaves_no_git_or_ssh_running(tmp_path):
    """helper-55: with git in a process group of its own (an earlier form of the fix above), `timeout` or
    launchd ending the job's group ended memctl and left its git fetch and ssh running."""
    import os
    import signal
    import time

    store, pids = _store_with_a_hanging_ssh(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCTL_")}
    env.update(HF_HUB_OFFLINE="1", MEMCTL_NO_FAST="1")
    job = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(store), "sync"], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        for _ in range(600):
            if pids.exists() and pids.read_text().strip():
                break
            time.sleep(0.1)
        assert pids.exists(), "the sync never reached its ssh"
        os.killpg(job.pid, signal.SIGTERM)  # as `timeout` or launchd ends a job
        job.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    left = _still_running([int(p) for p in pids.read_text().split()])
    assert not left, f"ssh processes left running: {left}"
