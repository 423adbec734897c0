"""A clone never stays stuck (issue 29, point 6; docs/RELIABILITY.md "A clone never stays stuck"):
a push the remote declines after sync's merge commit, topic files of an overflowing index, a sync
killed inside its merge. Real git: a bare remote in a temp dir, real clones, real kills."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import cli, git, memctl
from test_sync_cli import ID, MARKER, _files, pair  # noqa: F401  (pair: the fixture of a bare remote and two clones)


@pytest.fixture(autouse=True)
def _clock(pinned_clock):
    """Every command reads one pinned clock."""


def _status(root: Path) -> str:
    return git(root, "status", "--porcelain", "--untracked-files=all")


def _decline_pushes(remote: Path, count: int) -> Path:
    """A pre-receive hook that declines the next `count` pushes, then accepts (as a remote that is
    down for a while, or a push race lost every time, does)."""
    left = remote / "declines-left"
    left.write_text(str(count))
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\nn=$(cat {left})\nif [ \"$n\" -gt 0 ]; then echo $((n - 1)) > {left}; "
                    "echo 'declined by the test hook' >&2; exit 1; fi\nexit 0\n")
    hook.chmod(0o755)
    return left


def test_a_push_declined_after_the_merge_commit_leaves_the_clone_clean_and_the_next_sync_converges(pair):
    a, b, remote = pair
    assert cli(a, "remember", "from-a", "-d", "written on a").exit_code == 0
    assert cli(a, "state", "update", "--from-json", "-", input='{"open": 1}', env={"MEMCTL_NOW": "2026-11-30T09:00:00+00:00"}).exit_code == 0
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "remember", "from-b", "-d", "書いたのは b").exit_code == 0
    assert cli(b, "state", "update", "--from-json", "-", input='{"open": 2}', env={"MEMCTL_NOW": "2026-11-30T10:00:00+00:00"}).exit_code == 0
    left = _decline_pushes(remote, 3)  # every attempt of one sync (sync.PUSH_ATTEMPTS), then accepted
    r = memctl(b, "sync")
    assert r.returncode == 1 and "cannot push to origin" in r.stderr and left.read_text().strip() == "0"
    merged = git(b, "rev-parse", "HEAD").strip()
    assert len(git(b, "log", "-1", "--format=%P").split()) == 2  # the merge commit stands
    assert _status(b) == ""  # nothing rolled back behind HEAD
    r = memctl(b, "sync")
    assert r.returncode == 0, r.stderr
    assert git(b, "rev-parse", "HEAD").strip() == merged
    assert cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b) and _status(a) == _status(b) == ""
    index = (a / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert "[from-a](from-a.md)" in index and "[from-b](from-b.md) — 書いたのは b" in index
    assert "open: 2" in (a / "state" / "STATE.md").read_text(encoding="utf-8")


def _linked(root: Path) -> list[str]:
    """The fact files MEMORY.md and its topic files link to, each once per link."""
    from memctl import index

    folder = root / "memory"
    topics = sorted((folder / index.TOPIC_DIR).glob("*.md"))
    lines = index.parse_lines((folder / "MEMORY.md").read_text(encoding="utf-8"))
    for topic in topics:
        lines += index.parse_lines(topic.read_text(encoding="utf-8"), f"{index.TOPIC_DIR}/{topic.name}")
    return sorted(line.target for line in lines if not index.is_topic_link(line.target))


def _index_limit(root: Path, lines: int, message: str) -> None:
    """memctl.toml's max_index_lines set to `lines`, committed."""
    toml = (root / "memctl.toml").read_text(encoding="utf-8")
    (root / "memctl.toml").write_text(re.sub(r"(?m)^max_index_lines = .*$", f"max_index_lines = {lines}", toml), encoding="utf-8")
    git(root, *ID, "commit", "-qam", message)


def test_topic_files_of_an_overflowing_index_merge_when_both_clones_added_facts(pair):
    a, b, remote = pair
    _index_limit(a, 30, "a short index: it overflows into memory-index/ after a few facts")
    for n in range(30):
        assert cli(a, "remember", f"a-{n:02}", "-d", f"fact {n} of a", "-t", "project").exit_code == 0
    assert (a / "memory" / "memory-index" / "project.md").exists()
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "sync").exit_code == 0
    for root, names in ((a, [f"a-{n:02}" for n in range(30, 45)]), (b, [f"b-{n:02}" for n in range(15)] + ["b-ja"])):
        for name in names:
            assert cli(root, "remember", name, "-d", f"{name} の事実", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    r = cli(b, "sync", "--json")
    assert r.exit_code == 0, r.stderr
    assert cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b) and _status(a) == _status(b) == ""
    facts = sorted(p.name for p in (a / "memory").glob("*.md") if p.name != "MEMORY.md")
    assert len(facts) == 61 and _linked(a) == facts  # every fact listed once, in MEMORY.md or a topic file
    r = memctl(a, "doctor")
    assert r.returncode == 0, r.stdout + r.stderr
    # A plain `git pull` merges the topic files through the driver `sync --setup` registered.
    for root in (a, b):
        for n in range(3):
            assert cli(root, "remember", f"{root.name}-pull-{n}", "-d", f"{root.name} {n} after the first merge", "-t", "project").exit_code == 0
    assert cli(b, "sync").exit_code == 0
    done = subprocess.run(["git", "-C", str(a), *ID, "pull", "--no-rebase", "-q", "origin", "master"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not any(MARKER.search(data.decode("utf-8")) for data in _files(a).values())
    assert cli(a, "index").exit_code == 0 and memctl(a, "doctor").returncode == 0
    assert _linked(a) == sorted(p.name for p in (a / "memory").glob("*.md") if p.name != "MEMORY.md")


def _blocking_git(tmp: Path, clone: Path, stop: int) -> tuple[Path, Path]:
    """A git (MEMCTL_GIT) that, once `clone` is in a merge, blocks at its `stop`-th call (or at the
    merge's commit, whichever comes first) after touching a flag: where the test kills the sync."""
    flag, count, script = tmp / f"blocked-{stop}", tmp / f"calls-{stop}", tmp / f"git-{stop}"
    script.write_text(f"""#!/bin/sh
if [ -e {clone}/.git/MERGE_HEAD ]; then
  n=$(cat {count} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {count}
  case " $* " in *" commit "*) n={stop};; esac
  if [ "$n" -ge {stop} ]; then touch {flag}; exec sleep 120; fi
fi
exec git "$@"
""")
    script.chmod(0o755)
    return script, flag


def _sync_killed_where_git_blocks(clone: Path, blocking: Path, flag: Path) -> None:
    """`memctl sync` in `clone` with the git `blocking` (MEMCTL_GIT), killed with every git it started once
    that git has touched `flag` and blocks."""
    import os
    import signal
    import sys
    import time

    argv = [sys.executable, "-m", "memctl", "--root", str(clone), "sync"]
    proc = subprocess.Popen(argv, env={**os.environ, "MEMCTL_GIT": str(blocking)}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flag.exists(), proc.stderr.read() if proc.poll() is not None else "the sync never reached the blocking git"
    os.killpg(proc.pid, signal.SIGKILL)  # the sync and every git it started
    proc.wait()


def _versions(root: Path, names: list[str]) -> set[bytes]:
    return {(root / "memory" / f"{name}.md").read_bytes() for name in names}


def _both_changed(a: Path, b: Path, names: list[str]) -> set[bytes]:
    """Facts `names` written on a and synced to b, then changed on both (a's pushed, b's not), and a fact
    only a has: b's next sync merges with conflicts. Returns both machines' versions of those facts."""
    for name in names:
        assert cli(a, "remember", name, "-d", f"{name} as first written", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0
    for root, when in ((a, "2026-11-30T09:00:00+00:00"), (b, "2026-11-30T10:00:00+00:00")):
        for name in names:
            r = cli(root, "remember", name, "--update", "-d", f"{name} as {root.name} has it", env={"MEMCTL_NOW": when})
            assert r.exit_code == 0, r.stderr
    assert cli(a, "remember", "only-on-a", "-d", "a new fact on a", "-t", "user").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    return _versions(a, names) | _versions(b, names)


def _kept(root: Path) -> set[bytes]:
    """Every fact text the clone holds: in place, or kept aside as a conflict copy."""
    folder = root / "memory"
    return {p.read_bytes() for p in [*folder.glob("*.md"), *(folder / "conflicts").glob("*.md")]}


@pytest.mark.parametrize(("stop", "then"), [(1, "sync"), (3, "doctor-fix-then-sync"), (8, "remember-then-sync"),
                                            (1000, "sync"), (1000, "doctor-fix-then-sync"), (1000, "head-lock-then-sync"),
                                            (1, "empty-merge-msg"), (3, "no-merge-msg")])
def test_a_sync_killed_inside_its_merge_is_redone_by_the_next_sync_and_no_version_is_lost(pair, tmp_path, stop, then):
    a, b, remote = pair
    versions = _both_changed(a, b, [f"shared-{n}" for n in range(5)])
    head = git(b, "rev-parse", "HEAD")
    _sync_killed_where_git_blocks(b, *_blocking_git(tmp_path, b, stop))
    assert (b / ".git" / "MERGE_HEAD").exists() and git(b, "rev-parse", "HEAD") == head  # killed inside the merge

    if then == "doctor-fix-then-sync":
        r = memctl(b, "doctor")
        assert "git add" not in r.stdout + r.stderr and "memctl sync" in r.stdout + r.stderr
        r = memctl(b, "doctor", "--fix")
        assert (r.returncode, r.stdout) == (0, "") and not (b / ".git" / "MERGE_HEAD").exists(), r.stdout + r.stderr
        assert "undid that merge" in r.stderr
    elif then == "head-lock-then-sync":
        # What a git killed inside the merge's commit leaves besides: its HEAD.lock. `merge --abort` then undid
        # the merge and failed on the lock at its last step (HEAD, ORIG_HEAD); asked again (after the stale lock
        # was removed), it found no merge to abort, and every sync failed so (found by test_sync_killed_loop.py).
        (b / ".git" / "HEAD.lock").write_text(head + "\n")
    elif then in ("empty-merge-msg", "no-merge-msg"):
        # A git killed after it wrote MERGE_HEAD and before MERGE_MSG held the message (helper-53, a kill -9
        # loop): the merge looked like the user's own, and every write, doctor --fix and sync refused for good.
        message = b / ".git" / "MERGE_MSG"
        message.write_bytes(b"") if then == "empty-merge-msg" else message.unlink()
        r = memctl(b, "remember", "after-the-kill", "-d", "written once the killed merge is undone")
        assert r.returncode == 0, r.stderr
        assert "undid that merge" in r.stderr
    elif then == "remember-then-sync":
        r = memctl(b, "remember", "after-the-kill", "-d", "written once the killed merge is undone")
        assert r.returncode == 0, r.stderr
    r = memctl(b, "sync")
    assert r.returncode == 0, r.stderr
    assert cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b) and _status(a) == _status(b) == ""
    assert versions <= _kept(b)  # both machines' version of every fact: in place or as a conflict copy
    assert (b / "memory" / "only-on-a.md").exists()
    assert memctl(b, "doctor").returncode == 0


def _git_blocking_at_the_index_regeneration(tmp: Path, clone: Path) -> tuple[Path, Path]:
    """A git (MEMCTL_GIT) that blocks, after touching a flag, at the `git add` that stages MEMORY.md as
    sync regenerated it inside its merge: resolved and staged once, then rewritten."""
    flag, script = tmp / "blocked-regenerated", tmp / "git-regenerated"
    script.write_text(f"""#!/bin/sh
if [ -e {clone}/.git/MERGE_HEAD ]; then
  case " $* " in *" add "*"memory/MEMORY.md"*)
    if [ -z "$(git -C {clone} ls-files -u -- memory/MEMORY.md)" ] && ! git -C {clone} diff --quiet -- memory/MEMORY.md; then
      touch {flag}; exec sleep 120
    fi;;
  esac
fi
exec git "$@"
""")
    script.chmod(0o755)
    return script, flag


@pytest.mark.parametrize("cut", ["after-the-write", "before-the-rename"])
def test_a_sync_killed_while_regenerating_the_merged_index_is_undone_and_redone(pair, tmp_path, cut):
    """Found by the four-clone simulation: a sync killed after its merge had staged MEMORY.md and
    rewritten it (`git merge --abort` refuses a file changed in the index and again after it: the
    clone stayed in the merge), or killed before the rename of that write (its temp file stopped every
    later sync as an uncommitted change). The next sync undoes the merge and merges again."""
    from memctl import fsutil

    a, b, remote = pair
    _index_limit(a, 12, "a short index: the merged one overflows, and sync regenerates it")
    versions = _both_changed(a, b, [f"shared-{n}" for n in range(5)])
    for root in (a, b):
        for n in range(4):
            assert cli(root, "remember", f"{root.name}-{n}", "-d", f"{root.name} の事実 {n}", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    _sync_killed_where_git_blocks(b, *_git_blocking_at_the_index_regeneration(tmp_path, b))
    assert (b / ".git" / "MERGE_HEAD").exists() and _status(b).startswith("MM memory/MEMORY.md")
    if cut == "before-the-rename":  # the write's temp file, as a kill between its creation and its rename leaves it
        records = fsutil.read_undo(b / ".memctl" / "undo" / "log", b)
        tmp = [r.tmp for r in records if r.op == "W" and r.path == str(b / "memory" / "MEMORY.md")][-1]
        Path(tmp).write_text("half an index")
    r = memctl(b, "sync")
    assert r.returncode == 0 and "undid that merge" in r.stderr, r.stderr
    assert cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b) and _status(a) == _status(b) == ""
    assert versions <= _kept(b)
    assert memctl(b, "doctor").returncode == 0


def test_two_indexes_under_their_limit_that_merge_over_it_are_regenerated_into_topic_files(pair):
    a, b, remote = pair
    _index_limit(a, 40, "an index of 40 lines")
    for n in range(20):
        assert cli(a, "remember", f"base-{n:02}", "-d", f"base fact {n}", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0 and cli(b, "sync").exit_code == 0
    for root in (a, b):
        for n in range(8):
            assert cli(root, "remember", f"{root.name}-{n}", "-d", f"{root.name} の事実 {n}", "-t", "project").exit_code == 0
        assert len((root / "memory" / "MEMORY.md").read_text(encoding="utf-8").splitlines()) <= 40
        assert not (root / "memory" / "memory-index").exists()  # each side alone fits
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "sync").exit_code == 0
    assert len((b / "memory" / "MEMORY.md").read_text(encoding="utf-8").splitlines()) <= 40
    assert _linked(b) == sorted(p.name for p in (b / "memory").glob("*.md") if p.name != "MEMORY.md")
    assert memctl(b, "doctor").returncode == 0


def test_a_merge_refused_after_memctl_toml_was_merged_leaves_every_file_as_head_has_it(pair):
    a, b, remote = pair
    assert cli(a, "ledger", "create", "reading", "--columns", "date,title").exit_code == 0
    assert cli(b, "ledger", "create", "meals", "--columns", "date,dish").exit_code == 0
    for root, text in ((a, "from a\n"), (b, "from b\n")):  # a file that is not memctl's, changed on both sides
        (root / "notes.txt").write_text(text)
        git(root, "add", "notes.txt")
        git(root, *ID, "commit", "-qm", "notes")
    assert cli(a, "sync").exit_code == 0
    before, head = _files(b), git(b, "rev-parse", "HEAD")
    r = cli(b, "sync")
    assert r.exit_code == 1 and "notes.txt" in r.stderr
    assert (_files(b), git(b, "rev-parse", "HEAD"), _status(b)) == (before, head, "")
    assert cli(b, "remember", "after", "-d", "the refused sync left nothing behind").exit_code == 0


def test_a_stale_index_lock_left_by_a_killed_git_does_not_stop_the_merge(pair):
    """`git merge` saves the work tree first (`git stash create`); with git's index.lock held and a tracked
    file stat-dirty (touched, unchanged) that fails as a bare "stash failed": what a sync killed while
    git held the lock left for a later sync's merge (the parallel simulation met it in CI)."""
    import os
    import time

    a, b, _ = pair
    assert cli(a, "remember", "from-a", "-d", "written on a").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "remember", "from-b", "-d", "書いたのは b").exit_code == 0
    lock = b / ".git" / "index.lock"
    lock.touch()
    past = time.time() - 60
    os.utime(lock, (past, past))  # a killed git's, a minute ago
    os.utime(b / "memory" / "from-b.md")  # stat-dirty: same bytes, a newer mtime
    r = memctl(b, "sync")
    assert r.returncode == 0, r.stderr
    assert "removed a stale git lock" in r.stderr and not lock.exists()
    assert len(git(b, "log", "-1", "--format=%P").split()) == 2 and _status(b) == ""
    assert cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b)


def test_a_live_index_lock_is_waited_for_then_exit_4_and_nothing_is_merged(pair):
    import os
    import time

    a, b, _ = pair
    assert cli(a, "remember", "from-a", "-d", "written on a").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "remember", "from-b", "-d", "書いたのは b").exit_code == 0
    before = git(b, "rev-parse", "HEAD").strip()
    lock = b / ".git" / "index.lock"
    lock.write_text(f"memctl pid {os.getpid()}\n")  # held by a live memctl (this test's process)
    try:
        started = time.monotonic()
        r = memctl(b, "sync", env={"MEMCTL_LOCK_TIMEOUT": "1"})
        assert r.returncode == 4 and "index.lock" in r.stderr, r.stderr
        assert time.monotonic() - started >= 1  # waited for it first
    finally:
        lock.unlink()
    assert git(b, "rev-parse", "HEAD").strip() == before and _status(b) == ""
    assert memctl(b, "sync").returncode == 0


def test_a_git_killed_after_writing_the_merge_index_but_before_merge_head_does_not_stick_the_clone(pair, tmp_path):
    """git writes a conflicted merge's index (its stages) and work tree before MERGE_HEAD: a kill between
    leaves unmerged entries and no merge to abort (the parallel simulation met it under CI's shifted
    clock: `UU memory/MEMORY.md` after the kill, and every later sync refused). The next command puts
    git's index back as HEAD has it with the files, and the next sync merges again."""
    a, b, _ = pair
    versions = _both_changed(a, b, [f"shared-{n}" for n in range(3)])
    head, files = git(b, "rev-parse", "HEAD"), _files(b)
    _sync_killed_in_its_merge(b, tmp_path, f'git "$@"; rm -f {b}/.git/MERGE_HEAD {b}/.git/MERGE_MSG {b}/.git/MERGE_MODE; '
                                           f'echo x > {b}/.merge_file_Xk3p9Q')
    assert not (b / ".git" / "MERGE_HEAD").exists() and git(b, "ls-files", "-u")  # unmerged entries, no merge
    r = memctl(b, "status")  # a read: it changes nothing
    assert git(b, "ls-files", "-u")
    r = memctl(b, "remember", "after-the-kill", "-d", "written once the killed merge is put back")
    assert r.returncode == 0, r.stderr
    assert "interrupted" in r.stderr and git(b, "ls-files", "-u") == "" and git(b, "rev-parse", "HEAD^") == head
    assert not (b / ".merge_file_Xk3p9Q").exists()  # a merge driver's temp file, which the killed git left
    assert {k: v for k, v in _files(b).items() if "after-the-kill" not in k and not k.endswith("MEMORY.md")} == \
        {k: v for k, v in files.items() if not k.endswith("MEMORY.md")}
    r = memctl(b, "sync")
    assert r.returncode == 0, r.stderr
    assert cli(a, "sync").exit_code == 0
    assert _files(a) == _files(b) and _status(a) == _status(b) == ""
    assert versions <= _kept(b) and (b / "memory" / "only-on-a.md").exists()
    assert memctl(b, "doctor").returncode == 0


def test_a_git_killed_in_a_merge_driver_before_writing_a_file_leaves_no_temp_file_behind(pair, tmp_path):
    """git writes a merge driver's `.merge_file_XXXXXX` temps and removes them when it exits: killed with
    the sync before it wrote any file, it leaves them (and nothing else). The next command removes them."""
    a, b, _ = pair
    _both_changed(a, b, [f"shared-{n}" for n in range(2)])
    head = git(b, "rev-parse", "HEAD")
    _sync_killed_in_its_merge(b, tmp_path, f"echo x > {b}/.merge_file_Zz9q1W")
    r = memctl(b, "remember", "after-the-kill", "-d", "written once the killed sync is settled")
    assert r.returncode == 0, r.stderr
    assert not (b / ".merge_file_Zz9q1W").exists() and git(b, "rev-parse", "HEAD^") == head
    assert memctl(b, "sync").returncode == 0 and _status(b) == ""


def _sync_killed_in_its_merge(b: Path, tmp_path: Path, merge: str) -> None:
    """`memctl sync` in `b` with a git whose `merge --no-commit` runs the shell line `merge` then waits;
    killed (its process group, git with it) once the line has run."""
    import os
    import signal
    import sys
    import time

    flag, script = tmp_path / "in-merge", tmp_path / "git-dies-in-its-merge"
    script.write_text(f"""#!/bin/sh
case " $* " in *" merge --no-commit "*)
  {merge}; touch {flag}; exec sleep 120;;
esac
exec git "$@"
""")
    script.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(b), "sync"], env={**os.environ, "MEMCTL_GIT": str(script)},
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flag.exists(), proc.stderr.read() if proc.poll() is not None else "the sync never reached its merge"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.file_times  # a lock's age is its mtime (the kernel's real clock) against the process's clock
def test_a_lock_a_killed_push_left_in_a_path_remote_is_removed_when_stale(pair):
    """Found by the four-clone simulation: a sync killed while pushing to a remote on this machine's
    filesystem (a folder, a mounted share) killed the remote's receive-pack too, which left
    `remote.git/HEAD.lock`; every push of every clone failed from then on ("failed to push some refs").
    A stale one is removed with a warning (our own rule: old, no git running there). A fresh one is waited
    for as a lock in the clone is, for it may be another clone's push: the kill loop in CI met one a
    second old, and the next clone's sync failed on it ("cannot push") where a wait had seen it go stale."""
    import os
    import time

    a, b, remote = pair
    lock = remote / "HEAD.lock"
    lock.write_text("ref: refs/heads/master\n")
    assert cli(a, "remember", "fresh-lock", "-d", "押し出す前の事実", "-t", "project").exit_code == 0
    r = memctl(a, "sync", env={"MEMCTL_LOCK_TIMEOUT": "1"})
    assert r.returncode == 4 and lock.exists(), r.stderr  # fresh: maybe live; waited for, then exit 4
    assert f"memctl: error: git push: {lock} is held by another git process; nothing was pushed" in r.stderr, r.stderr
    # Another push that holds it for a moment: waited for, and nothing is removed.
    os.utime(lock)
    subprocess.Popen(["sh", "-c", f"sleep 1; rm -f '{lock}'"])
    assert cli(a, "remember", "after-wait", "-d", "待ってから押す事実", "-t", "project").exit_code == 0
    r = memctl(a, "sync")
    assert r.returncode == 0 and "removed a stale git lock" not in r.stderr, r.stderr
    # One a killed push left a moment ago: it goes stale while the sync waits, and is removed.
    lock.write_text("ref: refs/heads/master\n")
    old = time.time() - 4
    os.utime(lock, (old, old))
    assert cli(a, "remember", "stale-lock", "-d", "古い錠の後の事実", "-t", "project").exit_code == 0
    r = memctl(a, "sync")
    assert r.returncode == 0, r.stderr
    assert f"removed a stale git lock: {lock}" in r.stderr and not lock.exists()
    assert cli(b, "sync").exit_code == 0 and (b / "memory" / "stale-lock.md").exists()
    assert _status(a) == _status(b) == ""


@pytest.mark.file_times  # a lock's age is its mtime (the kernel's real clock) against the process's clock
def test_a_lock_a_killed_fetch_left_in_the_clone_is_removed_when_stale_and_the_sync_goes_on(pair):
    """Found by the kill loop in CI: a sync killed while its `git fetch` updated the remote-tracking ref
    left `.git/refs/remotes/origin/master.lock`, and every later sync failed ("cannot fetch from
    origin: cannot lock ref"), blaming the remote's URL. A lock in the clone's own git folder is
    git's (as for every other git memctl runs): removed once stale, with a warning, then fetched again."""
    import os
    import time

    a, b, _ = pair
    assert cli(a, "remember", "from-a", "-d", "a の事実", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    lock = b / ".git" / "refs" / "remotes" / "origin" / "master.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    old = time.time() - 60
    os.utime(lock, (old, old))  # a killed git's, a minute ago
    r = memctl(b, "doctor")
    assert "origin/master.lock: warning: left by a git that died" in r.stdout, r.stdout
    r = memctl(b, "sync")
    assert r.returncode == 0, r.stderr
    assert f"removed a stale git lock: {lock}" in r.stderr and not lock.exists()
    assert (b / "memory" / "from-a.md").exists() and _status(b) == ""


@pytest.mark.file_times
def test_a_live_lock_on_the_remote_tracking_ref_is_waited_for_then_exit_4(pair, monkeypatch):
    import os

    a, b, _ = pair
    assert cli(a, "remember", "from-a", "-d", "a の事実", "-t", "project").exit_code == 0
    assert cli(a, "sync").exit_code == 0
    lock = b / ".git" / "refs" / "remotes" / "origin" / "master.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")  # fresh: maybe a live git's (an outside `git fetch`)
    before = git(b, "rev-parse", "HEAD")
    r = memctl(b, "sync", env={"MEMCTL_LOCK_TIMEOUT": "1"})
    assert r.returncode == 4 and str(lock) in r.stderr and lock.exists(), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "git fetch: " in r.stderr and "nothing was fetched or merged" in r.stderr
    assert git(b, "rev-parse", "HEAD") == before and _status(b) == ""
    os.unlink(lock)


def test_a_merge_git_refuses_names_the_files_in_its_one_line(pair):
    """git lists the files that stop a merge on the lines after its `error:` line; the one-line error
    kept only that line ("...would be overwritten by merge:"), without a file name."""
    a, b, _ = pair
    for name in ("notes.txt", "メモ.txt"):
        (a / name).write_text("from a\n", encoding="utf-8")
    git(a, "add", "notes.txt", "メモ.txt")
    git(a, *ID, "commit", "-qm", "notes")
    assert cli(a, "sync").exit_code == 0
    assert cli(b, "remember", "from-b", "-d", "b の事実").exit_code == 0  # so the sync merges, not fast-forwards
    for name in ("notes.txt", "メモ.txt"):
        (b / name).write_text("b's own, never committed\n", encoding="utf-8")
    head = git(b, "rev-parse", "HEAD")
    r = memctl(b, "sync")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "would be overwritten by merge: notes.txt, メモ.txt" in r.stderr, r.stderr
    assert git(b, "rev-parse", "HEAD") == head and (b / "メモ.txt").read_text(encoding="utf-8") == "b's own, never committed\n"


def _slow_git_at_commit(tmp: Path, flag: Path) -> Path:
    """A git (MEMCTL_GIT) whose `commit` touches `flag`, waits 3 s, then commits: a write or a sync caught midway."""
    script = tmp / "slow-git"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" commit "*|*" commit-tree "*) touch {flag}; sleep 3;; esac\nexec git "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("midway", ["remember", "sync-merge"])
def test_doctor_and_a_read_beside_a_live_write_or_sync_call_nothing_interrupted_or_killed(pair, tmp_path, midway):
    """helper-53: `doctor` beside an append loop said "changed by a memctl command that was interrupted" and
    exited 1 (the bundled daily-maintenance.sh failed 5 of 13 runs so); beside a live sync merge it said
    "a memctl sync was killed inside its merge", and `list` warned the same. They read the undo log and
    MERGE_HEAD of a command still running: now they look once it has finished."""
    import os
    import sys
    import time

    a, b, remote = pair
    if midway == "sync-merge":
        _both_changed(a, b, ["shared-0"])
        args = ["sync"]
    else:
        args = ["remember", "midway", "-d", "written while doctor looks", "-t", "project"]
    flag = tmp_path / "committing"
    env = {**os.environ, "MEMCTL_GIT": str(_slow_git_at_commit(tmp_path, flag))}
    writer = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(b), *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not flag.exists() and writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flag.exists(), writer.communicate()
    listed = memctl(b, "list")
    checked = memctl(b, "doctor")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert "killed" not in listed.stderr and "interrupted" not in listed.stderr, listed.stderr
    assert (checked.returncode, checked.stdout) == (0, ""), checked.stdout + checked.stderr
    assert _status(b) == ""
