"""Running a command a setting or option names (`distill --llm-cmd`, `near-dup --judge-cmd`).

argv from shlex, no shell; the text on stdin; the command in its own process group, killed whole
at the timeout; its stdout back, or BadAnswer with one line saying why not.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Sequence

from .errors import BadInput

MAX_ANSWER_BYTES = 64 * 1024


class BadAnswer(Exception):
    """An answer that cannot be used; `reason` is one line for the report."""

    def __init__(self, reason: str, *, again: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.again = again  # False: asking again would fail the same way (a timeout, a command that cannot run)


def shorten(text: str, limit: int = 60) -> str:
    """`text` on one line, at most `limit` characters, its control characters shown (`\x1b`), not obeyed
    where the reason it goes into is printed."""
    from .tsv import visible  # noqa: PLC0415

    one = visible(" ".join(text.split()))
    return one if len(one) <= limit else one[: limit - 3] + "..."


def parse_command(cmd: str, name: str = "llm_cmd") -> list[str]:
    """The command (`name`: the option or setting it came from) as argv (shlex, no shell); a command
    that cannot run is bad input, before anything is written."""
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise BadInput(f"{name} {cmd!r}: {exc}", hint="check its quotes: it is split as a shell would, but not run by one",
                       arg=name) from None
    if not argv:
        raise BadInput(f"{name} is empty", hint=f"e.g. {name} 'claude -p'", arg=name)
    exe = argv[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise BadInput(f"{name}: {exe} is not an executable file", hint=f"check the path, or chmod +x {shlex.quote(exe)}",
                           arg=name)
    elif shutil.which(exe) is None:
        raise BadInput(f"{name}: command {exe!r} not found on PATH",
                           hint="give its full path: scheduled jobs run with a minimal PATH", arg=name)
    return argv


_GROUPS: set[int] = set()  # the process groups of the commands running now, in any thread


def kill_running() -> None:
    """Kill every command still running: for a process about to end while another thread waits on one
    (the MCP server's tool call, when the server gets SIGTERM and leaves with os._exit)."""
    for group in list(_GROUPS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


LEFT_OPEN_WAIT = 2.0  # seconds: after the command exits, for what it wrote to be read to the end


def _run_in_group(argv: Sequence[str], data: bytes, timeout: float, cwd: Path | None,
                  env: dict[str, str] | None) -> subprocess.CompletedProcess:
    """Run argv in its own process group; at the timeout the whole group is killed (a shell script's
    `sleep` would otherwise keep the pipes open and the wait going). Its stdout and stderr are read
    up to MAX_ANSWER_BYTES + 1 each: a command printing more (`yes`) is killed at once, and its
    answer is that much (it was read whole: gigabytes, past the timeout)."""
    import threading  # noqa: PLC0415
    import time  # noqa: PLC0415

    from .errors import stops_noted  # noqa: PLC0415

    cap = MAX_ANSWER_BYTES + 1
    out, err, over = bytearray(), bytearray(), threading.Event()
    proc, threads = None, []

    def feed() -> None:
        with contextlib.suppress(OSError):  # a command that does not read its stdin
            proc.stdin.write(data)
        with contextlib.suppress(OSError):
            proc.stdin.close()

    def drain(pipe, into: bytearray, stop: bool) -> None:
        while chunk := pipe.read1(65536):
            if len(into) < cap:
                into += chunk[: cap - len(into)]
            if len(into) >= cap and stop:
                over.set()
                return

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    def close_pipes() -> None:
        # A pipe whose thread still waits on it is left open: closing it would wait for that thread's
        # read (or write), which a process the command started in a session of its own (`setsid sleep
        # 600 &`) can keep going for as long as it lives. The daemon thread ends with it, or with us.
        for pipe, thread in zip((proc.stdin, proc.stdout, proc.stderr), threads or (None,) * 3):
            if thread is None or not thread.is_alive():
                with contextlib.suppress(OSError):
                    pipe.close()

    def settle(wait: float) -> None:
        """Let the reading threads finish, at most `wait` seconds in all (a stop may have landed
        before each of them started: those are not waited for)."""
        end = time.monotonic() + wait
        for thread in threads:
            if thread.ident is not None:
                thread.join(max(0.0, end - time.monotonic()))

    # The timeout, Ctrl-C, or a SIGTERM / SIGHUP to memctl (`timeout`, run-job, launchd, a closed
    # terminal) kill the group: in its own session, no signal of ours reaches it, and it would outlive us.
    # The signals are noted from before the command starts to after its pipes are closed, and raised
    # in the wait loop or as this ends (errors.stops_noted): one raised where it landed (inside a
    # thread's start) broke threading's lock, and a RuntimeError left the command running.
    with stops_noted() as stop_if_asked:
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=cwd, start_new_session=True,
                                    env=None if env is None else {**os.environ, **env})
            _GROUPS.add(proc.pid)
            threads = [threading.Thread(target=feed, daemon=True),
                       threading.Thread(target=drain, args=(proc.stdout, out, True), daemon=True),
                       threading.Thread(target=drain, args=(proc.stderr, err, False), daemon=True)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + timeout
            while proc.poll() is None and not over.is_set():
                stop_if_asked()
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(list(argv), timeout)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.05)
            stop_if_asked()
            if not over.is_set():  # the command has exited: the rest of its output
                settle(min(LEFT_OPEN_WAIT, max(0.0, deadline - time.monotonic())))
        except BaseException:
            if proc is not None:
                kill()
                proc.wait()
                settle(LEFT_OPEN_WAIT)
                close_pipes()
            raise
        finally:
            if proc is not None:
                _GROUPS.discard(proc.pid)
        # Over the size limit; or exited with its output still held open by a process it left behind
        # (`sleep 20 &`, a member of its group): the group is ended, and what the command wrote before
        # it exited is its answer.
        if over.is_set() or any(thread.is_alive() for thread in threads[1:]):
            kill()
            settle(LEFT_OPEN_WAIT)
        proc.wait()
        close_pipes()
    return subprocess.CompletedProcess(proc.args, proc.returncode, bytes(out), bytes(err))


def run_command(argv: Sequence[str], text: str, timeout: float, cwd: Path | None = None,
                env: dict[str, str] | None = None) -> str:
    """Pipe `text` to the command (`env`: variables added to ours); its stdout, or BadAnswer (non-zero
    exit, timeout, too much output)."""
    try:
        done = _run_in_group(argv, text.encode("utf-8"), timeout, cwd, env)
    except subprocess.TimeoutExpired:
        raise BadAnswer(f"the command did not answer within {timeout:g} s", again=False) from None
    except OSError as exc:
        raise BadAnswer(f"the command could not run: {exc.strerror or exc}", again=False) from None
    if len(done.stdout) > MAX_ANSWER_BYTES:  # before the exit status: such a command is killed
        raise BadAnswer(f"the answer is over {MAX_ANSWER_BYTES:,} bytes: a short answer was expected")
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BadAnswer(f"the command exited with status {done.returncode}" + (f": {shorten(err[-1], 120)}" if err else ""))
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise BadAnswer("the answer is not valid UTF-8") from None
