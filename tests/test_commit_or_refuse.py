"""Exit 0 means committed (issue 23.6): with git missing, failing, or no repository, every writing command
exits 1 with one line and a hint and changes nothing; MEMCTL_NO_COMMIT=1 writes without committing; doctor
says so. Real processes, a real git (named by MEMCTL_GIT or found on PATH) and real repositories.

memctl finds git itself (memctl/early.py: MEMCTL_GIT, then PATH, then /usr/bin/git and the like), so git is
made unavailable honestly: MEMCTL_GIT naming a file that does not exist ("missing"), a git that fails every
command, named by MEMCTL_GIT or first on PATH ("failing", "failing on PATH"), or the store's .git removed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import git, memctl
from memctl.store import init_store

NOW = {"MEMCTL_NOW": "2026-03-02T10:00:00+09:00"}


def run(root: Path, *args: str, env: dict | None = None):
    return memctl(root, *args, env={**NOW, **(env or {})})


def files(root: Path) -> dict[str, bytes]:
    """Every file of the store but git's own and memctl's caches, byte for byte."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] not in (".git", ".memctl")}


def failing_git(folder: Path) -> Path:
    """A git that prints an error and exits 1 whatever it is asked."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "git"
    exe.write_text("#!/bin/sh\necho 'fatal: this git is broken' >&2\nexit 1\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def seeded(tmp_path) -> Path:
    """A store with facts (one archived), a ledger, an episode, STATE.md, a merge-conflict copy, a file to
    adopt and a transcript to import: something for every writing command to change. All committed."""
    root = tmp_path / "store"
    init_store(root)
    for name, text in (("alpha", "アルファ: 東京は日本の首都"), ("beta", "beta: deploys on Tuesdays"), ("gamma", "γ ガンマ")):
        assert run(root, "remember", name, "--description", text, "--type", "project").returncode == 0
    assert run(root, "forget", "gamma", "--reason", "古い").returncode == 0
    assert run(root, "ledger", "create", "orders", "--columns", "k,v").returncode == 0
    assert run(root, "episode", "add", "初めてのエピソード", "--type", "decision").returncode == 0
    assert run(root, "state", "update").returncode == 0
    (root / "memory" / "conflicts").mkdir()
    (root / "memory" / "conflicts" / "beta.0123abcd.md").write_text(
        "---\nname: beta\ndescription: 'beta: deploys on Wednesdays'\ntype: project\n---\n", encoding="utf-8")
    (root / "ledgers" / "hosts.tsv").write_text("a\t1\nb\t2\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "conflict copy and a file to adopt")
    (root.parent / "pairs.tsv").write_text("デプロイは火曜\tデプロイは火曜日\t1\n猫\t犬\t0\n", encoding="utf-8")
    (root.parent / "talk.jsonl").write_text(json.dumps({"role": "user", "content": "デプロイは火曜", "ts": "2026-03-01T09:00:00+09:00"},
                                                       ensure_ascii=False) + "\n", encoding="utf-8")
    return root


def writers(root: Path) -> list[tuple[str, ...]]:
    """Every writing command, each with something to change."""
    talk = str(root.parent / "talk.jsonl")
    return [
        ("remember", "delta", "--description", "新しい事実", "--type", "user"),
        ("remember", "alpha", "--update", "--description", "アルファ更新"),
        ("forget", "beta", "--reason", "不要"),
        ("pin", "alpha"), ("unpin", "alpha"),
        ("restore", "gamma"),
        ("index",),
        ("ledger", "append", "orders", "k=1", "v=注文"),
        ("ledger", "create", "hosts2", "--columns", "h"),
        ("ledger", "adopt", "ledgers/hosts.tsv", "--columns", "host,n"),
        ("ledger", "commit", "orders"),
        ("episode", "add", "二つ目", "--type", "success"),
        ("episode", "import", "messages", talk),
        ("state", "update", "--note", "今日"),
        ("sync",),
        ("consolidate", "--apply"),
        ("distill", "--llm-cmd", sys.executable),
        ("forget", "--policies"),
        ("resolve", "beta", "--keep", "remote"),
        ("maintain",),
        ("procedure", "record", "alpha", "--success"),
        ("procedure", "evolve", "alpha", "--template", str(root.parent / "talk.jsonl")),
        ("near-dup", "calibrate", str(root.parent / "pairs.tsv"), "--save"),
    ]


def _condition(root: Path, tmp_path: Path, which: str) -> tuple[dict, str]:
    """The environment that makes git unusable, and what the error must say."""
    if which == "missing":
        return {"MEMCTL_GIT": str(tmp_path / "nowhere" / "git")}, "git not found (MEMCTL_GIT="
    if which == "failing":
        return {"MEMCTL_GIT": str(failing_git(tmp_path / "broken"))}, "fatal: this git is broken"
    if which == "failing on PATH":
        folder = failing_git(tmp_path / "bin").parent
        return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}, "fatal: this git is broken"
    shutil.rmtree(root / ".git")
    return {}, "is not a git repository"


@pytest.mark.parametrize("which", ["missing", "failing", "failing on PATH", "no repository"])
def test_every_writing_command_refuses_with_one_line_and_changes_nothing(seeded, tmp_path, which):
    env, says = _condition(seeded, tmp_path, which)
    before = files(seeded)
    head = git(seeded, "rev-parse", "HEAD") if which != "no repository" else None
    for argv in writers(seeded):
        done = run(seeded, *argv, env=env)
        expected = 2 if argv[0] == "near-dup" else 1  # near-dup's 1 means "near-duplicate" (errors.BY_CONDITION)
        assert done.returncode == expected, (argv, done.returncode, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("memctl: error: "), (argv, done.stderr)
        assert says in lines[0] and "(hint: " in lines[0], (argv, lines[0])
        assert files(seeded) == before, argv  # byte for byte
        if head is not None:
            assert git(seeded, "rev-parse", "HEAD") == head, argv
    doctor = run(seeded, "doctor", env=env)
    assert doctor.returncode == 1 and says in doctor.stdout and "every write is refused" in doctor.stdout, doctor.stdout


@pytest.mark.parametrize("which", ["missing", "failing", "no repository"])
def test_no_commit_stays_the_way_to_write_without_git(seeded, tmp_path, which):
    env, says = _condition(seeded, tmp_path, which)
    env = {**env, "MEMCTL_NO_COMMIT": "1"}
    for argv in (("remember", "delta", "--description", "コミットなしで書く", "--type", "user"),
                 ("ledger", "append", "orders", "k=2", "v=x"), ("forget", "alpha", "--reason", "r"), ("maintain",)):
        done = run(seeded, *argv, env=env)
        assert done.returncode == 0, (argv, done.stderr)
        assert "error" not in done.stderr
    assert (seeded / "memory" / "delta.md").exists() and (seeded / "memory" / "archive" / "alpha.md").exists()
    doctor = run(seeded, "doctor", env=env)
    assert says in doctor.stdout and "commits are off" in doctor.stdout, doctor.stdout
    assert "every write is refused" not in doctor.stdout


def test_init_without_git_creates_nothing_and_init_no_git_turns_commits_off(tmp_path):
    target = tmp_path / "new store"
    done = memctl(None, "init", str(target), env={"MEMCTL_GIT": str(tmp_path / "no-git")})
    assert done.returncode == 1 and "git not found" in done.stderr and "--no-git" in done.stderr, done.stderr
    assert not target.exists()
    assert memctl(None, "init", "--no-git", str(target)).returncode == 0
    assert "\ncommit = false " in (target / "memctl.toml").read_text(encoding="utf-8")
    done = run(target, "remember", "a", "--description", "no git here", "--type", "user")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    # `init` with git later: a repository, commits on again, the fact in the first commit
    done = memctl(None, "init", str(target))
    assert done.returncode == 0, done.stderr
    assert "\ncommit = true " in (target / "memctl.toml").read_text(encoding="utf-8")
    assert "memory/a.md" in git(target, "show", "--name-only", "--format=", "HEAD").split()
    assert git(target, "status", "--porcelain") == ""


def test_a_git_failing_at_the_commit_undoes_the_change(seeded, tmp_path):
    """The last guard: a git that finds the repository but cannot commit (commit-tree fails): exit 1, undone."""
    real = shutil.which("git")
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = commit-tree ] && {{ echo "fatal: disk on fire" >&2; exit 1; }}; done\n'
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    before = files(seeded)
    done = run(seeded, "remember", "delta", "--description", "消える事実", "--type", "user", env={"MEMCTL_GIT": str(wrapper)})
    assert done.returncode == 1 and "not committed, so the change was undone" in done.stderr, done.stderr
    assert "disk on fire" in done.stderr
    assert files(seeded) == before
    assert git(seeded, "status", "--porcelain") == ""


def test_the_python_api_raises_and_changes_nothing(seeded, tmp_path, monkeypatch):
    """No CLI in between: the library refuses too (api.remember, commit=True)."""
    from memctl import api
    from memctl.errors import GitError
    from memctl.store import open_store

    before = files(seeded)
    monkeypatch.setenv("MEMCTL_GIT", str(tmp_path / "nowhere" / "git"))
    with pytest.raises(GitError, match="git not found"):
        api.remember(open_store(seeded), "delta", "新しい事実", type="user")
    assert files(seeded) == before


def test_a_write_on_a_detached_head_commits_and_says_how_to_keep_it(tmp_path):
    """`remember` on a detached HEAD exited 0 without a word; a checkout of the branch then left the fact
    behind, reachable only from the reflog (helper-67). It still commits (exit 0 means committed), and
    warns once with the command that keeps it."""
    root = tmp_path / "store"
    assert memctl(None, "init", str(root)).returncode == 0
    git(root, "checkout", "-q", "--detach")
    done = memctl(root, "remember", "det", "--description", "detached での事実")
    assert done.returncode == 0, done.stderr
    sha = git(root, "rev-parse", "HEAD").strip()
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember det"
    (line,) = [l for l in done.stderr.splitlines() if "detached" in l]
    assert f"committed {sha[:12]} on a detached HEAD (no branch)" in line and f"switch -c NAME" in line, line
    git(root, "switch", "-q", "-c", "kept")
    done = memctl(root, "remember", "on-branch", "--description", "on a branch")
    assert done.returncode == 0 and "detached" not in done.stderr
