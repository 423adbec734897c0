"""gitstore runs the git CLI itself: odd directory names, a bad git path, quoted file names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_git_that_runs_but_prints_nothing_is_named_so_not_as_exit_status_0(root):
    """MEMCTL_GIT=/bin/true said "`/bin/true rev-parse` failed: exit status 0", which reads as no failure."""
    r = memctl(root, "remember", "a", "-t", "user", "-d", "x", env={"MEMCTL_GIT": shutil.which("true")})
    assert r.returncode == 1 and "exit status 0" not in r.stderr and "printed no folder" in r.stderr, r.stderr
    assert not (root / "memory" / "a.md").exists()


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


# ---------------------------------------------------------------- who commits (issue 23.9)

def _who(root) -> str:
    return git(root, "log", "-1", "--format=%an <%ae> / %cn <%ce>").strip()


@pytest.fixture
def authored(tmp_path):
    """A store whose memctl.toml names its own author, and an empty HOME (no ~/.gitconfig, no XDG config)."""
    root = tmp_path / "store"
    init_store(root)
    toml = root / "memctl.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace(
        'author_name = "memctl"', 'author_name = "記憶係"').replace('author_email = "memctl@localhost"', 'author_email = "kioku@example.jp"'),
        encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "author")
    home = tmp_path / "home"
    home.mkdir()
    return root, {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def test_without_a_git_identity_memctl_toml_is_the_author(authored):
    root, env = authored
    assert memctl(root, "remember", "a", "-t", "user", "-d", "誰もいない", env=env).returncode == 0
    assert _who(root) == "記憶係 <kioku@example.jp> / 記憶係 <kioku@example.jp>"


@pytest.mark.parametrize("where", ["~/.gitconfig", "XDG config", "repository config", "GIT_AUTHOR_* and GIT_COMMITTER_*"])
def test_the_users_git_identity_commits_when_one_is_configured(authored, where):
    root, env = authored
    home = env["HOME"]
    if where == "~/.gitconfig":
        (Path(home) / ".gitconfig").write_text("[user]\n\tname = 山田 太郎\n\temail = taro@example.jp\n", encoding="utf-8")
    elif where == "XDG config":
        xdg = Path(env["XDG_CONFIG_HOME"]) / "git" / "config"
        xdg.parent.mkdir(parents=True)
        xdg.write_text("[user]\n\tname = 山田 太郎\n\temail = taro@example.jp\n", encoding="utf-8")
    elif where == "repository config":
        git(root, "config", "user.name", "山田 太郎")
        git(root, "config", "user.email", "taro@example.jp")
    else:
        env = {**env, "GIT_AUTHOR_NAME": "山田 太郎", "GIT_AUTHOR_EMAIL": "taro@example.jp",
               "GIT_COMMITTER_NAME": "山田 太郎", "GIT_COMMITTER_EMAIL": "taro@example.jp"}
    assert memctl(root, "remember", "a", "-t", "user", "-d", "誰かがいる", env=env).returncode == 0
    assert _who(root) == "山田 太郎 <taro@example.jp> / 山田 太郎 <taro@example.jp>", where


def test_the_repository_identity_wins_over_the_global_one_and_author_config_over_user(authored):
    root, env = authored
    (Path(env["HOME"]) / ".gitconfig").write_text("[user]\n\tname = Global\n\temail = global@example.com\n", encoding="utf-8")
    git(root, "config", "user.name", "Laptop")
    git(root, "config", "user.email", "me@laptop.example")
    git(root, "config", "author.name", "Me on the laptop")
    assert memctl(root, "remember", "a", "-t", "user", "-d", "どのマシン", env=env).returncode == 0
    assert _who(root) == "Me on the laptop <me@laptop.example> / Laptop <me@laptop.example>"


def test_a_cron_like_environment_without_identity_never_fails(authored, tmp_path):
    """cron: a bare environment, HOME without identity, git told not to guess (user.useConfigOnly in ~/.gitconfig)."""
    root, env = authored
    (Path(env["HOME"]) / ".gitconfig").write_text("[user]\n\tuseConfigOnly = true\n", encoding="utf-8")
    bare = {"HOME": env["HOME"], "PATH": "/usr/bin:/bin", "LANG": "C"}
    done = subprocess.run([sys.executable, "-m", "memctl", "--root", str(root), "remember", "a", "-t", "user", "-d", "夜中に"],
                          env=bare, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _who(root) == "記憶係 <kioku@example.jp> / 記憶係 <kioku@example.jp>"


def _counting_git(tmp_path) -> tuple[dict, Path]:
    """A git that notes each subcommand it runs (MEMCTL_GIT), then runs the real one."""
    log = tmp_path / "git-calls"
    wrapper = tmp_path / "counting" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("git")} "$@"\n')
    wrapper.chmod(0o755)
    return {"MEMCTL_GIT": str(wrapper)}, log


def test_reading_the_identity_costs_no_git_run_when_one_is_configured(authored, tmp_path):
    """The identity is asked of the commit itself (user.useConfigOnly): one commit-tree with an identity,
    one failed and one done without; no `git config` call either way."""
    root, env = authored
    counting, log = _counting_git(tmp_path)
    assert memctl(root, "remember", "a", "-t", "user", "-d", "一回目", env={**env, **counting}).returncode == 0
    calls = log.read_text().splitlines()
    assert sum(" commit-tree " in f" {c} " for c in calls) == 2 and not any(c.split()[0] == "config" for c in calls), calls
    git(root, "config", "user.name", "山田 太郎")
    git(root, "config", "user.email", "taro@example.jp")
    log.unlink()
    assert memctl(root, "remember", "b", "-t", "user", "-d", "二回目", env={**env, **counting}).returncode == 0
    calls = log.read_text().splitlines()
    assert sum(" commit-tree " in f" {c} " for c in calls) == 1, calls
    assert _who(root).startswith("山田 太郎 <taro@example.jp>")


def test_a_staged_rename_is_read_as_both_of_its_paths(root):
    """`git status -z` writes a rename as `R  new NUL old NUL`: the old code read the old path as an
    entry of its own, code and path cut from its first letters (`memory/a.md` became `ory/a.md`)."""
    from memctl import gitstore

    assert memctl(root, "remember", "alpha", "--description", "アルファ").returncode == 0
    git(root, "mv", "memory/alpha.md", "memory/アルファ.md")
    entries = gitstore.dirty_entries(root, [root / "memory"])
    assert sorted(entries) == [("R ", "memory/alpha.md"), ("R ", "memory/アルファ.md")]


def test_a_merge_without_its_message_is_syncs_only_when_merge_head_is_the_commit_sync_marked(tmp_path):
    """A git killed between writing MERGE_HEAD and filling MERGE_MSG: sync's merge is known by the commit
    it marked before merging; a user's merge (another MERGE_HEAD, or a message of its own) never is."""
    from memctl import gitstore

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    dot = tmp_path / ".git"
    theirs, other = "a" * 40, "b" * 40
    (dot / "MERGE_HEAD").write_text(theirs + "\n")
    assert not gitstore.sync_merge_unfinished(tmp_path)  # no mark: not sync's
    gitstore.mark_sync_merge(tmp_path, theirs)
    for message, expected in ((None, True), ("", True), ("Merge branch 'topic'\n", False), (gitstore.SYNC_MERGE + "origin/main\n", True)):
        if message is None:
            (dot / "MERGE_MSG").unlink(missing_ok=True)
        else:
            (dot / "MERGE_MSG").write_text(message)
        assert gitstore.sync_merge_unfinished(tmp_path) is expected, message
    (dot / "MERGE_MSG").write_text("")
    gitstore.mark_sync_merge(tmp_path, other)
    assert not gitstore.sync_merge_unfinished(tmp_path)


def test_a_dot_git_file_naming_a_folder_that_is_no_git_folder_gives_no_git_folder(tmp_path):
    """Review: the undo log leaves git's folders to git (a linked worktree's lie outside the store), and a
    `.git` file saying `gitdir: ..` (or `/`) made the store's parent "git's": a write there was neither
    refused as outside the store nor logged."""
    from memctl import fsutil, gitstore
    from memctl.errors import Refused

    store = tmp_path / "store"
    store.mkdir()
    for target in ("..", "/"):
        (store / ".git").write_text(f"gitdir: {target}\n", encoding="utf-8")
        assert gitstore.git_folders(store) == []
        with fsutil.undo_log(store / ".memctl" / "undo" / "log", store, (store / ".memctl", *gitstore.git_folders(store))):
            with pytest.raises(Refused, match="outside the store"):
                fsutil.atomic_write(store / ".." / "outside.txt", "x\n")
    assert not (tmp_path / "outside.txt").exists()
    subprocess.run(["git", "init", "-q", str(tmp_path / "main")], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "main"), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(tmp_path / "main"), "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    assert gitstore.git_folders(tmp_path / "wt") == [tmp_path / "main" / ".git" / "worktrees" / "wt", tmp_path / "main" / ".git"]


def test_only_a_lock_that_exists_in_a_path_remote_is_waited_for_not_one_git_could_not_create(tmp_path):
    """helper-86: a remote whose refs folder this user may not write ("Unable to create '...lock': Permission
    denied") was waited on as a held lock, then exit 4 "held by another git process"; it is git's failure, said at once."""
    from memctl import gitstore

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    lock = remote / "refs" / "heads" / "master.lock"
    said = f"remote: error: cannot lock ref 'refs/heads/master': Unable to create '{lock}': "
    assert gitstore._held_lock(tmp_path, said + "File exists.") == (remote, lock)
    for reason in ("Permission denied", "No space left on device", "Read-only file system"):
        assert gitstore._held_lock(tmp_path, said + reason) is None
