"""`forget --policies` killed at any point leaves memctl.toml as it was or as it should be (issue 29,
point 6; docs/RELIABILITY.md "A clone never stays stuck"): the tombstone ledger it declares there is
one change with the tombstones, committed or undone as one. Real kills (SIGKILL to the process group)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import git
from test_faults import _killed, _killing_git, clean, run

NOW = "2026-11-30T12:00:00+00:00"


@pytest.fixture
def template(tmp_path) -> Path:
    """A store whose capacity rule tombstones episodes, before its tombstone ledger exists."""
    root = tmp_path / "template"
    assert run(None, "init", str(root)).returncode == 0
    toml = (root / "memctl.toml").read_text(encoding="utf-8")
    (root / "memctl.toml").write_text(toml + "\n[forget]\nmax_episodes = 1\n", encoding="utf-8")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "capacity: one episode")
    for n, when in enumerate(("2026-06-01T00:00:00+00:00", "2026-07-01T00:00:00+00:00", "2026-08-01T00:00:00+00:00")):
        assert run(root, "episode", "add", f"エピソード {n}", "--type", "success", env={"MEMCTL_NOW": when}).returncode == 0
    return root


def _copy(template: Path, name: str) -> Path:
    root = template.parent / name
    shutil.copytree(template, root, symlinks=True)
    return root


def _settled(root: Path, before: bytes) -> None:
    """After the next command: memctl.toml is as HEAD has it, and that is the old text, or the old text
    with the tombstone ledger declared and its file committed beside it."""
    assert run(root, "remember", "next", "-d", "the command after the kill", env={"MEMCTL_NOW": NOW}).returncode == 0
    clean(root)
    toml = (root / "memctl.toml").read_bytes()
    if toml != before:
        assert toml.startswith(before) and b"[ledgers.episode-tombstones]" in toml[len(before):], toml
        assert "ledgers/episode-tombstones.tsv" in git(root, "ls-files", "ledgers")


@pytest.mark.parametrize(("when", "at"), [("before", "update-ref"), ("before", "write-tree"), ("after", "update-ref")])
def test_forget_policies_killed_around_its_commit_leaves_memctl_toml_settled(template, tmp_path, when, at):
    root = _copy(template, "store")
    before = (root / "memctl.toml").read_bytes()
    _killed(root, ("forget", "--policies"), {**_killing_git(tmp_path, when, at), "MEMCTL_NOW": NOW})
    _settled(root, before)
    done = run(root, "forget", "--policies", env={"MEMCTL_NOW": NOW})  # and the forgetting is done once, whole
    assert done.returncode == 0, done.stderr
    clean(root)
    assert b"[ledgers.episode-tombstones]" in (root / "memctl.toml").read_bytes()


def _counting_git(tmp_path: Path) -> tuple[dict, Path]:
    """A git (for memctl and GitPython alike) that counts its calls, and kills its caller's whole process
    group at the call numbered in MEMCTL_TEST_KILL_AT, before running it."""
    real, count = shutil.which("git"), tmp_path / "git-calls"
    wrapper = tmp_path / "counting" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(f"""#!/bin/sh
n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}
[ "$n" = "${{MEMCTL_TEST_KILL_AT:-0}}" ] && kill -KILL 0
exec {real} "$@"
""")
    wrapper.chmod(0o755)
    return {"MEMCTL_GIT": str(wrapper), "GIT_PYTHON_GIT_EXECUTABLE": str(wrapper)}, count


def test_forget_policies_killed_before_each_of_its_git_calls_and_at_random_times_leaves_memctl_toml_settled(template, tmp_path):
    """A kill before every git call the command makes (each a point between two of its steps), then 5 at
    random times of its run (uniform over a whole run's length, seeded)."""
    before = (template / "memctl.toml").read_bytes()
    env, count = _counting_git(tmp_path)
    probe = _copy(template, "probe")
    started = time.monotonic()
    assert run(probe, "forget", "--policies", env={**env, "MEMCTL_NOW": NOW}).returncode == 0
    lasted, calls = time.monotonic() - started, int(count.read_text())
    assert calls >= 3
    for at in range(1, calls + 1):
        count.unlink()
        root = _copy(template, f"at-{at}")
        _killed(root, ("forget", "--policies"), {**env, "MEMCTL_NOW": NOW, "MEMCTL_TEST_KILL_AT": str(at)})
        _settled(root, before)
        shutil.rmtree(root)
    rng = random.Random(int(os.environ.get("MEMCTL_KILL_SEED", "29")))
    for trial in range(5):
        root = _copy(template, f"random-{trial}")
        proc = subprocess.Popen([sys.executable, "-m", "memctl", "--root", str(root), "forget", "--policies"],
                                env={**os.environ, "MEMCTL_NOW": NOW}, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.05, lasted))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        err = proc.communicate(timeout=120)[1]
        assert proc.returncode in (0, -signal.SIGKILL), err
        _settled(root, before)
        shutil.rmtree(root)
