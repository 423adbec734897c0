"""What the kernel says about other processes: whether one still runs, when it started, and whether a
git works in a folder. Locks and temp files name their maker's pid (fsutil, gitstore, jobs); these
answers say whether that maker is gone. Linux reads /proc; elsewhere the answers are the cautious ones.
"""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether process `pid` runs still. A zombie (killed, not yet reaped by its parent: an agent host that
    killed memctl and has not waited for it) does not: it holds nothing and writes nothing more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: it exists
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill's answer stands


def started_after(pid: int, when: float) -> bool:
    """Whether process `pid` started after `when` (a lock's mtime), so cannot have made that lock: its
    pid was reused (after a reboot, say). Linux only (/proc); elsewhere False (the pid is believed)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in ticks
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return started > when + 2  # btime is whole seconds


def git_running_in(top: Path, made: float) -> bool:
    """Whether some git process that could have made a lock at `made` (one started before then) works in
    the repository at `top` (Linux: /proc; elsewhere: any git). A git started later (an editor's `git
    cat-file --batch`, another memctl's git) is not the lock's maker, and kept a dead git's lock "live"."""
    proc = Path("/proc")
    if (proc / "self").is_dir():
        top_s, me = str(top), str(os.getpid())
        for entry in proc.iterdir():
            if not entry.name.isdigit() or entry.name == me:
                continue
            try:
                if not (entry / "comm").read_text().startswith("git"):
                    continue
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if (cwd == top_s or cwd.startswith(top_s + os.sep)) and not started_after(int(entry.name), made):
                return True
        return False
    import subprocess  # noqa: PLC0415

    try:
        names = subprocess.run(["ps", "-A", "-o", "comm="], capture_output=True, text=True).stdout.split()
    except OSError:
        return True  # cannot tell: treat the lock as live
    return any(os.path.basename(n).startswith("git") for n in names)
