"""8 real processes remember 25 facts each at once: nothing lost, one commit per fact."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import cli, git

DRIVER = """
import sys
from memctl.store import open_store
from memctl import facts
store = open_store(sys.argv[1])
worker = int(sys.argv[2])
for i in range(25):
    facts.remember(store, facts.FactInput(
        name=f"w{worker}-fact-{i:02d}",
        description=f"ワーカー{worker}の事実{i}: worker {worker} fact number {i}",
        tags=(f"w{worker}",)), force=True)
"""


def test_eight_processes_remember_concurrently(root):
    config = root / "memctl.toml"  # this test is about locking, not embeddings:
    config.write_text(config.read_text(encoding="utf-8").replace("[facts]\n", '[facts]\nvector_check = "never"\n', 1), encoding="utf-8")
    procs = [
        subprocess.Popen([sys.executable, "-c", DRIVER, str(root), str(w)], stderr=subprocess.PIPE, text=True)
        for w in range(8)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    files = [p for p in (root / "memory").glob("*.md") if p.name != "MEMORY.md"]
    assert len(files) == 200
    # every fact listed once: in MEMORY.md, or (past its 200 lines) in a topic file it links
    from memctl import index as index_mod

    text = (root / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    lines = [l for l in index_mod.parse_lines(text) if not index_mod.is_topic_link(l.target)]
    for topic in {l.target for l in index_mod.parse_lines(text) if index_mod.is_topic_link(l.target)}:
        lines += index_mod.parse_lines((root / "memory" / topic).read_text(encoding="utf-8"), topic)
    assert sorted(l.target for l in lines) == sorted(p.name for p in files)
    r = cli(root, "doctor")
    assert r.exit_code == 0, r.stdout
    assert "uncommitted" not in r.stdout
    subjects = git(root, "log", "--format=%s").splitlines()
    remembered = [s for s in subjects if s.startswith("memory: remember ")]
    assert len(remembered) == 200
    assert len(set(remembered)) == 200
    assert git(root, "status", "--porcelain", "--", "memory") == ""


@pytest.mark.file_times  # a lock's age is its mtime (the kernel's real clock) against the process's clock
def test_concurrent_cli_processes_with_index_lock_held_briefly(root):
    """git's own index.lock held by someone else for a moment: memctl waits, then commits."""
    lock = root / ".git" / "index.lock"
    lock.write_text("")
    proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "remember", "x", "--description", "waits for git"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    time.sleep(1.0)
    lock.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "not committed" not in err
    assert git(root, "log", "-1", "--format=%s").strip() == "memory: remember x"
