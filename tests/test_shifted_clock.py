"""scripts/shifted-clock/run: the wall clock of every process moves DAYS on, git's included, while
sleeps and timed waits keep their length (scripts/test.sh runs the whole suite under it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from conftest import REPO

RUN = REPO / "scripts" / "shifted-clock" / "run"
DAY = 86400

PROBE = """
import subprocess, threading, time
started, wall = time.monotonic(), time.time()
time.sleep(0.0005)  # what libfaketime alone turns into EINVAL
threading.Event().wait(0.05)  # what libfaketime alone turns into a 400-day wait
print(wall, time.monotonic() - started)
"""


def test_the_wall_clock_moves_and_sleeps_keep_their_length(tmp_path):
    before = time.time()
    done = subprocess.run([str(RUN), "400", sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    wall, waited = map(float, done.stdout.split())
    shifted = (wall - before) / DAY
    expected = 0 if "FAKETIME" in os.environ else 400  # the suite's shifted run: this process is on +400 already
    assert abs(shifted - expected) < 0.1
    assert 0.05 <= waited < 5


def test_git_commits_under_the_shifted_clock(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    before = time.time()
    done = subprocess.run([str(RUN), "400", "git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost",
                           "commit", "-q", "--allow-empty", "-m", "x"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    stamp = int(subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%ct"], capture_output=True, text=True,
                               check=True).stdout)
    expected = 0 if "FAKETIME" in os.environ else 400
    assert abs((stamp - before) / DAY - expected) < 0.1
