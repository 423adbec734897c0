"""procs: whether the maker of a lock or a temp file runs still, asked of real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from memctl import fsutil, gitstore, procs

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="a zombie is told by /proc (Linux)")


def _zombie() -> subprocess.Popen:
    """A child that has exited and is not reaped yet (what an agent host leaves that killed memctl and has
    not waited for it)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{child.pid}/stat", "rb") as handle:
            if handle.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                return child
        time.sleep(0.01)
    raise AssertionError("the child never exited")


def test_alive_is_false_for_a_zombie_and_a_reaped_process_true_for_a_running_one():
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert procs.alive(os.getpid()) and procs.alive(running.pid)
    finally:
        running.kill()
        running.wait()
    assert not procs.alive(running.pid)
    zombie = _zombie()
    try:
        assert not procs.alive(zombie.pid)  # os.kill(pid, 0) still succeeds on it
    finally:
        zombie.wait()


def test_a_lock_or_temp_file_whose_memctl_is_a_zombie_is_stale(tmp_path):
    """memctl writes its pid into the index.lock it holds; a memctl killed with SIGKILL whose parent had not
    reaped it yet kept the lock "live" (os.kill(pid, 0) answers for a zombie): every write waited, then exit 4."""
    zombie = _zombie()
    try:
        lock = tmp_path / "index.lock"
        lock.write_text(f"memctl pid {zombie.pid}\n")
        assert gitstore.stale_lock(tmp_path, lock)
        assert fsutil.dead_temp(f".MEMORY.md.{zombie.pid}.0a1b2c3d.tmp")
        assert not fsutil.dead_temp(f".MEMORY.md.{os.getpid()}.0a1b2c3d.tmp")
    finally:
        zombie.wait()
