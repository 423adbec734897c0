"""An installed entry run once, as Claude Code runs it: what `agent status` asks of each (and install of the MCP entry).

A hook command goes through `sh -c` in the project directory, with CLAUDE_PROJECT_DIR set, a hook
input like Claude Code's on stdin (its `cwd` the project) and MEMCTL_AGENT_CHECK=1: the hook then
writes nothing and ends with one line on stderr saying which store it reached and what went wrong
(hooks.say_checked). The MCP server entry is started as a stdio server (its command, args and
env, the project as working directory) and must answer `initialize`, `tools/list` and
`resources/list` (the SDK's own answer: memctl's server answers the first two while it loads); a
server that exits first does not answer, and its last line on stderr says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from .hooks import CHECK_ENV, CHECK_LINE

SESSION_ID = "memctl-agent-status"
PROMPT = "memctl agent status: which store does this hook reach?"
SERVER_TIMEOUT = 30.0  # seconds for the server to start and list its tools (Claude Code's own wait)
PROTOCOL = "2025-06-18"  # the MCP version asked for; a server answers with one it speaks
SAID = "memctl: " + CHECK_LINE


class Checked(NamedTuple):
    answers: bool  # it ran, reached a store, and answered
    store: str | None  # the store it reached; None when it found none or did not say
    found_by: str | None  # what led it there (claude_code.Found)
    error: str | None  # why it does not answer, one line
    seconds: float


class _NoAnswer(Exception):
    pass


def hook_input(event: str, project: Path) -> dict[str, Any]:
    """The JSON Claude Code gives a hook of `event` for a session in `project`."""
    from .claude_code import claude_dir, project_key

    transcript = claude_dir() / "projects" / project_key(project) / f"{SESSION_ID}.jsonl"
    payload = {"session_id": SESSION_ID, "transcript_path": str(transcript), "cwd": str(project), "hook_event_name": event}
    extra = {"SessionStart": {"source": "startup"}, "UserPromptSubmit": {"permission_mode": "default", "prompt": PROMPT},
             "SessionEnd": {"reason": "other"}}
    return {**payload, **extra.get(event, {})}


def hook(command: str, event: str, project: Path, timeout: float) -> Checked:
    """Run a hook's command line once (see the module docstring)."""
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project), CHECK_ENV: "1"}
    started = time.perf_counter()
    data = json.dumps(hook_input(event, project), ensure_ascii=False).encode("utf-8")
    try:
        done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, cwd=project, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Checked(False, None, None, f"no answer within {timeout:g} s (Claude Code's limit for this hook)",
                       _since(started))
    stderr = done.stderr.decode("utf-8", "replace")
    said = _said(stderr)
    if said is None:
        error = _last_line(stderr) or (f"exit code {done.returncode}" if done.returncode else
                                       "it did not say which store it reached (a memctl older than this one?)")
        return Checked(False, None, None, error, _since(started))
    error = said.get("error") or (f"exit code {done.returncode}" if done.returncode else None)
    return Checked(error is None, said.get("store"), said.get("found_by"), error, _since(started))


def server(entry: dict[str, Any], project: Path, timeout: float = SERVER_TIMEOUT) -> Checked:
    """Start an MCP server entry, ask `initialize` and `tools/list`, stop it (see the module docstring)."""
    command = [str(entry.get("command", "")), *map(str, entry.get("args") or [])]
    extra = entry.get("env") if isinstance(entry.get("env"), dict) else {}
    env = {**os.environ, **{str(k): str(v) for k, v in extra.items()}, "CLAUDE_PROJECT_DIR": str(project), CHECK_ENV: "1"}
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=project,
                                env=env)
    except OSError as exc:
        return Checked(False, None, None, f"{command[0]}: {exc.strerror or exc}", _since(started))
    # Its stderr through a pipe that a thread drains, not a file: on a full disk (or under a file size
    # limit) the server's first warning failed its write, and it exited 120 before answering.
    said_on_stderr = _drained(proc.stderr)
    try:
        _exchange(proc, time.monotonic() + timeout)
        error = None
    except _NoAnswer as exc:
        error = str(exc)
    except TimeoutError:
        error = f"no answer within {timeout:g} s"
    except (EOFError, BrokenPipeError):
        error = ""  # it exited: its own last line says why
    finally:
        _stop(proc)
    stderr = said_on_stderr().decode("utf-8", "replace")
    if error == "":
        error = _last_line(stderr) or f"the server exited (code {proc.returncode}) before answering"
    said = _said(stderr) or {}
    return Checked(error is None, said.get("store"), said.get("found_by"), error, _since(started))


def _exchange(proc: subprocess.Popen, deadline: float) -> None:
    from .. import __version__

    lines = _lines(proc.stdout.fileno(), deadline)
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "memctl agent status", "version": __version__}}})
    _reply(lines, 1, "initialize")
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    tools = _reply(lines, 2, "tools/list").get("tools")
    if not isinstance(tools, list) or not tools:
        raise _NoAnswer("tools/list listed no tools")
    # memctl's server answers the two above early, while the SDK loads (mcp_fast.py); resources/list is
    # the SDK's own answer, so a server whose SDK cannot load is seen not to start.
    _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "resources/list", "params": {}})
    _reply(lines, 3, "resources/list")


def _send(proc: subprocess.Popen, message: dict[str, Any]) -> None:
    proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
    proc.stdin.flush()


def _reply(lines, number: int, method: str) -> dict[str, Any]:
    """The result of request `number`, skipping the server's notifications and requests."""
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            raise _NoAnswer(f"the server wrote something that is not JSON-RPC on stdout: {line[:80]!r}") from None
        if isinstance(message, dict) and message.get("id") == number and "method" not in message:
            if "error" in message:
                raise _NoAnswer(f"{method} failed: {(message['error'] or {}).get('message')}")
            return message.get("result") or {}
    raise EOFError


def _lines(fd: int, deadline: float):
    """The lines the server writes on stdout until `deadline` (then TimeoutError) or its end."""
    import select

    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", "replace")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk


STDERR_KEPT = 1 << 16  # bytes of a server's stderr kept at each end: its first line says which store it
# reached (hooks.say_checked), its last lines why it stopped


def _drained(stream) -> "Callable[[], bytes]":
    """Read `stream` to its end in a thread, keeping its first and last STDERR_KEPT bytes (a line between
    them where some were left out); the function returned waits for the end (the process has exited, or
    been killed, by then) and gives them."""
    import threading

    head, kept = bytearray(), bytearray()

    def read() -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):
            room = STDERR_KEPT - len(head)
            head.extend(chunk[:room])
            kept.extend(chunk[room:] if room > 0 else chunk)
            if len(kept) > STDERR_KEPT:
                del kept[:len(kept) - STDERR_KEPT]
                kept[:0] = b"\n...\n"
        stream.close()

    thread = threading.Thread(target=read, name="memctl-probe-stderr", daemon=True)
    thread.start()

    def result() -> bytes:
        thread.join(1)  # (a process it started may hold the pipe open: not waited for)
        return bytes(head + kept)

    return result


def _stop(proc: subprocess.Popen) -> None:
    """End of stdin ends a stdio server; one slow to go is killed (it was asked nothing that writes)."""
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


def _said(stderr: str) -> dict[str, Any] | None:
    """What the entry said under MEMCTL_AGENT_CHECK (its last such line), or None."""
    for line in reversed(stderr.splitlines()):
        if line.startswith(SAID):
            try:
                said = json.loads(line[len(SAID):])
            except ValueError:
                return None
            return said if isinstance(said, dict) else None
    return None


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith(SAID)]
    return lines[-1] if lines else ""


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)
