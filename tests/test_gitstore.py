"""gitstore runs the git CLI itself: odd directory names, a bad git path, quoted file names."""

from __future__ import annotations

import json

from conftest import cli, git, memctl
from memctl.store import init_store


def test_a_store_whose_directory_name_ends_in_a_space(tmp_path):
    root = tmp_path / "store "
    init_store(root)
    assert git(root, "log", "--format=%s").strip() == "memctl: init store"
    r = cli(root, "remember", "a", "-t", "user", "-d", "末尾に空白のあるディレクトリ")
    assert r.exit_code == 0, r.stderr
    assert git(root, "status", "--porcelain") == ""


def test_a_git_path_that_does_not_run_falls_back_to_git_on_path(root):
    r = memctl(root, "remember", "a", "-t", "user", "-d", "x", env={"GIT_PYTHON_GIT_EXECUTABLE": "/nonexistent/git"})
    assert r.returncode == 0, r.stderr
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember a"


def test_log_prints_japanese_paths_as_they_are(tmp_path):
    d = tmp_path / "memory"
    d.mkdir()
    (d / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    (d / "日本 語.md").write_text("---\nname: 日本 語\ndescription: 日本語の名前\ntype: user\n---\n本文\n", encoding="utf-8")
    git(d, "init", "-q")
    git(d, "add", "-A")
    git(d, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "claude memory")
    entries = json.loads(cli(d, "log", "日本 語", "--json").stdout)
    assert [e["path"] for e in entries] == ["日本 語.md"]


def test_start_and_finish_run_git_side_by_side_with_long_output_and_errors(tmp_path):
    """gitstore.start/finish (os.posix_spawn, sync_fast.py's): outputs longer than a pipe holds,
    read while both commands run; exit codes and stderr as git gave them; git runs in `top`."""
    import os

    from memctl import gitstore

    top = tmp_path / "作業 tree"
    top.mkdir()
    git(top, "init", "-q")
    names = [f"メモ-{i:05d}.md" for i in range(4000)]  # ~90 KB of names: more than a pipe's 64 KB
    for name in names:
        (top / name).write_text("x\n", encoding="utf-8")
    listing = gitstore.start(top, "ls-files", "-z", "--others")
    failing = gitstore.start(top, "rev-parse", "--verify", "no-such-ref")
    missing = gitstore.start(tmp_path / "gone", "status")
    listed, failed, lost = gitstore.finish(listing), gitstore.finish(failing), gitstore.finish(missing)
    assert listed.code == 0 and sorted(listed.out.split("\0")[:-1]) == names
    assert (failed.code, failed.out) == (128, "") and failed.err.endswith("Needed a single revision")
    assert lost.code == 128 and "gone" in lost.err
    for started in (listing, failing, missing):  # reaped, and the pipes closed
        try:
            os.waitpid(started.pid, os.WNOHANG)
            raise AssertionError("a child process was left")
        except ChildProcessError:
            pass
        try:
            os.fstat(started.out)
            raise AssertionError("a pipe was left open")
        except OSError:
            pass
