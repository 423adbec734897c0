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


def test_topic_files_of_an_overflowing_index_merge_when_both_clones_added_facts(pair):
    a, b, remote = pair
    toml = (a / "memctl.toml").read_text(encoding="utf-8")
    (a / "memctl.toml").write_text(re.sub(r"(?m)^max_index_lines = .*$", "max_index_lines = 30", toml), encoding="utf-8")
    git(a, *ID, "commit", "-qam", "a short index: it overflows into memory-index/ after a few facts")
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
