"""Fault injection (docs/RELIABILITY.md): full disks, file size limits, git locks, kill -9, links out of the store,
lost headers and conflict markers. Real processes, real git, real file systems; docs/RELIABILITY.md
names each test here next to the guarantee it proves.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memctl.store import init_store

from conftest import cli, git, memctl

FULL = os.environ.get("MEMCTL_TEST_FULL") == "1"
PAGE = 4096


# ---------------------------------------------------------------- helpers

def run(root: Path, *args: str, env: dict | None = None, input: str | None = None, fsize: int | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """memctl as a subprocess; `fsize` sets RLIMIT_FSIZE (bytes) in the child, like `ulimit -f`."""
    if fsize is None:
        return memctl(root, *args, env=env, input=input, timeout=timeout)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    # Python's own bytecode cache is not memctl's to write: under the limit CPython can leave a cut-off .pyc
    # beside a module not yet compiled (a fresh clone, as CI's; it does not check a short write), and every
    # later import of it fails ("marshal data too short").
    full_env = {**os.environ, **(env or {}), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), *args], input=input, text=True,
                          capture_output=True, env=full_env, timeout=timeout, preexec_fn=limit)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The stderr of a failed command: exactly one `memctl: error:` line, no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("memctl: error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the store outside .git and .memctl, by relative path."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".git", ".memctl") or not path.is_file() or path.is_symlink():
            continue
        files[str(rel)] = path.read_bytes()
    return files


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def clean(root: Path) -> None:
    """Nothing uncommitted, doctor passes."""
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    done = memctl(root, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr


def seed(root: Path) -> None:
    """A store with facts, a ledger with a unique column, an episode and a STATE.md, all committed."""
    for name, text in (("alpha", "アルファの事実: 東京は日本の首都"), ("beta", "beta fact about deploys"), ("gamma", "γ ガンマ")):
        assert memctl(root, "remember", name, "--description", text, "--type", "project").returncode == 0
    assert memctl(root, "ledger", "create", "orders", "--columns", "k,v", "--unique", "k").returncode == 0
    assert memctl(root, "ledger", "append", "orders", "k=order-1", "v=最初の注文").returncode == 0
    assert memctl(root, "episode", "add", "初めてのエピソード", "--type", "decision").returncode == 0
    assert memctl(root, "state", "update").returncode == 0


# Every writing command, as (argv, what must be in the log once it succeeded).
def writers(i: int) -> list[tuple[tuple[str, ...], str]]:
    return [
        (("remember", f"new{i}", "--description", f"新しい事実 number {i} と詳細"), f"memory: remember new{i}"),
        (("remember", "alpha", "--update", "--description", f"アルファ更新 {i}"), "memory: update alpha"),
        (("ledger", "append", "orders", f"k=order-{i + 100}", f"v=注文 {i} " + "x" * 80), "ledger: append orders (+1)"),
        (("episode", "add", f"エピソード {i}", "--type", "success"), "ledger: append episodes (+1)"),
        (("state", "update"), "state: update"),
        (("index",), ""),
    ]


def drop_index_line(root: Path) -> None:
    index = root / "memory" / "MEMORY.md"
    index.write_text("".join(line for line in index.read_text().splitlines(True) if "gamma.md" not in line))
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "index by hand")


# ---------------------------------------------------------------- a small disk

@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (needs root and mount); the store lives on it. Skipped, with the reason, where mounting is impossible."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8); the RLIMIT_FSIZE tests cover disk-full without it")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the RLIMIT_FSIZE tests cover disk-full without it")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path, leave_pages: int = 0) -> list[Path]:
    """Fill the file system with one-page files until it is full, then free `leave_pages` of them."""
    folder = disk / "filler"
    folder.mkdir(exist_ok=True)
    made = []
    block = b"f" * PAGE
    for n in range(100_000):
        path = folder / f"{n}"
        try:
            with open(path, "wb") as handle:
                handle.write(block)
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            break
        made.append(path)
    for path in made[len(made) - leave_pages:] if leave_pages else []:
        path.unlink()
    return made


def free(disk: Path) -> None:
    shutil.rmtree(disk / "filler", ignore_errors=True)


def test_disk_full_on_every_writing_command_changes_nothing_then_the_retry_succeeds(small_disk):
    root = small_disk / "store"
    init_store(root)
    seed(root)
    for argv, message in writers(1):
        if argv == ("index",):  # give it something to write: a generated line gone from MEMORY.md
            drop_index_line(root)
        before, commit = snapshot(root), head(root)
        fill(small_disk)
        done = run(root, *argv)
        free(small_disk)
        assert done.returncode == 1, (argv, done.stderr)
        line = one_line_error(done)
        assert "No space left on device" in line or "not committed" in line, line
        assert "free some space" in line, line  # not "check `git status`" when git ran out of space
        assert (snapshot(root), head(root)) == (before, commit), argv  # byte-identical, nothing committed
        again = run(root, *argv)
        assert again.returncode == 0, (argv, again.stderr)
        if message:
            assert message in git(root, "log", "-1", "--format=%s")
        clean(root)


def test_a_full_disk_at_any_point_leaves_no_git_lock_and_no_temp_file(small_disk):
    """The disk fills up at each point of a write in turn (0 to 12 pages left): the old code, taking git's
    index.lock, left it empty when writing its pid failed, and plain git refused every commit after it."""
    root = small_disk / "store"
    init_store(root)
    seed(root)
    for leave in range(13):
        for argv in (("pin", "alpha"), ("unpin", "alpha"), ("ledger", "append", "orders", f"k=o-{leave}", "v=値")):
            fill(small_disk, leave_pages=leave)
            done = run(root, *argv)
            free(small_disk)
            assert done.returncode in (0, 1), (leave, argv, done.stderr)
            leftovers = [p for p in (root / ".git").rglob("*.lock")] + [p for p in root.rglob("*.tmp")]
            assert leftovers == [], (leave, argv, done.stderr)
            if done.returncode == 1:
                assert "free some space" in one_line_error(done), (leave, argv)  # even when git ran out of it
                assert run(root, *argv).returncode == 0, (leave, argv)
    clean(root)


def test_the_first_episode_on_a_full_disk_leaves_no_empty_ledger_committed(small_disk):
    """The disk fills up at each point of a store's first `episode add` in turn: the old code committed the new
    episodes ledger and its declaration first, then failed on the episode, so a command that failed had
    still changed the store (an empty ledger, memctl.toml, a commit). Now both go in one commit, or neither."""
    root = small_disk / "store"
    init_store(root)
    assert memctl(root, "remember", "alpha", "--description", "アルファの事実").returncode == 0
    failed = 0
    for leave in range(13):
        before, commit = snapshot(root), head(root)
        fill(small_disk, leave_pages=leave)
        done = run(root, "episode", "add", f"最初のエピソード {leave}", "--type", "decision")
        free(small_disk)
        assert done.returncode in (0, 1), (leave, done.stderr)
        if done.returncode == 1:
            failed += 1
            assert "free some space" in one_line_error(done), (leave, done.stderr)
            assert (snapshot(root), head(root)) == (before, commit), leave  # no ledger, no declaration, no commit
            assert git(root, "status", "--porcelain", "--untracked-files=all") == "", leave
            continue
        assert git(root, "log", "-1", "--format=%s") == "ledger: create episodes (+1)\n", leave
        assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["ledgers/episodes.tsv", "memctl.toml"]
        assert f"最初のエピソード {leave}" in (root / "ledgers" / "episodes.tsv").read_text()
        clean(root)
        break
    else:
        raise AssertionError("the first episode never fitted on the disk")
    assert failed, "the disk was never full during the write: the test measured nothing"


@pytest.mark.parametrize("argv", [("recall", "deploys", "--mode", "keyword"), ("cache", "rebuild"),
                                  ("context", "--query", "deploys", "--mode", "keyword")])
def test_the_recall_index_on_a_full_disk_fails_in_one_line_then_works(small_disk, argv):
    """The recall index (`.memctl/recall.sqlite`) made on a full disk: the old code printed SQLite's
    traceback ("database or disk is full", "disk I/O error") and left an index without tables; a
    vector cache write failed naming no file."""
    root = small_disk / "store"
    init_store(root)
    seed(root)
    for leave in range(0, 40, 3):
        shutil.rmtree(root / ".memctl", ignore_errors=True)
        fill(small_disk, leave_pages=leave)
        done = run(root, *argv, "--no-log") if argv[0] != "cache" else run(root, *argv)
        free(small_disk)
        if done.returncode not in (0, 1) or "Traceback" in done.stderr or "error" in done.stderr:
            # recall's 1 means "nothing relevant" (as grep's): its failures are 2; other commands fail with 1
            assert done.returncode == (2 if argv[0] == "recall" else 1), (leave, done.stdout, done.stderr)
            assert "/.memctl/" in one_line_error(done), (leave, done.stderr)  # the index, or the vector cache
        again = run(root, *argv, "--no-log") if argv[0] != "cache" else run(root, *argv)
        assert again.returncode == 0 and "Traceback" not in again.stderr, (leave, again.stderr)


def _documents(folder: Path, count: int, more: str = "") -> None:
    folder.mkdir(exist_ok=True)
    for n in range(count):
        path = folder / f"d{n}.md"
        text = path.read_text() if path.exists() else f"# 文書 {n}\n\nt {n}\n"
        path.write_text(text + (f"{more} {n} lorem ipsum dolor sit amet 会議 {n}\n" if more else ""))


def _indexed_whole(root: Path, files: int) -> None:
    """`source status`: every file indexed, none stale."""
    done = run(root, "source", "status", "--json")
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    assert (status["files"], status["stale"]) == (files, 0), status


def test_a_source_index_on_a_full_disk_fails_in_one_line_then_the_next_run_indexes_everything(small_disk, tmp_path):
    """`memctl source index` with the store on a full disk, at each point in turn (the index missing, or there):
    the old code printed SQLite's traceback, its handler's own COMMIT failing ("cannot commit - no transaction
    is active", "no such savepoint: file"), or `executescript(_SCHEMA)` failing with no handler at all."""
    root = small_disk / "store"
    init_store(root)
    docs = tmp_path / "docs"
    _documents(docs, 40)
    assert run(root, "source", "add", "notes", str(docs / "*.md")).returncode == 0
    failed = 0
    for leave in range(0, 30, 3):
        if leave % 2:  # the index made anew on the full disk
            for path in (root / ".memctl").glob("sources.sqlite*"):
                path.unlink()
        _documents(docs, 40, more=f"more {leave}")
        fill(small_disk, leave_pages=leave)
        done = run(root, "source", "index")
        free(small_disk)
        assert done.returncode in (0, 1), (leave, done.stderr)
        if done.returncode == 1:
            failed += 1
            line = one_line_error(done)
            assert done.stderr.count("\n") == 1, (leave, done.stderr)
            assert "/.memctl/sources.sqlite" in line and "disk" in line and "free some space" in line, (leave, line)
        again = run(root, "source", "index")
        assert again.returncode == 0 and again.stderr == "", (leave, again.stderr)
        _indexed_whole(root, 40)
    assert failed, "the disk was never full during the run: the test measured nothing"
    clean(root)


def test_a_source_index_past_the_file_size_limit_fails_in_one_line_then_the_next_run_indexes_everything(root, tmp_path):
    """`(ulimit -f N; memctl source index)` after the documents grew (EFBIG, which SQLite calls "disk I/O
    error" or "database or disk is full"): one line naming the index and the limit, never a traceback; an
    exit 0 is a run whose commit is in the index's WAL (only SQLite's checkpoint into the file failed)."""
    docs = tmp_path / "docs"
    _documents(docs, 30)
    assert run(root, "source", "add", "notes", str(docs / "*.md")).returncode == 0
    assert run(root, "source", "index").returncode == 0
    failed = 0
    for kib in (120, 110, 100, 90, 80, 60, 30):
        _documents(docs, 30, more=f"more {kib}")
        done = run(root, "source", "index", fsize=kib * 1024)
        assert done.returncode in (0, 1), (kib, done.stderr)
        if done.returncode == 1:
            failed += 1
            line = one_line_error(done)
            assert "/.memctl/sources.sqlite" in line and f"ulimit -f, is {kib} KiB" in line, (kib, line)
        else:
            _indexed_whole(root, 30)  # what it said it did is there
    assert failed, "the limit was never met: the test measured nothing"
    assert run(root, "source", "index").returncode == 0
    _indexed_whole(root, 30)


def test_remember_on_a_full_disk_says_one_line_not_the_vector_caches_warning_too(small_disk):
    """remember's embedding check saves the vector cache before the fact is written: on a full disk it
    warned "the vector cache was not saved ... (ENOSPC)", then the write failed for the same cause, two
    lines where one says it all. The warning is for a command that goes on: it stays when remember succeeds."""
    root = small_disk / "store"
    init_store(root)
    seed(root)
    failed = 0
    for leave in range(0, 12):
        shutil.rmtree(root / ".memctl" / "vectors", ignore_errors=True)  # the check has vectors to save
        fill(small_disk, leave_pages=leave)
        done = run(root, "remember", f"new{leave}", "--description", f"まったく新しい事実 {leave} について")
        free(small_disk)
        assert done.returncode in (0, 1), (leave, done.stderr)
        if done.returncode == 1:
            failed += 1
            assert "free some space" in one_line_error(done), (leave, done.stderr)
            assert done.stderr.count("\n") == 1, (leave, done.stderr)  # no "vector cache was not saved" before it
    assert failed, "the disk was never full during the write: the test measured nothing"
    clean(root)


def test_the_vector_caches_warning_stays_when_remember_succeeds_or_fails_for_another_cause(root, monkeypatch):
    import errno

    from memctl import errors, facts, vcache
    from memctl.store import open_store

    warned: list[str] = []
    monkeypatch.setattr(errors, "_reporter", type("R", (), {"warn": staticmethod(lambda m, hint=None: warned.append(m))})())

    def check(store):
        def saving(name, description, exclude):  # as vcache's sync on a full disk: the answer stands, a warning
            vcache._not_saved(store, store.cache_dir, OSError(errno.ENOSPC, "No space left on device", "x.npy"))
            return []
        return saving

    store = open_store(root)
    facts.remember(store, facts.FactInput("alpha", "アルファの事実"), vector_check=check(store))
    assert len(warned) == 1 and "the vector cache was not saved" in warned[0]  # after the write, once
    with pytest.raises(errors.Refused):  # exists: another cause, the warning is still news
        facts.remember(store, facts.FactInput("alpha", "別の説明"), vector_check=check(store))
    assert len(warned) == 2

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(root / "memory" / "beta.md"))

    monkeypatch.setattr(facts, "write_fact", full)
    with pytest.raises(OSError):
        facts.remember(store, facts.FactInput("beta", "ベータの事実"), vector_check=check(store))
    assert len(warned) == 2  # the error says it: no warning before it


def test_init_on_a_full_disk_leaves_nothing_then_the_retry_makes_a_whole_store(small_disk):
    """The disk fills up at each point of `memctl init` in turn: the old code left memctl.toml, the folders
    and a half-made .git behind, and its retry said "already a store" without committing them."""
    for leave in range(0, 48, 2):
        target = small_disk / f"store-{leave}"
        fill(small_disk, leave_pages=leave)
        done = memctl(None, "init", str(target))
        free(small_disk)
        if done.returncode != 0:
            assert done.returncode == 1, (leave, done.stderr)
            one_line_error(done)
            assert not target.exists(), (leave, sorted(map(str, target.rglob("*"))))
            done = memctl(None, "init", str(target))
            assert done.returncode == 0, (leave, done.stderr)
        clean(target)
        assert git(target, "ls-files").split() == [".gitattributes", ".gitignore", "launchd/.gitkeep", "ledgers/.gitkeep",
                                                    "memctl.toml", "memory/MEMORY.md", "memory/archive/.gitkeep",
                                                    "state/.gitkeep"], leave
        shutil.rmtree(target)


def test_init_killed_before_its_commit_is_committed_whole_by_the_next_init(tmp_path):
    target = tmp_path / "store"
    _killed(tmp_path, ("init", str(target)), _killing_git(tmp_path, "before", "update-ref"))
    assert (target / "memctl.toml").exists()
    seen = run(target, "doctor")  # the old doctor said "store is clean"
    assert seen.returncode == 1 and "memctl.toml: error: the store's own file is not committed" in seen.stdout, seen.stdout
    again = memctl(None, "init", str(target))
    assert again.returncode == 0 and "(committed)" in again.stderr, again.stderr
    clean(target)
    assert "memctl.toml" in git(target, "ls-files").split()


def test_a_ledger_append_cut_off_by_a_full_disk_leaves_the_file_as_it_was(small_disk):
    """Issue 16.1: the append that crossed a page boundary wrote 20 of 95 bytes, then refused its retry."""
    root = small_disk / "store"
    init_store(root)
    assert run(root, "ledger", "create", "orders", "--columns", "k,v", "--unique", "k").returncode == 0
    path = root / "ledgers" / "orders.tsv"
    with open(path, "ab") as handle:  # the file ends 20 bytes before a page boundary
        handle.write(b"k0\t" + b"v" * (PAGE - path.stat().st_size - 20 - 4) + b"\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pad")
    assert path.stat().st_size == PAGE - 20
    before = path.read_bytes()
    fill(small_disk, leave_pages=1)  # one page: enough for the undo log, not for the record's second page
    record = ("k=order-42", "v=" + "値" * 30)
    done = run(root, "ledger", "append", "orders", *record)
    assert done.returncode == 1, done.stderr
    assert "No space left on device" in one_line_error(done)
    assert path.read_bytes() == before
    free(small_disk)
    assert run(root, "ledger", "check", "orders").returncode == 0
    again = run(root, "ledger", "append", "orders", *record)
    assert again.returncode == 0, again.stderr  # not "already exists"
    rows = run(root, "ledger", "rows", "orders", "--where", "k=order-42", "--json")
    assert "値" * 30 in rows.stdout
    clean(root)


@pytest.mark.parametrize("fetched,leave_pages", [(False, 0), (True, 6), (True, 16)],
                         ids=["full-at-start", "full-inside-git-merge", "full-at-the-merge-commit"])
def test_a_sync_on_a_full_disk_fails_in_one_line_loses_nothing_and_the_next_sync_completes(small_disk, tmp_path, fetched,
                                                                                            leave_pages):
    """Issue 29.6: the disk fills up as `memctl sync` starts, inside `git merge` (the old code left files of the other
    side in the work tree with no merge to abort, and git's `.merge_file_*` temp files: every later sync refused
    "memory/b0.md has uncommitted changes"), or at the merge's commit. The sync fails with one line, the clone keeps
    every file and commit it had, and once space is back the next sync completes: both clones converge with every
    fact of either, `doctor` passes."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    b = tmp_path / "b"
    init_store(b)
    git(b, "remote", "add", "origin", str(remote))
    assert cli(b, "sync").exit_code == 0
    a = small_disk / "a"
    subprocess.run(["git", "clone", "-q", str(remote), str(a)], check=True, capture_output=True)
    assert cli(a, "sync", "--setup").exit_code == 0
    for i in range(3):  # in-process: only the sync under test is a subprocess
        assert cli(a, "remember", f"a{i}", "--description", f"Aの事実 {i}: 東京の会議室", "--type", "project").exit_code == 0
        assert cli(b, "remember", f"b{i}", "--description", f"fact {i} decided on b", "--type", "project").exit_code == 0
    assert cli(b, "ledger", "create", "notes", "--columns", "n").exit_code == 0
    assert cli(b, "ledger", "append", "notes", "n=" + "長い記録 " * 400).exit_code == 0
    assert cli(b, "state", "update").exit_code == 0
    assert cli(b, "sync").exit_code == 0
    if fetched:
        git(a, "fetch", "-q", "origin")
    before, commit = snapshot(a), head(a)
    fill(small_disk, leave_pages=leave_pages)
    done = run(a, "sync")
    free(small_disk)
    assert done.returncode == 1, (done.returncode, done.stderr)
    one_line_error(done)
    assert not list(a.glob(".merge_file_*")), "git's temp files left in the work tree"  # the old code left them
    assert head(a) == commit and git(a, "rev-parse", "origin/master").strip() != commit
    after = snapshot(a)
    assert {k: v for k, v in after.items() if k in before} == before, "a file of the clone changed"
    again = run(a, "sync")
    assert again.returncode == 0, again.stderr
    assert run(b, "sync").returncode == 0
    for clone in (a, b):
        names = {p.stem for p in (clone / "memory").glob("*.md")} - {"MEMORY"}
        assert names == {"a0", "a1", "a2", "b0", "b1", "b2"}, (clone, names)
        clean(clone)
    assert head(a) == head(b)


def test_file_size_limit_efbig_cuts_an_append_back_and_the_retry_succeeds(root):
    """`(ulimit -f 8; memctl ledger append ...)`: EFBIG half-way through the record."""
    assert run(root, "ledger", "create", "orders", "--columns", "k,v", "--unique", "k").returncode == 0
    path = root / "ledgers" / "orders.tsv"
    lines = "".join(f"k{n}\t{'v' * 60}\n" for n in range(120))
    path.write_text(path.read_text() + lines)
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "rows")
    before = path.read_bytes()
    limit = len(before) + 40  # room for 40 of the record's bytes
    record = ("k=order-42", "v=" + "値" * 40)
    done = run(root, "ledger", "append", "orders", *record, fsize=limit)
    assert done.returncode == 1
    assert "File too large" in one_line_error(done)
    assert path.read_bytes() == before
    assert git(root, "status", "--porcelain") == ""
    again = run(root, "ledger", "append", "orders", *record)
    assert again.returncode == 0, again.stderr
    clean(root)


def test_file_size_limit_on_a_fact_and_state_write_is_one_line_and_changes_nothing(root):
    seed(root)
    big = "長い本文 " * 3000
    before, commit = snapshot(root), head(root)
    done = run(root, "remember", "big", "--description", "大きな事実", "--body", big, fsize=16 * 1024)
    assert done.returncode == 1
    assert "File too large" in one_line_error(done)
    assert (snapshot(root), head(root)) == (before, commit)
    assert run(root, "remember", "big", "--description", "大きな事実", "--body", big).returncode == 0
    clean(root)


SERVER_SAYING_MUCH = """#!/bin/sh
set -e
head -c 300 /dev/zero | tr '\\0' x >&2
echo >&2
exec "$PY" -m memctl mcp --root "$ROOT"
"""

PROBE_UNDER_LIMIT = """
import json, resource, sys
from pathlib import Path
from memctl.integrations import probe
resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
entry = {"command": sys.argv[1], "env": {"PY": sys.executable, "ROOT": sys.argv[2]}}
print(json.dumps(probe.server(entry, Path(sys.argv[3]))._asdict()))
"""


def test_the_mcp_server_check_needs_no_disk_for_what_the_server_says_on_stderr(root, tmp_path):
    """CI: `agent install` under a file size limit of 100 bytes failed with 'the MCP server entry does not
    start: the server exited (code 120)': the check put the server's stderr in a temporary file, under the
    same limit, and the server's line naming a store at a long path broke it. On a full disk the same.
    Its stderr now goes through a pipe: a server that says 300 bytes before it starts still answers."""
    server = tmp_path / "server.sh"
    server.write_text(SERVER_SAYING_MUCH)
    server.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run([sys.executable, "-c", PROBE_UNDER_LIMIT, str(server), str(root), str(project)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)
    assert (checked["answers"], checked["error"]) == (True, None), checked


def test_an_agent_install_that_cannot_write_leaves_no_folder_behind(root, tmp_path):
    """A write that fails (a full disk, the file size limit) removes the folders it made for its file:
    the old code left an empty `.claude/` in the project after a failed `agent install`."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    done = run(root, "agent", "install", "claude-code", "--project", str(project), env={"HOME": str(home)}, fsize=100)
    assert done.returncode == 1, done.stderr
    assert "File too large" in one_line_error(done)
    assert list(project.iterdir()) == []
    again = run(root, "agent", "install", "claude-code", "--project", str(project), env={"HOME": str(home)})
    assert again.returncode == 0, again.stderr
    assert (project / ".mcp.json").is_file() or (project / ".claude").is_dir()


# ---------------------------------------------------------------- git locks

def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.mark.parametrize("lock", ["HEAD.lock", "index.lock", "refs/heads/LOCK"])
def test_a_stale_git_lock_is_removed_with_a_warning_and_the_write_commits(root, lock):
    branch = git(root, "symbolic-ref", "--short", "HEAD").strip()
    name = f"refs/heads/{branch}.lock" if lock == "refs/heads/LOCK" else lock
    path = root / ".git" / name
    path.touch()
    _age(path, 60)  # what a killed `git commit` leaves
    seen = run(root, "doctor")  # plain git refuses to commit meanwhile: doctor says so (a warning)
    assert seen.returncode == 0 and f"{name}: warning: left by a git that died" in seen.stdout, seen.stdout
    done = run(root, "remember", "alpha", "--description", "アルファ")
    assert done.returncode == 0, done.stderr
    assert "removed a stale git lock" in done.stderr
    assert not path.exists()
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember alpha"
    clean(root)


def test_a_live_git_lock_is_waited_for_then_exit_4_and_nothing_changes(root):
    seed(root)
    lock = root / ".git" / "HEAD.lock"
    holder = subprocess.Popen(["git", "cat-file", "--batch"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        time.sleep(5)
        lock.touch()
        _age(lock, 5.5)  # older than a few seconds, and made after the git working in the repository started
        before, commit = snapshot(root), head(root)
        done = run(root, "forget", "beta", "--reason", "古い", env={"MEMCTL_LOCK_TIMEOUT": "1"})
        assert done.returncode == 4, done.stderr
        assert "HEAD.lock is held by another git process" in one_line_error(done)
        assert (snapshot(root), head(root)) == (before, commit)
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()
    done = run(root, "forget", "beta", "--reason", "古い")  # its git is gone now: the lock is stale
    assert done.returncode == 0, done.stderr
    assert "removed a stale git lock" in done.stderr
    clean(root)


@pytest.mark.file_times
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a process's start time is read from /proc")
def test_a_dead_gits_lock_is_stale_though_a_git_started_since_works_in_the_repository(root):
    """helper-75: any git working in the repository (an editor's `git cat-file --batch`, another memctl's git)
    kept a dead git's index.lock "live": every write waited, then exit 4 ("held by another git process"), and
    doctor said clean. A git that started after the lock was made cannot be its maker."""
    seed(root)
    lock = root / ".git" / "index.lock"
    lock.touch()
    _age(lock, 60)
    holder = subprocess.Popen(["git", "cat-file", "--batch"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        seen = run(root, "doctor")
        assert "index.lock: warning: left by a git that died" in seen.stdout, seen.stdout
        done = run(root, "remember", "zeta", "--description", "ゼータ", env={"MEMCTL_LOCK_TIMEOUT": "5"})
        assert done.returncode == 0, done.stderr
        assert "removed a stale git lock" in done.stderr and not lock.exists()
    finally:
        holder.kill()
        holder.wait()
    clean(root)


@pytest.mark.file_times  # a fresh lock is live for a few seconds by its mtime against the process's clock
def test_no_file_of_a_change_is_written_while_a_live_git_holds_the_index(root):
    """helper-75: memctl wrote the fact and MEMORY.md, then waited for git's index.lock: a user's `git commit -a`
    waiting on the same lock took MEMORY.md (listing a fact its tree lacks), and a kill then left HEAD so. The
    files are written only once the index is free; while it is held, nothing of the change is in the work tree."""
    seed(root)
    lock = root / ".git" / "index.lock"
    lock.touch()  # a git at work: live for STALE_LOCK_SECONDS
    index = root / "memory" / "MEMORY.md"
    before = index.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "remember", "kappa", "--description", "カッパ"],
                            env={**os.environ, "MEMCTL_LOCK_TIMEOUT": "3"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = set()
    while proc.poll() is None:
        if (root / "memory" / "kappa.md").exists():
            written.add("memory/kappa.md")
        if index.read_bytes() != before:
            written.add("memory/MEMORY.md")
        time.sleep(0.01)
    _, err = proc.communicate()
    assert proc.returncode == 4 and "index.lock is held by another git process" in err, err
    assert written == set()
    lock.unlink()
    done = run(root, "remember", "kappa", "--description", "カッパ")
    assert done.returncode == 0, done.stderr
    clean(root)


@pytest.mark.parametrize("off", ["env", "toml"])
def test_a_write_that_commits_nothing_does_not_wait_for_gits_index(root, off):
    """helper-79: the wait for git's index.lock before the first write ran for MEMCTL_NO_COMMIT=1 and `[git]
    commit = false` too: such a write, which never commits, waited, then exit 4 "nothing was committed"."""
    seed(root)
    env = {"MEMCTL_LOCK_TIMEOUT": "2"}
    if off == "env":
        env["MEMCTL_NO_COMMIT"] = "1"
    else:
        toml = root / "memctl.toml"
        toml.write_text(toml.read_text(encoding="utf-8").replace("commit = true", "commit = false"), encoding="utf-8")
        git(root, "-c", "user.name=me", "-c", "user.email=me@localhost", "commit", "-qam", "commits off")
    lock = root / ".git" / "index.lock"
    lock.touch()  # a git at work (fresh: live)
    try:
        done = run(root, "remember", "lambda", "--description", "ラムダ", env=env)
        assert done.returncode == 0, done.stderr
        assert (root / "memory" / "lambda.md").exists() and lock.exists()
    finally:
        lock.unlink()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a process's start time is read from /proc")
def test_a_memctl_lock_whose_pid_another_process_took_since_is_stale(root):
    """A memctl killed holding git's index.lock, its pid then reused (after a reboot): the old code took
    the lock for live as long as that other process ran, and every write failed with exit 4."""
    seed(root)
    lock = root / ".git" / "index.lock"
    other = subprocess.Popen(["sleep", "600"])
    try:
        lock.write_text(f"memctl pid {other.pid}\n")
        os.utime(lock, (1_000_000_000, 1_000_000_000))  # made in 2001, long before that process started
        done = run(root, "remember", "delta", "--description", "デルタ", env={"MEMCTL_LOCK_TIMEOUT": "5"})
        assert done.returncode == 0, done.stderr
        assert "removed a stale git lock" in done.stderr and not lock.exists()
        lock.write_text(f"memctl pid {other.pid}\n")
        os.utime(lock, (4_000_000_000, 4_000_000_000))  # made after it started: its memctl is alive
        done = run(root, "remember", "epsilon", "--description", "イプシロン", env={"MEMCTL_LOCK_TIMEOUT": "1"})
        assert done.returncode == 4 and lock.exists(), done.stderr
    finally:
        other.kill()
        other.wait()
    lock.unlink()
    clean(root)


def test_doctor_fix_says_once_that_it_removed_a_stale_git_lock(root):
    """`doctor --fix` said it twice: a warning from the removal, then its own list of what it fixed."""
    seed(root)
    lock = root / ".git" / "index.lock"
    lock.write_text("")
    os.utime(lock, (1_000_000_000, 1_000_000_000))  # a git that died long ago
    done = run(root, "doctor", "--fix")
    assert done.returncode == 0 and not lock.exists(), done.stdout + done.stderr
    said = (done.stdout + done.stderr).splitlines()
    assert [line for line in said if "stale git lock" in line] == [
        f"memctl: removed the stale git lock {lock} (its git process is gone)"], said
    clean(root)


@pytest.mark.file_times
def test_a_fresh_lock_without_a_git_process_is_stale_after_a_few_seconds(root):
    lock = root / ".git" / "index.lock"
    lock.touch()
    started = time.monotonic()
    done = run(root, "remember", "alpha", "--description", "アルファ")
    assert done.returncode == 0, done.stderr
    assert "removed a stale git lock" in done.stderr
    assert time.monotonic() - started >= 4  # waited until it was old enough to be a dead git's
    clean(root)


# ---------------------------------------------------------------- one commit step

def test_memctl_commits_only_its_paths_and_leaves_staged_changes_alone(root):
    (root / "mine.txt").write_text("staged by the user\n")
    git(root, "add", "mine.txt")
    done = run(root, "remember", "alpha", "--description", "アルファ")
    assert done.returncode == 0, done.stderr
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["memory/MEMORY.md", "memory/alpha.md"]
    assert git(root, "status", "--porcelain") == "A  mine.txt\n"  # still staged, memctl's paths clean


def test_outside_commits_in_a_loop_never_take_memctls_changes(root):
    """Issue 16.8: `git commit` between memctl's add and commit took its change under its own message."""
    stop = root / ".stop"
    loop = subprocess.Popen(
        ["sh", "-c", f"n=0; while [ -d .git ] && [ ! -e {stop} ]; do n=$((n+1)); echo $n > outside.txt; "
         "git add outside.txt 2>/dev/null && git -c user.name=o -c user.email=o@o commit -qm outside 2>/dev/null; done"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert run(root, "ledger", "create", "notes", "--columns", "n").returncode == 0
    try:
        count = 16 if FULL else 6
        for i in range(count):
            done = run(root, "remember", f"f{i}", "--description", f"事実 {i} について")
            assert done.returncode == 0, done.stderr
            assert "not committed" not in done.stderr
            done = run(root, "ledger", "append", "notes", f"n={i}")
            assert done.returncode == 0 and "not committed" not in done.stderr, done.stderr
    finally:
        stop.touch()
        try:
            loop.wait(timeout=60)
        finally:
            loop.kill()
    log = git(root, "log", "--format=%x00%s", "--name-only")
    for entry in log.split("\0")[1:]:
        subject, *files = entry.strip().split("\n")
        files = [f for f in files if f]
        if subject == "outside":
            assert files == ["outside.txt"], files
        elif subject.startswith("memory: remember"):
            assert all(f.startswith("memory/") for f in files), (subject, files)
    subjects = git(root, "log", "--format=%s").splitlines()
    assert "outside" in subjects  # the loop did commit beside memctl
    for i in range(count):
        assert f"memory: remember f{i}" in subjects
    assert git(root, "status", "--porcelain", "--", "memory").strip() == ""


# ---------------------------------------------------------------- killed at a chosen point

def _killing_git(tmp_path: Path, when: str, at: str) -> dict:
    """A git that kills its caller's whole process group just before (or after) running `at`."""
    real = shutil.which("git")
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir(exist_ok=True)
    if when == "before":
        body = f'for a in "$@"; do [ "$a" = "{at}" ] && kill -KILL 0; done\nexec {real} "$@"\n'
    else:
        body = f'{real} "$@"; rc=$?\nfor a in "$@"; do [ "$a" = "{at}" ] && kill -KILL 0; done\nexit $rc\n'
    wrapper.write_text("#!/bin/sh\n" + body)
    wrapper.chmod(0o755)
    return {"GIT_PYTHON_GIT_EXECUTABLE": str(wrapper)}


def _killed(root: Path, argv: tuple[str, ...], env: dict) -> None:
    full = {**os.environ, **env}
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), *argv], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.returncode


@pytest.mark.parametrize("when,at", [("before", "update-ref"), ("after", "update-ref"), ("before", "write-tree"), ("after", "update-index")])
def test_forget_killed_around_its_commit_is_settled_by_the_next_command(root, tmp_path, when, at):
    """Issue 16.3: a forget killed between the move and the commit left ` D x1.md` and `?? archive/x1.md`."""
    seed(root)
    commit = head(root)
    _killed(root, ("forget", "beta", "--reason", "古い"), _killing_git(tmp_path, when, at))
    pending = run(root, "doctor")
    assert pending.returncode == 1 and "interrupted" in pending.stdout, pending.stdout
    assert "not committed" not in pending.stdout, pending.stdout  # one hint, not "commit them" beside it
    done = run(root, "forget", "beta", "--reason", "古い")
    # "after update-index": killed holding git's index.lock, before HEAD moved (the lock is stale for the retry)
    committed = (when, at) == ("after", "update-ref")
    if committed:  # HEAD had moved: the change is kept, the retry finds it done
        assert done.returncode == 1 and "already archived" in done.stderr, done.stderr
        assert git(root, "log", "-1", "--format=%s").strip() == "memory: forget beta"
    else:  # undone first, so the retry does it whole
        assert "undid its change" in done.stderr and done.returncode == 0, done.stderr
        assert git(root, "log", "-1", "--format=%s").strip() == "memory: forget beta"
        assert git(root, "rev-parse", "HEAD~1").strip() == commit
    assert (root / "memory" / "archive" / "beta.md").exists() and not (root / "memory" / "beta.md").exists()
    clean(root)


def test_doctor_fix_settles_an_interrupted_change(root, tmp_path):
    seed(root)
    before = snapshot(root)
    _killed(root, ("remember", "delta", "--description", "デルタ"), _killing_git(tmp_path, "before", "update-ref"))
    assert (root / "memory" / "delta.md").exists()
    done = run(root, "doctor", "--fix")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "settled the interrupted change" in done.stderr
    assert snapshot(root) == before
    clean(root)


def test_an_edit_made_after_a_kill_is_kept_when_the_change_is_undone(root, tmp_path):
    """A remember killed before its commit, then the user edits its fact and MEMORY.md: the next write
    undoes the change but keeps both files as they were (the old code deleted the fact and put
    MEMORY.md back, the edits with them)."""
    seed(root)
    before = snapshot(root)
    _killed(root, ("remember", "zz-12", "--description", "被害に遭う事実"), _killing_git(tmp_path, "before", "update-ref"))
    fact, index = root / "memory" / "zz-12.md", root / "memory" / "MEMORY.md"
    with open(fact, "a", encoding="utf-8") as handle:
        handle.write("手で書いた大事な一行\n")
    with open(index, "a", encoding="utf-8") as handle:
        handle.write("\nMy own hand note outside the block\n")
    edited = {"memory/zz-12.md": fact.read_bytes(), "memory/MEMORY.md": index.read_bytes()}
    done = run(root, "episode", "add", "something else", "--type", "decision",
               env={"TZ": "Asia/Tokyo", "MEMCTL_NOW": "2027-01-01T08:45:00+09:00"})
    assert done.returncode == 0, done.stderr
    assert "undid its change" in done.stderr and ".memctl/undone/" in done.stderr, done.stderr
    folder = root / done.stderr.split("are kept in ")[1].split("/\n")[0].strip()
    assert folder.name.startswith("20261231T234500-"), folder  # <UTC time>-<pid> (FORMAT.md); it was local time
    assert {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == edited
    after = snapshot(root)
    assert after.pop("ledgers/episodes.tsv") != before.pop("ledgers/episodes.tsv")  # the new episode only
    assert after == before
    seen = run(root, "doctor")  # a warning until the user deletes the copies
    assert seen.returncode == 0 and f"{folder.relative_to(root)}/: warning: files as they were" in seen.stdout, seen.stdout
    clean(root)


def test_lines_appended_after_a_killed_append_are_kept_when_it_is_undone(root, tmp_path):
    """A ledger append killed before its commit, then a line appended by hand: the undo cuts the ledger
    back to its old length and keeps what it cut (memctl's row and the hand-written one)."""
    seed(root)
    ledger = root / "ledgers" / "orders.tsv"
    old = ledger.read_bytes()
    _killed(root, ("ledger", "append", "orders", "k=order-2", "v=二番目"), _killing_git(tmp_path, "before", "update-ref"))
    with open(ledger, "ab") as handle:
        handle.write("order-3\t手で足した行\n".encode())
    cut = ledger.read_bytes()[len(old):]
    done = run(root, "doctor", "--fix")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ledger.read_bytes() == old
    assert [p.read_bytes() for p in (root / ".memctl" / "undone").rglob("orders.tsv.appended")] == [cut], done.stderr
    clean(root)


# ---------------------------------------------------------------- kill -9 at random points

def test_kill_9_at_random_points_of_every_writing_command(root):
    """≥ 200 kills in the full run (MEMCTL_TEST_FULL=1), 12 by default; after each the next command succeeds,
    every command that exited 0 is committed, and doctor passes."""
    seed(root)
    rng = random.Random(int(os.environ.get("MEMCTL_KILL_SEED", "16")))
    kills = 204 if FULL else 12
    expected: list[str] = []
    killed = 0
    i = 0
    # The kill lands at a random point of the command's own run: uniform over its last whole
    # run's length (a fixed range lets a fast machine finish nearly every command first).
    lasted: dict[str, float] = {}
    while killed < kills:
        i += 1
        argv, message = rng.choice(writers(i))
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(rng.uniform(0.02, lasted.get(argv[0], 0.9)))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            assert b"Traceback" not in err
            lasted[argv[0]] = max(0.05, time.monotonic() - started)
            if message:
                expected.append(message)
            continue
        assert proc.returncode == -signal.SIGKILL, err
        killed += 1
        argv, message = writers(10_000 + i)[i % 4]  # the next command: must succeed
        done = run(root, *argv)
        assert done.returncode == 0, (argv, done.stderr)
        expected.append(message)
        status = git(root, "status", "--porcelain", "--untracked-files=all")
        assert status == "", status
        check = run(root, "doctor")
        assert check.returncode == 0, check.stdout + check.stderr
    subjects = git(root, "log", "--format=%s").splitlines()
    for message in expected:
        assert message in subjects or any(s.startswith(message) for s in subjects), message
    assert subjects.count("memory: update alpha") >= expected.count("memory: update alpha")
    git(root, "fsck", "--no-dangling")


# ---------------------------------------------------------------- links out of the store

def test_links_out_of_the_store_are_refused_and_named_by_doctor(root, tmp_path):
    seed(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.tsv").write_text("k\tv\n")
    (root / "ledgers" / "evil.tsv").symlink_to(elsewhere / "evil.tsv")
    done = run(root, "ledger", "append", "evil", "k=1", "v=2")
    assert done.returncode == 1 and "is a symbolic link" in one_line_error(done)
    assert (elsewhere / "evil.tsv").read_text() == "k\tv\n"
    (root / "ledgers" / "evil.tsv").unlink()

    shutil.move(root / "memory" / "archive", elsewhere / "archive")
    (root / "memory" / "archive").symlink_to(elsewhere / "archive")
    done = run(root, "forget", "alpha", "--reason", "x")
    assert done.returncode == 1 and "is a symbolic link" in one_line_error(done)
    assert (root / "memory" / "alpha.md").is_file() and not (elsewhere / "archive" / "alpha.md").exists()
    assert git(root, "status", "--porcelain", "--", "memory/alpha.md", "memory/MEMORY.md") == ""

    (elsewhere / "outside.md").write_text("---\nname: outside\ndescription: 外の事実\n---\nbody\n")
    (root / "memory" / "outside.md").symlink_to(elsewhere / "outside.md")
    shown = run(root, "show", "outside")
    assert shown.returncode != 0 and "外の事実" not in shown.stdout
    done = run(root, "remember", "outside", "--update", "--description", "changed")
    assert done.returncode != 0
    assert (root / "memory" / "outside.md").is_symlink()

    state = root / "state" / "STATE.md"
    (elsewhere / "STATE.md").write_text(state.read_text())
    state.unlink()
    state.symlink_to(elsewhere / "STATE.md")
    for argv in (("state", "show"), ("state", "update")):
        done = run(root, *argv)
        assert done.returncode == 1 and "state/STATE.md is a symbolic link" in one_line_error(done), argv
    assert (elsewhere / "STATE.md").read_text() == git(root, "show", "HEAD:state/STATE.md")

    doctor = run(root, "doctor")
    assert doctor.returncode == 1
    assert "state/STATE.md: error: a symbolic link (to " in doctor.stdout
    assert "memory/archive: error: a symbolic link (to " in doctor.stdout
    assert "memory/outside.md: error: a symbolic link (to " in doctor.stdout


def test_a_cache_folder_linked_out_of_the_store_is_refused(root, tmp_path):
    outside = tmp_path / "cache"
    outside.mkdir()
    shutil.rmtree(root / ".memctl", ignore_errors=True)
    (root / ".memctl").symlink_to(outside)
    done = run(root, "remember", "alpha", "--description", "アルファ")
    assert done.returncode == 1 and ".memctl is a symbolic link" in one_line_error(done)
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------- headers, torn lines, markers

def test_a_declared_ledger_without_its_header_is_an_error_for_every_reader_and_writer(root):
    """Issue 16.6: `ledger rows` dropped the first record; `append --unique` took its duplicate."""
    seed(root)
    path = root / "ledgers" / "orders.tsv"
    path.write_bytes(path.read_bytes().split(b"\n", 1)[1])  # the header line deleted
    for argv in (("ledger", "rows", "orders"), ("ledger", "append", "orders", "k=order-1", "v=dup"),
                 ("ledger", "rows", "orders", "--where", "k=order-1")):
        done = run(root, *argv)
        assert done.returncode == 1, (argv, done.stdout, done.stderr)
        line = one_line_error(done)
        assert "ledgers/orders.tsv:1: the header line of ledger 'orders' is missing" in line
        assert "printf 'k\\tv\\n' | cat - ledgers/orders.tsv" in line
    eps = root / "ledgers" / "episodes.tsv"
    eps.write_bytes(eps.read_bytes().split(b"\n", 1)[1])
    done = run(root, "episode", "list")
    assert done.returncode == 1 and "episodes.tsv:1: the header line" in one_line_error(done)
    assert run(root, "ledger", "check", "orders").returncode == 1


def test_a_header_changed_by_hand_is_put_back_by_the_hint_for_that_case(root):
    """The hint once only put a header before line 1: followed for a header changed by hand, it turned the changed
    header into a record, and `ledger check` then said clean. Now it names both cases; each repair gives the rows back."""
    seed(root)
    path = root / "ledgers" / "orders.tsv"
    good = path.read_bytes()
    rows = run(root, "ledger", "rows", "orders").stdout
    path.write_bytes(good.replace(b"k\tv\n", b"k\t\xe5\x80\xa4\n", 1))  # v renamed 値 by hand
    line = one_line_error(run(root, "ledger", "rows", "orders"))
    assert "line 1 is 'k\\t値', the header is 'k\\tv'" in line, line
    repair = line.split("if it is the header, changed: ", 1)[1].rsplit(")", 1)[0]
    subprocess.run(["sh", "-c", repair], cwd=root, check=True)
    assert path.read_bytes() == good and run(root, "ledger", "rows", "orders").stdout == rows
    path.write_bytes(good.split(b"\n", 1)[1])  # the header deleted: the other repair
    line = one_line_error(run(root, "ledger", "rows", "orders"))
    repair = line.split("if line 1 is a record, put the header before it: ", 1)[1].split("; if it is the header", 1)[0]
    subprocess.run(["sh", "-c", repair], cwd=root, check=True)
    assert path.read_bytes() == good


def test_a_last_line_without_lf_refuses_append_and_fails_check(root):
    seed(root)
    path = root / "ledgers" / "orders.tsv"
    good = path.read_bytes()
    path.write_bytes(good + b"order-2\t\xe5\x80")  # a record cut off mid-character
    done = run(root, "ledger", "append", "orders", "k=order-3", "v=x")
    assert done.returncode == 1
    line = one_line_error(done)
    assert "the last line has no LF" in line and f"truncate -s {len(good)} ledgers/orders.tsv" in line
    check = run(root, "ledger", "check", "orders")
    assert check.returncode == 1 and "no LF" in check.stdout + check.stderr
    os.truncate(path, len(good))  # the repair the hint gives
    assert run(root, "ledger", "append", "orders", "k=order-3", "v=x").returncode == 0


def test_conflict_markers_are_named_by_doctor_and_refused_by_writers(root):
    seed(root)
    fact = root / "memory" / "beta.md"
    text = fact.read_text()
    fact.write_text(text + "<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> other\n")
    marker_line = text.count("\n") + 1
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a bad merge")
    doctor = run(root, "doctor")
    assert doctor.returncode == 1 and f"memory/beta.md:{marker_line}: error: unresolved merge conflict markers" in doctor.stdout
    done = run(root, "remember", "beta", "--update", "--description", "新しい説明")
    assert done.returncode == 1 and "fact 'beta' cannot be read" in one_line_error(done)
    # markers in the frontmatter: broken, not missing
    fact.write_text("---\n<<<<<<< HEAD\nname: beta\n=======\nname: beta2\n>>>>>>> other\ndescription: x\n---\n")
    done = run(root, "forget", "beta", "--reason", "x")
    assert done.returncode == 1 and "cannot be read" in one_line_error(done) and "no fact named" not in done.stderr
    git(root, "checkout", "--", "memory/beta.md")

    ledger = root / "ledgers" / "orders.tsv"
    ledger.write_bytes(ledger.read_bytes() + b"<<<<<<< HEAD\norder-9\ta\n=======\norder-9\tb\n>>>>>>> other\n")
    done = run(root, "ledger", "append", "orders", "k=order-10", "v=x")
    assert done.returncode == 1 and "unresolved merge conflict markers" in one_line_error(done)
    check = run(root, "ledger", "check", "orders")
    assert check.returncode == 1 and "ledgers/orders.tsv:3" in check.stdout
    git(root, "checkout", "--", "ledgers/orders.tsv")

    index = root / "memory" / "MEMORY.md"
    index.write_text(index.read_text() + "<<<<<<< HEAD\n- x\n=======\n- y\n>>>>>>> other\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "bad index")
    before, commit = snapshot(root), head(root)
    done = run(root, "remember", "zeta", "--description", "ゼータ")
    assert done.returncode == 1 and "MEMORY.md" in one_line_error(done)
    assert (snapshot(root), head(root)) == (before, commit)  # the fact written first was undone
    doctor = run(root, "doctor")
    assert "memory/MEMORY.md:" in doctor.stdout and "conflict marker" in doctor.stdout

    state = root / "state" / "STATE.md"
    state.write_text(state.read_text() + "<<<<<<< HEAD\n=======\n>>>>>>> x\n")
    done = run(root, "state", "update")
    assert done.returncode == 1 and "unresolved merge conflict markers" in one_line_error(done)


# ---------------------------------------------------------------- bad environment, odd files

@pytest.mark.parametrize("value", ["abc", "nan", "-1", "inf"])
def test_a_bad_lock_timeout_is_bad_input_on_both_command_paths(root, value):
    assert run(root, "ledger", "create", "notes", "--columns", "n").returncode == 0
    for argv in (("ledger", "append", "notes", "n=1"), ("remember", "alpha", "--description", "a")):
        done = run(root, *argv, env={"MEMCTL_LOCK_TIMEOUT": value})
        assert done.returncode == 2, (argv, done.stderr)
        assert "MEMCTL_LOCK_TIMEOUT" in one_line_error(done)
    assert git(root, "status", "--porcelain") == ""


def test_a_lock_file_replaced_by_a_folder_is_one_line(root):
    assert run(root, "ledger", "create", "notes", "--columns", "n").returncode == 0
    lock = root / ".memctl" / "lock"
    lock.parent.mkdir(exist_ok=True)
    if lock.exists():
        lock.unlink()
    lock.mkdir()
    for argv in (("ledger", "append", "notes", "n=1"), ("remember", "alpha", "--description", "a")):
        done = run(root, *argv)
        assert done.returncode == 1
        assert "lock file" in one_line_error(done)


def test_a_read_only_folder_is_one_line_naming_the_path(root):
    if os.geteuid() == 0:
        # root writes anywhere: a read-only bind is what stops it
        target = root / "memory"
        done = subprocess.run(["mount", "--bind", "-o", "ro", str(target), str(target)], capture_output=True)
        if done.returncode != 0:
            pytest.skip("cannot bind-mount read-only here")
        subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], capture_output=True)
        try:
            done = run(root, "remember", "alpha", "--description", "アルファ")
        finally:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
        line = one_line_error(done)
        assert done.returncode == 1 and "memory" in line and ("EROFS" in line or "EACCES" in line), line
    else:
        (root / "memory").chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            done = run(root, "remember", "alpha", "--description", "アルファ")
        finally:
            (root / "memory").chmod(0o755)
        line = one_line_error(done)
        assert done.returncode == 1 and "EACCES" in line, line
    assert git(root, "status", "--porcelain") == ""


def test_a_killed_cache_save_leaves_no_temp_file_behind_for_long(root):
    cache = root / ".memctl" / "vectors"
    cache.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = cache / f".vectors.npy.{dead.pid}.deadbeef.tmp"
    leftover.write_bytes(b"half")
    from memctl.fsutil import sweep_temps

    assert sweep_temps(cache) == [leftover] and not leftover.exists()
    fact_tmp = root / "memory" / f".alpha.md.{dead.pid}.0badf00d.tmp"
    fact_tmp.write_text("half")
    doctor = run(root, "doctor", "--fix")
    assert not fact_tmp.exists(), doctor.stderr


def test_a_write_killed_before_its_rename_leaves_no_temp_file(root):
    """Found by the random kills: the undo log matched HEAD (nothing renamed yet), its temp file stayed."""
    memctl(root, "remember", "alpha", "--description", "アルファ")
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from memctl import fsutil\n"
        "from memctl.store import open_store\n"
        "store = open_store(sys.argv[1])\n"
        "path = store.memory_dir / 'alpha.md'\n"
        "with store.lock():\n"
        "    tmp = fsutil._temp_name(path)\n"
        "    fsutil._record('W', path, tmp)\n"
        "    tmp.write_text('half a fact')\n"
        "    os._exit(9)  # dies here, like kill -9: no cleanup runs\n"
    )
    subprocess.run([sys.executable, "-c", script, str(root)], check=False)
    leftovers = list((root / "memory").glob(".alpha.md.*.tmp"))
    assert len(leftovers) == 1
    doctor = run(root, "doctor")
    assert doctor.returncode == 1 and "memory/alpha.md: error: changed by a memctl command that was interrupted" in doctor.stdout
    done = run(root, "remember", "beta", "--description", "ベータ")
    assert done.returncode == 0, done.stderr
    assert not leftovers[0].exists()
    clean(root)


def test_committing_a_folder_leaves_gits_index_in_step_with_head(root):
    """The commit may name folders: every file added, changed or deleted under them is in git's index after it."""
    from memctl import store as store_mod

    memctl(root, "remember", "alpha", "--description", "アルファ")
    memctl(root, "remember", "beta", "--description", "ベータ")
    (root / "memory" / "alpha.md").unlink()
    (root / "memory" / "new.md").write_text("---\nname: new\ndescription: 新しい\n---\n")
    (root / "memory" / "beta.md").write_text((root / "memory" / "beta.md").read_text() + "追記\n")
    sha = store_mod.commit(store_mod.open_store(root), [root / "memory"], "test: a folder")
    assert sha == head(root)
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    assert sorted(git(root, "show", "--name-status", "--format=", "HEAD").splitlines()) == [
        "A\tmemory/new.md", "D\tmemory/alpha.md", "M\tmemory/beta.md"]


def test_the_store_lock_is_reentrant_in_one_thread_only(root):
    """A write inside another's (distill's remember) joins its lock and its undo log; another thread,
    or another process, still waits; a commit from inside is refused (the outer write commits)."""
    import threading

    from memctl import errors, facts
    from memctl.fsutil import atomic_write
    from memctl.store import commit, open_store

    store = open_store(root)
    waited: list[str] = []

    def other_thread() -> None:
        try:
            with store.lock():
                waited.append("got it")
        except errors.LockTimeout:
            waited.append("timed out")

    os.environ["MEMCTL_LOCK_TIMEOUT"] = "0.3"
    try:
        with store.lock():
            facts.remember(store, facts.FactInput(name="inner", description="内側の書き込み"), commit_changes=False)
            with store.lock():  # nested: no wait, no second undo log
                pass
            with pytest.raises(RuntimeError):  # a nested write that fails is undone at once (a savepoint) ...
                with store.lock():
                    atomic_write(root / "memory" / "half.md", "---\nname: half\n---\n")
                    atomic_write(root / "memory" / "inner.md", "overwritten by the failing write\n")
                    raise RuntimeError("the inner write fails")
            assert not (root / "memory" / "half.md").exists()
            assert "内側の書き込み" in (root / "memory" / "inner.md").read_text(encoding="utf-8")  # ... the outer's stays
            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join()
            other = memctl(root, "remember", "outside", "-d", "another process")
            with pytest.raises(errors.MemctlError, match="a commit inside another write's store lock"):
                with store.lock():
                    commit(store, [root / "memory"], "memory: nested")
            raise RuntimeError("the outer write fails")
    except RuntimeError:
        pass
    finally:
        del os.environ["MEMCTL_LOCK_TIMEOUT"]
    assert waited == ["timed out"]
    assert other.returncode == 4, other.stderr
    assert not (root / "memory" / "inner.md").exists()  # undone with the outer write, nested parts and all
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_replace_made_only_while_the_file_is_as_read_keeps_what_another_writer_appends(tmp_path, monkeypatch):
    """atomic_write(expected=...): MEMORY.md's replace when Claude Code (which takes no lock) may append to it.
    Changed since the read: nothing is written. Appended to the old file in the instant of the rename:
    those bytes are appended to the new file, not lost with the old one."""
    from memctl import fsutil

    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"- [a](a.md)\n")
    assert fsutil.atomic_write(path, "new\n", expected=b"other\n") is False
    assert path.read_bytes() == b"- [a](a.md)\n" and os.listdir(tmp_path) == ["MEMORY.md"]
    assert fsutil.atomic_write(tmp_path / "none.md", "x\n", expected=b"y") is False and not (tmp_path / "none.md").exists()
    assert fsutil.atomic_write(tmp_path / "none.md", "x\n", expected=b"") is True

    replace = os.replace

    def claude_appends_then_replace(src, dst):
        with open(dst, "ab") as handle:  # opened the old file just before the rename, writes just after
            replace(src, dst)
            handle.write(b"- [late](late.md)\n")

    monkeypatch.setattr(fsutil.os, "replace", claude_appends_then_replace)
    assert fsutil.atomic_write(path, "- [a](a.md)\n- [b](b.md)\n", expected=b"- [a](a.md)\n") is True
    assert path.read_bytes() == b"- [a](a.md)\n- [b](b.md)\n- [late](late.md)\n"


def test_an_index_another_writer_keeps_appending_to_is_left_as_it_is_not_overwritten(root, monkeypatch, capsys):
    """update_index reads MEMORY.md again when it changed since the read, 20 times; the 20th write was made
    regardless, and the line appended since that read was lost (a reviewer's appender at ~2 kHz lost 11 of
    300). Now the file is left as it is, with a warning; the next write lists the fact."""
    from memctl import errors, facts, output
    from memctl.store import open_store

    monkeypatch.setattr(errors, "_reporter", output)  # the library's warnings as the CLI prints them
    store = open_store(root)
    (root / "memory" / "by-hand.md").write_text("---\nname: by-hand\ndescription: made by hand\n---\nbody\n",
                                                encoding="utf-8")
    appended = []
    read = facts._index_bytes

    def read_then_another_writer_appends(store):
        data = read(store)
        appended.append(f"- [n{len(appended)}](n{len(appended)}.md) — from Claude Code\n")
        with open(store.index_path, "a", encoding="utf-8") as handle:
            handle.write(appended[-1])
        return data

    monkeypatch.setattr(facts, "_index_bytes", read_then_another_writer_appends)
    assert facts.update_index(store, facts.live_facts(store)) == ([], False)  # nothing to commit, topic files too
    text = store.index_path.read_text(encoding="utf-8")
    assert len(appended) == facts.INDEX_ATTEMPTS and all(line in text for line in appended)
    assert "memctl: warning: memory/MEMORY.md kept changing while memctl rewrote it" in capsys.readouterr().err
    monkeypatch.setattr(facts, "_index_bytes", read)
    facts.update_index(store, facts.live_facts(store))
    text = store.index_path.read_text(encoding="utf-8")
    assert "(by-hand.md)" in text and all(line in text for line in appended)


def test_a_file_rewritten_whole_during_the_replace_gives_no_fragment_to_carry_over(tmp_path, monkeypatch):
    """Review: an editor rewriting MEMORY.md in place (truncate + write) in the instant of the rename
    made the old file's tail past the read length look appended; that fragment went into memctl's file."""
    from memctl import fsutil

    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"- [a](a.md)\n")
    replace = os.replace

    def editor_rewrites_then_replace(src, dst):
        with open(dst, "r+b") as handle:
            replace(src, dst)
            handle.truncate(0)
            handle.write(b"# my whole new index, longer\n")

    monkeypatch.setattr(fsutil.os, "replace", editor_rewrites_then_replace)
    assert fsutil.atomic_write(path, "- [a](a.md)\n- [b](b.md)\n", expected=b"- [a](a.md)\n") is True
    assert path.read_bytes() == b"- [a](a.md)\n- [b](b.md)\n"


def test_a_job_failing_on_a_full_disk_reports_its_own_exit_code_and_why_no_episode(small_disk):
    """A job that exits 3 on a full disk: recording its failure as an episode raised a bare OSError, so
    run-job exited 1 and blamed "the output", and nowhere said the job had failed. It exits 3 now and
    names the job, the exit, and why no episode was recorded."""
    root = small_disk / "store"
    init_store(root)
    (root / "fail.sh").write_text("#!/bin/sh\necho failing\nexit 3\n")
    (root / "fail.sh").chmod(0o755)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.failer]\nscript = "fail.sh"\nhour = 1\n')
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a job")
    assert run(root, "run-job", "--quiet", "failer").returncode == 3  # the log exists now, with room in its page
    fill(small_disk)
    done = run(root, "run-job", "--quiet", "failer")
    free(small_disk)
    assert done.returncode == 3, done.stderr
    assert "job failer failed with exit 3" in done.stderr and "no episode: No space left on device" in done.stderr, done.stderr
    assert "printing the output" not in done.stderr


def test_a_job_whose_log_cannot_be_written_on_a_full_disk_names_the_log(small_disk):
    """The job's log at the end of its last page, the disk full: run-job said `No space left on device
    (ENOSPC)` naming no file, on the stderr that cron keeps (helper-60). It names the log now."""
    root = small_disk / "store"
    init_store(root)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[jobs.state]\ncommand = "state update"\nhour = 1\n')
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a job")
    assert run(root, "run-job", "--quiet", "state").returncode == 0
    log = root / "logs" / "state.log"
    with open(log, "ab") as handle:  # the log fills its last page: its next line needs a new one
        handle.write(b"#" * (-log.stat().st_size % PAGE))
    fill(small_disk)
    done = run(root, "run-job", "--quiet", "state")
    free(small_disk)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert f"No space left on device: {log} (ENOSPC)" in done.stderr, done.stderr


def _themes_store(disk: Path, rows: int) -> Path:
    """A store on `disk` with n-gram vectors and a ledger of `rows` Japanese themes."""
    root = disk / "store"
    init_store(root)
    with open(root / "memctl.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nbackend = "char-ngram"\n')
    assert run(root, "ledger", "create", "themes", "--columns", "date,theme").returncode == 0
    themes = "".join(f"2026-12-01\tテーマ{n}: MCPサーバーのテストとデバッグ その{n}\n" for n in range(rows))
    assert run(root, "ledger", "append", "themes", "-", input=themes).returncode == 0
    return root


def test_near_dup_on_a_full_disk_answers_and_says_the_vector_cache_was_not_kept(small_disk):
    """near-dup printed `memctl: error: OSError: [Errno 28] No space left on device: '.../x.npy'` (exit 2)
    when its vector cache could not be written, though the vectors were in hand: a cache is a cache.
    It answers, with one warning; the next run, with room again, embeds what was not kept."""
    root = _themes_store(small_disk, 20)
    fill(small_disk)
    done = run(root, "near-dup", "テーマ3: MCPサーバーのテストとデバッグ その3", "--ledger", "themes", "--column", "theme")
    free(small_disk)
    assert done.returncode == 1, done.stderr  # a near-duplicate, found
    assert "the vector cache was not saved: No space left on device" in done.stderr and "OSError" not in done.stderr
    again = run(root, "near-dup", "テーマ3: MCPサーバーのテストとデバッグ その3", "--ledger", "themes", "--column", "theme")
    assert again.returncode == 1 and "not saved" not in again.stderr
    assert any((root / ".memctl" / "vectors").rglob("*.npy"))


def test_a_cache_rebuild_on_a_full_disk_fails_and_the_next_one_still_builds_every_source(small_disk):
    """Review: with the vector cache's "answered without it" on a full disk, `cache rebuild` (whose only
    job is writing the caches) exited 0 with warnings, having cleared every cache, and dropped its note
    of the sources: the next rebuild forgot the ledger's. A cache it cannot write fails it now (exit 1,
    one line), and the next rebuild, with room again, builds them all."""
    root = _themes_store(small_disk, 40)
    assert run(root, "near-dup", "テーマ", "--ledger", "themes", "--column", "theme").returncode in (0, 1, 5)
    more = "".join(f"2026-12-02\t別のテーマ{n}: 記事の構成と推敲の手順 その{n}\n" for n in range(150))
    assert run(root, "ledger", "append", "themes", "-", input=more).returncode == 0  # more than the old cache's room
    fill(small_disk, leave_pages=2)  # room for the note of the sources, not for the new cache
    done = run(root, "cache", "rebuild")
    free(small_disk)
    assert done.returncode == 1 and "No space left on device" in one_line_error(done), done.stderr
    again = run(root, "cache", "rebuild", "--json")
    assert again.returncode == 0, again.stderr
    assert "ledger:themes:theme" in [d["source"] for d in json.loads(again.stdout)]


def test_the_mcp_server_check_keeps_the_first_and_the_last_of_a_long_stderr():
    """A review: kept to its last 64 KiB, a server's stderr lost the line naming its store (written first)
    behind 20k warning lines, and `agent status` showed no store. The first and last 64 KiB are kept."""
    from memctl.integrations import probe

    said = b'memctl: check: {"store": "/s", "found_by": "--root"}\n'
    writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.buffer.write(sys.stdin.buffer.read())"],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    kept = probe._drained(writer.stderr)
    writer.stdin.write(said + b"warning: noise\n" * 20000 + b"the last line\n")
    writer.stdin.close()
    writer.wait(timeout=60)
    text = kept()
    assert text.startswith(said) and text.endswith(b"the last line\n")
    assert len(text) <= 2 * probe.STDERR_KEPT + 5
    assert probe._said(text.decode()) == {"store": "/s", "found_by": "--root"}
